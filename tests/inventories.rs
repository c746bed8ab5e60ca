//! Inventories operators already have, read by the real binary: Ansible INI and YAML files and a
//! host list on stdin scanned over real OpenSSH servers, a real Slurm cluster (`-i slurm:`), and
//! Kubernetes through a recording kubectl stand-in (no API server runs here; the test's name
//! says so).

// A test: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Output, Stdio};

use serde_json::Value;
use support::slurm::Slurm;
use support::*;

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn list_json(o: &Output) -> Vec<Value> {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
    serde_json::from_slice::<Value>(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(o)))
        .as_array()
        .unwrap()
        .clone()
}

fn two_fixtures() -> Vec<std::path::PathBuf> {
    vec![
        fixture("a100-proprietary-535-k5.15-peermem"),
        fixture("h200-open-580-k6.18-real"),
    ]
}

/// An ssh_config giving every host the fleet's user key (the new sources have no key field of
/// their own; this is how an operator gives one).
fn ssh_config(f: &Fleet) -> String {
    let p = f.tmp.path().join("ssh_config");
    std::fs::write(
        &p,
        format!("Host *\n  IdentityFile {}\n", f.user_key.display()),
    )
    .unwrap();
    p.display().to_string()
}

#[test]
fn ansible_ini_and_yaml_inventories_scan_real_sshd_nodes() {
    let f = Fleet::start(&two_fixtures(), 150);
    let kh = f.known_hosts.display().to_string();
    let (a, h) = (&f.nodes[0], &f.nodes[1]);
    let ini = f.tmp.path().join("hosts");
    std::fs::write(
        &ini,
        format!(
            "# an operator's Ansible inventory\n[a100]\nlegacy ansible_host={} ansible_port={} gpufleet_root={}\n\n[h100]\nready ansible_host={} gpufleet_root={}\n\n[gpu:children]\na100\nh100\n\n[h100:vars]\nansible_port={}\nansible_ssh_private_key_file={}\n\n[all:vars]\nansible_user={}\nansible_ssh_private_key_file={}\nrack=r7\n",
            a.1.addr,
            a.1.port,
            a.0.join("root").display(),
            h.1.addr,
            h.0.join("root").display(),
            h.1.port,
            f.user_key.display(),
            local_user(),
            f.user_key.display(),
        ),
    )
    .unwrap();
    let inv = ini.display().to_string();
    let nodes = list_json(&f.gpufleet(&["inventory", "list", "-i", &inv, "--format", "json"]));
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0]["name"], "legacy");
    assert_eq!(nodes[0]["host"], a.1.addr.as_str());
    assert_eq!(nodes[0]["port"], a.1.port);
    assert_eq!(nodes[0]["groups"], serde_json::json!(["gpu", "a100"]));
    assert_eq!(nodes[0]["labels"]["rack"], "r7");
    assert_eq!(nodes[0]["source"], format!("{inv}:3"));
    assert_eq!(nodes[1]["port"], h.1.port, "[h100:vars] over [all:vars]");
    assert_eq!(nodes[1]["source"], format!("{inv}:6"));
    // The table names each node's origin too.
    let table = f.gpufleet(&["inventory", "list", "-i", &inv, "-g", "h100"]);
    let t = String::from_utf8_lossy(&table.stdout);
    assert!(
        t.starts_with("NAME") && t.contains(&format!("{inv}:6")) && !t.contains("legacy"),
        "{}",
        text(&table)
    );
    // The same nodes scan for real.
    let out = f.gpufleet(&[
        "snapshot",
        "-i",
        &inv,
        "--known-hosts",
        &kh,
        "--format",
        "json",
    ]);
    let doc: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!(node(&doc, "legacy")["status"], "migrate", "{}", text(&out));
    assert_eq!(node(&doc, "ready")["status"], "ready", "{}", text(&out));

    // The YAML form of the same inventory, forced and detected.
    let yml = f.tmp.path().join("inventory.yml");
    std::fs::write(
        &yml,
        format!(
            "all:\n  vars:\n    ansible_user: {}\n    ansible_ssh_private_key_file: {}\n  children:\n    gpu:\n      hosts:\n        legacy:\n          ansible_host: {}\n          ansible_port: {}\n          gpufleet_root: {}\n          gpufleet_canary: true\n",
            local_user(),
            f.user_key.display(),
            a.1.addr,
            a.1.port,
            a.0.join("root").display(),
        ),
    )
    .unwrap();
    let y = yml.display().to_string();
    let nodes = list_json(&f.gpufleet(&["inventory", "list", "-i", &y, "-f", "json"]));
    assert_eq!(nodes[0]["source"], format!("{y}:8"));
    assert_eq!(nodes[0]["canary"], true);
    let out = f.gpufleet(&[
        "snapshot",
        "-i",
        &y,
        "--known-hosts",
        &kh,
        "--format",
        "json",
    ]);
    let doc: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!(node(&doc, "legacy")["status"], "migrate", "{}", text(&out));
    // A YAML file without a telling name, read as YAML because it is forced to be.
    let plain = f.tmp.path().join("inv-yaml-without-extension");
    std::fs::copy(&yml, &plain).unwrap();
    let p = plain.display().to_string();
    let nodes = list_json(&f.gpufleet(&[
        "inventory",
        "list",
        "-i",
        &p,
        "--inventory-format",
        "ansible-yaml",
        "-f",
        "json",
    ]));
    assert_eq!(nodes[0]["name"], "legacy");
}

#[test]
fn a_host_list_on_stdin_scans_real_sshd_nodes() {
    let f = Fleet::start(&two_fixtures(), 160);
    let cfg = ssh_config(&f);
    let kh = f.known_hosts.display().to_string();
    let list = format!(
        "# two nodes, one line each\n{}@{}:{}\n\n{}:{}   # the second\n",
        local_user(),
        f.nodes[0].1.addr,
        f.nodes[0].1.port,
        f.nodes[1].1.addr,
        f.nodes[1].1.port
    );
    let run = |args: &[&str]| {
        let mut c = f.command(args);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(list.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let nodes = list_json(&run(&[
        "inventory",
        "list",
        "-i",
        "-",
        "--ssh-config",
        &cfg,
        "-f",
        "json",
    ]));
    let n0 = format!("{}:{}", f.nodes[0].1.addr, f.nodes[0].1.port);
    assert_eq!(nodes[0]["name"], n0.as_str());
    assert_eq!(nodes[0]["source"], "<stdin>:2");
    assert_eq!(nodes[1]["source"], "<stdin>:4");
    assert_eq!(
        nodes[1]["identity_file"],
        f.user_key.display().to_string(),
        "from --ssh-config"
    );
    // Every key file, in order, the first being `identity_file`.
    assert_eq!(nodes[1]["identity_files"][0], nodes[1]["identity_file"]);
    // The probe reads this machine's / through each sshd (a host list sets no root prefix):
    // each node is reached and assessed, whatever this machine's status is.
    let out = run(&[
        "snapshot",
        "-i",
        "-",
        "--ssh-config",
        &cfg,
        "--known-hosts",
        &kh,
        "-f",
        "json",
    ]);
    let doc: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 2);
    for n in doc["nodes"].as_array().unwrap() {
        assert_ne!(n["status"], "unreachable", "{n:#}");
        assert!(n["kernel"]["release"].is_string(), "{n:#}");
    }
    // A bad line is refused with its line, before any node is touched.
    let mut c = f.command(&["inventory", "list", "-i", "-"]);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"gpu01\ngpu02:http\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("<stdin>:2: \"gpu02:http\": port `http` is not 1-65535"),
        "{}",
        text(&out)
    );
}

#[test]
fn bad_inventories_are_refused_with_file_line_and_a_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, body: &str, extra: &[&str]| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        let ps = p.display().to_string();
        let mut args = vec!["inventory", "list", "-i", ps.as_str()];
        args.extend_from_slice(extra);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(&args)
            .env("GPUFLEET_SSH_CONFIG", "none")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        (ps, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (p, e) = run(
        "hosts.yml",
        "all:\n  children:\n    gpu:\n      hots:\n        a:\n",
        &[],
    );
    assert!(
        e.contains(&format!("{p}:4:7: group `gpu`: unknown key `hots`"))
            && e.contains("did you mean `hosts`?"),
        "{e}"
    );
    let (p, e) = run("hosts.ini", "[gpu]\na\n[gpu:varz]\nx=1\n", &[]);
    assert!(
        e.contains(&format!("{p}:3: `[gpu:varz]`")) && e.contains("did you mean `vars`?"),
        "{e}"
    );
    let (p, e) = run("inv", "a b c\n", &[]);
    assert!(
        e.contains(&format!("{p}: cannot tell which kind of inventory"))
            && e.contains("--inventory-format"),
        "{e}"
    );
    let (_, e) = run("inv2", "a\n", &["--inventory-format", "ansible-yml"]);
    assert!(
        e.contains("did you mean") || e.contains("ansible-yaml"),
        "{e}"
    );
    // Hostile text in an inventory never reaches the terminal raw.
    let (_, e) = run("evil.ini", "[g]\nx\x1b]0;owned\x07 ansible_port=0\n", &[]);
    assert!(!e.contains('\x1b') && !e.contains('\x07'), "{e:?}");
}

/// Ansible leftovers of a trial, through the binary: a UTF-8 byte order mark (a Windows editor's)
/// before an INI inventory is skipped, whether its kind is detected or forced; a vaulted or a
/// list `ansible_host` is refused naming the file, line and host, never used as text.
#[test]
fn ansible_byte_order_mark_loads_and_vault_or_list_hosts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let list = |name: &str, body: &[u8], extra: &[&str]| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(["inventory", "list", "-f", "json", "-i", p.to_str().unwrap()])
            .args(extra)
            .env("GPUFLEET_SSH_CONFIG", "none")
            .output()
            .unwrap();
        (p.display().to_string(), out)
    };
    let ini = b"\xef\xbb\xbf[gpu]\ngpu01 ansible_host=10.0.0.1\n";
    for (name, extra) in [
        ("hosts", &[][..]),
        ("forced", &["--inventory-format", "ansible-ini"][..]),
    ] {
        let nodes = list_json(&list(name, ini, extra).1);
        assert_eq!(nodes.len(), 1, "{nodes:?}");
        assert_eq!(nodes[0]["name"], "gpu01");
        assert_eq!(nodes[0]["host"], "10.0.0.1");
        assert_eq!(nodes[0]["groups"], serde_json::json!(["gpu"]));
    }
    let (p, out) = list(
        "vault.yml",
        b"all:\n  hosts:\n    gpu01:\n      ansible_host: !vault |\n          $ANSIBLE_VAULT;1.1;AES256\n          6231336539\n",
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains(&format!("{p}:4: host `gpu01`: ansible_host is vault-encrypted; vault-encrypted values are not supported: decrypt it")),
        "{e}"
    );
    let (p, out) = list(
        "list.yml",
        b"all:\n  hosts:\n    gpu01:\n      ansible_host: [10.0.0.1, 10.0.0.2]\n",
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains(&format!("{p}:4:21: host `gpu01`: ansible_host is a list")),
        "{e}"
    );
}

/// A file gpufleet reads whole costs at most its cap: `-i /dev/zero`, a sparse 10 GiB file, an
/// endless stdin and an ssh_config that includes /dev/zero each fail at once with a one-line
/// error naming the file and the limit (docs/architecture.md, "Size caps").
#[test]
fn oversized_inventories_and_ssh_configs_are_refused_at_their_cap() {
    let dir = tempfile::tempdir().unwrap();
    let list = |args: &[&str], stdin: Stdio| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(["inventory", "list"])
            .args(args)
            .env("GPUFLEET_SSH_CONFIG", "none")
            .env("HOME", dir.path())
            .stdin(stdin)
            .output()
            .unwrap()
    };
    let refused = |out: &Output, needle: &str| {
        assert_eq!(out.status.code(), Some(2), "{}", text(out));
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(needle), "{needle:?} not in {}", text(out));
    };
    let limit = "larger than 64 MiB (the limit for an inventory)";
    refused(
        &list(&["-i", "/dev/zero"], Stdio::null()),
        &format!("/dev/zero: {limit}"),
    );
    let big = dir.path().join("big.ini");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(10 << 30)
        .unwrap();
    refused(
        &list(&["-i", big.to_str().unwrap()], Stdio::null()),
        &format!("{}: {limit}", big.display()),
    );
    // An endless host list on stdin.
    let zero = std::fs::File::open("/dev/zero").unwrap();
    refused(
        &list(&["-i", "-"], zero.into()),
        &format!("<stdin>: {limit}"),
    );
    // One line of a host list may be 4 KiB.
    let long = dir.path().join("long");
    std::fs::write(
        &long,
        format!(
            "gpu01
{}
",
            "a".repeat(5000)
        ),
    )
    .unwrap();
    refused(
        &list(
            &["-i", long.to_str().unwrap(), "--inventory-format", "hosts"],
            Stdio::null(),
        ),
        &format!(
            "{}:2: longer than 4096 bytes (the limit for a host list line)",
            long.display()
        ),
    );
    let hosts = dir.path().join("hosts");
    std::fs::write(
        &hosts, "gpu01
",
    )
    .unwrap();
    let hosts = hosts.to_str().unwrap();
    // ssh_config: the file itself, and a file it includes, directly or through a glob or a
    // nested include; a non-regular file (/dev/zero, a FIFO) is refused before anything reads it.
    let cfg = dir.path().join("ssh_config");
    let with_cfg = |body: &str| {
        std::fs::write(&cfg, body).unwrap();
        list(
            &["-i", hosts, "--ssh-config", cfg.to_str().unwrap()],
            Stdio::null(),
        )
    };
    let shown = cfg.display().to_string();
    refused(
        &with_cfg(
            "Include /dev/zero
",
        ),
        &format!("{shown}:1: Include /dev/zero: /dev/zero is not a regular file"),
    );
    let fifo = dir.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    refused(
        &with_cfg(&format!(
            "Host *
  Include {}*
",
            dir.path().join("fif").display()
        )),
        &format!("{} is not a regular file", fifo.display()),
    );
    let huge = dir.path().join("huge.conf");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(20 << 20)
        .unwrap();
    let nested = dir.path().join("nested.conf");
    std::fs::write(
        &nested,
        format!(
            "Include = \"{}\"
",
            huge.display()
        ),
    )
    .unwrap();
    refused(
        &with_cfg(&format!(
            "Include {}
",
            nested.display()
        )),
        &format!(
            "{}:1: Include \"{}\": {}: larger than 16 MiB (the limit for an ssh_config file)",
            nested.display(),
            huge.display(),
            huge.display()
        ),
    );
    // Relative includes are under ~/.ssh, as OpenSSH reads them.
    std::fs::create_dir(dir.path().join(".ssh")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join(".ssh/zero")).unwrap();
    refused(
        &with_cfg(
            "Include zero
",
        ),
        &format!("{}/.ssh/zero is not a regular file", dir.path().display()),
    );
    // The config file itself.
    refused(
        &list(&["-i", hosts, "--ssh-config", "/dev/zero"], Stdio::null()),
        "/dev/zero: larger than 16 MiB (the limit for an ssh_config file)",
    );
    // A well-formed include of a real file still works.
    let ok = dir.path().join("ok.conf");
    std::fs::write(
        &ok,
        "Host gpu01
  Port 2222
",
    )
    .unwrap();
    let nodes = list_json(&{
        std::fs::write(
            &cfg,
            format!(
                "Include {}
",
                ok.display()
            ),
        )
        .unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(["inventory", "list", "-i", hosts, "-f", "json"])
            .args(["--ssh-config", cfg.to_str().unwrap()])
            .env("HOME", dir.path())
            .output()
            .unwrap()
    });
    assert_eq!(nodes[0]["port"], 2222, "{nodes:?}");
}

#[test]
fn slurm_inventory_from_a_real_slurm_cluster() {
    // A hidden partition (sinfo lists it only with -a): named with -i slurm:hid, it is a
    // partition, not a node list.
    let slurm = Slurm::start_with(2, 21, "PartitionName=hid Nodes=gpu2 Hidden=YES State=UP\n");
    let conf = slurm.conf.display().to_string();
    let list = |src: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(["inventory", "list", "-i", src, "--format", "json"])
            .env("SLURM_CONF", &conf)
            .env("GPUFLEET_SSH_CONFIG", "none")
            .env(
                "PATH",
                format!(
                    "{}:/usr/sbin:/sbin",
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .output()
            .unwrap()
    };
    let nodes = list_json(&list("slurm:"));
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["gpu1", "gpu2"]);
    assert_eq!(nodes[0]["host"], "198.18.21.2", "NodeAddr");
    assert_eq!(nodes[1]["host"], "198.18.21.3");
    assert_eq!(
        nodes[0]["groups"],
        serde_json::json!(["gpu"]),
        "its partition"
    );
    assert_eq!(nodes[0]["drain"], "slurm");
    assert!(
        nodes[0]["labels"]["slurm.state"]
            .as_str()
            .unwrap()
            .starts_with("IDLE"),
        "{:#}",
        nodes[0]
    );
    assert_eq!(nodes[0]["source"], "scontrol show nodes --oneliner:1");
    // A partition, then a Slurm node list.
    assert_eq!(list_json(&list("slurm:gpu")).len(), 2);
    let hidden = list_json(&list("slurm:hid"));
    let hidden: Vec<&str> = hidden.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(hidden, ["gpu2"], "the hidden partition's one node");
    let one = list_json(&list("slurm:gpu2"));
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["name"], "gpu2");
    let out = list("slurm:nosuch");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("-i slurm:nosuch"),
        "{}",
        text(&out)
    );
    // A drain reason (free text: a health check may write its output there) that writes
    // fields: its text, never gpu1's state, name or partitions (before: `slurm.state` read
    // `IDLE sda1 read-only` for a drained node).
    let st = std::process::Command::new(support::slurm::sbin("scontrol"))
        .args([
            "update",
            "NodeName=gpu1",
            "State=DRAIN",
            "Reason=disk check failed:\nState=IDLE NodeName=evil Partitions=all sda1",
        ])
        .env("SLURM_CONF", &conf)
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", text(&st));
    let nodes = list_json(&list("slurm:"));
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["gpu1", "gpu2"]);
    assert_eq!(
        nodes[0]["labels"]["slurm.state"], "IDLE+DRAIN",
        "{:#}",
        nodes[0]
    );
    assert_eq!(nodes[0]["groups"], serde_json::json!(["gpu"]));
    // That output saved, with a line that is no node among its lines (`-i FILE
    // --inventory-format slurm`): the line is a warning and both nodes are kept (before: the
    // whole inventory refused, "no NodeName=").
    let shown = std::process::Command::new(support::slurm::sbin("scontrol"))
        .args(["show", "nodes", "--oneliner"])
        .env("SLURM_CONF", &conf)
        .output()
        .unwrap();
    let saved = String::from_utf8(shown.stdout).unwrap();
    let (first, rest) = saved.split_once('\n').unwrap();
    let file = slurm.dir.path().join("nodes.txt");
    std::fs::write(&file, format!("{first}\nState=IDLE sda1 \u{1b}[2J\n{rest}")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args([
            "inventory",
            "list",
            "--inventory-format",
            "slurm",
            "--format",
            "json",
            "-i",
        ])
        .arg(&file)
        .env("GPUFLEET_SSH_CONFIG", "none")
        .output()
        .unwrap();
    let nodes = list_json(&out);
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["gpu1", "gpu2"], "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:2: no NodeName=", file.display())) && err.contains("left out"),
        "{err}"
    );
}

/// What `kubectl get nodes -o json` printed on a real cluster (two GPU nodes with NVIDIA's GPU
/// feature discovery labels, one control-plane node), cut to the fields gpufleet reads and a few
/// beside them.
const NODE_LIST: &str = r#"{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "labels": {
                    "beta.kubernetes.io/arch": "amd64",
                    "kubernetes.io/hostname": "cp-1",
                    "node-role.kubernetes.io/control-plane": ""
                },
                "name": "cp-1"
            },
            "status": {
                "addresses": [
                    {"address": "10.20.0.2", "type": "InternalIP"},
                    {"address": "cp-1", "type": "Hostname"}
                ]
            }
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "labels": {
                    "kubernetes.io/hostname": "gpu-h100-01",
                    "nvidia.com/gpu.count": "8",
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    "node-role.kubernetes.io/gpu": ""
                },
                "name": "gpu-h100-01"
            },
            "status": {
                "addresses": [
                    {"address": "gpu-h100-01", "type": "Hostname"},
                    {"address": "10.20.1.11", "type": "InternalIP"}
                ],
                "capacity": {"nvidia.com/gpu": "8"}
            }
        }
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
}"#;

#[test]
fn k8s_inventory_through_a_recording_kubectl_stand_in() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let record = dir.path().join("kubectl.args");
    let json = dir.path().join("nodes.json");
    std::fs::write(&json, NODE_LIST).unwrap();
    let kubectl = bin.join("kubectl");
    std::fs::write(
        &kubectl,
        format!(
            "#!/bin/sh\n# recording stand-in for kubectl: no API server runs in tests\necho \"$*\" >> '{}'\ncat '{}'\n",
            record.display(),
            json.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |src: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(["inventory", "list", "-i", src, "--format", "json"])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("GPUFLEET_SSH_CONFIG", "none")
            .output()
            .unwrap()
    };
    let nodes = list_json(&run("k8s:"));
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[1]["name"], "gpu-h100-01");
    assert_eq!(nodes[1]["host"], "10.20.1.11", "InternalIP");
    assert_eq!(
        nodes[1]["labels"]["nvidia.com/gpu.product"],
        "NVIDIA-H100-80GB-HBM3"
    );
    assert_eq!(nodes[1]["groups"], serde_json::json!(["gpu"]));
    assert_eq!(nodes[1]["drain"], "kubernetes");
    assert_eq!(nodes[0]["groups"], serde_json::json!(["control-plane"]));
    assert_eq!(
        nodes[1]["source"],
        "kubectl get nodes -o json: items[1] (gpu-h100-01)"
    );
    list_json(&run("k8s:nvidia.com/gpu.present=true"));
    let args = std::fs::read_to_string(&record).unwrap();
    assert_eq!(
        args,
        "get nodes -o json\nget nodes -o json -l nvidia.com/gpu.present=true\n"
    );
    // An item that is not a node (no name; labels that are not strings) is that item's warning,
    // the other nodes kept (before: the whole list refused, "not a kubectl node list").
    let mut odd: serde_json::Value = serde_json::from_str(NODE_LIST).unwrap();
    let items = odd["items"].as_array_mut().unwrap();
    items.insert(
        1,
        serde_json::json!({"kind": "Node", "metadata": {"labels": {}}}),
    );
    items.push(serde_json::json!({"metadata": {"name": "gpu-odd", "labels": {"x": 7}}}));
    items.push(serde_json::json!({"metadata": {"name": "gpu\u{1b}[2J"}}));
    std::fs::write(&json, odd.to_string()).unwrap();
    let out = run("k8s:");
    let nodes = list_json(&out);
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cp-1", "gpu-h100-01"], "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("items[1]: not a kubectl node: missing field `name`"),
        "{err}"
    );
    assert!(
        err.contains("items[3] (`gpu-odd`): not a kubectl node"),
        "{err}"
    );
    // A name with a control character: left out, shown escaped once.
    assert!(
        err.contains(
            r"node name `gpu\x1b[2J` has whitespace or control characters; that node is left out"
        ),
        "{err}"
    );
    assert!(!err.contains('\u{1b}'), "{err:?}");
    std::fs::write(&json, NODE_LIST).unwrap();
    // A kubectl that fails: its message, exit 2.
    std::fs::write(
        &kubectl,
        "#!/bin/sh\necho 'error: You must be logged in to the server (Unauthorized)' >&2\nexit 1\n",
    )
    .unwrap();
    let out = run("k8s:");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Unauthorized"),
        "{}",
        text(&out)
    );
    // No kubectl at all.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["inventory", "list", "-i", "k8s:"])
        .env("PATH", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot run kubectl"),
        "{}",
        text(&out)
    );
}
