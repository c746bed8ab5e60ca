//! Bastions: nodes reachable only through jump hosts (OpenSSH `ProxyJump`, `-J` style in the
//! inventory), over real sshd processes in network namespaces this test makes (198.18.60-62.0/24, one per test,
//! /30 links, no forwarding anywhere: a node can be reached only by an SSH `direct-tcpip`
//! channel from its jump host), and `ProxyCommand` through a local command.
//!
//! ```text
//! here 198.18.60.1 ── .2 j1 (sshd :2222, and :2200 whose key known_hosts gets wrong)
//!                         ├─ .5 ── .6 n1 (sshd :2222)
//!                         └─ .9 ── .10 j2 (sshd :2222) ── .13 ── .14 n2 (sshd :2222)
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::slurm::sbin;
use support::{codes, fixture_nodes, keygen, local_user, node, public_key};

fn ip(args: &str) {
    let st = Command::new(sbin("ip"))
        .args(args.split_whitespace())
        .status()
        .unwrap();
    assert!(st.success(), "ip {args}");
}

/// Network namespaces and veth links, deleted on drop (after the sshds in them are stopped).
struct Net {
    tag: String,
    namespaces: Vec<String>,
    host_link: String,
}

impl Net {
    /// `here` ↔ j1, j1 ↔ n1, j1 ↔ j2, j2 ↔ n2, each a /30 of 198.18.`subnet`.0/24.
    fn start(subnet: u8) -> Net {
        let tag = format!("bj{}{subnet}", std::process::id() % 100000);
        let ns = |n: &str| format!("{tag}{n}");
        let mut net = Net {
            namespaces: Vec::new(),
            host_link: format!("{tag}h"),
            tag: tag.clone(),
        };
        for n in ["j1", "n1", "j2", "n2"] {
            ip(&format!("netns add {}", ns(n)));
            ip(&format!("-n {} link set lo up", ns(n)));
            net.namespaces.push(ns(n));
        }
        // here ↔ j1
        ip(&format!(
            "link add {} type veth peer name up0 netns {}",
            net.host_link,
            ns("j1")
        ));
        ip(&format!(
            "addr add 198.18.{subnet}.1/30 dev {}",
            net.host_link
        ));
        ip(&format!("link set {} up", net.host_link));
        ip(&format!(
            "-n {} addr add 198.18.{subnet}.2/30 dev up0",
            ns("j1")
        ));
        ip(&format!("-n {} link set up0 up", ns("j1")));
        // a ↔ b links inside namespaces
        for (a, b, base) in [("j1", "n1", 4), ("j1", "j2", 8), ("j2", "n2", 12)] {
            let (la, lb) = (format!("to{b}"), format!("to{a}"));
            ip(&format!(
                "-n {} link add {la} type veth peer name {lb} netns {}",
                ns(a),
                ns(b)
            ));
            ip(&format!(
                "-n {} addr add 198.18.{subnet}.{}/30 dev {la}",
                ns(a),
                base + 1
            ));
            ip(&format!(
                "-n {} addr add 198.18.{subnet}.{}/30 dev {lb}",
                ns(b),
                base + 2
            ));
            ip(&format!("-n {} link set {la} up", ns(a)));
            ip(&format!("-n {} link set {lb} up", ns(b)));
        }
        net
    }

    fn ns(&self, n: &str) -> String {
        format!("{}{n}", self.tag)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = Command::new(sbin("ip"))
            .args(["link", "del", &self.host_link])
            .status();
        for ns in &self.namespaces {
            let _ = Command::new(sbin("ip")).args(["netns", "del", ns]).status();
        }
    }
}

/// A real sshd inside a network namespace, stopped by PID on drop.
struct NsSshd {
    addr: String,
    port: u16,
    host_key: PathBuf,
    child: Child,
}

impl NsSshd {
    fn start(
        ns: &str,
        dir: &Path,
        addr: &str,
        port: u16,
        keys: &Path,
        bin: Option<&Path>,
    ) -> NsSshd {
        std::fs::create_dir_all(dir).unwrap();
        let host_key = dir.join("host_ed25519");
        keygen(&host_key, "");
        let _ = std::fs::create_dir_all("/run/sshd");
        let path = match bin {
            Some(b) => format!("{}:/usr/bin:/bin", b.display()),
            None => "/usr/bin:/bin".into(),
        };
        let cfg = dir.join("sshd_config");
        std::fs::write(
            &cfg,
            format!(
                "ListenAddress {addr}:{port}\nHostKey {}\nPidFile {}\nAuthorizedKeysFile {}\n\
                 UsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nSetEnv PATH={path}\n\
                 AllowTcpForwarding yes\nLogLevel ERROR\n",
                host_key.display(),
                dir.join("sshd.pid").display(),
                keys.display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("sshd.log")).unwrap();
        let child = Command::new(sbin("nsenter"))
            .arg(format!("--net=/run/netns/{ns}"))
            .arg(sbin("sshd"))
            .args(["-D", "-e", "-f"])
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let s = NsSshd {
            addr: addr.into(),
            port,
            host_key,
            child,
        };
        // Ready when the namespace has a listener on the port.
        let start = Instant::now();
        loop {
            let out = Command::new(sbin("ip"))
                .args(["netns", "exec", ns])
                .arg(sbin("ss"))
                .args(["-Hltn", &format!("sport = :{port}")])
                .output()
                .unwrap();
            if !out.stdout.is_empty() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "sshd in {ns} did not start: {}",
                std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(30));
        }
        s
    }

    fn known_hosts_line(&self) -> String {
        format!(
            "[{}]:{} {}",
            self.addr,
            self.port,
            public_key(&self.host_key)
        )
    }
}

impl Drop for NsSshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Bastions {
    // Field order is drop order: sshds, then the namespaces, then the folder.
    sshds: Vec<NsSshd>,
    _net: Net,
    tmp: tempfile::TempDir,
    fixtures: Vec<PathBuf>,
}

impl Bastions {
    /// The network on 198.18.`subnet`.0/24 (each test its own: they run in parallel).
    fn start(subnet: u8) -> Bastions {
        let net = Net::start(subnet);
        let a = |last: u8| format!("198.18.{subnet}.{last}");
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        // The user's default key: jump hosts named in `jump` use it, as ssh would.
        let key = home.join(".ssh/id_ed25519");
        keygen(&key, "");
        let keys = tmp.path().join("authorized_keys");
        std::fs::write(&keys, public_key(&key) + "\n").unwrap();
        let fixtures: Vec<PathBuf> = fixture_nodes().into_iter().take(2).collect();
        let d = |n: &str| tmp.path().join(n);
        let sshds = vec![
            NsSshd::start(&net.ns("j1"), &d("j1"), &a(2), 2222, &keys, None),
            NsSshd::start(&net.ns("j1"), &d("j1b"), &a(2), 2200, &keys, None),
            NsSshd::start(&net.ns("j2"), &d("j2"), &a(10), 2222, &keys, None),
            NsSshd::start(
                &net.ns("n1"),
                &d("n1"),
                &a(6),
                2222,
                &keys,
                Some(&fixtures[0].join("bin")),
            ),
            NsSshd::start(
                &net.ns("n2"),
                &d("n2"),
                &a(14),
                2222,
                &keys,
                Some(&fixtures[1].join("bin")),
            ),
        ];
        // Every server's own key, except j1:2200's, which is given j2's key: a wrong key.
        let mut lines: Vec<String> = sshds.iter().map(NsSshd::known_hosts_line).collect();
        lines[1] = format!("[{}]:2200 {}", a(2), public_key(&sshds[2].host_key));
        std::fs::write(d("known_hosts"), lines.join("\n") + "\n").unwrap();
        std::fs::write(
            d("config.toml"),
            "[probe]\nnvidia_smi_timeout = 2\ndeadline = 20\n[ssh]\nconnect_timeout = 3\nauth_timeout = 8\n",
        )
        .unwrap();
        Bastions {
            sshds,
            _net: net,
            tmp,
            fixtures,
        }
    }

    fn path(&self, n: &str) -> PathBuf {
        self.tmp.path().join(n)
    }

    fn snapshot(&self, inventory: &str, ssh_config: &str) -> (serde_json::Value, String) {
        self.snapshot_with(inventory, ssh_config, &[])
    }

    fn snapshot_with(
        &self,
        inventory: &str,
        ssh_config: &str,
        args: &[&str],
    ) -> (serde_json::Value, String) {
        std::fs::write(self.path("inventory.toml"), inventory).unwrap();
        std::fs::write(self.path("home/.ssh/config"), ssh_config).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(["snapshot", "--format", "json", "-i"])
            .arg(self.path("inventory.toml"))
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.path("home"))
            .env("USER", local_user())
            .env("GPUFLEET_CONFIG", self.path("config.toml"))
            .env("GPUFLEET_KNOWN_HOSTS", self.path("gpufleet_known_hosts"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}); stderr:\n{stderr}\nstdout:\n{}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        (doc, stderr)
    }

    fn header(&self) -> String {
        format!(
            "known_hosts = \"{}\"\n[defaults]\nuser = \"{}\"\n",
            self.path("known_hosts").display(),
            local_user()
        )
    }

    fn root(&self, i: usize) -> String {
        self.fixtures[i].join("root").display().to_string()
    }
}

fn status(doc: &serde_json::Value, name: &str) -> String {
    node(doc, name)["status"].as_str().unwrap_or("").to_string()
}

fn reason_message(doc: &serde_json::Value, name: &str) -> String {
    node(doc, name)["reasons"].to_string()
}

#[test]
fn nodes_behind_one_and_two_jump_hosts_with_host_keys_checked_at_every_hop() {
    let b = Bastions::start(60);
    let u = local_user();
    let inventory = format!(
        "{}\
         [[nodes]]\nname = \"direct\"\nhost = \"198.18.60.6\"\nport = 2222\nroot = \"{r0}\"\n\
         [[nodes]]\nname = \"one-hop\"\nhost = \"198.18.60.6\"\nport = 2222\nroot = \"{r0}\"\njump = \"{u}@198.18.60.2:2222\"\n\
         [[nodes]]\nname = \"two-hops\"\nhost = \"198.18.60.14\"\nport = 2222\nroot = \"{r1}\"\njump = \"{u}@198.18.60.2:2222,ssh://{u}@198.18.60.10:2222\"\n\
         [[nodes]]\nname = \"wrong-jump-key\"\nhost = \"198.18.60.6\"\nport = 2222\nroot = \"{r0}\"\njump = \"{u}@198.18.60.2:2200\"\n\
         [[nodes]]\nname = \"from-ssh-config\"\nhost = \"deep\"\nroot = \"{r1}\"\n",
        b.header(),
        r0 = b.root(0),
        r1 = b.root(1),
    );
    // ~/.ssh/config: `deep` is n2 behind j2, whose own ProxyJump is j1 (resolved as ssh does),
    // given in a `Match` block that gpufleet evaluates (originalhost, and exec with %r); a
    // criterion newer than OpenSSH 9.2 is warned with its line and applies to no host.
    let ssh_config = format!(
        "Host j1\n  HostName 198.18.60.2\n  Port 2222\n  User {u}\n\
         Host j2\n  HostName 198.18.60.10\n  Port 2222\n  ProxyJump j1\n\
         Match originalhost deep exec \"test %r = {u}\"\n  HostName 198.18.60.14\n  Port 2222\n  ProxyJump {u}@j2\n\
         Host *\n  ForwardAgent yes\n\
         Match localnetwork 10.0.0.0/8\n  Port 1\n"
    );
    let (doc, stderr) = b.snapshot(&inventory, &ssh_config);

    // What gpufleet does not honour is said once, not once per node or hop.
    assert_eq!(stderr.matches("`ForwardAgent`").count(), 1, "{stderr}");
    assert!(
        stderr.contains(
            ":15: `Match localnetwork 10.0.0.0/8`: gpufleet evaluates Match all, canonical, final, host,"
        ),
        "{stderr}"
    );
    // Without the jump host the node cannot be reached at all: the network proves isolation.
    assert_eq!(status(&doc, "direct"), "unreachable", "{stderr}");
    for name in ["one-hop", "two-hops", "from-ssh-config"] {
        assert_ne!(
            status(&doc, name),
            "unreachable",
            "{name}: {}\nstderr: {stderr}",
            reason_message(&doc, name)
        );
    }
    // Each node's probe ran on the node behind the chain (its own fixture's answers).
    for (name, f) in [("one-hop", 0), ("two-hops", 1), ("from-ssh-config", 1)] {
        let failures = support::check_expected(&b.fixtures[f], node(&doc, name));
        assert!(failures.is_empty(), "{name}: {failures:?}");
    }
    // The jump host's key is wrong: refused there, and said so.
    assert_eq!(status(&doc, "wrong-jump-key"), "unreachable");
    assert_eq!(codes(node(&doc, "wrong-jump-key")), ["host-key-mismatch"]);
    let msg = reason_message(&doc, "wrong-jump-key");
    assert!(
        msg.contains("jump host 198.18.60.2:2200: host key CHANGED"),
        "{msg}"
    );
    drop(b);
}

#[test]
fn an_unknown_jump_host_key_and_a_dead_jump_host_are_per_hop_reasons() {
    let b = Bastions::start(61);
    let u = local_user();
    // j2's key is in no known_hosts file: the second hop of the chain is refused there.
    std::fs::write(
        b.path("known_hosts"),
        b.sshds
            .iter()
            .filter(|s| s.addr != "198.18.61.10")
            .map(NsSshd::known_hosts_line)
            .collect::<Vec<_>>()
            .join("\n")
            + "\n",
    )
    .unwrap();
    let inventory = format!(
        "{}\
         [[nodes]]\nname = \"unknown-second-hop\"\nhost = \"198.18.61.14\"\nport = 2222\nroot = \"{r1}\"\njump = \"{u}@198.18.61.2:2222,{u}@198.18.61.10:2222\"\n\
         [[nodes]]\nname = \"nothing-behind\"\nhost = \"198.18.61.14\"\nport = 2222\nroot = \"{r1}\"\njump = \"{u}@198.18.61.2:2222\"\n\
         [[nodes]]\nname = \"own-known-hosts\"\nhost = \"198.18.61.14\"\nport = 2222\nroot = \"{r1}\"\njump = \"{u}@198.18.61.2:2222,j2k\"\n",
        b.header(),
        r1 = b.root(1),
    );
    // j2 under the name `j2k` has its own UserKnownHostsFile, which holds its key: that hop
    // is checked against that file (and the inventory's), and the chain goes through.
    let j2_known = b.path("j2_known_hosts");
    std::fs::write(&j2_known, b.sshds[2].known_hosts_line() + "\n").unwrap();
    let ssh_config = format!(
        "Host j2k\n  HostName 198.18.61.10\n  Port 2222\n  UserKnownHostsFile {}\n",
        j2_known.display()
    );
    let (doc, stderr) = b.snapshot(&inventory, &ssh_config);
    assert_ne!(
        status(&doc, "own-known-hosts"),
        "unreachable",
        "{}",
        reason_message(&doc, "own-known-hosts")
    );
    assert_eq!(
        codes(node(&doc, "unknown-second-hop")),
        ["host-key-unknown"],
        "{stderr}"
    );
    let msg = reason_message(&doc, "unknown-second-hop");
    assert!(
        msg.contains("jump host 198.18.61.10:2222: host key ")
            && msg.contains("[198.18.61.10]:2222"),
        "{msg}"
    );
    // StrictHostKeyChecking accept-new for j2 in ~/.ssh/config: a --host-key-policy flag
    // still wins (as `ssh -o` does); without it, j2's key is learned and the chain goes through.
    let accept = "Host 198.18.61.10\n  StrictHostKeyChecking accept-new\n";
    let (doc, _) = b.snapshot_with(&inventory, accept, &["--host-key-policy", "strict"]);
    assert_eq!(
        codes(node(&doc, "unknown-second-hop")),
        ["host-key-unknown"]
    );
    let (doc, stderr) = b.snapshot(&inventory, accept);
    assert_ne!(
        status(&doc, "unknown-second-hop"),
        "unreachable",
        "{}\n{stderr}",
        reason_message(&doc, "unknown-second-hop")
    );
    let known = std::fs::read_to_string(b.path("known_hosts")).unwrap();
    assert!(
        known.contains(&b.sshds[2].known_hosts_line()),
        "{known}\n{stderr}"
    );
    // j1 cannot reach n2 (no route from j1 to 198.18.61.12/30): the jump host says so.
    assert_eq!(status(&doc, "nothing-behind"), "unreachable");
    let msg = reason_message(&doc, "nothing-behind");
    assert!(
        msg.contains("jump host 198.18.61.2:2222: ") && msg.contains("198.18.61.14:2222"),
        "{msg}"
    );
}

#[test]
fn a_proxy_command_carries_the_connection_and_is_gone_afterwards() {
    let b = Bastions::start(62);
    // The ProxyCommand is OpenSSH's own `ssh -W %h:%p` through j1 (the tokens expanded by
    // gpufleet); it also writes what the tokens became.
    let u = local_user();
    let marker = b.path("proxy-ran");
    let ssh_config = format!(
        "Host viaproxy\n  HostName 198.18.62.6\n  Port 2222\n  ProxyCommand sh -c 'echo %r@%h:%p > {}; exec ssh -F /dev/null -q -o BatchMode=yes -o UserKnownHostsFile={} -i {} -p 2222 -W %h:%p {u}@198.18.62.2'\n",
        marker.display(),
        b.path("known_hosts").display(),
        b.path("home/.ssh/id_ed25519").display()
    );
    let inventory = format!(
        "{}[[nodes]]\nname = \"proxied\"\nhost = \"viaproxy\"\nroot = \"{}\"\n",
        b.header(),
        b.root(0)
    );
    let (doc, stderr) = b.snapshot(&inventory, &ssh_config);
    assert_ne!(
        status(&doc, "proxied"),
        "unreachable",
        "{}\n{stderr}",
        reason_message(&doc, "proxied")
    );
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().trim(),
        format!("{u}@198.18.62.6:2222")
    );
    // gpufleet has exited: no `ssh -W` of this test is left running (it was killed with the
    // connection; waited for, up to 5 s, as the kill is asynchronous).
    let start = Instant::now();
    let left = loop {
        let left = Command::new("pgrep")
            .args(["-f", "--", &format!("-W 198.18.62.6:2222 {u}@198.18.62.2")])
            .output()
            .unwrap();
        if left.stdout.is_empty() || start.elapsed() > Duration::from_secs(5) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(left.stdout.is_empty(), "left running: {:?}", left);
}

#[test]
fn inventory_list_shows_each_nodes_resolved_jump_chain_and_bad_jump_lists_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(
        home.join(".ssh/config"),
        "Host edge\n  HostName 198.18.63.2\n  User ops\n  Port 2200\n\
         Host inner\n  ProxyJump edge\n\
         Host gpu*\n  ProxyCommand nc -X connect -x proxy:3128 %h %p\n",
    )
    .unwrap();
    let inv = tmp.path().join("inventory.toml");
    let list = |text: &str| {
        std::fs::write(&inv, text).unwrap();
        Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(["inventory", "list", "--format", "json", "-i"])
            .arg(&inv)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &home)
            .env("USER", "me")
            .output()
            .unwrap()
    };
    let out = list(
        "[defaults]\nuser = \"root\"\n\
         [[nodes]]\nname = \"a\"\nhost = \"10.0.0.1\"\njump = \"inner:22,root@[fd00::9]:2022\"\n\
         [[nodes]]\nname = \"gpu7\"\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // inner's own ProxyJump (edge, resolved through the config) comes first.
    assert_eq!(
        doc[0]["jump"],
        serde_json::json!(["ops@198.18.63.2:2200", "me@inner:22", "root@[fd00::9]:2022"])
    );
    assert_eq!(doc[0]["proxy_command"], serde_json::Value::Null);
    assert_eq!(
        doc[1]["proxy_command"],
        "nc -X connect -x proxy:3128 gpu7 22"
    );
    // A malformed jump list names the node's file:line.
    let out = list("[[nodes]]\nname = \"a\"\njump = \"ops@\"\n");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("inventory.toml:2:") && err.contains("jump host \"ops@\""),
        "{err}"
    );
}

/// Issue 22: an Ansible inventory's `ansible_ssh_common_args` / `ansible_ssh_extra_args` (`-J`,
/// `-o ProxyJump=`, `-p`) route its hosts through their bastions, over the real network: the
/// same node without them is unreachable.
#[test]
fn ansible_ssh_args_reach_hosts_through_their_bastions() {
    let b = Bastions::start(64);
    let u = local_user();
    let inventory = format!(
        "[gpu]\n\
         direct ansible_host=198.18.64.6 ansible_port=2222 gpufleet_root={r0}\n\
         one-hop ansible_host=198.18.64.6 ansible_port=2222 gpufleet_root={r0} ansible_ssh_common_args='-J {u}@198.18.64.2:2222'\n\
         two-hops ansible_host=198.18.64.14 gpufleet_root={r1} ansible_ssh_common_args='-C -o ProxyJump={u}@198.18.64.2:2222,{u}@198.18.64.10:2222' ansible_ssh_extra_args='-p 2222'\n\
         [gpu:vars]\nansible_user={u}\n",
        r0 = b.root(0),
        r1 = b.root(1),
    );
    std::fs::write(b.path("hosts.ini"), inventory).unwrap();
    std::fs::copy(b.path("known_hosts"), b.path("home/.ssh/known_hosts")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "--format", "json", "-i"])
        .arg(b.path("hosts.ini"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", b.path("home"))
        .env("USER", &u)
        .env("GPUFLEET_CONFIG", b.path("config.toml"))
        .env("GPUFLEET_KNOWN_HOSTS", b.path("gpufleet_known_hosts"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}); stderr:\n{stderr}"));
    assert_eq!(status(&doc, "direct"), "unreachable", "{stderr}");
    for (name, f) in [("one-hop", 0), ("two-hops", 1)] {
        assert_ne!(
            status(&doc, name),
            "unreachable",
            "{name}: {}\nstderr: {stderr}",
            reason_message(&doc, name)
        );
        let failures = support::check_expected(&b.fixtures[f], node(&doc, name));
        assert!(failures.is_empty(), "{name}: {failures:?}");
    }
    // `-C` means nothing to gpufleet: said once, naming the host.
    assert!(
        stderr.contains("host `two-hops`: ansible_ssh_common_args: `-C` is not honoured"),
        "{stderr}"
    );
    drop(b);
}
