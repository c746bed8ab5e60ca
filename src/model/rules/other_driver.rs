//! A GPU held by another driver (docs/domain.md "Schema 3", `gpu-bound-elsewhere` extended):
//! any non-NVIDIA PCI driver bound to an NVIDIA GPU (`nova_core`, `nouveau`, `vfio-pci`,
//! `pci-stub`), the blacklist state of the display drivers (modprobe.d of /etc, /run,
//! /usr/local/lib, /usr/lib, /lib, including a same-named file that shadows the package's; the
//! command line's `modprobe.blacklist=` / `rd.driver.blacklist=`) and the fix. Attention when
//! nouveau or nova_core holds a GPU on a node with an NVIDIA module installed for the running
//! kernel (beclab/Olares#3963, negativo17/nvidia-driver#73); passthrough (vfio-pci, pci-stub)
//! stays informational.

use std::collections::BTreeSet;

use super::klog::log_evidence;
use super::{Code, Node, Reason, Severity};
use crate::model::facts::{Blacklist, Evidence};
use crate::model::parse::boot::ModuleFile;
use crate::model::parse::klog::Message;
use crate::model::parse::{modconf, nvrm};

/// The module of a display driver that takes an NVIDIA GPU from NVIDIA's own (as opposed to
/// passthrough stubs), by its PCI driver name: `nouveau`, or nova's `NovaCore` (the name its
/// `module_pci_driver!` gives; the module is `nova_core`, the name blacklists use).
fn display_module(d: &str) -> Option<&'static str> {
    match d {
        "nouveau" => Some("nouveau"),
        "NovaCore" | "nova_core" | "nova-core" => Some("nova_core"),
        _ => None,
    }
}

/// Whether the running kernel has an NVIDIA driver module installed (`None`: unknown).
fn nvidia_installed_for_running(n: &Node) -> Option<bool> {
    let rel = n.f.kernel.release.as_deref()?;
    let kernels = n.f.boot.kernels.value.as_ref()?;
    match kernels.iter().find(|k| k.release == rel) {
        Some(k) => k.has(ModuleFile::Driver),
        None => Some(false),
    }
}

/// The blacklist state of `module`, in words, and its evidence lines.
fn blacklist_state(n: &Node, module: &str) -> (String, Vec<Evidence>) {
    let Some(all) = n.f.boot.blacklists.value.as_ref() else {
        return (
            format!(
                "its blacklist state is unknown ({})",
                n.f.boot.blacklists.why.as_deref().unwrap_or("not read")
            ),
            Vec::new(),
        );
    };
    let mine: Vec<&Blacklist> = all
        .iter()
        .filter(|b| modconf::same_module(&b.module, module))
        .collect();
    let ev = mine
        .iter()
        .map(|b| {
            Evidence::new(
                b.source.clone(),
                match &b.shadowed_by {
                    Some(by) => format!("{} (shadowed by {by}: never read)", b.line),
                    None => b.line.clone(),
                },
            )
        })
        .collect();
    let effective: Vec<String> = mine
        .iter()
        .filter(|b| b.shadowed_by.is_none())
        .map(|b| b.source.clone())
        .collect();
    let shadowed: Vec<String> = mine
        .iter()
        .filter_map(|b| {
            b.shadowed_by
                .as_ref()
                .map(|by| format!("{} is shadowed by the same-named {by}", b.source))
        })
        .collect();
    let mut words = Vec::new();
    if !effective.is_empty() {
        words.push(format!(
            "blacklisted in {} (a blacklist the initramfs may predate)",
            effective.join(", ")
        ));
    }
    if !shadowed.is_empty() {
        words.push(format!(
            "its blacklist in {} (modprobe reads only the first file of a name), so that blacklist never applies",
            shadowed.join("; ")
        ));
    }
    if words.is_empty() {
        words.push("not blacklisted in any modprobe.d folder nor on the command line".to_string());
    }
    (format!("{module}: {}", words.join("; ")), ev)
}

/// The fix for a display driver holding a GPU.
fn fix(module: &str, shadowed: bool) -> String {
    let names = if module.starts_with("nova") {
        "`blacklist nova_core` and `blacklist nova_drm`".to_string()
    } else {
        "`blacklist nouveau` and `options nouveau modeset=0`".to_string()
    };
    let mut s = format!(
        "put {names} in a file of its own under /etc/modprobe.d (a name no package uses), or `modprobe.blacklist={}` on the kernel command line",
        if module.starts_with("nova") {
            "nova_core,nova_drm"
        } else {
            "nouveau"
        }
    );
    if shadowed {
        s.push_str(", and rename the /etc file that shadows the package's");
    }
    s.push_str("; rebuild the initramfs (`update-initramfs -u` or `dracut -f`) and reboot");
    s
}

/// `gpu-bound-elsewhere`: NVIDIA GPUs whose sysfs `driver` link names another driver.
pub(super) fn bound_elsewhere(n: &Node, r: &mut Vec<Reason>) {
    let elsewhere = &n.elsewhere;
    if elsewhere.is_empty() {
        return;
    }
    let drivers: BTreeSet<String> = elsewhere.iter().filter_map(|d| d.driver.clone()).collect();
    let mut ev: Vec<Evidence> = elsewhere
        .iter()
        .map(|d| {
            Evidence::new(
                format!("/sys/bus/pci/devices/{}/driver", d.bus_id),
                format!("-> {}", d.driver.as_deref().unwrap_or("?")),
            )
        })
        .collect();
    let held: BTreeSet<&str> = drivers.iter().filter_map(|d| display_module(d)).collect();
    let installed = nvidia_installed_for_running(n);
    let attention = !held.is_empty() && installed == Some(true);
    let mut parts = vec![format!(
        "{} NVIDIA GPU(s) bound to another driver ({})",
        elsewhere.len(),
        drivers.iter().cloned().collect::<Vec<_>>().join(", ")
    )];
    let mut fixes = Vec::new();
    for module in &held {
        let (state, lines) = blacklist_state(n, module);
        let shadowed = lines.iter().any(|e| e.line.contains("(shadowed by "));
        parts.push(state);
        ev.extend(lines);
        fixes.push(fix(module, shadowed));
    }
    // The NVIDIA driver's own words when it found the GPU taken.
    let bound: Vec<&Message> = n
        .log
        .map(|l| {
            l.iter()
                .filter(|m| nvrm::already_bound(m).is_some())
                .collect()
        })
        .unwrap_or_default();
    ev.extend(log_evidence(&bound));
    let passthrough = drivers.iter().any(|d| display_module(d).is_none());
    let message = if attention {
        format!(
            "{}: the NVIDIA driver installed for this kernel cannot take the GPU(s); {}",
            parts.join("; "),
            fixes.join("; ")
        )
    } else {
        let mut m = parts.join("; ");
        if passthrough {
            m.push_str(": passed through to VMs (vfio-pci, pci-stub), not the NVIDIA driver's");
        }
        if !held.is_empty() {
            m.push_str(match installed {
                Some(false) => "; no NVIDIA module is installed for the running kernel (a desktop driven by the in-tree driver)",
                _ => "; whether an NVIDIA module is installed for the running kernel is unknown",
            });
        }
        m
    };
    let mut reason = Reason::new(Code::GpuBoundElsewhere, message, ev);
    if attention {
        reason.severity = Severity::Error;
    }
    r.push(reason);
}
