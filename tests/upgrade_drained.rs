//! Drains that respect what was there (issue 20, item 2), over real OpenSSH nodes
//! (tests/support/upgrade.rs): a node out of service before the rollout (drained by an admin,
//! down, cordoned) is skipped with who and why, or taken with `--include-drained` and never
//! given back; after gpufleet's own reboot, Slurm nodes get RESUME, UNDRAIN or nothing as
//! docs/domain.md's table says. Slurm is real (slurmctld and slurmd in network namespaces:
//! tests/support/slurm.rs); Kubernetes is a stand-in kubectl keeping one node's state in files
//! (no API server can run here: the test's name says so); the command backend is the fleet's
//! logging drain.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;

use support::slurm::{Slurm, sbin};
use support::upgrade::*;

/// `scontrol` against `slurm`, with `args`.
fn scontrol(slurm: &Slurm, args: &[&str]) -> String {
    let out = Command::new(sbin("scontrol"))
        .args(args)
        .env("SLURM_CONF", &slurm.conf)
        .output()
        .unwrap();
    assert!(out.status.success(), "scontrol {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A node's `%E` (Reason) as sinfo prints it.
fn reason(slurm: &Slurm, node: &str) -> String {
    let out = Command::new(sbin("sinfo"))
        .args(["-h", "-N", "-n", node, "-o", "%E"])
        .env("SLURM_CONF", &slurm.conf)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Both nodes canaries, named `1` and `2`, drained through Slurm as `gpu1` and `gpu2`.
fn slurm_inventory(f: &UpgradeFleet, recipes: &[&str]) {
    f.inventory(recipes, "");
    f.set_drain(r#"drain = { backend = "slurm", node_name = "gpu{name}" }"#);
    let inv = std::fs::read_to_string(&f.fleet.inventory)
        .unwrap()
        .replace("name = \"node0\"", "name = \"1\"")
        .replace("name = \"node1\"", "name = \"2\"")
        .replace("canary = false", "canary = true");
    f.fleet.write_inventory(&inv);
}

fn entry<'a>(
    j: &'a [serde_json::Value],
    node: &str,
    step: &str,
    phase: &str,
) -> &'a serde_json::Value {
    j.iter()
        .find(|e| e["node"] == node && e["step"] == step && e["phase"] == phase)
        .unwrap_or_else(|| panic!("no {node} {step} {phase} in {j:#?}"))
}

#[test]
fn a_node_an_admin_drained_is_skipped_then_taken_with_include_drained_never_resumed_reason_kept_real_slurm()
 {
    let slurm = Slurm::start(2, 24);
    let f = UpgradeFleet::start(2, 141, "1", "");
    slurm_inventory(&f, &["fixture"]);
    let run = |args: &[&str]| {
        f.command(args)
            .env("SLURM_CONF", &slurm.conf)
            .output()
            .unwrap()
    };
    // An administrator drains gpu2 for a reason of their own.
    scontrol(
        &slurm,
        &[
            "update",
            "NodeName=gpu2",
            "State=DRAIN",
            "Reason=bad DIMM, ticket 4711",
        ],
    );
    assert!(
        slurm.state("gpu2").starts_with("drained"),
        "{}",
        slurm.state("gpu2")
    );
    let out = run(&["upgrade", "--canary", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("--- the plan of the pre-drained test:\n{plan}");
    for want in [
        "rollout r-",
        "(canary): 1 node(s) — dry run, nothing will change",
        "budget 2 (max_unavailable 2): 1 used by a drained or down node (2); 1 left for this rollout",
        "refused if someone took it out of service since the plan: scontrol -o show node gpu1",
        "read first: scontrol -o show node gpu1",
        "scontrol update NodeName=gpu1 State=RESUME    (only while this rollout's drain, or slurmctld's DOWN after the reboot, holds it)",
        "scontrol update NodeName=gpu1 State=UNDRAIN    (instead, when it is DOWN for another reason: reported still down)",
        "skipped 2: out of service before this rollout: drained (Slurm IDLE+DRAIN): Reason \"bad DIMM, ticket 4711\" set by root at ",
        "not upgraded (`--include-drained` upgrades it and never gives it back)",
    ] {
        assert!(plan.contains(want), "{want:?} not in:\n{plan}");
    }
    // The rollout upgrades gpu1 only; gpu2 keeps the admin's drain and Reason.
    let out = run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        slurm.state("gpu1").starts_with("idle"),
        "{}",
        slurm.state("gpu1")
    );
    assert!(
        slurm.state("gpu2").starts_with("drained"),
        "{}",
        slurm.state("gpu2")
    );
    assert_eq!(reason(&slurm, "gpu2"), "bad DIMM, ticket 4711");
    assert!(
        !f.journal().iter().any(|e| e["node"] == "2"),
        "gpu2 untouched"
    );
    // --include-drained takes it: no DRAIN sent (its Reason stays), never resumed.
    let out = run(&["upgrade", "--canary", "--dry-run", "--include-drained"]);
    let plan = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("--- with --include-drained:\n{plan}");
    assert!(
        plan.contains("not drained by gpufleet, out of service before: drained (Slurm IDLE+DRAIN): Reason \"bad DIMM, ticket 4711\"")
            && plan.contains("never given back: gpufleet did not drain it (")
            && !plan.contains("State=DRAIN")
            && !plan.contains("State=RESUME")
            && !plan.contains("State=UNDRAIN"),
        "{plan}"
    );
    let out = run(&["upgrade", "--canary", "--yes", "--include-drained"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        slurm.state("gpu2").starts_with("drained"),
        "{}",
        slurm.state("gpu2")
    );
    assert_eq!(reason(&slurm, "gpu2"), "bad DIMM, ticket 4711");
    let j = f.journal();
    let drain = entry(&j, "2", "drain", "done");
    assert!(
        drain["outcome"].as_str().unwrap().starts_with(
            "not drained by gpufleet (out of service before: drained (Slurm IDLE+DRAIN)"
        ),
        "{drain}"
    );
    assert!(
        !drain["command"].as_str().unwrap().contains("State=DRAIN"),
        "{drain}"
    );
    let back = entry(&j, "2", "uncordon", "done");
    assert!(
        back["outcome"]
            .as_str()
            .unwrap()
            .starts_with("not resumed: gpufleet did not drain it (drained (Slurm IDLE+DRAIN)"),
        "{back}"
    );
    assert!(
        back["outcome"]
            .as_str()
            .unwrap()
            .contains("admin drain kept"),
        "{back}"
    );
    assert!(
        entry(&j, "2", "gates", "done")["outcome"]
            .as_str()
            .unwrap()
            .starts_with("passed")
    );
}

/// A recipe step that sets the node DOWN in Slurm with `reason` after gpufleet drained it, as
/// slurmctld does after an unexpected reboot (or as anything else that takes a node down).
fn set_down_recipe(slurm: &Slurm, name: &str, node: &str, reason: &str) -> String {
    format!(
        "[recipes.{name}]\nsteps = [\n  {{ name = \"switch\", run = \"fixture-switch-open {{root}}\" }},\n  {{ name = \"down\", run = \"SLURM_CONF={} {} update NodeName={node} State=DOWN 'Reason={reason}'\" }},\n  {{ name = \"reboot\", run = \"fixture-reboot {{root}}\", reboot = true }},\n]\n",
        slurm.conf.display(),
        sbin("scontrol").display()
    )
}

#[test]
fn after_its_reboot_slurm_resumes_what_gpufleet_drained_undrains_a_node_down_for_another_reason_real_slurm()
 {
    let slurm = Slurm::start(2, 25);
    let recipes = format!(
        "max_failures = 1\n{}{}",
        set_down_recipe(
            &slurm,
            "rebooted",
            "gpu1",
            "Node unexpectedly rebooted boot_time=1"
        ),
        set_down_recipe(&slurm, "psu", "gpu2", "PSU failure")
    );
    let f = UpgradeFleet::start(2, 143, "1", &recipes);
    slurm_inventory(&f, &["rebooted", "psu"]);
    let out = f
        .command(&["upgrade", "--canary", "--yes"])
        .env("SLURM_CONF", &slurm.conf)
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "gpu2 is still down: {t}");
    // gpu1: gpufleet drained it, slurmctld's DOWN after the reboot: RESUME, back in service.
    assert!(
        slurm.state("gpu1").starts_with("idle"),
        "{}",
        slurm.state("gpu1")
    );
    let j = f.journal();
    let back = entry(&j, "1", "uncordon", "done");
    assert!(
        back["outcome"]
            .as_str()
            .unwrap()
            .starts_with("resumed (slurmctld had set it DOWN after the reboot: State=DOWN+DRAIN"),
        "{back}"
    );
    // gpu2: DOWN for another reason: only gpufleet's DRAIN goes (UNDRAIN); DOWN stays until
    // Slurm's own ReturnToService (2 here: it returns a DOWN node that answers) or its owner
    // brings it back; reported still down, never done.
    let show = scontrol(&slurm, &["-o", "show", "node", "gpu2"]);
    assert!(!show.contains("DRAIN"), "{show}");
    assert!(!slurm.state("gpu2").starts_with("drain"), "{show}");
    let failed = entry(&j, "2", "uncordon", "failed");
    assert!(
        failed["outcome"]
            .as_str()
            .unwrap()
            .starts_with("still down (State=DOWN+DRAIN, Reason \"PSU failure\")")
            && failed["outcome"]
                .as_str()
                .unwrap()
                .contains("State=UNDRAIN"),
        "{failed}"
    );
    // The report: gpu2 is still down (upgraded, gates passed), never "stays drained" nor done.
    eprintln!("--- the still-down report:\n{t}");
    assert!(
        t.contains("gpufleet: 2 upgraded, its gates passed, but still down (State=DOWN+DRAIN, Reason \"PSU failure\")")
            && t.contains("1 node(s) upgraded, 1 still down: 2 upgraded, its gates passed, but still down (")
            && t.contains("a node still down is its owner's to bring back"),
        "{t}"
    );
    assert!(
        !t.contains("stays drained") && !t.contains("2 stopped at"),
        "{t}"
    );
    assert!(
        !j.iter()
            .any(|e| e["node"] == "2" && e["step"] == "uncordon" && e["phase"] == "done")
    );
    let end = j.last().unwrap();
    assert!(
        end["step"] == "rollout" && end["phase"] == "failed",
        "{end}"
    );
    // --abandon: gpu2 is still down, nothing of this rollout's to give back.
    let out = f
        .command(&["upgrade", "--abandon"])
        .env("SLURM_CONF", &slurm.conf)
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains(
            "2 is still down: upgraded, its gates passed, gpufleet's drain flag removed (UNDRAIN)"
        ) && !t.contains("2 stays drained"),
        "{t}"
    );
}

#[test]
fn a_node_gpufleet_did_not_drain_that_is_down_after_its_reboot_stays_down_and_drained_nothing_sent_real_slurm()
 {
    let slurm = Slurm::start(2, 26);
    let recipes = format!(
        "max_failures = 1\n{}",
        set_down_recipe(
            &slurm,
            "admindown",
            "gpu2",
            "Node unexpectedly rebooted boot_time=1"
        )
    );
    let f = UpgradeFleet::start(2, 149, "1", &recipes);
    slurm_inventory(&f, &["fixture", "admindown"]);
    // An administrator drained gpu2 before the rollout; --include-drained takes it.
    scontrol(
        &slurm,
        &["update", "NodeName=gpu2", "State=DRAIN", "Reason=bad DIMM"],
    );
    let out = f
        .command(&["upgrade", "--canary", "--yes", "--include-drained"])
        .env("SLURM_CONF", &slurm.conf)
        .output()
        .unwrap();
    let t = text(&out);
    eprintln!("--- the kept node DOWN after its reboot:\n{t}");
    assert_eq!(out.status.code(), Some(0), "{t}");
    // gpufleet sent nothing to gpu2: it stays DOWN (and drained), as slurmctld left it.
    let show = scontrol(&slurm, &["-o", "show", "node", "gpu2"]);
    assert!(show.contains("State=DOWN"), "{show}");
    assert!(
        slurm.state("gpu1").starts_with("idle"),
        "{}",
        slurm.state("gpu1")
    );
    let j = f.journal();
    let back = entry(&j, "2", "uncordon", "done");
    let said = back["outcome"].as_str().unwrap();
    assert!(
        said.starts_with("down after reboot, admin drain kept (State=DOWN")
            && said.contains(
                "gpufleet did not drain it (drained (Slurm IDLE+DRAIN): Reason \"bad DIMM\""
            )
            && !said.contains("State=RESUME")
            && !said.contains("State=UNDRAIN"),
        "{back}"
    );
    assert!(
        t.contains("gpufleet: 2 down after reboot, admin drain kept (State=DOWN")
            && t.contains("2 node(s) upgraded (1 out of service before, left so: 2: down after reboot, admin drain kept ("),
        "{t}"
    );
    assert!(!t.contains("(uncordoned)") && !t.contains("resumed"), "{t}");
}

/// A stand-in kubectl keeping one node's `.spec.unschedulable` and taints in files beside it:
/// `get node -o jsonpath=…{range .spec.taints…}` prints them as the real one does, `cordon` /
/// `drain` set unschedulable, `uncordon` clears it; every call is logged.
fn kubectl_stand_in(f: &UpgradeFleet) -> std::path::PathBuf {
    let bin = f.scratch.path().join("kubectl-stand-in");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        bin.join("kubectl"),
        r#"#!/bin/sh
d=$(dirname "$0")
printf '%s\n' "$*" >> "$d/calls"
case "$*" in
*range*) printf 'unschedulable=%s\n' "$(cat "$d/unschedulable" 2>/dev/null)"; cat "$d/taints" 2>/dev/null || true ;;
*upgrade-state*) printf '\n\n' ;;
*unschedulable*) cat "$d/unschedulable" 2>/dev/null ;;
cordon*|drain*) echo true > "$d/unschedulable" ;;
uncordon*) rm -f "$d/unschedulable" ;;
esac
"#,
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(bin.join("kubectl"))
        .status()
        .unwrap();
    bin
}

#[test]
fn kubernetes_a_cordoned_node_is_left_cordoned_a_dedicated_taint_is_not_out_of_service_stand_in_kubectl()
 {
    let f = UpgradeFleet::start(
        1,
        145,
        "1",
        "unavailable_taints = [\"example.com/maintenance\"]",
    );
    f.inventory(&["fixture"], "");
    f.set_drain(r#"drain = { backend = "kubernetes" }"#);
    let bin = kubectl_stand_in(&f);
    let run = |args: &[&str]| {
        f.command(args)
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()
            .unwrap()
    };
    let calls = || std::fs::read_to_string(bin.join("calls")).unwrap_or_default();
    // A permanent dedicated taint, and a condition taint with a mere preference: in service.
    std::fs::write(bin.join("taints"), "nvidia.com/gpu\tNoSchedule\tpresent\nnode.kubernetes.io/memory-pressure\tPreferNoSchedule\t\n").unwrap();
    let out = run(&["upgrade", "--canary", "--dry-run"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("(canary): 1 node(s)"),
        "{}",
        text(&out)
    );
    // A configured taint, and a not-ready condition taint: out of service.
    for (taint, said) in [
        (
            "example.com/maintenance\tNoSchedule\tdimm\n",
            "tainted example.com/maintenance=dimm:NoSchedule",
        ),
        (
            "node.kubernetes.io/not-ready\tNoExecute\t\n",
            "tainted node.kubernetes.io/not-ready:NoExecute",
        ),
    ] {
        std::fs::write(bin.join("taints"), taint).unwrap();
        let out = run(&["upgrade", "--canary", "--dry-run"]);
        let t = text(&out);
        assert!(
            t.contains("(canary): 0 node(s)")
                && t.contains(&format!(
                    "skipped node0: out of service before this rollout: {said}"
                )),
            "{t}"
        );
    }
    std::fs::remove_file(bin.join("taints")).unwrap();
    // Cordoned by someone: skipped, nothing but reads.
    std::fs::write(bin.join("unschedulable"), "true").unwrap();
    let out = run(&["upgrade", "--canary", "--yes"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("skipped node0: out of service before this rollout: cordoned (.spec.unschedulable is true)") && t.contains("nothing to do"), "{t}");
    assert!(
        calls().lines().all(|l| l.starts_with("get node ")),
        "{}",
        calls()
    );
    // --include-drained: drained (its pods go), upgraded, never uncordoned.
    std::fs::remove_file(bin.join("calls")).unwrap();
    let out = run(&["upgrade", "--canary", "--yes", "--include-drained"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let c = calls();
    assert!(c.contains("drain --ignore-daemonsets"), "{c}");
    assert!(!c.contains("uncordon"), "{c}");
    assert_eq!(
        std::fs::read_to_string(bin.join("unschedulable"))
            .unwrap()
            .trim(),
        "true"
    );
    let j = f.journal();
    let back = entry(&j, "node0", "uncordon", "done");
    assert!(
        back["outcome"]
            .as_str()
            .unwrap()
            .starts_with("not uncordoned: gpufleet did not drain it (cordoned"),
        "{back}"
    );
}

#[test]
fn command_backend_a_node_its_status_calls_drained_is_skipped_then_taken_never_uncordoned() {
    let f = UpgradeFleet::start(2, 147, "1", "");
    f.inventory(&["fixture"], "");
    let inv = std::fs::read_to_string(&f.fleet.inventory)
        .unwrap()
        .replace("canary = false", "canary = true");
    f.fleet.write_inventory(&inv);
    // Drained by someone else before the rollout: the status command says so.
    std::fs::write(&f.drain_log, "drain node1\n").unwrap();
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("skipped node1: out of service before this rollout: drained (its status command succeeds)"), "{t}");
    assert_eq!(f.drains(), ["drain node1", "drain node0", "uncordon node0"]);
    let out = f.run(&["upgrade", "--canary", "--yes", "--include-drained"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // No drain sent, no uncordon: the log is as it was.
    assert_eq!(f.drains(), ["drain node1", "drain node0", "uncordon node0"]);
    let j = f.journal();
    assert!(
        entry(&j, "node1", "uncordon", "done")["outcome"]
            .as_str()
            .unwrap()
            .starts_with("not uncordoned: gpufleet did not drain it")
    );
    assert_eq!(f.status("node1"), "ready");
}
