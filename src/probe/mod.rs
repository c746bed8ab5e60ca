//! Collection: the probe script and running it on this machine (local mode).
//!
//! architecture.md decision 1: one POSIX `sh` script, sent on stdin to `sh -s`, reads every fact
//! under a root prefix and runs nvidia-smi last under a per-call time limit. gpufleet itself
//! enforces the output cap and the per-node deadline; sections that arrived complete before the
//! deadline are kept. Locally the script runs in its own process group, killed as a group at the
//! deadline, so a hung child cannot keep the pipe open.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::model::{self, Code, NodeReport, Thresholds};

pub mod known_hosts;
pub mod scan;
pub mod ssh;

/// The probe script (protocol 1); the same text runs locally and over SSH.
pub const SCRIPT: &str = include_str!("probe.sh");

/// Most bytes of probe output read from one node: 1 MiB (architecture.md decision 1).
pub const OUTPUT_CAP: usize = 1 << 20;

/// How to probe.
#[derive(Debug, Clone)]
pub struct ProbeSettings {
    /// Root prefix every probed path is read under (`/` on a live node).
    pub root: PathBuf,
    /// Time limit of each nvidia-smi call, in whole seconds (the script passes it to `timeout`).
    pub nvidia_smi_timeout_secs: u64,
    /// Deadline for the whole probe of one node.
    pub deadline: Duration,
    /// Output cap in bytes.
    pub output_cap: usize,
}

impl Default for ProbeSettings {
    fn default() -> Self {
        ProbeSettings {
            root: PathBuf::from("/"),
            nvidia_smi_timeout_secs: 10,
            deadline: Duration::from_secs(60),
            output_cap: OUTPUT_CAP,
        }
    }
}

/// How a probe run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Output ended (the script exited).
    Completed,
    /// The per-node deadline passed; output read until then is kept.
    Deadline,
    /// More than the output cap arrived; reading stopped there.
    CapExceeded,
}

/// The raw result of one probe run.
#[derive(Debug, Clone)]
pub struct RawRun {
    pub boundary: String,
    pub output: Vec<u8>,
    pub end: RunEnd,
    pub duration: Duration,
}

/// A fresh random section boundary: `gpufleet-` and 32 hex digits (128 bits from the OS RNG).
pub fn new_boundary() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("gpufleet-{hex}")
}

/// Runs the probe on this machine with `sh`. Errors only when `sh` cannot be started.
pub async fn run_local(settings: &ProbeSettings) -> std::io::Result<RawRun> {
    let boundary = new_boundary();
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + settings.deadline;
    let mut child = tokio::process::Command::new("sh")
        .arg("-s")
        .arg("--")
        .arg(&boundary)
        .arg(&settings.root)
        .arg(settings.nvidia_smi_timeout_secs.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let pgid = child.id();
    if let Some(mut stdin) = child.stdin.take() {
        // The script is far smaller than a pipe buffer; a shell that exits early is not an error.
        let _ = stdin.write_all(SCRIPT.as_bytes()).await;
    }
    let mut output = Vec::new();
    let mut end = RunEnd::Completed;
    if let Some(mut stdout) = child.stdout.take() {
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match tokio::time::timeout_at(deadline, stdout.read(&mut chunk)).await {
                Err(_) => {
                    end = RunEnd::Deadline;
                    break;
                }
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => {
                    let room = settings.output_cap - output.len();
                    output.extend_from_slice(&chunk[..n.min(room)]);
                    if n > room {
                        end = RunEnd::CapExceeded;
                        break;
                    }
                }
            }
        }
    }
    if let Some(pid) = pgid {
        // The whole group: the shell and anything it started (a hung nvidia-smi, a watchdog).
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.wait().await;
    Ok(RawRun {
        boundary,
        output,
        end,
        duration: start.elapsed(),
    })
}

/// Turns one probe run into a node report.
///
/// `name` is the inventory name in fleet mode; `None` in local mode, where the node's
/// /proc/sys/kernel/hostname (under the root prefix) names it. `scanned_at` is RFC 3339.
pub fn report(
    name: Option<String>,
    run: &RawRun,
    thresholds: &Thresholds,
    scanned_at: String,
) -> NodeReport {
    let duration_ms = run.duration.as_millis() as u64;
    let fallback = || name.clone().unwrap_or_else(|| "localhost".to_string());
    if run.end == RunEnd::CapExceeded {
        return NodeReport::unreachable(
            fallback(),
            Code::ProbeOutputInvalid,
            format!("probe output exceeded the {} byte cap", OUTPUT_CAP),
            Vec::new(),
            scanned_at,
            duration_ms,
        );
    }
    let out = model::sections::parse(&run.output, &run.boundary);
    if out.meta("protocol").as_deref() != Some("1") {
        let why = if run.output.is_empty() {
            "the probe printed nothing".to_string()
        } else {
            format!(
                "the probe output has no protocol 1 header ({} bytes, {} sections)",
                run.output.len(),
                out.sections.len()
            )
        };
        return NodeReport::unreachable(
            fallback(),
            Code::ProbeOutputInvalid,
            why,
            Vec::new(),
            scanned_at,
            duration_ms,
        );
    }
    let mut facts = model::collect(&out);
    if run.end == RunEnd::Deadline {
        facts.unknowns.push(model::facts::Unknown {
            fact: "probe",
            why: format!(
                "the probe was stopped at the node deadline ({} ms); facts read before it are kept",
                duration_ms
            ),
        });
    }
    let assessment = model::assess(&facts, thresholds);
    let name = name
        .or_else(|| facts.hostname.clone())
        .unwrap_or_else(|| "localhost".to_string());
    NodeReport::from_facts(name, &facts, &assessment, scanned_at, duration_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeStatus;

    /// The raw probe output of the real H200 machine (docs/examples), through the whole model.
    #[test]
    fn real_h200_probe_output_is_ready() {
        let run = RawRun {
            boundary: "gpufleet-RAW".into(),
            output: include_bytes!("../../docs/examples/h200-probe-raw.txt").to_vec(),
            end: RunEnd::Completed,
            duration: Duration::from_millis(100),
        };
        let n = report(
            None,
            &run,
            &Thresholds::default(),
            "2026-11-30T10:37:23Z".into(),
        );
        assert_eq!(n.status, NodeStatus::Ready, "{:#?}", n.reasons);
        assert!(n.reasons.is_empty(), "{:#?}", n.reasons);
        let d = n.driver.as_ref().unwrap();
        assert_eq!(d.version.as_deref(), Some("580.159.04"));
        assert_eq!(n.gpu_summary().as_deref(), Some("1x NVIDIA H200"));
        assert_eq!(n.min_compute_capability().as_deref(), Some("9.0"));
        assert_eq!(n.dma_buf.as_ref().unwrap().kernel_support, Some(true));
    }

    #[test]
    fn boundaries_are_fresh_and_long() {
        let (a, b) = (new_boundary(), new_boundary());
        assert_ne!(a, b);
        assert_eq!(a.len(), "gpufleet-".len() + 32);
    }

    #[test]
    fn empty_or_foreign_output_is_probe_output_invalid() {
        for output in [&b""[..], b"Welcome to node7\nlast login: never\n"] {
            let run = RawRun {
                boundary: new_boundary(),
                output: output.to_vec(),
                end: RunEnd::Completed,
                duration: Duration::ZERO,
            };
            let n = report(
                Some("n1".into()),
                &run,
                &Thresholds::default(),
                String::new(),
            );
            assert_eq!(n.status, NodeStatus::Unreachable);
            assert_eq!(n.reasons[0].code, Code::ProbeOutputInvalid);
            assert_eq!(n.name, "n1");
        }
    }
}
