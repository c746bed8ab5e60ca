//! The per-node report and the snapshot document (design/domain.md "Snapshot JSON",
//! schema_version 2). Unknown values are `null`; an unreachable node has `name`, `status`,
//! `reasons` and every fact `null`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::assess::{Assessment, Code, NodeStatus, Reason};
use super::driver::Flavor;
use super::facts::{Evidence, Facts, SmiOutcome};
use super::smi::SmiFailure;

pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelJson {
    pub release: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsJson {
    pub pretty_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverJson {
    /// `open`, `proprietary`, `none` or `unknown`.
    pub flavor: Flavor,
    /// Version of the loaded kernel module.
    pub version: Option<String>,
    pub arch: Option<String>,
    /// Version of the userspace driver (NVML): from nvidia-smi's driver_version, or the NVML
    /// version in a mismatch message.
    pub userspace_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuJson {
    pub index: u32,
    pub name: Option<String>,
    /// Lower-case `dddd:bb:dd.f`.
    pub bus_id: Option<String>,
    pub uuid: Option<String>,
    /// Upper-case hex, 4 digits (`20B2`).
    pub pci_device_id: Option<String>,
    /// "major.minor".
    pub compute_capability: Option<String>,
    pub open_capable: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleJson {
    pub name: String,
    pub state: super::modules::ModuleState,
    pub taint: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DmaBufJson {
    pub kernel_support: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeermemJson {
    pub loaded: Option<bool>,
    pub configured: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaintJson {
    /// Bit 0 (P) of /proc/sys/kernel/tainted.
    pub proprietary: Option<bool>,
    pub value: Option<u64>,
}

/// One node's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReport {
    pub name: String,
    pub status: NodeStatus,
    /// RFC 3339, UTC, seconds.
    pub scanned_at: String,
    /// Wall time of the probe, in milliseconds.
    pub duration_ms: u64,
    pub reasons: Vec<Reason>,
    pub kernel: Option<KernelJson>,
    pub os: Option<OsJson>,
    pub driver: Option<DriverJson>,
    pub gpus: Option<Vec<GpuJson>>,
    /// The NVIDIA, RDMA core and mlx5 modules from /proc/modules (not every module).
    pub modules: Option<Vec<ModuleJson>>,
    pub dma_buf: Option<DmaBufJson>,
    pub peermem: Option<PeermemJson>,
    pub taint: Option<TaintJson>,
}

/// Modules worth showing: the NVIDIA ones and those GPUDirect RDMA goes through.
pub fn is_relevant_module(name: &str) -> bool {
    name.starts_with("nvidia")
        || name.starts_with("mlx5_")
        || matches!(name, "ib_core" | "ib_uverbs" | "gdrdrv")
}

impl NodeReport {
    /// The report of a node whose probe ran.
    pub fn from_facts(
        name: String,
        facts: &Facts,
        a: &Assessment,
        scanned_at: String,
        duration_ms: u64,
    ) -> Self {
        let userspace_version = match &facts.smi {
            SmiOutcome::Answered { gpus, .. } => gpus.iter().find_map(|g| g.driver_version.clone()),
            SmiOutcome::Failed {
                failure: SmiFailure::Mismatch { nvml_version },
                ..
            } => nvml_version.clone(),
            _ => None,
        };
        let driver = facts.driver.as_ref().map(|d| DriverJson {
            flavor: d.flavor,
            version: d.version.clone(),
            arch: d.arch.clone(),
            userspace_version: userspace_version.clone(),
        });
        NodeReport {
            name,
            status: a.status,
            scanned_at,
            duration_ms,
            reasons: a.reasons.clone(),
            kernel: Some(KernelJson {
                release: facts.kernel_release.clone(),
            }),
            os: Some(OsJson {
                pretty_name: facts.os_pretty_name.clone(),
            }),
            driver,
            gpus: Some(
                facts
                    .gpus
                    .iter()
                    .zip(&a.open_capable)
                    .map(|(g, oc)| GpuJson {
                        index: g.index,
                        name: g.name.clone(),
                        bus_id: g.bus_id.clone(),
                        uuid: g.uuid.clone(),
                        pci_device_id: g.pci_device_id.map(|id| format!("{id:04X}")),
                        compute_capability: g.compute_capability.clone(),
                        open_capable: *oc,
                    })
                    .collect(),
            ),
            modules: facts.modules.as_ref().map(|mods| {
                mods.iter()
                    .filter(|m| is_relevant_module(&m.name))
                    .map(|m| ModuleJson {
                        name: m.name.clone(),
                        state: m.state,
                        taint: m.taint.clone(),
                    })
                    .collect()
            }),
            dma_buf: Some(DmaBufJson {
                kernel_support: a.dma_buf,
            }),
            peermem: Some(PeermemJson {
                loaded: facts.peermem_loaded,
                configured: facts.peermem_configured,
            }),
            taint: Some(TaintJson {
                proprietary: facts.taint.map(|v| v & 1 == 1),
                value: facts.taint,
            }),
        }
    }

    /// The report of a node the scan could not run on: one `unreachable` reason, facts `null`.
    pub fn unreachable(
        name: String,
        code: Code,
        message: String,
        evidence: Vec<Evidence>,
        scanned_at: String,
        duration_ms: u64,
    ) -> Self {
        NodeReport {
            name,
            status: NodeStatus::Unreachable,
            scanned_at,
            duration_ms,
            reasons: vec![Reason::new(code, message, evidence)],
            kernel: None,
            os: None,
            driver: None,
            gpus: None,
            modules: None,
            dma_buf: None,
            peermem: None,
            taint: None,
        }
    }

    /// "8x NVIDIA A100-SXM4-80GB", "4x A, 4x B", "" for none, `None` when unknown.
    pub fn gpu_summary(&self) -> Option<String> {
        let gpus = self.gpus.as_ref()?;
        let mut groups: Vec<(String, usize)> = Vec::new();
        for g in gpus {
            let name = g.name.clone().unwrap_or_else(|| "unknown GPU".into());
            match groups.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => *c += 1,
                None => groups.push((name, 1)),
            }
        }
        Some(
            groups
                .iter()
                .map(|(n, c)| format!("{c}x {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        )
    }

    /// The lowest compute capability among the GPUs, "major.minor".
    pub fn min_compute_capability(&self) -> Option<String> {
        self.gpus
            .as_ref()?
            .iter()
            .filter_map(|g| {
                let s = g.compute_capability.as_deref()?;
                Some((s.parse::<super::assess::MajorMinor>().ok()?, s))
            })
            .min_by_key(|(mm, _)| *mm)
            .map(|(_, s)| s.to_string())
    }
}

/// Node counts per status; every status is present.
pub fn summary(nodes: &[NodeReport]) -> BTreeMap<&'static str, usize> {
    let mut m: BTreeMap<&'static str, usize> =
        NodeStatus::ALL.iter().map(|s| (s.as_str(), 0)).collect();
    for n in nodes {
        *m.entry(n.status.as_str()).or_default() += 1;
    }
    m
}

/// The whole snapshot document.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub schema_version: u32,
    pub generated_at: String,
    pub tool_version: &'static str,
    pub nodes: Vec<NodeReport>,
    pub summary: BTreeMap<&'static str, usize>,
}

impl Snapshot {
    pub fn new(generated_at: String, nodes: Vec<NodeReport>) -> Self {
        Snapshot {
            schema_version: SCHEMA_VERSION,
            generated_at,
            tool_version: env!("CARGO_PKG_VERSION"),
            summary: summary(&nodes),
            nodes,
        }
    }
}
