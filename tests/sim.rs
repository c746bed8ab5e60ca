//! `gpufleet sim` as a child process, scanned by gpufleet and by OpenSSH's `ssh`: every node
//! answers as its fixture's `[expected]` table says, the probe works with another client, any
//! other command is refused with 127 and runs nothing, only the written user key is accepted,
//! and `--hang` nodes are seen as hung.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use gpufleet::model::Thresholds;
use gpufleet::probe::{RawRun, RunEnd};
use serde_json::Value;
use support::{any_fixture, check_expected, manifest};

/// A running simulator, stopped (by PID, SIGTERM then SIGKILL) on drop.
struct Sim {
    child: Child,
    /// Its stdout up to the `ready` line.
    banner: String,
    /// Where its stderr goes.
    stderr: PathBuf,
}

impl Sim {
    /// Starts `gpufleet sim` with `args` and waits (up to 120 s: a loaded 2-core machine) for
    /// its `ready` line.
    fn start(dir: &Path, args: &[&str]) -> Sim {
        let stderr = dir.join("sim.stderr");
        let mut child = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .arg("sim")
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", dir.join("home"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start gpufleet sim");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut banner = String::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                banner.push_str(&line);
                banner.push('\n');
                if line.starts_with("ready") {
                    let _ = tx.send(banner.clone());
                }
            }
        });
        let mut sim = Sim {
            child,
            banner: String::new(),
            stderr,
        };
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(banner) => sim.banner = banner,
            Err(_) => panic!(
                "gpufleet sim did not get ready; stderr:\n{}",
                std::fs::read_to_string(&sim.stderr).unwrap_or_default()
            ),
        }
        sim
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid, which it keeps until we wait for it.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test's gpufleet: a clean environment (HOME in the temp folder, no ssh-agent), a config
/// with short limits.
fn gpufleet(dir: &Path, args: &[&str]) -> Output {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        "[probe]\nnvidia_smi_timeout = 2\ndeadline = 20\n[ssh]\nconnect_timeout = 5\nauth_timeout = 10\n",
    )
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.join("home"))
        .env("GPUFLEET_CONFIG", &config)
        .env("GPUFLEET_KNOWN_HOSTS", dir.join("gpufleet_known_hosts"))
        .output()
        .unwrap()
}

/// `snapshot -i <inventory> --format json` plus `extra`; the document.
fn snapshot(dir: &Path, inventory: &Path, extra: &[&str]) -> Value {
    let inv = inventory.display().to_string();
    let mut args = vec!["snapshot", "-i", &inv, "--format", "json"];
    args.extend_from_slice(extra);
    let out = gpufleet(dir, &args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "snapshot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

/// The fixture a simulated node was cycled from: the `fixture` label the simulator wrote for it
/// in the inventory, which its name also ends with.
fn fixture_of(inventory: &[(String, u16, String)], node: &Value) -> PathBuf {
    let name = node["name"].as_str().unwrap();
    let (_, _, fixture) = inventory
        .iter()
        .find(|n| n.0 == name)
        .unwrap_or_else(|| panic!("{name} is not in the inventory"));
    assert!(name.starts_with("sim-") && name.ends_with(&format!("-{fixture}")));
    any_fixture(fixture)
}

/// The inventory's nodes: (name, port, fixture label).
fn inventory_nodes(inventory: &Path) -> Vec<(String, u16, String)> {
    let doc: toml::Table = std::fs::read_to_string(inventory).unwrap().parse().unwrap();
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                u16::try_from(n["port"].as_integer().unwrap()).unwrap(),
                n["labels"]["fixture"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// OpenSSH's client with `key` (and only it), the simulator's known_hosts checked strictly.
fn ssh(key: &Path, known_hosts: &Path, port: u16, command: &str, stdin: &[u8]) -> Output {
    let mut child = Command::new("ssh")
        .args([
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
        ])
        .args([
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
        ])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
        .arg("-i")
        .arg(key)
        .arg("-p")
        .arg(port.to_string())
        .arg("root@127.0.0.1")
        .arg(command)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ssh (openssh-client) is installed");
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = input.write_all(&bytes);
    });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let mut stdout = Vec::new();
    out.read_to_end(&mut stdout).unwrap();
    let status = child.wait().unwrap();
    writer.join().unwrap();
    Output {
        status,
        stdout,
        stderr: err_reader.join().unwrap(),
    }
}

#[test]
fn sim_is_scanned_by_gpufleet_and_openssh() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inventory = dir.join("fleet.toml");
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            "6",
            "--write-inventory",
            inventory.to_str().unwrap(),
        ],
    );
    assert!(
        sim.banner
            .contains(&format!("inventory: {}", inventory.display())),
        "{}",
        sim.banner
    );
    let key = dir.join("fleet.toml.id_ed25519");
    let known_hosts = dir.join("fleet.toml.known_hosts");
    assert!(key.is_file() && known_hosts.is_file());
    let nodes = inventory_nodes(&inventory);
    assert_eq!(nodes.len(), 6);

    // (a) gpufleet scans it; every node says what its fixture expects.
    let doc = snapshot(dir, &inventory, &[]);
    let reported = doc["nodes"].as_array().unwrap();
    assert_eq!(reported.len(), 6, "{doc:#}");
    let mut failures = Vec::new();
    for node in reported {
        let fixture = fixture_of(&nodes, node);
        let want: toml::Table = std::fs::read_to_string(fixture.join("node.toml"))
            .unwrap()
            .parse()
            .unwrap();
        assert!(want["expected"].get("status").is_some());
        failures.extend(check_expected(&fixture, node));
    }
    assert!(
        failures.is_empty(),
        "simulated nodes differ from their fixtures:\n{}\nsim stderr:\n{}",
        failures.join("\n"),
        sim.stderr()
    );

    // (b) OpenSSH's ssh runs the probe (header + script on stdin of `sh -s`) on one node: a
    // complete probe framed by the boundary it sent, that reads as that fixture expects.
    let (name, port, fixture) = nodes
        .iter()
        .find(|n| n.2 == "h200-open-580-k6.18-real")
        .cloned()
        .unwrap_or_else(|| nodes[0].clone());
    let boundary = "gpufleet-0123456789abcdef0123456789abcdef";
    let mut stdin = format!("B='{boundary}' R='/' T=2 D=20 L=200\n").into_bytes();
    stdin.extend(std::fs::read(manifest().join("src/probe/probe.sh")).unwrap());
    let out = ssh(&key, &known_hosts, port, "sh -s", &stdin);
    assert_eq!(
        out.status.code(),
        Some(0),
        "ssh sh -s: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("{boundary} meta probe\nprotocol 2\n")),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("{boundary} meta complete\n\n{boundary} end ok\n")),
        "no `meta complete` trailer with our boundary:\n{text}"
    );
    // Every section line carries our boundary: the recording's was replaced everywhere.
    for line in text.lines().filter(|l| l.starts_with("gpufleet-")) {
        assert!(line.starts_with(boundary), "{line}");
    }
    let run = RawRun {
        boundary: boundary.to_string(),
        output: out.stdout.clone(),
        end: RunEnd::Completed,
        duration: Duration::from_millis(1),
        exit: None,
    };
    let report = gpufleet::probe::report(
        Some(name.clone()),
        &run,
        &Thresholds::default(),
        "2026-01-01T00:00:00Z".into(),
    );
    let node = serde_json::to_value(&report).unwrap();
    let failures = check_expected(&any_fixture(&fixture), &node);
    assert!(failures.is_empty(), "{name} over OpenSSH: {failures:?}");

    // (c) Any other command is refused with 127 and runs nothing.
    let victim = dir.join("victim");
    std::fs::create_dir_all(victim.join("x")).unwrap();
    let rm = format!("rm -rf {}", victim.display());
    let out = ssh(&key, &known_hosts, port, &rm, b"");
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("runs nothing"), "{err}");
    assert!(victim.join("x").is_dir(), "the command ran");
    // `sh -s` with something other than the probe on stdin too.
    let out = ssh(
        &key,
        &known_hosts,
        port,
        "sh -s",
        format!("rm -rf {}\n", victim.display()).as_bytes(),
    );
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    assert!(victim.join("x").is_dir(), "the script ran");
    // A probe header followed by more than the probe script.
    let mut more = stdin.clone();
    more.extend_from_slice(format!("rm -rf {}\n", victim.display()).as_bytes());
    let out = ssh(&key, &known_hosts, port, "sh -s", &more);
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    assert!(victim.join("x").is_dir(), "the script ran");

    // Only the written user key gets in.
    let other = dir.join("other_key");
    support::keygen(&other, "");
    let out = ssh(&other, &known_hosts, port, "sh -s", &stdin);
    assert_eq!(out.status.code(), Some(255), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{out:?}"
    );
    assert!(sim.stderr().contains("refused"), "{}", sim.stderr());
}

#[test]
fn hung_sim_nodes_are_reported_hung() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inventory = dir.join("fleet.toml");
    let fixture = any_fixture("h200-open-580-k6.18-real");
    let _sim = Sim::start(
        dir,
        &[
            "--nodes",
            "2",
            "--hang",
            "50%",
            "--latency",
            "20ms",
            "--fixtures",
            fixture.to_str().unwrap(),
            "--write-inventory",
            inventory.to_str().unwrap(),
        ],
    );
    let doc = snapshot(dir, &inventory, &["--deadline", "4"]);
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    // Node 1 of 2 hangs at 50 % (labelled so in the inventory); node 0 answers (after 20 ms)
    // as its fixture.
    let text = std::fs::read_to_string(&inventory).unwrap();
    assert_eq!(text.matches("sim = \"hang\"").count(), 1, "{text}");
    let listed = inventory_nodes(&inventory);
    assert_eq!(
        check_expected(&fixture_of(&listed, &nodes[0]), &nodes[0]),
        Vec::<String>::new()
    );
    assert_eq!(nodes[1]["status"], "unreachable", "{:#}", nodes[1]);
    let msg = nodes[1]["reasons"][0]["message"].as_str().unwrap();
    assert!(msg.contains("deadline passed"), "{msg}");
}
