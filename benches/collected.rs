//! Merging collected snapshots at 1,000,000 nodes (issue 21, item 3): `snapshot --from`,
//! `tui --from` and `policy --against` read every file and merge the reports by node name.
//! Targets: ≤ 10 s on 2 cores and ≤ 2× the input's size in memory.
//!
//!     cargo bench --bench collected                 # 1,000,000 nodes
//!     NODES=100000 cargo bench --bench collected    # another size
//!
//! The input is what an `srun` collection writes: one JSON Lines file of `node` records, every
//! node an unreachable report with its facts left out (137 bytes: the input is as small and
//! the per-node overhead as large as it gets), plus a second file holding 1 % of the nodes
//! again, newer (a DaemonSet's: a finding each, "hold different reports"). Measured, in this process: the merge
//! ([`gpufleet::snapshot::collected::load_with`]) and then the reports taken one at a time
//! (`Loaded::into_collected`, as a streaming caller does), wall time and the peak RSS added
//! (VmHWM reset through /proc/self/clear_refs once the input is written, less VmRSS then),
//! against the input's size. Then the command end to end (`gpufleet snapshot --from FILES
//! --format jsonl > /dev/null`, the release binary under GNU time), which streams the reports
//! to the output one at a time: its time and peak RSS. `bench/collected.sh` runs the command
//! alone on 2 cores for every streaming format.
//!
//! Measured (bench/README.md, "Collected snapshots"): see there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::time::Instant;

use gpufleet::snapshot::collected;

fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// One JSON Lines node record, as small as a report gets: an unreachable node, the facts left
/// out (they read as `null`), 137 bytes — the shape of the 137 MB for 1,000,000 nodes.
fn record(name: &str, at: &str) -> String {
    format!(
        "{{\"type\":\"node\",\"data\":{{\"name\":\"{name}\",\"status\":\"unreachable\",\"scanned_at\":\"{at}\",\"duration_ms\":10000,\"reasons\":[]}}}}\n"
    )
}

fn main() {
    let n: usize = std::env::var("NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let srun = dir.path().join("srun.jsonl");
    let daemonset = dir.path().join("daemonset.jsonl");
    {
        let mut a = std::io::BufWriter::new(std::fs::File::create(&srun).unwrap());
        let mut b = std::io::BufWriter::new(std::fs::File::create(&daemonset).unwrap());
        for i in 0..n {
            let name = format!("gpu{i:07}");
            a.write_all(record(&name, "2026-12-01T10:00:00Z").as_bytes())
                .unwrap();
            if i % 100 == 0 {
                b.write_all(record(&name, "2026-12-01T11:00:00Z").as_bytes())
                    .unwrap();
            }
        }
        a.flush().unwrap();
        b.flush().unwrap();
    }
    let files = vec![srun.clone(), daemonset.clone()];
    let input: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    println!(
        "{n} nodes, input {:.1} MB ({} bytes a node)",
        input as f64 / 1e6,
        input / n as u64
    );

    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let base = status_kib("VmRSS:");
    let start = Instant::now();
    let loaded = collected::load_with(&files, &collected::Options::default()).unwrap();
    let merged = start.elapsed();
    let nodes = loaded.len();
    let warnings = loaded.warnings().len();
    let mut taken = 0usize;
    for c in loaded.into_collected() {
        taken += usize::from(!c.report.name.is_empty());
    }
    let total = start.elapsed();
    let peak = (status_kib("VmHWM:").saturating_sub(base)) * 1024;
    assert_eq!((nodes, taken), (n, n));
    println!(
        "merge {:.2} s, merge + every report taken {:.2} s; peak RSS added {:.1} MB = {:.2}x the input; {warnings} findings",
        merged.as_secs_f64(),
        total.as_secs_f64(),
        peak as f64 / 1e6,
        peak as f64 / input as f64
    );

    let time = ["/usr/bin/time"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(time) = time else {
        println!("(no GNU time: the end-to-end run is skipped)");
        return;
    };
    let start = Instant::now();
    let out = std::process::Command::new(time)
        .args(["-f", "%M"])
        .arg(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "--format", "jsonl", "--from"])
        .args(&files)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    let kib: u64 = err
        .lines()
        .rev()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or(0);
    println!(
        "gpufleet snapshot --from (end to end): {:.2} s, peak RSS {:.1} MB, exit {:?}",
        took.as_secs_f64(),
        kib as f64 * 1024.0 / 1e6,
        out.status.code()
    );
}
