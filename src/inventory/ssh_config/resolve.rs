//! The options one host gets from an ssh_config, obtained as OpenSSH 9.2's `ssh` obtains them
//! (readconf.c, ssh.c): lines in file order, `Include`d files in place; the first value obtained
//! for a keyword wins, within a block as across blocks (`IdentityFile` and `CertificateFile`
//! add up, each path once); `Host` patterns match the name as given (case-sensitive), `Match`
//! criteria are evaluated where they stand, against what has been obtained so far; a `Match` in
//! an included file does not change whether the lines after the `Include` apply, and an
//! `Include` under a block that does not apply is read for no host. `ProxyJump` and
//! `ProxyCommand` exclude each other: the first one obtained wins, `none` included. When a
//! `Match final` (or `canonical`, which only the final pass matches) is present, a second pass
//! runs as ssh's final pass: `Host` patterns then match the host name after `HostName`.

use std::collections::BTreeMap;

use super::include::{Item, Loc};

/// One `Match` criterion (ssh_config(5) "Match"), negated with `!`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Criterion {
    /// `all`.
    All(bool),
    /// `canonical` / `final`: true in the final pass only (and `final` asks for one).
    Final { neg: bool, asks: bool },
    /// `host PATTERNS`: the host name after a `HostName` obtained so far (its `%h` expanded).
    Host(bool, String),
    /// `originalhost PATTERNS`: the name as given.
    OriginalHost(bool, String),
    /// `user PATTERNS`: the remote user obtained so far (else the local user).
    User(bool, String),
    /// `localuser PATTERNS`.
    LocalUser(bool, String),
    /// `exec COMMAND`: `sh -c COMMAND` (tokens of ssh_config(5) "TOKENS" for Match exec
    /// expanded) exits 0.
    Exec(bool, String),
}

/// Why a `Match` line is not evaluated.
pub(super) enum BadMatch {
    /// A criterion OpenSSH 9.2 does not have (newer ones: `tagged`, `localnetwork`, …).
    Unsupported(String),
    /// What OpenSSH refuses: no criterion, `all` with others, a criterion without its argument.
    Malformed(String),
}

/// A `Match` line's words as criteria, checked as match_cfg_line checks them.
pub(super) fn criteria(words: &[String]) -> Result<Vec<Criterion>, BadMatch> {
    let mut out = Vec::new();
    let mut it = words.iter().peekable();
    while let Some(w) = it.next() {
        let (neg, name) = match w.strip_prefix('!') {
            Some(n) => (true, n.to_ascii_lowercase()),
            None => (false, w.to_ascii_lowercase()),
        };
        let mut arg = || {
            it.next()
                .cloned()
                .ok_or_else(|| BadMatch::Malformed(format!("Missing Match criteria for {name}")))
        };
        let c = match name.as_str() {
            "all" => {
                if !out.is_empty() || it.peek().is_some() {
                    return Err(BadMatch::Malformed(
                        "'all' cannot be combined with other Match attributes".into(),
                    ));
                }
                Criterion::All(neg)
            }
            "canonical" => Criterion::Final { neg, asks: false },
            "final" => Criterion::Final { neg, asks: true },
            "host" => Criterion::Host(neg, arg()?),
            "originalhost" => Criterion::OriginalHost(neg, arg()?),
            "user" => Criterion::User(neg, arg()?),
            "localuser" => Criterion::LocalUser(neg, arg()?),
            "exec" => Criterion::Exec(neg, arg()?),
            other => return Err(BadMatch::Unsupported(other.to_string())),
        };
        out.push(c);
    }
    if out.is_empty() {
        return Err(BadMatch::Malformed(
            "One or more attributes required for Match".into(),
        ));
    }
    Ok(out)
}

/// OpenSSH's `convtime`: `90`, `1m30s`, `2h` (s, m, h, d, w; case-insensitive) as seconds.
pub(super) fn convtime(s: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num.parse().ok()?;
        num.clear();
        let mult = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            'w' => 604800,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(mult)?)?;
    }
    if !num.is_empty() {
        total = total.checked_add(num.parse().ok()?)?;
    } else if s.is_empty() || !s.ends_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    Some(total)
}

/// What the config gave one host: the first value of each keyword with where it was written
/// (the raw words), and the directives that applied and gpufleet does not honour.
#[derive(Debug, Clone, Default)]
pub(super) struct Obtained {
    pub first: BTreeMap<String, (Loc, Vec<String>, String)>,
    pub identity_files: Vec<(Loc, String)>,
    pub certificate_files: Vec<(Loc, String)>,
    /// `ProxyJump` as obtained (`none` included; a `#` ends it).
    pub jump: Option<(Loc, String)>,
    /// `ProxyCommand` as obtained (raw; `none` included, and `none` once a `ProxyJump` other
    /// than `none` is obtained, as readconf.c's parse_jump sets it).
    pub command: Option<(Loc, String)>,
    /// Directives that applied, by name as written, in order.
    pub applied: Vec<String>,
}

impl Obtained {
    pub fn get(&self, key: &str) -> Option<&(Loc, Vec<String>, String)> {
        self.first.get(key)
    }

    /// The first word of `key`.
    pub fn word(&self, key: &str) -> Option<&str> {
        self.first
            .get(key)
            .and_then(|(_, a, _)| a.first())
            .map(String::as_str)
    }

    fn set(&mut self, loc: &Loc, name: &str, key: &str, args: &[String], rest: &str) {
        self.applied.push(name.to_string());
        match key {
            "identityfile" | "certificatefile" => {
                let list = if key == "identityfile" {
                    &mut self.identity_files
                } else {
                    &mut self.certificate_files
                };
                if !list.iter().any(|(_, p)| *p == args[0]) {
                    list.push((loc.clone(), args[0].clone()));
                }
            }
            // The first of the two obtained wins (`ssh -G` of OpenSSH 9.2): `ProxyJump HOST`
            // also turns `ProxyCommand` off; `ProxyJump none` only blocks later `ProxyJump`s.
            "proxyjump" => {
                if self.jump.is_none() && self.command.is_none() {
                    let value = rest.split('#').next().unwrap_or("").trim_end().to_string();
                    if !value.eq_ignore_ascii_case("none") {
                        self.command = Some((loc.clone(), "none".into()));
                    }
                    self.jump = Some((loc.clone(), value));
                }
            }
            "proxycommand" => {
                let blocked = self
                    .jump
                    .as_ref()
                    .is_some_and(|(_, j)| !j.eq_ignore_ascii_case("none"));
                if !blocked && self.command.is_none() {
                    self.command = Some((loc.clone(), rest.to_string()));
                }
            }
            _ => {
                self.first
                    .entry(key.to_string())
                    .or_insert_with(|| (loc.clone(), args.to_vec(), rest.to_string()));
            }
        }
    }
}

/// Runs a `Match exec` command: (command as written, obtained so far, host, its line).
pub(super) type ExecFn<'a> = dyn FnMut(&str, &Obtained, &str, &Loc) -> Result<bool, String> + 'a;

/// What a `Match` evaluation needs to know that the config does not say.
pub(super) struct Context<'a> {
    /// The name as given (ssh's `host_arg`).
    pub original: &'a str,
    /// The name `Host` patterns match: `original` in the first pass, the host name after
    /// `HostName` (lowercased) in the final one.
    pub host: String,
    pub final_pass: bool,
    /// Set when a `Match final` is evaluated.
    pub wants_final: bool,
    /// Evaluates a `Match exec` (its command expanded against what is obtained so far).
    pub exec: &'a mut ExecFn<'a>,
    /// Current host name for `Match host` (HostName so far, `%h` expanded).
    pub match_host: &'a dyn Fn(&Obtained) -> Result<String, String>,
    /// The remote user for `Match user` (obtained so far, else the local user).
    pub user: &'a dyn Fn(&Obtained) -> String,
    pub local_user: &'a str,
}

/// Evaluates `items` into `got`. `active`: whether the lines apply now; `never`: inside an
/// `Include` under a block that does not apply (nothing applies).
pub(super) fn evaluate(
    items: &[(Loc, Item)],
    got: &mut Obtained,
    active: &mut bool,
    never: bool,
    cx: &mut Context<'_>,
) -> Result<(), String> {
    for (loc, item) in items {
        match item {
            Item::Host { patterns } => {
                *active = false;
                if never {
                    continue;
                }
                for p in patterns {
                    let (neg, p) = match p.strip_prefix('!') {
                        Some(p) => (true, p),
                        None => (false, p.as_str()),
                    };
                    if glob(p, &cx.host) {
                        if neg {
                            *active = false;
                            break;
                        }
                        *active = true;
                    }
                }
            }
            Item::Match { criteria } => {
                let value = match criteria {
                    Some(c) => holds(c, got, cx, loc)?,
                    None => false,
                };
                *active = !never && value;
            }
            Item::Include { files } => {
                let was = *active;
                for f in files {
                    evaluate(f, got, active, never || !was, cx)?;
                    *active = was;
                }
            }
            Item::Set {
                name,
                key,
                args,
                rest,
            } => {
                if *active && !never {
                    got.set(loc, name, key, args, rest);
                }
            }
        }
    }
    Ok(())
}

fn holds(
    cs: &[Criterion],
    got: &Obtained,
    cx: &mut Context<'_>,
    loc: &Loc,
) -> Result<bool, String> {
    let mut result = true;
    for c in cs {
        let (neg, r) = match c {
            Criterion::All(neg) => return Ok(result && !neg),
            Criterion::Final { neg, asks } => {
                if *asks {
                    cx.wants_final = true;
                }
                (*neg, cx.final_pass)
            }
            Criterion::Host(neg, p) => {
                let host = if cx.final_pass {
                    cx.host.clone()
                } else {
                    (cx.match_host)(got).map_err(|e| format!("{loc}: {e}"))?
                };
                (*neg, pattern_list(p, &host.to_ascii_lowercase(), true))
            }
            Criterion::OriginalHost(neg, p) => (
                *neg,
                pattern_list(p, &cx.original.to_ascii_lowercase(), true),
            ),
            Criterion::User(neg, p) => (*neg, pattern_list(p, &(cx.user)(got), false)),
            Criterion::LocalUser(neg, p) => (*neg, pattern_list(p, cx.local_user, false)),
            Criterion::Exec(neg, cmd) => {
                if !result {
                    // OpenSSH skips the command once an earlier criterion failed.
                    continue;
                }
                let host = if cx.final_pass {
                    cx.host.clone()
                } else {
                    (cx.match_host)(got).map_err(|e| format!("{loc}: {e}"))?
                };
                (*neg, (cx.exec)(cmd, got, &host, loc)?)
            }
        };
        if r == neg {
            result = false;
        }
    }
    Ok(result)
}

/// ssh_config(5) "PATTERNS": a comma-separated list of `*`/`?` patterns, `!` negating; matches
/// when one pattern matches and no negated one does. `lower`: the patterns are lowercased
/// first (match_hostname, which is given a lowercased name: `Match host` and `originalhost`
/// ignore case, as `ssh -G` shows).
pub(super) fn pattern_list(list: &str, s: &str, lower: bool) -> bool {
    let mut hit = false;
    for p in list.split(',') {
        let (neg, p) = match p.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, p),
        };
        let p = if lower {
            p.to_ascii_lowercase()
        } else {
            p.to_string()
        };
        if glob(&p, s) {
            if neg {
                return false;
            }
            hit = true;
        }
    }
    hit
}

/// OpenSSH's `match_pattern`: `*` any run, `?` one character, case-sensitive. Linear
/// backtracking (one resume point per `*`), so no pattern takes exponential time.
pub(super) fn glob(pattern: &str, s: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = s.chars().collect();
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == s[si])) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    #[test]
    fn glob_matches_as_match_pattern() {
        use super::glob;
        assert!(glob("gpu*", "gpu01"));
        assert!(glob("*", ""));
        assert!(glob("g?u*1", "gpu01"));
        assert!(!glob("gpu*", "GPU01"));
        assert!(glob("*.prod", "web.prod"));
        assert!(!glob("a*b", "acbd"));
        assert!(glob("a*b*c", "aXbYbZc"));
        let long = "a".repeat(300);
        assert!(!glob("*a*a*a*a*a*a*a*a*a*a*b", &long));
    }
}
