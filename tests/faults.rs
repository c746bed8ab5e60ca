//! The fault matrix of docs/faults.md: each way a node can fail to answer, over a real OpenSSH
//! sshd or on local fixture copies, and what gpufleet must say (never `ready` from a fact it
//! does not know).

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Fleet, codes, manifest, scratch};

fn reason<'a>(n: &'a Value, code: &str) -> &'a Value {
    n["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["code"] == code)
        .unwrap_or_else(|| panic!("no {code}: {n:#}"))
}

/// A `cat` in the node's bin/ (first on PATH) that runs `action` (sh code) for files whose path
/// ends with `suffix`, and is plain cat otherwise.
fn cat_shim(node: &Path, suffix: &str, action: &str) {
    support::shim(&node.join("bin"), "cat", suffix, action);
}

/// The children of sshd `pid` (its per-connection processes).
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let p = e.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            (ppid.parse::<u32>().ok()? == pid).then_some(p)
        })
        .collect()
}

/// Every process below `pid`, children first.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = children_of(pid);
    let mut i = 0;
    while i < out.len() {
        let more = children_of(out[i]);
        out.extend(more);
        i += 1;
    }
    out
}

#[test]
fn hang_after_auth_is_said_as_such() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    let mut fleet = Fleet::start(std::slice::from_ref(&node), 70);
    fleet.hang(0);
    let start = Instant::now();
    let (_, doc) = fleet.snapshot(&["--deadline", "3", "--nvidia-smi-timeout", "1"]);
    assert!(start.elapsed() < Duration::from_secs(10));
    let n = &doc["nodes"][0];
    assert_eq!(n["status"], "unreachable", "{n:#}");
    let m = reason(n, "probe-output-invalid")["message"]
        .as_str()
        .unwrap();
    assert!(
        m.contains("deadline passed") && m.contains("before the probe printed anything"),
        "{m}"
    );
}

/// The connection drops while the probe is in `cat` of `suffix`: the sections before are
/// kept, the rest is unknown, and the node says after which section and why.
/// `setup` prepares the node's files first.
fn drop_mid_output(setup: impl FnOnce(&Path), suffix: &str, octet: u8) -> Value {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    setup(&node);
    cat_shim(&node, suffix, "exec sleep 300");
    let fleet = Fleet::start(std::slice::from_ref(&node), octet);
    let sshd = fleet.nodes[0].1.pid();
    let inv = fleet.inventory.display().to_string();
    let child = fleet
        .command(&[
            "snapshot",
            "-i",
            &inv,
            "--format",
            "json",
            "--deadline",
            "30",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The probe is in the shim's `sleep 300` (not merely logging in) before the drop.
    support::wait_until(
        "the probe to reach the file",
        Duration::from_secs(20),
        || {
            descendants(sshd).iter().any(|p| {
                std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c == b"sleep\x00300\x00")
            })
        },
    );
    let sessions = children_of(sshd);
    for p in sessions {
        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
    }
    let out = child.wait_with_output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["nodes"][0].clone()
}

#[test]
fn a_connection_dropped_before_proc_modules_is_never_ready() {
    let n = drop_mid_output(|_| {}, "/proc/modules", 72);
    assert_eq!(n["status"], "unknown", "{n:#}");
    assert_eq!(n["kernel"]["release"], "6.18.44-fc-v657-gpu");
    assert_eq!(n["modules"], Value::Null);
    let m = reason(&n, "probe-incomplete")["message"].as_str().unwrap();
    assert!(m.contains("connection closed"), "{m}");
    assert!(m.contains("/proc/modules"), "{m}");
}

#[test]
fn a_connection_dropped_before_modprobe_d_is_never_ready() {
    // The h200 has no modprobe.d: give it one, and hang in its file.
    let with_conf = |node: &Path| {
        let d = node.join("root/etc/modprobe.d");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("local.conf"), "options nvidia NVreg_X=1\n").unwrap();
    };
    let n = drop_mid_output(with_conf, "modprobe.d/local.conf", 74);
    assert_eq!(n["status"], "unknown", "{n:#}");
    // Read before the drop: the module list, so peermem loaded is known.
    assert_eq!(n["peermem"]["loaded"], false);
    assert_eq!(n["peermem"]["configured"], Value::Null);
    let m = reason(&n, "probe-incomplete")["message"].as_str().unwrap();
    assert!(m.contains("connection closed"), "{m}");
    assert!(m.contains("modprobe.d"), "{m}");
}

#[test]
fn a_gigabyte_of_stdout_stops_at_the_cap() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    // 1 GB of output where /proc/modules should be.
    cat_shim(&node, "/proc/modules", "exec head -c 1000000000 /dev/zero");
    let fleet = Fleet::start(std::slice::from_ref(&node), 76);
    let start = Instant::now();
    let (_, doc) = fleet.snapshot(&["--deadline", "30"]);
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    let n = &doc["nodes"][0];
    // The sections before /proc/modules keep their facts (before: `unreachable`,
    // `probe-output-invalid`, every fact lost); the cut one is named with the cap.
    assert_eq!(n["status"], "unknown", "{n:#}");
    assert_eq!(n["kernel"]["release"], "6.18.44-fc-v657-gpu", "{n:#}");
    assert_eq!(n["driver"]["version"], "580.159.04", "{n:#}");
    let m = reason(n, "probe-incomplete")["message"].as_str().unwrap();
    assert!(
        m.contains("1048576-byte output cap") && m.contains("file /proc/modules (cut off)"),
        "{m}"
    );
    assert_eq!(n["peermem"]["configured"], Value::Null, "{n:#}");
    // gpufleet closed the session at the cap: the probe's shell dies of SIGPIPE, and its watchdog
    // then ends what is left within a second or two, long before the 30 s deadline.
    let marker = node
        .parent()
        .unwrap()
        .as_os_str()
        .as_encoded_bytes()
        .to_vec();
    let start = Instant::now();
    let mut left = holding(&marker);
    while !left.is_empty() && start.elapsed() < Duration::from_secs(4) {
        std::thread::sleep(Duration::from_millis(200));
        left = holding(&marker);
    }
    assert!(left.is_empty(), "left on the node after the cap: {left:?}");
}

/// Processes whose environment holds `needle` (the node's PATH names its fixture copy).
fn holding(needle: &[u8]) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name().to_str()?.parse::<u32>().ok()?;
            let env = std::fs::read(e.path().join("environ")).ok()?;
            env.windows(needle.len()).any(|w| w == needle).then(|| {
                let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            })
        })
        .collect()
}

#[test]
fn a_stderr_flood_counts_toward_the_cap() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    let mut fleet = Fleet::start(std::slice::from_ref(&node), 78);
    // The node's session writes endlessly to stderr and never to stdout.
    fleet.restart(0, false, "ForceCommand yes flood >&2");
    let start = Instant::now();
    let (_, doc) = fleet.snapshot(&["--deadline", "30"]);
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "the flood ran to the deadline: {:?}",
        start.elapsed()
    );
    let n = &doc["nodes"][0];
    assert_eq!(n["status"], "unreachable", "{n:#}");
    assert!(
        reason(n, "probe-output-invalid")["message"]
            .as_str()
            .unwrap()
            .contains("cap")
    );
}

fn local_json(node: &Path, extra: &[&str]) -> (Value, Duration) {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "--format", "json", "--root"])
        .arg(node.join("root"))
        .arg("--config")
        .arg(manifest().join("config/config.example.toml"))
        .args(extra)
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", node.join("bin").display()),
        )
        .output()
        .unwrap();
    let took = start.elapsed();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (doc["nodes"][0].clone(), took)
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_dir_all(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

#[test]
fn a_fifo_in_each_file_class_is_never_opened() {
    // One of each kind of read: a /proc file, a grep'd /proc file, a sysfs attribute, a folder,
    // boot configuration, the kernel config; each makes its fact unknown, never absent, and never
    // hangs the probe.
    // (path, the fact it makes unknown, whether `ready` rests on that fact here). /proc/modules
    // does not: peermem loaded is also read from /sys/module; the PCI scan does not: nvidia-smi
    // listed the GPU.
    let cases: [(&str, &str, bool); 7] = [
        ("proc/modules", "modules", false),
        ("proc/kallsyms", "", false),
        (
            "sys/bus/pci/devices/0000:00:06.0/vendor",
            "gpus (PCI)",
            false,
        ),
        ("sys/class/infiniband", "rdma.devices", true),
        ("etc/modprobe.d/x.conf", "peermem.configured", true),
        ("etc/modules-load.d", "peermem.configured", true),
        ("proc/config.gz", "kernel config", true),
    ];
    for (rel, fact, rests_on) in cases {
        let (_t, node) = scratch("h200-open-580-k6.18-real");
        if rel == "proc/config.gz" {
            // Make the config matter: no kallsyms symbol, and an RDMA device.
            std::fs::write(node.join("root/proc/kallsyms"), "").unwrap();
            std::fs::create_dir_all(node.join("root/sys/class/infiniband/mlx5_0")).unwrap();
        }
        let target = node.join("root").join(rel);
        // A FIFO replaces the file itself (through a sysfs symlink: at its target).
        let target = std::fs::canonicalize(target.parent().unwrap())
            .map(|p| p.join(target.file_name().unwrap()))
            .unwrap_or(target);
        mkfifo(&target);
        let (n, took) = local_json(&node, &["--deadline", "20"]);
        assert!(took < Duration::from_secs(8), "{rel}: took {took:?}");
        if rests_on {
            assert_eq!(n["status"], "unknown", "{rel}: {n:#}");
        }
        if rel == "proc/kallsyms" {
            // Not a fact of its own: the kernel config decides DMA-BUF support instead.
            assert_eq!(n["dma_buf"]["kernel_support"], true, "{n:#}");
            continue;
        }
        let unknown: Vec<&str> = n["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["code"] == "fact-unknown")
            .map(|r| r["message"].as_str().unwrap())
            .collect();
        assert!(
            unknown
                .iter()
                .any(|m| m.contains(fact) && m.contains("FIFO")),
            "{rel}: {unknown:?}"
        );
    }
}

#[test]
fn invalid_utf8_and_nul_in_each_field_never_crash_or_forge() {
    let fields: [(&str, &[u8]); 6] = [
        ("proc/sys/kernel/hostname", b"n\x00de\xff\n"),
        ("proc/sys/kernel/osrelease", b"6.18.44\x00\xfe-fc\n"),
        ("etc/os-release", b"PRETTY_NAME=\"Ubu\x00ntu \xff\"\n"),
        (
            "proc/driver/nvidia/version",
            b"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\x00\xff  Release Build\n",
        ),
        ("proc/sys/kernel/tainted", b"40\x0096\n"),
        ("sys/bus/pci/devices/0000:00:06.0/class", b"0x03\x00\xff00\n"),
    ];
    for (rel, bytes) in fields {
        let (_t, node) = scratch("h200-open-580-k6.18-real");
        let path = node.join("root").join(rel);
        let path = std::fs::canonicalize(path.parent().unwrap())
            .unwrap()
            .join(path.file_name().unwrap());
        std::fs::write(&path, bytes).unwrap();
        let (n, _) = local_json(&node, &[]);
        assert!(n["status"].is_string(), "{rel}: {n:#}");
        if rel.ends_with("osrelease") {
            // Not a release: the clean one from /proc/version is used instead.
            assert_eq!(n["kernel"]["release"], "6.18.44-fc-v657-gpu", "{n:#}");
        }
        // The table and CSV never carry a raw NUL or control byte (JSON keeps the exact value,
        // escaped as JSON: `\u0000`).
        for format in ["table", "csv"] {
            let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
                .args(["snapshot", "--format", format, "--root"])
                .arg(node.join("root"))
                .arg("--config")
                .arg(manifest().join("config/config.example.toml"))
                .env(
                    "PATH",
                    format!("{}:/usr/bin:/bin", node.join("bin").display()),
                )
                .output()
                .unwrap();
            assert!(
                !out.stdout.iter().any(|b| *b == 0 || *b == 0x1b),
                "{rel}: raw NUL or ESC in the {format} output"
            );
        }
    }
    // gpus.csv: nvidia-smi's own answer with NUL and invalid bytes in the GPU name.
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    let csv = node.join("commands/gpus.csv");
    let text = std::fs::read(&csv).unwrap();
    let bad: Vec<u8> = String::from_utf8(text)
        .unwrap()
        .replace("NVIDIA H200", "NVIDIA\u{0} H200\u{1b}[2J")
        .into_bytes();
    std::fs::write(&csv, bad).unwrap();
    let (n, _) = local_json(&node, &[]);
    assert_eq!(n["gpus"].as_array().unwrap().len(), 1, "{n:#}");
}

/// Gzip of `len` zero bytes (a few kB of compressed data).
fn gzip_zeros(len: u64) -> Vec<u8> {
    let mut child = Command::new("sh")
        .args(["-c", &format!("head -c {len} /dev/zero | gzip -c")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    assert!(child.wait().unwrap().success());
    out
}

#[test]
fn a_gzip_bomb_in_proc_config_gz_is_cut_and_unknown() {
    let bomb = gzip_zeros(2_000_000_000);
    for without_gzip in [false, true] {
        let (_t, node) = scratch("h200-open-580-k6.18-real");
        std::fs::write(node.join("root/proc/config.gz"), &bomb).unwrap();
        // The config decides DMA-BUF support: no kallsyms symbol; RDMA applies (a device).
        std::fs::write(node.join("root/proc/kallsyms"), "").unwrap();
        std::fs::create_dir_all(node.join("root/sys/class/infiniband/mlx5_0")).unwrap();
        let mut extra = vec!["--deadline", "30"];
        let tools;
        if without_gzip {
            // A PATH without gzip: the probe sends the compressed bytes (capped) as hex.
            let dir = tempfile::tempdir().unwrap();
            for tool in [
                "sh", "cat", "ls", "grep", "id", "od", "sleep", "timeout", "head", "tail",
                "readlink", "dirname", "awk",
            ] {
                let found = ["/usr/bin", "/bin"]
                    .iter()
                    .map(|d| Path::new(d).join(tool))
                    .find(|p| p.exists())
                    .unwrap();
                std::os::unix::fs::symlink(found, dir.path().join(tool)).unwrap();
            }
            tools = dir;
            extra.clear();
            let start = Instant::now();
            let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
                .args(["snapshot", "--format", "json", "--root"])
                .arg(node.join("root"))
                .arg("--config")
                .arg(manifest().join("config/config.example.toml"))
                .env(
                    "PATH",
                    format!("{}:{}", node.join("bin").display(), tools.path().display()),
                )
                .output()
                .unwrap();
            assert!(start.elapsed() < Duration::from_secs(15));
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            let n = &doc["nodes"][0];
            assert_eq!(n["dma_buf"]["kernel_support"], Value::Null, "{n:#}");
            assert_eq!(n["status"], "unknown", "{n:#}");
            continue;
        }
        let (n, took) = local_json(&node, &extra);
        assert!(took < Duration::from_secs(15), "took {took:?}");
        assert_eq!(n["dma_buf"]["kernel_support"], Value::Null, "{n:#}");
        assert_eq!(n["status"], "unknown", "{n:#}");
        assert!(n.to_string().contains("cap"), "the cut is not said: {n:#}");
    }
}

/// Accepts TCP connections and never says anything (a node hung before the SSH banner).
fn silent_listener(addr: &str) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind((addr, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
            if held.len() >= 1000 {
                break;
            }
        }
    });
    (port, h)
}

#[test]
fn two_hundred_nodes_of_which_thirty_percent_hang() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    let mut fleet = Fleet::start(std::slice::from_ref(&node), 80);
    // Hung after auth: one sshd whose every session sleeps; hung before the banner: silent TCP.
    let (_t2, hung) = scratch("h200-open-580-k6.18-real");
    let hung_fleet = {
        let mut f = Fleet::start(std::slice::from_ref(&hung), 81);
        // It accepts the scanning fleet's user key: its sessions hang after a good login.
        std::fs::write(
            &f.authorized_keys,
            support::public_key(&fleet.user_key) + "\n",
        )
        .unwrap();
        f.hang(0);
        f
    };
    let (silent_port, _h) = silent_listener("127.0.0.82");
    let (good, stuck) = (&fleet.nodes[0].1, &hung_fleet.nodes[0].1);
    let mut inv = fleet.inventory_text();
    inv = inv[..inv.find("[[nodes]]").unwrap()].to_string();
    let root = node.join("root").display().to_string();
    for i in 0..200 {
        let (host, port) = match i % 10 {
            0 | 1 => (stuck.addr.clone(), stuck.port),
            2 => ("127.0.0.82".to_string(), silent_port),
            _ => (good.addr.clone(), good.port),
        };
        inv.push_str(&format!(
            "[[nodes]]\nname = \"n{i:03}\"\nhost = \"{host}\"\nport = {port}\nroot = \"{root}\"\n"
        ));
    }
    fleet.write_inventory(&inv);
    let mut kh = std::fs::read_to_string(&fleet.known_hosts).unwrap();
    kh.push_str(&(stuck.known_hosts_line() + "\n"));
    std::fs::write(&fleet.known_hosts, kh).unwrap();
    // Hung nodes are bounded by the deadline (20 s) or the SSH handshake limit (auth_timeout);
    // 60 of them with 32 at a time: two rounds. The limits are generous (one sshd forks for all
    // 140 healthy nodes on a 2-core machine): a healthy node must never time out.
    let (deadline, auth, concurrency) = (20u64, 15u64, 32usize);
    std::fs::write(
        &fleet.config,
        format!(
            "[probe]\nnvidia_smi_timeout = 10\ndeadline = {deadline}\n[ssh]\nconnect_timeout = 5\nauth_timeout = {auth}\n"
        ),
    )
    .unwrap();
    let start = Instant::now();
    let (_, doc) = fleet.snapshot(&[
        "--deadline",
        &deadline.to_string(),
        "--concurrency",
        &concurrency.to_string(),
        "--nvidia-smi-timeout",
        "10",
    ]);
    let took = start.elapsed();
    let rounds = 60usize.div_ceil(concurrency) as u64;
    // The margin covers the 140 good probes on a 2-core CI machine; a hung node that the
    // deadline did not cut would take 300 s.
    let bound = Duration::from_secs(rounds * (deadline.max(auth) + 1) + 45);
    assert!(took < bound, "took {took:?}, bound {bound:?}");
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 200);
    // Every hung node is unreachable, said as hung after login (the deadline) or before the
    // banner (the handshake limit); no healthy node is: each has its verdict.
    for (i, n) in nodes.iter().enumerate() {
        let c = codes(n);
        match i % 10 {
            0 | 1 => assert!(
                c.contains(&"probe-output-invalid".to_string())
                    && n["reasons"][0]["message"]
                        .as_str()
                        .unwrap()
                        .contains("before the probe printed anything"),
                "{n:#}"
            ),
            2 => assert_eq!(c, ["ssh-timeout"], "{n:#}"),
            _ => {
                assert_ne!(n["status"], "unreachable", "a healthy node: {n:#}");
                assert_eq!(n["kernel"]["release"], "6.18.44-fc-v657-gpu", "{n:#}");
            }
        }
    }
    let ready = nodes.iter().filter(|n| n["status"] == "ready").count();
    drop(hung_fleet);
    eprintln!(
        "200 nodes, 60 hung, concurrency {concurrency}: {took:?} (bound {bound:?}); {ready} of 140 healthy nodes ready (the others: nvidia-smi slower than 10 s on this loaded machine)"
    );
    fleet.restart(0, false, "");
}
