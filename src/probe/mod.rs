//! Collection: the probe script and running it on this machine (local mode).
//!
//! docs/architecture.md decision 1: one POSIX `sh` script, sent on stdin to `sh -s`, reads every fact
//! under a root prefix and runs nvidia-smi last under a per-call time limit. gpufleet itself
//! enforces the output cap and the per-node deadline; sections that arrived complete before the
//! deadline or the cap are kept (the cut one is named in `probe-incomplete`). Locally the script runs in its own process group, killed as a group at the
//! deadline, so a hung child cannot keep the pipe open.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::model::{self, Code, NodeReport, Thresholds};

pub mod endpoint;
pub mod known_hosts;
pub mod pace;
pub mod proxy;
pub mod scan;
pub mod ssh;

/// The probe script (protocol 2); the same text runs locally and over SSH.
pub const SCRIPT: &str = include_str!("probe.sh");

/// The probe's protocol version: the `protocol` line of its `meta probe` section.
pub const PROTOCOL: &str = "2";

/// The command that runs the probe, locally and on a node: the script and its parameters come
/// on stdin ([`probe_stdin`]), so the boundary never appears in any argv or environment there.
pub const COMMAND: &str = "sh -s";

/// What the probe's `sh -s` reads: a header of shell assignments (boundary `B`, root prefix `R`,
/// nvidia-smi limit `T` and node deadline `D`, both in whole seconds, kernel log lines `L`) and
/// then the script. Plain assignments are not exported: no command the script runs is given
/// them.
pub fn probe_stdin(boundary: &str, root: &str, settings: &ProbeSettings) -> Vec<u8> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let root = if root == "/" { "" } else { root };
    let deadline_secs = settings.deadline.as_millis().div_ceil(1000).max(1);
    let mut out = format!(
        "B={} R={} T={} D={} L={}\n",
        quote(boundary),
        quote(root),
        settings.nvidia_smi_timeout_secs,
        deadline_secs,
        settings.kernel_log_lines
    )
    .into_bytes();
    out.extend_from_slice(SCRIPT.as_bytes());
    out
}

/// Most bytes of probe output read from one node: 1 MiB (docs/architecture.md decision 1).
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
    /// Kernel log lines kept (the last matching ones).
    pub kernel_log_lines: u64,
}

impl Default for ProbeSettings {
    fn default() -> Self {
        ProbeSettings {
            root: PathBuf::from("/"),
            nvidia_smi_timeout_secs: 10,
            deadline: Duration::from_secs(60),
            output_cap: OUTPUT_CAP,
            kernel_log_lines: 200,
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
    /// More than the output cap arrived (stdout and stderr together); reading stopped there. The
    /// sections before the cut are kept; the cut one and the ones after it are unknown.
    CapExceeded,
    /// The connection dropped before the command's exit was reported.
    ConnectionClosed,
}

/// The raw result of one probe run.
#[derive(Debug, Clone)]
pub struct RawRun {
    pub boundary: String,
    pub output: Vec<u8>,
    pub end: RunEnd,
    pub duration: Duration,
    /// How the probe process ended, when known: `exit status 2`, `killed by signal KILL`.
    pub exit: Option<String>,
}

/// A fresh random section boundary: `gpufleet-` and 32 hex digits (128 bits from the OS RNG).
#[allow(
    clippy::expect_used,
    reason = "a boundary that is not random would let node text forge sections: never go on without one"
)]
pub fn new_boundary() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("gpufleet-{hex}")
}

/// Runs the probe on this machine with `sh`. Errors only when `sh` cannot be started.
pub async fn run_local(settings: &ProbeSettings) -> std::io::Result<RawRun> {
    run_local_cancellable(settings, std::future::pending())
        .await?
        .ok_or_else(|| std::io::Error::other("the local probe was cancelled"))
}

/// [`run_local`] that stops when `cancel` completes (Ctrl-C): the probe's process tree is
/// killed and `Ok(None)` returned.
pub async fn run_local_cancellable(
    settings: &ProbeSettings,
    cancel: impl std::future::Future<Output = ()>,
) -> std::io::Result<Option<RawRun>> {
    let mut cancel = std::pin::pin!(cancel);
    let mut cancelled = false;
    let boundary = new_boundary();
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + settings.deadline;
    let root = settings.root.to_string_lossy();
    let stdin = probe_stdin(&boundary, &root, settings);
    let mut child = tokio::process::Command::new("sh")
        .arg("-s")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    // Whatever ends this function (the deadline, Ctrl-C, or the future dropped when a TUI scan
    // is cancelled or the TUI quits), the probe's whole process tree is killed.
    let mut tree = TreeGuard(child.id());
    let stdin_bytes = stdin;
    if let Some(mut stdin) = child.stdin.take() {
        // The script is far smaller than a pipe buffer; a shell that exits early is not an error.
        let _ = stdin.write_all(&stdin_bytes).await;
    }
    let mut output = Vec::new();
    let mut end = RunEnd::Completed;
    if let Some(mut stdout) = child.stdout.take() {
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let read = tokio::select! {
                r = tokio::time::timeout_at(deadline, stdout.read(&mut chunk)) => r,
                _ = &mut cancel => {
                    cancelled = true;
                    break;
                }
            };
            match read {
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
    tree.kill();
    let status = child.wait().await.ok();
    if cancelled {
        return Ok(None);
    }
    Ok(Some(RawRun {
        boundary,
        output,
        end,
        duration: start.elapsed(),
        exit: status.and_then(|st| describe_exit(st.code(), st.signal())),
    }))
}

/// Kills a local probe's process tree ([`kill_tree`]) when dropped.
struct TreeGuard(Option<u32>);

impl TreeGuard {
    /// Kills the tree once; later calls (and the drop) do nothing, so a pid reused after the
    /// child was reaped is never signalled.
    fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            kill_tree(pid);
        }
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How a process ended, in words: `exit status 2`, `killed by signal KILL` (`None` for 0).
pub fn describe_exit(code: Option<i32>, signal: Option<i32>) -> Option<String> {
    match (code, signal) {
        (Some(0), _) => None,
        (Some(c), _) => Some(format!("exit status {c}")),
        (None, Some(sig)) => Some(format!(
            "killed by signal {}",
            nix::sys::signal::Signal::try_from(sig).map_or_else(
                |_| sig.to_string(),
                |s| s.as_str().trim_start_matches("SIG").to_string()
            )
        )),
        (None, None) => None,
    }
}

/// Kills process `pid`, its process group, and every descendant of it: `timeout` puts
/// nvidia-smi in a process group of its own, which a group kill alone would miss. Descendants
/// are found through /proc/<pid>/stat (parent ids).
pub fn kill_tree(pid: u32) {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::Pid;
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|s| s.parse::<u32>().ok());
            if let Some(pp) = ppid {
                parent_of.push((p, pp));
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
    for p in tree {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
    }
}

/// The output of `run` up to its last line end when reading stopped early (the deadline, the
/// cap, a dropped connection): a header or end line cut in the middle would name a section that
/// is not the one cut (`file /proc/mod`) or end it with a status the probe never wrote.
fn whole_lines(run: &RawRun) -> &[u8] {
    if run.end == RunEnd::Completed {
        return &run.output;
    }
    let keep = run
        .output
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    &run.output[..keep]
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
    let mut out = model::parse::sections::parse(whole_lines(run), &run.boundary);
    if run.end == RunEnd::CapExceeded {
        out.output_cap = Some(OUTPUT_CAP);
    }
    if out.meta("protocol").as_deref() != Some(PROTOCOL) {
        let why = if run.end == RunEnd::CapExceeded {
            format!(
                "probe output exceeded the {OUTPUT_CAP} byte cap before the probe's protocol {PROTOCOL} header"
            )
        } else if run.output.is_empty() && run.end == RunEnd::Deadline {
            format!(
                "the node deadline passed ({} ms) before the probe printed anything (a hung login script, or a node too loaded to start sh)",
                duration_ms
            )
        } else if run.output.is_empty() && run.end == RunEnd::ConnectionClosed {
            "the connection closed before the probe printed anything".to_string()
        } else if run.output.is_empty() {
            format!(
                "the probe printed nothing{} (is `sh` the node's shell, or does a forced command run instead?)",
                run.exit
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            )
        } else {
            let first = String::from_utf8_lossy(&run.output);
            let first = first.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let first: String = first.chars().take(120).collect();
            // Quoted, not escaped: the output escapes it once (Debug here doubled it on screen).
            format!(
                "the probe output has no protocol {PROTOCOL} header ({} bytes, {} sections); the node printed: \"{first}\"",
                run.output.len(),
                out.sections.len(),
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
    if let Some(cut) = &mut facts.incomplete {
        cut.why = match run.end {
            RunEnd::Deadline => format!("the node deadline passed after {duration_ms} ms"),
            RunEnd::ConnectionClosed => "the connection closed".to_string(),
            // The sections before the cut are kept; the cut one is named by `last_section`.
            RunEnd::CapExceeded => format!(
                "its output (stdout and stderr together) reached gpufleet's {OUTPUT_CAP}-byte output cap; reading stopped there"
            ),
            RunEnd::Completed => match &run.exit {
                Some(e) => format!("end of output: the probe ended ({e})"),
                None => "end of output".to_string(),
            },
        };
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
            exit: None,
        };
        let n = report(
            None,
            &run,
            &Thresholds::default(),
            "2026-11-30T10:37:23Z".into(),
        );
        assert_eq!(n.status, NodeStatus::Ready, "{:#?}", n.reasons);
        // No RDMA device on this machine: the one (info) reason; no schema-2 rule fires falsely
        // (no /lib/modules, no /lib/firmware/nvidia, BIOS boot, a kernel log without failures).
        // The recording (docs/examples/README.md) is of a probe before `nvidia-smi -q` was
        // read: the schema-3 facts from it are unknown, said as such, and nothing else.
        let codes: Vec<&str> = n.reasons.iter().map(|r| r.code.as_str()).collect();
        assert_eq!(codes, ["no-rdma-device", "fact-unknown"]);
        assert!(
            n.reasons[1]
                .message
                .ends_with("unknown: nvidia-smi -q: not in the probe output"),
            "{}",
            n.reasons[1].message
        );
        assert_eq!(
            n.next_boot_driver(),
            Some(crate::model::report::NextBootDriver::NotApplicable)
        );
        let sb = n.secure_boot.as_ref().unwrap();
        assert_eq!(sb.enabled, Some(false));
        assert_eq!(
            sb.signature_enforced,
            Some(true),
            "CONFIG_MODULE_SIG_FORCE=y"
        );
        assert_eq!(
            n.kernel_log
                .as_ref()
                .unwrap()
                .xid_counts
                .as_ref()
                .map(|x| x.len()),
            Some(0)
        );
        let d = n.driver.as_ref().unwrap();
        assert_eq!(d.version.as_deref(), Some("580.159.04"));
        assert_eq!(n.gpu_summary().as_deref(), Some("1x NVIDIA H200"));
        assert_eq!(n.min_compute_capability().as_deref(), Some("9.0"));
        assert_eq!(n.dma_buf.as_ref().unwrap().kernel_support, Some(true));
    }

    /// The real H200 output cut by the output cap inside /proc/modules (its whole lines kept,
    /// as the readers keep them): the sections before stay facts, the cut one and those after
    /// it are unknown by the cap, and the report names the cut section and the cap.
    #[test]
    fn output_cut_at_the_cap_keeps_the_sections_before_and_names_the_cut_one() {
        let raw = include_bytes!("../../docs/examples/h200-probe-raw.txt");
        let modules = b"gpufleet-RAW file /proc/modules\n";
        let start = raw
            .windows(modules.len())
            .position(|w| w == modules.as_slice())
            .unwrap();
        // A byte into the module list's first line, and half-way through a header line.
        for cut in [start + modules.len() + 10, start + 20] {
            let run = RawRun {
                boundary: "gpufleet-RAW".into(),
                output: raw[..cut].to_vec(),
                end: RunEnd::CapExceeded,
                duration: Duration::from_millis(100),
                exit: None,
            };
            let n = report(None, &run, &Thresholds::default(), String::new());
            assert_eq!(n.status, NodeStatus::Unknown, "{:#?}", n.reasons);
            // Read before the cut: the kernel, the host name, the loaded driver.
            assert_eq!(n.name, "vm");
            assert!(n.kernel.is_some());
            assert_eq!(
                n.driver.as_ref().and_then(|d| d.version.as_deref()),
                Some("580.159.04")
            );
            let said = |code: Code| {
                n.reasons
                    .iter()
                    .filter(|r| r.code == code)
                    .map(|r| r.message.clone())
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let cut_msg = said(Code::ProbeIncomplete);
            assert!(cut_msg.contains("1048576-byte output cap"), "{cut_msg}");
            let named = if cut > start + modules.len() {
                "after file /proc/modules (cut off)"
            } else {
                "after file /sys/module/nvidia/version:"
            };
            assert!(cut_msg.contains(named), "{cut_msg}");
            let unknown = said(Code::FactUnknown);
            assert!(
                unknown.contains("/proc/modules: cut off by gpufleet's 1048576-byte output cap")
                    || unknown.contains(
                        "/proc/modules: never arrived (cut by gpufleet's 1048576-byte output cap)"
                    ),
                "{unknown}"
            );
            // A section after the cut: never "absent", unknown by the cap.
            assert!(
                unknown.contains("/etc/modprobe.d: never arrived") && unknown.contains("cap"),
                "{unknown}"
            );
        }
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
                exit: None,
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

    /// What a node printed instead of the probe is quoted as it is and escaped once, by the
    /// output (before: `{:?}` escaped it here, and the table again: `\\u{1b}`).
    #[test]
    fn foreign_output_is_quoted_and_escaped_once_by_the_output() {
        let run = RawRun {
            boundary: new_boundary(),
            output: b"\x1b[2Jwelcome \\ home\n".to_vec(),
            end: RunEnd::Completed,
            duration: Duration::ZERO,
            exit: None,
        };
        let n = report(
            Some("n1".into()),
            &run,
            &Thresholds::default(),
            String::new(),
        );
        let m = &n.reasons[0].message;
        assert!(
            m.ends_with("the node printed: \"\x1b[2Jwelcome \\ home\""),
            "{m:?}"
        );
        assert!(
            crate::model::text::terminal_safe(m).ends_with(r#"printed: "\x1b[2Jwelcome \\ home""#),
            "{m:?}"
        );
    }
}
