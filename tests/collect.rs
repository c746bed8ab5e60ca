//! Collecting through an engine the site already runs (docs/domain.md, "Collected snapshots"):
//! `--name` in local mode, an `srun` over every node of a real Slurm cluster writing JSON Lines
//! (the operator guide's documented command), and `gpufleet snapshot --from` / `gpufleet tui --from`
//! showing what was collected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use support::slurm::Slurm;
use support::{Tmux, fixture, manifest};

fn gpufleet() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpufleet"));
    c.arg("--config")
        .arg(manifest().join("config/config.example.toml"))
        .env("GPUFLEET_SSH_CONFIG", "none")
        .env_remove("GPUFLEET_INVENTORY")
        .env_remove("NODE_NAME")
        .env_remove("SLURMD_NODENAME");
    c
}

/// `gpufleet snapshot --local` on a fixture node (its `bin/` first on PATH), as JSON.
fn local(fixture: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = gpufleet();
    c.args(["snapshot", "--local", "--format", "json", "--root"])
        .arg(fixture.join("root"))
        .args(args)
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", fixture.join("bin").display()),
        );
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn doc(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn names(doc: &Value) -> Vec<String> {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn local_mode_names_the_node_from_the_flag_then_node_name_then_slurmd_nodename() {
    let f = fixture("h200-open-580-k6.18-real");
    // The fixture's hostname, when nothing names the node.
    assert_eq!(names(&doc(&local(&f, &[], &[]))), ["vm"]);
    assert_eq!(
        names(&doc(&local(&f, &[], &[("SLURMD_NODENAME", "gpu7")]))),
        ["gpu7"]
    );
    let both = [("SLURMD_NODENAME", "gpu7"), ("NODE_NAME", "k8s-node-3")];
    assert_eq!(names(&doc(&local(&f, &[], &both))), ["k8s-node-3"]);
    assert_eq!(
        names(&doc(&local(&f, &["--name", "rack2-gpu01"], &both))),
        ["rack2-gpu01"]
    );
    // An empty variable is no name.
    assert_eq!(names(&doc(&local(&f, &[], &[("NODE_NAME", "")]))), ["vm"]);
    // Hostile names are refused, escaped, with their origin.
    let out = local(&f, &[], &[("NODE_NAME", "a\u{1b}[2Jb")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("$NODE_NAME") && !err.contains('\u{1b}'),
        "{err}"
    );
    let out = local(&f, &["--name", "two words"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--name"));
}

#[test]
fn name_and_from_are_refused_with_an_inventory() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("hosts.txt");
    std::fs::write(&inv, "gpu1\n").unwrap();
    let out = gpufleet()
        .args(["snapshot", "--name", "x", "-i"])
        .arg(&inv)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--name applies to local mode"));
    let snap = dir.path().join("s.json");
    std::fs::write(&snap, "{\"schema_version\":2,\"nodes\":[]}").unwrap();
    let out = gpufleet()
        .args(["snapshot", "-i"])
        .arg(&inv)
        .arg("--from")
        .arg(&snap)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("takes no inventory"));
    // A scan flag with --from is a usage error (clap's).
    let out = gpufleet()
        .args(["snapshot", "--node", "gpu1", "--from"])
        .arg(&snap)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn from_reports_unreadable_files_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture("h200-open-580-k6.18-real");
    let good = dir.path().join("good.jsonl");
    let node = doc(&local(&f, &[], &[]))["nodes"][0].clone();
    let mut text = format!(
        "{}\n{{\"type\":\"summary\",\"data\":{{}}}}\n",
        serde_json::json!({"type": "node", "data": node})
    );
    std::fs::write(&good, &text).unwrap();
    let bad = dir.path().join("bad.jsonl");
    text.push_str("{\"type\":\"node\",\"data\":{\"name\":\"x\"}}\n");
    std::fs::write(&bad, text).unwrap();
    let out = gpufleet()
        .args(["snapshot", "--format", "json", "--from"])
        .arg(&good)
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl:3: not a node report"), "{err}");
    let out = gpufleet()
        .args(["snapshot", "--from"])
        .arg(dir.path().join("missing.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The operator guide's "Collect with srun" command (docs/operators.md) on a real Slurm cluster: one job step per node runs
/// gpufleet in local mode (a different fixture node on each, chosen by `$SLURMD_NODENAME`), all
/// writing JSON Lines into one file; `snapshot --from` merges it with an older snapshot.
/// One node's collected file cannot take over another node's row (issue 21): a forged `gpu-a`
/// in year 9999, or at a time jiff cannot represent, in either file order.
#[test]
fn a_forged_report_from_the_future_is_a_merge_finding_and_never_wins() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture("h200-open-580-k6.18-real");
    let real = doc(&local(&f, &[], &[("NODE_NAME", "gpu-a")]));
    assert_eq!(real["nodes"][0]["status"], "ready");
    let real_file = dir.path().join("gpu-a.json");
    std::fs::write(&real_file, real.to_string()).unwrap();
    for at in ["9999-01-01T00:00:00Z", "9999-12-31T23:59:59Z"] {
        let mut forged = real["nodes"][0].clone();
        forged["status"] = "migrate".into();
        forged["scanned_at"] = at.into();
        let evil = dir.path().join("gpu-b.jsonl");
        std::fs::write(
            &evil,
            format!("{}\n", serde_json::json!({"type": "node", "data": forged})),
        )
        .unwrap();
        for files in [[&real_file, &evil], [&evil, &real_file]] {
            let out = gpufleet()
                .args(["snapshot", "--format", "json", "--from"])
                .args(files)
                .output()
                .unwrap();
            let merged = doc(&out);
            assert_eq!(merged["nodes"].as_array().unwrap().len(), 1);
            assert_eq!(merged["nodes"][0]["status"], "ready", "{at}");
            assert_eq!(
                merged["nodes"][0]["scanned_at"],
                real["nodes"][0]["scanned_at"]
            );
            let err = String::from_utf8_lossy(&out.stderr);
            let finding = format!(
                "gpufleet: merge: {}:1: node `gpu-a`: scanned_at",
                evil.display()
            );
            assert!(err.contains(&finding), "{at}: {err}");
            assert!(
                err.contains("hold different reports")
                    && err.contains(&real_file.display().to_string()),
                "{err}"
            );
        }
    }
}

/// The merge's findings are in the output too (the JSON document's `merge_warnings`, a JSON
/// Lines `merge_warnings` record), and the clock-skew allowance is `--clock-skew` (seconds or
/// units) for `snapshot`, and for `policy generate --for` / `policy check --against`.
#[test]
fn merge_findings_are_in_the_document_and_the_clock_skew_is_a_flag() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture("h200-open-580-k6.18-real");
    let real = doc(&local(&f, &[], &[("NODE_NAME", "gpu-a")]));
    // A scan's document has no merge_warnings.
    assert!(real.get("merge_warnings").is_none(), "{real}");
    let real_file = dir.path().join("gpu-a.json");
    std::fs::write(&real_file, real.to_string()).unwrap();
    // Five minutes ahead: within the default 10 minutes, too far for 60 s.
    let ahead = jiff::Timestamp::now() + jiff::SignedDuration::from_mins(5);
    let mut forged = real["nodes"][0].clone();
    forged["status"] = "migrate".into();
    forged["scanned_at"] = ahead.to_string().into();
    let evil = dir.path().join("gpu-b.jsonl");
    std::fs::write(
        &evil,
        format!("{}\n", serde_json::json!({"type": "node", "data": forged})),
    )
    .unwrap();
    let snap = |extra: &[&str], format: &str| {
        gpufleet()
            .args(["snapshot", "--format", format])
            .args(extra)
            .arg("--from")
            .args([&real_file, &evil])
            .output()
            .unwrap()
    };
    let merged = doc(&snap(&[], "json"));
    assert_eq!(merged["nodes"][0]["status"], "migrate");
    let w: Vec<String> = serde_json::from_value(merged["merge_warnings"].clone()).unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("hold different reports"), "{w:?}");
    for skew in ["60", "1m", "60s"] {
        let out = snap(&["--clock-skew", skew], "json");
        let merged = doc(&out);
        assert_eq!(merged["nodes"][0]["status"], "ready", "{skew}");
        let w: Vec<String> = serde_json::from_value(merged["merge_warnings"].clone()).unwrap();
        let future = format!(
            "{}:1: node `gpu-a`: scanned_at {ahead} is later than now plus the 60 s clock-skew allowance",
            evil.display()
        );
        assert!(w.iter().any(|l| l.starts_with(&future)), "{skew}: {w:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(&future));
    }
    let out = snap(&["--clock-skew", "1m"], "jsonl");
    let text = String::from_utf8(out.stdout).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["node", "merge_warnings", "summary"]);
    assert_eq!(records[1]["data"].as_array().unwrap().len(), 2);
    // No finding: an empty list, still said.
    let out = gpufleet()
        .args(["snapshot", "--format", "json", "--from"])
        .arg(&real_file)
        .output()
        .unwrap();
    assert_eq!(doc(&out)["merge_warnings"], serde_json::json!([]));
    for bad in ["-5", "5 parsecs", "2d", "86401"] {
        let out = snap(&[&format!("--clock-skew={bad}")], "json");
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--clock-skew"),
            "{bad}"
        );
    }
    // policy: the same merge, the same flag.
    for (sub, flag) in [("generate", "--for"), ("check", "--against")] {
        let mut c = gpufleet();
        c.args(["policy", sub, "--clock-skew", "1m"]);
        if sub == "check" {
            c.arg(manifest().join("tests/fixtures/policy/guide-clusterpolicy.yaml"));
        }
        let out = c
            .arg(flag)
            .arg(&real_file)
            .arg(flag)
            .arg(&evil)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("later than now plus the 60 s clock-skew allowance"),
            "{sub}: {err}"
        );
    }
}

#[test]
fn srun_over_every_slurm_node_collects_json_lines_that_from_merges() {
    let slurm = Slurm::start(2, 22);
    let dir = tempfile::tempdir().unwrap();
    let fixtures: [(&str, PathBuf); 2] = [
        ("gpu1", fixture("h100-open-555-k6.6-peermem")),
        ("gpu2", fixture("h200-open-580-k6.18-real")),
    ];
    // `gpufleet` on the steps' PATH is a wrapper that gives each node its fixture (its bin/
    // first on PATH, its root/ as --root); gpufleet names the node from $SLURMD_NODENAME.
    let mut cases = String::new();
    for (node, f) in &fixtures {
        cases.push_str(&format!(
            "{node}) F={} ;; ",
            shlex::try_quote(&f.display().to_string()).unwrap()
        ));
    }
    let wrapper_dir = dir.path().join("bin");
    std::fs::create_dir_all(&wrapper_dir).unwrap();
    std::fs::write(
        wrapper_dir.join("gpufleet"),
        format!(
            "#!/bin/sh\ncase \"$SLURMD_NODENAME\" in {cases} *) echo \"no fixture for $SLURMD_NODENAME\" >&2; exit 3 ;; esac\n\
             PATH=\"$F/bin:/usr/bin:/bin\" exec {} --config {} \"$@\" --root \"$F/root\"\n",
            shlex::try_quote(env!("CARGO_BIN_EXE_gpufleet")).unwrap(),
            shlex::try_quote(&manifest().join("config/config.example.toml").display().to_string())
                .unwrap()
        ),
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(wrapper_dir.join("gpufleet"))
        .status()
        .unwrap();
    // The operator guide's command, as written there: the lines of its "Collect with srun" block
    // up to the one that writes fleet.jsonl.
    let readme = std::fs::read_to_string(manifest().join("docs/operators.md")).unwrap();
    let block = readme
        .split("### Collect with srun")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .unwrap();
    let end = block.find("> fleet.jsonl").unwrap() + "> fleet.jsonl".len();
    let documented = &block[..end];
    assert!(documented.contains("srun"), "{documented}");
    let collected = dir.path().join("fleet.jsonl");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("set -e\n{documented}"))
        .current_dir(dir.path())
        .env("SLURM_CONF", &slurm.conf)
        .env_remove("NODE_NAME")
        .env(
            "PATH",
            format!(
                "{}:{}:/usr/sbin:/sbin",
                wrapper_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&collected).unwrap();
    assert!(
        out.status.success(),
        "srun: {:?}\n{}\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // Two runs: a node record and a summary each.
    let kinds: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "node").count(), 2, "{text}");
    assert_eq!(
        kinds.iter().filter(|k| *k == "summary").count(),
        2,
        "{text}"
    );

    // An older snapshot: gpu2 from before (blocked, older: loses) and gpu9, only there.
    let older = dir.path().join("older.json");
    let mut old = doc(&local(
        &fixture("v100-proprietary-535-k5.4-peermem"),
        &[],
        &[("NODE_NAME", "gpu2")],
    ));
    let mut gpu9 = old["nodes"][0].clone();
    gpu9["name"] = "gpu9".into();
    old["nodes"][0]["scanned_at"] = "2020-01-01T00:00:00Z".into();
    old["nodes"].as_array_mut().unwrap().push(gpu9);
    std::fs::write(&older, old.to_string()).unwrap();

    let out = gpufleet()
        .args(["snapshot", "--format", "json", "--from"])
        .arg(&collected)
        .arg(&older)
        .output()
        .unwrap();
    let merged = doc(&out);
    // gpu2 in both files, scanned twice: said, naming both.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("gpufleet: merge: node `gpu2`:") && err.contains("hold different reports"),
        "{err}"
    );
    let mut got: Vec<(String, String)> = merged["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("gpu1".to_string(), "migrate".to_string()),
            ("gpu2".to_string(), "ready".to_string()),
            ("gpu9".to_string(), "blocked".to_string()),
        ]
    );
    // --check over what was collected: gpu1 (migrate) and gpu9 (blocked) are not ready.
    let out = gpufleet()
        .args(["snapshot", "--check", "--format", "csv", "--from"])
        .arg(&collected)
        .arg(&older)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(csv.lines().any(|l| l.starts_with("gpu1,migrate")), "{csv}");
}

/// `gpufleet tui --from` in a real terminal: the collected nodes, and `R` reads the files again.
#[test]
fn tui_from_shows_collected_nodes_and_rescans_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("fleet.json");
    let f = fixture("h100-open-555-k6.6-peermem");
    let out = local(&f, &[], &[("NODE_NAME", "collected-gpu1")]);
    std::fs::write(&snap, &out.stdout).unwrap();
    let cmd = format!(
        "GPUFLEET_SSH_CONFIG=none {} --config {} tui --from {}",
        shlex::try_quote(env!("CARGO_BIN_EXE_gpufleet")).unwrap(),
        shlex::try_quote(
            &manifest()
                .join("config/config.example.toml")
                .display()
                .to_string()
        )
        .unwrap(),
        shlex::try_quote(&snap.display().to_string()).unwrap()
    );
    let t = Tmux::start(&cmd);
    row(&t, "migrate");
    // Collected snapshots change nothing: the session is read-only.
    t.wait_for("READ-ONLY");
    // The node is upgraded elsewhere and collected again: R shows the new report.
    let g = fixture("h200-open-580-k6.18-real");
    let out = local(&g, &[], &[("NODE_NAME", "collected-gpu1")]);
    std::fs::write(&snap, &out.stdout).unwrap();
    t.keys(&["R"]);
    row(&t, "ready");
    // A file that went bad: said, and the last report stays.
    std::fs::write(&snap, "garbage").unwrap();
    t.keys(&["R"]);
    t.wait_for("cannot read the snapshots again");
    row(&t, "ready");
}

/// Waits until the row of `collected-gpu1` shows `status`.
fn row(t: &Tmux, status: &str) {
    let start = std::time::Instant::now();
    loop {
        let s = t.screen();
        if s.lines()
            .any(|l| l.contains("collected-gpu1") && l.contains(status))
        {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "waited for collected-gpu1 {status}; screen:\n{s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// kubernetes-validate (PyPI; .ci/run installs it into target/ci-venv): `$KUBERNETES_VALIDATE`,
/// else target/ci-venv/bin/kubernetes-validate, else the one on PATH.
fn kubernetes_validate() -> PathBuf {
    if let Some(p) = std::env::var_os("KUBERNETES_VALIDATE") {
        return PathBuf::from(p);
    }
    let venv = manifest().join("target/ci-venv/bin/kubernetes-validate");
    if venv.exists() {
        return venv;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    match std::env::split_paths(&path)
        .map(|d| d.join("kubernetes-validate"))
        .find(|p| p.is_file())
    {
        Some(p) => p,
        None => {
            eprintln!(
                "gpufleet tests: kubernetes-validate is not installed: python3 -m venv target/ci-venv && target/ci-venv/bin/pip install kubernetes-validate==1.37.0 (scripts/test.sh does)"
            );
            std::process::exit(2)
        }
    }
}

fn validate(files: &[PathBuf]) -> Output {
    Command::new(kubernetes_validate())
        .args(["--strict", "--kubernetes-version", "1.33.0"])
        .args(files)
        .output()
        .expect("kubernetes-validate (.ci/run installs it from PyPI)")
}

/// deploy/kubernetes against the Kubernetes OpenAPI schemas (kubernetes-validate, strict: no
/// unknown field), the kustomization naming every manifest, and the DaemonSet's shape: the
/// documented command, the host read-only, SYSLOG the one capability beyond the runtime's
/// default set.
#[test]
fn kubernetes_manifests_validate_against_the_kubernetes_schemas() {
    let dir = manifest().join("deploy/kubernetes");
    let kust = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    let resources: Vec<PathBuf> = kust
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter(|l| l.ends_with(".yaml"))
        .map(|l| dir.join(l.trim()))
        .collect();
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "kustomization.yaml")
        .collect();
    manifests.sort();
    let mut listed = resources.clone();
    listed.sort();
    assert_eq!(listed, manifests, "kustomization.yaml lists every manifest");
    let out = validate(&manifests);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The validator does reject a wrong manifest (a misspelt field).
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("daemonset.yaml");
    let ds = std::fs::read_to_string(dir.join("daemonset.yaml")).unwrap();
    std::fs::write(
        &bad,
        ds.replace("readOnlyRootFilesystem", "readOnlyRootFileSystem"),
    )
    .unwrap();
    assert!(!validate(&[bad]).status.success());

    assert!(ds.contains("gpufleet snapshot --local --root /host --name \"$NODE_NAME\""));
    assert!(ds.contains("fieldPath: spec.nodeName"));
    assert!(ds.contains("--format prometheus --output /textfile/gpufleet.prom"));
    assert!(ds.contains("drop: [\"ALL\"]") && ds.contains("add: [\"SYS_CHROOT\", \"SYSLOG\"]"));
    for l in ds.lines().filter(|l| l.contains("mountPath: /host")) {
        assert!(l.contains("readOnly: true"), "{l}");
    }
    // Every host path mounted is one the probe reads (a path, or a folder above one).
    let probe = std::fs::read_to_string(manifest().join("src/probe/probe.sh")).unwrap();
    for l in ds.lines().filter(|l| l.contains("mountPath: /host/")) {
        let path = l.split("mountPath: /host").nth(1).unwrap();
        let path = path.split([',', '}']).next().unwrap().trim();
        // modprobe.d and modules-load.d are read as `$base/$c` from two lists.
        let (parent, leaf) = path.rsplit_once('/').unwrap();
        let read = probe.contains(path)
            || (probe.contains(&format!(" {parent} ")) && probe.contains(&format!(" {leaf}")));
        assert!(read, "{path} is not read by probe.sh");
    }
}

/// The DaemonSet's container script, as deploy/kubernetes/daemonset.yaml has it, run once on a
/// fixture node (`/host` → the fixture's root, `/textfile` → a temp folder, the loop once): the
/// JSON names the node from $NODE_NAME, and the Prometheus file made from it passes promtool.
#[test]
fn the_daemonset_script_writes_json_and_prometheus_text_for_node_exporter() {
    let ds = std::fs::read_to_string(manifest().join("deploy/kubernetes/daemonset.yaml")).unwrap();
    let body = ds
        .split("            - |\n")
        .nth(1)
        .and_then(|s| s.split("          env:").next())
        .unwrap();
    let script: String = body
        .lines()
        .map(|l| l.strip_prefix("              ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(script.contains("while :; do"), "{script}");
    let f = fixture("h100-open-555-k6.6-peermem");
    let dir = tempfile::tempdir().unwrap();
    let textfile = dir.path().join("textfile");
    std::fs::create_dir_all(&textfile).unwrap();
    let script = script
        .replace("while :; do", "for once in 1; do")
        .replace("/host", &f.join("root").display().to_string())
        .replace("/textfile", &textfile.display().to_string());
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        bin.join("gpufleet"),
        format!(
            "#!/bin/sh\nexec {} --config {} \"$@\"\n",
            shlex::try_quote(env!("CARGO_BIN_EXE_gpufleet")).unwrap(),
            shlex::try_quote(
                &manifest()
                    .join("config/config.example.toml")
                    .display()
                    .to_string()
            )
            .unwrap()
        ),
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(bin.join("gpufleet"))
        .status()
        .unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env(
            "PATH",
            format!(
                "{}:{}:/usr/bin:/bin",
                bin.display(),
                f.join("bin").display()
            ),
        )
        .env("NODE_NAME", "k8s-gpu-7")
        .env("GPUFLEET_INTERVAL", "0")
        .env("GPUFLEET_SSH_CONFIG", "none")
        .env_remove("GPUFLEET_INVENTORY")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut left: Vec<String> = std::fs::read_dir(&textfile)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["gpufleet.json", "gpufleet.prom"]);
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(textfile.join("gpufleet.json")).unwrap())
            .unwrap();
    assert_eq!(names(&json), ["k8s-gpu-7"]);
    assert_eq!(json["nodes"][0]["status"], "migrate");
    let prom = std::fs::read_to_string(textfile.join("gpufleet.prom")).unwrap();
    assert!(
        prom.contains("gpufleet_node_status{node=\"k8s-gpu-7\",status=\"migrate\"} 1"),
        "{prom}"
    );
    let checked = Command::new("sh")
        .arg("-c")
        .arg("promtool check metrics < \"$1\"")
        .arg("sh")
        .arg(textfile.join("gpufleet.prom"))
        .output()
        .expect("promtool (Debian's prometheus package; .ci/run installs it)");
    assert!(
        checked.status.success(),
        "promtool: {}{}\n{prom}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}
