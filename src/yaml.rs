//! YAML documents as Kubernetes reads them, with the line of every value (docs/domain.md,
//! "Policy check"). A shared leaf (it imports nothing of the crate): the policy checks and the
//! Ansible YAML inventory read YAML with it.
//!
//! Parsing is saphyr-parser's (a YAML 1.2 event parser that gives each event its span); the tree
//! is built here so that every key and value keeps its line, and plain scalars are resolved the
//! way `kubectl` and the API server's YAML reader do (`sigs.k8s.io/yaml`, which uses go-yaml v2:
//! YAML 1.1 rules). The difference matters for file modes: YAML 1.1 reads `0644` as the octal
//! integer 420, YAML 1.2 as 644. Resolution of a plain scalar:
//! - `~`, `null`, `Null`, `NULL` or empty → null;
//! - `y Y yes Yes YES on On ON true True TRUE` → true, `n N no No NO off Off OFF false False
//!   FALSE` → false;
//! - integers: decimal, `0x` hex, `0o` or a leading `0` octal, `0b` binary (`_` allowed);
//! - floats (`1.5`, `1e3`, `.inf`, `.nan`);
//! - anything else, and every quoted or block scalar, a string (`!!str` forces a string).
//!
//! JSON is YAML too: `kubectl get -o json` output is read with the same code. Aliases are
//! expanded (bounded: [`MAX_NODES`] values per stream, a string counting one value per 64
//! bytes, against alias bombs of many values or of one big string).

use std::borrow::Cow;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

/// At most this many values (after alias expansion) in one stream.
pub const MAX_NODES: usize = 1_000_000;
/// At most this many nested collections (the tree is walked recursively).
pub const MAX_DEPTH: usize = 128;

/// One value with the lines it spans (1-based).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    /// Line where the value starts (for a block scalar: the line of `|` or `>`).
    pub line: usize,
    /// Last line of the value (for a block scalar: its last content line).
    pub end_line: usize,
    /// The scalar's text as written (after unquoting), `None` for collections.
    pub raw: Option<String>,
    /// The scalar's style.
    pub style: Style,
}

/// How a scalar was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A plain scalar, or a collection.
    Plain,
    /// Single- or double-quoted.
    Quoted,
    /// `|` literal block: content line `i` is on `line + 1 + i`.
    Literal,
    /// `>` folded block.
    Folded,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Keys in document order.
    Map(Vec<(Key, Node)>),
}

/// A mapping key (always read as text; a non-scalar key is written as `?`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub name: String,
    pub line: usize,
}

/// A YAML syntax error: 1-based line and column, and the parser's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct YamlError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl Node {
    /// The value under `key` when this is a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(m) => m.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The key and value under `key` when this is a mapping.
    pub fn entry(&self, key: &str) -> Option<(&Key, &Node)> {
        match &self.value {
            Value::Map(m) => m.iter().find(|(k, _)| k.name == key).map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    /// The value at a dotted path of mapping keys (`spec.driver.version`).
    pub fn at(&self, path: &str) -> Option<&Node> {
        path.split('.').try_fold(self, |n, k| n.get(k))
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.value {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_seq(&self) -> &[Node] {
        match &self.value {
            Value::Seq(s) => s,
            _ => &[],
        }
    }

    /// The value as text for messages: a scalar as written, a collection as `{…}` / `[…]`.
    pub fn display(&self) -> String {
        match (&self.raw, &self.value) {
            (Some(r), _) => r.clone(),
            (None, Value::Seq(_)) => "[…]".into(),
            (None, _) => "{…}".into(),
        }
    }

    /// The JSON value this node stands for (the API server's view of it).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::Str(s) => J::String(s.clone()),
            Value::Seq(s) => J::Array(s.iter().map(Node::to_json).collect()),
            Value::Map(m) => J::Object(
                m.iter()
                    .map(|(k, v)| (k.name.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// A node (every line 0) for a JSON value: to validate values that were computed, not read.
    pub fn from_json(v: &serde_json::Value) -> Node {
        use serde_json::Value as J;
        let value = match v {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            J::String(s) => Value::Str(s.clone()),
            J::Array(a) => Value::Seq(a.iter().map(Node::from_json).collect()),
            J::Object(o) => Value::Map(
                o.iter()
                    .map(|(k, v)| {
                        (
                            Key {
                                name: k.clone(),
                                line: 0,
                            },
                            Node::from_json(v),
                        )
                    })
                    .collect(),
            ),
        };
        let raw = match v {
            J::String(s) => Some(s.clone()),
            J::Array(_) | J::Object(_) => None,
            other => Some(other.to_string()),
        };
        Node {
            value,
            line: 0,
            end_line: 0,
            raw,
            style: Style::Plain,
        }
    }
}

/// Every document of a YAML stream, in order (an empty document is skipped).
pub fn parse_stream(text: &str) -> Result<Vec<Node>, YamlError> {
    let mut b = Builder {
        stack: Vec::new(),
        anchors: Vec::new(),
        docs: Vec::new(),
        count: 0,
        aliased: 0,
    };
    for item in Parser::new_from_str(text) {
        let (ev, span) = item.map_err(|e| YamlError {
            line: e.marker().line(),
            col: e.marker().col() + 1,
            message: e.info().to_string(),
        })?;
        b.event(ev, span)?;
    }
    Ok(b.docs)
}

enum Frame {
    Seq(Node, usize),
    Map(Node, usize, Option<Key>),
}

struct Builder {
    stack: Vec<Frame>,
    /// Anchored nodes by anchor id (ids start at 1), with their weight.
    anchors: Vec<(usize, Node, usize)>,
    docs: Vec<Node>,
    count: usize,
    /// How many of them came from aliases (for the refusal's words).
    aliased: usize,
}

/// Bytes that count as one value: a long string weighs as many values as it has such chunks,
/// so a big scalar aliased many times is refused like many values are (a 200 KB string aliased
/// 100,000 times would be 20 GB).
const BYTES_PER_VALUE: usize = 64;

fn weight(n: &Node) -> usize {
    1 + match &n.value {
        Value::Seq(s) => s.iter().map(weight).sum(),
        Value::Map(m) => m.iter().map(|(_, v)| 1 + weight(v)).sum(),
        Value::Str(t) => t.len() / BYTES_PER_VALUE,
        _ => 0,
    }
}

impl Builder {
    fn event(&mut self, ev: Event<'_>, span: Span) -> Result<(), YamlError> {
        let line = span.start.line();
        let err = |message: String| YamlError {
            line,
            col: span.start.col() + 1,
            message,
        };
        match ev {
            Event::Scalar(text, style, anchor, tag) => {
                let node = scalar(text, style, tag.as_deref(), span);
                let w = weight(&node);
                self.push(node, anchor, w).map_err(err)?;
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if self.stack.len() >= MAX_DEPTH => {
                return Err(err(format!(
                    "more than {MAX_DEPTH} nested collections: refused"
                )));
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Frame::Seq(
                Node {
                    value: Value::Seq(Vec::new()),
                    line,
                    end_line: line,
                    raw: None,
                    style: Style::Plain,
                },
                anchor,
            )),
            Event::MappingStart(anchor, _) => self.stack.push(Frame::Map(
                Node {
                    value: Value::Map(Vec::new()),
                    line,
                    end_line: line,
                    raw: None,
                    style: Style::Plain,
                },
                anchor,
                None,
            )),
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq(n, a)) | Some(Frame::Map(n, a, _)) => (n, a),
                    None => return Err(err("unbalanced collection".into())),
                };
                self.push(node, anchor, 1).map_err(err)?;
            }
            Event::Alias(id) => {
                let (node, w) = self
                    .anchors
                    .iter()
                    .rev()
                    .find(|(a, _, _)| *a == id)
                    .map(|(_, n, w)| (n, *w))
                    .ok_or_else(|| err("alias of an unknown anchor".into()))?;
                if self.count + w > MAX_NODES {
                    return Err(err(format!(
                        "more than {MAX_NODES} values (aliases expanded): refused"
                    )));
                }
                let node = node.clone();
                self.aliased += w;
                self.push(node, 0, w).map_err(err)?;
            }
            Event::DocumentStart(_) => self.anchors.clear(),
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
        Ok(())
    }

    /// Adds `node` to its parent; `w` is how many values it adds to the count (1, or an
    /// alias's whole weight).
    fn push(&mut self, node: Node, anchor: usize, w: usize) -> Result<(), String> {
        self.count += w;
        if self.count > MAX_NODES {
            // Said as aliases only when aliases added values: a plain big list is just big.
            return Err(if self.aliased > 0 {
                format!(
                    "more than {MAX_NODES} values (aliases expanded: {} of them from aliases): refused",
                    self.aliased
                )
            } else {
                format!("more than {MAX_NODES} values: refused")
            });
        }
        if anchor > 0 {
            self.anchors.push((anchor, node.clone(), weight(&node)));
        }
        let end = node.end_line;
        match self.stack.last_mut() {
            None => {
                if !matches!(node.value, Value::Null) {
                    self.docs.push(node);
                }
            }
            Some(Frame::Seq(parent, _)) => {
                parent.end_line = parent.end_line.max(end);
                if let Value::Seq(items) = &mut parent.value {
                    items.push(node);
                }
            }
            Some(Frame::Map(parent, _, pending)) => {
                parent.end_line = parent.end_line.max(end);
                match pending.take() {
                    None => {
                        *pending = Some(Key {
                            name: node.raw.clone().unwrap_or_else(|| "?".into()),
                            line: node.line,
                        });
                    }
                    Some(key) => {
                        if let Value::Map(entries) = &mut parent.value {
                            if entries.iter().any(|(k, _)| k.name == key.name) {
                                return Err(format!(
                                    "line {}: key `{}` is repeated (kubectl refuses the file)",
                                    key.line, key.name
                                ));
                            }
                            entries.push((key, node));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn scalar(text: Cow<'_, str>, style: ScalarStyle, tag: Option<&Tag>, span: Span) -> Node {
    // A block scalar's span starts at its first content line; its node starts at the `|`/`>`.
    let block = matches!(style, ScalarStyle::Literal | ScalarStyle::Folded);
    let line = span.start.line() - usize::from(block && span.start.line() > 1);
    let text = text.into_owned();
    let (style, value) = match style {
        ScalarStyle::Plain => {
            let forced_str = tag.is_some_and(|t| t.suffix == "str" || t.suffix.ends_with(":str"));
            let v = if forced_str {
                Value::Str(text.clone())
            } else {
                resolve_plain(&text)
            };
            (Style::Plain, v)
        }
        ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => {
            (Style::Quoted, Value::Str(text.clone()))
        }
        ScalarStyle::Literal => (Style::Literal, Value::Str(text.clone())),
        ScalarStyle::Folded => (Style::Folded, Value::Str(text.clone())),
    };
    let end_line = match style {
        Style::Literal | Style::Folded => {
            line + text.trim_end_matches('\n').matches('\n').count() + 1
        }
        _ => span.end.line().max(line),
    };
    Node {
        value,
        line,
        end_line,
        raw: Some(text),
        style,
    }
}

/// A plain scalar resolved as go-yaml v2 (YAML 1.1) does: see the module doc.
pub fn resolve_plain(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => {
            return Value::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False" | "FALSE" => {
            return Value::Bool(false);
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    if let Some(i) = parse_int(s) {
        return Value::Int(i);
    }
    let float_like = s
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-' | '_'))
        && s.chars().any(|c| c.is_ascii_digit());
    if float_like && let Ok(f) = s.replace('_', "").parse::<f64>() {
        return Value::Float(f);
    }
    Value::Str(s.to_string())
}

fn parse_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let body = body.replace('_', "");
    if body.is_empty() {
        return None;
    }
    let (radix, digits) = if let Some(h) = body.strip_prefix("0x") {
        (16, h)
    } else if let Some(b) = body.strip_prefix("0b") {
        (2, b)
    } else if let Some(o) = body.strip_prefix("0o") {
        (8, o)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = i64::from_str_radix(digits, radix).ok()?;
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalars_resolve_as_kubectl_reads_them() {
        assert_eq!(resolve_plain("0644"), Value::Int(0o644));
        assert_eq!(resolve_plain("420"), Value::Int(420));
        assert_eq!(resolve_plain("0x1F"), Value::Int(31));
        assert_eq!(resolve_plain("yes"), Value::Bool(true));
        assert_eq!(resolve_plain("Off"), Value::Bool(false));
        assert_eq!(resolve_plain("~"), Value::Null);
        assert_eq!(resolve_plain("1.5"), Value::Float(1.5));
        assert_eq!(resolve_plain("3.4.0"), Value::Str("3.4.0".into()));
        // Not octal, but go-yaml v2 then tries a float.
        assert_eq!(resolve_plain("0899"), Value::Float(899.0));
        assert_eq!(resolve_plain("560.35.03"), Value::Str("560.35.03".into()));
    }

    #[test]
    fn lines_of_keys_values_and_block_scalars() {
        let text = "a: 1\n---\nkind: X\nspec:\n  files:\n    - path: /p\n      inline: |\n        one\n        two\n";
        let docs = parse_stream(text).expect("parses");
        assert_eq!(docs.len(), 2);
        let d = &docs[1];
        assert_eq!(d.line, 3);
        let f = &d.at("spec.files").expect("files").as_seq()[0];
        assert_eq!(f.line, 6);
        let inline = f.get("inline").expect("inline");
        assert_eq!((inline.line, inline.end_line), (7, 9));
        assert_eq!(inline.style, Style::Literal);
        assert_eq!(f.entry("path").expect("path").0.line, 6);
        assert_eq!(d.end_line, 9);
    }

    #[test]
    fn quoted_strings_stay_strings_and_json_reads() {
        let docs = parse_stream("{\"v\": \"0644\", \"n\": 0644, \"b\": true}").expect("json");
        assert_eq!(docs[0].get("v").and_then(Node::as_str), Some("0644"));
        assert_eq!(
            docs[0].get("n").map(|n| n.value.clone()),
            Some(Value::Int(0o644))
        );
        assert_eq!(docs[0].get("b").and_then(Node::as_bool), Some(true));
    }

    #[test]
    fn errors_have_lines_and_bombs_are_refused() {
        let e = parse_stream("a: [1, 2\nb: 3\n").expect_err("unterminated");
        assert!(e.line >= 1, "{e}");
        let e = parse_stream("a: 1\na: 2\n").expect_err("repeated key");
        assert!(e.message.contains("repeated"), "{e}");
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let mut prev = 'a';
        for c in 'b'..='k' {
            bomb.push_str(&format!(
                "{c}: &{c} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            ));
            prev = c;
        }
        let e = parse_stream(&bomb).expect_err("alias bomb");
        assert!(e.message.contains("refused"), "{e}");
        assert!(e.message.contains("aliases expanded"), "{e}");
        // A plain list over the limit is refused without a word about aliases.
        let big = format!("[{}]", "1,".repeat(MAX_NODES + 1));
        let e = parse_stream(&big).expect_err("big list");
        assert!(
            e.message.contains("more than 1000000 values: refused"),
            "{e}"
        );
        assert!(!e.message.contains("alias"), "{e}");
        // One 200 KB string aliased 100,000 times (20 GB expanded): refused by its bytes.
        let mut strbomb = format!("s: &s {}\n", "x".repeat(200_000));
        let mut prev = "s".to_string();
        for i in 0..5 {
            let name = format!("l{i}");
            let refs = vec![format!("*{prev}"); 10].join(", ");
            strbomb.push_str(&format!("{name}: &{name} [{refs}]\n"));
            prev = name;
        }
        let e = parse_stream(&strbomb).expect_err("string bomb");
        assert!(e.message.contains("refused"), "{e}");
        let deep = "[".repeat(100_000);
        let e = parse_stream(&deep).expect_err("deep nesting");
        assert!(e.message.contains("refused") || e.line >= 1, "{e}");
    }
}
