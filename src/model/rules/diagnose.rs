//! Schema-2 rules (docs/domain.md "Rules"): the next boot, why a GPU is not initialized, what is
//! broken now, configuration drift, peermem visibility, RDMA userspace, the GPU Operator. Each
//! reason carries the lines that prove it. Pure: no I/O.
//!
//! Cause reasons (`gsp-firmware-missing`, `open-gpu-opt-in-missing`, `open-gpu-unsupported`,
//! `module-signature-rejected`) are emitted only beside the symptom they explain
//! (`gpu-not-initialized`, `gpu-without-driver`), never on a node whose GPUs work.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::model::assess::{Code, Reason, Thresholds};
use crate::model::boot::{self, ModuleFile};
use crate::model::driver::Flavor;
use crate::model::facts::{Evidence, Facts};
use crate::model::klog::{self, Message};
use crate::model::params;

/// The driver version from which the open module ignores `NVreg_OpenRmEnableUnsupportedGpus`
/// and supports GeForce and workstation GPUs without it (open-gpu-kernel-modules 545.23.06).
pub const OPT_IN_DROPPED: &str = "545.23.06";

fn log_evidence(msgs: &[&Message]) -> Vec<Evidence> {
    msgs.iter()
        .flat_map(|m| m.lines.iter().map(|l| Evidence::new("dmesg", l.clone())))
        .take(12)
        .collect()
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

fn has(r: &[Reason], code: Code) -> bool {
    r.iter().any(|x| x.code == code)
}

/// Whether the node's driver comes from the GPU Operator's driver container.
pub fn operator_managed(f: &Facts) -> bool {
    f.gpu_operator.value == Some(true)
}

enum NextBoot {
    Keeps,
    Loses { boot: String, running: String },
    NotApplicable,
}

fn next_boot(f: &Facts, kind: ModuleFile) -> Option<NextBoot> {
    if operator_managed(f) {
        return Some(NextBoot::NotApplicable);
    }
    let running = f.kernel.release.as_deref()?;
    let kernels = f.boot.kernels.value.as_ref()?;
    let find = |rel: &str| kernels.iter().find(|k| k.release == rel);
    match find(running).map(|k| k.has(kind)) {
        Some(Some(true)) => {}
        Some(None) => return None,
        // No host module for the running kernel (none installed, or not this way).
        Some(Some(false)) | None if f.boot.kernels.why.is_none() => {
            return Some(NextBoot::NotApplicable);
        }
        _ => return None,
    }
    let boot = f.boot.boot_kernel.value.as_deref()?;
    if boot == running {
        return Some(NextBoot::Keeps);
    }
    match find(boot).map(|k| k.has(kind)) {
        Some(Some(true)) => Some(NextBoot::Keeps),
        Some(Some(false)) => Some(NextBoot::Loses {
            boot: boot.to_string(),
            running: running.to_string(),
        }),
        // Not installed as a kernel with modules: it has no nvidia.ko either, unless the list
        // was cut short.
        None if f.boot.kernels.why.is_none() => Some(NextBoot::Loses {
            boot: boot.to_string(),
            running: running.to_string(),
        }),
        _ => None,
    }
}

fn next_boot_rules(f: &Facts, r: &mut Vec<Reason>) {
    let boot_ev = |f: &Facts, running: &str, boot: &str, kind: ModuleFile| {
        let mut ev = f.boot.boot_kernel.evidence.clone();
        for k in f.boot.kernels.value.iter().flatten() {
            if k.release == running {
                ev.extend(
                    k.nvidia_modules
                        .iter()
                        .flatten()
                        .filter(|p| boot::module_file(p) == Some(kind))
                        .map(|p| Evidence::new(format!("/lib/modules/{running}"), p.clone())),
                );
            }
        }
        ev.push(Evidence::new(
            format!("/lib/modules/{boot}"),
            format!(
                "(no {})",
                if kind == ModuleFile::Driver {
                    "nvidia.ko"
                } else {
                    "nvidia-peermem.ko"
                }
            ),
        ));
        ev
    };
    if let Some(NextBoot::Loses { boot, running }) = next_boot(f, ModuleFile::Driver) {
        let how = if f.boot.boot_kernel_heuristic {
            " (the highest installed kernel; no boot-loader link says which one boots)"
        } else {
            ""
        };
        r.push(Reason::new(
            Code::NextBootWithoutDriver,
            format!(
                "the next reboot starts kernel {boot}{how}, which has no nvidia.ko: the node comes up without the NVIDIA driver (running {running} has one); build the driver for {boot} (DKMS, or the open driver package) before rebooting"
            ),
            boot_ev(f, &running, &boot, ModuleFile::Driver),
        ));
    }
    if f.peermem.loaded == Some(true)
        && let Some(NextBoot::Loses { boot, running }) = next_boot(f, ModuleFile::Peermem)
    {
        r.push(Reason::new(
            Code::NextBootWithoutPeermem,
            format!(
                "nvidia_peermem is loaded, but the next reboot's kernel {boot} has no nvidia-peermem.ko (running {running} has one): GPUDirect RDMA through peermem stops after the reboot"
            ),
            boot_ev(f, &running, &boot, ModuleFile::Peermem),
        ));
    }
    if f.boot.reboot_pending.value == Some(true) {
        r.push(Reason::new(
            Code::RebootPending,
            "a reboot is pending (/run/reboot-required)",
            f.boot.reboot_pending.evidence.clone(),
        ));
    }
}

fn driver_version_cmp(f: &Facts, v: &str) -> Option<Ordering> {
    let loaded = f.driver.as_ref()?.version.as_deref()?;
    Some(boot::version_cmp(loaded, v))
}

/// GPU names that needed the open module's opt-in before 545.23.06 (not data-center GPUs).
fn consumer_gpu(name: &str) -> bool {
    ["GeForce", "TITAN", "Quadro", "RTX"]
        .iter()
        .any(|w| name.contains(w))
}

fn cause_rules(f: &Facts, r: &mut Vec<Reason>, log: Option<&[Message]>) {
    let not_init = has(r, Code::GpuNotInitialized);
    let without = has(r, Code::GpuWithoutDriver);
    if !not_init && !without {
        return;
    }
    let flavor = f.driver.as_ref().map(|d| d.flavor);
    // Each rule matches messages that begin with the driver's (or the kernel's) own words.
    let from = |prefix: &str, needle: &str| {
        log.map(|l| klog::find_from(l, prefix, needle))
            .unwrap_or_default()
    };
    if not_init {
        let log_lines = from("NVRM: RmFetchGspRmImages: ", "No firmware image found");
        let gsp = &f.firmware.gsp_files_present;
        // GSP firmware matters to the open module (always GSP) and to GPUs from Turing on;
        // a Volta on the proprietary module never loads it.
        let uses_gsp = flavor == Some(Flavor::Open)
            || f.gpus.iter().any(|g| {
                !g.initialized
                    && g.compute_capability
                        .as_deref()
                        .and_then(|c| c.parse::<crate::model::assess::MajorMinor>().ok())
                        .is_none_or(|c| c >= crate::model::assess::MajorMinor(7, 5))
            });
        if uses_gsp && (gsp.value == Some(false) || !log_lines.is_empty()) {
            let version = f
                .driver
                .as_ref()
                .and_then(|d| d.version.clone())
                .unwrap_or_else(|| "?".into());
            // The driver's own words first: they decide; the folders looked in follow.
            let mut ev = log_evidence(&log_lines);
            if gsp.value == Some(false) {
                ev.extend(gsp.evidence.clone());
            }
            r.push(Reason::new(
                Code::GspFirmwareMissing,
                format!(
                    "no GSP firmware (gsp*.bin) for the loaded driver {version} in the kernel's firmware folders: the GPU cannot start; install the driver's firmware package (it belongs under /lib/firmware/nvidia/{version}/)"
                ),
                ev,
            ));
        }
        let opt_in_log = from(
            "NVRM: Open nvidia.ko is only ready for use on Data Center GPUs",
            "",
        );
        let by_params = flavor == Some(Flavor::Open)
            && driver_version_cmp(f, OPT_IN_DROPPED) == Some(Ordering::Less)
            && f.gpus
                .iter()
                .any(|g| !g.initialized && g.name.as_deref().is_some_and(consumer_gpu))
            && f.module_params
                .in_effect
                .value
                .as_ref()
                .and_then(|p| p.get("OpenRmEnableUnsupportedGpus"))
                .is_some_and(|v| params::same_value(v, "0"));
        if by_params || !opt_in_log.is_empty() {
            let mut ev = Vec::new();
            if by_params {
                ev.push(Evidence::new(
                    "/proc/driver/nvidia/params",
                    "OpenRmEnableUnsupportedGpus: 0",
                ));
                ev.extend(
                    f.gpus
                        .iter()
                        .filter(|g| !g.initialized)
                        .map(|g| g.evidence.clone()),
                );
            }
            ev.extend(log_evidence(&opt_in_log));
            r.push(Reason::new(
                Code::OpenGpuOptInMissing,
                format!(
                    "the open module before {OPT_IN_DROPPED} takes GeForce and workstation GPUs only with NVreg_OpenRmEnableUnsupportedGpus=1: set it in modprobe.d, or use {OPT_IN_DROPPED} or later"
                ),
                ev,
            ));
        }
        let unsupported = from(
            "NVRM: The NVIDIA GPU ",
            "is not supported by open nvidia.ko because it does not include the required GPU System Processor",
        );
        if !unsupported.is_empty() {
            r.push(Reason::new(
                Code::OpenGpuUnsupported,
                "a GPU without a GSP (pre-Turing) cannot run the open module: use the proprietary module on this node",
                log_evidence(&unsupported),
            ));
        }
    }
    if without && flavor == Some(Flavor::None) {
        let mut log_lines = from("Loading of unsigned module is rejected", "");
        log_lines.extend(from(
            "Loading of module with unavailable key is rejected",
            "",
        ));
        log_lines.extend(from(
            "Lockdown: modprobe: unsigned module loading is restricted",
            "",
        ));
        let enforced_unsigned = f.firmware.signature_enforced.value == Some(true)
            && f.firmware.nvidia_ko_signed.value == Some(false);
        if enforced_unsigned || !log_lines.is_empty() {
            let mut ev = Vec::new();
            if enforced_unsigned {
                ev.extend(f.firmware.signature_enforced.evidence.clone());
                ev.extend(f.firmware.nvidia_ko_signed.evidence.clone());
            }
            ev.extend(log_evidence(&log_lines));
            r.push(Reason::new(
                Code::ModuleSignatureRejected,
                "the kernel enforces module signatures (Secure Boot or lockdown) and the NVIDIA module is not signed with an enrolled key: sign it (DKMS with an enrolled MOK) or use the distribution's signed driver",
                ev,
            ));
        }
    }
}

fn broken_now_rules(f: &Facts, r: &mut Vec<Reason>, log: &[Message]) {
    // Fallen off the bus: Xid 79, or the driver's banner, naming the bus ids.
    let fallen: Vec<&Message> = log.iter().filter(|m| klog::fallen_off_bus(m)).collect();
    if !fallen.is_empty() {
        let mut buses: Vec<String> = fallen.iter().filter_map(|m| klog::fallen_bus(m)).collect();
        buses.sort();
        buses.dedup();
        // An Xid names `0000:9b:00`, the banner `0000:9b:00.0`: keep the fuller form.
        let all = buses.clone();
        buses.retain(|b| !all.iter().any(|o| o != b && o.starts_with(b.as_str())));
        r.push(Reason::new(
            Code::GpuFallenOffBus,
            format!(
                "GPU {} fell off the bus (Xid 79): it does not answer until the node is power-cycled or the GPU reset; check power, cooling and the PCIe slot",
                if buses.is_empty() { "?".to_string() } else { buses.join(", ") }
            ),
            log_evidence(&fallen),
        ));
    }
    if f.peermem.configured == Some(true) && f.peermem.loaded == Some(false) {
        let mut failed =
            klog::find_from(log, "nvidia_peermem: disagrees about version of symbol", "");
        failed.extend(klog::find_from(log, "nvidia_peermem: Unknown symbol", ""));
        if !failed.is_empty() {
            r.push(Reason::new(
                Code::PeermemLoadFailed,
                "nvidia-peermem is configured to load but failed: it was built against another RDMA stack (MOFED vs inbox) than the one running; rebuild it, or move to DMA-BUF and drop it",
                log_evidence(&failed),
            ));
        }
    }
    let counts = klog::xid_counts(log);
    let others: BTreeMap<u32, u32> = counts.into_iter().filter(|(c, _)| *c != 79).collect();
    if !others.is_empty() {
        let list: Vec<String> = others.iter().map(|(c, n)| format!("{c} ({n}x)")).collect();
        let lines: Vec<&Message> = log
            .iter()
            .filter(|m| klog::xid(m).is_some_and(|x| x.code != 79))
            .collect();
        r.push(Reason::new(
            Code::XidEvents,
            format!(
                "Xid events in the kernel log: {} (NVIDIA's Xid catalog says what each means)",
                list.join(", ")
            ),
            log_evidence(&lines),
        ));
    }
}

fn drift_rules(f: &Facts, r: &mut Vec<Reason>) {
    if operator_managed(f) || f.driver.as_ref().map(|d| d.flavor) == Some(Flavor::None) {
        return;
    }
    // For one key, the last line read wins.
    let mut last: BTreeMap<&str, (&params::Configured, &str)> = BTreeMap::new();
    for (c, src) in &f.module_params.configured {
        last.insert(c.key.as_str(), (c, src.as_str()));
    }
    let in_effect = f.module_params.in_effect.value.as_ref();
    let open = f.driver.as_ref().map(|d| d.flavor) == Some(Flavor::Open);
    for (key, (c, src)) in last {
        let ev = vec![Evidence::new(src, c.line.clone())];
        let ignored = if key == "OpenRmEnableUnsupportedGpus"
            && matches!(
                driver_version_cmp(f, OPT_IN_DROPPED),
                Some(Ordering::Greater | Ordering::Equal)
            ) {
            Some(format!(
                "NVreg_OpenRmEnableUnsupportedGpus is ignored by drivers {OPT_IN_DROPPED} and later (the open module supports these GPUs without it)"
            ))
        } else if key == "EnableGpuFirmware" && open && params::same_value(&c.value, "0") {
            Some("NVreg_EnableGpuFirmware=0 is ignored by the open module, which always uses the GSP".to_string())
        } else if in_effect.is_some_and(|p| !p.contains_key(key)) {
            Some(format!(
                "NVreg_{key} is not a parameter of the loaded module (/proc/driver/nvidia/params does not list it)"
            ))
        } else {
            None
        };
        if let Some(msg) = ignored {
            r.push(Reason::new(Code::ModuleParamIgnored, msg, ev));
            continue;
        }
        if let Some(now) = in_effect.and_then(|p| p.get(key))
            && !params::same_value(&c.value, now)
        {
            let mut ev = ev;
            ev.push(Evidence::new(
                "/proc/driver/nvidia/params",
                format!("{key}: {now}"),
            ));
            r.push(Reason::new(
                Code::ModuleParamNotApplied,
                format!(
                    "NVreg_{key}={} is configured but the loaded module runs with {now}: reload the module or reboot (on OpenShift, the MachineConfig rollout may not have finished: oc get mcp)",
                    c.value
                ),
                ev,
            ));
        }
    }
}

/// Adds the schema-2 reasons to `r` (which already holds the symptom reasons).
pub fn rules(f: &Facts, _t: &Thresholds, r: &mut Vec<Reason>) {
    let log = f.kernel_log.messages.value.as_deref();
    cause_rules(f, r, log);
    if let Some(log) = log {
        broken_now_rules(f, r, log);
    }
    next_boot_rules(f, r);
    drift_rules(f, r);
    if f.peermem.loaded == Some(true) && f.peermem.registered.value == Some(false) {
        let mut ev = f.peermem.loaded_evidence.clone();
        ev.push(Evidence::new(
            "/sys/kernel/mm/memory_peers",
            "(no nv_mem/version, no nv_mem_nc/version)",
        ));
        r.push(Reason::new(
            Code::PeermemNotRegistered,
            "nvidia_peermem is loaded but not registered as nv_mem or nv_mem_nc: NCCL before 2.23 then runs without GPUDirect RDMA (later NCCL also accepts /sys/module/nvidia_peermem)",
            ev,
        ));
    }
    let rdma_devices = f.rdma.devices.as_ref().is_some_and(|d| !d.is_empty());
    if rdma_devices && f.rdma.libibverbs_dmabuf.value == Some(false) {
        r.push(Reason::new(
            Code::RdmaUserspaceLacksDmabuf,
            "the host's libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than 34): jobs that use the host's verbs library cannot register DMA-BUF memory (containers with their own rdma-core are not affected)",
            f.rdma.libibverbs_dmabuf.evidence.clone(),
        ));
    }
    if operator_managed(f) {
        r.push(Reason::new(
            Code::GpuOperatorManaged,
            "the driver comes from the GPU Operator's driver container: change the module type in the ClusterPolicy or NVIDIADriver (driver.kernelModuleType; nvidia-peermem: driver.rdma.enabled), not with host packages",
            f.gpu_operator.evidence.clone(),
        ));
    }
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
    if rdma_devices {
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
