//! Driver and module rules (docs/domain.md "Rules"): nvidia-smi's answer, the module's flavour
//! (unknown, proprietary, none) and configuration drift of its parameters.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::node::operator_managed;
use super::{Code, Node, Reason};
use crate::model::facts::{Evidence, Facts, SmiOutcome};
use crate::model::parse::boot;
use crate::model::parse::driver::Flavor;
use crate::model::parse::params;
use crate::model::parse::smi::SmiFailure;

/// The driver version from which the open module ignores `NVreg_OpenRmEnableUnsupportedGpus`
/// and supports GeForce and workstation GPUs without it (open-gpu-kernel-modules 545.23.06).
pub const OPT_IN_DROPPED: &str = "545.23.06";

/// The loaded module's version against `v` (`None` when the version is unknown).
pub(super) fn driver_version_cmp(f: &Facts, v: &str) -> Option<Ordering> {
    let loaded = f.driver.as_ref()?.version.as_deref()?;
    Some(boot::version_cmp(loaded, v))
}

/// `nvidia-smi-timeout`, `driver-library-mismatch` or `nvidia-smi-failed` (not "No devices
/// were found" with GPUs on the bus: that is `gpu-not-initialized`).
pub(super) fn nvidia_smi(n: &Node, r: &mut Vec<Reason>) {
    let (f, version) = (n.f, &n.version);
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
                SmiFailure::NoDevices if !n.pci.is_empty() => {}
                _ if n.module_loaded => r.push(Reason::new(
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
}

/// `module-flavor-unknown`: evidence was read that names no known flavour.
pub(super) fn flavor_unknown(n: &Node, r: &mut Vec<Reason>) {
    if n.flavor_known && n.flavor == Flavor::Unknown {
        let why =
            n.f.unknowns
                .iter()
                .find(|u| u.fact == "driver.flavor")
                .map_or("no evidence", |u| u.why.as_str());
        r.push(Reason::new(
            Code::ModuleFlavorUnknown,
            format!("cannot tell whether the open or the proprietary module is loaded: {why}"),
            n.driver_ev.clone(),
        ));
    }
}

/// `proprietary-module`: the proprietary module is loaded (migrate).
pub(super) fn proprietary(n: &Node, r: &mut Vec<Reason>) {
    if n.flavor == Flavor::Proprietary {
        r.push(Reason::new(
            Code::ProprietaryModule,
            format!(
                "proprietary NVIDIA module {} is loaded",
                n.version.as_deref().unwrap_or("(version unknown)")
            ),
            n.driver_ev.clone(),
        ));
    }
}

/// `no-nvidia-module`: no module loaded and no NVIDIA GPU seen.
pub(super) fn no_module(n: &Node, r: &mut Vec<Reason>) {
    // A GPU that nouveau or nova_core holds where an NVIDIA module is installed is
    // `gpu-bound-elsewhere` at attention: not a node without a driver.
    let held = r
        .iter()
        .any(|x| x.code == Code::GpuBoundElsewhere && x.severity == super::Severity::Error);
    if n.flavor_known && n.flavor == Flavor::None && n.seen_gpus == 0 && n.pci.is_empty() && !held {
        r.push(Reason::new(
            Code::NoNvidiaModule,
            "no NVIDIA driver loaded",
            n.driver_ev.clone(),
        ));
    }
}

/// `module-param-ignored` / `module-param-not-applied`: each configured `NVreg_` key (the last
/// line read wins) against /proc/driver/nvidia/params; not on GPU Operator nodes.
pub(super) fn param_drift(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
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
