//! GPU rules (docs/domain.md "Rules"): GPUs bound to another driver, GPUs the driver did not
//! take, GPUs that require the open module, eligibility for it (compute capability), and why a
//! GPU is not initialized. The causes (`gsp-firmware-missing`, `open-gpu-opt-in-missing`,
//! `open-gpu-unsupported`, `module-signature-rejected`) are emitted only beside the symptom
//! they explain (`gpu-not-initialized`, `gpu-without-driver`), never on a node whose GPUs work.

use std::cmp::Ordering;

use super::driver::{OPT_IN_DROPPED, driver_version_cmp};
use super::klog::{from_log, log_evidence};
use super::{Code, MajorMinor, Node, Reason, Thresholds, has};
use crate::model::facts::{Evidence, Gpu, SmiOutcome, gpudb};
use crate::model::parse::driver::Flavor;
use crate::model::parse::params;
use crate::model::parse::smi::SmiFailure;
use crate::model::parse::sysfs::PciDevice;

fn cc(g: &Gpu) -> Option<MajorMinor> {
    g.compute_capability.as_deref()?.parse().ok()
}

/// `open_capable` of one GPU: compute capability ≥ the threshold (7.5), else, when that is
/// unknown, its PCI device id in data/open-gpu-supported.tsv (`None` when neither says).
pub(super) fn open_capable(g: &Gpu, t: &Thresholds) -> Option<bool> {
    match cc(g) {
        Some(c) => Some(c >= t.open_min_compute_capability),
        None => g
            .pci_device_id
            .filter(|id| gpudb::open_supported(*id))
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

fn pci_evidence(devs: &[PciDevice]) -> Vec<Evidence> {
    devs.iter().map(crate::model::facts::pci_evidence).collect()
}

/// `gpu-without-driver` (GPUs, no module) or `gpu-not-initialized` (GPUs missing from the
/// driver's list, or nvidia-smi finding none).
pub(super) fn not_taken(n: &Node, r: &mut Vec<Reason>) {
    let (f, pci) = (n.f, &n.pci);
    let smi_no_devices = matches!(
        &f.smi,
        SmiOutcome::Failed {
            failure: SmiFailure::NoDevices,
            ..
        }
    );
    if n.flavor == Flavor::None && !pci.is_empty() {
        r.push(Reason::new(
            Code::GpuWithoutDriver,
            format!(
                "{} NVIDIA GPU(s) on the PCI bus but no nvidia module is loaded (failed install, or Secure Boot rejected it)",
                pci.len()
            ),
            pci_evidence(pci),
        ));
    } else if n.module_loaded {
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
                pci_evidence(pci),
            ));
        }
    }
}

/// `gpu-requires-open`: GPUs that need the open module, with the proprietary one loaded.
pub(super) fn requires_open(n: &Node, r: &mut Vec<Reason>) {
    let (f, t) = (n.f, n.t);
    if n.flavor == Flavor::Proprietary {
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
}

/// `gpu-pre-turing`: GPUs below the open modules' minimum compute capability.
pub(super) fn pre_turing(n: &Node, r: &mut Vec<Reason>) {
    let (f, t) = (n.f, n.t);
    if !n.nvidia_node {
        return;
    }
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
}

/// GPU names that needed the open module's opt-in before 545.23.06 (not data-center GPUs).
fn consumer_gpu(name: &str) -> bool {
    ["GeForce", "TITAN", "Quadro", "RTX"]
        .iter()
        .any(|w| name.contains(w))
}

/// `gsp-firmware-missing` beside `gpu-not-initialized`: no `gsp*.bin` for the loaded version,
/// or the driver's own log line.
pub(super) fn gsp_firmware(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if !has(r, Code::GpuNotInitialized) {
        return;
    }
    let flavor = f.driver.as_ref().map(|d| d.flavor);
    let log_lines = from_log(n, "NVRM: RmFetchGspRmImages: ", "No firmware image found");
    let gsp = &f.firmware.gsp_files_present;
    // GSP firmware matters to the open module (always GSP) and to GPUs from Turing on;
    // a Volta on the proprietary module never loads it.
    let uses_gsp = flavor == Some(Flavor::Open)
        || f.gpus.iter().any(|g| {
            !g.initialized
                && g.compute_capability
                    .as_deref()
                    .and_then(|c| c.parse::<MajorMinor>().ok())
                    .is_none_or(|c| c >= MajorMinor(7, 5))
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
}

/// `open-gpu-opt-in-missing` beside `gpu-not-initialized`: an open module before 545.23.06
/// with a consumer GPU and `OpenRmEnableUnsupportedGpus: 0`, or the driver's log line.
pub(super) fn open_opt_in(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if !has(r, Code::GpuNotInitialized) {
        return;
    }
    let flavor = f.driver.as_ref().map(|d| d.flavor);
    let opt_in_log = from_log(
        n,
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
}

/// `open-gpu-unsupported` beside `gpu-not-initialized`: the open module's log line about a GPU
/// without a GSP.
pub(super) fn open_unsupported(n: &Node, r: &mut Vec<Reason>) {
    if !has(r, Code::GpuNotInitialized) {
        return;
    }
    let unsupported = from_log(
        n,
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

/// `module-signature-rejected` beside `gpu-without-driver`: signatures enforced and the host
/// nvidia.ko unsigned, or the module loader's or lockdown's log line.
pub(super) fn signature_rejected(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    let flavor = f.driver.as_ref().map(|d| d.flavor);
    if !(has(r, Code::GpuWithoutDriver) && flavor == Some(Flavor::None)) {
        return;
    }
    let mut log_lines = from_log(n, "Loading of unsigned module is rejected", "");
    // A signed module with an untrusted key is `module-key-untrusted` (firmware.rs); a
    // signature whose hash or key algorithm the kernel lacks is rejected like an unsigned one.
    log_lines.extend(from_log(
        n,
        "Loading of module with unsupported crypto is rejected",
        "",
    ));
    log_lines.extend(from_log(
        n,
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
