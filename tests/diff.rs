//! `gpufleet diff` on two real scans of one node over a real OpenSSH server: a legacy-stack
//! fixture scanned, then changed on disk (nvidia-peermem unloaded and its modules-load.d file
//! removed) and scanned again.

// A test: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Output;

use support::*;

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn diff_of_two_real_scans_names_what_changed_and_exits_1() {
    let (_t, node) = scratch("a100-proprietary-535-k5.15-peermem");
    let f = Fleet::start(&[node.clone(), fixture("h200-open-580-k6.18-real")], 180);
    let inv = f.inventory.display().to_string();
    let dir = f.tmp.path();
    let old = dir.join("old.json").display().to_string();
    let new = dir.join("new.jsonl").display().to_string();
    let out = f.gpufleet(&["snapshot", "-i", &inv, "-o", &old]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // nvidia-peermem goes away on the node; a second node leaves the inventory.
    let root = node.join("root");
    let modules = std::fs::read_to_string(root.join("proc/modules")).unwrap();
    let kept: Vec<&str> = modules
        .lines()
        .filter(|l| !l.starts_with("nvidia_peermem "))
        .collect();
    std::fs::write(root.join("proc/modules"), kept.join("\n") + "\n").unwrap();
    let _ = std::fs::remove_dir_all(root.join("sys/module/nvidia_peermem"));
    let _ = std::fs::remove_file(root.join("etc/modules-load.d/nvidia-peermem.conf"));
    let out = f.gpufleet(&[
        "snapshot", "-i", &inv, "-n", "a100*", "-f", "jsonl", "-o", &new,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let same = f.gpufleet(&["diff", &old, &old]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    assert!(
        String::from_utf8_lossy(&same.stdout)
            .ends_with("0 changed, 0 added, 0 removed, 2 unchanged\n"),
        "{}",
        text(&same)
    );

    let d = f.gpufleet(&["diff", &old, &new]);
    assert_eq!(d.status.code(), Some(1), "{}", text(&d));
    let t = String::from_utf8_lossy(&d.stdout);
    assert!(
        t.contains("changed  a100-proprietary-535-k5.15-peermem  "),
        "{t}"
    );
    assert!(t.contains("peermem_loaded true → false"), "{t}");
    assert!(t.contains("-peermem-loaded"), "{t}");
    assert!(
        t.contains("removed  h200-open-580-k6.18-real  (was ready)"),
        "{t}"
    );
    assert!(
        t.ends_with("1 changed, 0 added, 1 removed, 0 unchanged\n"),
        "{t}"
    );

    let j = f.gpufleet(&["diff", &old, &new, "--format", "json"]);
    assert_eq!(j.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    let changes = doc["changed"][0]["changes"].as_array().unwrap();
    assert!(
        changes
            .iter()
            .any(|c| c["field"] == "peermem_loaded" && c["old"] == "true" && c["new"] == "false"),
        "{doc:#}"
    );
    assert_eq!(doc["removed"][0]["node"], "h200-open-580-k6.18-real");
    assert_eq!(doc["unchanged"], 0);
    // Swapped: the node comes back as added.
    let back = f.gpufleet(&["diff", &new, &old, "-f", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&back.stdout).unwrap();
    assert_eq!(doc["added"][0]["status"], "ready");

    // Unreadable input and usage errors: exit 2.
    let missing = dir.join("nope.json").display().to_string();
    let e = f.gpufleet(&["diff", &old, &missing]);
    assert_eq!(e.status.code(), Some(2), "{}", text(&e));
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("nope.json"),
        "{}",
        text(&e)
    );
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "{\"schema_version\": 2, \"nodes\": [{\"name\": \"\\u001b]0;x\\u0007\", \"status\": \"evil\"}]}").unwrap();
    let e = f.gpufleet(&["diff", &old, &junk.display().to_string()]);
    assert_eq!(e.status.code(), Some(2), "{}", text(&e));
    assert!(!e.stderr.contains(&0x1b), "{}", text(&e));
    assert_eq!(f.gpufleet(&["diff", &old]).status.code(), Some(2));
}

/// Snapshots are read through a 256 MiB cap (docs/architecture.md, "Size caps"): `/dev/zero` or
/// a sparse 10 GiB file given to `diff` or `snapshot --from` fails
/// at once, naming the file and the limit, instead of eating memory.
#[test]
fn oversized_snapshots_are_refused_at_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(10 << 30)
        .unwrap();
    let big = big.display().to_string();
    let limit = "larger than 256 MiB (the limit for a snapshot)";
    for args in [
        vec!["diff", "/dev/zero", &big],
        vec!["diff", &big, "/dev/zero"],
        vec!["snapshot", "--from", &big],
        vec!["snapshot", "--from", "/dev/zero"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(&args)
            .env("HOME", dir.path())
            .env_remove("GPUFLEET_CONFIG")
            .output()
            .unwrap();
        let file = if args[1] == "--from" {
            args[2]
        } else {
            args[1]
        };
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("{file}: {limit}")),
            "{args:?}: {}",
            text(&out)
        );
    }
}
