//! `~/.ssh/config` against OpenSSH's own client (openssh-client, 9.2 in CI): every case is a
//! config (main file and included files, written to a temp folder) and a destination, resolved
//! by gpufleet (`inventory::ssh_config::query`) and by `ssh -G -F CONFIG [-l USER] [-p PORT]
//! HOST` (host name, port, user, ProxyJump, ProxyCommand, UserKnownHostsFile as ssh prints
//! them) and `ssh -v` through a `ProxyCommand` that exits at once (the identity and certificate
//! files as ssh expands and loads them, before any connection). Both must agree, or both
//! refuse the config. The cases follow OpenSSH's regress/cfgparse.sh, cfgmatch.sh and
//! cfginclude.sh (hosts f, m, n …) and ssh_config(5) "TOKENS".

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use gpufleet::inventory::ssh_config;
use gpufleet::probe::endpoint::JumpSpec;

/// One case: files (the first is the config given to `-F`; `{D}` is the case's folder), the
/// destination, and `-l` / `-p` (the inventory's user and port).
struct Case {
    files: &'static [(&'static str, &'static str)],
    host: &'static str,
    user: Option<&'static str>,
    port: Option<u16>,
}

const fn c(files: &'static [(&'static str, &'static str)], host: &'static str) -> Case {
    Case {
        files,
        host,
        user: None,
        port: None,
    }
}

const fn cu(
    files: &'static [(&'static str, &'static str)],
    host: &'static str,
    user: &'static str,
) -> Case {
    Case {
        files,
        host,
        user: Some(user),
        port: None,
    }
}

const INCLUDE_MAIN: &str = "Match host a\n\tHostname aa\n\nMatch host=b # comment\n\tHostname bb\n\tInclude {D}/i.*\n\nMatch host c\n\tInclude {D}/i.*\n\tHostname cc\n\nMatch host=m !user xxxyfake\n\tInclude {D}/i.* # comment\n\nHost d\n\tHostname dd # comment\n\nHost e\n\tHostname ee\n\tInclude {D}/i.*\n\nHost f\n\tInclude {D}/i.*\n\tHostname ff\n\nHost n\n\tInclude {D}/i.*\n";
const INCLUDE_0: &str = "Match host xxxxxx\n";
const INCLUDE_1: &str = "Match host=a\n\tHostname aaa\n\nMatch host b\n\tHostname bbb\n\nMatch host c # comment\n\tHostname ccc\n\nHost d # comment\n\tHostname ddd\n\nHost e\n\tHostname eee\n\nHost f\n\tHostname fff # comment\n";
const INCLUDE_2: &str = "Match host a\n\tHostname aaaa\n\nMatch host=b !user blahblahfake\n\tHostname bbbb\n\nMatch host=c\n\tHostname cccc\n\nHost d\n\tHostname dddd\n\nHost e\n\tHostname eeee\n\nHost f\n\tHostname ffff\n\nMatch all\n\tHostname xxxx\n";
const INCLUDES: &[(&str, &str)] = &[
    ("config", INCLUDE_MAIN),
    ("i.0", INCLUDE_0),
    ("i.1", INCLUDE_1),
    ("i.2", INCLUDE_2),
];

const FIRST_WINS: &[(&str, &str)] = &[(
    "config",
    "Host gpu*\n  Port 2201\n  Port 2202\n  HostName 10.0.0.1\n  HostName 10.0.0.2\n  User a\n  User b\nHost *\n  Port 9\n  User z\n  IdentityFile /k/star\n",
)];
const TOKENS: &[(&str, &str)] = &[(
    "config",
    "Host gpu*\n  HostName %h.example.com\n  IdentityFile ~/.ssh/id_%h_%r_%p_%n_%u_%%\n  IdentityFile /k/%C\n  IdentityFile /k/%L-%l-%i-%k-%d\n  CertificateFile ~/c-%h-%r\n  UserKnownHostsFile ~/kh-%h /x/%n-%p\nHost x*\n  HostName %%h-%h\n",
)];
const MATCH_ORDER: &[(&str, &str)] = &[(
    "config",
    "Host gpu*\n  User ops\nMatch host 10.0.0.* !originalhost gpu03\n  Port 2201\nMatch exec \"test %n = gpu02\"\n  Port 2202\n  User evil\nMatch user root\n  IdentityFile /k/root\nMatch all\n  Port 2299\nHost gpu01\n  HostName 10.0.0.1\nHost gpu03\n  HostName 10.0.0.3\n",
)];
const MATCH_AFTER_HOSTNAME: &[(&str, &str)] = &[(
    "config",
    "Match originalhost web*\n  HostName 10.1.0.1\nMatch host 10.1.*\n  Port 2301\n  User viahost\nMatch host web*\n  Port 2302\nHost web*\n  Port 2303\n",
)];
const FINAL_PASS: &[(&str, &str)] = &[(
    "config",
    "Host alias\n  HostName Real.Example.COM\nHost real.example.com\n  Port 2401\nMatch final host real.*\n  User fin\nMatch canonical\n  IdentityFile /k/canon\nMatch !final\n  IdentityFile /k/first\n",
)];
const NO_FINAL: &[(&str, &str)] = &[(
    "config",
    "Host alias\n  HostName real.example.com\nHost real.example.com\n  Port 2401\nMatch canonical\n  User canon\n",
)];
const JUMPS: &[(&str, &str)] = &[(
    "config",
    "Host direct\n  ProxyJump none\n  ProxyCommand nc %h %p\nHost cmdfirst\n  ProxyCommand ssh -W [%h]:%p gw # not a comment\n  ProxyJump j1\nHost v6\n  ProxyJump ops@[2001:db8::1]:2222,ssh://u@h2:23\nHost *.inner\n  ProxyJump bastion,edge\nHost *\n  ProxyJump bastion # comment\nHost bastion\n  HostName 198.18.0.1\n",
)];
const CASE_SENS: &[(&str, &str)] = &[(
    "config",
    "Host gpu*\n  Port 2501\nMatch host GPU*\n  User m1\nMatch originalhost GPU*\n  IdentityFile /k/orig\nHost GPU*\n  Port 2502\n",
)];
const NEGATION: &[(&str, &str)] = &[(
    "config",
    "Host *.prod !db.prod\n  Port 2601\nHost db.* web,x\n  User neg\nMatch host !*.prod,x*\n  IdentityFile /k/m\nMatch !host *.prod !originalhost y*\n  IdentityFile /k/n\n",
)];
const QUOTES: &[(&str, &str)] = &[(
    "config",
    "Host=q1\n  IdentityFile \"/k/a b\"\n  IdentityFile '/k/c d'\n  IdentityFile /k/e\\ f\n  IdentityFile /k/x\n  IdentityFile /k/x\nHost q2 q1\n  User = u2\n  Port=2701\n  IdentityFile /k/x#y\nHOST q3\n  hostNAME Q3.example\n",
)];
const USERS: &[(&str, &str)] = &[(
    "config",
    "Match user root,admin\n  Port 2801\nMatch !user root\n  Port 2802\nMatch localuser root\n  IdentityFile /k/local-%u\nMatch exec \"test %r = admin\"\n  IdentityFile /k/exec-%r\nHost *\n  User deploy\n",
)];
const INCLUDE_SCOPE: &[(&str, &str)] = &[
    (
        "config",
        "Host a\n  Include {D}/inc\n  Port 2901\nHost b\n  Include inc-missing-*\n  User bu\nInclude {D}/tail\nHost c*\n  Include {D}/inc\n",
    ),
    (
        "inc",
        "Match host zzz\n  User never\nHost c3\n  Port 2903\n",
    ),
    ("tail", "Host *\n  User tail\n  Port 2999\n"),
];
const MATCH_ALL: &[(&str, &str)] = &[(
    "config",
    "Match all\n  User all\nMatch !all\n  Port 9\nHost *\n  Port 3001\n",
)];
const IDENTITY_NONE: &[(&str, &str)] = &[(
    "config",
    "Host n1\n  IdentityFile none\n  IdentityFile /k/after-none\nHost n2\n  IdentityFile /k/one\nHost *\n  IdentityFile /k/two\n",
)];
const KNOWN_HOSTS: &[(&str, &str)] = &[(
    "config",
    "Host kh1\n  UserKnownHostsFile none\nHost kh2\n  UserKnownHostsFile /k/%h /k/%r\n  UserKnownHostsFile /k/second\nHost *\n  UserKnownHostsFile ~/kh\n",
)];
const BAD_TOKEN_HOSTNAME: &[(&str, &str)] = &[("config", "Host *\n  HostName %p.example\n")];
const BAD_TOKEN_IDENTITY: &[(&str, &str)] = &[("config", "Host *\n  IdentityFile /k/%x\n")];
const BAD_TOKEN_CERT: &[(&str, &str)] = &[("config", "Host *\n  CertificateFile /k/%T\n")];
const BAD_TOKEN_KH: &[(&str, &str)] = &[("config", "Host *\n  UserKnownHostsFile /k/%j\n")];
const BAD_TOKEN_EXEC: &[(&str, &str)] = &[("config", "Match exec \"true %Z\"\n  Port 1\n")];
const BAD_PORT: &[(&str, &str)] = &[("config", "Host other\n  Port 0\n")];
const BAD_PORT2: &[(&str, &str)] = &[("config", "Host other\n  Port 70000\n")];
const NO_ARG: &[(&str, &str)] = &[("config", "Host other\n  User\n")];
const EXTRA_ARGS: &[(&str, &str)] = &[("config", "Host other\n  HostName a b\n")];
const OPEN_QUOTE: &[(&str, &str)] = &[("config", "Host other\n  IdentityFile \"/k/a\n")];
const BAD_MATCH: &[(&str, &str)] = &[("config", "Match all host x\n  Port 1\n")];
const MATCH_NO_ARG: &[(&str, &str)] = &[("config", "Match host\n  Port 1\n")];
const MATCH_EMPTY: &[(&str, &str)] = &[("config", "Match # nothing\n  Port 1\n")];
const BAD_TIME: &[(&str, &str)] = &[("config", "Host x\n  ConnectTimeout soon\n")];

const CASES: &[Case] = &[
    // regress/cfginclude.sh: a Match inside an included file keeps its own scope.
    c(INCLUDES, "a"),
    c(INCLUDES, "b"),
    c(INCLUDES, "c"),
    c(INCLUDES, "d"),
    c(INCLUDES, "e"),
    c(INCLUDES, "f"),
    c(INCLUDES, "m"),
    c(INCLUDES, "n"),
    c(INCLUDES, "x"),
    // The first value obtained wins, within a block and across blocks.
    c(FIRST_WINS, "gpu01"),
    c(FIRST_WINS, "cpu01"),
    cu(FIRST_WINS, "gpu02", "cli"),
    Case {
        files: FIRST_WINS,
        host: "gpu03",
        user: None,
        port: Some(2222),
    },
    // Tokens (ssh_config(5) "TOKENS").
    c(TOKENS, "gpu01"),
    cu(TOKENS, "gpu02", "ops"),
    Case {
        files: TOKENS,
        host: "gpu03",
        user: Some("u3"),
        port: Some(2203),
    },
    c(TOKENS, "x1"),
    c(TOKENS, "other"),
    // Match in file order, against what is obtained so far.
    c(MATCH_ORDER, "gpu01"),
    c(MATCH_ORDER, "gpu02"),
    c(MATCH_ORDER, "gpu03"),
    cu(MATCH_ORDER, "other", "root"),
    cu(MATCH_ORDER, "gpu01", "root"),
    c(MATCH_AFTER_HOSTNAME, "web1"),
    c(MATCH_AFTER_HOSTNAME, "web2.example"),
    c(MATCH_AFTER_HOSTNAME, "api"),
    // Match final: a second pass against the host name after HostName.
    c(FINAL_PASS, "alias"),
    c(FINAL_PASS, "real.example.com"),
    c(FINAL_PASS, "other"),
    c(NO_FINAL, "alias"),
    // ProxyJump and ProxyCommand: the first one obtained wins, `none` included.
    c(JUMPS, "direct"),
    c(JUMPS, "cmdfirst"),
    c(JUMPS, "v6"),
    c(JUMPS, "db.inner"),
    c(JUMPS, "gpu01"),
    c(JUMPS, "bastion"),
    // Case: Host patterns are case-sensitive, Match host lowercases its patterns.
    c(CASE_SENS, "gpu01"),
    c(CASE_SENS, "GPU01"),
    c(CASE_SENS, "Gpu01"),
    // Negation.
    c(NEGATION, "web.prod"),
    c(NEGATION, "db.prod"),
    c(NEGATION, "web"),
    c(NEGATION, "x1"),
    c(NEGATION, "y1"),
    // Quotes, `=`, escapes, duplicates, keyword case, `#` inside a word.
    c(QUOTES, "q1"),
    c(QUOTES, "q2"),
    c(QUOTES, "q3"),
    // Users: -l wins, Match user sees it.
    c(USERS, "h1"),
    cu(USERS, "h1", "root"),
    cu(USERS, "h1", "admin"),
    // Include scope and missing includes.
    c(INCLUDE_SCOPE, "a"),
    c(INCLUDE_SCOPE, "b"),
    c(INCLUDE_SCOPE, "c3"),
    c(INCLUDE_SCOPE, "zzz"),
    c(MATCH_ALL, "any"),
    c(IDENTITY_NONE, "n1"),
    c(IDENTITY_NONE, "n2"),
    c(KNOWN_HOSTS, "kh1"),
    c(KNOWN_HOSTS, "kh2"),
    c(KNOWN_HOSTS, "kh3"),
    // ssh refuses these configs: so must gpufleet.
    c(BAD_TOKEN_HOSTNAME, "h"),
    c(BAD_TOKEN_IDENTITY, "h"),
    c(BAD_TOKEN_CERT, "h"),
    c(BAD_TOKEN_KH, "h"),
    c(BAD_TOKEN_EXEC, "h"),
    c(BAD_PORT, "h"),
    c(BAD_PORT2, "h"),
    c(NO_ARG, "h"),
    c(EXTRA_ARGS, "h"),
    c(OPEN_QUOTE, "h"),
    c(BAD_MATCH, "h"),
    c(MATCH_NO_ARG, "h"),
    c(MATCH_EMPTY, "h"),
    c(BAD_TIME, "h"),
];

/// What both resolve, in ssh -G's terms.
#[derive(Debug, PartialEq, Eq)]
struct Resolved {
    hostname: String,
    port: u16,
    user: String,
    identity_files: Vec<String>,
    certificate_files: Vec<String>,
    proxy_jump: Option<Vec<JumpSpec>>,
    proxy_command: Option<String>,
    known_hosts: Vec<String>,
}

fn write_case(dir: &Path, case: &Case) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in case.files {
        let text = text.replace("{D}", &dir.display().to_string());
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir.join(case.files[0].0)
}

fn jump(s: &str) -> Option<Vec<JumpSpec>> {
    let hops = gpufleet::probe::endpoint::parse_jump_list(s).ok()?;
    (!hops.is_empty()).then_some(hops)
}

/// ssh's resolution, or its error.
fn ssh(bin: &Path, config: &Path, case: &Case) -> Result<Resolved, String> {
    let mut args: Vec<String> = vec!["-F".into(), config.display().to_string()];
    if let Some(u) = case.user {
        args.extend(["-l".into(), u.into()]);
    }
    if let Some(p) = case.port {
        args.extend(["-p".into(), p.to_string()]);
    }
    let g = Command::new(bin)
        .arg("-G")
        .args(&args)
        .arg(case.host)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    if !g.status.success() {
        return Err(String::from_utf8_lossy(&g.stderr).into_owned());
    }
    let text = String::from_utf8(g.stdout).unwrap();
    let one = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k} ")))
            .map(str::to_string)
    };
    // The identity and certificate files as ssh expands and loads them: `ssh -v` through a
    // ProxyCommand that exits at once (no connection is made). ssh runs it as `exec <command>`,
    // so the command is plain `true`: `exec true` became `exec exec true`, whose shell error
    // (written in pieces by the child) could land inside ssh's first debug line and hide it.
    let v = Command::new(bin)
        .arg("-v")
        .args(["-o", "ProxyCommand=true", "-o", "BatchMode=yes"])
        .args(&args)
        .arg(case.host)
        .arg("true")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&v.stderr).into_owned();
    if err.contains("percent_expand")
        || err.contains("invalid environment")
        || err.contains("fatal")
    {
        return Err(err);
    }
    let mut identity_files: Vec<String> = Vec::new();
    let mut certificate_files = Vec::new();
    for l in err.lines() {
        // A line is matched where ssh's message starts, not at the line's start: the proxy's
        // own stderr shares the pipe.
        let at = |m: &str| l.find(m).map(|i| &l[i + m.len()..]);
        if let Some(rest) = at("debug1: identity file ") {
            let path = rest.rsplit_once(" type ").unwrap().0.to_string();
            // ssh also tries each key's `-cert` file.
            if identity_files
                .last()
                .is_some_and(|p| format!("{p}-cert") == path)
            {
                continue;
            }
            identity_files.push(path);
        } else if let Some(rest) = at("debug1: certificate file ") {
            certificate_files.push(rest.rsplit_once(" type ").unwrap().0.to_string());
        }
    }
    let home = pw_home();
    let defaults: Vec<String> = [
        "id_rsa",
        "id_ecdsa",
        "id_ecdsa_sk",
        "id_ed25519",
        "id_ed25519_sk",
        "id_xmss",
        "id_dsa",
    ]
    .iter()
    .map(|k| format!("{home}/.ssh/{k}"))
    .collect();
    if identity_files == defaults {
        identity_files.clear();
    }
    let mut known_hosts: Vec<String> = one("userknownhostsfile")
        .map(|s| s.split(' ').map(str::to_string).collect())
        .unwrap_or_default();
    if known_hosts
        == [
            format!("{home}/.ssh/known_hosts"),
            format!("{home}/.ssh/known_hosts2"),
        ]
    {
        known_hosts.clear();
    }
    Ok(Resolved {
        hostname: one("hostname").unwrap(),
        port: one("port").unwrap().parse().unwrap(),
        user: one("user").unwrap(),
        identity_files,
        certificate_files,
        proxy_jump: one("proxyjump").and_then(|j| jump(&j)),
        proxy_command: one("proxycommand"),
        known_hosts,
    })
}

/// The password database's home of this user: what ssh's `~` and defaults use.
fn pw_home() -> String {
    // SAFETY: getpwuid returns a pointer to static storage or null; read at once.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        assert!(!pw.is_null());
        std::ffi::CStr::from_ptr((*pw).pw_dir)
            .to_string_lossy()
            .into_owned()
    }
}

/// gpufleet's resolution, or its error.
fn ours(config: &Path, case: &Case, local_user: &str) -> Result<Resolved, String> {
    let (cfg, _warnings) = ssh_config::load(config)?;
    let mut warn = ssh_config::Warnings::default();
    let s = ssh_config::query(&cfg, case.host, case.user, case.port, &mut warn)?;
    let path = |p: &PathBuf| p.display().to_string();
    Ok(Resolved {
        hostname: s.host_name.clone().unwrap_or_else(|| case.host.to_string()),
        port: case.port.or(s.port).unwrap_or(22),
        user: case
            .user
            .map(str::to_string)
            .or(s.user.clone())
            .unwrap_or_else(|| local_user.to_string()),
        identity_files: s.identity_files.iter().map(path).collect(),
        certificate_files: s.certificate_files.iter().map(path).collect(),
        proxy_jump: s.proxy_jump.as_deref().and_then(jump),
        proxy_command: s.proxy_command.clone().filter(|c| c != "none"),
        known_hosts: if s.known_hosts_none {
            vec!["none".into()]
        } else {
            s.known_hosts.iter().map(path).collect()
        },
    })
}

#[test]
fn ssh_config_resolves_as_ssh_dash_g() {
    let bin = support::need("ssh");
    assert!(CASES.len() >= 60, "{} cases", CASES.len());
    let local_user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    let root = tempfile::tempdir().unwrap();
    let mut differ = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        let config = write_case(&root.path().join(format!("c{i}")), case);
        let theirs = ssh(&bin, &config, case);
        let mine = ours(&config, case, &local_user);
        let same = match (&mine, &theirs) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if !same {
            differ.push(format!(
                "case {i} ({} {:?} -l {:?} -p {:?}):\n  gpufleet {mine:?}\n  ssh      {theirs:?}",
                case.files[0].1.lines().next().unwrap_or(""),
                case.host,
                case.user,
                case.port
            ));
        }
    }
    eprintln!(
        "ssh -G oracle: {} cases, {} agree, 0 deliberate deviations",
        CASES.len(),
        CASES.len() - differ.len()
    );
    assert!(
        differ.is_empty(),
        "{} of {} differ from ssh:\n{}",
        differ.len(),
        CASES.len(),
        differ.join("\n")
    );
}

/// Without a config (`--ssh-config none`, ssh's `-F none`) ssh still lowercases the host it
/// connects to, an address excepted: gpufleet connects to the same name (issue 22).
#[test]
fn without_a_config_the_host_is_the_one_ssh_dash_f_none_connects_to() {
    let bin = support::need("ssh");
    let hosts = [
        "GPU01",
        "Gpu-A.Example.COM",
        "gpu02",
        "FE80::AB",
        "2001:DB8::1",
        "10.0.0.1",
        "Node_7",
    ];
    let root = tempfile::tempdir().unwrap();
    let list = root.path().join("hosts.txt");
    std::fs::write(&list, hosts.join("\n") + "\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args([
            "inventory",
            "list",
            "--ssh-config",
            "none",
            "-f",
            "json",
            "-i",
        ])
        .arg(&list)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let nodes: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut differ = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let g = Command::new(&bin)
            .args(["-G", "-F", "none", h])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8(g.stdout).unwrap();
        let theirs = text
            .lines()
            .find_map(|l| l.strip_prefix("hostname "))
            .unwrap();
        if nodes[i]["name"] != *h || nodes[i]["host"] != theirs {
            differ.push(format!("{h}: ssh {theirs}, gpufleet {}", nodes[i]["host"]));
        }
    }
    eprintln!(
        "ssh -G -F none oracle: {} hosts, {} agree, 0 deliberate deviations",
        hosts.len(),
        hosts.len() - differ.len()
    );
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
