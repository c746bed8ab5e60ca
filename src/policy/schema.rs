//! Structure checks against the real schemas committed under `schemas/` (schemas/README.md says
//! where each comes from; docs/domain.md, "Policy check").
//!
//! A subset of JSON Schema / OpenAPI v3, validated here rather than with a general JSON-schema
//! crate, because the two dialects differ where it matters and a Kubernetes CRD is not judged as
//! JSON Schema judges it:
//! - **CRD** (structural schema; a `required` field with a `default` is filled in before
//!   validation, so it is never missing, `apiextensions.k8s.io/v1`): a field not under `properties` is
//!   unknown (the API server drops it, `kubectl apply --validate=strict` refuses it) unless
//!   `additionalProperties` or `x-kubernetes-preserve-unknown-fields` allows it; `null` on a
//!   field without `nullable: true` is dropped before validation, not an error;
//!   `x-kubernetes-int-or-string` takes either. `metadata` at the root is the API server's
//!   ObjectMeta and is not looked into.
//! - **JSON Schema** (the Ignition config): `$ref` to `#/definitions/…`, `type` as a list
//!   (`["string", "null"]`), `allOf` (its branches' properties joined); a key not under
//!   `properties` is reported too (the Ignition schemas have no `additionalProperties`, and a
//!   key they do not define is not read).
//!
//! Keywords checked: `type`, `properties`, `additionalProperties` (bool or schema), `items`,
//! `required`, `enum`, `minimum`, `nullable`, `anyOf`, `allOf`, `$ref`, `x-kubernetes-int-or-string`,
//! `x-kubernetes-preserve-unknown-fields`. Not checked: `pattern`, `format`, lengths and the
//! CEL rules of `x-kubernetes-validations`.

use serde_json::Value as J;

use crate::yaml::{Node, Value};

/// How to read a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Crd,
    JsonSchema,
}

/// What is wrong with one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueKind {
    UnknownField,
    Type,
    Enum,
    Required,
    Minimum,
}

/// One structure problem: the line (of the key for an unknown field), the JSON path and a
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub kind: IssueKind,
    pub line: usize,
    pub path: String,
    pub message: String,
}

/// Validates `node` against `schema` (whose `$ref`s point into `root`). `path` is the JSON path
/// of `node` (empty at the document root).
pub fn validate(root: &J, schema: &J, node: &Node, dialect: Dialect, path: &str) -> Vec<Issue> {
    let mut out = Vec::new();
    walk(root, schema, node, node.line, dialect, path, 0, &mut out);
    out
}

/// One schema out of `schema` and its `allOf` branches (each resolved, nested `allOf` too):
/// their `properties` and `required` joined, the first `type` and other keywords kept. The
/// Ignition schemas build a file, directory and link entry this way (node + its own fields).
fn merge_all_of(root: &J, schema: &J, depth: usize) -> J {
    let mut out = serde_json::Map::new();
    let mut props = serde_json::Map::new();
    let mut required: Vec<J> = Vec::new();
    let mut parts: Vec<J> = vec![schema.clone()];
    if let Some(all) = schema.get("allOf").and_then(J::as_array) {
        for b in all {
            let b = resolve(root, b);
            parts.push(if depth < 8 && b.get("allOf").is_some() {
                merge_all_of(root, b, depth + 1)
            } else {
                b.clone()
            });
        }
    }
    for part in &parts {
        let Some(obj) = part.as_object() else {
            continue;
        };
        for (k, v) in obj {
            match k.as_str() {
                "allOf" => {}
                "properties" => {
                    for (name, s) in v.as_object().into_iter().flatten() {
                        props.entry(name.clone()).or_insert_with(|| s.clone());
                    }
                }
                "required" => required.extend(v.as_array().into_iter().flatten().cloned()),
                _ => {
                    out.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
    }
    if !props.is_empty() {
        out.insert("properties".into(), J::Object(props));
    }
    if !required.is_empty() {
        out.insert("required".into(), J::Array(required));
    }
    J::Object(out)
}

fn resolve<'a>(root: &'a J, mut schema: &'a J) -> &'a J {
    for _ in 0..32 {
        match schema
            .get("$ref")
            .and_then(J::as_str)
            .and_then(|r| r.strip_prefix('#'))
        {
            Some(ptr) => match root.pointer(ptr) {
                Some(s) => schema = s,
                None => return schema,
            },
            None => return schema,
        }
    }
    schema
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Int(_) => "integer",
        Value::Float(_) => "number",
        Value::Str(_) => "string",
        Value::Seq(_) => "array",
        Value::Map(_) => "object",
    }
}

fn type_ok(t: &str, v: &Value) -> bool {
    match (t, v) {
        ("number", Value::Int(_) | Value::Float(_)) => true,
        (t, v) => t == type_name(v),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `at` is the line findings about `node` point at: its key's line (a block value starts on the
/// line below its key).
#[allow(clippy::too_many_arguments)]
fn walk(
    root: &J,
    schema: &J,
    node: &Node,
    at: usize,
    dialect: Dialect,
    path: &str,
    depth: usize,
    out: &mut Vec<Issue>,
) {
    if depth > 64 {
        return;
    }
    let schema = resolve(root, schema);
    let merged;
    let schema = if schema.get("allOf").is_some() {
        merged = merge_all_of(root, schema, 0);
        &merged
    } else {
        schema
    };
    let line = at;
    let issue = |kind, message: String| Issue {
        kind,
        line,
        path: path.to_string(),
        message,
    };
    if matches!(node.value, Value::Null)
        && dialect == Dialect::Crd
        && schema.get("nullable").and_then(J::as_bool) != Some(true)
    {
        return; // pruned by the API server
    }
    if let Some(any) = schema.get("anyOf").and_then(J::as_array)
        && schema.get("x-kubernetes-int-or-string").is_none()
    {
        let fits = any
            .iter()
            .any(|s| validate(root, s, node, dialect, path).is_empty());
        if !fits {
            out.push(issue(
                IssueKind::Type,
                format!("`{}` fits none of the allowed forms", node.display()),
            ));
            return;
        }
    }
    // Type.
    let int_or_string = schema
        .get("x-kubernetes-int-or-string")
        .and_then(J::as_bool)
        == Some(true);
    let types: Vec<&str> = if int_or_string {
        vec!["integer", "string"]
    } else {
        match schema.get("type") {
            Some(J::String(t)) => vec![t.as_str()],
            Some(J::Array(a)) => a.iter().filter_map(J::as_str).collect(),
            _ => vec![],
        }
    };
    let nullable = schema.get("nullable").and_then(J::as_bool) == Some(true);
    let type_fits = types.is_empty()
        || types.iter().any(|t| type_ok(t, &node.value))
        || (nullable && matches!(node.value, Value::Null));
    if !type_fits {
        out.push(issue(
            IssueKind::Type,
            format!(
                "`{}` is {} where the schema wants {}",
                node.display(),
                a_type(type_name(&node.value)),
                types.join(" or ")
            ),
        ));
        return;
    }
    // Enum.
    if let Some(allowed) = schema.get("enum").and_then(J::as_array) {
        let v = node.to_json();
        if !allowed.contains(&v) {
            let list: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
            out.push(issue(
                IssueKind::Enum,
                format!("`{}` is not one of {}", node.display(), list.join(", ")),
            ));
        }
    }
    if let (Some(min), Value::Int(i)) = (schema.get("minimum").and_then(J::as_i64), &node.value)
        && *i < min
    {
        out.push(issue(
            IssueKind::Minimum,
            format!("{i} is below the minimum {min}"),
        ));
    }
    match &node.value {
        Value::Map(entries) => {
            if dialect == Dialect::Crd && path == "metadata" {
                return;
            }
            let props = schema.get("properties").and_then(J::as_object);
            let preserve = schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(J::as_bool)
                == Some(true);
            let additional = schema.get("additionalProperties");
            for (k, v) in entries {
                let sub = join(path, &k.name);
                if let Some(s) = props.and_then(|p| p.get(&k.name)) {
                    walk(root, s, v, k.line, dialect, &sub, depth + 1, out);
                    continue;
                }
                match additional {
                    Some(J::Object(_)) => {
                        if let Some(s) = additional {
                            walk(root, s, v, k.line, dialect, &sub, depth + 1, out);
                        }
                    }
                    Some(J::Bool(true)) => {}
                    _ if preserve => {}
                    // A schema with neither properties nor additionalProperties says nothing
                    // about its keys in JSON Schema.
                    None if props.is_none() && dialect == Dialect::JsonSchema => {}
                    _ => {
                        let names = props.map(|p| p.keys().map(String::as_str).collect::<Vec<_>>());
                        let hint = names
                            .and_then(|n| crate::diag::closest(&k.name, n))
                            .map(|s| format!("; did you mean `{s}`?"))
                            .unwrap_or_default();
                        out.push(Issue {
                            kind: IssueKind::UnknownField,
                            line: k.line,
                            path: sub,
                            message: format!("`{}` is not a field here{hint}", k.name),
                        });
                    }
                }
            }
            if let Some(req) = schema.get("required").and_then(J::as_array) {
                let missing: Vec<&str> = req
                    .iter()
                    .filter_map(J::as_str)
                    .filter(|r| node.get(r).is_none())
                    // The API server fills a field with a `default` before it validates.
                    .filter(|r| {
                        props
                            .and_then(|p| p.get(*r))
                            .is_none_or(|s| resolve(root, s).get("default").is_none())
                    })
                    .collect();
                if !missing.is_empty() {
                    out.push(issue(
                        IssueKind::Required,
                        format!("required: {}", missing.join(", ")),
                    ));
                }
            }
        }
        Value::Seq(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(
                        root,
                        s,
                        item,
                        item.line,
                        dialect,
                        &format!("{path}[{i}]"),
                        depth + 1,
                        out,
                    );
                }
            }
        }
        _ => {}
    }
}

fn a_type(t: &str) -> String {
    match t {
        "integer" | "object" | "array" => format!("an {t}"),
        "null" => "null".into(),
        t => format!("a {t}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_stream;

    fn check(schema: &str, doc: &str, dialect: Dialect) -> Vec<Issue> {
        let schema: J = serde_json::from_str(schema).expect("schema");
        let node = &parse_stream(doc).expect("doc")[0];
        validate(&schema, &schema, node, dialect, "")
    }

    const S: &str = r##"{"type":"object","required":["a"],"properties":{
        "a":{"type":"string","enum":["x","y"]},
        "n":{"type":"integer","minimum":0},
        "io":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]},
        "free":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
        "m":{"type":"object","additionalProperties":{"type":"boolean"}},
        "l":{"type":"array","items":{"$ref":"#/definitions/i"}}},
        "definitions":{"i":{"type":["integer","null"]}}}"##;

    #[test]
    fn clean_document_has_no_issue() {
        let d = "a: x\nn: 3\nio: 25%\nfree: {any: [1]}\nm: {k: true}\nl: [1, 2]\n";
        assert_eq!(check(S, d, Dialect::Crd), vec![]);
    }

    #[test]
    fn each_kind_of_issue_with_its_line() {
        let d = "a: z\nn: -1\nm: {k: 3}\nl: [\"s\"]\ntypo: 1\n";
        let got = check(S, d, Dialect::Crd);
        let kinds: Vec<(IssueKind, usize, &str)> = got
            .iter()
            .map(|i| (i.kind, i.line, i.path.as_str()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (IssueKind::Enum, 1, "a"),
                (IssueKind::Minimum, 2, "n"),
                (IssueKind::Type, 3, "m.k"),
                (IssueKind::Type, 4, "l[0]"),
                (IssueKind::UnknownField, 5, "typo"),
            ]
        );
        let missing = check(S, "n: 1\n", Dialect::Crd);
        assert_eq!(missing[0].kind, IssueKind::Required);
        assert!(missing[0].message.contains('a'));
    }

    #[test]
    fn null_is_pruned_in_a_crd_but_typed_in_json_schema() {
        assert_eq!(check(S, "a: x\nn: ~\n", Dialect::Crd), vec![]);
        assert_eq!(check(S, "a: x\nn: ~\n", Dialect::JsonSchema).len(), 1);
        assert_eq!(check(S, "a: x\nl: [~]\n", Dialect::JsonSchema), vec![]);
    }
}
