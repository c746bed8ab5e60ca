//! Schema 3 rules (docs/domain.md "Schema 3", "New rules and reason codes"): the NVLink fabric
//! (`fabric-not-ready`), Xid recovery actions and row remapping (`xid-action-required`), MIG
//! without GPU instances (`mig-without-instances`), and the facts of these rules that are
//! unknown (`fact-unknown`).

use super::{Code, Node, Reason};
use crate::model::facts::Evidence;
use crate::model::facts::fabric::{self, Platform, Tri};
use crate::model::parse::xidcat::{self, Action};

/// `fabric-not-ready`: a GPU's fabric state, and on HGX boards Fabric Manager (at the driver's
/// version) and, with Blackwell, NVLSM; on GB200/GB300 racks nvidia-imex where installed.
pub(super) fn not_ready(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    let mut problems: Vec<String> = Vec::new();
    let mut evidence: Vec<Evidence> = Vec::new();
    let gpus: Vec<&fabric::GpuQ> = f.fabric.gpus.known().into_iter().flatten().collect();
    let bad: Vec<(&fabric::GpuQ, &fabric::GpuFabric)> = gpus
        .iter()
        .filter_map(|g| g.fabric.known().filter(|x| x.not_ready()).map(|x| (*g, x)))
        .collect();
    if !bad.is_empty() {
        let list: Vec<String> = bad
            .iter()
            .take(16)
            .map(|(g, x)| {
                let status = if x.status.is_empty() || x.status == "N/A" {
                    String::new()
                } else {
                    format!(", status {}", x.status)
                };
                format!("{} {}{status}", g.bus_id, x.state.as_str())
            })
            .collect();
        let more = if bad.len() > 16 {
            format!(" and {} more", bad.len() - 16)
        } else {
            String::new()
        };
        problems.push(format!(
            "the NVLink fabric of {} of {} GPUs is not ready ({}{more})",
            bad.len(),
            gpus.len(),
            list.join(", ")
        ));
        evidence.extend(
            bad.iter()
                .flat_map(|(_, x)| x.evidence.iter().cloned())
                .take(8),
        );
    }
    let procs = f.fabric.procs.known();
    let running = |name: &str| -> Option<bool> { procs.map(|p| p.iter().any(|x| x.name == name)) };
    let proc_ev = |name: &str| -> Vec<Evidence> {
        procs
            .into_iter()
            .flatten()
            .filter(|x| x.name == name)
            .map(|x| Evidence::new("/proc/*/comm", format!("{} {}", x.pid, x.name)))
            .take(2)
            .collect()
    };
    let names: Vec<&str> = f.gpus.iter().filter_map(|g| g.name.as_deref()).collect();
    match fabric::platform(f).known() {
        Some(Platform::Hgx) => {
            match running("nv-fabricmanage") {
                Some(false) => problems.push(
                    "nv-fabricmanager is not running (this is an NVSwitch HGX board)".to_string(),
                ),
                Some(true) => {
                    evidence.extend(proc_ev("nv-fabricmanage"));
                    if let (Some((v, e)), Some(d)) = (f.fabric.fm_version.known(), &n.version)
                        && v != d
                    {
                        problems.push(format!(
                            "Fabric Manager {v} is not the driver's version {d}"
                        ));
                        evidence.push(e.clone());
                    }
                }
                None => {}
            }
            if names.iter().any(|n| fabric::blackwell_hgx(n)) && running("nvlsm") == Some(false) {
                problems.push(
                    "NVLSM is not running (B200/B300 HGX: NVLink 5 switches need it, and the mlx5_ib and ib_umad modules)"
                        .to_string(),
                );
            }
        }
        Some(Platform::NvlRack)
            if f.fabric.imex_installed == Some(true) && running("nvidia-imex") == Some(false) =>
        {
            problems.push("nvidia-imex is installed and not running".to_string());
            evidence.push(Evidence::new("/usr/bin/nvidia-imex", "(installed)"));
        }
        _ => {}
    }
    if problems.is_empty() {
        return;
    }
    let fix = match fabric::platform(f).known() {
        Some(Platform::NvlRack) => {
            "on GB200/GB300 racks the switch trays manage the fabric: check them and start nvidia-imex, then reset the GPUs".to_string()
        }
        _ => format!(
            "start nvidia-fabricmanager at the driver's version{} (B200/B300: with NVLSM), then reset the GPUs or reboot",
            n.version
                .as_deref()
                .map(|v| format!(" {v}"))
                .unwrap_or_default()
        ),
    };
    r.push(Reason::new(
        Code::FabricNotReady,
        format!(
            "{}: CUDA fails with error 802 (system not yet initialized) while nvidia-smi looks healthy; {fix}",
            problems.join("; ")
        ),
        evidence,
    ));
}

/// `xid-action-required`: Xids whose recovery is a GPU reset, a drain or a node reboot, and
/// pending or failed row remaps, named per GPU with the action.
pub(super) fn xid_action(n: &Node, r: &mut Vec<Reason>) {
    let mut items: Vec<String> = Vec::new();
    let mut evidence: Vec<Evidence> = Vec::new();
    if let Some(log) = n.log {
        for e in xidcat::assess(log).iter().filter(|e| e.action.is_some()) {
            let a = e.action.as_ref().map(Action::as_str).unwrap_or("");
            items.push(format!(
                "GPU {} Xid {} ({}x): {a} ({})",
                e.bus, e.code, e.count, e.why
            ));
            evidence.extend(
                e.first_lines
                    .iter()
                    .map(|l| Evidence::new("dmesg", l.clone())),
            );
        }
    }
    for g in n.f.fabric.gpus.known().into_iter().flatten() {
        if let Some(x) = g.remapped_rows.known()
            && (x.pending || x.failed)
        {
            items.push(format!(
                "GPU {}: {}",
                g.bus_id,
                if x.failed {
                    "row remapping failed: gpu-reset, then NVIDIA support (the GPU may need replacing)"
                } else {
                    "a row remap is pending: gpu-reset to apply it"
                }
            ));
            evidence.extend(x.evidence.iter().cloned());
        }
    }
    if items.is_empty() {
        return;
    }
    let more = if items.len() > 16 {
        format!("; and {} more", items.len() - 16)
    } else {
        String::new()
    };
    items.truncate(16);
    evidence.truncate(12);
    r.push(Reason::new(
        Code::XidActionRequired,
        format!(
            "GPUs need recovery: {}{more}; drain the node first (NVIDIA's Xid catalog; the driver's Xid 154 line)",
            items.join("; ")
        ),
        evidence,
    ));
}

/// `mig-without-instances`: MIG enabled (now or after a reset) and no GPU instance.
pub(super) fn mig_without_instances(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    let Some(rows) = f.fabric.instances.known() else {
        return;
    };
    let mut items = Vec::new();
    let mut evidence = Vec::new();
    for g in f.fabric.gpus.known().into_iter().flatten() {
        let Some(m) = g.mig.known().filter(|m| m.enabled()) else {
            continue;
        };
        let index = f
            .gpus
            .iter()
            .find(|x| x.bus_id.as_deref() == Some(g.bus_id.as_str()))
            .map(|x| x.index);
        if index.is_some_and(|i| rows.iter().any(|x| x.gpu == i)) {
            continue;
        }
        let when = if m.current == crate::model::parse::smiq::Mode::Enabled {
            "enabled"
        } else {
            "enabled after the next GPU reset"
        };
        items.push(format!(
            "GPU {} ({}MIG {when})",
            g.bus_id,
            index.map(|i| format!("index {i}, ")).unwrap_or_default()
        ));
        evidence.extend(m.evidence.iter().cloned());
    }
    if items.is_empty() {
        return;
    }
    evidence.push(Evidence::new(
        fabric::LGI,
        "(no GPU instance row for these GPUs)",
    ));
    r.push(Reason::new(
        Code::MigWithoutInstances,
        format!(
            "MIG without GPU instances: {}: the GPU offers nothing to workloads (the device plugin fails on it); create instances (nvidia-smi mig -cgi <profiles> -C, or the MIG manager's config) or disable MIG (nvidia-smi -mig 0) and reset the GPU",
            items.join(", ")
        ),
        evidence,
    ));
}

/// `fact-unknown` for the facts above that could not be read, where they apply: per fact, one
/// line naming why (the first few GPUs).
pub(super) fn unknowns(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    let mut push = |fact: &str, why: &str| {
        r.push(Reason::new(
            Code::FactUnknown,
            format!("{fact} unknown: {why}"),
            Vec::new(),
        ));
    };
    match &f.fabric.gpus {
        Tri::Unknown(why) => push("fabric.gpus, gpus[].mig, gpus[].remapped_rows", why),
        Tri::Known(q) => {
            // GPUs nvidia-smi listed that `-q` has no block for.
            let missing: Vec<&str> = f
                .gpus
                .iter()
                .filter(|g| g.initialized)
                .filter_map(|g| g.bus_id.as_deref())
                .filter(|b| !q.iter().any(|x| x.bus_id == *b))
                .collect();
            if !missing.is_empty() {
                let more = if missing.len() > 1 {
                    format!(" (and {} more)", missing.len() - 1)
                } else {
                    String::new()
                };
                push(
                    "fabric.gpus, gpus[].mig, gpus[].remapped_rows",
                    &format!("{}: no section for GPU {}{more}", fabric::SMI_Q, missing[0]),
                );
            }
            for (fact, why) in [
                ("fabric.gpus", q.iter().find_map(|g| g.fabric.why())),
                ("gpus[].mig", q.iter().find_map(|g| g.mig.why())),
                (
                    "gpus[].remapped_rows",
                    q.iter().find_map(|g| g.remapped_rows.why()),
                ),
            ] {
                if let Some(why) = why {
                    push(fact, why);
                }
            }
        }
        Tri::NotApplicable => {}
    }
    if let Some(why) = f.fabric.instances.why() {
        push("gpus[].mig.instances", why);
    }
    match fabric::platform(f) {
        Tri::Unknown(why) if n.seen_gpus > 0 => push("fabric.platform", &why),
        Tri::Known(Platform::Hgx) => {
            if let Some(why) = f.fabric.procs.why() {
                push("fabric.fabric_manager", why);
            }
            if let Some(why) = f.fabric.fm_version.why() {
                push("fabric.fabric_manager.version", why);
            }
        }
        Tri::Known(Platform::NvlRack) => {
            if let Some(why) = f.fabric.procs.why() {
                push("fabric.imex_running", why);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::model::parse::sections;
    use crate::model::{Code, Thresholds, assess, collect};

    const Q: &str = "cmd nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,pci.device_id,driver_version,compute_cap --format=csv,nounits";

    fn run(q: &str, lgi: Option<&str>) -> Vec<(Code, String)> {
        let b = "gpufleet-RAW";
        let mut raw = format!(
            "{b} {Q}\nindex, name, uuid, pci.bus_id, pci.device_id, driver_version, compute_cap\n\
             0, NVIDIA A100-SXM4-40GB, GPU-1, 00000000:07:00.0, 0x20B010DE, 570.1, 8.0\n\n{b} end ok\n\
             {b} cmd nvidia-smi -q\n{q}\n{b} end ok\n"
        );
        if let Some(l) = lgi {
            raw.push_str(&format!("{b} cmd nvidia-smi mig -lgi\n{l}\n{b} end rc 6\n"));
        }
        raw.push_str(&format!("{b} meta complete\n\n{b} end ok\n"));
        let f = collect(&sections::parse(raw.as_bytes(), b));
        assess(&f, &Thresholds::default())
            .reasons
            .into_iter()
            .map(|r| (r.code, r.message))
            .collect()
    }

    #[test]
    fn unparsable_sections_are_unknown_never_a_pass() {
        // A fabric state that is none of nvidia-smi's words.
        let r = run(
            "GPU 00000000:07:00.0\n    MIG Mode\n        Current : Disabled\n        Pending : Disabled\n    Remapped Rows\n        Pending : No\n        Remapping Failure Occurred : No\n    Fabric\n        State : Degraded\n        Status : N/A",
            None,
        );
        assert!(
            r.iter()
                .any(|(c, m)| *c == Code::FactUnknown && m.starts_with("fabric.gpus unknown")),
            "{r:?}"
        );
        assert!(!r.iter().any(|(c, _)| *c == Code::FabricNotReady));
        // MIG enabled and an instance table that does not parse.
        let r = run(
            "GPU 00000000:07:00.0\n    MIG Mode\n        Current : Enabled\n        Pending : Enabled\n    Remapped Rows\n        Pending : Yes\n        Remapping Failure Occurred : No\n    Fabric\n        State : N/A\n        Status : N/A",
            Some("Failed to display GPU instances: Insufficient Permissions"),
        );
        assert!(
            r.iter()
                .any(|(c, m)| *c == Code::FactUnknown
                    && m.starts_with("gpus[].mig.instances unknown")),
            "{r:?}"
        );
        assert!(!r.iter().any(|(c, _)| *c == Code::MigWithoutInstances));
        // A pending row remap is a GPU reset.
        assert!(
            r.iter()
                .any(|(c, m)| *c == Code::XidActionRequired && m.contains("row remap is pending")),
            "{r:?}"
        );
        // No block for the GPU nvidia-smi listed.
        let r = run("", None);
        assert!(
            r.iter()
                .any(|(c, m)| *c == Code::FactUnknown
                    && m.contains("no section for GPU 0000:07:00.0")),
            "{r:?}"
        );
    }
}
