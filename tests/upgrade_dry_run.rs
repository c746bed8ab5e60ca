//! `--dry-run` shows every command exactly as it runs (issue 20, item 11), over real OpenSSH
//! nodes (tests/support/upgrade.rs) whose sshd logs each command it is sent (a logging
//! `ForceCommand` that then runs it): what the dry run printed after `| ` is what the nodes
//! received, byte for byte — the lock, the boot identity reads, each step's launch and poll,
//! the kill of a step at its `kill_after`, the unlock.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

use gpufleet::actions::rollout::wire::read_exact;
use support::upgrade::*;

/// `text` with every `pid N` written `pid N` (the lock names the process that sends it: the
/// dry run's own pid, then the run's).
fn without_pids(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("pid ") {
        out.push_str(&rest[..i + 4]);
        let after = &rest[i + 4..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push('N');
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// A logging shell for sshd's `ForceCommand`: each command sent goes to a file of its own in
/// `log` (exactly, as `$SSH_ORIGINAL_COMMAND`), then runs as sshd would run it.
fn logging_shell(dir: &std::path::Path, log: &std::path::Path) -> std::path::PathBuf {
    std::fs::create_dir_all(log).unwrap();
    let p = dir.join("logging-shell");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nf='{}'/$(date +%s%N).$$\nprintf '%s' \"$SSH_ORIGINAL_COMMAND\" > \"$f\"\nexec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&p)
        .status()
        .unwrap();
    p
}

#[test]
fn the_dry_run_shows_exactly_what_the_nodes_receive() {
    // node0 switches and reboots (lock, boot identity, launch, poll, the new boot identity,
    // unlock); node1's step hangs and is killed at its kill_after.
    let hang = "max_failures = 1\n[recipes.hang]\nsteps = [{ name = \"hang\", run = \"sleep 300\", kill_after = \"2s\" }]\n";
    let mut f = UpgradeFleet::start(2, 163, "1", hang);
    f.inventory(&["fixture", "hang"], "");
    let inv = std::fs::read_to_string(&f.fleet.inventory)
        .unwrap()
        .replace("canary = false", "canary = true");
    f.fleet.write_inventory(&inv);
    let log = f.scratch.path().join("sent");
    let shell = logging_shell(f.scratch.path(), &log);
    for i in 0..2 {
        f.fleet
            .restart(i, false, &format!("ForceCommand {}", shell.display()));
    }
    let dry = f.run(&["upgrade", "--canary", "--dry-run"]);
    let shown = String::from_utf8_lossy(&dry.stdout).into_owned();
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    let dry_id = shown
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    assert!(dry_id.starts_with("r-"), "{shown}");
    let exact = read_exact(&shown);
    for want in [
        "gpufleet-lock",
        "gpufleet-boot-id",
        "gpufleet-launch",
        "gpufleet-poll",
        "gpufleet-kill",
        "gpufleet-unlock",
    ] {
        assert!(
            exact.iter().any(|c| c.contains(want)),
            "{want} not shown exactly:\n{shown}"
        );
    }
    // Nothing was sent by the dry run but the probe.
    let sent = |log: &std::path::Path| -> Vec<String> {
        let mut files: Vec<_> = std::fs::read_dir(log)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .filter(|c| c != "sh -s")
            .collect()
    };
    assert_eq!(sent(&log), Vec::<String>::new());

    let out = f.run(&["upgrade", "--canary", "--yes"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "node1 is killed: {}",
        text(&out)
    );
    let id = f.journal()[0]["rollout"].as_str().unwrap().to_string();
    let shown: BTreeSet<String> = exact
        .iter()
        .map(|c| without_pids(&c.replace(&dry_id, &id)))
        .collect();
    let received: BTreeSet<String> = sent(&log).iter().map(|c| without_pids(c)).collect();
    // Every command a node received was shown, exactly.
    let unshown: Vec<&String> = received.difference(&shown).collect();
    assert!(
        unshown.is_empty(),
        "received, never shown: {unshown:#?}\nshown: {shown:#?}"
    );
    // And every command shown was received, but node1's unlock (it stopped at its killed
    // step, locked) and perhaps a reboot step's poll (the node may be gone by then).
    let unsent: Vec<&String> = shown
        .difference(&received)
        .filter(|c| !(c.contains("gpufleet-poll") && c.contains("-reboot")))
        .filter(|c| !(c.contains("gpufleet-unlock") && c.contains("/node1/")))
        .collect();
    assert!(unsent.is_empty(), "shown, never sent: {unsent:#?}");
    for want in ["gpufleet-kill", "gpufleet-unlock", "gpufleet-boot-id"] {
        assert!(
            received.iter().any(|c| c.contains(want)),
            "{want}: {received:#?}"
        );
    }
}
