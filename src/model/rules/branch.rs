//! Driver branch vs GPU (docs/domain.md "Schema 3", `driver-branch-drops-gpu`): the loaded
//! driver's branch — or, with no module loaded, the branch the kernel log's legacy notice names
//! ("The 595.71.03 NVIDIA driver will ignore this GPU") — is past the last branch of a GPU's
//! architecture (data/driver-branches.toml: 580 for Maxwell, Pascal and Volta, 470 for Kepler;
//! NVIDIA's Unix Graphics Feature Deprecation Schedule). anomixer/proxmox-vgpu-installer#29.

use super::klog::log_evidence;
use super::{Code, Node, Reason};
use crate::model::facts::{Evidence, branches, gpudb};
use crate::model::parse::klog::Message;
use crate::model::parse::nvrm;

/// The driver version to judge and its evidence: the loaded module's, else the version the
/// log's legacy notice says ignores a GPU.
fn version(n: &Node) -> Option<(String, Vec<Evidence>)> {
    if let Some(v) = &n.version {
        return Some((v.clone(), n.driver_ev.clone()));
    }
    let log = n.log?;
    let m: &Message = log.iter().find(|m| nvrm::ignoring_driver(m).is_some())?;
    Some((nvrm::ignoring_driver(m)?, log_evidence(&[m])))
}

/// `driver-branch-drops-gpu`: each GPU (not bound elsewhere) whose architecture's last branch
/// is below the driver's.
pub(super) fn drops_gpu(n: &Node, r: &mut Vec<Reason>) {
    let Some((version, mut ev)) = version(n) else {
        return;
    };
    let Some(branch) = branches::branch_of(&version) else {
        return;
    };
    let mut dropped = Vec::new();
    let mut install = None;
    for g in &n.f.gpus {
        if n.elsewhere
            .iter()
            .any(|d| g.bus_id.as_deref() == Some(d.bus_id.as_str()))
        {
            continue;
        }
        let Some(model) = g.pci_device_id.and_then(gpudb::by_device_id) else {
            continue;
        };
        let Some(last) = branches::last_branch(&model.architecture) else {
            continue;
        };
        if last.last_branch < branch {
            dropped.push(format!(
                "{}{} ({}; its last branch is {})",
                g.name.as_deref().unwrap_or(&model.name),
                g.bus_id
                    .as_deref()
                    .map(|b| format!(" at {b}"))
                    .unwrap_or_default(),
                model.architecture,
                last.last_branch
            ));
            install = Some(install.map_or(last.last_branch, |i: u32| i.min(last.last_branch)));
            ev.push(g.evidence.clone());
        }
    }
    // The driver's own notice names the legacy branch, also for a GPU the tables do not know.
    let notices: Vec<&Message> = n
        .log
        .map(|l| {
            l.iter()
                .filter(|m| nvrm::legacy_branch(m).is_some())
                .collect()
        })
        .unwrap_or_default();
    let logged = notices.iter().find_map(|m| nvrm::legacy_branch(m));
    if let Some(b) = logged.filter(|b| *b < branch) {
        install = Some(install.map_or(b, |i| i.min(b)));
        if dropped.is_empty() {
            dropped.push(format!(
                "a GPU the kernel log says is supported through the {b}.xx legacy drivers"
            ));
        }
        ev.extend(log_evidence(&notices));
    }
    let Some(install) = install else {
        return;
    };
    r.push(Reason::new(
        Code::DriverBranchDropsGpu,
        format!(
            "driver {version} (branch {branch}) no longer supports {}: install the {install} branch (NVIDIA's Unix driver deprecation schedule names {install} as the last for it), or move the GPU off this node",
            dropped.join(", ")
        ),
        ev,
    ));
}
