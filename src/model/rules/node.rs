//! Rules about the node as a whole (docs/domain.md "Rules", "Verdict: status + reasons"):
//! the kernel's advisories (the guideline, a sticky proprietary taint), the GPU Operator's
//! driver container, processes the probe left, a probe that did not finish, and the facts
//! that are unknown (`fact-unknown`, info: those a rule above needs, then every fact the
//! collection could not establish).

use super::rdma::{below, has_rdma_device, kernel_version};
use super::{Code, Node, Reason, has};
use crate::model::facts::{Evidence, Facts};
use crate::model::parse::driver::Flavor;

/// Whether the node's driver comes from the GPU Operator's driver container.
pub(super) fn operator_managed(f: &Facts) -> bool {
    f.gpu_operator.value == Some(true)
}

/// `gpu-operator-managed`: the module type is changed in the ClusterPolicy, not on the host.
pub(super) fn gpu_operator(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if operator_managed(f) {
        r.push(Reason::new(
            Code::GpuOperatorManaged,
            "the driver comes from the GPU Operator's driver container: change the module type in the ClusterPolicy or NVIDIADriver (driver.kernelModuleType; nvidia-peermem: driver.rdma.enabled), not with host packages",
            f.gpu_operator.evidence.clone(),
        ));
    }
}

/// `probe-left-processes`: a command of the probe left processes, which the probe killed.
pub(super) fn leftovers(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if !f.leftovers.is_empty() {
        r.push(Reason::new(
            Code::ProbeLeftProcesses,
            format!(
                "a command of the probe (nvidia-smi, dmesg) left processes running on the node, killed by the probe: {}",
                f.leftovers.join(", ")
            ),
            f.leftovers
                .iter()
                .map(|l| Evidence::new("probe", l.clone()))
                .collect(),
        ));
    }
}

fn unknown(r: &mut Vec<Reason>, fact: &str, p_why: &Option<String>) {
    if let Some(why) = p_why {
        r.push(Reason::new(
            Code::FactUnknown,
            format!("{fact} unknown: {why}"),
            Vec::new(),
        ));
    }
}

/// `fact-unknown` for the facts of the subjects above that are unknown where a rule needs
/// them (the firmware only beside `gpu-not-initialized`, the signatures only beside
/// `gpu-without-driver`, …).
pub(super) fn unknown_subjects(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    // Unknown facts that matter here.
    unknown(r, "kernel_log", &f.kernel_log.messages.why);
    unknown(r, "boot.kernels", &f.boot.kernels.why);
    unknown(r, "boot.boot_kernel", &f.boot.boot_kernel.why);
    unknown(r, "boot.reboot_pending", &f.boot.reboot_pending.why);
    if has(r, Code::GpuNotInitialized) {
        unknown(
            r,
            "firmware.gsp_files_present",
            &f.firmware.gsp_files_present.why,
        );
    }
    if f.driver.as_ref().is_some_and(|d| d.flavor != Flavor::None) {
        unknown(r, "module_params.in_effect", &f.module_params.in_effect.why);
    }
    if f.peermem.loaded == Some(true) {
        unknown(r, "peermem.registered", &f.peermem.registered.why);
    }
    if has_rdma_device(f) {
        unknown(r, "rdma.libibverbs_dmabuf", &f.rdma.libibverbs_dmabuf.why);
    }
    // Signatures matter where no module is loaded and GPUs wait for one.
    if has(r, Code::GpuWithoutDriver) {
        unknown(r, "secure_boot.enabled", &f.firmware.secure_boot.why);
        unknown(
            r,
            "secure_boot.signature_enforced",
            &f.firmware.signature_enforced.why,
        );
        unknown(
            r,
            "secure_boot.nvidia_ko_signed",
            &f.firmware.nvidia_ko_signed.why,
        );
    }
    unknown(r, "driver.managed_by", &f.gpu_operator.why);
}

/// `kernel-below-guideline` (advisory) on an NVIDIA node.
pub(super) fn kernel_guideline(n: &Node, r: &mut Vec<Reason>) {
    let (f, t) = (n.f, n.t);
    if !n.nvidia_node {
        return;
    }
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
}

/// `proprietary-taint-sticky` (advisory): the open module with the proprietary taint bit set.
pub(super) fn sticky_taint(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if n.nvidia_node && n.flavor == Flavor::Open && f.kernel.taint.is_some_and(|v| v & 1 == 1) {
        r.push(Reason::new(
            Code::ProprietaryTaintSticky,
            "the open module is loaded but the kernel is still tainted by a proprietary module (switched without a reboot)",
            f.kernel.taint_evidence.iter().cloned().collect(),
        ));
    }
}

/// `probe-incomplete`: the probe's trailer never arrived.
pub(super) fn probe_incomplete(n: &Node, r: &mut Vec<Reason>) {
    if let Some(cut) = &n.f.incomplete {
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
}

/// `fact-unknown` for each fact the collection could not establish, in its order.
pub(super) fn unknown_facts(n: &Node, r: &mut Vec<Reason>) {
    for u in &n.f.unknowns {
        r.push(Reason::new(
            Code::FactUnknown,
            format!("{} unknown: {}", u.fact, u.why),
            Vec::new(),
        ));
    }
}
