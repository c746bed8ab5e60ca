//! `ansible_ssh_args`, `ansible_ssh_common_args` and `ansible_ssh_extra_args` as Ansible's ssh
//! connection plugin (ansible-core 2.19, `Connection._build_command` and `_split_ssh_args`)
//! puts them on ssh's command line: split with Python's `shlex.split` (POSIX rules, no
//! comments), each word stripped, empty words dropped; `ansible_ssh_args` first, then Ansible's
//! own `-o Port=`, `-o IdentityFile=` and `-o User=` of `ansible_port`, the key file and
//! `ansible_user`, then the common ones, then the extra ones. ssh takes the first value of
//! each, so `ansible_ssh_args` wins over `ansible_port`/`ansible_user`, which win over the
//! common and extra ones. ssh then reads them ([`CommandLine`], docs/ssh.md "Command-line
//! options").

use std::collections::{BTreeMap, BTreeSet};

use crate::inventory::InventoryError;
use crate::inventory::ssh_config::CommandLine;

/// The variables, in the order Ansible writes them on the command line (its own `-o Port=`,
/// `-o IdentityFile=`, `-o User=` between the first and the second).
pub(super) const VARS: [&str; 3] = [
    "ansible_ssh_args",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
];

/// The variable that comes before Ansible's own options.
pub(super) const FIRST: &str = "ansible_ssh_args";

/// Python's `shlex.split(s)` (posix, whitespace_split, no commenters) followed by Ansible's
/// `[x.strip() for x in … if x.strip()]`. Errors: Python's, "No closing quotation" and "No
/// escaped character".
pub fn split(s: &str) -> Result<Vec<String>, String> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Space,
        Word,
        Quote(char),
        /// After a `\`, and the state to go back to.
        Escape(Option<char>),
    }
    let ws = |c: char| matches!(c, ' ' | '\t' | '\r' | '\n');
    let mut out = Vec::new();
    let (mut token, mut quoted, mut state) = (String::new(), false, State::Space);
    let mut push = |token: &mut String, quoted: &mut bool| {
        if !token.is_empty() || *quoted {
            out.push(std::mem::take(token));
        }
        *quoted = false;
    };
    for c in s.chars() {
        state = match state {
            State::Space | State::Word if ws(c) => {
                push(&mut token, &mut quoted);
                State::Space
            }
            State::Space | State::Word if c == '\\' => State::Escape(None),
            State::Space | State::Word if c == '\'' || c == '"' => {
                quoted = true;
                State::Quote(c)
            }
            State::Space | State::Word => {
                token.push(c);
                State::Word
            }
            State::Quote(q) if c == q => State::Word,
            State::Quote('"') if c == '\\' => State::Escape(Some('"')),
            State::Quote(q) => {
                token.push(c);
                State::Quote(q)
            }
            State::Escape(back) => {
                // In double quotes a `\` escapes only `"` and `\`; elsewhere any character.
                if back.is_some() && c != '\\' && Some(c) != back {
                    token.push('\\');
                }
                token.push(c);
                back.map_or(State::Word, State::Quote)
            }
        };
    }
    match state {
        State::Quote(_) | State::Escape(Some(_)) => return Err("No closing quotation".into()),
        State::Escape(None) => return Err("No escaped character".into()),
        State::Space | State::Word => push(&mut token, &mut quoted),
    }
    Ok(out
        .into_iter()
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty())
        .collect())
}

/// Reads host `name`'s [`VARS`] out of `vars` (value, line): `None` when none is set. When
/// `ansible_ssh_args` is set, `own` — Ansible's own options, `(keyword, value)`: `Port`,
/// `IdentityFile`, `User` — are written after it, as Ansible writes them (the caller then
/// leaves them to the command line). `host_line`: the host's own line (what later errors name
/// first). Options gpufleet does not honour are warned once per load
/// (`warned`), naming the host. Errors (`file:line: host `h`: VAR: …`): an unclosed quote, and
/// what ssh refuses ([`CommandLine::add`]).
pub(super) fn read(
    vars: &BTreeMap<&str, &(String, usize)>,
    file: &str,
    name: &str,
    host_line: usize,
    own: &[(&str, Option<String>)],
    warned: &mut BTreeSet<String>,
    warnings: &mut Vec<String>,
) -> Result<Option<CommandLine>, InventoryError> {
    let mut cl = CommandLine::default();
    let mut any = false;
    for var in VARS {
        if var != FIRST && vars.contains_key(FIRST) && !own.is_empty() {
            // Ansible's own options, once, right after ansible_ssh_args.
            if var == VARS[1] {
                for (k, v) in own {
                    if let Some(v) = v {
                        cl.add_setting(k, v, &format!("Ansible's own `-o {k}=`"));
                    }
                }
            }
        }
        let Some((value, line)) = vars.get(var).copied() else {
            continue;
        };
        any = true;
        let at = |m: String| InventoryError(format!("{file}:{line}: host `{name}`: {var}: {m}"));
        let words = split(value).map_err(|e| at(format!("{value:?}: {e}")))?;
        // Errors that come later (resolving the host) are prefixed with the host's file:line
        // and name: the variable's own line only when it is elsewhere.
        let origin = if *line == host_line {
            var.to_string()
        } else {
            format!("{var} (line {line})")
        };
        for u in cl.add(&words, &origin).map_err(at)? {
            if warned.insert(format!("ssh-args {}", u.key)) {
                warnings.push(format!(
                    "{file}:{line}: host `{name}`: {var}: {}",
                    u.message
                ));
            }
        }
    }
    Ok(any.then_some(cl))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python 3.11's `shlex.split` gives these (checked with the CI virtualenv's python).
    #[test]
    fn splits_as_python_shlex() {
        let s = |t: &str| split(t).unwrap();
        assert_eq!(
            s(r#"-o ProxyCommand="ssh -W %h:%p -q user@bastion""#),
            ["-o", "ProxyCommand=ssh -W %h:%p -q user@bastion"]
        );
        assert_eq!(
            s(r#"a"b c"d 'e\f' "g\h\"\\" i\ j"#),
            ["ab cd", r"e\f", r#"g\h"\"#, "i j"]
        );
        assert_eq!(s("-J b  '' \" x \" #c"), ["-J", "b", "x", "#c"]);
        assert_eq!(s(""), Vec::<String>::new());
        assert_eq!(split("-o 'x").unwrap_err(), "No closing quotation");
        assert_eq!(split("x\\").unwrap_err(), "No escaped character");
    }
}
