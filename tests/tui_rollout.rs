//! The TUI's rollout display in a real terminal (tmux) over real OpenSSH nodes: each node's
//! progress in the ROLLOUT column while it runs, the result pane listing a long failure
//! reason whole at 80 columns, and resume / abandon / cancel from the TUI behind the typed
//! node count (issue 20, item 9). The recipe's steps are shell on the fixture node; files
//! beside the node's tree (`hang`, `fail`) make a step hang or fail.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use support::upgrade::*;
use support::*;

/// A recipe whose steps show on screen: `slow` (3 s), `hang` (10 minutes once, when the file
/// `hang` is beside the node's tree), `check` (fails with the text of the file `fail`, when it
/// is there), then the stand-ins' switch to the open module and reboot.
const RECIPE: &str = r#"
[recipes.tui]
steps = [
  { name = "slow", run = "sleep 3" },
  { name = "hang", run = "if [ -e {root}/../hang ]; then rm -f {root}/../hang; sleep 600; fi" },
  { name = "check", run = "if [ -e {root}/../fail ]; then cat {root}/../fail; exit 3; fi" },
  { name = "switch", run = "fixture-switch-open {root}" },
  { name = "reboot", run = "fixture-reboot {root}", reboot = true },
]
"#;

/// The TUI over `f`'s inventory in a `width` x `height` tmux.
fn tui(f: &UpgradeFleet, width: u16, height: u16) -> Tmux {
    let command = format!(
        "env -i PATH=/usr/bin:/bin TERM=xterm-256color HOME={home} USER={user} GPUFLEET_CONFIG={config} \
         GPUFLEET_KNOWN_HOSTS={kh} {bin} --state-dir {state} tui -i {inv}; echo EXITED-$?; sleep 30",
        home = f.fleet.home().display(),
        user = local_user(),
        config = f.fleet.config.display(),
        kh = f.fleet.tmp.path().join("gpufleet_known_hosts").display(),
        bin = env!("CARGO_BIN_EXE_gpufleet"),
        state = f.state.display(),
        inv = f.fleet.inventory.display(),
    );
    Tmux::start_sized(&command, width, height)
}

/// Waits (up to `secs`: a loaded 2-core machine) until the screen contains `text`.
fn wait(tmux: &Tmux, text: &str, secs: u64) -> String {
    let start = Instant::now();
    loop {
        let s = tmux.screen();
        if s.contains(text) {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "waited for {text:?}; screen:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// With `GPUFLEET_TUI_SHOTS=DIR`, the screen as the terminal has it (colours included:
/// `capture-pane -e`) into `DIR/NAME.ansi`, for a person to look at (render it to PNG with
/// `term-shot.py`'s renderer); otherwise nothing.
fn shot(tmux: &Tmux, name: &str) {
    let Some(dir) = std::env::var_os("GPUFLEET_TUI_SHOTS") else {
        return;
    };
    let out = std::process::Command::new(need("tmux"))
        .args([
            "-L",
            &tmux.socket,
            "capture-pane",
            "-e",
            "-p",
            "-t",
            &tmux.session,
        ])
        .output()
        .unwrap();
    std::fs::write(
        std::path::Path::new(&dir).join(format!("{name}.ansi")),
        out.stdout,
    )
    .unwrap();
}

/// The journal's entries whose step and phase are these.
fn entries(f: &UpgradeFleet, step: &str, phase: &str) -> usize {
    f.journal()
        .iter()
        .filter(|e| e["step"] == step && e["phase"] == phase)
        .count()
}

/// At 80x24: `U` runs the plan and the ROLLOUT column follows the node (`step slow`); the
/// `check` step fails with a 300-character reason, which the status line announces with the
/// result pane's key, and the pane shows whole (every word of it, wrapped, none cut at the
/// edge). `A` abandons the rollout behind the typed count (journaled); a new rollout fails the
/// same way, and once the cause is gone, ctrl-r resumes it (its plan, the count) to the end:
/// `rebooting`, then `done`, the node `ready`.
#[test]
fn tui_rollout_progress_result_abandon_and_resume_at_80_columns() {
    let f = UpgradeFleet::start(1, 227, "1", RECIPE);
    f.inventory(&["tui"], "");
    let words: Vec<String> = (1..=20).map(|i| format!("reason-word-{i:02}")).collect();
    let reason = format!("the check found: {} END-OF-REASON", words.join(" "));
    let fail = f.nodes[0].join("fail");
    std::fs::write(&fail, &reason).unwrap();
    let tmux = tui(&f, 80, 24);
    wait(&tmux, "scanned 1/1", 60);
    tmux.keys(&["U"]);
    wait(&tmux, "upgrade plan", 60);
    tmux.keys(&["1", "Enter"]);
    // Progress in the ROLLOUT column while the node runs its steps.
    wait(&tmux, "step slow", 60);
    shot(&tmux, "80x24-progress");
    let screen = wait(&tmux, "failed: check", 90);
    let status = wait(&tmux, "o: result", 30);
    assert!(
        status.contains("stopped: 0 upgraded, 1 failed"),
        "{screen}\n{status}"
    );
    tmux.keys(&["o"]);
    let pane = wait(&tmux, "rollout result", 20);
    shot(&tmux, "80x24-result");
    // Each word of the reason on screen: the pane wraps it, never cuts it.
    for w in words.iter().chain([&"END-OF-REASON".to_string()]) {
        assert!(pane.contains(w.as_str()), "{w} missing:\n{pane}");
    }
    assert!(pane.contains("stays drained"), "{pane}");
    for line in pane.lines() {
        assert!(line.chars().count() <= 80, "{line:?}");
    }
    tmux.keys(&["o"]);

    // Abandon it from the TUI: the plan's count typed.
    tmux.keys(&["A"]);
    let confirm = wait(&tmux, "abandon rollout r-", 30);
    assert!(confirm.contains("Type 1"), "{confirm}");
    // A wrong count changes nothing.
    tmux.keys(&["7", "Enter"]);
    wait(&tmux, "abandon not confirmed", 20);
    assert_eq!(entries(&f, "rollout", "abandoned"), 0);
    tmux.keys(&["A"]);
    wait(&tmux, "abandon rollout r-", 30);
    shot(&tmux, "80x24-abandon");
    tmux.keys(&["1", "Enter"]);
    wait(&tmux, "abandoned (1 node(s))", 30);
    assert_eq!(entries(&f, "rollout", "abandoned"), 1);

    // A new rollout stops at the same step; with the cause gone, ctrl-r resumes it.
    tmux.keys(&["U"]);
    wait(&tmux, "upgrade plan", 60);
    tmux.keys(&["1", "Enter"]);
    wait(&tmux, "stopped: 0 upgraded, 1 failed", 90);
    std::fs::remove_file(&fail).unwrap();
    tmux.keys(&["C-r"]);
    let confirm = wait(&tmux, "resume rollout r-", 30);
    assert!(
        confirm.contains("done before (skipped on resume)"),
        "{confirm}"
    );
    shot(&tmux, "80x24-resume");
    tmux.keys(&["1", "Enter"]);
    wait(&tmux, "rebooting", 90);
    shot(&tmux, "80x24-rebooting");
    let done = wait(&tmux, "done: 1 upgraded", 120);
    assert!(done.contains("done"), "{done}");
    assert_eq!(f.status("node0"), "ready");
    // The resumed rollout did not run its done steps again: `slow` ran once in it.
    let j = f.journal();
    let resumed = j
        .iter()
        .rev()
        .find(|e| e["step"] == "rollout" && e["phase"] == "done")
        .unwrap()["rollout"]
        .clone();
    let slow = j
        .iter()
        .filter(|e| e["rollout"] == resumed && e["step"] == "step:slow" && e["phase"] == "start")
        .count();
    assert_eq!(slow, 1, "{j:#?}");
    tmux.keys(&["q"]);
    wait(&tmux, "EXITED-0", 30);
}

/// At 200x50: a step that hangs (10 minutes) shows as `step hang`; `C` stops it behind the
/// typed count while the TUI's own rollout runs (journaled `kill:hang`), the node stops there,
/// drained; ctrl-r resumes the rollout and it ends with the node upgraded.
#[test]
fn tui_cancels_a_hung_step_then_resumes() {
    let f = UpgradeFleet::start(1, 228, "1", RECIPE);
    f.inventory(&["tui"], "");
    std::fs::write(f.nodes[0].join("hang"), "").unwrap();
    let tmux = tui(&f, 200, 50);
    wait(&tmux, "scanned 1/1", 60);
    tmux.keys(&["U"]);
    wait(&tmux, "upgrade plan", 60);
    tmux.keys(&["1", "Enter"]);
    wait(&tmux, "step hang", 90);
    shot(&tmux, "200x50-hang");
    tmux.keys(&["C"]);
    let confirm = wait(&tmux, "cancel the running steps of rollout r-", 30);
    assert!(confirm.contains("node0: stops step:hang"), "{confirm}");
    shot(&tmux, "200x50-cancel");
    tmux.keys(&["1", "Enter"]);
    let screen = wait(&tmux, "failed: hang", 90);
    wait(&tmux, "stopped: 0 upgraded, 1 failed", 30);
    assert!(entries(&f, "kill:hang", "done") >= 1, "{screen}");
    tmux.keys(&["C-r"]);
    wait(&tmux, "resume rollout r-", 30);
    tmux.keys(&["1", "Enter"]);
    wait(&tmux, "done: 1 upgraded", 120);
    tmux.keys(&["o"]);
    wait(&tmux, "rollout result", 20);
    shot(&tmux, "200x50-result");
    assert_eq!(f.status("node0"), "ready");
    tmux.keys(&["q"]);
    wait(&tmux, "EXITED-0", 30);
}
