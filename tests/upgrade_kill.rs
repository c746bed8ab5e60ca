//! Steps you can stop, over real OpenSSH nodes (tests/support/upgrade.rs): a recipe step's
//! opt-in `kill_after` kills its process group on the node (journaled `kill:<step>`); the
//! global `step_timeout` only stops the waiting (the step goes on there, `--resume` waits for
//! it); `gpufleet upgrade --cancel` stops the running step of an unfinished rollout and leaves
//! the node drained and locked for `--resume` or `--abandon`.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use support::upgrade::*;

/// A step that hangs: it writes the pid of its child (`sleep 300`) to `<node>/hang.pid`.
fn hang_recipe(kill_after: &str) -> String {
    format!(
        "[recipes.hang]\nsteps = [{{ name = \"hang\", run = \"sleep 300 & echo $! > {{root}}/../hang.pid; wait\"{kill_after} }}, {{ name = \"switch\", run = \"fixture-switch-open {{root}}\" }}]\n"
    )
}

fn alive(pid: &str) -> bool {
    std::process::Command::new("kill")
        .args(["-0", pid])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

fn steps<'a>(j: &'a [serde_json::Value], step: &str) -> Vec<&'a serde_json::Value> {
    j.iter().filter(|e| e["step"] == step).collect()
}

/// `kill_after = "3s"`: the step's whole process group (its `sleep 300` child too) is killed
/// once it ran 3 s; the kill is in the journal, the step fails, the node stays drained and
/// locked, and the `on_failure` hook hears of it through its environment.
#[test]
fn a_step_is_killed_at_its_kill_after() {
    let hooked = tempfile::tempdir().unwrap();
    let hook_log = hooked.path().join("hook.log");
    let extra = format!(
        "on_failure = 'echo \"$GPUFLEET_NODE $GPUFLEET_STATE $GPUFLEET_STEP $GPUFLEET_ROLLOUT\" >> {}'\n{}",
        hook_log.display(),
        hang_recipe(", kill_after = \"3s\"")
    );
    let f = UpgradeFleet::start(1, 60, "1", &extra);
    f.inventory(&["hang"], "");
    let plan = f.run(&["upgrade", "--canary", "--dry-run"]);
    assert!(
        text(&plan).contains(
            "killed on the node after 3 s of running (TERM to its process group, KILL 10 s later)"
        ),
        "{}",
        text(&plan)
    );
    let start = Instant::now();
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(
            "node0 stopped at step:hang and stays drained: killed at its kill_after of 3 s (killed "
        ),
        "{said}"
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
    let pid = std::fs::read_to_string(f.nodes[0].join("hang.pid")).unwrap();
    assert!(
        !alive(pid.trim()),
        "the step's child {pid} was killed with its group"
    );
    let j = f.journal();
    let kill = steps(&j, "kill:hang");
    assert_eq!(kill.len(), 2, "{j:#?}");
    assert_eq!(kill[0]["phase"], "start");
    assert_eq!(kill[1]["phase"], "done");
    assert!(
        kill[1]["outcome"].as_str().unwrap().starts_with("killed "),
        "{:?}",
        kill[1]
    );
    assert!(
        kill[0]["command"]
            .as_str()
            .unwrap()
            .contains("gpufleet-kill")
    );
    let failed = steps(&j, "step:hang");
    assert_eq!(failed.last().unwrap()["phase"], "failed");
    assert_eq!(f.drains(), ["drain node0"], "drained, not uncordoned");
    assert!(
        f.nodes[0]
            .join("root/var/lib/gpufleet/rollout.lock")
            .exists()
    );
    let id = j[0]["rollout"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(&hook_log).unwrap(),
        format!("node0 failed step:hang {id}\n")
    );
    let hook = steps(&j, "hook:on_failure");
    assert_eq!(hook.len(), 2, "{j:#?}");
    assert_eq!(hook[1]["phase"], "done");
}

/// `step_timeout = 2` and a step of 8 s: gpufleet stops waiting at 2 s, the step goes on on
/// the node, and `--resume` waits for it and takes its recorded status: it ran once.
#[test]
fn a_step_outliving_step_timeout_goes_on_and_resume_waits_for_it() {
    let f = UpgradeFleet::start(1, 64, "1", "step_timeout = 2");
    f.inventory(&["marked_long"], "");
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("still running on the node after 2 s; it goes on there"),
        "{}",
        text(&out)
    );
    // Each --resume attaches to the step still running there and waits its step_timeout (the
    // plan's: 2 s) again; one of them sees it end (it takes 8 s) and goes on.
    let mut tries = 0;
    loop {
        tries += 1;
        let out = f.run(&["upgrade", "--resume", "--yes"]);
        assert!(
            text(&out).contains("step:mark was started before; waiting for it on the node"),
            "{}",
            text(&out)
        );
        if out.status.code() == Some(0) {
            break;
        }
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            text(&out).contains("still running on the node after 2 s"),
            "{}",
            text(&out)
        );
        assert!(tries < 10, "{}", text(&out));
    }
    assert_eq!(f.marks(0), ["start", "end"], "it ran once, to its end");
    assert!(steps(&f.journal(), "kill:mark").is_empty(), "never killed");
    assert_eq!(f.status("node0"), "ready");
}

/// gpufleet killed (SIGKILL) while a step without kill_after hangs on the node: the step goes
/// on there; `--cancel` kills it (journaled) and the node stays drained and locked; `--abandon`
/// then gives the rollout up. A second `--cancel` finds nothing unfinished.
#[test]
fn cancel_stops_the_running_step_and_leaves_the_node_drained_and_locked() {
    let f = UpgradeFleet::start(1, 68, "1", &hang_recipe(""));
    f.inventory(&["hang"], "");
    let mut child = f
        .command(&["upgrade", "--canary", "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    f.wait_journal(|e| e["step"] == "step:hang" && e["phase"] == "start");
    let pidfile = f.nodes[0].join("hang.pid");
    let start = Instant::now();
    while !pidfile.exists() {
        assert!(start.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL: the step goes on on the node
    child.wait().unwrap();
    let pid = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .to_string();
    assert!(alive(&pid));
    let out = f.run(&["upgrade", "--cancel"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("node0: step:hang killed "), "{said}");
    assert!(
        said.contains("cancelled: its nodes stay drained and locked"),
        "{said}"
    );
    assert!(!alive(&pid), "the step's process group is gone");
    let j = f.journal();
    assert_eq!(steps(&j, "kill:hang").last().unwrap()["phase"], "done");
    let last = steps(&j, "step:hang");
    let last = last.last().unwrap();
    assert_eq!(last["phase"], "failed");
    assert!(
        last["outcome"]
            .as_str()
            .unwrap()
            .starts_with("cancelled by the operator (gpufleet upgrade --cancel): killed "),
        "{last:?}"
    );
    assert_eq!(f.drains(), ["drain node0"]);
    assert!(
        f.nodes[0]
            .join("root/var/lib/gpufleet/rollout.lock")
            .exists()
    );
    let out = f.run(&["upgrade", "--abandon"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = f.run(&["upgrade", "--cancel"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("nothing to cancel"), "{}", text(&out));
}

/// `--cancel` while the rollout's own gpufleet still waits for the step: it kills the step,
/// and that gpufleet sees it cancelled, stops the node (drained, locked) and exits 1.
#[test]
fn cancel_while_the_rollout_runs_stops_its_node() {
    let f = UpgradeFleet::start(1, 72, "1", &hang_recipe(""));
    f.inventory(&["hang"], "");
    let child = f
        .command(&["upgrade", "--canary", "--yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pidfile = f.nodes[0].join("hang.pid");
    let start = Instant::now();
    while !pidfile.exists() {
        assert!(start.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = f.run(&["upgrade", "--cancel"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("the rollout's gpufleet still runs"),
        "{}",
        text(&out)
    );
    let run = child.wait_with_output().unwrap();
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    assert!(
        text(&run).contains("node0 stopped at step:hang and stays drained: cancelled by the operator (gpufleet upgrade --cancel)"),
        "{}",
        text(&run)
    );
    assert_eq!(f.drains(), ["drain node0"]);
    assert!(
        f.nodes[0]
            .join("root/var/lib/gpufleet/rollout.lock")
            .exists()
    );
}

/// A `kill_after` that is not a duration is refused before anything runs, naming the forms.
#[test]
fn a_kill_after_that_is_not_a_duration_is_refused() {
    let f = UpgradeFleet::start(1, 88, "1", &hang_recipe(", kill_after = \"soon\""));
    f.inventory(&["hang"], "");
    let out = f.run(&["upgrade", "--canary", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(
            "\"soon\" is not a duration in seconds: write 600, 600s, 10m, 2h, 1d or 1h30m"
        ),
        "{}",
        text(&out)
    );
    assert!(f.journal().is_empty());
    let out = f.run(&["upgrade", "--cancel", "--dry-run"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--cancel changes nodes: no dry run of it"
    );
}
