//! Upgrades against `gpufleet sim --allow-upgrades` (src/sim/upgrade.rs): the real executor
//! over the simulator's SSH, from the CLI and from the TUI (in tmux); nothing runs on this
//! machine but gpufleet.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::sim::*;
use support::{Tmux, any_fixture, node};

/// `gpufleet sim --allow-upgrades`: a canary rollout then a wave over the simulator, every node
/// locked, switched to the open kernel module, rebooted (the session drops, SSH comes back),
/// re-probed, gated and unlocked by the real executor; afterwards every node is `ready` with no
/// lock held. Any other command is still refused and runs nothing.
#[test]
fn upgrades_against_the_simulator_bring_every_node_to_ready() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inv = dir.join("fleet.toml");
    let fixture = any_fixture("a100-proprietary-535-k5.15-peermem");
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            "4",
            "--allow-upgrades",
            "--fixtures",
            fixture.to_str().unwrap(),
            "--write-inventory",
            inv.to_str().unwrap(),
        ],
    );
    let config = dir.join("fleet.toml.config.toml");
    assert!(
        sim.banner.contains("upgrades are simulated"),
        "{}",
        sim.banner
    );
    let before = snapshot(dir, &inv, &[]);
    for n in before["nodes"].as_array().unwrap() {
        assert_eq!(n["status"], "migrate", "{n}");
    }
    let (c, i, state) = (
        config.display().to_string(),
        inv.display().to_string(),
        dir.join("state").display().to_string(),
    );
    let base = ["--config", &c, "-i", &i, "--state-dir", &state];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let out = gpufleet(dir, &args);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{extra:?}:\n{said}");
        said
    };
    // Waves wait for the canaries.
    let mut args = base.to_vec();
    args.extend_from_slice(&["upgrade", "--wave", "--yes"]);
    assert_ne!(gpufleet(dir, &args).status.code(), Some(0));
    let said = run(&["upgrade", "--canary", "--yes"]);
    assert!(said.contains("2 node(s) upgraded"), "{said}");
    assert!(said.contains("step:reboot done"), "{said}");
    let said = run(&["upgrade", "--wave", "--yes"]);
    assert!(said.contains("2 node(s) upgraded"), "{said}");

    let after = snapshot(dir, &inv, &[]);
    let nodes = after["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4);
    for n in nodes {
        assert_eq!(n["status"], "ready", "{n}");
        // Read by the probe from the node's copy: taken, then given back.
        assert_eq!(n["rollout"]["locked"], false, "{n}");
    }
    // Still nothing runs: another command is refused, with 127, and leaves no trace.
    let nodes = inventory_nodes(&inv);
    let marker = dir.join("ran");
    let out = ssh(
        &dir.join("fleet.toml.id_ed25519"),
        &dir.join("fleet.toml.known_hosts"),
        nodes[0].1,
        &format!("touch {}", marker.display()),
        b"",
    );
    assert_eq!(out.status.code(), Some(127));
    assert!(!marker.exists());
    let said = sim.stop();
    assert!(said.contains("other commands"), "{said}");
}

/// The README's simulated flow on the default (built-in) corpus: `gpufleet sim --nodes 16
/// --allow-upgrades`, then `upgrade --canary --yes` and `upgrade --wave --yes` with the config it
/// writes, each exiting 0. The corpus has `migrate` nodes of both module flavours (proprietary,
/// and open with nvidia-peermem), so `switch-open` reads both banners; every canary is `ready`
/// after the canary rollout, every `migrate` node after the wave, and no lock is left.
#[test]
fn the_readmes_simulated_flow_exits_0_with_every_canary_ready() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inv = dir.join("fleet.toml");
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            "16",
            "--allow-upgrades",
            "--write-inventory",
            inv.to_str().unwrap(),
        ],
    );
    let config = dir.join("fleet.toml.config.toml");
    let before = snapshot(dir, &inv, &[]);
    let migrate: Vec<String> = before["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] == "migrate")
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect();
    // Both flavours are there to switch (the README's fleet; the bug was the open banner).
    let flavors: Vec<&str> = before["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] == "migrate")
        .filter_map(|n| n["driver"]["flavor"].as_str())
        .collect();
    assert!(
        flavors.contains(&"open") && flavors.contains(&"proprietary"),
        "{flavors:?}"
    );
    let canaries = canaries(&inv);
    assert_eq!(
        canaries.len(),
        2,
        "{}",
        std::fs::read_to_string(&inv).unwrap()
    );
    let (c, i, state) = (
        config.display().to_string(),
        inv.display().to_string(),
        dir.join("state").display().to_string(),
    );
    let run = |extra: &[&str]| {
        let mut args = vec!["--config", &c, "-i", &i, "--state-dir", &state];
        args.extend_from_slice(extra);
        let out = gpufleet(dir, &args);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{extra:?}:\n{said}");
        said
    };
    let said = run(&["upgrade", "--canary", "--yes"]);
    assert!(said.contains("2 node(s) upgraded"), "{said}");
    let after = snapshot(dir, &inv, &[]);
    for n in &canaries {
        assert_eq!(node(&after, n)["status"], "ready", "{said}\n{after:#}");
    }
    let said = run(&["upgrade", "--wave", "--yes"]);
    let rest = migrate.len() - canaries.len();
    assert!(said.contains(&format!("{rest} node(s) upgraded")), "{said}");
    // Every simulated reboot was proven: another boot identity after it.
    let journal = std::fs::read_to_string(dir.join("state/journal.jsonl")).unwrap();
    let proven: Vec<Value> = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["step"] == "wait-ssh:reboot" && e["phase"] == "done")
        .collect();
    assert_eq!(proven.len(), migrate.len(), "{journal}");
    for e in &proven {
        let o = e["outcome"].as_str().unwrap();
        assert!(
            o.starts_with("rebooted: boot identity before boot_id "),
            "{o}"
        );
    }
    let after = snapshot(dir, &inv, &[]);
    for n in &migrate {
        let r = node(&after, n);
        assert_eq!(r["status"], "ready", "{n}: {r:#}");
        assert_eq!(r["driver"]["flavor"], "open", "{n}: {r:#}");
        assert_eq!(r["rollout"]["locked"], false, "{n}: {r:#}");
    }
    sim.stop();
}

/// The inventory's canaries, by name.
fn canaries(inventory: &std::path::Path) -> Vec<String> {
    let doc: toml::Table = std::fs::read_to_string(inventory).unwrap().parse().unwrap();
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n.get("canary").and_then(toml::Value::as_bool) == Some(true))
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect()
}

/// Waits (up to `secs`) until the screen contains `text`; returns the screen.
fn wait_long(tmux: &Tmux, text: &str, secs: u64) -> String {
    let start = std::time::Instant::now();
    loop {
        let s = tmux.screen();
        if s.contains(text) {
            return s;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(secs),
            "waited for {text:?}; screen:\n{s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The README's simulated flow from the matrix (`gpufleet demo --allow-upgrades`, the same
/// through `sim` + `tui`): the two canaries marked (filtered by name, space), `U`, the node
/// count typed; then the other `migrate` nodes (filter `status:migrate`) the same way. Both
/// rollouts report every node upgraded, and a snapshot afterwards finds every node that was
/// `migrate` ready on the open module.
#[test]
fn the_tui_marks_and_upgrades_the_simulated_canaries_then_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inv = dir.join("fleet.toml");
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            "16",
            "--allow-upgrades",
            "--write-inventory",
            inv.to_str().unwrap(),
        ],
    );
    let before = snapshot(dir, &inv, &[]);
    let migrate: Vec<String> = before["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] == "migrate")
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect();
    let canaries = canaries(&inv);
    assert_eq!((canaries.len(), migrate.len()), (2, 4), "{migrate:?}");
    let command = format!(
        "env -i PATH=/usr/bin:/bin TERM=xterm-256color HOME={home} {bin} --config {config} --state-dir {state} tui -i {inv}; echo EXITED-$?; sleep 30",
        home = dir.join("home").display(),
        bin = env!("CARGO_BIN_EXE_gpufleet"),
        config = dir.join("fleet.toml.config.toml").display(),
        state = dir.join("state").display(),
        inv = inv.display(),
    );
    let tmux = Tmux::start(&command);
    wait_long(&tmux, "scanned 16/16", 120);
    let mark = |names: &[String]| {
        for n in names {
            tmux.keys(&["/"]);
            // The name typed only once the filter line is open: typed into the matrix, its
            // letters are keys (`e` exports, `s` sorts).
            wait_long(&tmux, "enter apply", 20);
            tmux.keys(&[n.as_str()]);
            tmux.keys(&["Enter"]);
            wait_long(&tmux, "nodes 1/16 · filter", 20);
            tmux.keys(&["Space"]);
            wait_long(&tmux, "✓", 20);
            // The filter gone before the next key: an ESC right before `/` reads as Alt-/.
            tmux.keys(&["Escape"]);
            wait_long(&tmux, "nodes 16/16", 20);
        }
    };
    let done = || {
        std::fs::read_to_string(dir.join("state/journal.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(r#""step":"rollout""#) && l.contains(r#""phase":"done""#))
            .count()
    };
    mark(&canaries);
    tmux.keys(&["U"]);
    let plan = wait_long(&tmux, "upgrade plan", 60);
    assert!(plan.contains("gpufleet-sim switch-open"), "{plan}");
    tmux.keys(&["2", "Enter"]);
    support::wait_until(
        "the canary rollout",
        std::time::Duration::from_secs(120),
        || done() == 1,
    );
    wait_long(&tmux, "2 upgraded", 30);
    // The waves: the other migrate nodes.
    let rest: Vec<String> = migrate
        .iter()
        .filter(|n| !canaries.contains(n))
        .cloned()
        .collect();
    mark(&rest);
    tmux.keys(&["U"]);
    wait_long(&tmux, "upgrade plan", 60);
    tmux.keys(&["2", "Enter"]);
    support::wait_until("the wave", std::time::Duration::from_secs(120), || {
        done() == 2
    });
    // `done`: every node of both rollouts finished (a failed node ends a rollout `failed`).
    wait_long(&tmux, "2 upgraded", 30);
    tmux.keys(&["q"]);
    wait_long(&tmux, "EXITED-0", 30);
    let after = snapshot(dir, &inv, &[]);
    for n in &migrate {
        let r = node(&after, n);
        assert_eq!(r["status"], "ready", "{n}: {r:#}");
        assert_eq!(r["driver"]["flavor"], "open", "{n}: {r:#}");
    }
    sim.stop();
}

/// The simulator plays the kill of a step (`kill_after`, `gpufleet upgrade --cancel`) as a
/// node does, still running nothing: a `gpufleet-sim hang` step is killed at its `kill_after`
/// (the rollout stops there, the node is not switched, its lock kept); then, without
/// `kill_after`, a step that outlives `step_timeout` goes on "on the node" until `upgrade
/// --cancel` stops it (journaled `kill:hang`); a second `--cancel` finds it ended.
#[test]
fn kill_after_and_cancel_against_the_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inv = dir.join("fleet.toml");
    let fixture = any_fixture("a100-proprietary-535-k5.15-peermem");
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            "4",
            "--allow-upgrades",
            "--fixtures",
            fixture.to_str().unwrap(),
            "--write-inventory",
            inv.to_str().unwrap(),
        ],
    );
    let config = dir.join("fleet.toml.config.toml");
    let written = std::fs::read_to_string(&config).unwrap();
    let with_hang = |hang: &str, step_timeout: &str| {
        let text = written
            .replace(
                "step_timeout = 60",
                &format!("step_timeout = {step_timeout}"),
            )
            .replace(
                r#"{ name = "switch-open", run = "gpufleet-sim switch-open" },"#,
                &format!(r#"{{ name = "hang", run = "gpufleet-sim hang"{hang} }},"#),
            );
        assert_ne!(text, written);
        std::fs::write(&config, text).unwrap();
    };
    let (c, i, state) = (
        config.display().to_string(),
        inv.display().to_string(),
        dir.join("state").display().to_string(),
    );
    let run = |extra: &[&str]| {
        let mut args = vec!["--config", &c, "-i", &i, "--state-dir", &state];
        args.extend_from_slice(extra);
        let out = gpufleet(dir, &args);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), said)
    };
    let journal = || -> Vec<Value> {
        std::fs::read_to_string(dir.join("state/journal.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let canaries = canaries(&inv);

    // kill_after: killed on the (simulated) node once it ran 2 s.
    with_hang(", kill_after = 2", "60");
    let (code, said) = run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(code, Some(1), "{said}");
    for n in &canaries {
        assert!(
            said.contains(&format!(
                "{n} stopped at step:hang: killed at its kill_after of 2 s (killed "
            )),
            "{said}"
        );
    }
    let j = journal();
    let kills: Vec<&Value> = j
        .iter()
        .filter(|e| e["step"] == "kill:hang" && e["phase"] == "done")
        .collect();
    assert_eq!(kills.len(), canaries.len(), "{j:#?}");
    for k in &kills {
        assert!(k["outcome"].as_str().unwrap().starts_with("killed "), "{k}");
    }
    let after = snapshot(dir, &inv, &[]);
    for n in &canaries {
        let r = node(&after, n);
        assert_eq!(
            r["status"], "migrate",
            "killed before it changed anything: {r:#}"
        );
        assert_eq!(r["rollout"]["locked"], true, "{r:#}");
    }
    let (code, said) = run(&["upgrade", "--abandon"]);
    assert_eq!(code, Some(0), "{said}");

    // No kill_after: past step_timeout the step goes on; --cancel stops it.
    with_hang("", "2");
    let (code, said) = run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("still running on the node after 2 s"),
        "{said}"
    );
    let (code, said) = run(&["upgrade", "--cancel"]);
    assert_eq!(code, Some(0), "{said}");
    for n in &canaries {
        assert!(said.contains(&format!("{n}: step:hang killed ")), "{said}");
    }
    let j = journal();
    let id = j.last().unwrap()["rollout"].clone();
    let cancelled: Vec<&Value> = j
        .iter()
        .filter(|e| e["rollout"] == id && e["step"] == "kill:hang" && e["phase"] == "done")
        .collect();
    assert_eq!(cancelled.len(), canaries.len(), "{j:#?}");
    // A second cancel finds nothing running: the step ended with the kill's status.
    let (code, said) = run(&["upgrade", "--cancel"]);
    assert_eq!(code, Some(0), "{said}");
    assert!(!said.contains(" killed "), "{said}");
    sim.stop();
}
