//! Options written as `ssh`'s command line (for Ansible's `ansible_ssh_common_args` and
//! `ansible_ssh_extra_args`, docs/ssh.md "Command-line options"), read as OpenSSH 9.2's ssh.c
//! reads its argv: `getopt` over ssh's option string (flags clustered, `-p2222` or `-p 2222`),
//! `-o LINE` one ssh_config line checked as in a file, `-p`, `-l`, `-i` and `-J` the same as
//! `Port`, `User`, `IdentityFile` and `ProxyJump` lines (a `-i` file that does not exist is
//! left out with a warning, as ssh leaves it out). They come before every config file, so
//! their first value wins ([`super::query_with`]). ssh's own refusals are errors here too: an
//! unknown option, a missing argument, a bad port, `-o Host/Match/Include`, a second `-J`, `-J`
//! after a `ProxyCommand`. A word that is not an option is an error (ssh would take it as the
//! host to connect to). Options gpufleet does not honour come back as warnings, never dropped
//! silently; `-F FILE` is one of them (gpufleet reads the ssh_config `--ssh-config` names).

use std::path::Path;
use std::sync::Arc;

use super::include::{self, Item, Loc};

/// OpenSSH 9.2's option string (ssh.c): a letter followed by `:` takes an argument.
const OPTSTRING: &str = "1246ab:c:e:fgi:kl:m:no:p:qstvxAB:CD:E:F:GI:J:KL:MNO:PQ:R:S:TVw:W:XYy";

/// `-o` keywords gpufleet honours (what [`super::query_with`] reads); others are warned.
pub(super) const HONOURED: &[&str] = &[
    "hostname",
    "port",
    "user",
    "identityfile",
    "certificatefile",
    "identitiesonly",
    "proxyjump",
    "proxycommand",
    "userknownhostsfile",
    "stricthostkeychecking",
    "connecttimeout",
];

/// ssh command-line options, read ([`CommandLine::add`]), in the order given.
#[derive(Debug, Clone, Default)]
pub struct CommandLine {
    pub(super) items: Vec<(Loc, Item)>,
    /// A `ProxyJump` (or `-J`) was given: a second `-J` is refused, as ssh refuses it.
    jump: bool,
    /// A `ProxyCommand` was given before any `ProxyJump`: `-J` is then refused, as ssh does.
    command: bool,
}

/// An option gpufleet does not honour: `key` names it once per load (`-C`, `-o
/// controlpersist`), `message` says what was given and that it is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhonoured {
    pub key: String,
    pub message: String,
}

impl CommandLine {
    /// Whether no option that gpufleet honours was given.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// How many different identity files the options give (`-i`, `-o IdentityFile`): the first
    /// ones of [`super::HostSettings::identity_files`].
    pub fn identity_files(&self) -> usize {
        let mut seen: Vec<&str> = Vec::new();
        for (_, item) in &self.items {
            if let Item::Set { key, args, .. } = item
                && key == "identityfile"
                && !seen.contains(&args[0].as_str())
            {
                seen.push(&args[0]);
            }
        }
        seen.len()
    }

    /// Reads `words` (ssh's argv without the program and the host; `origin` names where they
    /// were written, for messages), after the options already added. Returns the options
    /// gpufleet does not honour. Errors: what ssh refuses (see the module docs), and a word
    /// that is not an option.
    pub fn add(&mut self, words: &[String], origin: &str) -> Result<Vec<Unhonoured>, String> {
        let loc = Loc {
            file: Arc::from(origin),
            line: 0,
            cmdline: true,
        };
        let mut out = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let w = &words[i];
            i += 1;
            if w == "--" || !w.starts_with('-') || w == "-" {
                return Err(format!(
                    "`{w}` is not an option: ssh would take it as the host to connect to (and \
                     the real host as a command to run there); write only options"
                ));
            }
            let flags: Vec<char> = w[1..].chars().collect();
            for (at, &c) in flags.iter().enumerate() {
                let Some(pos) = OPTSTRING.find(c).filter(|_| c != ':') else {
                    return Err(format!(
                        "`{w}`: ssh has no option -{c} (it stops with `unknown option -- {c}`)"
                    ));
                };
                if !OPTSTRING[pos + c.len_utf8()..].starts_with(':') {
                    out.push(Unhonoured {
                        key: format!("-{c}"),
                        message: format!("`-{c}` is not honoured by gpufleet; ignored"),
                    });
                    continue;
                }
                let rest: String = flags[at + 1..].iter().collect();
                let arg = if !rest.is_empty() {
                    rest
                } else if let Some(next) = words.get(i) {
                    i += 1;
                    next.clone()
                } else {
                    return Err(format!(
                        "`-{c}` without its argument (ssh stops with `option requires an \
                         argument -- {c}`)"
                    ));
                };
                self.option(c, &arg, &loc, &mut out)?;
                break;
            }
        }
        Ok(out)
    }

    /// Adds one `-o Name=value` that its writer puts on the line itself (Ansible's own `-o
    /// Port=`, `-o IdentityFile=`, `-o User=` between `ansible_ssh_args` and the common
    /// args), unchecked: its writer checked it. `origin` names where it came from.
    pub fn add_setting(&mut self, name: &str, value: &str, origin: &str) {
        let loc = Loc {
            file: Arc::from(origin),
            line: 0,
            cmdline: true,
        };
        self.set(&loc, name, value);
    }

    fn set(&mut self, loc: &Loc, name: &str, value: &str) {
        self.items.push((
            loc.clone(),
            Item::Set {
                name: name.to_string(),
                key: name.to_ascii_lowercase(),
                args: vec![value.to_string()],
                rest: value.to_string(),
            },
        ));
    }

    fn option(
        &mut self,
        c: char,
        arg: &str,
        loc: &Loc,
        out: &mut Vec<Unhonoured>,
    ) -> Result<(), String> {
        match c {
            'p' => {
                if arg.parse::<u16>().map_or(true, |p| p == 0) {
                    return Err(format!("-p {arg}: Bad port '{arg}'"));
                }
                self.set(loc, "Port", arg);
            }
            'l' => {
                if arg.is_empty() {
                    return Err("-l: an empty user".into());
                }
                self.set(loc, "User", arg);
            }
            'i' => {
                // ssh.c adds a `-i` file only if it exists (`~` expanded), else warns.
                let path = super::tokens::tilde(arg, &super::tokens::Local::get())
                    .map_err(|e| format!("-i {e}"))?;
                if std::fs::metadata(&path).is_err() {
                    out.push(Unhonoured {
                        key: format!("-i {arg}"),
                        message: format!(
                            "`-i {arg}`: identity file {path} not accessible; ssh leaves it \
                             out (\"Warning: Identity file … not accessible\"), so does gpufleet"
                        ),
                    });
                } else {
                    self.set(loc, "IdentityFile", &path);
                }
            }
            'J' => {
                if self.jump {
                    return Err(format!(
                        "-J {arg}: Only a single -J option is permitted (use commas to separate \
                         multiple jump hops), as ssh says (a ProxyJump was given before)"
                    ));
                }
                if self.command {
                    return Err(format!(
                        "-J {arg}: Cannot specify -J with ProxyCommand, as ssh says (a \
                         ProxyCommand was given before)"
                    ));
                }
                self.jump = true;
                self.set(loc, "ProxyJump", arg);
            }
            'o' => self.config_line(arg, loc, out)?,
            'F' => out.push(Unhonoured {
                key: "-F".into(),
                message: format!(
                    "`-F {arg}` is not honoured: gpufleet reads the ssh_config that \
                     --ssh-config names (default ~/.ssh/config), not {arg}; give \
                     --ssh-config {arg} to read it; ignored"
                ),
            }),
            c => out.push(Unhonoured {
                key: format!("-{c}"),
                message: format!("`-{c} {arg}` is not honoured by gpufleet; ignored"),
            }),
        }
        Ok(())
    }

    /// `-o LINE`: one ssh_config line, checked as readconf.c checks a command-line one.
    fn config_line(
        &mut self,
        line: &str,
        loc: &Loc,
        out: &mut Vec<Unhonoured>,
    ) -> Result<(), String> {
        let Some((kw, _)) = super::lex::keyword(line) else {
            return Err(format!("-o {line:?}: no option in it"));
        };
        let key = kw.to_ascii_lowercase();
        if matches!(key.as_str(), "host" | "match" | "include") {
            return Err(format!(
                "-o {line}: {kw} directive not supported as a command-line option, as ssh says"
            ));
        }
        let mut warnings = Vec::new();
        let items = include::read(line, Path::new("-o"), None, &mut warnings)
            .map_err(|e| format!("-o {line}: {}", e.strip_prefix("-o:1: ").unwrap_or(&e)))?;
        if !HONOURED.contains(&key.as_str()) {
            out.push(Unhonoured {
                key: format!("-o {key}"),
                message: format!("`-o {line}` is not honoured by gpufleet; ignored"),
            });
            return Ok(());
        }
        match key.as_str() {
            "proxyjump" if self.jump => {
                return Err(format!(
                    "-o {line}: a ProxyJump was given before (-J or -o ProxyJump); ssh keeps the \
                     first and refuses a later -J: write one"
                ));
            }
            "proxyjump" => self.jump = true,
            "proxycommand" if !self.jump => self.command = true,
            _ => {}
        }
        for (_, item) in items {
            self.items.push((loc.clone(), item));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    fn sets(c: &CommandLine) -> Vec<(String, String)> {
        c.items
            .iter()
            .map(|(_, i)| match i {
                Item::Set { key, rest, .. } => (key.clone(), rest.clone()),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn options_read_as_ssh_getopt_reads_them() {
        let mut c = CommandLine::default();
        let w = c
            .add(
                &words("-4Cp2222 -l ops -i/dev/null -J a@b:2 -oUser=x -o ServerAliveInterval=5 -i /nonexistent/k"),
                "v",
            )
            .unwrap();
        assert_eq!(
            sets(&c),
            [
                ("port".into(), "2222".into()),
                ("user".into(), "ops".into()),
                ("identityfile".into(), "/dev/null".into()),
                ("proxyjump".into(), "a@b:2".into()),
                ("user".into(), "x".into()),
            ]
        );
        let keys: Vec<&str> = w.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(
            keys,
            ["-4", "-C", "-o serveraliveinterval", "-i /nonexistent/k"]
        );
        assert_eq!(c.identity_files(), 1);
    }

    #[test]
    fn what_ssh_refuses_is_refused() {
        let err = |s: &str| CommandLine::default().add(&words(s), "v").unwrap_err();
        assert!(err("-Z").contains("no option -Z"));
        assert!(err("-p").contains("without its argument"));
        assert!(err("-p 0").contains("Bad port '0'"));
        assert!(err("-o Host=x").contains("not supported as a command-line option"));
        assert!(err("-J a -J b").contains("Only a single -J"));
        assert!(err("-o ProxyJump=a -J b").contains("Only a single -J"));
        assert!(err("-o ProxyCommand=nc -J b").contains("Cannot specify -J with ProxyCommand"));
        assert!(err("bastion").contains("not an option"));
        assert!(err("-- h").contains("not an option"));
        assert!(err("-o Port=x").contains("Bad port"));
    }

    #[test]
    fn dash_f_is_warned_with_what_to_do() {
        let mut c = CommandLine::default();
        let w = c.add(&words("-F /etc/other"), "v").unwrap();
        assert!(c.is_empty());
        assert!(w[0].message.contains("--ssh-config /etc/other"), "{w:?}");
    }
}
