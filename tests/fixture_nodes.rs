//! Every fixture node, probed by the real binary running the real probe script with `sh`
//! (root prefix = the fixture's `root/`, its `bin/` first on PATH), compared with the
//! `[expected]` table of its node.toml (keys defined in fixtures/README.md).
//!
//! Fixtures come from `$GPUFLEET_FIXTURES`, else `../shared/fixtures/nodes` (the team's copy:
//! adding a folder there adds a case), else the project's copy in `tests/fixtures/nodes`.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{check_expected, manifest};

const SMI_TIMEOUT_SECS: u64 = 2;

fn shared() -> PathBuf {
    manifest().join("../shared")
}

fn fixture_nodes() -> Vec<PathBuf> {
    let v = support::fixture_nodes();
    assert!(
        v.len() >= 8,
        "expected at least 8 fixtures in {}",
        support::fixtures_dir().display()
    );
    v
}

/// Runs `gpufleet snapshot --format json` on one fixture; returns the node and the wall time.
fn probe(fixture: &Path) -> (Value, Duration) {
    let path = format!("{}:/usr/bin:/bin", fixture.join("bin").display());
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "--format", "json", "--nvidia-smi-timeout"])
        .arg(SMI_TIMEOUT_SECS.to_string())
        .arg("--root")
        .arg(fixture.join("root"))
        // The shipped example config holds the defaults; no user config leaks in.
        .arg("--config")
        .arg(manifest().join("config/config.example.toml"))
        .env("PATH", path)
        .output()
        .expect("run gpufleet");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{}: exit {:?}\n{}",
        fixture.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 1);
    (doc["nodes"][0].clone(), took)
}

#[test]
fn every_fixture_matches_its_expected_values() {
    let mut failures = Vec::new();
    let mut seen = BTreeMap::new();
    for fixture in fixture_nodes() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let (node, took) = probe(&fixture);
        // The nvidia-smi time limit bounds the run even when nvidia-smi hangs (smi-hang fixture).
        if took > Duration::from_secs(SMI_TIMEOUT_SECS + 6) {
            failures.push(format!(
                "{name}: took {took:?} with a {SMI_TIMEOUT_SECS} s nvidia-smi limit"
            ));
        }
        failures.extend(check_expected(&fixture, &node));
        // Every reason carries the documented fields.
        for r in node["reasons"].as_array().unwrap() {
            for field in ["code", "severity", "message", "evidence"] {
                assert!(
                    r.get(field).is_some(),
                    "{name}: reason without {field}: {r}"
                );
            }
        }
        seen.insert(name, node["status"].as_str().unwrap().to_string());
    }
    assert!(
        failures.is_empty(),
        "fixture mismatches:\n{}",
        failures.join("\n")
    );
    eprintln!("fixture statuses: {seen:#?}");
}

fn files_under(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else {
                let bytes = if meta.file_type().is_symlink() {
                    std::fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes()
                } else {
                    std::fs::read(&p).unwrap()
                };
                out.insert(p.strip_prefix(root).unwrap().to_path_buf(), bytes);
            }
        }
    }
    out
}

/// The project's copies of the shared fixtures and GPU tables equal the team's originals
/// (checked where ../shared exists; scripts/sync-shared.sh refreshes them).
#[test]
fn project_copies_match_shared() {
    let shared = shared();
    if !shared.join("fixtures/nodes").is_dir() {
        eprintln!("no ../shared here: the project's copies are used as they are");
        return;
    }
    let ours = files_under(&manifest().join("tests/fixtures/nodes"));
    let theirs = files_under(&shared.join("fixtures/nodes"));
    let ours_keys: Vec<_> = ours.keys().collect();
    let theirs_keys: Vec<_> = theirs.keys().collect();
    assert_eq!(
        ours_keys, theirs_keys,
        "fixture files differ: run scripts/sync-shared.sh"
    );
    for (k, v) in &theirs {
        assert!(
            ours[k] == *v,
            "{} differs: run scripts/sync-shared.sh",
            k.display()
        );
    }
    for f in ["nvidia-gpus.tsv", "open-gpu-supported.tsv"] {
        let a = std::fs::read(manifest().join("data").join(f)).unwrap();
        let b = std::fs::read(shared.join("data").join(f)).unwrap();
        assert!(
            a == b,
            "data/{f} differs from ../shared/data: run scripts/sync-shared.sh"
        );
    }
}
