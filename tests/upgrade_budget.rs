//! The fleet-wide unavailability budget (issue 20, item 6) over real OpenSSH nodes
//! (tests/support/upgrade.rs): `--max-unavailable 25%` of the selected nodes, shared by two
//! operators with their own state folders through the node locks the probe reads: while one
//! holds the budget the other plans nothing and says why, and never more nodes are out of
//! service at once than the budget.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;

use support::upgrade::*;

/// The most nodes drained at once, from the drain log's order.
fn most_drained_at_once(log: &[String]) -> usize {
    let mut now = std::collections::BTreeSet::new();
    let mut most = 0;
    for l in log {
        match l.split_once(' ') {
            Some(("drain", n)) => {
                now.insert(n.to_string());
            }
            Some(("uncordon", n)) => {
                now.remove(n);
            }
            _ => {}
        }
        most = most.max(now.len());
    }
    most
}

#[test]
fn max_unavailable_25_percent_shared_by_two_operators_with_their_own_state_folders() {
    let f = UpgradeFleet::start(4, 150, "1", "");
    f.inventory(&["switch", "marked_long"], "");
    let other = f.state.with_file_name("state-of-another-operator");
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let canary = f.journal().last().unwrap()["rollout"].clone();
    let wave = ["upgrade", "--wave", "--yes", "--max-unavailable", "25%"];
    // Operator A: a wave of 25% of the 4 selected nodes, 1 node, which takes 8 s.
    let a = f
        .command(&wave)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let wave_drained = |e: &serde_json::Value| {
        e["rollout"] != canary && e["step"] == "drain" && e["phase"] == "done"
    };
    f.wait_journal(wave_drained);
    let j = f.journal();
    let at = j.iter().find(|e| wave_drained(e)).unwrap();
    let id = at["rollout"].as_str().unwrap().to_string();
    let taken = at["node"].as_str().unwrap().to_string();
    // Operator B, another state folder, meanwhile: the budget is A's; B drains nothing, and
    // says why.
    let b = f.command_in(&other, &wave).output().unwrap();
    let t = text(&b);
    eprintln!("--- operator B while A upgrades {taken}:\n{t}");
    assert_eq!(b.status.code(), Some(0), "{t}");
    for want in [
        format!(
            "budget 1 (max_unavailable 25% of 4 selected nodes): 1 by rollout {id} ({taken}); none left for this rollout"
        ),
        "in a later wave (max_unavailable): budget 1".to_string(),
        // A's node is planned as locked (its lock step names the holder), not drained.
        format!("{taken} skipped: another rollout holds the node: locked by rollout {id} ("),
    ] {
        assert!(t.contains(&want), "{want:?} not in:\n{t}");
    }
    let a = a.wait_with_output().unwrap();
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    assert!(text(&a).contains("1 node(s) upgraded"), "{}", text(&a));
    // Once A gave its node back, B's next wave takes the budget: one more node.
    let b = f.command_in(&other, &wave).output().unwrap();
    let t = text(&b);
    assert_eq!(b.status.code(), Some(0), "{t}");
    assert!(
        t.contains("budget 1 (max_unavailable 25% of 4 selected nodes): none used by other nodes or rollouts; 1 left for this rollout")
            && t.contains("1 node(s) upgraded"),
        "{t}"
    );
    let log = f.drains();
    assert_eq!(
        log.iter().filter(|l| l.starts_with("drain ")).count(),
        3,
        "{log:?}"
    );
    assert_eq!(most_drained_at_once(&log), 1, "{log:?}");
}
