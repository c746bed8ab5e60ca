//! The scan's adaptive concurrency (issue 26, `probe::pace`) against `gpufleet sim` over real
//! SSH: it widens past its start on a fleet whose handshakes stay flat, and under a low
//! open-files limit it narrows (EMFILE) and retries instead of failing nodes. The speed this
//! buys is measured by bench/scale.sh, not here.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Command;

use support::sim::Sim;

/// A simulator of `nodes` nodes on a loopback range of this test's own (`third` picks it), each
/// round trip `latency`; returns it and its inventory.
fn fleet(dir: &Path, second: u8, nodes: usize, latency: &str) -> (Sim, std::path::PathBuf) {
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inventory = dir.join("fleet.toml");
    let range = format!("127.{second}.{}.0/24", std::process::id() % 250);
    let n = nodes.to_string();
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            &n,
            "--listen",
            &range,
            "--latency",
            latency,
            "--write-inventory",
            inventory.to_str().unwrap(),
        ],
    );
    (sim, inventory)
}

/// gpufleet `snapshot -i INVENTORY --format json --ssh-config none EXTRA…`, started through
/// `bash -c SCRIPT` (which ends with `exec "$0" "$@"`) when given; limits long enough for a
/// loaded 2-core machine and a debug build. Returns (exit code, stdout, stderr).
fn scan(
    dir: &Path,
    inventory: &Path,
    extra: &[&str],
    script: Option<&str>,
) -> (Option<i32>, Vec<u8>, String) {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        "[probe]\nnvidia_smi_timeout = 2\ndeadline = 60\n[ssh]\nconnect_timeout = 10\nauth_timeout = 30\n",
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_gpufleet");
    let mut cmd = match script {
        Some(s) => {
            let mut c = Command::new(support::need("bash"));
            c.args(["-c", s, bin]);
            c
        }
        None => Command::new(bin),
    };
    let out = cmd
        .args(["snapshot", "-i"])
        .arg(inventory)
        .args(["--format", "json", "--ssh-config", "none"])
        .args(extra)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.join("home"))
        .env("GPUFLEET_CONFIG", &config)
        .env("GPUFLEET_KNOWN_HOSTS", dir.join("gpufleet_known_hosts"))
        .output()
        .unwrap();
    (
        out.status.code(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every node of `doc` answered (none unreachable), `n` of them.
fn all_answered(doc: &serde_json::Value, n: usize) {
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), n);
    let down: Vec<_> = nodes
        .iter()
        .filter(|r| r["status"] == "unreachable")
        .map(|r| r["reasons"].to_string())
        .take(3)
        .collect();
    assert!(down.is_empty(), "{down:?}");
}

/// The widest concurrency in the scan's line ("… widest N, …").
fn widest(stderr: &str) -> usize {
    let line = stderr
        .lines()
        .find(|l| l.contains("concurrency adapted"))
        .unwrap_or_else(|| panic!("no concurrency line: {stderr}"));
    let after = line.split("widest ").nth(1).unwrap();
    after.split(',').next().unwrap().parse().unwrap()
}

/// 500 nodes at 500 ms a round trip: a handshake takes a few seconds whatever the
/// concurrency (the machine's CPU is not what it waits on), so each saturated window is flat and
/// the scan widens past its start of 256.
#[test]
fn a_flat_fleet_widens_past_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (sim, inventory) = fleet(dir, 13, 500, "500ms");
    let (code, stdout, stderr) = scan(dir, &inventory, &[], None);
    assert_eq!(code, Some(0), "{stderr}");
    all_answered(&serde_json::from_slice(&stdout).unwrap(), 500);
    assert!(
        stderr.contains("concurrency adapted: started at 256"),
        "{stderr}"
    );
    assert!(widest(&stderr) > 256, "{stderr}");
    drop(sim);
}

/// An explicit `--concurrency` is a fixed cap: the same fleet never goes past 300.
#[test]
fn an_explicit_concurrency_is_never_passed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (sim, inventory) = fleet(dir, 14, 500, "500ms");
    let (code, stdout, stderr) = scan(dir, &inventory, &["--concurrency", "300"], None);
    assert_eq!(code, Some(0), "{stderr}");
    all_answered(&serde_json::from_slice(&stdout).unwrap(), 500);
    // Started at 256 (the default, below the cap) and widened to the cap at most.
    assert!(stderr.contains("started at 256"), "{stderr}");
    assert_eq!(widest(&stderr), 300, "{stderr}");
    drop(sim);
}

/// 400 nodes at 100 ms a round trip, gpufleet started by bash with an open-files limit of 256
/// (soft and hard: it cannot raise it) and 170 of them already taken by inherited descriptors.
/// The limit lets the scan start at 192 (256 less 64 kept), but only about 70 sockets can be
/// opened: connects fail with EMFILE, the scan narrows below its start and retries them, and
/// every node answers.
#[test]
fn a_low_open_files_limit_narrows_and_fails_no_node() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (sim, inventory) = fleet(dir, 15, 400, "100ms");
    let script = "ulimit -n 256 || exit 97; for i in $(seq 10 179); do eval \"exec $i</dev/null\"; done; \
                  exec \"$0\" \"$@\"";
    let (code, stdout, stderr) = scan(dir, &inventory, &[], Some(script));
    assert_eq!(code, Some(0), "{stderr}");
    all_answered(&serde_json::from_slice(&stdout).unwrap(), 400);
    assert!(stderr.contains("lowered from 256 to 192"), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("concurrency adapted"))
        .unwrap_or_else(|| panic!("no concurrency line: {stderr}"));
    let narrowest: usize = line
        .split("narrowest ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(narrowest < 192, "{line}");
    assert!(!line.contains(" 0 connections retried"), "{line}");
    drop(sim);
}
