//! Names that reach a command line on the write side, validated per tool before a plan is made
//! (pure). A name from an inventory, a Slurm or Kubernetes node list, or a node itself is
//! hostile input: one that a tool would read as an option (`--selector=…`, `-l`), as many
//! nodes (`gpu[1-9]`, `a,b`), or that a shell would interpret (`$(…)`, `;`, a newline) is
//! refused with the rule it breaks, and nothing runs (docs/domain.md, "Names on the write side").
//!
//! - Kubernetes node names: an RFC 1123 subdomain as the API server validates it
//!   (`k8s.io/apimachinery: pkg/util/validation/validation.go`, `IsDNS1123Subdomain`:
//!   `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`, at most 253 characters).
//! - Slurm node names: one node, never a hostlist expression: no `,` `[` `]` (hostlist syntax,
//!   `scontrol update NodeName=gpu[001-512]` would drain 512 nodes), no `=` (another key), no
//!   whitespace or control character, not starting with `-`, and none of the characters
//!   OpenSSH refuses in host names (below): a Slurm node name is a host name.
//! - SSH hosts: as OpenSSH's `valid_hostname` accepts them (`openssh-portable: misc.c`, since
//!   9.6): not empty, not starting with `-`, no whitespace, control character or any of
//!   ``'`"$\;&<>|(){},``. Host names, aliases like `gpu_01`, IPv4 and IPv6 literals
//!   (`fe80::1%eth0`) pass.
//! - Names put into a shell command (a `command` drain backend's `{node}`, a recipe's
//!   `{node}`; quoted for the shell once, but the command may hand them on): the SSH host rule,
//!   and no `[` `]` `*` `?` (patterns, hostlists).
//! - SSH users: as OpenSSH's `valid_ruser`: not starting with `-`, no control character, none
//!   of ``'`";&<>|(){}``, no whitespace followed by `-`, no `\` at the end.
//! - Root prefixes: an absolute path without control characters (they start every node-side
//!   path: a relative one could start with `-`).

/// What is wrong with `name` as a Kubernetes node name, or `None` when it is one.
pub fn kubernetes_node(name: &str) -> Option<String> {
    const RULE: &str = "an RFC 1123 subdomain: lowercase letters, digits, `-` and `.`, each dot-separated part starting and ending with a letter or digit, at most 253 characters";
    if name.is_empty() || name.len() > 253 {
        return Some(format!("not a Kubernetes node name ({RULE})"));
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    if name.split('.').all(label_ok) {
        None
    } else {
        Some(format!("not a Kubernetes node name ({RULE})"))
    }
}

/// What is wrong with `name` as one Slurm node name, or `None` when it is one.
pub fn slurm_node(name: &str) -> Option<String> {
    let bad = if name.is_empty() {
        Some("it is empty")
    } else if name.starts_with('-') {
        Some("it starts with `-`")
    } else if name.contains([',', '[', ']']) {
        Some("`,` `[` `]` make it a hostlist of many nodes")
    } else if name.contains('=') {
        Some("`=` starts another key")
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("it holds whitespace or a control character")
    } else if !openssh_hostname(name) {
        Some("it holds a quote or a shell metacharacter (one of '`\"$\\;&<>|(){})")
    } else {
        None
    };
    bad.map(|b| format!("not one Slurm node name ({b})"))
}

/// Whether OpenSSH's `valid_hostname` accepts `s` (and it is not empty).
fn openssh_hostname(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && !s
            .chars()
            .any(|c| "'`\"$\\;&<>|(){},".contains(c) || c.is_whitespace() || c.is_control())
}

/// What is wrong with `host` as an SSH host, or `None` when OpenSSH accepts it.
pub fn ssh_host(host: &str) -> Option<String> {
    (!openssh_hostname(host)).then(|| {
        "not a host OpenSSH accepts (empty, a leading `-`, whitespace, a control character, or one of '`\"$\\;&<>|(){},)".to_string()
    })
}

/// What is wrong with `name` as a word put into a shell command (a `command` drain backend's
/// `{node}`, a recipe's `{node}`), or `None`: the rule of [`ssh_host`], and no `[` `]` `*` `?`
/// (a glob, or a hostlist for the scheduler command it may go into).
pub fn shell_name(name: &str) -> Option<String> {
    (!openssh_hostname(name) || name.contains(['[', ']', '*', '?'])).then(|| {
        "not a plain name (empty, a leading `-`, whitespace, a control character, or one of '`\"$\\;&<>|(){},[]*?): the command it goes into could read it as an option, a pattern or shell".to_string()
    })
}

/// What is wrong with `user` as an SSH login user, or `None` when OpenSSH's `valid_ruser`
/// accepts it.
pub fn ssh_user(user: &str) -> Option<String> {
    let c: Vec<char> = user.chars().collect();
    let bad = user.is_empty()
        || user.starts_with('-')
        || c.iter().enumerate().any(|(i, ch)| {
            ch.is_control()
                || "'`\";&<>|(){}".contains(*ch)
                || (ch.is_whitespace() && c.get(i + 1) == Some(&'-'))
                || (*ch == '\\' && i + 1 == c.len())
        });
    bad.then(|| {
        "not a user OpenSSH accepts (empty, a leading `-`, a control character, one of '`\";&<>|(){}, whitespace before `-`, or `\\` at the end)".to_string()
    })
}

/// What is wrong with `root` as a root prefix, or `None` when it is an absolute path without
/// control characters.
pub fn root_prefix(root: &str) -> Option<String> {
    if !root.starts_with('/') {
        Some("not an absolute path".into())
    } else if root.chars().any(char::is_control) {
        Some("it holds a control character".into())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of issue 20: every backend refuses them (all but `gpu[1-9]`, a fine SSH host).
    const HOSTILE: &[&str] = &[
        "--selector=nvidia.com/gpu.present=true",
        "-l",
        "gpu[1-9]",
        "a,b",
        "$(touch x)",
        "gpu1;reboot",
        ";",
        "gpu1\ngpu2",
        "-oProxyCommand=touch x",
        "",
    ];

    #[test]
    fn kubernetes_names_are_rfc_1123_subdomains() {
        for ok in [
            "gpu01",
            "gpu-01.k8s.local",
            "a",
            "0",
            "ip-10-0-0-1.ec2.internal",
        ] {
            assert_eq!(kubernetes_node(ok), None, "{ok}");
        }
        let long = "a".repeat(254);
        for bad in HOSTILE.iter().copied().chain([
            "GPU01",
            "gpu_01",
            "gpu01.",
            ".gpu01",
            "gpu..01",
            "-gpu",
            "gpu-",
            "gpü",
            long.as_str(),
        ]) {
            assert!(kubernetes_node(bad).is_some(), "{bad:?}");
        }
        assert_eq!(kubernetes_node(&"a".repeat(253)), None);
    }

    #[test]
    fn slurm_names_are_one_node() {
        for ok in ["gpu001", "gpu-01.cluster", "GPU_01", "node@x"] {
            assert_eq!(slurm_node(ok), None, "{ok}");
        }
        for bad in
            HOSTILE
                .iter()
                .copied()
                .chain(["gpu[001-512]", "a b", "x=y", "a\tb", "a\"b", "gpu'1"])
        {
            assert!(slurm_node(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn ssh_hosts_as_openssh_accepts_them() {
        for ok in [
            "gpu01",
            "gpu_01",
            "gpu-01.example.com",
            "10.0.0.1",
            "::1",
            "fe80::1%eth0",
            "2001:db8::1",
        ] {
            assert_eq!(ssh_host(ok), None, "{ok}");
            assert_eq!(shell_name(ok), None, "{ok}");
        }
        // A host OpenSSH takes, not a word for a scheduler command.
        for pattern in ["gpu[1-9]", "gpu*", "gpu?"] {
            assert_eq!(ssh_host(pattern), None, "{pattern}");
            assert!(shell_name(pattern).is_some(), "{pattern}");
        }
        for bad in HOSTILE.iter().copied().filter(|b| *b != "gpu[1-9]").chain([
            "a b", "a`b`", "a|b", "a&", "a>b", "a\\b", "a'b", "a\"b", "{a}", "\u{7f}",
        ]) {
            assert!(ssh_host(bad).is_some(), "{bad:?}");
            assert!(shell_name(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn ssh_users_as_openssh_accepts_them() {
        for ok in ["root", "ops", "first.last", "DOMAIN\\ops", "a b", "$x"] {
            assert_eq!(ssh_user(ok), None, "{ok}");
        }
        for bad in [
            "",
            "-oProxyCommand=x",
            "a -b",
            "a;b",
            "a\nb",
            "ops\\",
            "$(x)",
        ] {
            assert!(ssh_user(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn root_prefixes_are_absolute() {
        assert_eq!(root_prefix("/"), None);
        // How a refusal quotes a name: escaped once, on one line.
        assert_eq!(
            crate::actions::drain::shown("a\nb\u{202e}\u{1b}"),
            r#""a\nb\u{202e}\u{1b}""#
        );
        assert_eq!(root_prefix("/srv/captures/gpu 1"), None);
        for bad in ["", "-x", "srv", "/a\nb"] {
            assert!(root_prefix(bad).is_some(), "{bad:?}");
        }
    }
}
