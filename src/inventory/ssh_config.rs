//! `~/.ssh/config` as gpufleet honours it (docs/ssh.md): read with the `ssh2-config` crate,
//! then turned into the probe's per-node SSH route (jump hosts, `ProxyCommand`, key and
//! known_hosts options). A directive gpufleet does not honour is warned about once per scan,
//! never silently dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ssh2_config::{HostParams, ParseRule, SshConfig};

use crate::probe::endpoint::{Hop, Login, parse_jump_list};

mod include;
use crate::probe::ssh::HostKeyPolicy;

/// How many jump hosts a chain may have, jump hosts' own `ProxyJump` included (a loop in the
/// config ends here).
const MAX_HOPS: usize = 8;

/// An OpenSSH client config as gpufleet reads it: `ssh2-config` for everything but `Match`,
/// which it does not know; gpufleet evaluates `Match` blocks of the main file itself (see
/// [`Criterion`]) and asks `ssh2-config` again with the blocks that match turned on.
pub struct ClientConfig {
    /// The file's lines, each `Match` line replaced by `Host !*` (a block for no host).
    lines: Vec<String>,
    /// The `Match` blocks: their line index and criteria (`None`: one gpufleet cannot evaluate,
    /// warned at load; the block then applies to no host).
    blocks: Vec<(usize, Option<Vec<Criterion>>)>,
    /// The config with every `Match` block off.
    base: SshConfig,
    /// The config per set of matching blocks, parsed once each.
    variants: std::sync::Mutex<std::collections::HashMap<Vec<bool>, SshConfig>>,
    /// `Match exec` results by expanded command line, run once each.
    execs: std::sync::Mutex<std::collections::HashMap<String, bool>>,
}

/// One `Match` criterion (ssh_config(5) "Match"), negated with `!`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Criterion {
    /// `all` (and `final`: gpufleet reads the config once, as OpenSSH's final pass).
    All(bool),
    /// `host PATTERNS`: the host name after `HostName`.
    Host(bool, String),
    /// `originalhost PATTERNS`: the name as given.
    OriginalHost(bool, String),
    /// `user PATTERNS`: the remote user.
    User(bool, String),
    /// `localuser PATTERNS`.
    LocalUser(bool, String),
    /// `exec COMMAND`: `sh -c COMMAND` (tokens `%h %p %r %n %u %d %%` expanded) exits 0.
    Exec(bool, String),
}

/// Splits a `Match` line's arguments into criteria. `None` for a criterion gpufleet does not
/// evaluate (`canonical`, `tagged`, `localnetwork`, …) or a malformed line.
fn criteria(args: &str) -> Option<Vec<Criterion>> {
    let words = shlex::split(args)?;
    let mut out = Vec::new();
    let mut it = words.into_iter();
    while let Some(w) = it.next() {
        let (neg, name) = match w.strip_prefix('!') {
            Some(n) => (true, n.to_ascii_lowercase()),
            None => (false, w.to_ascii_lowercase()),
        };
        let c = match name.as_str() {
            "all" | "final" => Criterion::All(neg),
            "host" => Criterion::Host(neg, it.next()?),
            "originalhost" => Criterion::OriginalHost(neg, it.next()?),
            "user" => Criterion::User(neg, it.next()?),
            "localuser" => Criterion::LocalUser(neg, it.next()?),
            "exec" => Criterion::Exec(neg, it.next()?),
            _ => return None,
        };
        out.push(c);
    }
    (!out.is_empty()).then_some(out)
}

/// ssh_config(5) "PATTERNS": a comma-separated list of `*`/`?` patterns, `!` negating; matches
/// when one pattern matches and no negated one does.
fn pattern_list(list: &str, s: &str) -> bool {
    let mut hit = false;
    for p in list.split(',') {
        let (neg, p) = match p.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, p),
        };
        if ssh2_config::HostClause::new(p.to_string(), false).intersects(s) {
            if neg {
                return false;
            }
            hit = true;
        }
    }
    hit
}

fn parse_lines(lines: &[String], path: &Path) -> Result<SshConfig, String> {
    let text = lines.join("\n");
    let mut config = SshConfig::default();
    if let Some(home) = include::home() {
        // The home [`include::check`] resolved the `Include`s against.
        config = config.home_dir(home);
    }
    config
        .parse(
            &mut std::io::BufReader::new(text.as_bytes()),
            ParseRule::ALLOW_UNKNOWN_FIELDS | ParseRule::ALLOW_UNSUPPORTED_FIELDS,
        )
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads an OpenSSH client config file: [`parse`] on its text.
///
/// Errors: the file cannot be read, is over 16 MiB ([`crate::limits::Kind::SshConfig`]) or
/// does not parse (`file: message`).
pub fn load(path: &Path) -> Result<(ClientConfig, Vec<String>), String> {
    let text = crate::limits::read_to_string(path, crate::limits::Kind::SshConfig)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, path)
}

/// Parses a client config; `path` names it in messages. `Match` blocks with criteria gpufleet
/// cannot evaluate are warned (with `file:line`) and apply to no host.
///
/// Returns the config and its warnings (raw: the caller escapes them where it shows them).
/// Errors: text `ssh2-config` does not parse; an `Include`
/// that reaches something other than a regular file, or a file over 16 MiB (`file:line: Include
/// ARG: …`, checked before the crate reads it: [`include::check`]).
pub fn parse(text: &str, path: &Path) -> Result<(ClientConfig, Vec<String>), String> {
    include::check(text, path, include::home().as_deref())?;
    let mut warnings = Vec::new();
    let mut lines = Vec::new();
    let mut blocks = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let word_end = t
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(t.len());
        if t[..word_end].eq_ignore_ascii_case("match") {
            let args = t[word_end..].trim_start_matches(|c: char| c.is_whitespace() || c == '=');
            let args = args.split(" #").next().unwrap_or("").trim();
            let parsed = criteria(args);
            if parsed.is_none() {
                warnings.push(format!(
                    "{}:{}: `{}`: gpufleet evaluates Match all, host, originalhost, user, localuser and exec only; this block is ignored",
                    path.display(),
                    i + 1,
                    line.trim()
                ));
            }
            blocks.push((lines.len(), parsed));
            lines.push("Host !*".to_string());
        } else {
            lines.push(line.to_string());
        }
    }
    let base = parse_lines(&lines, path)?;
    Ok((
        ClientConfig {
            lines,
            blocks,
            base,
            variants: Default::default(),
            execs: Default::default(),
        },
        warnings,
    ))
}

impl ClientConfig {
    /// Whether the criteria all hold for a connection to `original` (`host` after HostName) as
    /// `user` on `port`.
    fn holds(&self, cs: &[Criterion], original: &str, host: &str, user: &str, port: u16) -> bool {
        cs.iter().all(|c| match c {
            Criterion::All(neg) => !neg,
            Criterion::Host(neg, p) => pattern_list(p, host) != *neg,
            Criterion::OriginalHost(neg, p) => pattern_list(p, original) != *neg,
            Criterion::User(neg, p) => pattern_list(p, user) != *neg,
            Criterion::LocalUser(neg, p) => pattern_list(p, &super::local_user()) != *neg,
            Criterion::Exec(neg, cmd) => {
                let Ok(cmd) = expand_tokens(cmd, host, port, user, original) else {
                    return false;
                };
                let mut execs = self
                    .execs
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let ok = *execs
                    .entry(cmd.clone())
                    .or_insert_with(|| match_exec(&cmd, MATCH_EXEC_LIMIT));
                ok != *neg
            }
        })
    }

    /// `ssh2-config`'s answer for `original`, with the `Match` blocks that hold for it turned
    /// on. `user` is the login user the inventory gives, if any (else the config's `User`,
    /// else the local user).
    fn params(&self, original: &str, user: Option<&str>) -> HostParams {
        let base = self.base.query(original);
        if self.blocks.is_empty() {
            return base;
        }
        let host = base
            .host_name
            .clone()
            .unwrap_or_else(|| original.to_string());
        let user = user
            .map(str::to_string)
            .or_else(|| base.user.clone())
            .unwrap_or_else(super::local_user);
        let port = base.port.unwrap_or(22);
        let on: Vec<bool> = self
            .blocks
            .iter()
            .map(|(_, c)| {
                c.as_ref()
                    .is_some_and(|c| self.holds(c, original, &host, &user, port))
            })
            .collect();
        if !on.contains(&true) {
            return base;
        }
        let mut variants = self
            .variants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(v) = variants.get(&on) {
            return v.query(original);
        }
        let mut lines = self.lines.clone();
        for ((at, _), yes) in self.blocks.iter().zip(&on) {
            if *yes {
                lines[*at] = "Host *".to_string();
            }
        }
        // The same text as `base` but for `Host` lines: it parses.
        match parse_lines(&lines, Path::new("")) {
            Ok(v) => {
                let p = v.query(original);
                variants.insert(on, v);
                p
            }
            Err(_) => base,
        }
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
    pub certificate_file: Option<PathBuf>,
    pub identities_only: bool,
    /// `ProxyJump`, as written (`none` included).
    pub proxy_jump: Option<String>,
    /// `ProxyCommand`, tokens unexpanded (`none` included).
    pub proxy_command: Option<String>,
    pub known_hosts: Vec<PathBuf>,
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

/// Queries `cfg` for `host` (the name as given, before `HostName`) logging in as `user` (the
/// inventory's, when it gives one), warning once for each directive that applies and is not
/// honoured.
pub fn query(
    cfg: &ClientConfig,
    host: &str,
    user: Option<&str>,
    warn: &mut Warnings,
) -> HostSettings {
    let p: HostParams = cfg.params(host, user);
    let mut s = HostSettings {
        host_name: p.host_name.clone(),
        port: p.port,
        user: p.user.clone(),
        identity_files: p.identity_file.clone().unwrap_or_default(),
        certificate_file: p.certificate_file.clone(),
        proxy_jump: p.proxy_jump.as_ref().map(|j| j.join(",")),
        connect_timeout: p.connect_timeout,
        ..HostSettings::default()
    };
    for (field, args) in &p.unsupported_fields {
        match field.to_ascii_lowercase().as_str() {
            "identitiesonly" => match yes(args) {
                Some(b) => s.identities_only = b,
                None => warn.once(&format!("IdentitiesOnly {}", args.join(" ")), host),
            },
            "proxycommand" => s.proxy_command = Some(args.join(" ")),
            "userknownhostsfile" => {
                s.known_hosts = args
                    .iter()
                    .filter(|a| !a.eq_ignore_ascii_case("none"))
                    .map(|a| super::expand_home(a, Path::new("/")))
                    .collect();
            }
            "stricthostkeychecking" => {
                match args.first().map(|a| a.to_ascii_lowercase()).as_deref() {
                    Some("yes" | "ask") => s.host_key_policy = Some(HostKeyPolicy::Strict),
                    Some("accept-new") => s.host_key_policy = Some(HostKeyPolicy::AcceptNew),
                    // gpufleet never accepts a changed key: `no` is taken as `accept-new`.
                    Some("no" | "off") => {
                        s.host_key_policy = Some(HostKeyPolicy::AcceptNew);
                        warn.once("StrictHostKeyChecking no (taken as accept-new: a changed host key is still refused)", host);
                    }
                    _ => warn.once(&format!("StrictHostKeyChecking {}", args.join(" ")), host),
                }
            }
            _ => warn.once(field, host),
        }
    }
    for field in p.ignored_fields.keys() {
        warn.once(field, host);
    }
    let set: [(&str, bool); 16] = [
        ("AddKeysToAgent", p.add_keys_to_agent.is_some()),
        ("BindAddress", p.bind_address.is_some()),
        ("BindInterface", p.bind_interface.is_some()),
        (
            "CASignatureAlgorithms",
            !p.ca_signature_algorithms.is_default(),
        ),
        ("Ciphers", !p.ciphers.is_default()),
        ("Compression", p.compression.is_some()),
        ("ConnectionAttempts", p.connection_attempts.is_some()),
        ("ForwardAgent", p.forward_agent.is_some()),
        ("HostKeyAlgorithms", !p.host_key_algorithms.is_default()),
        ("KexAlgorithms", !p.kex_algorithms.is_default()),
        ("MACs", !p.mac.is_default()),
        (
            "PubkeyAcceptedAlgorithms",
            !p.pubkey_accepted_algorithms.is_default(),
        ),
        ("PubkeyAuthentication", p.pubkey_authentication.is_some()),
        ("RemoteForward", !p.remote_forward.is_empty()),
        ("ServerAliveInterval", p.server_alive_interval.is_some()),
        ("TCPKeepAlive", p.tcp_keep_alive.is_some()),
    ];
    for (name, present) in set {
        if present {
            warn.once(name, host);
        }
    }
    s
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

/// OpenSSH's `%` tokens in `ProxyCommand`: `%h` host (after `HostName`), `%p` port, `%r`
/// remote user, `%n` the name as given, `%u` the local user, `%d` the local home folder, `%%`
/// a `%`. Errors: any other token (OpenSSH refuses them too); a host, user or node name that is
/// not one plain shell word ([`shell_safe`]).
pub fn expand_tokens(
    s: &str,
    host: &str,
    port: u16,
    user: &str,
    original: &str,
) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('h') => out.push_str(shell_safe("host name", host)?),
            Some('p') => out.push_str(&port.to_string()),
            Some('r') => out.push_str(shell_safe("user name", user)?),
            Some('n') => out.push_str(shell_safe("node name", original)?),
            Some('u') => out.push_str(&super::local_user()),
            Some('d') => out.push_str(
                &directories::BaseDirs::new()
                    .map(|d| d.home_dir().display().to_string())
                    .unwrap_or_default(),
            ),
            Some('%') => out.push('%'),
            Some(o) => return Err(format!("{s:?}: unknown token %{o}")),
            None => return Err(format!("{s:?}: `%` at the end")),
        }
    }
    Ok(out)
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

/// One jump host `[user@]host[:port]` resolved through `cfg` as `ssh` resolves it (its
/// `HostName`, `Port`, `User`, keys and known_hosts options).
fn hop(
    cfg: Option<&ClientConfig>,
    user: Option<String>,
    host: &str,
    port: Option<u16>,
    warn: &mut Warnings,
) -> (Hop, Option<String>) {
    let s = cfg
        .map(|c| query(c, host, user.as_deref(), warn))
        .unwrap_or_default();
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
    (
        hop,
        s.proxy_jump.filter(|j| !j.eq_ignore_ascii_case("none")),
    )
}

/// The jump hosts of `list` (`-J` syntax), each resolved through `cfg`; the first one's own
/// `ProxyJump` comes before it, as in OpenSSH. Errors: a malformed list, or more than
/// [`MAX_HOPS`] hosts (a loop).
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
            let (h, own_jump) = hop(cfg, user, &host, port, warn);
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
/// `host`:`port` as `user`: `jump` (the inventory's `jump`, `-J` syntax) wins over
/// `~/.ssh/config`'s `ProxyJump`, and either over its `ProxyCommand` (OpenSSH takes the first
/// one it reads; gpufleet says when both apply). `settings` is `cfg`'s answer for `original`.
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
    let jump = jump
        .map(str::to_string)
        .or_else(|| settings.proxy_jump.clone());
    let command = settings
        .proxy_command
        .clone()
        .filter(|c| !c.eq_ignore_ascii_case("none"));
    match (jump, command) {
        (Some(j), command) => {
            r.jump = jump_chain(cfg, &j, warn)?;
            if command.is_some() && !r.jump.is_empty() {
                warn.once("ProxyCommand (ProxyJump also applies and wins)", original);
            }
            if r.jump.is_empty()
                && let Some(c) = command
            {
                r.proxy_command = Some(expand_tokens(&c, host, port, user, original)?);
            }
        }
        (None, Some(c)) => r.proxy_command = Some(expand_tokens(&c, host, port, user, original)?),
        (None, None) => {}
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
