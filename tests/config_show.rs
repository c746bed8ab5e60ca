//! `gpufleet config show`: every resolved setting names where it came from (flag, environment,
//! config file key, inventory, default), as `ssh -G` does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn show(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpufleet"));
    cmd.current_dir(dir)
        .env("HOME", dir)
        .env_remove("GPUFLEET_CONFIG")
        .env_remove("GPUFLEET_INVENTORY")
        .env_remove("XDG_CONFIG_HOME")
        .args(["config", "show", "--json"])
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn origin<'a>(v: &'a serde_json::Value, setting: &str) -> (&'a str, &'a str) {
    let row = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["setting"] == setting)
        .unwrap_or_else(|| panic!("no {setting} in {v:#}"));
    (
        row["value"].as_str().unwrap(),
        row["origin"].as_str().unwrap(),
    )
}

#[test]
fn each_setting_names_its_origin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        "[probe]\ndeadline = 30\n[ssh]\nconcurrency = 8\n[tui]\nread_only = true\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("inv.toml"),
        "[[nodes]]\nname = \"gpu[1-4]\"\n",
    )
    .unwrap();
    let v = show(
        dir.path(),
        &["--config", "c.toml", "--concurrency", "3", "-n", "gpu[1-2]"],
        &[("GPUFLEET_INVENTORY", "inv.toml")],
    );
    assert_eq!(origin(&v, "config"), ("c.toml", "flag --config"));
    assert_eq!(
        origin(&v, "inventory"),
        ("inv.toml", "environment GPUFLEET_INVENTORY")
    );
    assert_eq!(
        origin(&v, "probe.deadline"),
        ("30 s", "config c.toml [probe] deadline")
    );
    assert_eq!(origin(&v, "ssh.concurrency"), ("3", "flag --concurrency"));
    assert_eq!(origin(&v, "ssh.connect_timeout"), ("10 s", "default"));
    assert_eq!(
        origin(&v, "mode"),
        ("fleet: 2 of 4 nodes selected", "inventory inv.toml")
    );
    assert_eq!(
        origin(&v, "read_only"),
        ("true", "config c.toml [tui] read_only")
    );
    // A shorter --deadline alone lowers the config's nvidia-smi limit, and says so.
    let v = show(dir.path(), &["--local", "--deadline", "5"], &[]);
    assert_eq!(
        origin(&v, "probe.nvidia_smi_timeout"),
        ("4 s", "flag --deadline (lowered to stay under it)")
    );
    assert_eq!(origin(&v, "read_only"), ("false", "default"));
}

/// The runtime's worker threads: `--workers`, else `[ssh] workers`, else the CPUs this
/// process may use (at most 8); a value out of range is refused with the file and line.
#[test]
fn workers_come_from_the_flag_the_config_or_the_cpus() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.toml"), "[ssh]\nworkers = 5\n").unwrap();
    let v = show(dir.path(), &["--local", "--config", "c.toml"], &[]);
    assert_eq!(
        origin(&v, "ssh.workers"),
        ("5", "config c.toml [ssh] workers")
    );
    let v = show(
        dir.path(),
        &["--local", "--config", "c.toml", "--workers", "3"],
        &[],
    );
    assert_eq!(origin(&v, "ssh.workers"), ("3", "flag --workers"));
    let v = show(dir.path(), &["--local"], &[]);
    let cpus = std::thread::available_parallelism().unwrap().get().min(8);
    assert_eq!(
        origin(&v, "ssh.workers"),
        (cpus.to_string().as_str(), "default")
    );
    std::fs::write(dir.path().join("bad.toml"), "[ssh]\nworkers = 0\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .current_dir(dir.path())
        .args(["config", "show", "--local", "--config", "bad.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml:2:1: [ssh] workers = 0: must be between 1 and 256"),
        "{err}"
    );
}
