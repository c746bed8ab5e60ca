//! Proven reboots over real OpenSSH nodes (tests/support/upgrade.rs): the node's boot identity
//! (`<root>/proc/sys/kernel/random/boot_id`, which the reboot stand-in makes anew when sshd
//! comes back) is read before the reboot step and must change after it. The reboot stand-in
//! logs `down NODE` / `up NODE` into the drain log, so the order of the reboot against the
//! drain and the uncordon shows in one file.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;

use support::upgrade::*;

fn entry<'a>(j: &'a [serde_json::Value], step: &str, phase: &str) -> &'a serde_json::Value {
    j.iter()
        .find(|e| e["step"] == step && e["phase"] == phase)
        .unwrap_or_else(|| panic!("no {step} {phase} in {j:#?}"))
}

/// A reboot that returns at once and goes down 6 s later (as `systemctl reboot`, `shutdown -r`
/// or `sh -c 'sleep 8; reboot' &` do) is not uncordoned before the node came back as another
/// boot: the gates run on the rebooted system, and the journal names both boot identities.
#[test]
fn a_reboot_that_goes_down_6_s_later_is_uncordoned_only_after_the_new_boot_identity() {
    let f = UpgradeFleet::start(1, 210, "2", "");
    f.inventory(&["reboot_later"], "");
    f.log_reboots(0);
    let before = f.boot_id(0);
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        f.drains(),
        ["drain node0", "down node0", "up node0", "uncordon node0"],
        "{}",
        text(&out)
    );
    let after = f.boot_id(0);
    assert_ne!(before, after);
    let j = f.journal();
    assert_eq!(
        entry(&j, "boot-id:reboot", "done")["outcome"],
        format!("boot identity before the reboot: boot_id {before}")
    );
    let waited = entry(&j, "wait-ssh:reboot", "done")["outcome"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        waited.starts_with(&format!(
            "rebooted: boot identity before boot_id {before}, now boot_id {after}; "
        )),
        "{waited}"
    );
    // The re-probe and the gates come after the new boot identity was seen.
    let at = |step: &str, phase: &str| {
        j.iter()
            .position(|e| e["step"] == step && e["phase"] == phase)
            .unwrap()
    };
    assert!(at("wait-ssh:reboot", "done") < at("reprobe", "start"));
    assert!(at("gates", "done") < at("uncordon", "start"));
    assert_eq!(f.status("node0"), "ready");
    eprintln!(
        "--- gpufleet journal (the delayed reboot):\n{}",
        f.journal_text(&f.state)
    );
}

/// A reboot step that does not reboot: the node answers with its old boot identity until
/// `reboot_timeout`, then stops there, drained and locked, with both the reason and the
/// identity in the journal; the gates never run.
#[test]
fn a_reboot_step_that_does_not_reboot_stops_the_node_drained() {
    let f = UpgradeFleet::start(1, 211, "1", "reboot_timeout = 4");
    f.inventory(&["no_reboot"], "");
    let before = f.boot_id(0);
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(&format!(
            "node0 stopped at wait-ssh:reboot and stays drained: not rebooted: after 4 s the node still answers with its boot identity from before step:reboot (boot_id {before}; it never went away); the gates did not run"
        )),
        "{said}"
    );
    assert_eq!(f.drains(), ["drain node0"], "not uncordoned");
    let j = f.journal();
    assert!(
        entry(&j, "wait-ssh:reboot", "failed")["outcome"]
            .as_str()
            .unwrap()
            .contains(&before)
    );
    assert!(
        !j.iter()
            .any(|e| e["step"] == "reprobe" || e["step"] == "gates")
    );
    assert!(
        f.nodes[0]
            .join("root/var/lib/gpufleet/rollout.lock")
            .exists(),
        "still locked for --resume or --abandon"
    );
}

/// gpufleet killed while it waits for a delayed reboot: `--resume` reads the boot identity from
/// before the reboot back from the journal, so the node (still on its old boot when the resume
/// starts) is uncordoned only once it came back as another boot.
#[test]
fn sigkill_while_waiting_for_a_reboot_then_resume_still_waits_for_the_new_boot() {
    let f = UpgradeFleet::start(1, 212, "2", "");
    f.inventory(&["reboot_later"], "");
    f.log_reboots(0);
    let before = f.boot_id(0);
    let mut child = f
        .command(&["upgrade", "--canary", "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    f.wait_journal(|e| e["step"] == "wait-ssh:reboot" && e["phase"] == "start");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(
        f.drains(),
        ["drain node0"],
        "killed before the node went down"
    );
    let out = f.run(&["upgrade", "--resume", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        f.drains(),
        ["drain node0", "down node0", "up node0", "uncordon node0"]
    );
    let j = f.journal();
    let waited = j
        .iter()
        .filter(|e| e["step"] == "wait-ssh:reboot" && e["phase"] == "done")
        .map(|e| e["outcome"].as_str().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(waited.len(), 1, "{j:#?}");
    assert!(
        waited[0].contains(&format!(
            "before boot_id {before}, now boot_id {}",
            f.boot_id(0)
        )),
        "{}",
        waited[0]
    );
}
