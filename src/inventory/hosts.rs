//! A plain host list (`-i -` on stdin, or `--inventory-format hosts`): one `[user@]host[:port]`
//! per line, `#` starts a comment, blank lines are skipped. IPv6 addresses are written
//! `[2001:db8::1]:22` (or bare, without a port). ClusterShell ranges expand (`gpu[01-04]`). The
//! node's name is the host, with `:port` when a port is given (so two ports of one host are two
//! nodes).

use std::path::Path;

use super::source::NodeSpec;
use super::{InventoryError, Origin, range};

/// The most bytes a host list line may have, its comment included (a host name is 253 at most).
pub const MAX_LINE: usize = 4096;

/// The nodes of a host list. Errors: `file:line: message` for an empty user or host, a port that
/// is not 1–65535, a line with more than one word, a bad range, a line over [`MAX_LINE`] bytes.
pub fn parse(text: &str, path: &Path) -> Result<Vec<NodeSpec>, InventoryError> {
    let file = path.display().to_string();
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let at = |m: String| InventoryError(format!("{file}:{line}: {m}"));
        if raw.len() > MAX_LINE {
            return Err(at(format!(
                "longer than {MAX_LINE} bytes (the limit for a host list line); is this a host list?"
            )));
        }
        let entry = raw.split('#').next().unwrap_or("").trim();
        if entry.is_empty() {
            continue;
        }
        if entry.split_whitespace().count() > 1 {
            return Err(at(format!(
                "{entry:?}: one `[user@]host[:port]` per line (an Ansible INI inventory? say --inventory-format ansible-ini)"
            )));
        }
        let (user, rest) = match entry.rsplit_once('@') {
            Some(("", _)) => return Err(at(format!("{entry:?}: empty user"))),
            Some((u, r)) => (Some(u.to_string()), r),
            None => (None, entry),
        };
        let (host, port) = split_host_port(rest).map_err(|m| at(format!("{entry:?}: {m}")))?;
        let hosts = if host.contains(':') {
            vec![host.to_string()]
        } else {
            range::expand(host).map_err(at)?
        };
        for h in hosts {
            let name = match port {
                Some(p) if h.contains(':') => format!("[{h}]:{p}"),
                Some(p) => format!("{h}:{p}"),
                None => h.clone(),
            };
            out.push(NodeSpec {
                name,
                host: Some(h),
                port,
                user: user.clone(),
                origin: Some(Origin {
                    source: file.clone(),
                    line: Some(line),
                    item: None,
                }),
                ..Default::default()
            });
        }
    }
    Ok(out)
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`, or a bare IPv6 address (two colons or more).
pub(crate) fn split_host_port(s: &str) -> Result<(&str, Option<u16>), String> {
    let port = |p: &str| match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("port `{p}` is not 1-65535")),
        Ok(n) => Ok(n),
    };
    if let Some(v6) = s.strip_prefix('[')
        && let Some((addr, tail)) = v6.split_once(']')
        && addr.contains(':')
    {
        return match tail {
            "" => Ok((addr, None)),
            t => match t.strip_prefix(':') {
                Some(p) => Ok((addr, Some(port(p)?))),
                None => Err(format!("unexpected {t:?} after the address")),
            },
        };
    }
    let (host, p) = match s.matches(':').count() {
        0 => (s, None),
        1 => {
            let (h, p) = s.split_once(':').unwrap_or((s, ""));
            (h, Some(port(p)?))
        }
        _ => (s, None),
    };
    if host.is_empty() {
        return Err("empty host".into());
    }
    Ok((host, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_ports_ipv6_ranges_and_comments() {
        let text = "# fleet\ngpu01\nops@gpu02:2222  # rack 2\n\n[2001:db8::1]:2200\nfe80::1\nroot@n[1-2]\n";
        let n = parse(text, Path::new("<stdin>")).unwrap();
        type Row = (String, Option<String>, Option<u16>, Option<String>, String);
        let got: Vec<Row> = n
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    s.host.clone(),
                    s.port,
                    s.user.clone(),
                    s.origin.as_ref().unwrap().to_string(),
                )
            })
            .collect();
        let o = |l: usize| format!("<stdin>:{l}");
        assert_eq!(
            got,
            vec![
                ("gpu01".into(), Some("gpu01".into()), None, None, o(2)),
                (
                    "gpu02:2222".into(),
                    Some("gpu02".into()),
                    Some(2222),
                    Some("ops".into()),
                    o(3)
                ),
                (
                    "[2001:db8::1]:2200".into(),
                    Some("2001:db8::1".into()),
                    Some(2200),
                    None,
                    o(5)
                ),
                ("fe80::1".into(), Some("fe80::1".into()), None, None, o(6)),
                (
                    "n1".into(),
                    Some("n1".into()),
                    None,
                    Some("root".into()),
                    o(7)
                ),
                (
                    "n2".into(),
                    Some("n2".into()),
                    None,
                    Some("root".into()),
                    o(7)
                ),
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        let e = |t: &str| parse(t, Path::new("h")).unwrap_err().0;
        assert_eq!(e("a\nb:0\n"), "h:2: \"b:0\": port `0` is not 1-65535");
        assert!(e("a b\n").starts_with("h:1: \"a b\": one `[user@]host[:port]` per line"));
        assert_eq!(e("@x\n"), "h:1: \"@x\": empty user");
        assert!(e("g[1-\n").starts_with("h:1: "));
        assert_eq!(e(":22\n"), "h:1: \":22\": empty host");
    }
}
