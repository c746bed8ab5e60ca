//! The gates a re-probed node must pass before it is uncordoned (pure): those read from the
//! re-probe's report, and the `nccl-dmabuf` gate's plan and verdict (its test is run by the
//! executor).

use super::{Step, next_boot_line};
use crate::config::{Gate, Recipe, UpgradeConfig};
use crate::inventory::Node;
use crate::model::Flavor;
use crate::model::report::{NextBootDriver, NodeReport};
use crate::model::{Code, Severity};

/// Gate results for a re-probed node: the gates that failed, each with why in words
/// (`no-peermem: nvidia-peermem is loaded and configured at boot`).
pub fn check_gates(report: &NodeReport, gates: &[Gate]) -> Vec<String> {
    let mut failed = Vec::new();
    let smi_codes = [
        Code::DriverLibraryMismatch,
        Code::NvidiaSmiFailed,
        Code::NvidiaSmiTimeout,
        Code::GpuNotInitialized,
    ];
    for g in gates {
        let why = match g {
            Gate::OpenModule => match report.driver.as_ref().map(|d| d.flavor) {
                Some(Flavor::Open) => None,
                Some(Flavor::Proprietary) => {
                    Some("the proprietary kernel module is loaded, not the open one".into())
                }
                Some(Flavor::None) => Some("no NVIDIA kernel module is loaded".into()),
                Some(Flavor::Unknown) | None => {
                    Some("which NVIDIA kernel module is loaded is unknown".into())
                }
            },
            Gate::NoPeermem => {
                let p = report.peermem.as_ref();
                match (p.and_then(|p| p.loaded), p.and_then(|p| p.configured)) {
                    (Some(false), Some(false)) => None,
                    (Some(true), Some(true)) => {
                        Some("nvidia-peermem is loaded and configured at boot".into())
                    }
                    (Some(true), Some(false)) => {
                        Some("nvidia-peermem is loaded (not configured at boot)".into())
                    }
                    (Some(true), None) => Some(
                        "nvidia-peermem is loaded (whether it is configured at boot is unknown)"
                            .into(),
                    ),
                    (Some(false), Some(true)) => {
                        Some("nvidia-peermem is configured at boot (not loaded now)".into())
                    }
                    (None, Some(true)) => Some(
                        "nvidia-peermem is configured at boot (whether it is loaded is unknown)"
                            .into(),
                    ),
                    _ => Some(
                        "whether nvidia-peermem is loaded or configured at boot is unknown".into(),
                    ),
                }
            }
            Gate::NvidiaSmiHealthy => {
                let bad: Vec<&str> = report
                    .reasons
                    .iter()
                    .filter(|r| smi_codes.contains(&r.code))
                    .map(|r| r.code.as_str())
                    .collect();
                let answered = report
                    .driver
                    .as_ref()
                    .and_then(|d| d.userspace_version.as_ref())
                    .is_some();
                if !bad.is_empty() {
                    Some(format!("nvidia-smi is not healthy: {}", bad.join(", ")))
                } else if !answered {
                    Some("nvidia-smi did not answer".into())
                } else {
                    None
                }
            }
            Gate::DmabufKernel => {
                // Only where GPUDirect RDMA applies: a node without an RDMA device or
                // nvidia-peermem is not failed for its kernel's DMA-BUF support.
                let no_rdma = report.reasons.iter().any(|r| r.code == Code::NoRdmaDevice);
                match report.dma_buf.as_ref().and_then(|d| d.kernel_support) {
                    _ if no_rdma => None,
                    Some(true) => None,
                    Some(false) => Some("the kernel has no DMA-BUF support".into()),
                    None => Some("whether the kernel supports DMA-BUF is unknown".into()),
                }
            }
            Gate::NextBootHasDriver => match report.next_boot_driver() {
                Some(NextBootDriver::Ok | NextBootDriver::NotApplicable) => None,
                Some(NextBootDriver::Missing) => Some(
                    next_boot_line(report)
                        .unwrap_or_else(|| "the next boot has no nvidia.ko".into()),
                ),
                None => Some("the next boot kernel or its nvidia.ko is unknown".into()),
            },
            Gate::NoErrors => {
                let errs: Vec<&str> = report
                    .reasons
                    .iter()
                    .filter(|r| r.severity == Severity::Error)
                    .map(|r| r.code.as_str())
                    .collect();
                (!errs.is_empty()).then(|| format!("error reasons: {}", errs.join(", ")))
            }
            // Run by the executor after these pass: it needs the canary's test output.
            Gate::NcclDmabuf => None,
        };
        if let Some(w) = why {
            failed.push(format!("{}: {w}", g.name()));
        }
    }
    failed
}

/// The `nccl-dmabuf` gate's test as planned for a canary ([`Step::Gates`]): the recipe's
/// `nccl_test` with `{node}` and `{root}` replaced (shell-quoted, as in recipe steps).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NcclTest {
    /// The operator's command line, expanded.
    pub run: String,
    /// How long it may run (`[upgrade] step_timeout`), in seconds; past it the gate fails.
    pub timeout_s: u64,
}

/// The most bytes of the test's output read (stdout and stderr together): a 16-rank
/// all_reduce_perf at NCCL_DEBUG=INFO prints a few MiB.
pub const NCCL_OUTPUT_CAP: usize = 64 << 20;

impl NcclTest {
    /// What is sent to the canary over SSH, exactly: `NCCL_DEBUG=INFO` exported, then the
    /// operator's command line (run by the login user's shell, never under sudo).
    pub fn wire(&self) -> String {
        format!("NCCL_DEBUG=INFO; export NCCL_DEBUG; {}", self.run)
    }
}

/// The gates step of `node` ([`Step::Gates`]): `[upgrade] gates`; on a canary with
/// `nccl-dmabuf` among them, the recipe's `nccl_test` expanded by `expand` (an `Err` when the
/// recipe has none: refused before anything runs). `nccl-dmabuf` is dropped from a non-canary
/// node's gates: the NCCL proof is the canaries' (docs/domain.md, "The nccl-dmabuf gate").
pub fn plan_gates(
    node: &Node,
    recipe: &Recipe,
    cfg: &UpgradeConfig,
    expand: impl Fn(&str) -> Result<String, String>,
) -> Result<Step, String> {
    let wants = cfg.gates.contains(&Gate::NcclDmabuf);
    let mut gates = cfg.gates.clone();
    let nccl = match (&recipe.nccl_test, wants && node.canary) {
        (_, false) => {
            gates.retain(|g| *g != Gate::NcclDmabuf);
            None
        }
        (Some(run), true) => Some(NcclTest {
            run: expand(run)?,
            timeout_s: cfg.step_timeout,
        }),
        (None, true) => {
            return Err(format!(
                "{}: [upgrade] gates has nccl-dmabuf, but the node's recipe sets no `nccl_test` (the command whose NCCL log proves DMA-BUF on a canary)",
                crate::model::text::terminal_safe(&node.name)
            ));
        }
    };
    Ok(Step::Gates { gates, nccl })
}

/// The `nccl-dmabuf` verdict on `node` from the test's `output` (its NCCL_DEBUG=INFO log),
/// how the command ended (`exit`: `None` for exit status 0, else in words), and `report`, the
/// node's fresh re-probe (whether nvidia_peermem is loaded, [`crate::nccl::Peermem`]). The
/// node is the log's host named as its inventory name or SSH host (or their first label).
/// `Ok`: DMA-BUF, with why; `Err`: why not (exit status, not an NCCL log, this canary not in
/// the log, nvidia-peermem or no GDR with the evidence lines, gdr-mechanism-unknown with why).
pub fn nccl_verdict(
    output: &[u8],
    exit: Option<String>,
    node: &Node,
    report: &NodeReport,
) -> Result<String, String> {
    use crate::nccl::{Logs, Mechanism, Peermem};
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    let file = "nccl_test output";
    let mut logs = Logs::default();
    let read = logs.read(file, output);
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_string();
    let names = [node.name.as_str(), node.host.as_str()];
    let is_node = |h: &str| {
        names
            .iter()
            .any(|n| h.eq_ignore_ascii_case(n) || short(h).eq_ignore_ascii_case(&short(n)))
    };
    let source = format!(
        "the re-probe of {} (scanned_at {})",
        node.name, report.scanned_at
    );
    let loaded = report.peermem.as_ref().and_then(|p| p.loaded);
    let verdicts = logs.report(&|h| {
        if is_node(h) {
            Peermem::Report {
                loaded,
                source: source.clone(),
            }
        } else {
            Peermem::NotInSnapshot
        }
    });
    if let Some(e) = exit {
        return Err(format!("the test command {e}"));
    }
    if let Err(e) = read {
        return Err(format!(
            "the test's output is not a readable NCCL log: {}",
            safe(&e)
        ));
    }
    let mine: Vec<_> = verdicts
        .hosts
        .iter()
        .filter(|h| !h.from_file && is_node(&h.host))
        .collect();
    let Some(h) = mine.first() else {
        let seen: Vec<String> = verdicts.hosts.iter().map(|h| safe(&h.host)).collect();
        return Err(format!(
            "this canary is not a host of the NCCL log (it names {}; NCCL names a host by its hostname: the inventory name or host must be it, or its first label)",
            if seen.is_empty() {
                "none".into()
            } else {
                seen.join(", ")
            }
        ));
    };
    let version = if h.nccl_version.is_empty() {
        "NCCL version unknown".to_string()
    } else {
        format!("NCCL {}", safe(&h.nccl_version.join(",")))
    };
    let head = format!(
        "{} on host {} ({version}): {}",
        h.gdr.word(),
        safe(&h.host),
        safe(&h.why)
    );
    match h.gdr {
        Mechanism::DmaBuf => Ok(head),
        Mechanism::Unknown => Err(head),
        Mechanism::Peermem | Mechanism::NoGdr => {
            let lines: Vec<String> = h
                .hcas
                .iter()
                .filter(|c| c.gdr == h.gdr)
                .flat_map(|c| &c.evidence)
                .chain(&h.evidence)
                .take(6)
                .map(|e| format!("line {}: {}", e.line, safe(e.text.trim())))
                .collect();
            Err(format!("{head}; evidence: {}", lines.join(" | ")))
        }
    }
}

/// The recipe's `driver_version` against the node's GPUs, before anything runs: `Err` naming
/// each GPU (index, name, bus id, architecture) whose architecture's last driver branch
/// (data/driver-branches.toml, the table of `driver-branch-drops-gpu`) is below the target's
/// branch, and that branch to install instead. GPUs whose model is not in the GPU tables, or a
/// node whose GPUs are unknown, are not refused here (their architecture is unknown; the
/// re-probe's `driver-branch-drops-gpu` and gates judge the node after the upgrade).
pub fn check_driver_version(
    node: &Node,
    report: &NodeReport,
    recipe: &Recipe,
) -> Result<(), String> {
    use crate::model::facts::{branches, gpudb};
    let Some(target) = recipe.driver_version.as_deref() else {
        return Ok(());
    };
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    let Some(branch) = branches::branch_of(target) else {
        return Err(format!(
            "{}: the recipe's driver_version {} is not a driver version",
            safe(&node.name),
            safe(target)
        ));
    };
    let mut dropped = Vec::new();
    let mut install: Option<u32> = None;
    for g in report.gpus.iter().flatten() {
        let Some(model) = g
            .pci_device_id
            .as_deref()
            .and_then(|id| u16::from_str_radix(id, 16).ok())
            .and_then(gpudb::by_device_id)
        else {
            continue;
        };
        let Some(last) = branches::last_branch(&model.architecture) else {
            continue;
        };
        if last.last_branch < branch {
            dropped.push(format!(
                "GPU {} {}{} is {}, whose last branch is {}",
                g.index,
                safe(g.name.as_deref().unwrap_or(&model.name)),
                g.bus_id
                    .as_deref()
                    .map(|b| format!(" at {}", safe(b)))
                    .unwrap_or_default(),
                model.architecture,
                last.last_branch
            ));
            install = Some(install.map_or(last.last_branch, |i| i.min(last.last_branch)));
        }
    }
    match install {
        None => Ok(()),
        Some(i) => Err(format!(
            "{}: the recipe's driver_version {} (branch {branch}) drops {}: {}; install the {i} branch on this node (data/driver-branches.toml, from {}); refused before anything runs",
            safe(&node.name),
            safe(target),
            if dropped.len() == 1 { "a GPU" } else { "GPUs" },
            dropped.join("; "),
            branches::source()
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::tests::{node, recipes, report};
    use super::super::{Mode, node_plan, plan};
    use super::*;
    use crate::model::NodeStatus;

    fn with_gpus(ids: &[&str]) -> NodeReport {
        let mut r = report("n1", NodeStatus::Migrate);
        r.gpus = Some(
            ids.iter()
                .enumerate()
                .map(|(i, id)| {
                    serde_json::from_value(serde_json::json!({
                        "index": i,
                        "name": null,
                        "bus_id": format!("0000:{:02x}:00.0", i + 0x17),
                        "pci_device_id": id,
                    }))
                    .unwrap()
                })
                .collect(),
        );
        r
    }

    fn recipe(target: Option<&str>) -> Recipe {
        Recipe {
            driver_version: target.map(str::to_string),
            ..recipes()["r"].clone()
        }
    }

    /// A 595 target on a node with a Tesla P100 (Pascal: last branch 580) is refused before
    /// anything is planned, naming the GPU and the branch to install; 580 and a recipe without
    /// `driver_version` plan; an H100 alone never blocks 595.
    #[test]
    fn a_driver_version_that_drops_a_gpu_is_refused_in_the_plan() {
        let cfg = UpgradeConfig::default();
        let n = node("n1", true);
        let r = with_gpus(&["2330", "15F8"]);
        let e = node_plan(&n, &r, &recipe(Some("595.71.03")), &cfg, "r-1", &[]).unwrap_err();
        assert_eq!(
            e,
            "n1: the recipe's driver_version 595.71.03 (branch 595) drops a GPU: GPU 1 Tesla P100 PCIe 16GB at 0000:18:00.0 is Pascal, whose last branch is 580; install the 580 branch on this node (data/driver-branches.toml, from https://forums.developer.nvidia.com/t/unix-graphics-feature-deprecation-schedule/60588); refused before anything runs"
        );
        for ok in [Some("580.95.05"), Some("580"), None] {
            node_plan(&n, &r, &recipe(ok), &cfg, "r-1", &[]).unwrap();
        }
        node_plan(
            &n,
            &with_gpus(&["2330"]),
            &recipe(Some("595")),
            &cfg,
            "r-1",
            &[],
        )
        .unwrap();
        // A GPU the tables do not know (architecture unknown) is not refused here.
        node_plan(
            &n,
            &with_gpus(&["FFFF"]),
            &recipe(Some("595")),
            &cfg,
            "r-1",
            &[],
        )
        .unwrap();
        // The whole fleet's plan says it once per node, as every other refusal.
        let e = plan(
            Mode::Canary,
            &[(n.clone(), r.clone())],
            &[],
            &[],
            &cfg,
            &BTreeMap::from([("r".to_string(), recipe(Some("595")))]),
            "r-1",
        )
        .unwrap_err();
        assert!(e.starts_with("1 node cannot be planned"), "{e}");
        assert!(e.contains("GPU 1 Tesla P100 PCIe 16GB"), "{e}");
    }

    /// The gate is planned on canaries only, with the recipe's test expanded; a canary whose
    /// recipe has no `nccl_test` is refused; the dry run shows the exact command.
    #[test]
    fn the_nccl_gate_is_planned_on_canaries_with_the_recipes_test() {
        let cfg = UpgradeConfig {
            gates: vec![Gate::OpenModule, Gate::NcclDmabuf],
            ..UpgradeConfig::default()
        };
        let r = report("n1", NodeStatus::Migrate);
        let mut rec = recipe(None);
        let e = node_plan(&node("n1", true), &r, &rec, &cfg, "r-1", &[]).unwrap_err();
        assert!(e.contains("sets no `nccl_test`"), "{e}");
        // A wave node does not run it (and needs no test).
        let p = node_plan(&node("n2", false), &r, &rec, &cfg, "r-1", &[]).unwrap();
        let gates = p
            .steps
            .iter()
            .find(|s| matches!(s, Step::Gates { .. }))
            .unwrap();
        assert_eq!(
            gates,
            &Step::Gates {
                gates: vec![Gate::OpenModule],
                nccl: None
            }
        );
        rec.nccl_test = Some("nccl-check {node} -x NCCL_DEBUG".into());
        let p = node_plan(&node("n1", true), &r, &rec, &cfg, "r-1", &[]).unwrap();
        let gates = p
            .steps
            .iter()
            .find(|s| matches!(s, Step::Gates { .. }))
            .unwrap();
        let Step::Gates { nccl: Some(t), .. } = gates else {
            panic!("{gates:?}")
        };
        assert_eq!(t.run, "nccl-check n1 -x NCCL_DEBUG");
        assert_eq!(t.timeout_s, cfg.step_timeout);
        // The node's name reaches the test's command line: checked as for recipe steps.
        let e = node_plan(&node("-o=x", true), &r, &rec, &cfg, "r-1", &[]).unwrap_err();
        assert!(e.contains("(the recipe's {node}) is"), "{e}");
        let wire = gates.wire("r-1", 0, "op", false);
        assert_eq!(
            wire[0].1,
            "NCCL_DEBUG=INFO; export NCCL_DEBUG; nccl-check n1 -x NCCL_DEBUG"
        );
    }

    fn log(host: &str, fixture: &str) -> Vec<u8> {
        let path = format!(
            "{}/tests/fixtures/nccl/{fixture}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(path).unwrap();
        let first = text
            .lines()
            .find_map(|l| {
                l.split_once(':')
                    .map(|(h, _)| h.to_string())
                    .filter(|h| !h.starts_with('#'))
            })
            .unwrap();
        text.replace(&format!("{first}:"), &format!("{host}:"))
            .into_bytes()
    }

    /// The verdicts: DMA-BUF passes; nvidia-peermem fails with its evidence lines; GDRDMA
    /// without a plugin line passes only with the re-probe saying nvidia_peermem is not
    /// loaded (unknown when the probe does not know); a failed command, garbage and a log
    /// without this canary fail with why.
    #[test]
    fn nccl_verdicts_of_the_fixture_logs() {
        let n = node("n1", true);
        let mut r = report("n1", NodeStatus::Ready);
        let ok = nccl_verdict(&log("n1", "dmabuf-plugin.log"), None, &n, &r).unwrap();
        assert!(ok.starts_with("dma-buf on host n1 (NCCL "), "{ok}");
        let e = nccl_verdict(&log("n1", "peermem-plugin.log"), None, &n, &r).unwrap_err();
        assert!(e.starts_with("nvidia-peermem on host n1"), "{e}");
        assert!(e.contains("evidence: line "), "{e}");
        assert!(e.contains("(nvidia-peermem) enabled"), "{e}");
        let e = nccl_verdict(&log("n1", "gdrdma-no-plugin.log"), None, &n, &r).unwrap_err();
        assert!(e.starts_with("gdr-mechanism-unknown on host n1"), "{e}");
        r.peermem = Some(crate::model::report::PeermemJson {
            loaded: Some(false),
            configured: Some(false),
            registered: None,
        });
        let ok = nccl_verdict(&log("n1", "gdrdma-no-plugin.log"), None, &n, &r).unwrap();
        assert!(ok.starts_with("dma-buf on host n1"), "{ok}");
        // The host is matched by its first label too.
        let ok = nccl_verdict(&log("n1.cluster", "dmabuf-plugin.log"), None, &n, &r).unwrap();
        assert!(ok.starts_with("dma-buf on host n1.cluster"), "{ok}");
        let e = nccl_verdict(&log("other", "dmabuf-plugin.log"), None, &n, &r).unwrap_err();
        assert!(
            e.starts_with("this canary is not a host of the NCCL log (it names "),
            "{e}"
        );
        let e = nccl_verdict(b"\x1b]0;x\x07 garbage\n", None, &n, &r).unwrap_err();
        assert!(
            e.starts_with("the test's output is not a readable NCCL log: no NCCL line"),
            "{e}"
        );
        let e = nccl_verdict(
            &log("n1", "dmabuf-plugin.log"),
            Some("exit status 1".into()),
            &n,
            &r,
        )
        .unwrap_err();
        assert_eq!(e, "the test command exit status 1");
    }
}
