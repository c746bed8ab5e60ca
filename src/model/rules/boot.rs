//! Next-boot rules (docs/domain.md "Rules", "Next boot"): the kernel the next reboot starts
//! without the host's nvidia.ko or nvidia-peermem.ko; a pending reboot. Not applied to GPU
//! Operator-managed nodes (the driver container builds for the new kernel).

use super::node::operator_managed;
use super::{Code, Node, Reason};
use crate::model::facts::{Evidence, Facts};
use crate::model::parse::boot::{self, ModuleFile};

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

/// The lines that say the next boot loses a module: the boot kernel's source, the running
/// kernel's module files of that kind, and the boot kernel's folder without one.
fn boot_ev(f: &Facts, running: &str, boot: &str, kind: ModuleFile) -> Vec<Evidence> {
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
}

/// `next-boot-without-driver`: the running kernel has a host nvidia.ko, the boot kernel none.
pub(super) fn without_driver(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
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
}

/// `next-boot-without-peermem`: the same for nvidia-peermem.ko, where nvidia_peermem is loaded.
pub(super) fn without_peermem(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
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
}

/// `reboot-pending`: /run/reboot-required exists.
pub(super) fn reboot_pending(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if f.boot.reboot_pending.value == Some(true) {
        r.push(Reason::new(
            Code::RebootPending,
            "a reboot is pending (/run/reboot-required)",
            f.boot.reboot_pending.evidence.clone(),
        ));
    }
}
