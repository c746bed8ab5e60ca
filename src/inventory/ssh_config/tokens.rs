//! ssh_config(5) "TOKENS" as OpenSSH 9.2 expands them, per keyword (ssh.c, sshconnect.c,
//! readconf.c): `HostName` takes `%%` `%h`; `IdentityFile`, `CertificateFile` and
//! `UserKnownHostsFile` take `~` then `%%` `%C` `%L` `%d` `%h` `%i` `%k` `%l` `%n` `%p` `%r`
//! `%u` and `${VAR}`; `ProxyCommand` takes `%%` `%h` `%n` `%p` `%r`; `Match exec` the set of
//! `IdentityFile` without `${VAR}`. Any other token is an error, as `ssh` stops at it.

use sha1::Digest;

/// The facts a token stands for, for one connection.
#[derive(Debug, Clone)]
pub(super) struct Conn {
    /// `%n`: the name as given.
    pub original: String,
    /// `%h`: the host name after `HostName`.
    pub host: String,
    /// `%p`.
    pub port: u16,
    /// `%r`.
    pub user: String,
    /// `%k`: `HostKeyAlias`, else the name as given (the host for `Match exec`).
    pub key_alias: String,
}

/// The local facts: `%u` user name and `%d` home (the password database's, as OpenSSH takes
/// them), `%i` uid, `%l` host name, `%L` its first label.
#[derive(Debug, Clone)]
pub(super) struct Local {
    pub user: String,
    pub home: String,
    pub uid: u32,
    pub host: String,
}

impl Local {
    pub fn get() -> Local {
        let uid = nix::unistd::getuid();
        let pw = nix::unistd::User::from_uid(uid).ok().flatten();
        Local {
            user: pw
                .as_ref()
                .map(|p| p.name.clone())
                .unwrap_or_else(super::super::local_user),
            home: pw
                .as_ref()
                .map(|p| p.dir.display().to_string())
                .or_else(|| super::include::home().map(|h| h.display().to_string()))
                .unwrap_or_default(),
            uid: uid.as_raw(),
            host: nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_default(),
        }
    }
}

/// Which keyword a value belongs to (its token set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keyword {
    HostName,
    /// IdentityFile, CertificateFile, UserKnownHostsFile (`~` and `${VAR}` too).
    File,
    ProxyCommand,
    MatchExec,
}

impl Keyword {
    fn tokens(self) -> &'static str {
        match self {
            Keyword::HostName => "h",
            Keyword::File | Keyword::MatchExec => "CLdhiklnpru",
            Keyword::ProxyCommand => "hnpr",
        }
    }
}

/// `s` with its tokens expanded for `kw`. Errors: a token `kw` does not take, `%` at the end,
/// an undefined `${VAR}`, `~user` for a user with no passwd entry.
pub(super) fn expand(s: &str, kw: Keyword, c: &Conn, l: &Local) -> Result<String, String> {
    let s = if kw == Keyword::File {
        tilde(s, l)?
    } else {
        s.to_string()
    };
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '$' && kw == Keyword::File && chars.peek() == Some(&'{') {
            chars.next();
            let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
            match std::env::var(&name) {
                Ok(v) => out.push_str(&v),
                Err(_) => {
                    return Err(format!(
                        "{s:?}: environment variable ${{{name}}} is not defined"
                    ));
                }
            }
            continue;
        }
        if ch != '%' {
            out.push(ch);
            continue;
        }
        let Some(t) = chars.next() else {
            return Err(format!("{s:?}: `%` at the end (OpenSSH: invalid format)"));
        };
        if t == '%' {
            out.push('%');
            continue;
        }
        if !kw.tokens().contains(t) {
            let takes: Vec<String> = std::iter::once("%%".to_string())
                .chain(kw.tokens().chars().map(|c| format!("%{c}")))
                .collect();
            return Err(format!(
                "{s:?}: unknown token %{t} (OpenSSH stops at it; this keyword takes {})",
                takes.join(" ")
            ));
        }
        let short = l.host.split('.').next().unwrap_or("");
        let v = match t {
            'C' => connection_hash(&l.host, &c.host, c.port, &c.user),
            'L' => short.to_string(),
            'd' => l.home.clone(),
            'h' => c.host.clone(),
            'i' => l.uid.to_string(),
            'k' => c.key_alias.clone(),
            'l' => l.host.clone(),
            'n' => c.original.clone(),
            'p' => c.port.to_string(),
            'r' => c.user.clone(),
            _ => l.user.clone(),
        };
        // A command runs through `sh -c`: names from an inventory never become shell code.
        if matches!(kw, Keyword::ProxyCommand | Keyword::MatchExec) && "hnrk".contains(t) {
            let what = match t {
                'h' => "host name",
                'r' => "user name",
                _ => "node name",
            };
            super::shell_safe(what, &v)?;
        }
        out.push_str(&v);
    }
    Ok(out)
}

/// `%C`: SHA-1 of `%l%h%p%r`, in hex (OpenSSH 9.2's ssh_connection_hash).
fn connection_hash(this: &str, host: &str, port: u16, user: &str) -> String {
    let mut h = sha1::Sha1::new();
    h.update(this.as_bytes());
    h.update(host.as_bytes());
    h.update(port.to_string().as_bytes());
    h.update(user.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// tilde_expand_filename: `~` and `~/…` the local home, `~user/…` that user's.
pub(super) fn tilde(s: &str, l: &Local) -> Result<String, String> {
    let Some(rest) = s.strip_prefix('~') else {
        return Ok(s.to_string());
    };
    let (user, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let home = if user.is_empty() {
        l.home.clone()
    } else {
        nix::unistd::User::from_name(user)
            .ok()
            .flatten()
            .map(|p| p.dir.display().to_string())
            .ok_or_else(|| format!("{s:?}: no such user `{user}`"))?
    };
    let home = home.trim_end_matches('/');
    Ok(format!("{home}{path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_per_keyword() {
        let c = Conn {
            original: "gpu01".into(),
            host: "gpu01.example.com".into(),
            port: 22,
            user: "root".into(),
            key_alias: "gpu01".into(),
        };
        let l = Local {
            user: "op".into(),
            home: "/home/op".into(),
            uid: 1000,
            host: "vm".into(),
        };
        assert_eq!(
            expand("%h.x%%", Keyword::HostName, &c, &l).unwrap(),
            "gpu01.example.com.x%"
        );
        assert!(
            expand("%p", Keyword::HostName, &c, &l)
                .unwrap_err()
                .contains("unknown token %p")
        );
        assert_eq!(
            expand("~/.ssh/id_%h_%r_%p_%n_%u_%d_%i_%L", Keyword::File, &c, &l).unwrap(),
            "/home/op/.ssh/id_gpu01.example.com_root_22_gpu01_op_/home/op_1000_vm"
        );
        // The value OpenSSH 9.2 gives (ssh -v) for this connection from host `vm`.
        assert_eq!(
            expand("/k/%C", Keyword::File, &c, &l).unwrap(),
            "/k/50439e371daa8106559e926b6b1654db9e579239"
        );
        assert!(expand("nc %h %u", Keyword::ProxyCommand, &c, &l).is_err());
        assert!(expand("/k/%", Keyword::File, &c, &l).is_err());
    }
}
