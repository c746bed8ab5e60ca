//! `policy generate`'s output: YAML for the objects, and the names it puts into `kubectl label`
//! argv, validated as Kubernetes validates them (docs/domain.md, "Policy generate").

use serde_json::Value;

/// A DNS-1123 subdomain (a node name, a label key's prefix): at most 253 characters of
/// lower-case letters, digits, `-` and `.`, starting and ending alphanumeric
/// (kubernetes/apimachinery `pkg/util/validation`, IsDNS1123Subdomain).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// A label name or value part: at most 63 characters of `[A-Za-z0-9_.-]`, starting and ending
/// alphanumeric (IsQualifiedName's name part, IsValidLabelValue; a value may be empty).
fn is_label_part(s: &str) -> bool {
    s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.bytes().next().is_none_or(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_none_or(|b| b.is_ascii_alphanumeric())
}

/// A label key: `[prefix/]name` (IsQualifiedName).
pub fn is_label_key(k: &str) -> bool {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    prefix.is_none_or(is_dns1123_subdomain) && !name.is_empty() && is_label_part(name)
}

/// A label value (IsValidLabelValue).
pub fn is_label_value(v: &str) -> bool {
    is_label_part(v)
}

/// An object name such as an NVIDIADriver's or a ConfigMap's (a DNS-1123 subdomain).
pub fn is_object_name(s: &str) -> bool {
    is_dns1123_subdomain(s)
}

/// A scalar in YAML: JSON's quoting is valid YAML, so every string is written quoted; numbers
/// and booleans as they are.
fn scalar(v: &Value) -> String {
    match v {
        // Plain when YAML 1.1 (kubectl) and 1.2 both read it back as this string: letters,
        // digits and `._/-` starting with a letter, and not a word YAML 1.1 reads as a bool.
        Value::String(s)
            if s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
                && s.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-')
                })
                && matches!(crate::yaml::resolve_plain(s), crate::yaml::Value::Str(_)) =>
        {
            s.clone()
        }
        Value::String(s) => serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// A key in YAML: plain when it is a plain identifier, else quoted.
fn key(k: &str) -> String {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
        && k.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
    {
        k.to_string()
    } else {
        scalar(&Value::String(k.to_string()))
    }
}

fn emit(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match v {
                    Value::Object(c) if !c.is_empty() => {
                        out.push_str(&format!("{pad}{}:\n", key(k)));
                        emit(v, indent + 2, out);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push_str(&format!("{pad}{}:\n", key(k)));
                        emit(v, indent, out);
                    }
                    Value::String(s) if s.contains('\n') && s.ends_with('\n') => {
                        out.push_str(&format!("{pad}{}: |\n", key(k)));
                        for l in s.lines() {
                            out.push_str(&format!("{pad}  {l}\n"));
                        }
                    }
                    Value::Object(_) => out.push_str(&format!("{pad}{}: {{}}\n", key(k))),
                    Value::Array(_) => out.push_str(&format!("{pad}{}: []\n", key(k))),
                    _ => out.push_str(&format!("{pad}{}: {}\n", key(k), scalar(v))),
                }
            }
        }
        Value::Array(a) => {
            for item in a {
                let mut inner = String::new();
                emit(item, indent + 2, &mut inner);
                let inner = inner.trim_start();
                out.push_str(&format!("{pad}- {inner}"));
                if !inner.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

/// `v` as a YAML document body (block style).
pub fn yaml(v: &Value) -> String {
    let mut out = String::new();
    emit(v, 0, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_as_kubernetes_validates_them() {
        assert!(is_dns1123_subdomain("gpu-node-01.example.com"));
        assert!(!is_dns1123_subdomain("--overwrite"));
        assert!(!is_dns1123_subdomain("Node1"));
        assert!(!is_dns1123_subdomain("a;rm -rf /"));
        assert!(!is_dns1123_subdomain(""));
        assert!(is_label_key("nvidia.com/gpu-driver-upgrade.skip"));
        assert!(is_label_key("gpufleet/driver-pool"));
        assert!(!is_label_key("-x"));
        assert!(!is_label_key("a/b/c"));
        assert!(is_label_value("ada-lovelace"));
        assert!(is_label_value(""));
        assert!(!is_label_value("a b"));
    }

    #[test]
    fn yaml_round_trips_through_the_parser() {
        let v = serde_json::json!({
            "apiVersion": "nvidia.com/v1alpha1",
            "metadata": {"name": "x", "labels": {"a/b": "1"}},
            "spec": {"n": 1, "b": true, "s": "yes", "e": {}, "l": [{"k": "v", "w": 2}, "x"],
                     "text": "A=1\nB=2\n", "v": "595.91.07", "o": "on", "i": "10", "p": "nvcr.io/nvidia",
                     "t": "true", "q": "a: b", "z": "0x10"},
        });
        let text = yaml(&v);
        let back = crate::yaml::parse_stream(&text).expect("yaml")[0].to_json();
        assert_eq!(back, v, "{text}");
    }
}
