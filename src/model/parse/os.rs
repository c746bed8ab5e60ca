//! `/etc/os-release` (os-release(5)): `KEY=value` lines, values optionally quoted.

/// The `PRETTY_NAME`, else `NAME VERSION`, else `None`.
pub fn pretty_name(text: &str) -> Option<String> {
    let get = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.trim().split_once('=')?;
            (k == key).then(|| unquote(v))
        })
    };
    get("PRETTY_NAME").filter(|s| !s.is_empty()).or_else(|| {
        let name = get("NAME")?;
        Some(match get("VERSION") {
            Some(v) => format!("{name} {v}"),
            None => name,
        })
    })
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    let inner = v
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(v);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ubuntu_and_fallbacks() {
        assert_eq!(
            pretty_name("NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\n").as_deref(),
            Some("Ubuntu 24.04.3 LTS")
        );
        assert_eq!(
            pretty_name("NAME=Debian\nVERSION='12'\n").as_deref(),
            Some("Debian 12")
        );
        assert_eq!(
            pretty_name("PRETTY_NAME=\"a \\\"b\\\"\"\n").as_deref(),
            Some("a \"b\"")
        );
        assert_eq!(pretty_name("garbage"), None);
    }
}
