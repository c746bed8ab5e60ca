//! The status (docs/domain.md "Verdict: status + reasons"): the worst status among the
//! reasons, then `unknown` in place of a `ready` or `no-driver` that rests on an unknown fact
//! ("Conclusions from absence need their facts"), said by `verdict-incomplete`.

use super::rdma::rdma_applies;
use super::{Code, NodeStatus, Reason};
use crate::model::facts::{Facts, SmiOutcome};

/// The node's status from the reasons of every rule; adds `verdict-incomplete` when a `ready`
/// or `no-driver` verdict lacks a fact it rests on.
pub(super) fn decide(f: &Facts, r: &mut Vec<Reason>, dma_buf: Option<bool>) -> NodeStatus {
    // Precedence among the statuses of the reasons; `unknown` is decided after it.
    let mut status = r
        .iter()
        .filter_map(Reason::status)
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
    status
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
