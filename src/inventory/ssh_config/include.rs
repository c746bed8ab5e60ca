//! Reading an ssh_config into [`Item`]s, `Include`d files in place (each file read once here,
//! bounded: a regular file within the ssh_config cap, nested at most 16 deep, docs/architecture.md
//! "Size caps"). Every line is checked as OpenSSH 9.2 checks it whether or not its block
//! applies: a missing argument, an unclosed quote, a bad `Port` or `ConnectTimeout`, extra
//! words after a one-word keyword, a malformed `Match` are `file:line: …` errors, as `ssh`
//! refuses the file for them.
//!
//! `Include` paths resolve as readconf.c resolves them for a user config: a path that is not
//! absolute and does not start with `~` is under `~/.ssh/`; `~` and `~/…` are the home; each is a
//! glob pattern, its matches read in sorted order; a pattern that matches nothing is skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::lex;
use crate::limits::Kind;

/// How deeply includes may nest (OpenSSH's READCONF_MAX_DEPTH).
const MAX_DEPTH: usize = 16;

/// Where a line is: its file and 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Loc {
    pub file: Arc<str>,
    pub line: usize,
    /// An option of ssh's command line ([`super::cmdline`]): `file` names where it was given
    /// (such as an Ansible variable) and there is no line.
    pub cmdline: bool,
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.cmdline {
            return f.write_str(&self.file);
        }
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One line of a config that matters for resolution.
#[derive(Debug, Clone)]
pub(super) enum Item {
    /// `Host PATTERN…`.
    Host { patterns: Vec<String> },
    /// `Match …`: its criteria (`None`: one gpufleet does not evaluate, warned at load; the
    /// block then applies to no host).
    Match {
        criteria: Option<Vec<super::resolve::Criterion>>,
    },
    /// `Include …`: the files it reached, in order, each read into items.
    Include { files: Vec<Vec<(Loc, Item)>> },
    /// Any other keyword: its name as written, lowercased key, its words, the raw rest of the
    /// line.
    Set {
        name: String,
        key: String,
        args: Vec<String>,
        rest: String,
    },
}

/// The home that `~` and relative `Include` paths resolve against (`$HOME`, else the password
/// database's).
pub(super) fn home() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf())
}

/// Reads `text` (the config `file`) into items, includes read in place. Errors: one line,
/// `file:line: …` (raw text: the caller escapes it); warnings likewise.
pub(super) fn read(
    text: &str,
    file: &Path,
    home: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Result<Vec<(Loc, Item)>, String> {
    walk(text, file, home, &mut Vec::new(), warnings)
}

/// Keywords whose one word OpenSSH takes (more is "extra arguments at end of line").
const ONE_WORD: &[&str] = &[
    "hostname",
    "port",
    "user",
    "identityfile",
    "certificatefile",
    "identitiesonly",
    "stricthostkeychecking",
    "connecttimeout",
    "hostkeyalias",
];

fn walk(
    text: &str,
    file: &Path,
    home: Option<&Path>,
    stack: &mut Vec<PathBuf>,
    warnings: &mut Vec<String>,
) -> Result<Vec<(Loc, Item)>, String> {
    let name: Arc<str> = Arc::from(file.display().to_string());
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let loc = Loc {
            file: name.clone(),
            line: i + 1,
            cmdline: false,
        };
        let Some((kw, rest)) = lex::keyword(line) else {
            continue;
        };
        let at = |m: String| format!("{loc}: {m}");
        let key = kw.to_ascii_lowercase();
        if rest.is_empty() {
            return Err(at(format!("no argument after keyword \"{kw}\"")));
        }
        let item = match key.as_str() {
            "match" => {
                let words = lex::match_words(rest).map_err(at)?;
                match super::resolve::criteria(&words) {
                    Ok(c) => Item::Match { criteria: Some(c) },
                    Err(super::resolve::BadMatch::Unsupported(what)) => {
                        warnings.push(at(format!(
                            "`{}`: gpufleet evaluates Match all, canonical, final, host, \
                             originalhost, user, localuser and exec only (OpenSSH 9.2's set; \
                             `{what}` is not among them); this block applies to no host",
                            line.trim()
                        )));
                        Item::Match { criteria: None }
                    }
                    Err(super::resolve::BadMatch::Malformed(m)) => {
                        return Err(at(format!("Bad Match condition: {m}")));
                    }
                }
            }
            _ => {
                let args = lex::words(rest).map_err(at)?;
                if args.is_empty() || args.iter().any(String::is_empty) && key != "proxycommand" {
                    return Err(at(format!("keyword {kw}: an empty argument")));
                }
                if ONE_WORD.contains(&key.as_str()) && args.len() > 1 {
                    return Err(at(format!("keyword {kw} extra arguments at end of line")));
                }
                if key == "port" && args[0].parse::<u16>().map_or(true, |p| p == 0) {
                    return Err(at(format!("Bad port '{}'", args[0])));
                }
                if key == "connecttimeout"
                    && args[0] != "none"
                    && super::resolve::convtime(&args[0]).is_none()
                {
                    return Err(at(format!("invalid time value '{}'", args[0])));
                }
                if key == "host" {
                    Item::Host { patterns: args }
                } else if key == "include" {
                    let mut files = Vec::new();
                    let shown = rest.split(" #").next().unwrap_or(rest).trim_end();
                    let at = |m: String| format!("{loc}: Include {shown}: {m}");
                    for arg in &args {
                        let Some(pattern) = resolve(arg, home) else {
                            return Err(at(format!("{arg}: no home folder for `~`")));
                        };
                        let paths = glob::glob(&pattern).map_err(|e| at(format!("{arg}: {e}")))?;
                        for p in paths.flatten() {
                            files.push(include_one(&p, &at, home, stack, warnings)?);
                        }
                    }
                    Item::Include { files }
                } else {
                    Item::Set {
                        name: kw.to_string(),
                        key,
                        args,
                        rest: rest.to_string(),
                    }
                }
            }
        };
        out.push((loc, item));
    }
    Ok(out)
}

fn include_one(
    p: &Path,
    at: &dyn Fn(String) -> String,
    home: Option<&Path>,
    stack: &mut Vec<PathBuf>,
    warnings: &mut Vec<String>,
) -> Result<Vec<(Loc, Item)>, String> {
    let shown = p.display().to_string();
    let meta = std::fs::metadata(p).map_err(|e| at(format!("{shown}: {e}")))?;
    if !meta.is_file() {
        return Err(at(format!(
            "{shown} is not a regular file; include ssh_config files only"
        )));
    }
    if meta.len() > Kind::SshConfig.cap() {
        return Err(at(format!("{shown}: {}", Kind::SshConfig.too_large())));
    }
    let canonical = p.canonicalize().map_err(|e| at(format!("{shown}: {e}")))?;
    if stack.len() >= MAX_DEPTH || stack.contains(&canonical) {
        return Err(at(format!(
            "{shown}: includes nested deeper than {MAX_DEPTH} (an include loop?)"
        )));
    }
    let inner = crate::limits::read_to_string(p, Kind::SshConfig)
        .map_err(|e| at(format!("{shown}: {e}")))?;
    stack.push(canonical);
    let items = walk(&inner, p, home, stack, warnings);
    stack.pop();
    items
}

/// The glob pattern of an `Include` argument (user config rules), or `None` for a `~` path
/// without a home. `~user/…` is kept as written (it matches nothing unless it exists so).
fn resolve(arg: &str, home: Option<&Path>) -> Option<String> {
    let escaped = |h: &Path| glob::Pattern::escape(&h.display().to_string());
    if arg.starts_with('/') {
        return Some(arg.to_string());
    }
    if let Some(rest) = arg.strip_prefix('~') {
        if rest.is_empty() {
            return Some(escaped(home?));
        }
        if let Some(rest) = rest.strip_prefix('/') {
            return Some(format!("{}/{rest}", escaped(home?)));
        }
        return Some(arg.to_string());
    }
    Some(format!("{}/.ssh/{arg}", escaped(home?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_paths_resolve_as_a_user_config() {
        let h = Some(Path::new("/home/o[1]"));
        assert_eq!(resolve("/etc/x", h).unwrap(), "/etc/x");
        assert_eq!(resolve("~/c.d/*", h).unwrap(), "/home/o[[]1[]]/c.d/*");
        assert_eq!(resolve("~", h).unwrap(), "/home/o[[]1[]]");
        assert_eq!(resolve("~bob/x", h).unwrap(), "~bob/x");
        assert_eq!(resolve("x.conf", h).unwrap(), "/home/o[[]1[]]/.ssh/x.conf");
        assert_eq!(resolve("x.conf", None), None);
    }
}
