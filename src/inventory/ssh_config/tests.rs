//! Unit tests of `~/.ssh/config` as gpufleet honours it.

use super::*;

fn cfg(text: &str) -> (ClientConfig, Vec<String>) {
    parse(text, Path::new("/home/op/.ssh/config")).unwrap()
}

#[test]
fn jump_hosts_resolve_through_the_config_and_chain() {
    let (c, w) = cfg(
        "Host bastion\n  HostName 198.18.0.1\n  User jump\n  Port 2200\n  IdentityFile /k/jump\n  UserKnownHostsFile /k/kh\n\
             Host inner\n  ProxyJump bastion\n\
             Host gpu*\n  ProxyJump ops@inner:22,b3\n  IdentitiesOnly yes\n  ConnectTimeout 7\n",
    );
    assert!(w.is_empty(), "{w:?}");
    let mut warn = Warnings::default();
    let s = query(&c, "gpu01", None, None, &mut warn).unwrap();
    assert!(s.identities_only);
    assert_eq!(s.connect_timeout, Some(Duration::from_secs(7)));
    let r = route(Some(&c), &s, "gpu01", "gpu01", 22, "root", None, &mut warn).unwrap();
    let names: Vec<String> = r
        .jump
        .iter()
        .map(|h| format!("{}@{}", h.login.user, h.target()))
        .collect();
    // inner's own ProxyJump (bastion) comes first.
    assert_eq!(names[..2], ["jump@198.18.0.1:2200", "ops@inner:22"]);
    assert_eq!(
        names[2],
        format!("{}@b3:22", crate::inventory::local_user())
    );
    assert_eq!(r.jump[0].login.identity_files, [PathBuf::from("/k/jump")]);
    assert_eq!(r.jump[0].known_hosts, [PathBuf::from("/k/kh")]);
    assert!(warn.into_vec().is_empty());
    // The inventory's jump wins; `none` turns ProxyJump off.
    let mut warn = Warnings::default();
    let r = route(
        Some(&c),
        &s,
        "gpu01",
        "gpu01",
        22,
        "root",
        Some("none"),
        &mut warn,
    );
    assert_eq!(r.unwrap().jump, vec![]);
}

#[test]
fn a_jump_loop_is_an_error_not_a_hang() {
    let (c, _) = cfg("Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n");
    let mut warn = Warnings::default();
    let e = jump_chain(Some(&c), "a", &mut warn).unwrap_err();
    assert!(e.contains("longer than 8"), "{e}");
}

#[test]
fn proxy_command_tokens_expand_and_unknown_ones_are_refused() {
    let (c, _) = cfg("Host gpu*\n  ProxyCommand ssh -W %h:%p -l %r gw  %n 100%% \"a  b\"\n");
    let mut warn = Warnings::default();
    let s = query(&c, "gpu01", None, None, &mut warn).unwrap();
    let r = route(
        Some(&c),
        &s,
        "gpu01",
        "10.0.0.1",
        2222,
        "ops",
        None,
        &mut warn,
    )
    .unwrap();
    assert_eq!(
        r.proxy_command.as_deref(),
        Some("ssh -W 10.0.0.1:2222 -l ops gw  gpu01 100% \"a  b\"")
    );
    assert!(
        expand_tokens("nc %h %q", "h", 22, "u", "n")
            .unwrap_err()
            .contains("unknown token %q")
    );
    // OpenSSH 9.2's ProxyCommand takes %h %n %p %r %% only.
    assert!(expand_tokens("%u", "h", 22, "u", "n").is_err());
    // Names from an inventory never become shell code (CVE-2023-51385's lesson).
    for (host, user, node) in [
        ("h;touch /tmp/x", "u", "n"),
        ("h", "u$(id)", "n"),
        ("h", "u", "n`id`"),
        ("h h", "u", "n"),
        ("h", "u", "n\nid"),
        ("", "u", "n"),
        ("-oProxyCommand=id", "u", "n"),
    ] {
        let e = expand_tokens("nc %h %p %r %n", host, 22, user, node).unwrap_err();
        assert!(
            e.contains("holds characters a shell would interpret"),
            "{e}"
        );
    }
    assert_eq!(
        expand_tokens("nc %h %p", "[fe80::1]", 22, "u", "n").unwrap(),
        "nc [fe80::1] 22"
    );
}

#[test]
fn match_exec_is_bounded_in_time() {
    let limit = std::time::Duration::from_millis(300);
    assert!(match_exec("exit 0", limit));
    assert!(!match_exec("exit 1", limit));
    let start = std::time::Instant::now();
    assert!(!match_exec("sleep 30; exit 0", limit));
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn unhonoured_directives_warn_once_each() {
    let (c, w) = cfg(
        "Host gpu*\n  User ops\n  ForwardAgent yes\n  LocalForward 8080 x:80\n  Frobnicate 1\n",
    );
    assert!(w.is_empty());
    let mut warn = Warnings::default();
    for host in ["gpu01", "gpu02", "gpu03"] {
        query(&c, host, None, None, &mut warn).unwrap();
    }
    let w = warn.into_vec();
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(
        w.iter()
            .any(|m| m.contains("`ForwardAgent` (applies to gpu01)"))
    );
    assert!(w.iter().any(|m| m.contains("`LocalForward`")));
    assert!(w.iter().any(|m| m.contains("`Frobnicate`")));
}

#[test]
fn match_host_user_exec_and_all_are_evaluated_per_host_in_file_order() {
    let (c, w) = cfg("Host gpu*\n  User ops\n\
             Match host 10.0.0.* !originalhost gpu03\n  Port 2201\n\
             Match exec \"test %n = gpu02\"\n  Port 2202\n  User evil\n\
             Match user root\n  IdentityFile /k/root\n\
             Match localnetwork 10.0.0.0/8\n  Port 9\n\
             Match all\n  Port 2299\n\
             Host gpu01\n  HostName 10.0.0.1\nHost gpu03\n  HostName 10.0.0.3\n");
    // Only the criterion gpufleet cannot evaluate is warned, with its line.
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("/home/op/.ssh/config:10: `Match localnetwork 10.0.0.0/8`"),
        "{w:?}"
    );
    let mut warn = Warnings::default();
    let q = |h: &str, u: Option<&str>, warn: &mut Warnings| {
        let s = query(&c, h, u, None, warn).unwrap();
        (s.user, s.port, s.identity_files)
    };
    // gpu01: its HostName comes after the `Match host` line, which sees `gpu01` (as
    // `ssh -G`); `User ops` came first and stays.
    assert_eq!(
        q("gpu01", None, &mut warn),
        (Some("ops".into()), Some(2299), vec![])
    );
    // gpu02: only its exec block (and `all`) hold; the first Port obtained wins.
    assert_eq!(
        q("gpu02", None, &mut warn),
        (Some("ops".into()), Some(2202), vec![])
    );
    // gpu03: `!originalhost gpu03` turns the first block off.
    assert_eq!(
        q("gpu03", None, &mut warn),
        (Some("ops".into()), Some(2299), vec![])
    );
    // `Match user` sees the inventory's user.
    assert_eq!(
        q("other", Some("root"), &mut warn),
        (None, Some(2299), vec![PathBuf::from("/k/root")])
    );
    assert!(warn.into_vec().is_empty());
}

#[test]
fn strictness_and_known_hosts_files_are_read() {
    let (c, _) = cfg(
        "Host a\n  StrictHostKeyChecking accept-new\n  UserKnownHostsFile /x/kh1 /x/kh2\nHost b\n  StrictHostKeyChecking no\n",
    );
    let mut warn = Warnings::default();
    let a = query(&c, "a", None, None, &mut warn).unwrap();
    assert_eq!(a.host_key_policy, Some(HostKeyPolicy::AcceptNew));
    assert_eq!(
        a.known_hosts,
        [PathBuf::from("/x/kh1"), PathBuf::from("/x/kh2")]
    );
    assert!(warn.0.is_empty());
    let b = query(&c, "b", None, None, &mut warn).unwrap();
    assert_eq!(b.host_key_policy, Some(HostKeyPolicy::AcceptNew));
    assert!(warn.into_vec()[0].contains("taken as accept-new"));
}

/// `Host * ProxyJump bastion` applies to bastion too: OpenSSH 9.2 stops with "jumphost loop via
/// bastion" (or, when bastion has a HostName, starts ssh after ssh); gpufleet says so and how to
/// fix it, for the node behind it and for bastion itself.
#[test]
fn a_jump_host_that_jumps_through_itself_is_named() {
    for text in [
        "Host *\n  ProxyJump bastion\n",
        "Host bastion\n  HostName 198.18.0.1\nHost *\n  ProxyJump bastion\n",
    ] {
        let (c, _) = cfg(text);
        let mut warn = Warnings::default();
        let s = query(&c, "gpu01", None, None, &mut warn).unwrap();
        let e = route(Some(&c), &s, "gpu01", "gpu01", 22, "root", None, &mut warn).unwrap_err();
        assert!(e.starts_with("jumphost loop via bastion"), "{e}");
        assert!(e.contains("`ProxyJump none`"), "{e}");
    }
    // With `ProxyJump none` for bastion first, the chain is bastion alone.
    let (c, _) = cfg("Host bastion\n  ProxyJump none\nHost *\n  ProxyJump bastion\n");
    let mut warn = Warnings::default();
    let s = query(&c, "gpu01", None, None, &mut warn).unwrap();
    let r = route(Some(&c), &s, "gpu01", "gpu01", 22, "root", None, &mut warn).unwrap();
    assert_eq!(r.jump.len(), 1);
    assert_eq!(r.jump[0].host, "bastion");
}

/// Unknown tokens and bad lines are refused with file:line, as ssh refuses them.
#[test]
fn unknown_tokens_and_bad_lines_name_file_and_line() {
    let (c, _) = cfg("Host *\n  HostName %p.x\n");
    let e = query(&c, "a", None, None, &mut Warnings::default()).unwrap_err();
    assert!(
        e.starts_with("/home/op/.ssh/config:2: HostName") && e.contains("unknown token %p"),
        "{e}"
    );
    let (c, _) = cfg("Host *\n  IdentityFile ~/.ssh/id_%h\n  IdentityFile /k/%q\n");
    let e = query(&c, "a", None, None, &mut Warnings::default()).unwrap_err();
    assert!(e.starts_with("/home/op/.ssh/config:3: IdentityFile"), "{e}");
    for (text, says) in [
        ("Host a\n  Port x\n", ":2: Bad port"),
        ("Host a\n  User\n", ":2: no argument"),
        (
            "Host a\n  HostName a b\n",
            ":2: keyword HostName extra arguments",
        ),
        ("Match all host x\n", ":1: Bad Match condition"),
    ] {
        let e = parse(text, Path::new("/c")).err().unwrap();
        assert!(e.contains(says), "{text:?}: {e}");
    }
}

#[test]
fn the_system_config_is_warned_once_only_when_it_sets_what_gpufleet_honours() {
    let d = tempfile::tempdir().unwrap();
    let sys = d.path().join("ssh_config");
    // Absent: nothing to say.
    assert_eq!(system_config_warning(&sys), None);
    // Debian's default: nothing gpufleet would apply.
    let inc = d.path().join("ssh_config.d");
    std::fs::create_dir(&inc).unwrap();
    std::fs::write(
        &sys,
        format!(
            "Include {}/*.conf\nHost *\n    SendEnv LANG LC_*\n    HashKnownHosts yes\n    GSSAPIAuthentication yes\n",
            inc.display()
        ),
    )
    .unwrap();
    assert_eq!(system_config_warning(&sys), None);
    // An included file that sets a jump host: named with its file and line.
    std::fs::write(
        inc.join("10-site.conf"),
        "# site\nHost gpu*\n  ProxyJump bastion\n",
    )
    .unwrap();
    let w = system_config_warning(&sys).unwrap();
    assert!(
        w.starts_with(&format!(
            "{}:3: `ProxyJump` is not applied: gpufleet reads only ~/.ssh/config",
            inc.join("10-site.conf").display()
        )),
        "{w}"
    );
    // The main file's own line comes first when it is before the Include.
    std::fs::write(
        &sys,
        format!("Port 2222\nInclude {}/*.conf\n", inc.display()),
    )
    .unwrap();
    let w = system_config_warning(&sys).unwrap();
    assert!(
        w.starts_with(&format!("{}:1: `Port`", sys.display())),
        "{w}"
    );
    // A relative Include (under /etc/ssh for ssh) is not guessed: said, not read.
    std::fs::write(&sys, "Include site.conf\n").unwrap();
    let w = system_config_warning(&sys).unwrap();
    assert!(w.contains("is not read"), "{w}");
}
