//! The JSON of the schema-3 facts of issue 24's fabric slice (docs/domain.md "Schema 3", "JSON
//! schema 3: what changed from 2"): `fabric`, `gpus[].mig`, `gpus[].remapped_rows`,
//! `kernel_log.xids`, `kernel_log.recovery_actions`. A value is `null` when unknown or n/a; a
//! list is `[]` when known to be empty.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::facts::fabric::{self, Tri};
use super::facts::{Evidence, Facts};
use super::parse::smiq::Mode;
use super::parse::{klog, xidcat};

/// `fabric`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct FabricGpuJson {
    pub bus_id: String,
    /// `Completed`, `In Progress`, `Not Started`.
    pub state: String,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricManagerJson {
    pub running: Option<bool>,
    pub version: Option<String>,
}

/// `gpus[].mig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigJson {
    /// `Enabled` or `Disabled`.
    pub current: String,
    pub pending: String,
    /// The GPU instances (`nvidia-smi mig -lgi`): the layout to re-apply after a reboot without
    /// a MIG manager; `null` when MIG is off or the list is unknown.
    pub instances: Option<Vec<MigInstanceJson>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigInstanceJson {
    pub profile: String,
    pub profile_id: u32,
    pub instance_id: u32,
    pub placement: String,
}

/// `gpus[].remapped_rows`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemapJson {
    pub pending: bool,
    pub failed: bool,
}

/// `kernel_log.xids[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct RecoveryActionJson {
    pub bus_id: String,
    /// As the driver printed it (`Node Reboot Required`).
    pub action: String,
    pub line: String,
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

/// The evidence of these facts, by JSON path (`fabric.gpus`, `gpus[0].mig`, …).
pub fn evidence(f: &Facts, out: &mut BTreeMap<String, Vec<Evidence>>) {
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
