//! GSP firmware of the loaded module, GPUs whose initialization failed, and module signing
//! trust (docs/domain.md "Schema 3", `gsp-firmware-absent`, `gpu-init-failed`,
//! `module-key-untrusted`).

use std::collections::BTreeMap;

use super::klog::{from_log, log_evidence};
use super::{Code, Node, Reason, has};
use crate::model::facts::{Evidence, SmiOutcome};
use crate::model::parse::driver::Flavor;
use crate::model::parse::klog::Message;
use crate::model::parse::nvrm;

/// The loaded module reads GSP firmware: the open module always does; the proprietary one when
/// the log shows it fetching a GSP image.
fn uses_gsp(n: &Node) -> bool {
    n.flavor == Flavor::Open
        || !from_log(n, "NVRM: RmFetchGspRmImages", "").is_empty()
        || n.log.is_some_and(|l| {
            l.iter().any(|m| {
                m.text.contains("Direct firmware load for nvidia/") && m.text.contains("/gsp")
            })
        })
}

/// `gsp-firmware-absent` (warn): a module is loaded, every firmware folder was read, and none
/// has the loaded version's `gsp*.bin`: the next module load fails (ublue-os/bazzite#2668).
/// Never when a folder (or the firmware_class path) could not be read; not beside
/// `gsp-firmware-missing`, which says it of a GPU that already failed.
pub(super) fn gsp_absent(n: &Node, r: &mut Vec<Reason>) {
    let fw = &n.f.firmware;
    if !n.module_loaded || has(r, Code::GspFirmwareMissing) || !uses_gsp(n) {
        return;
    }
    if fw.gsp_absent_everywhere() != Some(true) {
        return;
    }
    let version = n.version.clone().unwrap_or_else(|| "?".into());
    let dirs = fw.gsp_dirs.as_deref().unwrap_or_default();
    let mut ev = n.driver_ev.clone();
    ev.extend(
        dirs.iter()
            .map(|d| Evidence::new(d.dir.clone(), "(no gsp*.bin)")),
    );
    r.push(Reason::new(
        Code::GspFirmwareAbsent,
        format!(
            "the loaded driver {version} has no GSP firmware (gsp*.bin) in any firmware folder ({} looked in): GPUs it already started keep working, but the next load of the module (a reboot) fails for them; reinstall the firmware package of {version}, or install the matching userspace and module together",
            dirs.len()
        ),
        ev,
    ));
}

/// `gpu-init-failed`: `NVRM: GPU <bus>: RmInitAdapter failed! (<code>)` lines, per GPU, with
/// the likely cause when a rule above found one. A GPU that nvidia-smi lists now initialized
/// later and is left out.
pub(super) fn init_failed(n: &Node, r: &mut Vec<Reason>) {
    let Some(log) = n.log else {
        return;
    };
    let working: Vec<&str> = match &n.f.smi {
        SmiOutcome::Answered { .. } => {
            n.f.gpus
                .iter()
                .filter(|g| g.initialized)
                .filter_map(|g| g.bus_id.as_deref())
                .collect()
        }
        _ => Vec::new(),
    };
    let mut per_gpu: BTreeMap<String, (Vec<String>, Vec<&Message>)> = BTreeMap::new();
    for m in log {
        if let Some(x) = nvrm::init_failed(m) {
            if working.iter().any(|b| b.eq_ignore_ascii_case(&x.bus)) {
                continue;
            }
            let e = per_gpu.entry(x.bus).or_default();
            if !e.0.contains(&x.code) {
                e.0.push(x.code);
            }
            e.1.push(m);
        }
    }
    if per_gpu.is_empty() {
        return;
    }
    let version = n
        .version
        .clone()
        .unwrap_or_else(|| "the loaded driver".into());
    let cause = if has(r, Code::GspFirmwareMissing)
        || has(r, Code::GspFirmwareAbsent)
        || !from_log(n, "NVRM: RmFetchGspRmImages: ", "No firmware image found").is_empty()
    {
        format!(
            "likely cause: no GSP firmware for {version} (see gsp-firmware-missing / gsp-firmware-absent)"
        )
    } else if has(r, Code::DriverBranchDropsGpu) {
        "likely cause: the driver branch no longer supports the GPU (see driver-branch-drops-gpu)"
            .to_string()
    } else if has(r, Code::OpenGpuUnsupported) {
        "likely cause: a GPU without a GSP under the open module (see open-gpu-unsupported)"
            .to_string()
    } else {
        "cause not named by gpufleet: read the kernel log lines just before it (GSP, VBIOS, power)"
            .to_string()
    };
    let gpus: Vec<String> = per_gpu
        .iter()
        .map(|(bus, (codes, _))| format!("{bus} ({})", codes.join(", ")))
        .collect();
    let msgs: Vec<&Message> = per_gpu
        .values()
        .filter_map(|(_, m)| m.first().copied())
        .collect();
    r.push(Reason::new(
        Code::GpuInitFailed,
        format!(
            "the driver failed to initialize GPU {} (RmInitAdapter failed!); {cause}",
            gpus.join(", ")
        ),
        log_evidence(&msgs),
    ));
}

/// DKMS and akmods install their builds here: a module signed with the machine-owner key, not
/// the distribution's.
fn locally_built(path: &str) -> bool {
    path.contains("/updates/dkms/") || path.contains("/extra/")
}

/// `module-key-untrusted` beside `gpu-without-driver`: the kernel log's `Loading of module with
/// unavailable key is rejected` (`kernel/module/signing.c`: the module is signed, but not by a
/// key in a keyring the kernel trusts for modules; deepin-community/kernel#2144); without a
/// log, a hint when Secure Boot is on, the kernel has no machine keyring
/// (`CONFIG_INTEGRITY_MACHINE_KEYRING`), and the host nvidia.ko is a signed local build.
pub(super) fn key_untrusted(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if !(has(r, Code::GpuWithoutDriver) && n.flavor_known && n.flavor == Flavor::None) {
        return;
    }
    let fw = &f.firmware;
    let log_lines = from_log(n, "Loading of module with unavailable key is rejected", "");
    let module_path = f
        .kernel
        .release
        .as_deref()
        .and_then(|rel| f.boot.installed(rel))
        .and_then(|k| k.nvidia_modules.as_ref())
        .and_then(|m| {
            m.iter()
                .find(|p| {
                    crate::model::parse::boot::module_file(p)
                        == Some(crate::model::parse::boot::ModuleFile::Driver)
                })
                .cloned()
        });
    let signer = match (&module_path, fw.nvidia_ko_signed.value) {
        (Some(p), Some(true)) if locally_built(p) => {
            format!("{p} is a local build (DKMS/akmods), signed with the machine-owner key")
        }
        (Some(p), _) if !p.ends_with(".ko") => {
            format!("{p} is compressed: its signer is unknown without the decompressor on the node")
        }
        (Some(p), _) => format!("{p}: its signer is unknown"),
        (None, _) => "the module's signer is unknown".to_string(),
    };
    let hint = log_lines.is_empty()
        && fw.secure_boot.value == Some(true)
        && fw.machine_keyring.value == Some(false)
        && fw.nvidia_ko_signed.value == Some(true)
        && module_path.as_deref().is_some_and(locally_built);
    if log_lines.is_empty() && !hint {
        return;
    }
    let mut ev = log_evidence(&log_lines);
    ev.extend(fw.secure_boot.evidence.clone());
    if hint {
        ev.extend(fw.machine_keyring.evidence.clone());
        ev.extend(fw.nvidia_ko_signed.evidence.clone());
    }
    let what = if hint {
        "Secure Boot is on, the kernel is built without CONFIG_INTEGRITY_MACHINE_KEYRING (a key enrolled with mokutil is not trusted for modules) and the NVIDIA module is a signed local build: the kernel likely rejects its key (no kernel log to confirm)"
    } else {
        "the kernel rejected the NVIDIA module's key (`Loading of module with unavailable key is rejected`): it is signed, but not by a key the kernel trusts for modules"
    };
    r.push(Reason::new(
        Code::ModuleKeyUntrusted,
        format!(
            "{what}; {signer}; use a kernel with the machine keyring (CONFIG_INTEGRITY_MACHINE_KEYRING=y), or the distribution's signed driver"
        ),
        ev,
    ));
}
