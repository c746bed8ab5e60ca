//! The output of the commands the probe runs (nvidia-smi, dmesg) is bounded on the node (issue
//! 21, docs/domain.md "Command output"): a command printing forever costs the probe a few MB
//! and is said as `cut` (its facts unknown, never `ready`); a command's exit ends its reading,
//! whatever it left holding its output, and what it left running is killed and named. Temp
//! copies of fixture nodes (the originals are never edited), the real binary and probe script.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{codes, scratch};

mod support;

/// An executable sh script at `path`.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    let mut perm = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(path, perm).unwrap();
}

/// `gpufleet snapshot --format json` in local mode on `node`, the probe's `sh` run under GNU
/// time (a `sh` first on PATH that execs `/usr/bin/time -f %M`): the report and the peak RSS
/// in KiB of the probe's largest process (the shell itself, or any command it waited for).
fn probe_measured(node: &Path, tools: &str, extra: &[&str]) -> (Output, Value, u64, Duration) {
    let time = support::need("time");
    let wrap = node.join("wrap");
    std::fs::create_dir_all(&wrap).unwrap();
    let rss = node.join("rss");
    script(
        &wrap.join("sh"),
        &format!(
            "exec {} -f %M -o {} /bin/sh \"$@\"\n",
            time.display(),
            rss.display()
        ),
    );
    let start = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .arg("snapshot")
        .arg("--config")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/config.example.toml"))
        .arg("--root")
        .arg(node.join("root"))
        .args(["--format", "json"])
        .args(extra)
        .env(
            "PATH",
            format!("{}:{}:{tools}", wrap.display(), node.join("bin").display()),
        )
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    // GNU time writes its file once the probe's shell has exited.
    let text = std::fs::read_to_string(&rss).unwrap();
    let kib = text
        .lines()
        .rev()
        .find_map(|l| l.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("GNU time wrote {text:?}"));
    eprintln!("probe peak RSS {kib} KiB, gpufleet took {took:?}");
    (out, doc["nodes"][0].clone(), kib, took)
}

/// What the old probe took (`out=$(nvidia-smi …)` until its 2 s limit) was 330 MB; the probe
/// itself is about 2 MB. A bound a regression to any unbounded capture breaks.
const RSS_BOUND_KIB: u64 = 16 * 1024;

fn messages(n: &Value) -> String {
    n["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}: {}\n", r["code"].as_str().unwrap(), r["message"]))
        .collect()
}

#[test]
fn an_nvidia_smi_printing_forever_is_cut_and_costs_the_probe_a_few_mb() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    script(
        &node.join("bin/nvidia-smi"),
        "while :; do echo '0, NVIDIA H200, GPU-5f0c2a1e, 00000000:00:06.0, 0x233510DE, 580.159.04, 9.0'; done\n",
    );
    for tools in [
        "/usr/bin:/bin".to_string(),
        // Without `timeout`: the probe's own time limit, the same bound.
        support::tools_without(&["timeout"]).1,
    ] {
        let (_o, n, kib, _) = probe_measured(&node, &tools, &["--nvidia-smi-timeout", "2"]);
        assert!(kib < RSS_BOUND_KIB, "peak RSS {kib} KiB ({tools})");
        let all = messages(&n);
        assert_eq!(n["status"], "attention", "{all}");
        assert!(
            codes(&n).contains(&"nvidia-smi-failed".to_string())
                && all.contains("more than the probe's 262144-byte cap"),
            "{all}"
        );
        // GPU facts from /proc and PCI, never from the cut output.
        assert_eq!(n["gpus"].as_array().unwrap().len(), 1, "{n:#}");
    }
}

#[test]
fn a_dmesg_printing_forever_is_cut_and_the_node_is_never_ready() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    // A log whose first lines say nothing, then floods: the lines after the cap are unknown.
    script(
        &node.join("bin/dmesg"),
        "while :; do echo '[    1.000000] usb 1-1: new device'; done\n",
    );
    let (_o, n, kib, _) = probe_measured(&node, "/usr/bin:/bin", &[]);
    assert!(kib < RSS_BOUND_KIB, "peak RSS {kib} KiB");
    let all = messages(&n);
    assert_eq!(n["status"], "unknown", "{all}");
    assert!(
        codes(&n).contains(&"verdict-incomplete".to_string())
            && all.contains("kernel_log (dmesg: longer than the 8388608-byte cap"),
        "{all}"
    );
    assert!(n["kernel_log"]["xid_counts"].is_null(), "{n:#}");
    // The same log, short: the node is ready (the fixture's own verdict).
    script(
        &node.join("bin/dmesg"),
        "i=0; while [ $i -lt 100 ]; do echo '[    1.000000] usb 1-1: new device'; i=$((i+1)); done\n",
    );
    let (_o, n, _, _) = probe_measured(&node, "/usr/bin:/bin", &[]);
    assert_eq!(n["status"], "ready", "{}", messages(&n));
}

/// Processes whose command line is exactly `args`.
fn processes_running(args: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = args.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            (cmd == want).then_some(pid)
        })
        .collect()
}

#[test]
fn a_daemonizing_nvidia_smi_neither_holds_the_probe_nor_outlives_it() {
    let setsid = support::need("setsid");
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    let real = node.join("bin/nvidia-smi.real");
    std::fs::rename(node.join("bin/nvidia-smi"), &real).unwrap();
    for (tools, a, b) in [
        ("/usr/bin:/bin".to_string(), "123.471", "123.472"),
        (support::tools_without(&["timeout"]).1, "123.473", "123.474"),
    ] {
        // Answers, exits 0, and leaves two children holding its stdout: one in its process
        // group, one in a session of its own (out of any group kill's reach).
        script(
            &node.join("bin/nvidia-smi"),
            &format!(
                "sleep {a} &\n{} sleep {b} &\nexec {} \"$@\"\n",
                setsid.display(),
                real.display()
            ),
        );
        let (_o, n, _, took) = probe_measured(
            &node,
            &tools,
            &["--nvidia-smi-timeout", "10", "--deadline", "30"],
        );
        // Before: held until the node deadline (30 s), reported nvidia-smi-timeout.
        assert!(took < Duration::from_secs(8), "took {took:?} ({tools})");
        let all = messages(&n);
        assert_eq!(n["status"], "ready", "{all}");
        assert_eq!(
            n["gpus"][0]["uuid"],
            "GPU-5f0c2a1e-7d3b-4c8e-9a61-2b4d6e8f0a13"
        );
        assert!(
            codes(&n).contains(&"probe-left-processes".to_string()) && all.contains(" sleep"),
            "{all}"
        );
        support::wait_until(
            "what nvidia-smi left to be gone",
            Duration::from_secs(3),
            || {
                processes_running(&["sleep", a]).is_empty()
                    && processes_running(&["sleep", b]).is_empty()
            },
        );
    }
}
