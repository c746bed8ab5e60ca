//! Every fixture node, probed by the real binary running the real probe script with `sh`
//! (root prefix = the fixture's `root/`, its `bin/` first on PATH), compared with the
//! `[expected]` table of its node.toml (keys defined in fixtures/README.md).
//!
//! Fixtures come from `$GPUFLEET_FIXTURES`, else `../shared/fixtures/nodes` (the team's copy:
//! adding a folder there adds a case), else the project's copy in `tests/fixtures/nodes`.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

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
    let mut v = support::all_fixture_nodes();
    // The schema-3 cases (issue 24), when the shared corpus is not replaced.
    if std::env::var_os("GPUFLEET_FIXTURES").is_none() {
        v.extend(support::fixture_nodes_v3());
    }
    assert!(
        v.len() >= 16,
        "expected at least 8 fixtures in {}",
        support::fixtures_dir().display()
    );
    v
}

/// Runs `gpufleet snapshot --format json` on one fixture; returns the whole document and the
/// wall time.
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
    assert_eq!(doc["schema_version"], 3);
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 1);
    (doc, took)
}

/// The committed copy of every fixture's JSON output (tests/golden/): what the snapshot says must
/// not change by accident (issue "One house": no behaviour change while files move). Times and
/// durations are normalized. An intended change is blessed with
/// `GPUFLEET_BLESS=1 cargo test --test fixture_nodes every_fixture` (tests/golden/README.md),
/// and the diff read before it is committed.
fn golden_mismatch(fixture: &Path, doc: &Value) -> Option<String> {
    let set = fixture.parent().unwrap().file_name().unwrap();
    let name = fixture.file_name().unwrap();
    let path = manifest()
        .join("tests/golden")
        .join(set)
        .join(format!("{}.json", name.to_string_lossy()));
    let mut doc = doc.clone();
    doc["generated_at"] = "GENERATED_AT".into();
    for n in doc["nodes"].as_array_mut().unwrap() {
        n["scanned_at"] = "SCANNED_AT".into();
        n["duration_ms"] = 0.into();
    }
    let text = serde_json::to_string_pretty(&doc).unwrap() + "\n";
    if std::env::var_os("GPUFLEET_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return None;
    }
    match std::fs::read_to_string(&path) {
        Ok(want) if want == text => None,
        Ok(want) => {
            let first = want
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(want.lines().count().min(text.lines().count()));
            Some(format!(
                "{}: JSON output differs from {} from line {} (want {:?}, got {:?}); \
                 if intended, bless it (tests/golden/README.md)",
                name.display(),
                path.display(),
                first + 1,
                want.lines().nth(first).unwrap_or(""),
                text.lines().nth(first).unwrap_or("")
            ))
        }
        Err(e) => Some(format!(
            "{}: no committed JSON output ({}: {e}); bless it (tests/golden/README.md)",
            name.display(),
            path.display()
        )),
    }
}

#[test]
fn every_fixture_matches_its_expected_values() {
    let mut failures = Vec::new();
    let mut seen = BTreeMap::new();
    for fixture in fixture_nodes() {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let (doc, took) = probe(&fixture);
        failures.extend(golden_mismatch(&fixture, &doc));
        let node = &doc["nodes"][0];
        // The nvidia-smi time limit bounds the run even when nvidia-smi hangs (smi-hang fixture).
        if took > Duration::from_secs(SMI_TIMEOUT_SECS + 6) {
            failures.push(format!(
                "{name}: took {took:?} with a {SMI_TIMEOUT_SECS} s nvidia-smi limit"
            ));
        }
        failures.extend(check_expected(&fixture, node));
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

/// What a fixture path is: a folder's files, a regular file's bytes, or a symlink's target.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    File(Vec<u8>),
    Link(Vec<u8>),
}

fn files_under(root: &Path) -> BTreeMap<PathBuf, Entry> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let entry = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                Entry::Link(target.into_os_string().into_encoded_bytes())
            } else if meta.is_dir() {
                stack.push(p);
                continue;
            } else {
                Entry::File(std::fs::read(&p).unwrap())
            };
            out.insert(p.strip_prefix(root).unwrap().to_path_buf(), entry);
        }
    }
    out
}

/// The project's copies of the shared fixtures and GPU tables equal the team's originals
/// (checked where ../shared exists; scripts/sync-shared.sh refreshes them). File types count:
/// a symlink here must be a symlink there with the same target, or, where the shared copy stores
/// links as regular files (a transport without symlink support), a regular file holding exactly
/// the link's target; a regular file here is a regular file there with the same bytes.
#[test]
fn project_copies_match_shared() {
    let shared = shared();
    if !shared.join("fixtures/nodes").is_dir() {
        eprintln!("no ../shared here: the project's copies are used as they are");
        return;
    }
    let mut links = 0;
    for dir in ["nodes", "nodes-v2", "replay", "policy"] {
        let ours = files_under(&manifest().join("tests/fixtures").join(dir));
        let theirs = files_under(&shared.join("fixtures").join(dir));
        let ours_keys: Vec<_> = ours.keys().collect();
        let theirs_keys: Vec<_> = theirs.keys().collect();
        assert_eq!(
            ours_keys, theirs_keys,
            "fixtures/{dir}: files differ: run scripts/sync-shared.sh"
        );
        for (k, want) in &theirs {
            let same = match (&ours[k], want) {
                // A link of ours, whichever way the shared copy stores it: a real link, or a
                // regular file holding the target.
                (Entry::Link(a), Entry::Link(b) | Entry::File(b)) => {
                    links += 1;
                    a == b
                }
                (Entry::File(a), Entry::File(b)) => a == b,
                (Entry::File(_), Entry::Link(_)) => false,
            };
            assert!(
                same,
                "fixtures/{dir}/{} differs (content or file type): run scripts/sync-shared.sh",
                k.display()
            );
        }
    }
    // The sysfs entries, /boot/vmlinuz links and merged-/usr `lib` are real links in our copy.
    assert!(
        links >= 90,
        "only {links} fixture symlinks: run scripts/sync-shared.sh"
    );
    let readme_ours = std::fs::read(manifest().join("tests/fixtures/README.shared.md")).unwrap();
    let readme_theirs = std::fs::read(shared.join("fixtures/README.md")).unwrap();
    assert!(
        readme_ours == readme_theirs,
        "tests/fixtures/README.shared.md differs: run scripts/sync-shared.sh"
    );
    for f in ["nvidia-gpus.tsv", "open-gpu-supported.tsv"] {
        let a = std::fs::read(manifest().join("data").join(f)).unwrap();
        let b = std::fs::read(shared.join("data").join(f)).unwrap();
        assert!(
            a == b,
            "data/{f} differs from ../shared/data: run scripts/sync-shared.sh"
        );
    }
}

/// Python's `jsonschema` (PyPI; in target/ci-venv, which scripts/test.sh installs): the
/// venv's python3 when it imports jsonschema. Missing: under CI the test binary stops with exit
/// status 2 (as `support::need_pip`), elsewhere the test is skipped (None).
fn python_with_jsonschema() -> Option<PathBuf> {
    let py = manifest().join("target/ci-venv/bin/python3");
    let ok = Command::new(&py)
        .args(["-c", "import jsonschema"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(py);
    }
    let line = "python's jsonschema is not installed: python3 -m venv target/ci-venv && target/ci-venv/bin/pip install jsonschema==4.26.0 (scripts/test.sh does)";
    if std::env::var_os("CI").is_some() {
        eprintln!("gpufleet tests: {line}");
        std::process::exit(2)
    }
    eprintln!("gpufleet tests: SKIPPED, {line}");
    None
}

/// Every committed golden output (tests/golden/<set>/*.json) validates against the committed
/// JSON Schema of the report (docs/report.schema.json, generated from the types by
/// `report_schema_is_committed`; docs/domain.md "Snapshot JSON"), with the draft 2020-12
/// validator of Python's jsonschema; and a golden with a status and a reason code that do not
/// exist, or with a required key removed, does not.
#[test]
fn every_golden_validates_against_the_schema() {
    let Some(py) = python_with_jsonschema() else {
        return;
    };
    let mut goldens = Vec::new();
    for set in std::fs::read_dir(manifest().join("tests/golden")).unwrap() {
        let set = set.unwrap().path();
        if !set.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&set).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "json") {
                goldens.push(f);
            }
        }
    }
    goldens.sort();
    assert!(goldens.len() >= 28, "only {} goldens", goldens.len());
    // Broken copies that must fail: an unknown status and reason code; `reasons` removed.
    let dir = tempfile::tempdir().unwrap();
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&goldens[0]).unwrap()).unwrap();
    doc["nodes"][0]["status"] = "fine".into();
    let bad_status = dir.path().join("bad-status.json");
    std::fs::write(&bad_status, doc.to_string()).unwrap();
    doc["nodes"][0].as_object_mut().unwrap().remove("reasons");
    let bad_missing = dir.path().join("bad-missing.json");
    std::fs::write(&bad_missing, doc.to_string()).unwrap();
    let script = r#"
import json, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
v = Draft202012Validator(schema)
for path in sys.argv[2:]:
    errors = sorted(v.iter_errors(json.load(open(path))), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        print("INVALID", path, "/".join(map(str, e.path)), e.message[:200])
    else:
        print("VALID", path)
"#;
    let out = Command::new(&py)
        .arg("-c")
        .arg(script)
        .arg(manifest().join("docs/report.schema.json"))
        .args(&goldens)
        .arg(&bad_status)
        .arg(&bad_missing)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "jsonschema failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), goldens.len() + 2, "{stdout}");
    let invalid: Vec<&&str> = lines[..goldens.len()]
        .iter()
        .filter(|l| !l.starts_with("VALID "))
        .collect();
    assert!(
        invalid.is_empty(),
        "goldens that do not validate against docs/report.schema.json:\n{invalid:#?}"
    );
    let broken = &lines[goldens.len()..];
    assert!(
        broken[0].starts_with("INVALID") && broken[0].contains("nodes/0/status"),
        "{}",
        broken[0]
    );
    assert!(
        broken[1].starts_with("INVALID") && broken[1].contains("reasons"),
        "{}",
        broken[1]
    );
}
