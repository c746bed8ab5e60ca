//! ClusterShell-style node ranges: `gpu[001-128]`, `node[1,3,5]`, `node[1-3,7]`,
//! `rack[1-2]-node[1-3]` (cartesian product, leftmost bracket varies slowest). Zero padding is
//! kept from the range's first number (`[001-128]` gives `001` … `128`).

/// Most names one pattern may expand to, so a typo like `[1-10000000]` fails fast.
pub const MAX_EXPANSION: usize = 100_000;

/// Expands `pattern`; a pattern without brackets expands to itself. Errors say what is wrong
/// and where (byte offset into the pattern).
pub fn expand(pattern: &str) -> Result<Vec<String>, String> {
    let Some(open) = pattern.find('[') else {
        if pattern.contains(']') {
            return Err(format!("`]` without `[` in {pattern:?}"));
        }
        return Ok(vec![pattern.to_string()]);
    };
    let close = pattern[open..]
        .find(']')
        .map(|i| open + i)
        .ok_or_else(|| format!("`[` at {open} is not closed in {pattern:?}"))?;
    let prefix = &pattern[..open];
    if prefix.contains(']') {
        return Err(format!("`]` without `[` in {pattern:?}"));
    }
    let items = parse_set(&pattern[open + 1..close]).map_err(|e| format!("{e} in {pattern:?}"))?;
    let rest = expand(&pattern[close + 1..])?;
    let total = items.len().saturating_mul(rest.len());
    if total > MAX_EXPANSION {
        return Err(format!(
            "{pattern:?} expands to {total} names (at most {MAX_EXPANSION})"
        ));
    }
    let mut out = Vec::with_capacity(total);
    for item in &items {
        for r in &rest {
            out.push(format!("{prefix}{item}{r}"));
        }
    }
    Ok(out)
}

fn parse_set(inner: &str) -> Result<Vec<String>, String> {
    if inner.is_empty() {
        return Err("empty `[]`".into());
    }
    let mut out = Vec::new();
    for part in inner.split(',') {
        let part = part.trim();
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let bad = |s: &str| s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit());
        if bad(a) || bad(b) {
            return Err(format!(
                "`{part}` is not a number or a range like 1-8 (brackets hold a node range as in \
                 Slurm and ClusterShell, not a glob character class)"
            ));
        }
        let width = if a.len() > 1 && a.starts_with('0') {
            a.len()
        } else {
            0
        };
        let (lo, hi): (u64, u64) = (
            a.parse().map_err(|_| format!("`{a}` is too large"))?,
            b.parse().map_err(|_| format!("`{b}` is too large"))?,
        );
        if lo > hi {
            return Err(format!("range `{part}` runs backwards"));
        }
        if (hi - lo) as usize >= MAX_EXPANSION {
            return Err(format!("range `{part}` is larger than {MAX_EXPANSION}"));
        }
        for n in lo..=hi {
            out.push(format!("{n:0width$}"));
        }
    }
    Ok(out)
}

/// Whether `pattern` has a range in it.
pub fn has_range(pattern: &str) -> bool {
    pattern.contains('[')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_ranges_lists_and_products() {
        let v = expand("gpu[001-128]").unwrap();
        assert_eq!(v.len(), 128);
        assert_eq!(v[0], "gpu001");
        assert_eq!(v[127], "gpu128");
        assert_eq!(expand("node[1,3,5]").unwrap(), ["node1", "node3", "node5"]);
        assert_eq!(expand("n[1-2,7]").unwrap(), ["n1", "n2", "n7"]);
        assert_eq!(
            expand("rack[1-2]-node[1-2]").unwrap(),
            ["rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"]
        );
        assert_eq!(expand("10.0.0.[8-9]").unwrap(), ["10.0.0.8", "10.0.0.9"]);
        assert_eq!(expand("plain").unwrap(), ["plain"]);
        assert_eq!(expand("n[08-10]").unwrap(), ["n08", "n09", "n10"]);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert!(expand("gpu[1-").unwrap_err().contains("not closed"));
        assert!(expand("gpu[]").unwrap_err().contains("empty"));
        assert!(expand("gpu[a-b]").unwrap_err().contains("not a number"));
        assert!(expand("gpu[5-1]").unwrap_err().contains("backwards"));
        assert!(expand("gpu1]").unwrap_err().contains("without"));
        assert!(
            expand("a[1-1000]b[1-1000]")
                .unwrap_err()
                .contains("at most")
        );
        assert!(expand("a[1-99999999999999999999]").is_err());
    }
}
