//! Lock races over real OpenSSH nodes (tests/support/upgrade.rs): a node locked by another
//! rollout is skipped with its holder (rollout, operator `user@host pid N`), the rest of the
//! wave goes on, the report says what happened to each node (never "stays drained" for a node
//! this rollout did not drain), and `--abandon` lists only what the rollout holds.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::{Output, Stdio};

use support::upgrade::*;

/// The rollout id of the first entry of `gpufleet journal` as printed.
fn first_id(journal: &str) -> String {
    journal
        .split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_string()
}

fn state_of(f: &UpgradeFleet, state: &Path) -> Vec<String> {
    let out = f
        .command_in(state, &["rollouts", "--json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap().to_string())
        .collect()
}

/// Two operators, each with a state folder of their own, start overlapping waves at the same
/// instant (node1+node2 and node2+node3): node2 is upgraded by exactly one, the other skips it
/// naming the holder and goes on with its other node; both exit 0, both reports are true, each
/// node is drained and uncordoned once, and neither rollout is left resumable.
#[test]
fn two_operators_with_an_overlapping_wave_each_node_handled_by_one_the_rest_go_on() {
    let f = UpgradeFleet::start(4, 240, "1", "");
    f.inventory(&["switch", "marked_long"], "");
    let other = f.state.with_file_name("state-of-another-operator");
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let spawn = |state: &Path, nodes: [&str; 2]| {
        f.command_in(
            state,
            &[
                "upgrade", "--wave", "--yes", "--node", nodes[0], "--node", nodes[1],
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
    };
    let a = spawn(&f.state, ["node1", "node2"]);
    let b = spawn(&other, ["node2", "node3"]);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let ja = f.journal_text(&f.state);
    let jb = f.journal_text(&other);
    eprintln!("--- journal of operator A:\n{ja}\n--- journal of operator B:\n{jb}");
    assert_eq!(
        (a.status.code(), b.status.code()),
        (Some(0), Some(0)),
        "A:\n{}\nB:\n{}",
        text(&a),
        text(&b)
    );
    // A's journal starts with its canary rollout; its wave is the last rollout.
    let wave_id = |state: &Path| {
        let out = f
            .command_in(state, &["rollouts", "--json"])
            .output()
            .unwrap();
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        list.as_array().unwrap().last().unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (ida, idb) = (wave_id(&f.state), wave_id(&other));
    assert_eq!(first_id(&jb), idb);
    let said = |o: &Output, id: &str| {
        let t = text(o);
        assert!(
            !t.contains("stays drained") && !t.contains("may be drained"),
            "no node was left drained:\n{t}"
        );
        assert!(!t.contains("FAILED"), "{t}");
        t.contains(&format!(
            "node2 skipped: another rollout holds the node: locked by rollout {id} ("
        )) && t.contains(" pid ")
            && t.contains("1 node(s) upgraded, 1 skipped: node2 skipped")
    };
    let (a_lost, b_lost) = (said(&a, &idb), said(&b, &ida));
    assert!(
        a_lost != b_lost,
        "exactly one skips node2, naming the other:\nA:\n{}\nB:\n{}",
        text(&a),
        text(&b)
    );
    let winner = if a_lost { &b } else { &a };
    assert!(
        text(winner).contains("2 node(s) upgraded"),
        "{}",
        text(winner)
    );
    for i in 1..4 {
        assert_eq!(f.marks(i), ["start", "end"], "node{i}'s step ran once");
        assert_eq!(f.status(&format!("node{i}")), "ready");
    }
    let mut drains = f.drains();
    drains.sort();
    assert_eq!(
        drains,
        [
            "drain node0",
            "drain node1",
            "drain node2",
            "drain node3",
            "uncordon node0",
            "uncordon node1",
            "uncordon node2",
            "uncordon node3"
        ],
        "each node drained and uncordoned once"
    );
    // Both rollouts ended: neither blocks its folder, neither is resumable.
    assert_eq!(state_of(&f, &f.state), ["done", "done"]);
    assert_eq!(state_of(&f, &other), ["done"]);
    for state in [&f.state, &other] {
        let out = f
            .command_in(state, &["upgrade", "--resume", "--yes"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("nothing to resume"), "{}", text(&out));
    }
    for i in 0..4 {
        assert!(
            !f.nodes[i]
                .join("root/var/lib/gpufleet/rollout.lock")
                .exists(),
            "node{i}: no lock left behind"
        );
    }
}

/// A wave where one node is locked by another operator's rollout and another node fails its
/// gates: the locked node is skipped (not a failure: the other node still runs to its gates,
/// max_failures 0 notwithstanding), the failed one stays drained, and `--abandon` lists only
/// what this rollout holds: the failed node's drain and lock, never the other's lock.
#[test]
fn abandon_lists_only_what_the_rollout_holds() {
    let f = UpgradeFleet::start(2, 245, "1", "");
    f.inventory(&["noop"], "");
    let inv = std::fs::read_to_string(&f.fleet.inventory)
        .unwrap()
        .replace("canary = false", "canary = true");
    f.fleet.write_inventory(&inv);
    let marker = f.nodes[1].join("root/var/lib/gpufleet/rollout.lock");
    std::fs::create_dir_all(&marker).unwrap();
    let owner = "r-someone-else\nops@elsewhere pid 7\nsince 2026-12-01T00:00:00Z\n";
    std::fs::write(marker.join("owner"), owner).unwrap();
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    for want in [
        "node1 skipped: another rollout holds the node: locked by rollout r-someone-else (ops@elsewhere pid 7 since 2026-12-01T00:00:00Z)",
        "node0 stopped at gates and stays drained: open-module",
        "0 node(s) upgraded, 1 skipped: node1 skipped",
        "1 failed: node0 stopped at gates and stays drained",
    ] {
        assert!(t.contains(want), "{want:?} in:\n{t}");
    }
    assert!(!t.contains("node1 stopped"), "{t}");
    assert_eq!(f.drains(), ["drain node0"], "node1 was never drained");
    assert_eq!(state_of(&f, &f.state), ["failed"]);
    let out = f.run(&["upgrade", "--abandon"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let t = text(&out);
    let log = f.drain_log.display().to_string();
    for want in [
        format!("node0 stays drained; give it back with: echo uncordon node0 >> {log}"),
        "node0 keeps this rollout's node lock (".into(),
        "node1 was not touched: another rollout held it".into(),
    ] {
        assert!(t.contains(&want), "{want:?} in:\n{t}");
    }
    assert!(
        !t.contains("node1 keeps") && !t.contains("node1 may") && !t.contains("node1 stays"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(marker.join("owner")).unwrap(),
        owner,
        "the other rollout's lock is untouched"
    );
}

/// A plan made before another operator upgraded the node: operator B's plan waits at its
/// prompt (a real terminal, tmux) while operator A upgrades the node; B then confirms, takes
/// the lock, finds the node `ready` now, gives the lock back and skips it — nothing drained,
/// its rollout ends `skipped`, exit 0.
#[test]
fn a_plan_overtaken_by_another_operator_skips_the_node_and_gives_its_lock_back() {
    let f = UpgradeFleet::start(1, 248, "1", "");
    f.inventory(&["switch"], "");
    let other = f.state.with_file_name("state-of-another-operator");
    let said = f.scratch.path().join("b.out");
    let command = format!(
        "env -i PATH=/usr/bin:/bin HOME={home} USER={user} GPUFLEET_CONFIG={config} \
         GPUFLEET_KNOWN_HOSTS={kh} {bin} --state-dir {state} upgrade --canary -i {inv} > {out} 2>&1; \
         echo EXITED-$? >> {out}; sleep 30",
        home = f.fleet.home().display(),
        user = support::local_user(),
        config = f.fleet.config.display(),
        kh = f.fleet.tmp.path().join("gpufleet_known_hosts").display(),
        bin = env!("CARGO_BIN_EXE_gpufleet"),
        state = other.display(),
        inv = f.fleet.inventory.display(),
        out = said.display(),
    );
    let b_said = || std::fs::read_to_string(&said).unwrap_or_default();
    let tmux = support::Tmux::start(&command);
    support::wait_until(
        "operator B's prompt",
        std::time::Duration::from_secs(60),
        || b_said().contains("Type 1 to go on"),
    );
    // Meanwhile operator A upgrades the node.
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(f.status("node0"), "ready");
    tmux.keys(&["1", "Enter"]);
    support::wait_until(
        "operator B's end",
        std::time::Duration::from_secs(60),
        || b_said().contains("EXITED-"),
    );
    let t = b_said();
    for want in [
        "node0 skipped: the node changed since the plan: it is ready now (",
        "nothing was done and its lock is released (upgraded by another rollout meanwhile)",
        "0 node(s) upgraded, 1 skipped",
        "EXITED-0",
    ] {
        assert!(t.contains(want), "{want:?} in:\n{t}");
    }
    assert!(!t.contains("stays drained"), "{t}");
    assert_eq!(f.drains(), ["drain node0", "uncordon node0"], "A's only");
    assert_eq!(state_of(&f, &other), ["skipped"]);
    assert!(
        !f.nodes[0]
            .join("root/var/lib/gpufleet/rollout.lock")
            .exists(),
        "B gave the lock back"
    );
}
