//! The verdict: one status and every reason that applies (pure: no I/O).
//!
//! Vocabulary, rules and precedence from docs/domain.md ("Verdict: status + reasons" and
//! "Rules"): unreachable > attention > blocked > migrate > no-driver > ready; advisories never
//! change the status; `blocked` and `migrate` reasons apply only to nodes with an NVIDIA module
//! or GPU; all reasons that apply are listed.

use procfs_core::sys::kernel::Version;

use crate::model::driver::Flavor;
use crate::model::facts::{Evidence, Facts, Gpu, SmiOutcome};
use crate::model::smi::SmiFailure;

mod codes;
pub mod diagnose;
#[cfg(test)]
mod tests;

pub use codes::*;

/// Why `dma_buf.kernel_support` has its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaBufBasis {
    /// `ib_umem_dmabuf_get` is in /proc/kallsyms.
    Kallsyms,
    /// Kernel release below the hard minimum.
    BelowMinimum,
    /// The kernel config has both options `=y`.
    Config,
    /// A config was read that lacks one of them.
    ConfigMissing,
    /// Release ≥ minimum but neither config nor symbol could be read.
    Unknown,
}

/// The whole assessment of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    pub status: NodeStatus,
    /// Sorted by severity (error, warn, info), then in rule order.
    pub reasons: Vec<Reason>,
    pub dma_buf: Option<bool>,
    pub dma_buf_basis: DmaBufBasis,
    /// The lines `dma_buf` rests on (kallsyms, the release, or the kernel config).
    pub dma_buf_evidence: Vec<Evidence>,
    /// `open_capable` per GPU, in `facts.gpus` order.
    pub open_capable: Vec<Option<bool>>,
}

fn kernel_version(release: &str) -> Option<Version> {
    Version::from_str(release).ok()
}

fn below(v: &Version, t: MajorMinor) -> bool {
    (u32::from(v.major), u32::from(v.minor)) < (t.0, t.1)
}

/// The DMA-BUF rule of docs/domain.md: kallsyms, else release below minimum, else kernel config.
pub fn dma_buf_support(f: &Facts, t: &Thresholds) -> (Option<bool>, DmaBufBasis, Vec<Evidence>) {
    if f.kernel.kallsyms_dmabuf == Some(true) {
        return (
            Some(true),
            DmaBufBasis::Kallsyms,
            f.kernel.kallsyms_evidence.iter().cloned().collect(),
        );
    }
    let release = f.kernel.release.as_deref().and_then(kernel_version);
    if let Some(v) = &release
        && below(v, t.dmabuf_min_kernel)
    {
        return (
            Some(false),
            DmaBufBasis::BelowMinimum,
            f.kernel.evidence.iter().cloned().collect(),
        );
    }
    if let Some((source, cfg)) = &f.kernel.config {
        const OPTS: [&str; 2] = ["CONFIG_DMA_SHARED_BUFFER", "CONFIG_INFINIBAND_USER_MEM"];
        let ev = OPTS
            .iter()
            .map(|o| {
                Evidence::new(
                    source.clone(),
                    cfg.line(o)
                        .map_or_else(|| format!("(no {o} line)"), str::to_string),
                )
            })
            .collect();
        return if OPTS.iter().all(|o| cfg.value(o) == Some("y")) {
            (Some(true), DmaBufBasis::Config, ev)
        } else {
            (Some(false), DmaBufBasis::ConfigMissing, ev)
        };
    }
    (None, DmaBufBasis::Unknown, Vec::new())
}

fn cc(g: &Gpu) -> Option<MajorMinor> {
    g.compute_capability.as_deref()?.parse().ok()
}

fn open_capable(g: &Gpu, t: &Thresholds) -> Option<bool> {
    match cc(g) {
        Some(c) => Some(c >= t.open_min_compute_capability),
        None => g
            .pci_device_id
            .filter(|id| super::gpudb::open_supported(*id))
            .map(|_| true),
    }
}

fn gpu_label(g: &Gpu) -> String {
    let name = g.name.as_deref().unwrap_or("NVIDIA GPU");
    match &g.bus_id {
        Some(b) => format!("{name} at {b}"),
        None => name.to_string(),
    }
}

/// Assesses one node's facts.
pub fn assess(f: &Facts, t: &Thresholds) -> Assessment {
    let mut r: Vec<Reason> = Vec::new();
    // `None`: the flavour evidence could not be read (a failed or missing section) — unknown,
    // which is not `module-flavor-unknown` (evidence that names no known flavour).
    let flavor = f.driver.as_ref().map(|d| d.flavor);
    let module_loaded = matches!(
        flavor,
        Some(Flavor::Open | Flavor::Proprietary | Flavor::Unknown)
    );
    let flavor = flavor.unwrap_or(Flavor::Unknown);
    let flavor_known = f.driver.is_some();
    // GPUs bound to another driver (vfio-pci passthrough, nouveau) are not the NVIDIA driver's:
    // they are said (`gpu-bound-elsewhere`) and otherwise left out.
    let (elsewhere, pci): (Vec<_>, Vec<_>) = f
        .pci_gpus
        .clone()
        .unwrap_or_default()
        .into_iter()
        .partition(|d| d.bound_elsewhere());
    let seen_gpus = f
        .gpus
        .iter()
        .filter(|g| {
            !elsewhere
                .iter()
                .any(|d| g.bus_id.as_deref() == Some(d.bus_id.as_str()))
        })
        .count();
    let nvidia_node = module_loaded || seen_gpus > 0 || !pci.is_empty();
    if !elsewhere.is_empty() {
        r.push(Reason::new(
            Code::GpuBoundElsewhere,
            format!(
                "{} NVIDIA GPU(s) bound to another driver ({}): passed through to VMs or driven by nouveau, not the NVIDIA driver's",
                elsewhere.len(),
                elsewhere
                    .iter()
                    .filter_map(|d| d.driver.clone())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            elsewhere
                .iter()
                .map(|d| {
                    Evidence::new(
                        format!("/sys/bus/pci/devices/{}/driver", d.bus_id),
                        format!("-> {}", d.driver.as_deref().unwrap_or("?")),
                    )
                })
                .collect(),
        ));
    }
    let driver_ev = f
        .driver
        .as_ref()
        .map(|d| d.evidence.clone())
        .unwrap_or_default();
    let version = f.driver.as_ref().and_then(|d| d.version.clone());

    // attention: nvidia-smi.
    match &f.smi {
        SmiOutcome::TimedOut { command } => r.push(Reason::new(
            Code::NvidiaSmiTimeout,
            "nvidia-smi did not answer within its time limit (a wedged driver or GPU); GPU facts come from /proc and PCI",
            vec![Evidence::new(command.clone(), "(no answer)")],
        )),
        SmiOutcome::Failed { command, failure, output } => {
            let ev = output
                .lines()
                .map(|l| Evidence::new(command.clone(), l))
                .collect();
            match failure {
                SmiFailure::Mismatch { nvml_version } => r.push(Reason::new(
                    Code::DriverLibraryMismatch,
                    format!(
                        "nvidia-smi: driver/library version mismatch (NVML {}, loaded module {}); reboot or reload the module",
                        nvml_version.as_deref().unwrap_or("?"),
                        version.as_deref().unwrap_or("?")
                    ),
                    ev,
                )),
                SmiFailure::NoDevices if !pci.is_empty() => {}
                _ if module_loaded => r.push(Reason::new(
                    Code::NvidiaSmiFailed,
                    format!("nvidia-smi failed: {}", match failure {
                        SmiFailure::Other(m) => m.clone(),
                        SmiFailure::NoDevices => "No devices were found".into(),
                        SmiFailure::CannotCommunicate => "it couldn't communicate with the NVIDIA driver".into(),
                        SmiFailure::Mismatch { .. } => unreachable!(),
                    }),
                    ev,
                )),
                _ => {}
            }
        }
        _ => {}
    }
    // attention: GPUs the driver did not take.
    let smi_no_devices = matches!(
        &f.smi,
        SmiOutcome::Failed {
            failure: SmiFailure::NoDevices,
            ..
        }
    );
    if flavor == Flavor::None && !pci.is_empty() {
        r.push(Reason::new(
            Code::GpuWithoutDriver,
            format!(
                "{} NVIDIA GPU(s) on the PCI bus but no nvidia module is loaded (failed install, or Secure Boot rejected it)",
                pci.len()
            ),
            pci_evidence(&pci),
        ));
    } else if module_loaded {
        let missing: Vec<_> = match &f.proc_gpus {
            Some(proc) => pci
                .iter()
                .filter(|d| !proc.iter().any(|p| p.bus_id == d.bus_id))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        if !missing.is_empty() {
            r.push(Reason::new(
                Code::GpuNotInitialized,
                format!(
                    "{} NVIDIA GPU(s) on the PCI bus are missing from /proc/driver/nvidia/gpus: the driver did not initialize them",
                    missing.len()
                ),
                pci_evidence(&missing),
            ));
        } else if smi_no_devices && !pci.is_empty() {
            r.push(Reason::new(
                Code::GpuNotInitialized,
                "nvidia-smi found no devices although NVIDIA GPUs are on the PCI bus",
                pci_evidence(&pci),
            ));
        }
    }
    // attention: GPUs that need the open module, with the proprietary one loaded.
    if flavor == Flavor::Proprietary {
        let need: Vec<&Gpu> = f
            .gpus
            .iter()
            .filter(|g| {
                cc(g).is_some_and(|c| c >= t.open_required_compute_capability)
                    || g.name.as_deref().is_some_and(|n| n.contains("GH200"))
            })
            .collect();
        if !need.is_empty() {
            r.push(Reason::new(
                Code::GpuRequiresOpen,
                format!(
                    "{} requires the open kernel modules, but the proprietary module is loaded",
                    gpu_label(need[0])
                ),
                need.iter().map(|g| g.evidence.clone()).collect(),
            ));
        }
    }
    if flavor_known && flavor == Flavor::Unknown {
        let why = f
            .unknowns
            .iter()
            .find(|u| u.fact == "driver.flavor")
            .map_or("no evidence", |u| u.why.as_str());
        r.push(Reason::new(
            Code::ModuleFlavorUnknown,
            format!("cannot tell whether the open or the proprietary module is loaded: {why}"),
            driver_ev.clone(),
        ));
    }

    // blocked.
    let (dma_buf, basis, dma_ev) = dma_buf_support(f, t);
    let rdma = rdma_applies(f);
    let open_caps: Vec<Option<bool>> = f.gpus.iter().map(|g| open_capable(g, t)).collect();
    if nvidia_node {
        let old: Vec<(MajorMinor, &Gpu)> = f
            .gpus
            .iter()
            .filter_map(|g| cc(g).map(|c| (c, g)))
            .filter(|(c, _)| *c < t.open_min_compute_capability)
            .collect();
        if let Some((c, g)) = old.iter().min_by_key(|(c, _)| *c) {
            r.push(Reason::new(
                Code::GpuPreTuring,
                format!(
                    "{} of {} GPUs have compute capability below {} (lowest: {} with {c}); the open kernel modules need {} or higher",
                    old.len(),
                    f.gpus.len(),
                    t.open_min_compute_capability,
                    gpu_label(g),
                    t.open_min_compute_capability
                ),
                old.iter().map(|(_, g)| g.evidence.clone()).collect(),
            ));
        }
        // The kernel's DMA-BUF support matters where GPUDirect RDMA applies (an RDMA device,
        // or nvidia-peermem in use); where it does not, or cannot be told, it blocks nothing.
        let basis = if rdma == Some(true) {
            basis
        } else {
            DmaBufBasis::Kallsyms
        };
        match basis {
            DmaBufBasis::BelowMinimum => r.push(Reason::new(
                Code::KernelBelowDmabufMinimum,
                format!(
                    "kernel {} is below {}, the minimum for DMA-BUF GPUDirect RDMA",
                    f.kernel.release.as_deref().unwrap_or("?"),
                    t.dmabuf_min_kernel
                ),
                dma_ev.clone(),
            )),
            DmaBufBasis::ConfigMissing => r.push(Reason::new(
                Code::DmabufKernelMissing,
                "the kernel is not built with CONFIG_DMA_SHARED_BUFFER=y and CONFIG_INFINIBAND_USER_MEM=y, which DMA-BUF RDMA needs",
                dma_ev.clone(),
            )),
            DmaBufBasis::Unknown => r.push(Reason::new(
                Code::DmabufKernelUnknown,
                "DMA-BUF kernel support unknown: no ib_umem_dmabuf_get in /proc/kallsyms and no kernel config could be read",
                Vec::new(),
            )),
            DmaBufBasis::Kallsyms | DmaBufBasis::Config => {}
        }
    }

    // migrate.
    if flavor == Flavor::Proprietary {
        r.push(Reason::new(
            Code::ProprietaryModule,
            format!(
                "proprietary NVIDIA module {} is loaded",
                version.as_deref().unwrap_or("(version unknown)")
            ),
            driver_ev.clone(),
        ));
    }
    if f.peermem.loaded == Some(true) {
        let legacy = f
            .peermem
            .loaded_evidence
            .iter()
            .any(|e| e.line.split_whitespace().next() == Some("nv_peer_mem"));
        r.push(Reason::new(
            Code::PeermemLoaded,
            if legacy {
                "nv_peer_mem (the legacy Mellanox peer-memory module nvidia-peermem replaced) is loaded"
            } else {
                "nvidia_peermem is loaded"
            },
            f.peermem.loaded_evidence.clone(),
        ));
    }
    if f.peermem.configured == Some(true) {
        r.push(Reason::new(
            Code::PeermemConfigured,
            "nvidia-peermem is loaded at boot",
            f.peermem.configured_evidence.clone(),
        ));
    }
    if flavor_known && flavor == Flavor::None && seen_gpus == 0 && pci.is_empty() {
        r.push(Reason::new(
            Code::NoNvidiaModule,
            "no NVIDIA driver loaded",
            driver_ev.clone(),
        ));
    }

    if nvidia_node && rdma == Some(false) {
        r.push(Reason::new(
            Code::NoRdmaDevice,
            "no RDMA device (/sys/class/infiniband is empty) and no nvidia-peermem: GPUDirect RDMA does not apply, and the kernel's DMA-BUF support does not block the move to open modules",
            vec![Evidence::new("/sys/class/infiniband", "(no entries)")],
        ));
    }
    super::diagnose::rules(f, t, &mut r);

    // advisories.
    if nvidia_node {
        if let Some(v) = f.kernel.release.as_deref().and_then(kernel_version)
            && below(&v, t.kernel_guideline)
        {
            r.push(Reason::new(
                Code::KernelBelowGuideline,
                format!(
                    "kernel {}.{} is below {} (advisory: DMA-BUF needs {}+, many guides say {})",
                    v.major, v.minor, t.kernel_guideline, t.dmabuf_min_kernel, t.kernel_guideline
                ),
                f.kernel.evidence.iter().cloned().collect(),
            ));
        }
        if flavor == Flavor::Open && f.kernel.taint.is_some_and(|v| v & 1 == 1) {
            r.push(Reason::new(
                Code::ProprietaryTaintSticky,
                "the open module is loaded but the kernel is still tainted by a proprietary module (switched without a reboot)",
                f.kernel.taint_evidence.iter().cloned().collect(),
            ));
        }
    }
    if let Some(cut) = &f.incomplete {
        r.push(Reason::new(
            Code::ProbeIncomplete,
            format!(
                "the probe did not finish ({}); it stopped after {}: facts it had not read yet are unknown",
                cut.why,
                cut.last_section.as_deref().unwrap_or("no section")
            ),
            Vec::new(),
        ));
    }
    for u in &f.unknowns {
        r.push(Reason::new(
            Code::FactUnknown,
            format!("{} unknown: {}", u.fact, u.why),
            Vec::new(),
        ));
    }

    // Precedence among the statuses of the reasons; `unknown` is decided after it.
    let mut status = r
        .iter()
        .filter_map(|x| x.code.status())
        .min()
        .unwrap_or(NodeStatus::Ready);
    if matches!(status, NodeStatus::Ready | NodeStatus::NoDriver) {
        let missing = verdict_unknowns(f, status, dma_buf);
        if !missing.is_empty() {
            r.push(Reason::new(
                Code::VerdictIncomplete,
                format!(
                    "no verdict: the node would be {status}, but {} unknown: {}",
                    if missing.len() == 1 {
                        "this fact is"
                    } else {
                        "these facts are"
                    },
                    missing.join("; ")
                ),
                Vec::new(),
            ));
            status = NodeStatus::Unknown;
        }
    }
    r.sort_by_key(|x| x.severity);
    Assessment {
        status,
        reasons: r,
        dma_buf,
        dma_buf_basis: basis,
        dma_buf_evidence: dma_ev,
        open_capable: open_caps,
    }
}

/// Whether GPUDirect RDMA applies to the node (docs/domain.md "GPUDirect RDMA applies"): it has an
/// RDMA device (an entry in /sys/class/infiniband) or uses nvidia-peermem (loaded or configured).
/// `None` when that cannot be told (the RDMA device list was not read and peermem is not known
/// to be in use).
pub fn rdma_applies(f: &Facts) -> Option<bool> {
    if f.peermem.loaded == Some(true) || f.peermem.configured == Some(true) {
        return Some(true);
    }
    match &f.rdma.devices {
        Some(d) if !d.is_empty() => Some(true),
        Some(_) if f.peermem.loaded.is_some() && f.peermem.configured.is_some() => Some(false),
        _ => None,
    }
}

/// The facts that a `ready` or `no-driver` verdict rests on which are unknown, each as
/// "fact (why)" (docs/domain.md "Conclusions from absence need their facts"). `ready` rests on the
/// probe's trailer, the module flavour, nvidia-peermem loaded and configured, the GPU list,
/// RDMA applicability and, where RDMA applies, DMA-BUF support; `no-driver` on the trailer,
/// the module flavour and the PCI scan.
fn verdict_unknowns(f: &Facts, status: NodeStatus, dma_buf: Option<bool>) -> Vec<String> {
    let why = |fact: &str| {
        f.unknowns
            .iter()
            .find(|u| u.fact == fact)
            .map_or_else(|| fact.to_string(), |u| format!("{fact} ({})", u.why))
    };
    let mut missing = Vec::new();
    if let Some(cut) = &f.incomplete {
        missing.push(format!("probe trailer ({})", cut.why));
    }
    if f.kernel_log.cut {
        missing.push(format!(
            "kernel_log ({})",
            f.kernel_log.messages.why.as_deref().unwrap_or("cut")
        ));
    }
    if f.driver.is_none() {
        missing.push(why("driver.flavor"));
    }
    if status == NodeStatus::NoDriver {
        if f.pci_gpus.is_none() {
            missing.push(why("gpus (PCI)"));
        }
        return missing;
    }
    if f.peermem.loaded.is_none() {
        missing.push(why("peermem.loaded"));
    }
    if f.peermem.configured.is_none() {
        missing.push(why("peermem.configured"));
    }
    // Whether every GPU is the driver's needs the PCI scan and the driver's own list, unless
    // nvidia-smi listed every GPU the PCI scan saw.
    let smi_bus: Vec<&str> = match &f.smi {
        SmiOutcome::Answered { .. } => f
            .gpus
            .iter()
            .filter(|g| g.initialized)
            .filter_map(|g| g.bus_id.as_deref())
            .collect(),
        _ => Vec::new(),
    };
    let smi_covers_pci = matches!(f.smi, SmiOutcome::Answered { .. })
        && f.pci_gpus.as_ref().is_some_and(|pci| {
            pci.iter()
                .filter(|d| !d.bound_elsewhere())
                .all(|d| smi_bus.contains(&d.bus_id.as_str()))
        });
    if !smi_covers_pci {
        if f.proc_gpus.is_none() {
            missing.push(why("gpus (driver)"));
        }
        if f.pci_gpus.is_none() {
            missing.push(why("gpus (PCI)"));
        }
    }
    match rdma_applies(f) {
        // Unknown because the device list was not read, or because nvidia-peermem's use is.
        None if f.rdma.devices.is_none() => missing.push(why("rdma.devices")),
        None => missing.push(
            "GPUDirect RDMA applicability (no RDMA device, but whether nvidia-peermem is used is unknown)"
                .to_string(),
        ),
        Some(true) if dma_buf.is_none() => missing.push(format!(
            "dma_buf.kernel_support (RDMA applies; {})",
            why("kernel config")
        )),
        _ => {}
    }
    missing
}

fn pci_evidence(devs: &[crate::model::sysfs::PciDevice]) -> Vec<Evidence> {
    devs.iter().map(crate::model::facts::pci_evidence).collect()
}
