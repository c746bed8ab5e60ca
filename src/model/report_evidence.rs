//! The `evidence` map of a node's report (docs/domain.md "Snapshot JSON"): each fact's lines
//! (the file or command and the raw line), by the JSON path of the fact (`kernel.release`,
//! `driver.flavor`, `boot.boot_kernel`, `fabric.gpus`, …). A fact without lines has no entry.

use std::collections::BTreeMap;

use super::facts::{Evidence, Facts};
use super::rules::Assessment;

/// The evidence of `facts` as assessed in `a`; the GSP firmware's only when a GPU is not
/// initialized (`not_initialized`), as `firmware.gsp_files_present` itself.
pub fn evidence(
    facts: &Facts,
    a: &Assessment,
    not_initialized: bool,
) -> BTreeMap<String, Vec<Evidence>> {
    let mut evidence: BTreeMap<String, Vec<Evidence>> = BTreeMap::new();
    let mut ev = |path: &str, e: Vec<Evidence>| {
        if !e.is_empty() {
            evidence.insert(path.to_string(), e);
        }
    };
    ev(
        "kernel.release",
        facts.kernel.evidence.iter().cloned().collect(),
    );
    ev(
        "driver.flavor",
        facts
            .driver
            .as_ref()
            .map(|d| d.evidence.clone())
            .unwrap_or_default(),
    );
    ev("peermem.loaded", facts.peermem.loaded_evidence.clone());
    ev(
        "peermem.configured",
        facts.peermem.configured_evidence.clone(),
    );
    ev(
        "taint.value",
        facts.kernel.taint_evidence.iter().cloned().collect(),
    );
    ev("dma_buf.kernel_support", a.dma_buf_evidence.clone());
    ev(
        "gpus",
        facts.gpus.iter().map(|g| g.evidence.clone()).collect(),
    );
    ev("boot.kernels", facts.boot.kernels.evidence.clone());
    ev("boot.boot_kernel", facts.boot.boot_kernel.evidence.clone());
    ev(
        "boot.reboot_pending",
        facts.boot.reboot_pending.evidence.clone(),
    );
    if not_initialized {
        ev(
            "firmware.gsp_files_present",
            facts.firmware.gsp_files_present.evidence.clone(),
        );
    }
    ev(
        "module_params.in_effect",
        facts.module_params.in_effect.evidence.clone(),
    );
    ev(
        "module_params.configured",
        facts
            .module_params
            .configured
            .iter()
            .map(|(c, src)| Evidence::new(src.clone(), c.line.clone()))
            .collect(),
    );
    ev(
        "peermem.registered",
        facts.peermem.registered.evidence.clone(),
    );
    ev("rollout.locked", facts.node_lock.evidence.clone());
    ev(
        "rdma.devices",
        facts
            .rdma
            .devices
            .iter()
            .flatten()
            .map(|d| Evidence::new("/sys/class/infiniband", d.clone()))
            .collect(),
    );
    ev(
        "rdma.libibverbs_dmabuf",
        facts.rdma.libibverbs_dmabuf.evidence.clone(),
    );
    ev(
        "secure_boot.enabled",
        facts.firmware.secure_boot.evidence.clone(),
    );
    ev(
        "secure_boot.lockdown",
        facts.firmware.lockdown.evidence.clone(),
    );
    ev(
        "secure_boot.nvidia_ko_signed",
        facts.firmware.nvidia_ko_signed.evidence.clone(),
    );
    ev(
        "secure_boot.signature_enforced",
        facts.firmware.signature_enforced.evidence.clone(),
    );
    ev("driver.managed_by", facts.gpu_operator.evidence.clone());
    super::schema3::evidence(facts, &mut evidence);
    evidence
}
