//! `Include` directives of an ssh_config, checked before `ssh2-config` reads them: the crate
//! opens an included file and reads it line by line with no limit, so `Include /dev/zero` would
//! exhaust memory inside it. Every file an `Include` reaches (nested includes too) must be a
//! regular file within the ssh_config cap (docs/architecture.md, "Size caps").
//!
//! Paths resolve as ssh2-config 0.9 resolves them (its `resolve_include_path`): absolute as
//! given, `~` and `~/…` under the home, `~user/…` as given, anything else under `~/.ssh/`; each
//! is a glob pattern. Arguments are split as the crate splits them (whitespace, `"…"` spans);
//! a quoted argument is checked both with and without its quotes, so a difference in unquoting
//! can only make this check look at more files, never fewer.

use std::path::{Path, PathBuf};

use crate::limits::Kind;

/// How deeply includes may nest (OpenSSH's own limit is 16).
const MAX_DEPTH: usize = 16;

/// The home that `~` and relative `Include` paths resolve against: ssh2-config's default
/// (`dirs::home_dir`, i.e. `$HOME`, else the password database), which [`super::parse_lines`]
/// also hands the crate explicitly.
pub(super) fn home() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf())
}

/// Checks every file that `text` (the config `file`) includes, recursively. Errors, each one
/// line naming the config, its line and the file: a match that is not a regular file, one over
/// the ssh_config cap or unreadable, includes nested deeper than 16 (raw text: the caller
/// escapes it). Cycles and arguments the crate refuses are left to the crate's own error.
pub(super) fn check(text: &str, file: &Path, home: Option<&Path>) -> Result<(), String> {
    walk(text, file, home, &mut Vec::new())
}

fn walk(
    text: &str,
    file: &Path,
    home: Option<&Path>,
    stack: &mut Vec<PathBuf>,
) -> Result<(), String> {
    for (i, line) in text.lines().enumerate() {
        let Some((shown, args)) = include_args(line) else {
            continue;
        };
        let at = |m: String| format!("{}:{}: Include {shown}: {m}", file.display(), i + 1);
        for arg in args {
            let Some(pattern) = resolve(&arg, home) else {
                continue;
            };
            let Ok(paths) = glob::glob(&pattern) else {
                continue;
            };
            for p in paths.flatten() {
                let shown_p = p.display().to_string();
                let meta = std::fs::metadata(&p).map_err(|e| at(format!("{shown_p}: {e}")))?;
                if !meta.is_file() {
                    return Err(at(format!(
                        "{shown_p} is not a regular file; include ssh_config files only"
                    )));
                }
                if meta.len() > Kind::SshConfig.cap() {
                    return Err(at(format!("{shown_p}: {}", Kind::SshConfig.too_large())));
                }
                let Ok(canonical) = p.canonicalize() else {
                    continue;
                };
                if stack.contains(&canonical) {
                    continue;
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(at(format!("includes nested deeper than {MAX_DEPTH}")));
                }
                let inner = crate::limits::read_to_string(&p, Kind::SshConfig)
                    .map_err(|e| at(format!("{shown_p}: {e}")))?;
                stack.push(canonical);
                walk(&inner, &p, home, stack)?;
                stack.pop();
            }
        }
    }
    Ok(())
}

/// The arguments of an `Include` line (as written, for messages, and each to check), or `None`
/// for any other line. The keyword is case-insensitive and ends at whitespace or `=`; `#`
/// outside quotes starts a comment.
fn include_args(line: &str) -> Option<(String, Vec<String>)> {
    let mut in_quotes = false;
    let end = line
        .char_indices()
        .find(|&(_, c)| {
            if c == '"' {
                in_quotes = !in_quotes;
            }
            c == '#' && !in_quotes
        })
        .map_or(line.len(), |(i, _)| i);
    let line = line[..end].trim();
    let split = line.find(|c: char| c.is_whitespace() || c == '=')?;
    if !line[..split].eq_ignore_ascii_case("include") {
        return None;
    }
    let rest = line[split..]
        .trim_start_matches(|c: char| c.is_whitespace() || c == '=')
        .trim();
    let mut out = Vec::new();
    for token in split_quoted(rest) {
        if token.len() >= 2 && token.starts_with('"') && token.ends_with('"') {
            out.push(unescape(&token[1..token.len() - 1]));
        }
        out.push(token);
    }
    Some((rest.to_string(), out))
}

/// Whitespace-separated tokens, a `"…"` span (with `\`-escapes) kept in one token with its
/// quotes.
fn split_quoted(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if quoted {
            cur.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            } else if c == '"' {
                quoted = false;
            }
        } else if c.is_whitespace() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            quoted = c == '"';
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `\"`, `\\` and `\'` unescaped; any other backslash kept.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some(&n)) if matches!(n, '"' | '\\' | '\'') => {
                out.push(n);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// The glob pattern of an `Include` argument, or `None` where the crate refuses it (a home
/// path without a home).
fn resolve(arg: &str, home: Option<&Path>) -> Option<String> {
    let escaped = |h: &Path| glob::Pattern::escape(&h.display().to_string());
    if arg.starts_with('/') {
        return Some(arg.to_string());
    }
    if let Some(rest) = arg.strip_prefix('~') {
        if rest.is_empty() {
            return Some(escaped(home?));
        }
        if rest.starts_with('/') {
            let rest = rest.trim_start_matches('/');
            let h = PathBuf::from(escaped(home?));
            return Some(
                if rest.is_empty() { h } else { h.join(rest) }
                    .display()
                    .to_string(),
            );
        }
        return Some(arg.to_string());
    }
    Some(
        PathBuf::from(escaped(home?))
            .join(".ssh")
            .join(arg)
            .display()
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_lines_split_as_the_crate_splits_them() {
        assert_eq!(include_args("Host a"), None);
        assert_eq!(include_args("# Include x"), None);
        let (shown, a) = include_args("  include=a  \"b c\" # d").unwrap();
        assert_eq!(shown, "a  \"b c\"");
        assert_eq!(a, ["a", "b c", "\"b c\""]);
        let (_, a) = include_args("INCLUDE \"x\\\"y\"").unwrap();
        assert_eq!(a, ["x\"y", "\"x\\\"y\""]);
        let h = Some(Path::new("/home/o[1]"));
        assert_eq!(resolve("/etc/x", h).unwrap(), "/etc/x");
        assert_eq!(resolve("~/c.d/*", h).unwrap(), "/home/o[[]1[]]/c.d/*");
        assert_eq!(resolve("~", h).unwrap(), "/home/o[[]1[]]");
        assert_eq!(resolve("~bob/x", h).unwrap(), "~bob/x");
        assert_eq!(resolve("x.conf", h).unwrap(), "/home/o[[]1[]]/.ssh/x.conf");
        assert_eq!(resolve("x.conf", None), None);
    }
}
