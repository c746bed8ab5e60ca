//! First speed figure for fleet scans (issue "Fleet scan over SSH"): the 8-node real-sshd test
//! fleet (one OpenSSH sshd per fixture node on 127.0.0.N) scanned 20 times by the release
//! binary; prints the median and spread of the wall time per scan and the peak RSS of the
//! gpufleet process (from wait4's rusage).
//!
//!     cargo bench --bench ssh_fleet            # SCANS=50 cargo bench --bench ssh_fleet

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

// The child is reaped by libc::wait4 below, which also reports its peak RSS.
#[allow(clippy::zombie_processes)]
fn run_once(fleet: &support::Fleet) -> (Duration, i64) {
    let inv = fleet.inventory.display().to_string();
    let start = Instant::now();
    let child = fleet
        .command(&["snapshot", "-i", &inv, "--format", "json"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("run gpufleet");
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; `status` and `usage` are valid for writes.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let took = start.elapsed();
    assert_eq!(pid, child.id() as i32);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "gpufleet failed"
    );
    (took, usage.ru_maxrss) // kilobytes on Linux
}

fn main() {
    let scans: usize = std::env::var("SCANS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let fixtures: Vec<_> = support::fixture_nodes().into_iter().take(8).collect();
    assert_eq!(fixtures.len(), 8);
    let fleet = support::Fleet::start(&fixtures, 110);
    // The smi-hang fixture waits out its 2 s nvidia-smi limit on every scan; report it apart.
    let (warm, _) = run_once(&fleet);
    let mut times = Vec::new();
    let mut peak = 0;
    for _ in 0..scans {
        let (t, rss) = run_once(&fleet);
        times.push(t);
        peak = peak.max(rss);
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "fleet: 8 real sshd nodes on 127.0.0.110-117 (one is the nvidia-smi-hang fixture, 2 s limit)"
    );
    println!("scans: {scans} (after 1 warm-up of {:.0} ms)", ms(warm));
    println!(
        "wall per scan: median {:.0} ms, min {:.0} ms, max {:.0} ms",
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1])
    );
    println!("peak RSS of gpufleet: {:.1} MiB", peak as f64 / 1024.0);
    let inv = fleet.inventory.display().to_string();
    let out = fleet.gpufleet(&["snapshot", "-i", &inv, "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    println!("per node (one more scan): name, status, duration_ms");
    for n in doc["nodes"].as_array().unwrap() {
        println!(
            "  {:40} {:10} {}",
            n["name"].as_str().unwrap(),
            n["status"].as_str().unwrap(),
            n["duration_ms"]
        );
    }
}
