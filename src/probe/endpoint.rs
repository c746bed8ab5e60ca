//! How the probe reaches one node: the probe's own endpoint type, every setting resolved.
//!
//! The inventory builds it (`inventory::Node::endpoint`), with `~/.ssh/config` already applied
//! (docs/ssh.md lists what is honoured); the probe (`super::ssh`, `super::scan`) takes only
//! this type and knows nothing of inventories.

use std::path::PathBuf;
use std::time::Duration;

use super::ssh::HostKeyPolicy;

/// Who logs in on one SSH server, and with which keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Login {
    /// The login user.
    pub user: String,
    /// Private key files (OpenSSH format), in the order they are offered. Empty: the ssh-agent's
    /// keys, then ~/.ssh/id_ed25519, id_ecdsa, id_rsa.
    pub identity_files: Vec<PathBuf>,
    /// OpenSSH `IdentitiesOnly yes`: of the ssh-agent's keys, offer only those matching
    /// `identity_files`.
    pub identities_only: bool,
    /// An OpenSSH user certificate for the key (default: `<key>-cert.pub` beside it, if present).
    pub certificate_file: Option<PathBuf>,
}

/// One SSH server on the way: a jump host, or the node itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hop {
    /// DNS name or address literal (after `HostName`), as it is looked up in known_hosts.
    pub host: String,
    /// TCP port.
    pub port: u16,
    pub login: Login,
    /// OpenSSH `UserKnownHostsFile`: the known_hosts files for this server instead of the
    /// scan's (the inventory's and `--known-hosts` files still apply). Empty: the scan's.
    pub known_hosts: Vec<PathBuf>,
    /// OpenSSH `StrictHostKeyChecking` for this server; `None`: the scan's policy.
    pub host_key_policy: Option<HostKeyPolicy>,
}

impl Hop {
    /// `host:port`, for messages (`[v6]:port` for an IPv6 literal).
    pub fn target(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// How to reach one node and what to probe there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// The inventory name (reports carry it).
    pub name: String,
    /// The node's SSH server.
    pub target: Hop,
    /// Root prefix the probe reads under on the node (`/` for the node itself).
    pub root: String,
    /// OpenSSH `ProxyJump`: the jump hosts, first to last; the node is reached from the last
    /// one over a `direct-tcpip` channel. Empty: a direct connection (or `proxy_command`).
    pub jump: Vec<Hop>,
    /// OpenSSH `ProxyCommand`: a shell command line run here (through `sh -c`) whose stdin and
    /// stdout carry the SSH connection, `%h %p %r %n %%` already expanded. Never set together
    /// with `jump`.
    pub proxy_command: Option<String>,
    /// OpenSSH `ConnectTimeout` for this node: replaces `[ssh] connect_timeout` (name
    /// resolution + TCP connect, per hop).
    pub connect_timeout: Option<Duration>,
}

impl Endpoint {
    /// A node reached directly as `user`, root prefix `/`, nothing else set.
    pub fn direct(name: &str, host: &str, port: u16, user: &str) -> Endpoint {
        Endpoint {
            name: name.into(),
            target: Hop {
                host: host.into(),
                port,
                login: Login {
                    user: user.into(),
                    ..Login::default()
                },
                ..Hop::default()
            },
            root: "/".into(),
            ..Endpoint::default()
        }
    }
}

/// One entry of a `-J` list: the user (when given), the host, the port (when given).
pub type JumpSpec = (Option<String>, String, Option<u16>);

/// Parses an OpenSSH `-J` / `ProxyJump` list: `[user@]host[:port]` or
/// `ssh://[user@]host[:port]`, comma-separated (`ops@bastion:2222,b2`); an IPv6 literal is
/// written `[::1]:22` (or bare without a port). `none` is no jump host.
///
/// Returns `(user, host, port)` per hop, in order. Errors: an empty entry, host or user, a port
/// that is not 1–65535, or a host with whitespace or control characters.
pub fn parse_jump_list(s: &str) -> Result<Vec<JumpSpec>, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let spec = part.strip_prefix("ssh://").unwrap_or(part);
        if spec.is_empty() {
            return Err(format!("jump host list {s:?}: an entry is empty"));
        }
        let (user, rest) = match spec.rsplit_once('@') {
            Some(("", _)) => {
                return Err(format!("jump host {part:?}: the user before `@` is empty"));
            }
            Some((u, r)) => (Some(u.to_string()), r),
            None => (None, spec),
        };
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, after) = r
                .split_once(']')
                .ok_or_else(|| format!("jump host {part:?}: `[` without `]`"))?;
            match after.strip_prefix(':') {
                Some(p) => (h.to_string(), Some(p)),
                None if after.is_empty() => (h.to_string(), None),
                None => return Err(format!("jump host {part:?}: text after `]`")),
            }
        } else if rest.matches(':').count() > 1 {
            (rest.to_string(), None) // a bare IPv6 literal
        } else {
            match rest.split_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (rest.to_string(), None),
            }
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "jump host {part:?}: {host:?} is not a host name or address"
            ));
        }
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(format!("jump host {part:?}: port {p:?} is not 1-65535")),
            },
        };
        out.push((user, host, port));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jump_lists_parse_like_ssh_j() {
        assert_eq!(
            parse_jump_list("ops@bastion:2222, b2,ssh://root@[fd00::1]:22,::1").unwrap(),
            vec![
                (Some("ops".into()), "bastion".into(), Some(2222)),
                (None, "b2".into(), None),
                (Some("root".into()), "fd00::1".into(), Some(22)),
                (None, "::1".into(), None),
            ]
        );
        assert_eq!(parse_jump_list("none").unwrap(), vec![]);
        for bad in ["", "a,,b", "@h", "h:0", "h:x", "h:70000", "[::1", "a b"] {
            assert!(parse_jump_list(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            parse_jump_list("h:99999").unwrap_err(),
            "jump host \"h:99999\": port \"99999\" is not 1-65535"
        );
    }

    #[test]
    fn targets_bracket_ipv6() {
        let h = |host: &str| Hop {
            host: host.into(),
            port: 22,
            ..Hop::default()
        };
        assert_eq!(h("b").target(), "b:22");
        assert_eq!(h("::1").target(), "[::1]:22");
    }
}
