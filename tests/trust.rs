//! The trust model, tried as an attacker and a careless fleet would (docs/faults.md): the
//! boundary never appears in any process's argv or environment on the node, a root prefix
//! confines every read, and nothing of a probe outlives the node deadline by more than 2 s —
//! also when gpufleet is SIGKILLed or the TUI quits. Local mode and over a real OpenSSH sshd.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Fleet, Tmux, codes, manifest, scratch};

fn snapshot_cmd(node: &Path, path: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpufleet"));
    c.args(["snapshot", "--format", "json", "--root"])
        .arg(node.join("root"))
        .arg("--config")
        .arg(manifest().join("config/config.example.toml"))
        .args(extra)
        .env("PATH", path)
        .stdin(Stdio::null());
    c
}

fn default_path(node: &Path) -> String {
    format!("{}:/usr/bin:/bin", node.join("bin").display())
}

fn run_json(node: &Path, extra: &[&str]) -> Value {
    let out = snapshot_cmd(node, &default_path(node), extra)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    doc["nodes"][0].clone()
}

/// Every process on this machine whose argv or environment holds `needle`.
fn processes_holding(needle: &[u8]) -> Vec<(u32, String)> {
    processes_with(needle, &["cmdline", "environ"])
}

/// Every process on this machine whose /proc/<pid>/`files` (cmdline, environ) hold `needle`.
fn processes_with(needle: &[u8], files: &[&str]) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        for f in files {
            if let Ok(bytes) = std::fs::read(e.path().join(f))
                && bytes.windows(needle.len()).any(|w| w == needle)
            {
                let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                found.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
                break;
            }
        }
    }
    found
}

/// A boundary in `bytes`: `gpufleet-` and 32 lower-case hex digits.
fn holds_boundary(bytes: &[u8]) -> bool {
    let tag = b"gpufleet-";
    bytes.windows(tag.len() + 32).any(|w| {
        w.starts_with(tag)
            && w[tag.len()..]
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    })
}

/// What a [`Watcher`] saw: command lines of processes holding a real boundary, whether it saw
/// the planted one, and how many times it read every process.
struct Seen {
    real: Vec<String>,
    planted: bool,
    rounds: u64,
}

/// Reads every /proc/*/cmdline and /proc/*/environ over and over until stopped.
struct Watcher {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Seen>,
}

/// The boundary the positive control plants. Tests run in parallel, so a watcher may see the
/// other test's plant: it is told apart from a real boundary.
const PLANTED: &str = "gpufleet-0123456789abcdef0123456789abcdef";

impl Watcher {
    fn start() -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut seen = Seen {
                real: Vec::new(),
                planted: false,
                rounds: 0,
            };
            while !s.load(Ordering::Relaxed) {
                seen.rounds += 1;
                for e in std::fs::read_dir("/proc").unwrap().flatten() {
                    let pid = e.file_name().to_str().map(str::parse::<u32>);
                    if !matches!(pid, Some(Ok(_))) {
                        continue;
                    }
                    for f in ["cmdline", "environ"] {
                        let Ok(b) = std::fs::read(e.path().join(f)) else {
                            continue;
                        };
                        if b.windows(PLANTED.len()).any(|w| w == PLANTED.as_bytes()) {
                            seen.planted = true;
                        } else if holds_boundary(&b) {
                            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                            seen.real
                                .push(String::from_utf8_lossy(&cmd).replace('\0', " "));
                        }
                    }
                }
            }
            seen
        });
        Watcher { stop, handle }
    }

    fn finish(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// The watcher catches a boundary planted in the argv of a 1 s child (the positive control:
/// without it, the tests below could not fail).
fn positive_control() {
    let w = Watcher::start();
    let st = Command::new("sh")
        .args(["-c", "sleep 1", "planted", PLANTED])
        .status()
        .unwrap();
    assert!(st.success());
    let seen = w.finish();
    assert!(
        seen.planted,
        "the watcher missed a planted boundary in {} rounds",
        seen.rounds
    );
}

#[test]
fn the_boundary_never_appears_in_any_argv_or_environment_locally() {
    positive_control();
    // nvidia-smi hangs 2 s: the probe and its children live long enough to be watched.
    let (_t, node) = scratch("l40s-open-570-k6.8-smi-hang");
    let w = Watcher::start();
    let n = run_json(&node, &["--nvidia-smi-timeout", "3", "--deadline", "10"]);
    let seen = w.finish();
    assert_eq!(n["driver"]["version"], "570.86.15", "the probe did not run");
    assert!(
        seen.rounds > 10,
        "the watcher ran only {} rounds",
        seen.rounds
    );
    assert!(seen.real.is_empty(), "boundary seen in: {:?}", seen.real);
}

#[test]
fn the_boundary_never_appears_in_any_argv_or_environment_over_ssh() {
    positive_control();
    let (_t, node) = scratch("l40s-open-570-k6.8-smi-hang");
    let fleet = Fleet::start(std::slice::from_ref(&node), 60);
    let w = Watcher::start();
    let (_, doc) = fleet.snapshot(&["--nvidia-smi-timeout", "3", "--deadline", "10"]);
    let seen = w.finish();
    assert_eq!(doc["nodes"][0]["driver"]["version"], "570.86.15", "{doc:#}");
    assert!(
        seen.rounds > 10,
        "the watcher ran only {} rounds",
        seen.rounds
    );
    assert!(seen.real.is_empty(), "boundary seen in: {:?}", seen.real);
}

/// A node tree with a file outside its root that would make nvidia-peermem "configured".
fn hostile_root() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (t, node) = scratch("h200-open-580-k6.18-real");
    let outside = t.path().join("outside");
    std::fs::create_dir_all(outside.join("modprobe.d")).unwrap();
    std::fs::write(
        outside.join("secret.conf"),
        "# OUTSIDE-THE-ROOT\nsoftdep nvidia post: nvidia-peermem\n",
    )
    .unwrap();
    std::fs::write(
        outside.join("modprobe.d/evil.conf"),
        "# OUTSIDE-THE-ROOT\nsoftdep nvidia post: nvidia-peermem\n",
    )
    .unwrap();
    (t, node, outside)
}

fn assert_confined(n: &Value) {
    let text = n.to_string();
    assert!(!text.contains("OUTSIDE-THE-ROOT"), "read outside: {n:#}");
    assert_ne!(n["peermem"]["configured"], true, "{n:#}");
}

#[test]
fn symlinks_never_lead_a_read_out_of_the_root() {
    let (_t, node, outside) = hostile_root();
    let etc = node.join("root/etc/modprobe.d");
    std::fs::create_dir_all(&etc).unwrap();
    let depth = node.join("root").components().count();
    // Absolute: resolved under the root, where it does not exist.
    std::os::unix::fs::symlink(outside.join("secret.conf"), etc.join("abs.conf")).unwrap();
    // Relative, climbing far above the root: `..` stops at the root.
    let up = "../".repeat(depth + 3);
    let rel = format!("{up}{}", outside.join("secret.conf").display());
    std::os::unix::fs::symlink(&rel, etc.join("rel.conf")).unwrap();
    // A folder link out of the root.
    std::os::unix::fs::symlink(outside.join("modprobe.d"), node.join("root/run")).unwrap();
    let n = run_json(&node, &[]);
    assert_confined(&n);
    // Dangling under the root = absent: the answer stays "not configured", and the node ready.
    assert_eq!(n["peermem"]["configured"], false, "{n:#}");
    assert_eq!(n["status"], "ready", "{n:#}");
}

#[test]
fn a_symlink_loop_or_a_fifo_makes_the_fact_unknown_never_ready() {
    for case in ["loop", "fifo", "chain"] {
        let (_t, node, outside) = hostile_root();
        let etc = node.join("root/etc/modprobe.d");
        std::fs::create_dir_all(&etc).unwrap();
        match case {
            "loop" => {
                std::os::unix::fs::symlink("b.conf", etc.join("a.conf")).unwrap();
                std::os::unix::fs::symlink("a.conf", etc.join("b.conf")).unwrap();
            }
            "fifo" => {
                let st = Command::new("mkfifo")
                    .arg(etc.join("x.conf"))
                    .status()
                    .unwrap();
                assert!(st.success());
            }
            _ => {
                // An absolute link to a link that climbs with `..`: still confined, and a
                // loop through an absolute target is still a loop.
                std::os::unix::fs::symlink(
                    "/etc/modprobe.d/../modprobe.d/c.conf",
                    etc.join("c.conf"),
                )
                .unwrap();
            }
        }
        let start = Instant::now();
        let n = run_json(&node, &["--deadline", "20"]);
        assert!(start.elapsed() < Duration::from_secs(10), "{case}: hung");
        assert_confined(&n);
        assert_eq!(n["peermem"]["configured"], Value::Null, "{case}: {n:#}");
        if case != "fifo" {
            assert!(
                n.to_string().contains("too many levels of symbolic links"),
                "{case}: {n:#}"
            );
        }
        assert_eq!(n["status"], "unknown", "{case}: {n:#}");
        assert!(codes(&n).contains(&"verdict-incomplete".to_string()));
        let _ = outside;
    }
}

/// Waits until `secs` after `start`, then returns the processes still holding `marker`.
fn left_behind_at(start: Instant, secs: u64, marker: &Path) -> Vec<(u32, String)> {
    let at = start + Duration::from_secs(secs);
    if let Some(wait) = at.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
    processes_holding(marker.as_os_str().as_encoded_bytes())
}

fn sigkill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The smi-hang fixture with nvidia-smi hanging 300 s: only the deadline can end the probe.
fn hang_node() -> (tempfile::TempDir, PathBuf) {
    let (t, node) = scratch("l40s-open-570-k6.8-smi-hang");
    std::fs::write(node.join("commands/nvidia-smi-hang"), "300").unwrap();
    (t, node)
}

#[test]
fn nothing_of_a_local_probe_outlives_the_deadline_when_gpufleet_is_killed() {
    for without in ["", "timeout"] {
        let (t, node) = hang_node();
        let (_tools, tools) = support::tools_without(&[without]);
        let path = format!("{}:{tools}", node.join("bin").display());
        let start = Instant::now();
        let mut child = snapshot_cmd(
            &node,
            &path,
            &["--deadline", "5", "--nvidia-smi-timeout", "4"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        support::wait_until(
            &format!("the probe to run (without {without:?})"),
            Duration::from_secs(10),
            || !processes_holding(t.path().as_os_str().as_encoded_bytes()).is_empty(),
        );
        sigkill(&mut child);
        let left = left_behind_at(start, 7, t.path());
        assert!(
            left.is_empty(),
            "without {without:?}: left behind: {left:?}"
        );
    }
}

#[test]
fn nothing_of_a_probe_over_ssh_outlives_the_deadline_when_gpufleet_is_killed() {
    let (t, node) = hang_node();
    let mut fleet = Fleet::start(std::slice::from_ref(&node), 64);
    // A node without `timeout`: only the probe's watchdog can end the hung nvidia-smi.
    let (_tools, tools) = support::tools_without(&["timeout"]);
    fleet.restart(
        0,
        false,
        &format!("SetEnv PATH={}:{tools}", node.join("bin").display()),
    );
    let inv = fleet.inventory.display().to_string();
    let start = Instant::now();
    let mut child = fleet
        .command(&[
            "snapshot",
            "-i",
            &inv,
            "--format",
            "json",
            "--deadline",
            "5",
            "--nvidia-smi-timeout",
            "4",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    support::wait_until(
        "the probe to run on the node",
        Duration::from_secs(10),
        || !processes_holding(t.path().as_os_str().as_encoded_bytes()).is_empty(),
    );
    sigkill(&mut child);
    let left = left_behind_at(start, 7, t.path());
    assert!(left.is_empty(), "left behind on the node: {left:?}");
}

#[test]
fn quitting_the_tui_kills_a_local_probe_at_once() {
    let (t, node) = hang_node();
    let cmd = format!(
        "PATH={}:/usr/bin:/bin {} tui --local --root {} --config {} --nvidia-smi-timeout 100 --deadline 120",
        node.join("bin").display(),
        env!("CARGO_BIN_EXE_gpufleet"),
        node.join("root").display(),
        manifest().join("config/config.example.toml").display()
    );
    let tmux = Tmux::start(&cmd);
    // By environment only: tmux's own command line holds the marker too. gpufleet and every
    // process of its probe have it in PATH.
    let marker = t.path().as_os_str().as_encoded_bytes().to_vec();
    let holding = || processes_with(&marker, &["environ"]);
    support::wait_until(
        "the probe to reach nvidia-smi",
        Duration::from_secs(10),
        || holding().iter().any(|(_, c)| c.starts_with("sleep 300")),
    );
    let before = holding();
    assert!(
        before.iter().any(|(_, c)| c.starts_with("sleep 300")),
        "the probe is not in nvidia-smi yet: {before:?}\n{}",
        tmux.screen()
    );
    tmux.keys(&["q"]);
    let start = Instant::now();
    let mut left = holding();
    while !left.is_empty() && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(100));
        left = holding();
    }
    assert!(left.is_empty(), "left behind after q: {left:?}");
}

#[test]
fn sigterm_and_sighup_kill_a_local_probe_at_once() {
    for sig in ["TERM", "HUP", "INT"] {
        let (t, node) = hang_node();
        let path = default_path(&node);
        let mut child = snapshot_cmd(
            &node,
            &path,
            &["--deadline", "120", "--nvidia-smi-timeout", "100"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        let marker = t.path().as_os_str().as_encoded_bytes().to_vec();
        let start = Instant::now();
        // The replayed nvidia-smi's `sleep 300` (found by its environment's PATH).
        while !processes_with(&marker, &["environ"])
            .iter()
            .any(|(_, c)| c.starts_with("sleep 300"))
        {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{sig}: no nvidia-smi"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let st = Command::new("kill")
            .args([&format!("-{sig}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let code = child.wait().unwrap().code();
        assert_eq!(code, Some(130), "{sig}");
        let left = processes_with(&marker, &["cmdline", "environ"]);
        assert!(left.is_empty(), "{sig}: left behind: {left:?}");
    }
}
