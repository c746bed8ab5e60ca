//! `~/.ssh/config` as OpenSSH 9.2's `ssh -G` resolves it (docs/ssh.md, "Which parser"):
//! gpufleet's own reader ([`include`], [`lex`]) and resolver ([`resolve`], [`tokens`]), then
//! the probe's per-node SSH route (jump hosts, `ProxyCommand`, key and known_hosts options). A
//! directive gpufleet does not honour is warned about once per scan, never silently dropped.
//! tests/oracle_ssh.rs compares it with `ssh -G` and `ssh -v`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::probe::endpoint::{Hop, Login, parse_jump_list};

mod cmdline;
mod include;
mod lex;
mod resolve;
mod tokens;
use crate::probe::ssh::HostKeyPolicy;
pub use cmdline::{CommandLine, Unhonoured};
pub use resolve::Criterion;
use tokens::{Conn, Keyword, Local};

/// How many jump hosts a chain may have, jump hosts' own `ProxyJump` included (a loop in the
/// config ends here).
const MAX_HOPS: usize = 8;

/// An OpenSSH client config, read: its lines (includes in place), the local facts tokens
/// stand for, and the `Match exec` results of this load.
pub struct ClientConfig {
    items: Vec<(include::Loc, include::Item)>,
    local: Local,
    /// `Match exec` results by expanded command line, run once each.
    execs: std::sync::Mutex<std::collections::HashMap<String, bool>>,
}

/// Reads an OpenSSH client config file: [`parse`] on its text.
///
/// Errors: the file cannot be read, is over 16 MiB ([`crate::limits::Kind::SshConfig`]) or
/// does not parse (`file:line: message`).
pub fn load(path: &Path) -> Result<(ClientConfig, Vec<String>), String> {
    let text = crate::limits::read_to_string(path, crate::limits::Kind::SshConfig)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, path)
}

/// Parses a client config; `path` names it in messages, `Include`d files are read now.
/// `Match` blocks with criteria OpenSSH 9.2 does not have are warned (with `file:line`) and
/// apply to no host.
///
/// Returns the config and its warnings (raw: the caller escapes them where it shows them).
/// Errors (`file:line: …`, as `ssh` refuses the file): a keyword without an argument, an
/// unclosed quote, a bad `Port` or `ConnectTimeout`, extra words after a one-word keyword, a
/// malformed `Match`; an `Include` that reaches something other than a regular file, a file
/// over 16 MiB, or nests deeper than 16.
pub fn parse(text: &str, path: &Path) -> Result<(ClientConfig, Vec<String>), String> {
    let mut warnings = Vec::new();
    let items = include::read(text, path, include::home().as_deref(), &mut warnings)?;
    Ok((
        ClientConfig {
            items,
            local: Local::get(),
            execs: Default::default(),
        },
        warnings,
    ))
}

/// OpenSSH's system-wide client config: ssh reads it after the user's `~/.ssh/config` unless
/// `-F` names another file (ssh(1), "FILES"); gpufleet does not read it.
pub const SYSTEM_CONFIG: &str = "/etc/ssh/ssh_config";

/// The one warning to give about the system-wide config at `path` (read with its `Include`s,
/// absolute paths only: its relative ones are under /etc/ssh, not under `~/.ssh`): `None`
/// when it does not exist or sets none of the keywords gpufleet honours in `~/.ssh/config`
/// (`HostName`, `Port`, `User`, `IdentityFile`, `ProxyJump`, `ProxyCommand`, …: the same list
/// as for command-line options); else the first such line (`file:line`, the keyword) and that
/// gpufleet does not apply it, or, when it cannot be read, why (raw text: the caller escapes
/// it).
pub fn system_config_warning(path: &Path) -> Option<String> {
    let not_read = "gpufleet reads only ~/.ssh/config (or --ssh-config FILE), while ssh also \
                    reads it after ~/.ssh/config";
    let text = match crate::limits::read_to_string(path, crate::limits::Kind::SshConfig) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            return Some(format!(
                "{}: {e}; it is not read: {not_read}",
                path.display()
            ));
        }
    };
    let items = match include::read(&text, path, None, &mut Vec::new()) {
        Ok(items) => items,
        Err(e) => return Some(format!("{e}; {} is not read: {not_read}", path.display())),
    };
    fn first(items: &[(include::Loc, include::Item)]) -> Option<(String, String)> {
        for (loc, item) in items {
            match item {
                include::Item::Set { name, key, .. }
                    if cmdline::HONOURED.contains(&key.as_str()) =>
                {
                    return Some((loc.to_string(), name.clone()));
                }
                include::Item::Include { files } => {
                    if let Some(f) = files.iter().find_map(|f| first(f)) {
                        return Some(f);
                    }
                }
                _ => {}
            }
        }
        None
    }
    let (loc, name) = first(&items)?;
    Some(format!(
        "{loc}: `{name}` is not applied: {not_read}; copy what should apply into ~/.ssh/config"
    ))
}

impl ClientConfig {
    /// A config without any line (`--ssh-config none`), to resolve command-line options alone.
    pub fn empty() -> ClientConfig {
        ClientConfig {
            items: Vec::new(),
            local: Local::get(),
            execs: Default::default(),
        }
    }
}

fn is_addr(h: &str) -> bool {
    h.parse::<std::net::IpAddr>().is_ok()
}

/// The name ssh connects to for `host` when no `HostName` applies: lowercased unless an
/// address (OpenSSH 9.2; `ssh -G -F none GPU01` says `hostname gpu01`, `FE80::AB` stays).
pub fn connect_name(host: &str) -> String {
    if is_addr(host) {
        host.to_string()
    } else {
        host.to_ascii_lowercase()
    }
}

impl ClientConfig {
    /// The options `original` obtains, as `ssh -l USER -p PORT ORIGINAL` obtains them (`user`
    /// and `port` are the inventory's, given like ssh's command line: they win, and `Match
    /// user` and the tokens see them), and the host name after `HostName` (`%h` expanded,
    /// lowercased unless an address).
    fn obtain(
        &self,
        cmdline: &CommandLine,
        original: &str,
        user: Option<&str>,
        port: Option<u16>,
    ) -> Result<(resolve::Obtained, String), String> {
        let local = &self.local;
        let match_host = |got: &resolve::Obtained| -> Result<String, String> {
            match got.get("hostname") {
                Some((loc, a, _)) => tokens::expand(
                    &a[0],
                    Keyword::HostName,
                    &Conn {
                        original: original.to_string(),
                        host: original.to_string(),
                        port: 0,
                        user: String::new(),
                        key_alias: String::new(),
                    },
                    local,
                )
                .map_err(|e| format!("{loc}: HostName {e}")),
                None => Ok(original.to_string()),
            }
        };
        let user_now = |got: &resolve::Obtained| -> String {
            user.map(str::to_string)
                .or_else(|| got.word("user").map(str::to_string))
                .unwrap_or_else(|| local.user.clone())
        };
        let mut exec = |cmd: &str,
                        got: &resolve::Obtained,
                        host: &str,
                        loc: &include::Loc|
         -> Result<bool, String> {
            let conn = Conn {
                original: original.to_string(),
                host: host.to_string(),
                port: port
                    .or_else(|| got.word("port").and_then(|p| p.parse().ok()))
                    .unwrap_or(22),
                user: user_now(got),
                key_alias: got.word("hostkeyalias").unwrap_or(host).to_string(),
            };
            let cmd = tokens::expand(cmd, Keyword::MatchExec, &conn, local)
                .map_err(|e| format!("{loc}: Match exec {e}"))?;
            let mut execs = self
                .execs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Ok(*execs
                .entry(cmd.clone())
                .or_insert_with(|| match_exec(&cmd, MATCH_EXEC_LIMIT)))
        };
        let mut got = resolve::Obtained::default();
        let mut cx = resolve::Context {
            original,
            host: original.to_string(),
            final_pass: false,
            wants_final: false,
            exec: &mut exec,
            match_host: &match_host,
            user: &user_now,
            local_user: &local.user,
        };
        let mut active = true;
        // ssh's command-line options first: their first values win.
        resolve::evaluate(&cmdline.items, &mut got, &mut active, false, &mut cx)?;
        resolve::evaluate(&self.items, &mut got, &mut active, false, &mut cx)?;
        let host = connect_name(&match_host(&got)?);
        if cx.wants_final {
            // ssh's final pass: HostName is now the host, `Host` patterns match it.
            cx.host = host.clone();
            cx.final_pass = true;
            let loc = got.get("hostname").map(|(l, _, _)| l.clone());
            if let Some(loc) = loc {
                got.first
                    .insert("hostname".into(), (loc, vec![host.clone()], host.clone()));
            }
            let mut active = true;
            resolve::evaluate(&self.items, &mut got, &mut active, false, &mut cx)?;
        }
        Ok((got, host))
    }
}

/// The warnings of one inventory load: one per directive that gpufleet does not honour (the
/// first host it applied to is named), in directive order.
#[derive(Debug, Default)]
pub struct Warnings(BTreeMap<String, String>);

impl Warnings {
    fn once(&mut self, directive: &str, host: &str) {
        let key = directive.to_ascii_lowercase();
        self.0.entry(key).or_insert_with(|| {
            format!(
                "~/.ssh/config: `{directive}` (applies to {host}) is not honoured by gpufleet; ignored"
            )
        });
    }

    /// [`Warnings::once`] for a directive written at `loc`: a command-line option
    /// ([`CommandLine`]) is named where it was given, not as `~/.ssh/config`'s.
    fn once_at(&mut self, loc: &include::Loc, directive: &str, host: &str) {
        if !loc.cmdline {
            return self.once(directive, host);
        }
        let key = format!("{loc}\0{}", directive.to_ascii_lowercase());
        self.0.entry(key).or_insert_with(|| {
            format!("{loc}: `{directive}` (applies to {host}) is not honoured by gpufleet; ignored")
        });
    }

    /// The messages, one per directive.
    pub fn into_vec(self) -> Vec<String> {
        self.0.into_values().collect()
    }
}

/// What `~/.ssh/config` says for one host name, reduced to what gpufleet honours.
#[derive(Debug, Clone, Default)]
pub struct HostSettings {
    pub host_name: Option<String>,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub identity_files: Vec<PathBuf>,
    /// The first of `certificate_files`.
    pub certificate_file: Option<PathBuf>,
    pub certificate_files: Vec<PathBuf>,
    pub identities_only: bool,
    /// `ProxyJump`, as written (`none` included).
    pub proxy_jump: Option<String>,
    /// `ProxyCommand`, tokens unexpanded (`none` included).
    pub proxy_command: Option<String>,
    pub known_hosts: Vec<PathBuf>,
    /// `UserKnownHostsFile none` (warned: gpufleet still checks the default files).
    pub known_hosts_none: bool,
    pub host_key_policy: Option<HostKeyPolicy>,
    pub connect_timeout: Option<Duration>,
}

fn yes(args: &[String]) -> Option<bool> {
    match args.first()?.to_ascii_lowercase().as_str() {
        "yes" | "true" => Some(true),
        "no" | "false" => Some(false),
        _ => None,
    }
}

/// Queries `cfg` for `host` (the name as given, before `HostName`) logging in as `user` on
/// `port` (the inventory's, when it gives them: ssh's `-l` and `-p`), warning once for each
/// directive that applies and is not honoured. Tokens are expanded as OpenSSH 9.2 expands them
/// ([`tokens`]); identity files, certificates and known_hosts files come back expanded,
/// `ProxyCommand` raw (the route expands it).
///
/// Errors (`file:line: …`): an unknown token, an undefined `${VAR}`, a `%` in `ProxyJump`
/// (OpenSSH 9.2 expands none there), a `Match exec` whose expansion fails.
pub fn query(
    cfg: &ClientConfig,
    host: &str,
    user: Option<&str>,
    port: Option<u16>,
    warn: &mut Warnings,
) -> Result<HostSettings, String> {
    query_with(cfg, &CommandLine::default(), host, user, port, warn)
}

/// [`query`] with ssh command-line options ([`CommandLine`]) read before the config, as ssh
/// reads `ssh OPTIONS -l USER -p PORT HOST` (`user` and `port` still win: Ansible writes
/// `ansible_user` and `ansible_port` before `ansible_ssh_common_args`). The first
/// [`CommandLine::identity_files`] of the answer's identity files are the options' own.
pub fn query_with(
    cfg: &ClientConfig,
    cmdline: &CommandLine,
    host: &str,
    user: Option<&str>,
    port: Option<u16>,
    warn: &mut Warnings,
) -> Result<HostSettings, String> {
    let (got, host_name) = cfg.obtain(cmdline, host, user, port)?;
    let word = |k: &str| got.word(k).map(str::to_string);
    let cfg_port = word("port").and_then(|p| p.parse::<u16>().ok());
    let conn = Conn {
        original: host.to_string(),
        host: host_name.clone(),
        port: port.or(cfg_port).unwrap_or(22),
        user: user
            .map(str::to_string)
            .or_else(|| word("user"))
            .unwrap_or_else(|| cfg.local.user.clone()),
        key_alias: word("hostkeyalias").unwrap_or_else(|| host.to_string()),
    };
    let file = |loc: &include::Loc, kw: &str, v: &str| -> Result<PathBuf, String> {
        tokens::expand(v, Keyword::File, &conn, &cfg.local)
            .map(PathBuf::from)
            .map_err(|e| format!("{loc}: {kw} {e}"))
    };
    let mut s = HostSettings {
        host_name: Some(host_name.clone()),
        port: cfg_port,
        user: word("user"),
        ..HostSettings::default()
    };
    for (loc, f) in &got.identity_files {
        if !f.eq_ignore_ascii_case("none") {
            s.identity_files.push(file(loc, "IdentityFile", f)?);
        }
    }
    for (loc, f) in &got.certificate_files {
        if !f.eq_ignore_ascii_case("none") {
            s.certificate_files.push(file(loc, "CertificateFile", f)?);
        }
    }
    s.certificate_file = s.certificate_files.first().cloned();
    if let Some((loc, v)) = &got.jump {
        if v.contains('%') {
            return Err(format!(
                "{loc}: ProxyJump {v:?}: OpenSSH 9.2 expands no token in ProxyJump (it would \
                 connect to a host named with the `%`); write the host"
            ));
        }
        s.proxy_jump = Some(v.clone());
    }
    s.proxy_command = got.command.as_ref().map(|(_, c)| c.clone());
    if let Some((loc, args, _)) = got.get("userknownhostsfile") {
        if args.len() > 1 && args.iter().any(|a| a.eq_ignore_ascii_case("none")) {
            return Err(format!(
                "{loc}: UserKnownHostsFile: \"none\" must appear alone"
            ));
        }
        if args[0].eq_ignore_ascii_case("none") {
            s.known_hosts_none = true;
            warn.once_at(
                loc,
                "UserKnownHostsFile none (gpufleet still checks host keys against ~/.ssh/known_hosts and the inventory's known_hosts)",
                host,
            );
        }
        for a in args.iter().filter(|a| !a.eq_ignore_ascii_case("none")) {
            s.known_hosts.push(file(loc, "UserKnownHostsFile", a)?);
        }
    }
    for (key, (loc, args, _)) in &got.first {
        let name = got
            .applied
            .iter()
            .find(|n| n.eq_ignore_ascii_case(key))
            .cloned()
            .unwrap_or_else(|| key.clone());
        match key.as_str() {
            "hostname" | "port" | "user" | "userknownhostsfile" => {}
            "identitiesonly" => match yes(args) {
                Some(b) => s.identities_only = b,
                None => warn.once_at(loc, &format!("IdentitiesOnly {}", args.join(" ")), host),
            },
            "connecttimeout" => {
                s.connect_timeout = resolve::convtime(&args[0]).map(Duration::from_secs);
            }
            "stricthostkeychecking" => {
                match args.first().map(|a| a.to_ascii_lowercase()).as_deref() {
                    Some("yes" | "ask" | "true") => s.host_key_policy = Some(HostKeyPolicy::Strict),
                    Some("accept-new") => s.host_key_policy = Some(HostKeyPolicy::AcceptNew),
                    // gpufleet never accepts a changed key: `no` is taken as `accept-new`.
                    Some("no" | "off" | "false") => {
                        s.host_key_policy = Some(HostKeyPolicy::AcceptNew);
                        warn.once_at(loc, "StrictHostKeyChecking no (taken as accept-new: a changed host key is still refused)", host);
                    }
                    _ => warn.once_at(
                        loc,
                        &format!("StrictHostKeyChecking {}", args.join(" ")),
                        host,
                    ),
                }
            }
            _ => warn.once_at(loc, &name, host),
        }
    }
    Ok(s)
}

/// How long a `Match exec` command may run before it is killed and taken as not matching.
const MATCH_EXEC_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs a `Match exec` command (`sh -c`, in a process group of its own, no stdio): whether it
/// exited 0 within `limit` ([`MATCH_EXEC_LIMIT`]). Past the limit its group is killed, it does not match,
/// and a warning says so.
fn match_exec(cmd: &str, limit: std::time::Duration) -> bool {
    use std::os::unix::process::CommandExt;
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    let Ok(mut child) = child else {
        return false;
    };
    let start = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if start.elapsed() < limit => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => {
                crate::probe::kill_tree(child.id());
                let _ = child.wait();
                eprintln!(
                    "gpufleet: warning: ssh config `Match exec {}` ran past {} s: killed, taken as not matching",
                    crate::model::text::terminal_safe(cmd),
                    limit.as_secs_f32()
                );
                return false;
            }
        }
    }
}

/// `value` when a shell would read it as one plain word that is not an option: letters, digits
/// and `._-:@+,=/[]`, not starting with `-` (host names, IPv6 literals, user and node names). The command a token goes into runs
/// through `sh -c`, and the value may come from an inventory, a Slurm or Kubernetes node list:
/// anything else is refused, as OpenSSH 9.6 refuses shell metacharacters in names it expands
/// (CVE-2023-51385).
fn shell_safe<'a>(what: &str, value: &'a str) -> Result<&'a str, String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "._-:@+,=/[]".contains(c);
    // A leading `-` would be read as an option by the command it goes into (`ssh -W %h:%p`).
    if !value.is_empty() && !value.starts_with('-') && value.chars().all(plain) {
        Ok(value)
    } else {
        Err(format!(
            "{what} {value:?} holds characters a shell would interpret: not put into a command (ProxyCommand, Match exec)"
        ))
    }
}

/// OpenSSH 9.2's `%` tokens in `ProxyCommand`: `%h` host (after `HostName`), `%p` port, `%r`
/// remote user, `%n` the name as given, `%%` a `%`. Errors: any other token (OpenSSH stops at
/// it too: `%u` and `%d` are not ProxyCommand tokens in 9.2); a host, user or node name that is
/// not one plain shell word ([`shell_safe`]).
pub fn expand_tokens(
    s: &str,
    host: &str,
    port: u16,
    user: &str,
    original: &str,
) -> Result<String, String> {
    let conn = Conn {
        original: original.to_string(),
        host: host.to_string(),
        port,
        user: user.to_string(),
        key_alias: original.to_string(),
    };
    tokens::expand(s, Keyword::ProxyCommand, &conn, &Local::get())
}

/// The node's route beyond host, port, user and key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    /// Jump hosts, first to last.
    pub jump: Vec<Hop>,
    /// `ProxyCommand`, tokens expanded.
    pub proxy_command: Option<String>,
    /// Key files after the first (`Node::identity_file`), in order.
    pub more_identity_files: Vec<PathBuf>,
    pub identities_only: bool,
    pub known_hosts: Vec<PathBuf>,
    pub host_key_policy: Option<HostKeyPolicy>,
    pub connect_timeout: Option<Duration>,
}

/// One jump host `[user@]host[:port]` resolved through `cfg` as `ssh -l USER -p PORT HOST`
/// resolves it (its `HostName`, `Port`, `User`, keys and known_hosts options), and its own
/// `ProxyJump` (`none` dropped).
fn hop(
    cfg: Option<&ClientConfig>,
    user: Option<String>,
    host: &str,
    port: Option<u16>,
    warn: &mut Warnings,
) -> Result<(Hop, Option<String>), String> {
    let s = match cfg {
        Some(c) => query(c, host, user.as_deref(), port, warn)
            .map_err(|e| format!("jump host {host}: {e}"))?,
        None => HostSettings::default(),
    };
    let hop = Hop {
        host: s.host_name.clone().unwrap_or_else(|| host.to_string()),
        port: port.or(s.port).unwrap_or(22),
        login: Login {
            user: user
                .or_else(|| s.user.clone())
                .unwrap_or_else(super::local_user),
            identity_files: s.identity_files.clone(),
            identities_only: s.identities_only,
            certificate_file: s.certificate_file.clone(),
        },
        known_hosts: s.known_hosts.clone(),
        host_key_policy: s.host_key_policy,
    };
    Ok((
        hop,
        s.proxy_jump.filter(|j| !j.eq_ignore_ascii_case("none")),
    ))
}

/// The jump hosts of `list` (`-J` syntax), each resolved through `cfg`; the first one's own
/// `ProxyJump` comes before it, as in OpenSSH (the others are reached with `-J`, which
/// overrides theirs). Errors: a malformed list; a jump host whose own `ProxyJump` names itself
/// (OpenSSH 9.2 stops with "jumphost loop via HOST", or, when `HostName` renames it, starts ssh
/// after ssh without end); more than [`MAX_HOPS`] hosts (a longer loop).
pub fn jump_chain(
    cfg: Option<&ClientConfig>,
    list: &str,
    warn: &mut Warnings,
) -> Result<Vec<Hop>, String> {
    let mut chain: Vec<Hop> = Vec::new();
    let mut pending = Some(list.to_string());
    while let Some(list) = pending.take() {
        let mut hops = Vec::new();
        for (i, (user, host, port)) in parse_jump_list(&list)?.into_iter().enumerate() {
            let (h, own_jump) = hop(cfg, user, &host, port, warn)?;
            if i == 0
                && let Some(own) = &own_jump
                && let Some((_, next, next_port)) = parse_jump_list(own)?.pop()
                && (next == host || (next == h.host && next_port.unwrap_or(22) == h.port))
            {
                return Err(format!(
                    "jumphost loop via {host}: its own ProxyJump is `{own}` (a `Host *` block \
                     applies to the jump host too); OpenSSH 9.2 cannot connect through it either. \
                     Put `Host {host}` with `ProxyJump none` before that block"
                ));
            }
            if i == 0 {
                pending = own_jump;
            }
            hops.push(h);
        }
        hops.append(&mut chain);
        chain = hops;
        if chain.len() > MAX_HOPS {
            return Err(format!(
                "jump host chain longer than {MAX_HOPS} hosts (a ProxyJump loop in ~/.ssh/config?)"
            ));
        }
    }
    Ok(chain)
}

/// The route to a node named `original` (as the inventory gives its host), reached at
/// `host`:`port` as `user`. `jump` (the inventory's `jump`, `-J` syntax; `none` for none) is
/// ssh's `-J`: it wins over `~/.ssh/config`'s `ProxyJump` and `ProxyCommand`; of those two the
/// first one obtained wins, as in OpenSSH ([`query`]). `settings` is `cfg`'s answer for
/// `original`.
///
/// Errors: a malformed jump list, a jump loop, an unknown `%` token.
#[allow(clippy::too_many_arguments)]
pub fn route(
    cfg: Option<&ClientConfig>,
    settings: &HostSettings,
    original: &str,
    host: &str,
    port: u16,
    user: &str,
    jump: Option<&str>,
    warn: &mut Warnings,
) -> Result<Route, String> {
    let mut r = Route {
        more_identity_files: settings.identity_files.iter().skip(1).cloned().collect(),
        identities_only: settings.identities_only,
        known_hosts: settings.known_hosts.clone(),
        host_key_policy: settings.host_key_policy,
        connect_timeout: settings.connect_timeout,
        ..Route::default()
    };
    if let Some(j) = jump
        .map(str::to_string)
        .or_else(|| settings.proxy_jump.clone())
    {
        r.jump = jump_chain(cfg, &j, warn)?;
    } else if let Some(c) = settings
        .proxy_command
        .as_ref()
        .filter(|c| !c.eq_ignore_ascii_case("none"))
    {
        r.proxy_command = Some(expand_tokens(c, host, port, user, original)?);
    }
    Ok(r)
}

impl super::Node {
    /// How the probe reaches this node ([`crate::probe::endpoint::Endpoint`]).
    pub fn endpoint(&self) -> crate::probe::endpoint::Endpoint {
        use crate::probe::endpoint::{Endpoint, Hop, Login};
        let r = &self.route;
        Endpoint {
            name: self.name.clone(),
            target: Hop {
                host: self.host.clone(),
                port: self.port,
                login: Login {
                    user: self.user.clone(),
                    identity_files: self
                        .identity_file
                        .iter()
                        .chain(&r.more_identity_files)
                        .cloned()
                        .collect(),
                    identities_only: r.identities_only,
                    certificate_file: self.certificate_file.clone(),
                },
                known_hosts: r.known_hosts.clone(),
                host_key_policy: r.host_key_policy,
            },
            root: self.root.clone(),
            jump: r.jump.clone(),
            proxy_command: r.proxy_command.clone(),
            connect_timeout: r.connect_timeout,
        }
    }
}

impl From<&super::Node> for crate::probe::endpoint::Endpoint {
    fn from(n: &super::Node) -> Self {
        n.endpoint()
    }
}

impl From<super::Node> for crate::probe::endpoint::Endpoint {
    fn from(n: super::Node) -> Self {
        n.endpoint()
    }
}

#[cfg(test)]
mod tests;
