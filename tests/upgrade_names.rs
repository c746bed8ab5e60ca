//! No argument injection on the write side: hostile scheduler names, per drain backend, are
//! refused in the plan before anything runs, and the names that pass reach the tools as one
//! positional argument after `--` (kubectl). Over a real OpenSSH node (tests/support/upgrade.rs);
//! the scheduler tools are recording stand-ins (no Kubernetes API server or second Slurm
//! cluster can run here; the real Slurm test is in tests/upgrade.rs), each writing the argv it
//! received, one `[arg]` per argument and one line per call.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::upgrade::*;

/// The names of issue 20 that would be options, hostlists or shell.
const HOSTILE: &[&str] = &[
    "--selector=nvidia.com/gpu.present=true",
    "-l",
    "gpu[1-9]",
    "a,b",
    "$(touch x)",
    ";",
    "gpu1\ngpu2",
    "-x",
];

/// Recording stand-ins for `tools` in a new folder: each appends its argv (`[a][b]…`) to
/// `<folder>/calls`, then runs `tail` (its answer). Returns the folder.
fn stand_ins(f: &UpgradeFleet, tools: &[(&str, &str)]) -> PathBuf {
    let bin = f.scratch.path().join("stand-ins");
    std::fs::create_dir_all(&bin).unwrap();
    let log = bin.join("calls");
    for (tool, tail) in tools {
        std::fs::write(
            bin.join(tool),
            format!(
                "#!/bin/sh\n{{ printf '{tool}'; printf '[%s]' \"$@\"; echo; }} >> '{}'\n{tail}\n",
                log.display()
            ),
        )
        .unwrap();
        Command::new("chmod")
            .arg("+x")
            .arg(bin.join(tool))
            .status()
            .unwrap();
    }
    bin
}

fn calls(bin: &Path) -> Vec<String> {
    std::fs::read_to_string(bin.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `upgrade --canary ARGS` with the stand-ins first on PATH, run in the scratch folder.
fn upgrade(f: &UpgradeFleet, bin: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["upgrade", "--canary"];
    all.extend_from_slice(args);
    f.command(&all)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .current_dir(f.scratch.path())
        .output()
        .unwrap()
}

/// Each hostile name as the scheduler name of `backend` (`drain` the rest of its setting) is
/// refused, by the dry run and by the rollout, naming the rule; no tool was called, nothing
/// was journaled or locked, and no shell ran the name.
fn hostile_names_are_refused(f: &UpgradeFleet, bin: &Path, backend: &str, drain: &str) {
    for (i, name) in HOSTILE.iter().enumerate() {
        f.set_drain(&format!(
            "drain = {{ backend = \"{backend}\", node_name = {name:?}{drain} }}"
        ));
        // As printed: the name `{:?}`-quoted by the plan, the line escaped once more by the
        // CLI (a backslash doubled).
        let quoted = format!("{name:?}").replace('\\', "\\\\");
        let want = format!("node0: scheduler name {quoted} for the {backend} drain backend is ");
        let runs: &[&[&str]] = if i == 0 {
            &[&["--dry-run"], &["--yes"]]
        } else {
            &[&["--yes"]]
        };
        for args in runs {
            let out = upgrade(f, bin, args);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{name:?} {args:?}: {}",
                text(&out)
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(&want), "{want:?} not in:\n{err}");
            assert!(err.contains("refused before anything runs"), "{err}");
        }
        assert_eq!(calls(bin), Vec::<String>::new(), "{name:?}: a tool ran");
        assert!(f.journal().is_empty(), "{name:?}: {:?}", f.journal());
        assert!(f.drains().is_empty(), "{name:?}: {:?}", f.drains());
        assert!(!f.nodes[0].join("root/var/lib/gpufleet").exists());
        assert!(!f.scratch.path().join("x").exists(), "a shell ran {name:?}");
    }
}

const STATE_READ: &str = r#"jsonpath=unschedulable={.spec.unschedulable}{"\n"}{range .spec.taints[*]}{.key}{"\t"}{.effect}{"\t"}{.value}{"\n"}{end}"#;

/// A recording `scontrol` that keeps one node's state as real Slurm would for these calls:
/// `-o show node X` prints its line (State, and Reason once set), `update … State=DRAIN
/// Reason=…` drains it, `State=RESUME` gives it back.
const SCONTROL: &str = r#"st="$(dirname "$0")/slurm-state"
case "$1" in
-o) printf 'NodeName=%s Arch=x86_64 State=%s' "$4" "$(cat "$st" 2>/dev/null || echo IDLE)"; if [ -f "$st.reason" ]; then printf ' Reason=%s' "$(cat "$st.reason")"; fi; echo ;;
update) case "$3" in State=DRAIN) echo IDLE+DRAIN > "$st"; printf '%s [root@2026-12-03T00:00:00]' "${4#Reason=}" > "$st.reason" ;; State=RESUME) echo IDLE > "$st"; rm -f "$st.reason" ;; esac ;;
esac"#;

#[test]
fn kubernetes_hostile_node_names_never_reach_kubectl_recording_stand_in() {
    let f = UpgradeFleet::start(1, 200, "1", "");
    f.inventory(&["switch"], "");
    let bin = stand_ins(
        &f,
        &[(
            "kubectl",
            "case \"$*\" in *range*) echo unschedulable= ;; *upgrade-state*) printf '\\n\\n' ;; *unschedulable*) echo true ;; esac",
        )],
    );
    hostile_names_are_refused(&f, &bin, "kubernetes", ", context = \"prod\"");
    // Upper case and `_` are not Kubernetes names either.
    for name in ["GPU01", "gpu_01"] {
        f.set_drain(&format!(
            "drain = {{ backend = \"kubernetes\", node_name = {name:?} }}"
        ));
        let out = upgrade(&f, &bin, &["--yes"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(calls(&bin).is_empty());
    }
    // A valid name reaches kubectl once per call, after `--`.
    f.set_drain(
        r#"drain = { backend = "kubernetes", node_name = "{name}.k8s-1.local", context = "prod" }"#,
    );
    let out = upgrade(&f, &bin, &["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // The state read before the plan, and again before the cordon.
    let read =
        format!("kubectl[--context=prod][get][node][-o][{STATE_READ}][--][node0.k8s-1.local]");
    assert_eq!(
        calls(&bin),
        [
            read.as_str(),
            read.as_str(),
            r#"kubectl[--context=prod][get][node][-o][jsonpath={.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}{"\n"}{.metadata.labels.nvidia\.com/gpu-driver-upgrade\.skip}{"\n"}][--][node0.k8s-1.local]"#,
            "kubectl[--context=prod][cordon][--][node0.k8s-1.local]",
            "kubectl[--context=prod][drain][--ignore-daemonsets][--delete-emptydir-data][--timeout=900s][--][node0.k8s-1.local]",
            "kubectl[--context=prod][get][node][-o][jsonpath={.spec.unschedulable}][--][node0.k8s-1.local]",
            "kubectl[--context=prod][uncordon][--][node0.k8s-1.local]",
        ]
    );
}

#[test]
fn slurm_hostile_node_names_never_reach_scontrol_recording_stand_in() {
    let f = UpgradeFleet::start(1, 201, "1", "");
    f.inventory(&["switch"], "");
    let bin = stand_ins(&f, &[("scontrol", SCONTROL), ("sinfo", "echo drained")]);
    hostile_names_are_refused(&f, &bin, "slurm", "");
    for name in ["gpu 1", "x=y", "gpu\"1"] {
        f.set_drain(&format!(
            "drain = {{ backend = \"slurm\", node_name = {name:?} }}"
        ));
        let out = upgrade(&f, &bin, &["--yes"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(calls(&bin).is_empty());
    }
    // One node, one argument each.
    f.set_drain(r#"drain = { backend = "slurm", node_name = "gpu-{name}.c1" }"#);
    let out = upgrade(&f, &bin, &["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let got = calls(&bin);
    assert_eq!(got.len(), 6, "{got:?}");
    let show = "scontrol[-o][show][node][gpu-node0.c1]";
    assert_eq!(got[0], show, "the state read before the plan");
    assert_eq!(got[1], show, "read again before the drain");
    assert!(
        got[2].starts_with(
            "scontrol[update][NodeName=gpu-node0.c1][State=DRAIN][Reason=gpufleet rollout r-"
        ) && got[2].ends_with(']')
            && got[2].matches('[').count() == 4,
        "{got:?}"
    );
    assert_eq!(got[3], "sinfo[-h][-N][-n][gpu-node0.c1][-o][%T]");
    assert_eq!(got[4], show, "read before it is given back");
    assert_eq!(
        got[5],
        "scontrol[update][NodeName=gpu-node0.c1][State=RESUME]"
    );
}

#[test]
fn command_backend_hostile_node_names_never_reach_its_commands() {
    let f = UpgradeFleet::start(1, 202, "1", "");
    f.inventory(&["switch"], "");
    let bin = stand_ins(&f, &[]);
    let log = f.drain_log.display().to_string();
    hostile_names_are_refused(
        &f,
        &bin,
        "command",
        &format!(
            ", drain = \"echo drain {{node}} >> {log}\", status = \"true\", uncordon = \"echo uncordon {{node}} >> {log}\""
        ),
    );
}
