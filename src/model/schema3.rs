//! The JSON of the schema-3 facts (docs/domain.md "Snapshot JSON", "Schema 3: what changed
//! from 2"): `fabric`, `gpus[].mig`, `gpus[].remapped_rows`, `kernel_log.xids`,
//! `kernel_log.recovery_actions`, `pci_devices`, `blacklists`, `firmware.gsp_dirs`,
//! `secure_boot.machine_keyring`, `secure_boot.nvidia_ko_signer`, `driver.branch`. A value is
//! `null` when unknown or n/a; a list is `[]` when known to be empty; an entry that could not be
//! read says so itself (`read: false`, `driver_read: false`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::facts::fabric::{self, Tri};
use super::facts::{Evidence, Facts, branches};
use super::parse::smiq::Mode;
use super::parse::{klog, nvrm, xidcat};

/// At most this many `blacklists` entries (a real node has a few dozen).
const MAX_BLACKLISTS: usize = 256;

/// `pci_devices[]`: an NVIDIA display or 3D PCI function (vendor 0x10de, class 0x0300xx or
/// 0x0302xx, under /sys/bus/pci/devices) and the kernel driver bound to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PciDeviceJson {
    /// Lower-case `dddd:bb:dd.f`.
    pub bus_id: String,
    /// Upper-case hex, 4 digits (`2335`).
    pub pci_device_id: String,
    /// The name the `/sys/bus/pci/devices/<bus>/driver` link points to (`nvidia`, `vfio-pci`,
    /// `nouveau`, `NovaCore`); `null`: no driver bound (when `driver_read`) or unknown.
    pub driver: Option<String>,
    /// Whether the link (or its absence) was read; `false`: `driver` is unknown.
    pub driver_read: bool,
}

/// `blacklists[]`: one `blacklist <module>` that modprobe.d or the kernel command line holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BlacklistJson {
    /// The module as written (`nouveau`, `nova_core`).
    pub module: String,
    /// The modprobe.d file (`/usr/lib/modprobe.d/nvidia.conf`) or `/proc/cmdline`.
    pub source: String,
    /// The logical line (continuations joined), or the command line's parameter
    /// (`rd.driver.blacklist=nouveau`).
    pub line: String,
    /// The same-named file of an earlier folder that replaces `source` whole, so modprobe never
    /// reads this line; `null`: it takes effect.
    pub shadowed_by: Option<String>,
}

/// `firmware.gsp_dirs[]`: one firmware folder looked in for the loaded version's GSP files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct GspDirJson {
    /// `<dir>/nvidia/<version>`, or `/sys/module/firmware_class/parameters/path` when that
    /// file was not read (the folder it names is then unknown).
    pub dir: String,
    /// Whether the folder (or its absence) was read; `false` makes "absent" unknown.
    pub read: bool,
    /// Its `gsp*.bin` files (also `.xz`, `.zst`); `[]` when it has none or does not exist.
    pub files: Vec<String>,
}

/// `fabric`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct FabricJson {
    /// `hgx`, `nvl-rack`, `none`; `null` when unknown.
    pub platform: Option<String>,
    /// NVIDIA PCI functions of class 0x0680xx.
    pub nvswitch_functions: Option<u32>,
    /// Per GPU whose fabric applies (`State` not `N/A`); `null` when unknown.
    pub gpus: Option<Vec<FabricGpuJson>>,
    /// `null` unless the platform is `hgx`.
    pub fabric_manager: Option<FabricManagerJson>,
    /// `null` unless `hgx` with a B200/B300 GPU.
    pub nvlsm_running: Option<bool>,
    /// `null` unless `nvl-rack` with nvidia-imex installed.
    pub imex_running: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct FabricGpuJson {
    pub bus_id: String,
    /// `Completed`, `In Progress`, `Not Started`.
    pub state: String,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct FabricManagerJson {
    pub running: Option<bool>,
    pub version: Option<String>,
}

/// `gpus[].mig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct MigJson {
    /// `Enabled` or `Disabled`.
    pub current: String,
    pub pending: String,
    /// The GPU instances (`nvidia-smi mig -lgi`): the layout to re-apply after a reboot without
    /// a MIG manager; `null` when MIG is off or the list is unknown.
    pub instances: Option<Vec<MigInstanceJson>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct MigInstanceJson {
    pub profile: String,
    pub profile_id: u32,
    pub instance_id: u32,
    pub placement: String,
}

/// `gpus[].remapped_rows`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct RemapJson {
    pub pending: bool,
    pub failed: bool,
}

/// `kernel_log.xids[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct XidJson {
    pub bus_id: String,
    pub code: u32,
    pub count: u32,
    /// `gpu-reset`, `node-reboot`, `drain`, `drain-and-reset`, a name the driver printed, or
    /// `null` (it stays `xid-events`).
    pub action: Option<String>,
    pub hints: Vec<String>,
}

/// `kernel_log.recovery_actions[]`: the Xid 154 lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct RecoveryActionJson {
    pub bus_id: String,
    /// As the driver printed it (`Node Reboot Required`).
    pub action: String,
    pub line: String,
}

/// `driver.branch`: the first field of the loaded module's version (`580` of `580.95.05`);
/// with no module loaded, of the version the kernel log's legacy notice names (`The 595.71.03
/// NVIDIA driver will ignore this GPU`); `None` when neither is known.
pub fn driver_branch(f: &Facts) -> Option<u32> {
    if let Some(v) = f.driver.as_ref().and_then(|d| d.version.as_deref()) {
        return branches::branch_of(v);
    }
    let log = f.kernel_log.messages.value.as_deref()?;
    log.iter()
        .find_map(nvrm::ignoring_driver)
        .and_then(|v| branches::branch_of(&v))
}

/// `pci_devices`: `None` when the PCI scan is unknown.
pub fn pci_devices_json(f: &Facts) -> Option<Vec<PciDeviceJson>> {
    f.pci_gpus.as_ref().map(|ds| {
        ds.iter()
            .map(|d| PciDeviceJson {
                bus_id: d.bus_id.clone(),
                pci_device_id: format!("{:04X}", d.device_id),
                driver: d.driver.clone(),
                driver_read: d.driver_read,
            })
            .collect()
    })
}

/// `blacklists`: `None` when a modprobe.d folder, a file that takes effect, or /proc/cmdline
/// could not be read (it could hold, or shadow, a blacklist).
pub fn blacklists_json(f: &Facts) -> Option<Vec<BlacklistJson>> {
    f.boot.blacklists.value.as_ref().map(|bs| {
        bs.iter()
            .take(MAX_BLACKLISTS)
            .map(|b| BlacklistJson {
                module: b.module.clone(),
                source: b.source.clone(),
                line: b.line.clone(),
                shadowed_by: b.shadowed_by.clone(),
            })
            .collect()
    })
}

/// `firmware.gsp_dirs`: `None` with no loaded driver version (n/a).
pub fn gsp_dirs_json(f: &Facts) -> Option<Vec<GspDirJson>> {
    f.firmware.gsp_dirs.as_ref().map(|ds| {
        ds.iter()
            .map(|d| GspDirJson {
                dir: d.dir.clone(),
                read: d.read,
                files: d.files.clone(),
            })
            .collect()
    })
}

fn mode(m: Mode) -> String {
    match m {
        Mode::Enabled => "Enabled",
        Mode::Disabled => "Disabled",
        Mode::NotApplicable => "N/A",
    }
    .to_string()
}

/// `fabric`, or `null` when nothing of it is known.
pub fn fabric_json(f: &Facts) -> Option<FabricJson> {
    let platform = fabric::platform(f);
    let names: Vec<&str> = f.gpus.iter().filter_map(|g| g.name.as_deref()).collect();
    let procs = f.fabric.procs.known();
    let running = |n: &str| procs.map(|p| p.iter().any(|x| x.name == n));
    let p = platform.known().copied();
    Some(FabricJson {
        platform: p.map(|p| p.as_str().to_string()),
        nvswitch_functions: f.fabric.nvswitch_functions.known().copied(),
        gpus: f.fabric.gpus.known().map(|g| {
            g.iter()
                .filter_map(|g| {
                    g.fabric.known().map(|x| FabricGpuJson {
                        bus_id: g.bus_id.clone(),
                        state: x.state.as_str().to_string(),
                        status: x.status.clone(),
                    })
                })
                .collect()
        }),
        fabric_manager: (p == Some(fabric::Platform::Hgx)).then(|| FabricManagerJson {
            running: running("nv-fabricmanage"),
            version: f.fabric.fm_version.known().map(|(v, _)| v.clone()),
        }),
        nvlsm_running: (p == Some(fabric::Platform::Hgx)
            && names.iter().any(|n| fabric::blackwell_hgx(n)))
        .then(|| running("nvlsm"))
        .flatten(),
        imex_running: (p == Some(fabric::Platform::NvlRack)
            && f.fabric.imex_installed == Some(true))
        .then(|| running("nvidia-imex"))
        .flatten(),
    })
}

/// `gpus[i].mig` and `gpus[i].remapped_rows` of the GPU at `bus_id` (with nvidia-smi's `index`).
pub fn gpu_mig_remap(
    f: &Facts,
    bus_id: Option<&str>,
    index: u32,
) -> (Option<MigJson>, Option<RemapJson>) {
    let Some(q) = bus_id.and_then(|b| {
        f.fabric
            .gpus
            .known()
            .and_then(|g| g.iter().find(|g| g.bus_id == b))
    }) else {
        return (None, None);
    };
    let mig = q.mig.known().map(|m| MigJson {
        current: mode(m.current),
        pending: mode(m.pending),
        instances: match (&f.fabric.instances, m.enabled()) {
            (Tri::Known(rows), true) => Some(
                rows.iter()
                    .filter(|r| r.gpu == index)
                    .map(|r| MigInstanceJson {
                        profile: r.profile.clone(),
                        profile_id: r.profile_id,
                        instance_id: r.instance_id,
                        placement: r.placement.clone(),
                    })
                    .collect(),
            ),
            _ => None,
        },
    });
    let remap = q.remapped_rows.known().map(|r| RemapJson {
        pending: r.pending,
        failed: r.failed,
    });
    (mig, remap)
}

/// `kernel_log.xids` and `kernel_log.recovery_actions`; `null` when the log is unknown.
pub fn xids_json(f: &Facts) -> (Option<Vec<XidJson>>, Option<Vec<RecoveryActionJson>>) {
    let Some(log) = f.kernel_log.messages.value.as_deref() else {
        return (None, None);
    };
    let xids = xidcat::assess(log)
        .into_iter()
        .map(|e| XidJson {
            bus_id: e.bus,
            code: e.code,
            count: e.count,
            action: e.action.map(|a| a.as_str().to_string()),
            hints: e.hints,
        })
        .collect();
    let rec = log
        .iter()
        .filter_map(|m| {
            let name = klog::recovery_action(m)?;
            let x = klog::xid(m)?;
            Some(RecoveryActionJson {
                bus_id: x.bus,
                action: name,
                line: m.lines.first().cloned().unwrap_or_default(),
            })
        })
        .take(256)
        .collect();
    (Some(xids), Some(rec))
}

/// The evidence of these facts, by JSON path (`fabric.gpus`, `gpus[0].mig`,
/// `secure_boot.machine_keyring`, …).
pub fn evidence(f: &Facts, out: &mut BTreeMap<String, Vec<Evidence>>) {
    for (path, e) in [
        (
            "secure_boot.machine_keyring",
            &f.firmware.machine_keyring.evidence,
        ),
        (
            "secure_boot.nvidia_ko_signer",
            &f.firmware.nvidia_ko_signer.evidence,
        ),
    ] {
        if !e.is_empty() {
            out.insert(path.into(), e.clone());
        }
    }
    let pci: Vec<Evidence> = f
        .pci_gpus
        .iter()
        .flatten()
        .filter_map(|d| {
            d.driver
                .as_ref()
                .map(|drv| Evidence::new(format!("/sys/bus/pci/devices/{}/driver", d.bus_id), drv))
        })
        .take(16)
        .collect();
    if !pci.is_empty() {
        out.insert("pci_devices".into(), pci);
    }
    let Some(q) = f.fabric.gpus.known() else {
        return;
    };
    let fab: Vec<Evidence> = q
        .iter()
        .filter_map(|g| g.fabric.known())
        .flat_map(|x| x.evidence.iter().cloned())
        .take(16)
        .collect();
    if !fab.is_empty() {
        out.insert("fabric.gpus".into(), fab);
    }
    for (i, g) in f.gpus.iter().enumerate() {
        let Some(b) = g.bus_id.as_deref() else {
            continue;
        };
        let Some(x) = q.iter().find(|x| x.bus_id == b) else {
            continue;
        };
        if let Some(m) = x.mig.known() {
            out.insert(format!("gpus[{i}].mig"), m.evidence.clone());
        }
        if let Some(r) = x.remapped_rows.known() {
            out.insert(format!("gpus[{i}].remapped_rows"), r.evidence.clone());
        }
    }
}
