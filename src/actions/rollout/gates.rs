//! The gates a re-probed node must pass before it is uncordoned (pure).

use super::next_boot_line;
use crate::config::Gate;
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
        };
        if let Some(w) = why {
            failed.push(format!("{}: {w}", g.name()));
        }
    }
    failed
}
