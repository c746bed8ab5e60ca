//! `gpufleet nccl LOG…`, the real binary on the NCCL log fixtures (tests/fixtures/nccl, each
//! naming the public log it was built from), joined with real probe reports of fixture nodes
//! (`snapshot --local`), and on hostile logs.

// A test: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use support::*;

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

fn log(name: &str) -> PathBuf {
    manifest().join("tests/fixtures/nccl").join(name)
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn nccl(args: &[&str], logs: &[&Path]) -> Output {
    gpufleet()
        .arg("nccl")
        .args(args)
        .args(logs)
        .output()
        .unwrap()
}

/// `--format json`: the exit code and host → (gdr, why).
fn verdicts(args: &[&str], logs: &[&Path]) -> (i32, Vec<(String, String, String)>, Value) {
    let mut a = vec!["--format", "json"];
    a.extend_from_slice(args);
    let out = nccl(&a, logs);
    let doc: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(&out)));
    let hosts = doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["host"].as_str().unwrap().to_string(),
                h["gdr"].as_str().unwrap().to_string(),
                h["why"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (out.status.code().unwrap(), hosts, doc)
}

fn gdr(v: &[(String, String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(h, g, _)| (h.as_str(), g.as_str())).collect()
}

/// A fixture, its exit code, and each host's answer.
type Case = (&'static str, i32, &'static [(&'static str, &'static str)]);

#[test]
fn each_fixture_gets_its_verdict_and_exit_code() {
    let cases: &[Case] = &[
        (
            "dmabuf-plugin.log",
            0,
            &[("gpu-a", "dma-buf"), ("gpu-b", "dma-buf")],
        ),
        ("peermem-plugin.log", 1, &[("gpu-legacy", "nvidia-peermem")]),
        ("no-gdr-disabled.log", 1, &[("hostname1", "no-gdr")]),
        ("old-nccl-no-module.log", 1, &[("21346d5cefce", "no-gdr")]),
        (
            "gdrdma-no-plugin.log",
            3,
            &[("gpu-h200", "gdr-mechanism-unknown")],
        ),
        (
            "dmabuf-off-peermem.log",
            3,
            &[("gpu-a100", "gdr-mechanism-unknown")],
        ),
        ("truncated.log", 3, &[("gpu-cut", "gdr-mechanism-unknown")]),
        (
            "mixed-hosts.log",
            1,
            &[
                ("node-1", "dma-buf"),
                ("node-2", "no-gdr"),
                ("node-3", "gdr-mechanism-unknown"),
            ],
        ),
    ];
    for (file, code, want) in cases {
        let (got_code, hosts, doc) = verdicts(&[], &[&log(file)]);
        assert_eq!(gdr(&hosts), *want, "{file}: {doc:#}");
        assert_eq!(got_code, *code, "{file}: {doc:#}");
        // The table says the same, with the same exit code.
        let out = nccl(&[], &[&log(file)]);
        assert_eq!(out.status.code(), Some(*code), "{file}: {}", text(&out));
        let table = String::from_utf8(out.stdout).unwrap();
        for (h, g) in *want {
            assert!(
                table.lines().any(|l| l.starts_with(h) && l.contains(g)),
                "{file}: {h} {g}:\n{table}"
            );
        }
    }
    // The version and the evidence lines come with the verdict.
    let (_, _, doc) = verdicts(&[], &[&log("gdrdma-no-plugin.log")]);
    let h = &doc["hosts"][0];
    assert_eq!(h["nccl_version"][0], "2.23.4+cuda12.6");
    assert_eq!(h["net_gdr_level"], "SYS");
    assert_eq!(h["dmabuf_available_lines"], 1);
    assert_eq!(h["hcas"][0]["name"], "mlx5_0");
    assert_eq!(h["hcas"][0]["gdrdma_channels"], 1);
    let ev = h["hcas"][0]["evidence"][1]["text"].as_str().unwrap();
    assert!(ev.ends_with("via NET/IB/0/GDRDMA"), "{ev}");
    assert!(h["why"].as_str().unwrap().contains("no --snapshot"));
}

#[test]
fn every_log_of_a_job_together_and_the_worst_host_decides() {
    let all: Vec<PathBuf> = ["dmabuf-plugin.log", "truncated.log"]
        .iter()
        .map(|f| log(f))
        .collect();
    let refs: Vec<&Path> = all.iter().map(PathBuf::as_path).collect();
    let (code, hosts, _) = verdicts(&[], &refs);
    assert_eq!(code, 3, "{hosts:?}");
    let mut more = refs.clone();
    let peer = log("peermem-plugin.log");
    more.push(&peer);
    let (code, hosts, doc) = verdicts(&[], &more);
    // Not DMA-BUF wins over unknown.
    assert_eq!(code, 1, "{hosts:?}");
    assert_eq!(doc["summary"]["dma-buf"], 2);
    assert_eq!(doc["summary"]["nvidia-peermem"], 1);
    assert_eq!(doc["summary"]["gdr-mechanism-unknown"], 1);
}

/// `gpufleet snapshot --local` of a fixture node under `name`, written to `out`.
fn probe(fixture: &str, name: &str, out: &Path) {
    let f = support::fixture(fixture);
    let o = gpufleet()
        .args([
            "snapshot", "--local", "--format", "json", "--name", name, "--root",
        ])
        .arg(f.join("root"))
        .arg("--output")
        .arg(out)
        .env("PATH", format!("{}:/usr/bin:/bin", f.join("bin").display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn the_hosts_probe_reports_decide_gdrdma_without_a_plugin_line() {
    let dir = tempfile::tempdir().unwrap();
    // The real H200: open module, no nvidia_peermem loaded.
    let h200 = dir.path().join("h200.json");
    probe("h200-open-580-k6.18-real", "gpu-h200", &h200);
    // An A100 with nvidia_peermem loaded, under its FQDN: matched by its first label.
    let a100 = dir.path().join("a100.json");
    probe(
        "a100-proprietary-535-k5.15-peermem",
        "gpu-a100.example.com",
        &a100,
    );
    let snap = |p: &Path| ["--snapshot".to_string(), p.display().to_string()];
    let s_h200 = snap(&h200);
    let s_a100 = snap(&a100);
    let args = |s: &[String; 2]| vec![s[0].clone(), s[1].clone()];

    let a: Vec<String> = args(&s_h200);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (code, hosts, doc) = verdicts(&a, &[&log("gdrdma-no-plugin.log")]);
    assert_eq!(gdr(&hosts), [("gpu-h200", "dma-buf")], "{doc:#}");
    assert_eq!(code, 0);
    assert_eq!(doc["hosts"][0]["peermem_loaded"], false);
    assert!(
        doc["hosts"][0]["peermem_source"]
            .as_str()
            .unwrap()
            .contains("h200.json:1")
    );

    let mut b = args(&s_a100);
    b.extend(args(&s_h200));
    let b: Vec<&str> = b.iter().map(String::as_str).collect();
    let (code, hosts, doc) = verdicts(&b, &[&log("dmabuf-off-peermem.log")]);
    assert_eq!(gdr(&hosts), [("gpu-a100", "nvidia-peermem")], "{doc:#}");
    assert_eq!(code, 1);

    // nvidia_peermem loaded and DMA-BUF not turned off: NCCL's choice is not logged.
    let c = args(&s_a100);
    let c: Vec<&str> = c.iter().map(String::as_str).collect();
    let renamed = dir.path().join("a100-job.log");
    std::fs::write(
        &renamed,
        std::fs::read_to_string(log("gdrdma-no-plugin.log"))
            .unwrap()
            .replace("gpu-h200:", "gpu-a100:"),
    )
    .unwrap();
    let (code, hosts, _) = verdicts(&c, &[&renamed]);
    assert_eq!(gdr(&hosts), [("gpu-a100", "gdr-mechanism-unknown")]);
    assert!(hosts[0].2.contains("nvidia_peermem loaded"), "{hosts:?}");
    assert_eq!(code, 3);

    // A host the snapshot does not have stays unknown, and says so.
    let (code, hosts, _) = verdicts(&c, &[&log("gdrdma-no-plugin.log")]);
    assert_eq!(code, 3);
    assert!(hosts[0].2.contains("no node of this name"), "{hosts:?}");
}

#[test]
fn unreadable_inputs_exit_2_and_node_text_never_reaches_the_terminal_raw() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [log("garbage.log"), dir.path().join("missing.log")] {
        let out = nccl(&[], &[&bad]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(!out.stderr.contains(&0x1b), "{}", text(&out));
    }
    let out = nccl(
        &["--snapshot", "/nonexistent/s.json"],
        &[&log("dmabuf-plugin.log")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    // A host name and a line carrying escapes, and a 1 MiB line: escaped, bounded.
    let evil = dir.path().join("evil.log");
    let mut body = String::from(
        "\x1b]0;owned\x07ev\u{202e}il:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'ml\x1b[2Jx\n",
    );
    body.push_str(&"A".repeat(1 << 20));
    body.push('\n');
    body.push_str("\x1b]0;owned\x07ev\u{202e}il:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n");
    std::fs::write(&evil, body).unwrap();
    for args in [&["--evidence"][..], &["--format", "json"][..]] {
        let out = nccl(args, &[&evil]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(!out.stdout.contains(&0x1b) && !out.stdout.contains(&0x07));
        let s = String::from_utf8(out.stdout).unwrap();
        assert!(!s.contains('\u{202e}'), "{s}");
        assert!(s.contains("owned"), "{s}");
    }
}

#[test]
fn help_documents_the_verdicts_and_exit_codes() {
    let out = gpufleet().args(["nccl", "--help"]).output().unwrap();
    let s = String::from_utf8(out.stdout).unwrap();
    for w in [
        "dma-buf",
        "nvidia-peermem",
        "no-gdr",
        "gdr-mechanism-unknown",
        "DMA-BUF is available on GPU device",
        "Exit codes: 0",
        "3 some host gdr-mechanism-unknown",
    ] {
        assert!(s.contains(w), "{w}:\n{s}");
    }
}
