//! Bad input and hostile nodes, on temp copies of fixture nodes (the originals are never edited),
//! through the real binary and the real probe script.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{codes, fixture, scratch};

mod support;

fn gpufleet(node: &Path, path: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .arg("snapshot")
        .arg("--config")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/config.example.toml"))
        .arg("--root")
        .arg(node.join("root"))
        .args(["--nvidia-smi-timeout", "2"])
        .args(extra)
        .env("PATH", path)
        .output()
        .unwrap()
}

fn default_path(node: &Path) -> String {
    format!("{}:/usr/bin:/bin", node.join("bin").display())
}

fn json_node(node: &Path, extra: &[&str]) -> Value {
    let out = gpufleet(
        node,
        &default_path(node),
        &[&["--format", "json"], extra].concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["nodes"][0].clone()
}

#[test]
fn compute_cap_rejected_by_an_old_driver_is_retried_without_it() {
    let (_t, node) = scratch("a100-proprietary-535-k5.15-peermem");
    let csv = node.join("commands/gpus.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    let stripped: String = text
        .lines()
        .map(|l| {
            let cols: Vec<&str> = l.split(", ").collect();
            cols[..6].join(", ") + ", " + cols[7]
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!stripped.contains("compute_cap"));
    std::fs::write(&csv, stripped + "\n").unwrap();
    let n = json_node(&node, &[]);
    assert_eq!(n["status"], "migrate", "{n:#}");
    assert_eq!(n["gpus"].as_array().unwrap().len(), 8);
    // From data/nvidia-gpus.tsv by PCI device id 20B2.
    assert_eq!(n["gpus"][0]["compute_capability"], "8.0");
    assert!(!codes(&n).contains(&"nvidia-smi-failed".to_string()));
}

#[test]
fn without_nvidia_smi_gpus_come_from_proc_and_pci() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    std::fs::remove_dir_all(node.join("bin")).unwrap();
    let n = json_node(&node, &[]);
    assert_eq!(n["status"], "ready");
    assert_eq!(n["gpus"][0]["name"], "NVIDIA H200");
    assert_eq!(n["gpus"][0]["compute_capability"], "9.0");
    assert_eq!(n["gpus"][0]["bus_id"], "0000:00:06.0");
    assert_eq!(n["driver"]["userspace_version"], Value::Null);
}

#[test]
fn garbage_and_invalid_utf8_make_facts_unknown_not_a_crash() {
    let (_t, node) = scratch("h100-open-555-k6.6-peermem");
    std::fs::write(
        node.join("root/proc/modules"),
        b"\x00\xff\xfe binary \x1b[2J\n",
    )
    .unwrap();
    std::fs::write(
        node.join("root/etc/os-release"),
        b"PRETTY_NAME=\"\xc3\x28\"\n",
    )
    .unwrap();
    let n = json_node(&node, &[]);
    let unknown: Vec<&str> = n["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["code"] == "fact-unknown")
        .map(|r| r["message"].as_str().unwrap())
        .collect();
    assert!(
        unknown.iter().any(|m| m.contains("/proc/modules")),
        "{unknown:?}"
    );
    // Bytes that are not UTF-8 are decoded lossily (byte-safe): os-release is still read.
    assert!(
        !unknown.iter().any(|m| m.contains("/etc/os-release")),
        "{unknown:?}"
    );
    assert_eq!(n["modules"], Value::Null);
    assert_eq!(n["os"]["pretty_name"], "\u{fffd}(");
    // A fact `ready` rests on is unknown (peermem loaded comes from /proc/modules and
    // /sys/module): never ready.
    assert_ne!(n["status"], "ready");
    // Facts from other files are still there.
    assert_eq!(n["driver"]["flavor"], "open");
    assert_eq!(n["kernel"]["release"], "6.6.43-custom");
}

#[test]
fn escape_sequences_from_a_node_never_reach_the_terminal_raw() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    std::fs::write(
        node.join("root/proc/sys/kernel/hostname"),
        "evil\x1b]0;owned\x07\n",
    )
    .unwrap();
    let csv = node.join("commands/gpus.csv");
    let text = std::fs::read_to_string(&csv)
        .unwrap()
        .replace("0, NVIDIA H200,", "0, NVIDIA H200\x1b[2J\u{202e},");
    std::fs::write(&csv, text).unwrap();
    for format in ["table", "csv", "json", "jsonl"] {
        let out = gpufleet(&node, &default_path(&node), &["--format", format]);
        assert!(out.status.success());
        let s = String::from_utf8(out.stdout).unwrap();
        assert!(!s.contains('\x1b'), "{format}: raw ESC in output:\n{s}");
        assert!(!s.contains('\x07'), "{format}: raw BEL in output");
        assert!(
            !s.contains('\u{202e}'),
            "{format}: raw bidi override in output"
        );
        assert!(s.contains("evil"), "{format}: the node is still shown");
    }
    let n = json_node(&node, &[]);
    assert_eq!(n["name"], "evil\x1b]0;owned\x07");
}

#[test]
fn hung_nvidia_smi_without_timeout_tool_is_cut_by_the_deadline() {
    let node = fixture("l40s-open-570-k6.8-smi-hang");
    let (_bin, tools) = support::tools_without(&["timeout"]);
    let path = format!("{}:{tools}", node.join("bin").display());
    let start = Instant::now();
    let out = gpufleet(&node, &path, &["--format", "json", "--deadline", "4"]);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = &doc["nodes"][0];
    assert!(
        codes(n).contains(&"nvidia-smi-timeout".to_string()),
        "{n:#}"
    );
    assert_eq!(n["driver"]["version"], "570.86.15");
    assert_eq!(n["dma_buf"]["kernel_support"], true);
}

#[test]
fn without_gzip_the_config_gz_travels_as_hex() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    // Force the kernel-config path: no kallsyms symbol.
    std::fs::write(node.join("root/proc/kallsyms"), "").unwrap();
    let (_bin, tools) = support::tools_without(&["gzip"]);
    let path = format!("{}:{tools}", node.join("bin").display());
    let out = gpufleet(&node, &path, &["--format", "json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = &doc["nodes"][0];
    assert_eq!(n["dma_buf"]["kernel_support"], true, "{n:#}");
    assert_eq!(n["status"], "ready");
}

fn messages(n: &Value) -> Vec<String> {
    n["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_fifo_is_never_opened_and_its_facts_are_unknown() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    let modules = node.join("root/proc/modules");
    std::fs::remove_file(&modules).unwrap();
    let ok = Command::new("mkfifo").arg(&modules).status().unwrap();
    assert!(ok.success());
    let start = Instant::now();
    let n = json_node(&node, &["--deadline", "20"]);
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "a FIFO was opened"
    );
    assert_eq!(n["kernel"]["release"], "6.18.44-fc-v657-gpu");
    assert_eq!(n["modules"], Value::Null);
    assert!(
        messages(&n).iter().any(|m| m.contains("FIFO")),
        "{:?}",
        messages(&n)
    );
    assert!(!codes(&n).contains(&"probe-incomplete".to_string()));
}

#[test]
fn a_read_that_never_ends_keeps_the_sections_before_the_deadline() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    let (bin, tools) = support::tools_without(&["cat"]);
    support::shim(bin.path(), "cat", "/proc/modules", "exec sleep 300");
    let path = format!("{}:{tools}", node.join("bin").display());
    let start = Instant::now();
    let out = gpufleet(&node, &path, &["--format", "json", "--deadline", "3"]);
    assert!(start.elapsed() < Duration::from_secs(8));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = &doc["nodes"][0];
    // Read before /proc/modules: kept.
    assert_eq!(n["kernel"]["release"], "6.18.44-fc-v657-gpu");
    assert_eq!(n["driver"]["flavor"], "open");
    // From /proc/modules on: unknown, never absent, and said so.
    assert_eq!(n["modules"], Value::Null);
    assert_eq!(n["status"], "unknown", "{n:#}");
    let incomplete = n["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["code"] == "probe-incomplete")
        .unwrap_or_else(|| panic!("no probe-incomplete: {n:#}"));
    let m = incomplete["message"].as_str().unwrap();
    assert!(m.contains("deadline"), "{m}");
    assert!(m.contains("/proc/modules"), "{m}");
    assert!(codes(n).contains(&"verdict-incomplete".to_string()));
}

/// A section that overflows the output cap (a 2 MiB /proc/modules): the sections before it keep
/// their facts, the cut one and those after it are unknown by the cap, and the report names the
/// cut section (before: the whole node `unreachable`, `probe-output-invalid`, every fact lost).
#[test]
fn a_section_over_the_output_cap_is_named_and_the_sections_before_it_kept() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    let line = "nvidia_uvm 1830912 - - Live 0xffffffffc080c000 (O)\n";
    std::fs::write(
        node.join("root/proc/modules"),
        line.repeat((2 << 20) / line.len()),
    )
    .unwrap();
    let out = gpufleet(
        &node,
        &default_path(&node),
        &["--format", "json", "--check"],
    );
    // The node's verdict rests on unknown facts: `--check` exits 2, the snapshot still written.
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = &doc["nodes"][0];
    assert_eq!(n["status"], "unknown", "{n:#}");
    // Read before /proc/modules: the kernel and the loaded driver.
    assert_eq!(n["kernel"]["release"], "6.18.44-fc-v657-gpu", "{n:#}");
    assert_eq!(n["driver"]["version"], "580.159.04", "{n:#}");
    let said = |code: &str| -> String {
        n["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["code"] == code)
            .map(|r| r["message"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let cut = said("probe-incomplete");
    assert!(
        cut.contains("1048576-byte output cap") && cut.contains("file /proc/modules (cut off)"),
        "{cut}"
    );
    let unknown = said("fact-unknown");
    assert!(
        unknown.contains("/proc/modules: cut off by gpufleet's 1048576-byte output cap"),
        "{unknown}"
    );
    // After the cut: unknown by the cap, never absent.
    assert_eq!(n["peermem"]["configured"], Value::Null, "{n:#}");
    assert!(unknown.contains("never arrived"), "{unknown}");
    assert!(
        !codes(n).contains(&"probe-output-invalid".to_string()),
        "{n:#}"
    );
}

#[test]
fn check_exit_codes() {
    let run = |name: &str, extra: &[&str]| {
        let node = fixture(name);
        gpufleet(
            &node,
            &default_path(&node),
            &[&["--format", "json"], extra].concat(),
        )
        .status
        .code()
    };
    assert_eq!(run("h200-open-580-k6.18-real", &["--check"]), Some(0));
    assert_eq!(
        run("a100-proprietary-535-k5.15-peermem", &["--check"]),
        Some(1)
    );
    assert_eq!(run("cpu-node-no-driver-k6.8", &["--check"]), Some(1));
    assert_eq!(
        run("cpu-node-no-driver-k6.8", &["--check", "--allow-no-driver"]),
        Some(0)
    );
    // A node whose verdict rests on an unknown fact: 2, like an unreachable one.
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    std::fs::create_dir_all(node.join("root/etc/modprobe.d/x.conf")).unwrap();
    let out = gpufleet(
        &node,
        &default_path(&node),
        &["--format", "json", "--check"],
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["nodes"][0]["status"], "unknown");
    assert_eq!(doc["summary"]["unknown"], 1);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(run("a100-proprietary-535-k5.15-peermem", &[]), Some(0));
    // A short deadline alone brings the nvidia-smi limit (10 s in the config) down with it.
    let h200 = fixture("h200-open-580-k6.18-real");
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args([
            "snapshot",
            "--format",
            "json",
            "--deadline",
            "3",
            "--config",
        ])
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/config.example.toml"))
        .arg("--root")
        .arg(h200.join("root"))
        .env("PATH", default_path(&h200))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = gpufleet(Path::new("/nonexistent"), "/usr/bin:/bin", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a folder"));
}

#[test]
fn jsonl_and_csv_shapes() {
    let node = fixture("a100-proprietary-535-k5.15-peermem");
    let out = gpufleet(&node, &default_path(&node), &["--format", "jsonl"]);
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["type"], "node");
    assert_eq!(lines[0]["data"]["status"], "migrate");
    assert_eq!(lines[1]["type"], "summary");
    assert_eq!(lines[1]["data"]["migrate"], 1);

    let out = gpufleet(&node, &default_path(&node), &["--format", "csv"]);
    let mut rdr = csv::Reader::from_reader(out.stdout.as_slice());
    let header: Vec<String> = rdr.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, gpufleet::snapshot::csv_columns());
    let row = rdr.records().next().unwrap().unwrap();
    assert_eq!(&row[5], "8x NVIDIA A100-SXM4-80GB");
    assert_eq!(&row[6], "8.0");
    assert_eq!(&row[7], "true");
    assert!(row[10].split(';').any(|c| c == "peermem-configured"));
}

#[test]
fn mismatch_reports_the_userspace_version_from_nvml() {
    let n = json_node(&fixture("a100-proprietary-550-mismatch"), &[]);
    assert_eq!(n["driver"]["version"], "550.90.07");
    assert_eq!(n["driver"]["userspace_version"], "550.127");
}

/// Processes whose command line is exactly `args` (NUL-separated in /proc/<pid>/cmdline).
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

/// A copy of the smi-hang fixture whose nvidia-smi sleeps `secs` (a value no other test uses,
/// so its `sleep` process can be found).
fn hang_scratch(secs: &str) -> (tempfile::TempDir, PathBuf) {
    let (t, node) = scratch("l40s-open-570-k6.8-smi-hang");
    std::fs::write(node.join("commands/nvidia-smi-hang"), secs).unwrap();
    (t, node)
}

#[test]
fn the_deadline_kills_the_whole_probe_tree() {
    let (_t, node) = hang_scratch("123.451");
    let (_bin, tools) = support::tools_without(&["timeout"]);
    let path = format!("{}:{tools}", node.join("bin").display());
    let out = gpufleet(&node, &path, &["--format", "json", "--deadline", "3"]);
    assert!(out.status.success());
    support::wait_until(
        "the hung child to go with gpufleet",
        Duration::from_secs(2),
        || processes_running(&["sleep", "123.451"]).is_empty(),
    );
}

#[test]
fn ctrl_c_stops_the_probe_and_exits_130() {
    let (_t, node) = hang_scratch("123.452");
    let child = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args([
            "snapshot",
            "--format",
            "json",
            "--nvidia-smi-timeout",
            "50",
            "--root",
        ])
        .arg(node.join("root"))
        .env("PATH", default_path(&node))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while processes_running(&["sleep", "123.452"]).is_empty()
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    nix_kill(child.id(), "INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
    support::wait_until(
        "the probe's child to go with gpufleet",
        Duration::from_secs(2),
        || processes_running(&["sleep", "123.452"]).is_empty(),
    );
}

fn nix_kill(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let node = fixture("h200-open-580-k6.18-real");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "--format", "jsonl", "--root"])
        .arg(node.join("root"))
        .env("PATH", default_path(&node))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    // Quietly: no message, exit 0 (a gate, `--check`, exits 141: tests/completions.rs).
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn a_root_without_proc_and_empty_selections_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("root")).unwrap();
    let out = gpufleet(dir.path(), "/usr/bin:/bin", &["--check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no proc/ folder"));
    let inv = dir.path().join("empty.toml");
    std::fs::write(&inv, "# no nodes yet\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "--check", "-i"])
        .arg(&inv)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "--check over no nodes must not pass"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("lists no nodes"));
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "--nvidia-smi-timeout", "90"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("shorter than the node deadline"));
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The h200 fixture (ready, nothing configured) with boot-configuration files added.
fn h200_with(files: &[(&str, &[u8])]) -> (tempfile::TempDir, PathBuf) {
    let (t, node) = scratch("h200-open-580-k6.18-real");
    for (rel, bytes) in files {
        write(&node.join("root").join(rel), bytes);
    }
    (t, node)
}

#[test]
fn a_latin1_comment_never_hides_a_peermem_directive() {
    let (_t, node) = h200_with(&[(
        "etc/modprobe.d/mlx.conf",
        b"# maintained by J\xe9r\xf4me\nsoftdep nvidia post: nvidia-peermem\n",
    )]);
    let n = json_node(&node, &[]);
    assert_eq!(n["peermem"]["configured"], true, "{n:#}");
    assert_eq!(n["status"], "migrate");
}

#[test]
fn peermem_is_configured_from_every_boot_configuration_folder() {
    for dir in ["etc", "run", "usr/local/lib", "usr/lib", "lib"] {
        let (_t, node) = h200_with(&[(
            &format!("{dir}/modules-load.d/rdma.conf"),
            b"ib_umad\nnvidia-peermem\n",
        )]);
        let n = json_node(&node, &[]);
        assert_eq!(n["peermem"]["configured"], true, "{dir}: {n:#}");
        let ev = n["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["code"] == "peermem-configured")
            .unwrap();
        assert_eq!(
            ev["evidence"][0]["source"],
            format!("/{dir}/modules-load.d/rdma.conf")
        );
    }
}

#[test]
fn a_same_named_file_in_etc_overrides_and_a_dev_null_link_masks() {
    // /etc/modules-load.d/rdma.conf replaces /usr/lib's file of the same name.
    let (_t, node) = h200_with(&[
        ("usr/lib/modules-load.d/rdma.conf", b"nvidia-peermem\n"),
        ("etc/modules-load.d/rdma.conf", b"ib_umad\n"),
    ]);
    assert_eq!(json_node(&node, &[])["peermem"]["configured"], false);
    // A symlink to /dev/null in /etc masks it (decided by name, under the root prefix).
    let (_t, node) = h200_with(&[("usr/lib/modules-load.d/rdma.conf", b"nvidia-peermem\n")]);
    std::fs::create_dir_all(node.join("root/etc/modules-load.d")).unwrap();
    std::os::unix::fs::symlink("/dev/null", node.join("root/etc/modules-load.d/rdma.conf"))
        .unwrap();
    let n = json_node(&node, &[]);
    assert_eq!(n["peermem"]["configured"], false, "{n:#}");
    assert_eq!(n["status"], "ready");
    // `install nvidia-peermem /bin/false` masks it wherever it is asked for.
    let (_t, node) = h200_with(&[
        ("usr/lib/modules-load.d/rdma.conf", b"nvidia-peermem\n"),
        (
            "etc/modprobe.d/no-peermem.conf",
            b"blacklist nvidia_peermem\ninstall nvidia-peermem /bin/false\n",
        ),
    ]);
    assert_eq!(json_node(&node, &[])["peermem"]["configured"], false);
}

#[test]
fn a_merged_usr_lib_link_is_read_once() {
    // /lib -> usr/lib as on merged-/usr systems: one folder, read once (no duplicate evidence).
    let (_t, node) = h200_with(&[("usr/lib/modules-load.d/rdma.conf", b"nvidia-peermem\n")]);
    std::os::unix::fs::symlink("usr/lib", node.join("root/lib")).unwrap();
    let n = json_node(&node, &[]);
    let ev = n["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["code"] == "peermem-configured")
        .unwrap()["evidence"]
        .clone();
    assert_eq!(ev.as_array().unwrap().len(), 1, "{ev:#}");
}

#[test]
fn an_unreadable_boot_configuration_file_is_unknown_never_ready() {
    let (_t, node) = h200_with(&[("etc/modprobe.d/secret.conf", b"options nvidia x=1\n")]);
    // A directory where a file is expected makes the read fail (tests run as root, so
    // permissions cannot deny it).
    std::fs::remove_file(node.join("root/etc/modprobe.d/secret.conf")).unwrap();
    std::fs::create_dir_all(node.join("root/etc/modprobe.d/secret.conf")).unwrap();
    let n = json_node(&node, &[]);
    assert_eq!(n["peermem"]["configured"], Value::Null, "{n:#}");
    assert_eq!(n["status"], "unknown");
    assert!(codes(&n).contains(&"verdict-incomplete".to_string()));
}

/// The shipped recipes' "stop loading nvidia-peermem" step, run with its /etc paths pointed at
/// a fixture's root/etc: peermem is no longer configured, and /usr/lib is not touched.
#[test]
fn the_shipped_recipe_masks_peermem_from_etc_only() {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/recipes.example.toml"),
    )
    .unwrap();
    let recipes: toml::Table = text.parse().unwrap();
    for name in ["ubuntu-open", "rhel-open"] {
        let steps = recipes["recipes"][name]["steps"].as_array().unwrap();
        let step = steps
            .iter()
            .find(|s| s["name"].as_str().unwrap().contains("nvidia-peermem"))
            .unwrap()["run"]
            .as_str()
            .unwrap();
        let (_t, node) = h200_with(&[
            ("usr/lib/modules-load.d/rdma.conf", b"nvidia-peermem\n"),
            (
                "etc/modules-load.d/nvidia-peermem.conf",
                b"nvidia-peermem\n",
            ),
            (
                "etc/modprobe.d/mlx.conf",
                b"# J\xe9r\xf4me\nsoftdep nvidia post: nvidia-peermem\noptions nvidia NVreg_X=1\n",
            ),
        ]);
        assert_eq!(json_node(&node, &[])["peermem"]["configured"], true);
        let root = node.join("root");
        let cmd = step.replace("/etc/", &format!("{}/etc/", root.display()));
        let st = Command::new("sh").args(["-c", &cmd]).status().unwrap();
        assert!(st.success(), "{name}: {cmd}");
        let n = json_node(&node, &[]);
        assert_eq!(n["peermem"]["configured"], false, "{name}: {n:#}");
        assert_eq!(
            std::fs::read(root.join("usr/lib/modules-load.d/rdma.conf")).unwrap(),
            b"nvidia-peermem\n",
            "{name}: a package-owned file was edited"
        );
        // The admin's other lines stay.
        let mlx = std::fs::read(root.join("etc/modprobe.d/mlx.conf")).unwrap();
        assert!(mlx.windows(9).any(|w| w == b"NVreg_X=1"), "{name}");
    }
}

/// A passthrough host: the A30s are bound to vfio-pci, no nvidia module is loaded. They are
/// said (`gpu-bound-elsewhere`) and the node is `no-driver`, not a broken GPU node.
#[test]
fn gpus_bound_to_vfio_pci_make_a_no_driver_node() {
    let (_t, node) = scratch("a30-proprietary-550-secureboot-unsigned-dkms");
    for bus in ["0000:3b:00.0", "0000:d8:00.0"] {
        let dev = node.join("root/sys/devices/pci0000:00").join(bus);
        std::os::unix::fs::symlink("../../../bus/pci/drivers/vfio-pci", dev.join("driver"))
            .unwrap();
    }
    let n = json_node(&node, &[]);
    assert_eq!(n["status"], "no-driver", "{n:#}");
    let c = codes(&n);
    assert!(c.contains(&"gpu-bound-elsewhere".to_string()), "{c:?}");
    assert!(c.contains(&"no-nvidia-module".to_string()), "{c:?}");
    assert!(!c.contains(&"gpu-without-driver".to_string()), "{c:?}");
    assert!(
        !c.contains(&"module-signature-rejected".to_string()),
        "{c:?}"
    );
}

/// Found by an adversarial review: ways to hide a fact or make `ready` rest on a guess.
#[test]
fn hostile_names_and_lists_never_make_a_node_ready() {
    // A newline in a modules-load.d file name: `ls` splits it, the file cannot be read by either
    // piece; systemd reads it. Unknown, never "not configured".
    let (_t, node) = h200_with(&[]);
    write(
        &node.join("root/etc/modules-load.d/rdma\npeermem.conf"),
        b"nvidia-peermem\n",
    );
    let n = json_node(&node, &[]);
    assert_ne!(n["status"], "ready", "{n:#}");
    assert_eq!(n["peermem"]["configured"], Value::Null, "{n:#}");

    // kmod also reads *.alias in modprobe.d.
    let (_t, node) = h200_with(&[(
        "etc/modprobe.d/rdma.alias",
        b"softdep nvidia post: nvidia-peermem\n",
    )]);
    assert_eq!(json_node(&node, &[])["peermem"]["configured"], true);

    // The kernel command line loads modules too.
    let (_t, node) = h200_with(&[]);
    write(
        &node.join("root/proc/cmdline"),
        b"BOOT_IMAGE=/vmlinuz ro modules-load=nvidia-peermem\n",
    );
    assert_eq!(json_node(&node, &[])["peermem"]["configured"], true);

    // A second NVIDIA GPU on PCI that nvidia-smi does not list, and the driver's own list
    // unreadable (a FIFO): whether every GPU is the driver's is unknown.
    let (_t, node) = h200_with(&[]);
    let devs = node.join("root/sys/devices/pci0000:00");
    support::copy_tree(&devs.join("0000:00:06.0"), &devs.join("0000:00:07.0"));
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:07.0",
        node.join("root/sys/bus/pci/devices/0000:00:07.0"),
    )
    .unwrap();
    let gpus = node.join("root/proc/driver/nvidia/gpus");
    std::fs::remove_dir_all(&gpus).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(&gpus)
            .status()
            .unwrap()
            .success()
    );
    let n = json_node(&node, &[]);
    assert_eq!(n["status"], "unknown", "{n:#}");
}

/// The GPU Operator's nvidia-smi under a root prefix: the binary that runs is the one found
/// under the root, never one a symlink in the tree points to outside it.
#[test]
fn a_driver_root_symlink_never_runs_a_program_outside_the_root() {
    let (t, node) = h200_with(&[]);
    std::fs::remove_file(node.join("bin/nvidia-smi")).unwrap();
    let outside = t.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let marker = t.path().join("ran-outside");
    let prog = outside.join("nvidia-smi");
    std::fs::write(
        &prog,
        format!("#!/bin/sh\ntouch {}\necho OUTSIDE\n", marker.display()),
    )
    .unwrap();
    let mut perm = std::fs::metadata(&prog).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&prog, perm).unwrap();
    std::fs::create_dir_all(node.join("root/run/nvidia/driver/usr")).unwrap();
    std::os::unix::fs::symlink(&outside, node.join("root/run/nvidia/driver/usr/bin")).unwrap();
    let (_bin, tools) = support::tools_without(&["chroot"]);
    let path = format!("{}:{tools}", node.join("bin").display());
    let out = gpufleet(&node, &path, &["--format", "json"]);
    assert!(out.status.success());
    assert!(!marker.exists(), "a program outside the root prefix ran");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("OUTSIDE"));
}

/// Mellanox's legacy `nv_peer_mem` is the same legacy GPUDirect RDMA path as nvidia-peermem:
/// a node that loads it is not `ready`.
#[test]
fn the_legacy_nv_peer_mem_counts_as_peermem() {
    let (_t, node) = h200_with(&[("etc/modules-load.d/rdma.conf", b"nv_peer_mem\n")]);
    let modules = node.join("root/proc/modules");
    let mut text = std::fs::read(&modules).unwrap();
    text.extend_from_slice(b"nv_peer_mem 20480 0 - Live 0x0000000000000000 (OE)\n");
    std::fs::write(&modules, text).unwrap();
    let n = json_node(&node, &[]);
    assert_eq!(n["status"], "migrate", "{n:#}");
    assert_eq!(n["peermem"]["loaded"], true);
    assert_eq!(n["peermem"]["configured"], true);
    assert!(
        n["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["message"].as_str().unwrap().starts_with("nv_peer_mem")),
        "{n:#}"
    );
}
