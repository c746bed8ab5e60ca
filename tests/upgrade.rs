//! Rollouts over real OpenSSH servers serving scratch copies of fixture nodes. The recipe's
//! commands are fixture stand-ins that change the node's tree (proprietary → open, nvidia-peermem
//! removed); the `reboot` stand-in stops the node's sshd and starts it again after a delay (or
//! never). Drains go through the `command` backend writing a log, and through a recording
//! stand-in for kubectl (no Kubernetes API server can run here; the test's name says so).

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::slurm::{Slurm, sbin};
use support::upgrade::*;
use support::*;

#[test]
fn canary_then_wave_with_dry_run_plan_and_journal() {
    let f = UpgradeFleet::start(3, 160, "1", "");
    f.inventory(&["fixture"], "");
    // Waves wait for the canaries.
    let out = f.run(&["upgrade", "--wave", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("canaries first: node0"));
    // The dry run prints the exact commands and changes nothing.
    let out = f.run(&["upgrade", "--canary", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("--- dry-run plan (gpufleet upgrade --canary --dry-run):\n{plan}");
    for want in [
        "node0",
        "lock",
        "drain",
        "echo drain node0 >>",
        "fixture-switch-open",
        "wait-ssh",
        "gates",
        "next-boot-has-driver",
        "uncordon",
        // The node's next boot before anything changes (this fixture has no /lib/modules).
        "(next boot: no kernel under /lib/modules, no host nvidia.ko to check (n/a))",
    ] {
        assert!(
            plan.contains(want),
            "{want:?} missing from the plan:\n{plan}"
        );
    }
    assert!(f.drains().is_empty());
    assert!(f.journal().is_empty());

    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(f.drains(), ["drain node0", "uncordon node0"]);
    assert_eq!(f.status("node0"), "ready");

    let out = f.run(&["upgrade", "--wave", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (_, doc) = f.fleet.snapshot(&[]);
    for n in ["node0", "node1", "node2"] {
        assert_eq!(node_status(&doc, n), "ready", "{doc:#}");
    }
    let d = f.drains();
    assert_eq!(d.len(), 6);
    for n in ["node1", "node2"] {
        let drained = d.iter().position(|l| *l == format!("drain {n}")).unwrap();
        let back = d
            .iter()
            .position(|l| *l == format!("uncordon {n}"))
            .unwrap();
        assert!(drained < back);
    }
    // Every step was journaled before it ran, and finished.
    let j = f.journal();
    for e in j.iter().filter(|e| e["phase"] == "done" && e["node"] != "") {
        let start = j.iter().position(|x| {
            x["node"] == e["node"]
                && x["step"] == e["step"]
                && x["rollout"] == e["rollout"]
                && x["phase"] == "start"
        });
        let done = j.iter().position(|x| x == e);
        assert!(start < done, "{e}");
    }
    let out = f.run(&["journal"]);
    let journal = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(journal.contains("uncordon"));
    eprintln!("--- gpufleet journal:\n{journal}");
    // The node-side locks are gone.
    for n in &f.nodes {
        assert!(!n.join("root/var/lib/gpufleet/rollout.lock").exists());
    }
}

#[test]
fn a_reboot_that_never_returns_halts_and_leaves_the_node_drained() {
    let f = UpgradeFleet::start(1, 170, "never", "reboot_timeout = 5");
    f.inventory(&["fixture"], "");
    let start = Instant::now();
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(text(&out).contains("stays drained"), "{}", text(&out));
    assert_eq!(f.drains(), ["drain node0"], "not uncordoned");
    let j = f.journal();
    assert!(
        j.iter()
            .any(|e| e["step"] == "wait-ssh:reboot" && e["phase"] == "failed")
    );
    assert!(
        j.iter()
            .any(|e| e["step"] == "rollout" && e["phase"] == "failed")
    );
}

#[test]
fn a_failing_gate_halts_and_leaves_the_node_drained() {
    let f = UpgradeFleet::start(1, 175, "1", "");
    f.inventory(&["noop"], "");
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let j = f.journal();
    let gate = j
        .iter()
        .find(|e| e["step"] == "gates" && e["phase"] == "failed")
        .expect("gates failed");
    let why = gate["outcome"].as_str().unwrap();
    assert!(
        why.contains("open-module") && why.contains("no-peermem"),
        "{why}"
    );
    assert_eq!(f.drains(), ["drain node0"]);
    assert!(!j.iter().any(|e| e["step"] == "uncordon"));
    // The node stays drained and locked, and every scan says so: the lock from the node's
    // marker (read by the probe), the drain from this state folder's journal.
    let rollout = j[0]["rollout"].as_str().unwrap().to_string();
    let out = f.run(&["snapshot", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &node(&doc, "node0")["rollout"];
    assert_eq!(r["locked"], true, "{r}");
    assert_eq!(r["lock"]["rollout"], rollout.as_str(), "{r}");
    assert!(
        r["lock"]["operator"].as_str().unwrap().contains(" pid "),
        "{r}"
    );
    assert_eq!(r["drained_by"], rollout.as_str(), "{r}");
    let out = f.run(&["snapshot", "--format", "table"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("ROLLOUT") && table.contains("drained, locked"),
        "{table}"
    );
    let out = f.run(&["snapshot", "--format", "csv"]);
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",rollout_lock,drained_by"),
        "{csv}"
    );
    assert!(
        csv.trim_end().ends_with(&format!(",{rollout},{rollout}")),
        "{csv}"
    );
    // Another state folder's journal knows no drain; the node's lock is still seen.
    let other = f.scratch.path().join("other-state");
    let out = f
        .command_in(&other, &["snapshot", "--format", "json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &node(&doc, "node0")["rollout"];
    assert_eq!(
        (r["locked"].clone(), r["drained_by"].clone()),
        (serde_json::json!(true), serde_json::Value::Null),
        "{r}"
    );
}

#[test]
fn sigkill_mid_wave_then_resume_repeats_no_completed_step() {
    let f = UpgradeFleet::start(2, 180, "1", "");
    f.inventory(&["slow"], "");
    // Both nodes as canaries in one wave of two.
    let inv = std::fs::read_to_string(&f.fleet.inventory)
        .unwrap()
        .replace("canary = false", "canary = true");
    f.fleet.write_inventory(&inv);
    let mut child = f
        .command(&["upgrade", "--canary", "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it while the slow step runs on both nodes (after both drains): launched there, its
    // pid file written (the journal's `start` comes before the launch).
    support::wait_until(
        "the slow step to run on both nodes",
        Duration::from_secs(30),
        || {
            (0..2).all(|i| {
                step_out(&f.nodes[i], "slow").is_some_and(|o| o.with_extension("pid").exists())
            })
        },
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = f.journal();
    assert!(
        before
            .iter()
            .any(|e| e["step"] == "step:slow" && e["phase"] == "start")
    );
    assert!(
        !before
            .iter()
            .any(|e| e["step"] == "rollout" && e["phase"] != "start")
    );
    // Every drained node has a journal record saying so.
    for l in f.drains() {
        let n = l.trim_start_matches("drain ");
        assert!(
            before
                .iter()
                .any(|e| e["node"] == n && e["step"] == "drain"),
            "{n} drained without a record"
        );
    }

    // The killed run's step goes on on the node (detached from the SSH session); a resume
    // meanwhile attaches to it and waits for it, rather than failing or starting it again.
    let out = f.run(&["upgrade", "--resume", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("was started before; waiting for it on the node"),
        "{}",
        text(&out)
    );
    let j = f.journal();
    let mut seen = std::collections::HashSet::new();
    for e in j.iter().filter(|e| e["phase"] == "done" && e["node"] != "") {
        let key = (
            e["rollout"].to_string(),
            e["node"].to_string(),
            e["step"].to_string(),
        );
        assert!(seen.insert(key.clone()), "step done twice: {key:?}");
    }
    assert_eq!(
        f.drains().iter().filter(|l| l.starts_with("drain")).count(),
        2,
        "no drain repeated"
    );
    for n in ["node0", "node1"] {
        assert_eq!(f.status(n), "ready");
        assert!(
            j.iter()
                .any(|e| e["node"] == n && e["step"] == "uncordon" && e["phase"] == "done")
        );
    }
    let out = f.run(&["upgrade", "--resume", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "nothing left to resume: {}",
        text(&out)
    );
}

#[test]
fn read_only_refuses_before_anything_happens() {
    let f = UpgradeFleet::start(1, 185, "1", "");
    f.inventory(&["fixture"], "");
    let inv = std::fs::read_to_string(&f.fleet.inventory).unwrap();
    f.fleet.write_inventory(&format!("read_only = true\n{inv}"));
    for args in [
        &["upgrade", "--canary", "--yes"][..],
        &["upgrade", "--canary", "--dry-run"],
    ] {
        let out = f.run(args);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            text(&out).contains("read-only (inventory read_only)"),
            "{}",
            text(&out)
        );
    }
    f.fleet.write_inventory(&inv);
    let out = f.run(&["upgrade", "--canary", "--yes", "--read-only"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(f.drains().is_empty());
    assert!(f.journal().is_empty());
    assert_eq!(f.status("node0"), "migrate");
}

#[test]
fn a_node_without_a_drain_setting_is_refused_before_anything_happens() {
    let f = UpgradeFleet::start(1, 230, "1", "");
    f.inventory(&["fixture"], "");
    f.set_drain("");
    for args in [
        &["upgrade", "--canary", "--dry-run"][..],
        &["upgrade", "--canary", "--yes"],
    ] {
        let out = f.run(args);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            text(&out).contains("node0: the inventory sets no `drain` for this node"),
            "{}",
            text(&out)
        );
    }
    assert!(f.marks(0).is_empty());
    assert_eq!(f.status("node0"), "migrate");
    // Said explicitly, no drain is allowed, and the plan says the jobs are not drained.
    f.inventory(&["fixture"], "");
    f.set_drain(r#"drain = { backend = "none" }"#);
    let out = f.run(&["upgrade", "--canary", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("jobs are NOT drained"),
        "{}",
        text(&out)
    );
}

/// A dry run names every node that cannot be planned, each with its reason, and exits 2 once:
/// a recipe the config lacks, no recipe at all, no drain setting; nothing runs on any node.
/// (Nodes past max_unavailable are checked too: the unit test
/// `every_node_that_cannot_be_planned_is_named_at_once`.)
#[test]
fn a_dry_run_lists_every_node_that_cannot_be_planned() {
    let f = UpgradeFleet::start(4, 235, "1", "");
    f.inventory(&["fixture", "nope", "fixture", "fixture"], "");
    // Every node a canary, so one `--canary` plan covers them all.
    let inv = std::fs::read_to_string(&f.fleet.inventory)
        .unwrap()
        .replace("canary = false", "canary = true");
    // node2: no recipe line; node3: `drain = {}` of its own, without a backend.
    let mut blocks: Vec<String> = inv.split("[[nodes]]").map(str::to_string).collect();
    blocks[3] = blocks[3].replace("recipe = \"fixture\"\n", "");
    f.fleet.write_inventory(&blocks.join("[[nodes]]"));
    f.set_drain("");
    let mut inv = std::fs::read_to_string(&f.fleet.inventory).unwrap();
    for i in [0, 1, 2] {
        inv = inv.replace(
            &format!("name = \"node{i}\"\n"),
            &format!("name = \"node{i}\"\ndrain = {{ backend = \"none\" }}\n"),
        );
    }
    f.fleet.write_inventory(&inv);
    let out = f.run(&["upgrade", "--canary", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("cannot be planned").count(), 1, "{err}");
    for want in [
        "gpufleet: 3 nodes cannot be planned; fix them all, then run again:",
        "\n  node1: recipe `nope` is not in the config's [recipes]",
        "\n  node2: no `recipe` for this node in the inventory",
        "\n  node3: the inventory sets no `drain` for this node",
    ] {
        assert!(err.contains(want), "{want:?} not in:\n{}", text(&out));
    }
    assert!(!err.contains("node0:"), "{err}");
    for i in 0..4 {
        assert!(f.marks(i).is_empty());
    }
    assert!(f.drains().is_empty(), "{:?}", f.drains());
}

/// The GPU Operator's upgrade labels, through a recording kubectl stand-in (no API server can
/// run here): a node the Operator is upgrading, or told to skip, is never cordoned.
#[test]
fn kubernetes_drain_refuses_nodes_the_gpu_operator_upgrades_or_skips_recording_kubectl_stand_in() {
    for (labels, said) in [
        (
            "cordon-required\\n\\n",
            "gpu-driver-upgrade-state=cordon-required",
        ),
        ("\\ntrue\\n", "gpu-driver-upgrade.skip=true"),
    ] {
        let f = UpgradeFleet::start(1, 191, "1", "");
        f.inventory(&["fixture"], "");
        let bin = f.fleet.tmp.path().join("kubectl-stand-in");
        std::fs::create_dir_all(&bin).unwrap();
        let log = f.fleet.tmp.path().join("kubectl.log");
        std::fs::write(
            bin.join("kubectl"),
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$*\" >> {}\ncase \"$*\" in *range*) echo unschedulable= ;; *upgrade-state*) printf '{labels}' ;; *unschedulable*) echo true ;; esac\n",
                log.display()
            ),
        )
        .unwrap();
        Command::new("chmod")
            .arg("+x")
            .arg(bin.join("kubectl"))
            .status()
            .unwrap();
        f.set_drain(r#"drain = { backend = "kubernetes" }"#);
        let out = f
            .command(&["upgrade", "--canary", "--yes"])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{}", text(&out));
        assert!(text(&out).contains(said), "{}", text(&out));
        let calls = std::fs::read_to_string(&log).unwrap();
        assert!(
            calls
                .lines()
                .all(|l| l.starts_with("get node ") && l.ends_with(" -- node0")),
            "only the labels were read: {calls}"
        );
    }
}

/// The scheduler state read (tests/upgrade_drained.rs), as the kubectl stand-in logs it.
const STATE_READ: &str = r#"--context=prod get node -o jsonpath=unschedulable={.spec.unschedulable}{"\n"}{range .spec.taints[*]}{.key}{"\t"}{.effect}{"\t"}{.value}{"\n"}{end} -- node0.k8s.local"#;

#[test]
fn kubernetes_drain_against_a_recording_kubectl_stand_in() {
    let f = UpgradeFleet::start(1, 190, "1", "");
    f.inventory(&["fixture"], "");
    let bin = f.fleet.tmp.path().join("kubectl-stand-in");
    std::fs::create_dir_all(&bin).unwrap();
    let log = f.fleet.tmp.path().join("kubectl.log");
    std::fs::write(
        bin.join("kubectl"),
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> {}\ncase \"$*\" in *range*) echo unschedulable= ;; *unschedulable*) echo true ;; esac\n",
            log.display()
        ),
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(bin.join("kubectl"))
        .status()
        .unwrap();
    f.set_drain(
        r#"drain = { backend = "kubernetes", node_name = "{name}.k8s.local", context = "prod" }"#,
    );
    let out = f
        .command(&["upgrade", "--canary", "--yes"])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [
            STATE_READ,
            STATE_READ,
            r#"--context=prod get node -o jsonpath={.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}{"\n"}{.metadata.labels.nvidia\.com/gpu-driver-upgrade\.skip}{"\n"} -- node0.k8s.local"#,
            "--context=prod cordon -- node0.k8s.local",
            "--context=prod drain --ignore-daemonsets --delete-emptydir-data --timeout=900s -- node0.k8s.local",
            "--context=prod get node -o jsonpath={.spec.unschedulable} -- node0.k8s.local",
            "--context=prod uncordon -- node0.k8s.local",
        ]
    );
}

#[test]
fn slurm_drain_and_resume_on_a_real_slurm_cluster() {
    let slurm = Slurm::start(2, 20);
    // One failure is tolerated, so gpu1 finishes although gpu2 fails.
    let f = UpgradeFleet::start(2, 195, "1", "max_failures = 1");
    // gpu1 upgrades cleanly; gpu2's recipe changes nothing, so its gates fail.
    f.inventory(&["fixture", "noop"], "");
    f.set_drain(r#"drain = { backend = "slurm", node_name = "gpu{name}" }"#);
    let inv = std::fs::read_to_string(&f.fleet.inventory)
        .unwrap()
        .replace("name = \"node0\"", "name = \"1\"")
        .replace("name = \"node1\"", "name = \"2\"")
        .replace("canary = false", "canary = true");
    f.fleet.write_inventory(&inv);
    let out = f
        .command(&["upgrade", "--canary", "--yes"])
        .env("SLURM_CONF", &slurm.conf)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "gpu2 fails its gates: {}",
        text(&out)
    );
    // gpu1 was drained through Slurm, upgraded and resumed; gpu2 stays drained, with our reason.
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
    let reason = Command::new(sbin("sinfo"))
        .args(["-h", "-N", "-n", "gpu2", "-o", "%E"])
        .env("SLURM_CONF", &slurm.conf)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&reason.stdout).contains("gpufleet rollout r-"));
    let j = f.journal();
    let drain = j
        .iter()
        .find(|e| e["node"] == "1" && e["step"] == "drain" && e["phase"] == "done")
        .expect("drain done");
    let cmd = drain["command"].as_str().unwrap();
    assert!(
        cmd.contains("scontrol update NodeName=gpu1 State=DRAIN"),
        "{drain}"
    );
    assert!(
        j.iter()
            .any(|e| e["node"] == "1" && e["step"] == "uncordon" && e["phase"] == "done")
    );
    assert!(
        !j.iter()
            .any(|e| e["node"] == "2" && e["step"] == "uncordon")
    );
}

/// The TUI's upgrade: mark the canary, press U, read the plan, type the node count, and watch
/// the node come back ready — in a real terminal (tmux) against a real sshd node.
#[test]
fn tui_upgrade_asks_for_the_node_count_then_upgrades() {
    let f = UpgradeFleet::start(1, 198, "1", "");
    f.inventory(&["fixture"], "");
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
    let tmux = Tmux::start(&command);
    tmux.wait_for("scanned 1/1");
    tmux.wait_for("1 migrate");
    tmux.keys(&["U"]);
    let screen = tmux.wait_for("upgrade plan");
    assert!(
        screen.contains("fixture-switch-open"),
        "the exact commands are shown:\n{screen}"
    );
    // A wrong count cancels and changes nothing.
    tmux.keys(&["7", "Enter"]);
    tmux.wait_for("upgrade cancelled");
    assert!(f.drains().is_empty());
    tmux.keys(&["U"]);
    tmux.wait_for("upgrade plan");
    tmux.keys(&["1", "Enter"]);
    tmux.wait_for("1 upgraded");
    tmux.wait_for("1 ready");
    assert_eq!(f.drains(), ["drain node0", "uncordon node0"]);
    tmux.keys(&["q"]);
    tmux.wait_for("EXITED-0");
}

/// Two operators: a rollout running from the same state folder holds the local lock, and a
/// rollout from elsewhere finds the node's marker; both are refused and nothing is drained.
#[test]
fn locks_stop_a_second_operator() {
    let f = UpgradeFleet::start(1, 199, "1", "");
    f.inventory(&["fixture"], "");
    std::fs::create_dir_all(&f.state).unwrap();
    let held = std::fs::File::create(f.state.join("rollout.lock")).unwrap();
    held.try_lock().unwrap();
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("another gpufleet rollout holds"),
        "{}",
        text(&out)
    );
    drop(held);
    // Another operator's rollout holds node0's marker.
    let marker = f.nodes[0].join("root/var/lib/gpufleet/rollout.lock");
    std::fs::create_dir_all(&marker).unwrap();
    std::fs::write(marker.join("owner"), "r-someone-else\n").unwrap();
    // The node is skipped, not failed: the rollout did nothing and ends (`skipped`), so it
    // blocks nothing and there is nothing to resume.
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(
            "node0 skipped: another rollout holds the node: locked by rollout r-someone-else"
        ),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("0 node(s) upgraded, 1 skipped"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("stays drained"), "{}", text(&out));
    assert!(f.drains().is_empty(), "nothing was drained");
    let out = f.run(&["upgrade", "--resume", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("nothing to resume"), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(marker.join("owner")).unwrap(),
        "r-someone-else\n"
    );

    // `gpufleet locks` reads the marker on each node.
    let out = f.run(&["locks"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("node0  locked by rollout r-someone-else (operator unknown"),
        "{}",
        text(&out)
    );
    // `gpufleet unlock` breaks only the named rollout's lock, and not one whose process still
    // runs on this machine.
    let out = f.run(&["unlock", "node0", "--rollout", "r-other", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(marker.join("owner").exists());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    std::fs::write(
        marker.join("owner"),
        format!(
            "r-live\n{}@{} pid {}\nsince 2026-12-01T00:00:00Z\n",
            local_user(),
            host.trim(),
            std::process::id()
        ),
    )
    .unwrap();
    let out = f.run(&["unlock", "node0", "--rollout", "r-live", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("still runs here"), "{}", text(&out));
    std::fs::write(
        marker.join("owner"),
        "r-someone-else\nops@elsewhere pid 1\n",
    )
    .unwrap();
    let out = f.run(&["unlock", "node0", "--rollout", "r-someone-else", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!marker.exists());
    assert!(f.journal().iter().any(|e| e["step"] == "break-lock"
        && e["phase"] == "done"
        && e["rollout"] == "r-someone-else"
        && e["node"] == "node0"));
    let out = f.run(&["locks", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .split_once('[')
            .map(|(_, j)| format!("[{j}"))
            .unwrap()
            .as_str(),
    )
    .unwrap();
    assert_eq!(doc[0]["locked"], false, "{doc}");

    // Now a rollout goes through, and `gpufleet rollouts` lists both: the one that did nothing
    // as `skipped`, this one as `done`.
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = f.run(&["rollouts", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let states: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["skipped", "done"], "{list:#}");
    let done: Vec<&serde_json::Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["state"] == "done")
        .collect();
    assert_eq!(done.len(), 1, "{list:#}");
    assert_eq!(done[0]["mode"], "canary");
    assert_eq!(done[0]["nodes"][0], "node0");
}

/// A canary that failed blocks the waves — selected or not — until the operator resumes the
/// stopped rollout (after fixing the node) or abandons it; an abandoned rollout's node lock is
/// taken over by the next one.
#[test]
fn a_failed_canary_blocks_waves_until_resumed_or_abandoned() {
    let f = UpgradeFleet::start(2, 200, "1", "");
    f.inventory(&["noop", "fixture"], "");
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--resume"), "{}", text(&out));
    for args in [
        &["upgrade", "--wave", "--yes"][..],
        &["upgrade", "--wave", "--yes", "--node", "node1"],
    ] {
        let out = f.run(args);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("did not finish"), "{}", text(&out));
    }
    let out = f.run(&["upgrade", "--abandon"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // It says what stays behind, with the exact command that gives the node back.
    let log = f.drain_log.display().to_string();
    for want in [
        format!("node0 stays drained; give it back with: echo uncordon node0 >> {log}"),
        "node0 keeps this rollout's node lock (".to_string(),
    ] {
        assert!(text(&out).contains(&want), "{want:?} in:\n{}", text(&out));
    }
    // The canary is still on the legacy stack: waves stay blocked, selection or not.
    for args in [
        &["upgrade", "--wave", "--dry-run"][..],
        &["upgrade", "--wave", "--yes", "--node", "node1"],
    ] {
        let out = f.run(args);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            text(&out).contains("canaries first: node0"),
            "{}",
            text(&out)
        );
    }
    assert_eq!(f.drains(), ["drain node0"], "node1 was never touched");
    // Fix the canary's recipe; the new rollout takes over the abandoned rollout's node lock.
    let inv = std::fs::read_to_string(&f.fleet.inventory)
        .unwrap()
        .replacen("recipe = \"noop\"", "recipe = \"fixture\"", 1);
    f.fleet.write_inventory(&inv);
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = f.run(&["upgrade", "--wave", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(f.status("node1"), "ready");
    // One node's history: its entries and its rollouts' start and end, no other node's.
    let out = f.run(&["journal", "--node", "node1"]);
    let j = String::from_utf8_lossy(&out.stdout);
    assert!(j.contains(" node1 ") && j.contains(" rollout "), "{j}");
    assert!(!j.contains(" node0 "), "{j}");
}

/// A step that fails stops the node; once the operator fixes the cause, `--resume` retries the
/// node from that step and finishes it.
#[test]
fn resume_retries_a_stopped_node_from_the_failed_step() {
    let f = UpgradeFleet::start(1, 205, "1", "");
    let flag = f.nodes[0].join("ready-to-go");
    let config = std::fs::read_to_string(&f.fleet.config).unwrap().replace(
        "[recipes.noop]",
        &format!(
            "[recipes.picky]\nsteps = [{{ name = \"check\", run = \"test -f {}\" }}, {{ name = \"switch\", run = \"fixture-switch-open {{root}}\" }}]\n[recipes.noop]",
            flag.display()
        ),
    );
    std::fs::write(&f.fleet.config, config).unwrap();
    f.inventory(&["picky"], "");
    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("step:check and stays drained: exit status 1"),
        "{}",
        text(&out)
    );
    std::fs::write(&flag, "").unwrap();
    let out = f.run(&["upgrade", "--resume", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        f.drains(),
        ["drain node0", "uncordon node0"],
        "drained once, not again"
    );
    assert_eq!(f.status("node0"), "ready");
}

/// Where the node keeps the files of recipe step `name` (any rollout): its `.out`, if any.
fn step_out(node: &Path, name: &str) -> Option<PathBuf> {
    let steps = node.join("root/var/lib/gpufleet/steps");
    for r in std::fs::read_dir(steps).ok()? {
        for f in std::fs::read_dir(r.ok()?.path()).ok()? {
            let p = f.ok()?.path();
            if p.to_string_lossy().ends_with(&format!("-{name}.out")) {
                return Some(p);
            }
        }
    }
    None
}

/// Two operators, each with a state folder of their own, start a rollout of the same node at
/// the same instant: they get different rollout ids, exactly one passes the node lock, and the
/// step runs once; the other skips the node, says which rollout (and operator) holds it, and
/// its rollout ends (`skipped`: it did nothing), blocking nothing.
#[test]
fn two_rollouts_from_two_state_folders_at_once_one_passes_the_node_lock() {
    let f = UpgradeFleet::start(1, 210, "1", "");
    f.inventory(&["marked_long"], "");
    let other = f.state.with_file_name("state-of-another-operator");
    let spawn = |state: &Path| {
        f.command_in(state, &["upgrade", "--canary", "--yes"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn(&f.state);
    let b = spawn(&other);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let ja = f.journal_text(&f.state);
    let jb = f.journal_text(&other);
    eprintln!("--- journal of operator A ({}):\n{ja}", f.state.display());
    eprintln!("--- journal of operator B ({}):\n{jb}", other.display());
    let id = |j: &str| j.split_whitespace().nth(2).unwrap_or_default().to_string();
    let (ida, idb) = (id(&ja), id(&jb));
    assert!(
        ida.starts_with("r-") && idb.starts_with("r-") && ida != idb,
        "{ida} {idb}"
    );
    // Both end (exit 0): the loser did nothing and says who holds the node; its rollout ends
    // `skipped`, not resumable.
    let codes = (a.status.code(), b.status.code());
    assert_eq!(
        codes,
        (Some(0), Some(0)),
        "A:\n{}\nB:\n{}",
        text(&a),
        text(&b)
    );
    let (loser, winner_id, loser_state) = if text(&a).contains("0 node(s) upgraded, 1 skipped") {
        (&a, &idb, &f.state)
    } else {
        (&b, &ida, &other)
    };
    assert!(
        text(loser).contains(&format!(
            "node0 skipped: another rollout holds the node: locked by rollout {winner_id} ("
        )),
        "{}",
        text(loser)
    );
    assert!(text(loser).contains(" pid "), "{}", text(loser));
    assert!(!text(loser).contains("stays drained"), "{}", text(loser));
    assert_eq!(f.marks(0), ["start", "end"], "the step ran once");
    assert_eq!(
        f.drains(),
        ["drain node0", "uncordon node0"],
        "drained once"
    );
    assert_eq!(f.status("node0"), "ready");
    let out = f
        .command_in(loser_state, &["rollouts", "--json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["state"], "skipped", "{list:#}");
    for what in ["--resume", "--abandon"] {
        let out = f
            .command_in(loser_state, &["upgrade", what, "--yes"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("nothing to "), "{}", text(&out));
    }
    // A new rollout from the loser's folder plans nothing: the node is ready now.
    let out = f
        .command_in(loser_state, &["upgrade", "--canary", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("nothing to do"), "{}", text(&out));
    assert_eq!(f.marks(0), ["start", "end"], "the step still ran once");
    assert!(
        !f.nodes[0]
            .join("root/var/lib/gpufleet/rollout.lock")
            .exists(),
        "no lock left behind"
    );
}

/// gpufleet is killed (SIGKILL) in the middle of a recipe step: the step finishes on the node
/// all the same, and `--resume` takes the exit status recorded there without running it again.
#[test]
fn sigkill_mid_step_the_step_finishes_and_resume_reads_its_status() {
    let f = UpgradeFleet::start(1, 215, "1", "");
    f.inventory(&["marked"], "");
    let mut child = f
        .command(&["upgrade", "--canary", "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once the step is running on the node.
    let start = Instant::now();
    while step_out(&f.nodes[0], "mark").is_none() || f.marks(0).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the step never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(f.marks(0), ["start"], "killed mid-step");
    let j = f.journal();
    assert!(
        j.iter()
            .any(|e| e["step"] == "step:mark" && e["phase"] == "start")
    );
    assert!(
        !j.iter()
            .any(|e| e["step"] == "step:mark" && e["phase"] != "start")
    );
    // The step goes on without gpufleet and records its exit status.
    let out = step_out(&f.nodes[0], "mark").unwrap();
    let rc = out.with_extension("rc");
    let start = Instant::now();
    while !rc.exists() {
        assert!(start.elapsed() < Duration::from_secs(20), "no exit status");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(f.marks(0), ["start", "end"]);
    assert_eq!(std::fs::read_to_string(&rc).unwrap().trim(), "0");

    let out = f.run(&["upgrade", "--resume", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("was started before"), "{}", text(&out));
    assert_eq!(f.marks(0), ["start", "end"], "not run again");
    let j = f.journal();
    let done = j
        .iter()
        .find(|e| e["step"] == "step:mark" && e["phase"] == "done")
        .expect("step:mark done");
    assert!(
        done["outcome"]
            .as_str()
            .unwrap()
            .contains("exit status 0 (recorded on the node by the run started before)"),
        "{done}"
    );
    assert_eq!(f.drains(), ["drain node0", "uncordon node0"]);
    assert_eq!(f.status("node0"), "ready");
    eprintln!(
        "--- journal of the crash and the resume:\n{}",
        f.journal_text(&f.state)
    );
}

/// `--abandon` while the rollout's process still runs is refused, naming who runs it.
#[test]
fn abandon_while_the_rollout_runs_is_refused_naming_the_holder() {
    let f = UpgradeFleet::start(1, 220, "1", "");
    f.inventory(&["marked"], "");
    let child = f
        .command(&["upgrade", "--canary", "--yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    f.wait_journal(|e| e["step"] == "step:mark" && e["phase"] == "start");
    let id = f.journal()[0]["rollout"].as_str().unwrap().to_string();
    let out = f.run(&["upgrade", "--abandon"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("not abandoned: the rollout is still running"),
        "{said}"
    );
    assert!(said.contains(&format!("rollout {id}, operator ")), "{said}");
    assert!(said.contains(&format!("pid {pid}")), "{said}");
    let out = f.run(&["rollouts"]);
    assert!(
        text(&out).contains(&format!("{id}  canary running ")),
        "{}",
        text(&out)
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!f.journal().iter().any(|e| e["phase"] == "abandoned"));
    assert_eq!(f.status("node0"), "ready");
}

/// A node task that panics (a bug in gpufleet, here through the debug-build test hook
/// GPUFLEET_TEST_PANIC_NODE) is that node's failure: journaled, counted in the exit status,
/// the rollout stays resumable, and `--resume` finishes it.
#[test]
fn a_panicking_node_task_is_a_failure_and_resume_finishes_it() {
    let f = UpgradeFleet::start(1, 225, "1", "");
    f.inventory(&["switch"], "");
    let out = f
        .command(&["upgrade", "--canary", "--yes"])
        .env("GPUFLEET_TEST_PANIC_NODE", "node0@gates")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("node0 stopped at gates and stays drained: internal error"),
        "{}",
        text(&out)
    );
    let j = f.journal();
    let failed = j
        .iter()
        .find(|e| e["node"] == "node0" && e["step"] == "gates" && e["phase"] == "failed")
        .expect("the panic is journaled as the node's failure");
    assert!(
        failed["outcome"].as_str().unwrap().contains("panicked"),
        "{failed}"
    );
    let end = j.iter().rev().find(|e| e["step"] == "rollout").unwrap();
    assert_eq!(end["phase"], "failed", "never done: {end}");
    assert_eq!(f.drains(), ["drain node0"]);

    let out = f.run(&["upgrade", "--resume", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(f.drains(), ["drain node0", "uncordon node0"]);
    assert_eq!(f.status("node0"), "ready");
    let switched = f
        .journal()
        .iter()
        .filter(|e| e["step"] == "step:switch" && e["phase"] == "done")
        .count();
    assert_eq!(switched, 1, "the recipe step is not repeated");
}

#[test]
fn upgrade_refuses_local_and_root_and_its_help_does_not_offer_them() {
    let bin = env!("CARGO_BIN_EXE_gpufleet");
    let help = Command::new(bin)
        .args(["upgrade", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        !help.contains("--local") && !help.contains("--root"),
        "{help}"
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    for args in [
        &["upgrade", "--canary", "--dry-run", "--local"][..],
        &["upgrade", "--canary", "--dry-run", "--root", "/"],
    ] {
        let out = Command::new(bin)
            .args(args)
            .env("GPUFLEET_CONFIG", &config)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            text(&out).contains("--local and --root do not apply to upgrades"),
            "{}",
            text(&out)
        );
    }
}
