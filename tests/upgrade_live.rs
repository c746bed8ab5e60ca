//! The live node over the journal, over real OpenSSH nodes (tests/support/upgrade.rs): what is
//! upgraded, and whether a canary opens the waves, is decided from the node as probed now (plus
//! the journal's record that its gates passed), never from the journal alone.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::upgrade::*;

/// The id of the first rollout of the state folder's `gpufleet rollouts --json`.
fn first_rollout(f: &UpgradeFleet) -> String {
    let out = f.run(&["rollouts", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    list[0]["id"].as_str().unwrap().to_string()
}

/// A canary upgraded, then re-imaged (back on the proprietary module: its files swapped for the
/// fixture's): the journal calls it upgraded, but it probes `migrate`, so it does not open the
/// waves and is planned again, the plan saying why; upgraded again, it opens them.
#[test]
fn a_re_imaged_node_is_planned_again_and_does_not_open_the_waves() {
    let f = UpgradeFleet::start(2, 250, "1", "");
    f.inventory(&["switch"], "");
    let pristine = f.scratch.path().join("node0-as-imaged");
    copy_tree(&f.nodes[0].join("root"), &pristine);
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(f.status("node0"), "ready");
    let id = first_rollout(&f);
    // Re-imaged: the node's tree as it was before the upgrade.
    std::fs::rename(
        f.nodes[0].join("root"),
        f.scratch.path().join("node0-upgraded"),
    )
    .unwrap();
    std::fs::rename(&pristine, f.nodes[0].join("root")).unwrap();
    assert_eq!(f.status("node0"), "migrate");
    let out = f.run(&["upgrade", "--wave", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("canaries first: node0 (migrate)"),
        "{}",
        text(&out)
    );
    let out = f.run(&["upgrade", "--canary", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let want = format!(
        "  node0\n    (planned again: rollout {id} upgraded it (its gates passed), but it probes migrate now (re-imaged or rolled back?))"
    );
    assert!(text(&out).contains(&want), "{want:?} in:\n{}", text(&out));
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("1 node(s) upgraded"), "{}", text(&out));
    assert_eq!(f.status("node0"), "ready");
    let out = f.run(&["upgrade", "--wave", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(f.status("node1"), "ready");
    assert_eq!(
        f.drains(),
        [
            "drain node0",
            "uncordon node0",
            "drain node0",
            "uncordon node0",
            "drain node1",
            "uncordon node1"
        ]
    );
}

/// A canary halted before its reboot (a step after the switch fails) probes `ready`, but its
/// gates never ran: once its rollout is abandoned, it still does not open the waves, and
/// `--canary` plans it again (saying why); its reboot proven and its gates passed, the waves
/// open.
#[test]
fn a_canary_halted_before_its_gates_does_not_open_the_waves() {
    let f = UpgradeFleet::start(2, 252, "1", "");
    let config = std::fs::read_to_string(&f.fleet.config).unwrap().replace(
        "[recipes.noop]",
        r#"[recipes.halts]
steps = [
  { name = "switch", run = "fixture-switch-open {root}" },
  { name = "check", run = "false" },
  { name = "reboot", run = "fixture-reboot {root}", reboot = true },
]
[recipes.reboot_only]
steps = [{ name = "reboot", run = "fixture-reboot {root}", reboot = true }]
[recipes.noop]"#,
    );
    std::fs::write(&f.fleet.config, config).unwrap();
    f.inventory(&["halts", "switch"], "");
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("node0 stopped at step:check and stays drained: exit status 1"),
        "{}",
        text(&out)
    );
    assert_eq!(
        f.status("node0"),
        "ready",
        "the switch ran, the reboot did not"
    );
    let id = first_rollout(&f);
    let out = f.run(&["upgrade", "--abandon"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let blocked = format!(
        "canaries first: node0 (ready, but rollout {id} stopped on it before its gates passed)"
    );
    for args in [
        &["upgrade", "--wave", "--dry-run"][..],
        &["upgrade", "--wave", "--yes", "--node", "node1"],
    ] {
        let out = f.run(args);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            text(&out).contains(&blocked),
            "{blocked:?} in:\n{}",
            text(&out)
        );
    }
    let out = f.run(&["upgrade", "--canary", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let want = format!(
        "  node0\n    (planned again: it probes ready, but rollout {id} stopped on it before its gates passed"
    );
    assert!(text(&out).contains(&want), "{want:?} in:\n{}", text(&out));
    // Its recipe fixed (the switch is done: only the reboot is left), the canary's reboot is
    // proven and its gates pass: the waves open.
    let inv = std::fs::read_to_string(&f.fleet.inventory)
        .unwrap()
        .replacen("recipe = \"halts\"", "recipe = \"reboot_only\"", 1);
    f.fleet.write_inventory(&inv);
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("1 node(s) upgraded"), "{}", text(&out));
    let out = f.run(&["upgrade", "--wave", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("  node1\n"), "{}", text(&out));
    assert_eq!(f.drains(), ["drain node0", "drain node0", "uncordon node0"]);
}
