//! Ansible host patterns of an inventory: ranges (`gpu[01:16]`, `x[0:10:2]`, `node[a:f]`),
//! `host:port`, IPv6 addresses (`[2001:db8::1]:2203`).

/// Expands Ansible's host ranges: `gpu[01:16]` (zero padding kept), `x[0:10:2]`, `node[a:f]`;
/// several brackets vary leftmost slowest. A name without `[` is itself.
pub fn expand_range(pattern: &str) -> Result<Vec<String>, String> {
    let Some(open) = pattern.find('[') else {
        return Ok(vec![pattern.to_string()]);
    };
    let close = pattern[open..]
        .find(']')
        .map(|i| open + i)
        .ok_or_else(|| format!("`[` not closed in {pattern:?}"))?;
    let inner = &pattern[open + 1..close];
    let parts: Vec<&str> = inner.split(':').collect();
    let (a, b, step) = match parts.as_slice() {
        [a, b] => (*a, *b, 1usize),
        [a, b, s] => (
            *a,
            *b,
            s.parse::<usize>()
                .ok()
                .filter(|s| *s > 0)
                .ok_or_else(|| format!("stride `{s}` in {pattern:?} is not a positive number"))?,
        ),
        _ => {
            return Err(format!(
                "`[{inner}]` in {pattern:?} is not a range like [01:16]"
            ));
        }
    };
    let items: Vec<String> = if let (Ok(x), Ok(y)) = (a.parse::<u64>(), b.parse::<u64>()) {
        if x > y {
            return Err(format!("range [{inner}] in {pattern:?} runs backwards"));
        }
        let width = if a.starts_with('0') { a.len() } else { 0 };
        if (y - x) / step as u64 > crate::inventory::range::MAX_EXPANSION as u64 {
            return Err(format!("{pattern:?} expands to too many names"));
        }
        (x..=y)
            .step_by(step)
            .map(|n| format!("{n:0width$}"))
            .collect()
    } else if a.len() == 1 && b.len() == 1 && a <= b {
        let (x, y) = (a.as_bytes()[0], b.as_bytes()[0]);
        if !(x.is_ascii_alphabetic() && y.is_ascii_alphabetic()) {
            return Err(format!(
                "`[{inner}]` in {pattern:?} is not a range like [a:f]"
            ));
        }
        (x..=y)
            .step_by(step)
            .map(|c| (c as char).to_string())
            .collect()
    } else {
        return Err(format!(
            "`[{inner}]` in {pattern:?} is not a range like [01:16] or [a:f]"
        ));
    };
    let rest = expand_range(&pattern[close + 1..])?;
    if items.len().saturating_mul(rest.len()) > crate::inventory::range::MAX_EXPANSION {
        return Err(format!("{pattern:?} expands to too many names"));
    }
    let prefix = &pattern[..open];
    Ok(items
        .iter()
        .flat_map(|i| rest.iter().map(move |r| format!("{prefix}{i}{r}")))
        .collect())
}

/// A host pattern of an INI line or a YAML key: `host`, `host:port`, `gpu[01:04]:2222`, an
/// IPv6 address. Returns the names and the port.
pub(super) fn host_pattern(p: &str) -> Result<(Vec<String>, Option<u16>), String> {
    if p.matches(':').count() >= 2 && !p.contains('[') {
        return Ok((vec![p.to_string()], None));
    }
    // `[2001:db8::1]` and `[2001:db8::1]:2203`: an IPv6 address, with a port (Ansible's
    // parse_address), never a range.
    if let Some(inner) = p.strip_prefix('[')
        && let Some((addr, tail)) = inner.split_once(']')
        && addr.contains(':')
        && addr.parse::<std::net::Ipv6Addr>().is_ok()
    {
        let port = match tail.strip_prefix(':') {
            None if tail.is_empty() => None,
            Some(port) => Some(
                port.parse::<u16>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("port `{port}` in {p:?} is not 1-65535"))?,
            ),
            None => return Err(format!("{p:?}: text after `]`")),
        };
        return Ok((vec![addr.to_string()], port));
    }
    // A `:port` suffix outside brackets.
    let mut depth = 0i32;
    let mut colon = None;
    for (i, c) in p.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ':' if depth == 0 => colon = Some(i),
            _ => {}
        }
    }
    let (name, port) = match colon {
        Some(i) => {
            let port = &p[i + 1..];
            let n = port
                .parse::<u16>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("port `{port}` in {p:?} is not 1-65535"))?;
            (&p[..i], Some(n))
        }
        None => (p, None),
    };
    if name.is_empty() {
        return Err(format!("{p:?}: empty host"));
    }
    Ok((expand_range(name)?, port))
}
