//! How `policy generate` splits a fleet into driver pools, which module parameters a pool keeps,
//! and which driver version it gets (docs/domain.md, "Policy generate").

use std::collections::BTreeMap;

use crate::model::facts::{branches, gpudb};
use crate::model::report::NodeReport;
use crate::policy::ModuleType;

/// The first release of the open kernel modules (NVIDIA/open-gpu-kernel-modules README).
pub const OPEN_FIRST: &str = "515.43.04";

/// One GPU of a node as the pool rules see it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuFacts {
    pub name: String,
    pub device_id: Option<u16>,
    pub architecture: String,
    pub compute_capability: f64,
}

/// The architecture of a compute capability, where the PCI id table does not name the GPU
/// (NVIDIA's CUDA GPU list: 3.x Kepler, 5.x Maxwell, 6.x Pascal, 7.0/7.2 Volta, 7.5 Turing,
/// 8.0/8.6/8.7 Ampere, 8.9 Ada Lovelace, 9.0 Hopper, 10.x/12.x Blackwell).
fn architecture_of_cc(cc: f64) -> Option<&'static str> {
    Some(match cc {
        c if (3.0..4.0).contains(&c) => "Kepler",
        c if (5.0..6.0).contains(&c) => "Maxwell",
        c if (6.0..7.0).contains(&c) => "Pascal",
        c if (7.0..7.5).contains(&c) => "Volta",
        c if (7.5..8.0).contains(&c) => "Turing",
        c if (8.0..8.9).contains(&c) => "Ampere",
        c if (8.9..9.0).contains(&c) => "Ada Lovelace",
        c if (9.0..10.0).contains(&c) => "Hopper",
        c if (10.0..13.0).contains(&c) => "Blackwell",
        _ => return None,
    })
}

/// The GPUs of a node, or why they cannot be judged: `Ok(vec![])` is a node without GPUs;
/// `Err` a node whose GPUs are unknown (unreachable, or a GPU of unknown compute capability).
pub fn gpus_of(n: &NodeReport) -> Result<Vec<GpuFacts>, String> {
    let Some(gpus) = &n.gpus else {
        return Err(format!(
            "its GPUs are unknown in the snapshot (status {})",
            n.status.as_str()
        ));
    };
    let mut out = Vec::new();
    for g in gpus {
        let id = g
            .pci_device_id
            .as_deref()
            .and_then(|s| u16::from_str_radix(s.trim_start_matches("0x"), 16).ok());
        let model = id.and_then(gpudb::by_device_id);
        let cc = g
            .compute_capability
            .clone()
            .or_else(|| model.and_then(|m| m.compute_capability.clone()))
            .and_then(|c| c.parse::<f64>().ok());
        let name = g
            .name
            .clone()
            .or_else(|| model.map(|m| m.name.clone()))
            .unwrap_or_else(|| format!("GPU {}", g.index));
        let Some(cc) = cc else {
            return Err(format!("{name}: its compute capability is unknown"));
        };
        let architecture = model
            .map(|m| m.architecture.clone())
            .filter(|a| !a.is_empty())
            .or_else(|| architecture_of_cc(cc).map(str::to_string))
            .ok_or_else(|| {
                format!("{name}: compute capability {cc} is of no known architecture")
            })?;
        out.push(GpuFacts {
            name,
            device_id: id,
            architecture,
            compute_capability: cc,
        });
    }
    Ok(out)
}

/// The module type a set of GPUs needs: open from Turing (7.5) on, proprietary before.
pub fn module_type_for(gpus: &[GpuFacts]) -> ModuleType {
    if gpus.iter().any(|g| g.compute_capability < 7.5) {
        ModuleType::Proprietary
    } else {
        ModuleType::Open
    }
}

/// A pool's name from its architectures: lower case, `-` for spaces, `+` joined becomes `-`
/// (a label value and an object name both accept it): `volta`, `ada-lovelace`, `ampere-hopper`.
pub fn pool_name(architectures: &[String]) -> String {
    architectures
        .iter()
        .map(|a| a.to_ascii_lowercase().replace(' ', "-"))
        .collect::<Vec<_>>()
        .join("-")
}

/// What a pool's GPUs allow: the newest branch (`max_branch`, from data/driver-branches.toml's
/// `last_branch`) and the lowest version (`min_version`, its `[[gpu]]` rows, and 515.43.04 for
/// open modules), each with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Range {
    pub max_branch: Option<(u32, String)>,
    pub min_version: Option<(Vec<u64>, String, String)>,
}

pub fn range_of(gpus: &[GpuFacts], module_type: ModuleType) -> Range {
    let mut r = Range::default();
    let mut raise = |v: &str, why: String| {
        if let Some(p) = crate::policy::version_parts(v)
            && r.min_version.as_ref().is_none_or(|(m, _, _)| p > *m)
        {
            r.min_version = Some((p, v.to_string(), why));
        }
    };
    if module_type == ModuleType::Open {
        raise(
            OPEN_FIRST,
            "the first release of the open kernel modules".into(),
        );
    }
    for g in gpus {
        if let Some(m) = g.device_id.and_then(branches::gpu_minimum) {
            raise(
                &m.min_version,
                format!("{}: \"{}\" ({})", g.name, m.quote, m.source),
            );
        }
    }
    for g in gpus {
        if let Some(last) = branches::last_branch(&g.architecture)
            && r.max_branch
                .as_ref()
                .is_none_or(|(b, _)| last.last_branch < *b)
        {
            r.max_branch = Some((
                last.last_branch,
                format!(
                    "{} ({}): its last driver branch is {} ({})",
                    g.name,
                    g.architecture,
                    last.last_branch,
                    branches::source()
                ),
            ));
        }
    }
    r
}

/// Why `version` does not fit `range`, if it does not.
pub fn misfit(version: &str, range: &Range) -> Option<String> {
    let Some(parts) = crate::policy::version_parts(version) else {
        return Some(format!(
            "driver version {version:?} is not a release number (such as 580.126.20)"
        ));
    };
    if let Some((max, why)) = &range.max_branch
        && branches::branch_of(version).is_some_and(|b| b > *max)
    {
        return Some(format!(
            "driver {version} is past the branch it allows: {why}"
        ));
    }
    if let Some((min, text, why)) = &range.min_version
        && parts < *min
    {
        return Some(format!(
            "driver {version} is below {text}, the lowest it allows: {why}"
        ));
    }
    None
}

/// The driver to propose for a pool: the newest dated release of data/driver-branches.toml
/// (`[[release]]`) of an operator release no newer than `operator_minor`, that fits `range`.
/// `Err` says why none does.
pub fn propose(
    range: &Range,
    operator_minor: &str,
) -> Result<&'static branches::DriverRelease, String> {
    let minor = |s: &str| -> Option<(u32, u32)> {
        let (a, b) = s.split_once('.')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    let limit = minor(operator_minor);
    let mut rows: Vec<&branches::DriverRelease> = branches::releases()
        .iter()
        .filter(|r| limit.is_none() || minor(&r.operator) <= limit)
        .collect();
    rows.sort_by(|a, b| a.date.cmp(&b.date));
    rows.iter()
        .rev()
        .find(|r| misfit(&r.version, range).is_none())
        .copied()
        .ok_or_else(|| {
            let newest = rows.last().map(|r| r.version.as_str()).unwrap_or("none");
            format!(
                "no dated driver release up to GPU Operator {operator_minor} fits (newest {newest}){}",
                misfit(newest, range)
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default()
            )
        })
}

/// Module parameter keys that never go into nvidia.conf: ignored since 545.23.06, or
/// meaningless under the open module (it always uses GSP firmware:
/// NVIDIA/open-gpu-kernel-modules#820).
const DROPPED: [(&str, &str); 2] = [
    (
        "OpenRmEnableUnsupportedGpus",
        "ignored since driver 545.23.06",
    ),
    (
        "EnableGpuFirmware",
        "the open module always uses GSP firmware",
    ),
];

fn safe_key(k: &str) -> bool {
    !k.is_empty() && k.len() <= 128 && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn safe_value(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 256
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.,;:=/+-\"".contains(c))
}

/// Integers compare as numbers (decimal or 0x hex); anything else as text without quotes (as
/// `policy check --against` compares them).
pub fn same_value(a: &str, b: &str) -> bool {
    let num = |s: &str| {
        let s = s.trim().trim_matches('"');
        match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(h) => i64::from_str_radix(h, 16).ok(),
            None => s.parse::<i64>().ok(),
        }
    };
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.trim().trim_matches('"') == b.trim().trim_matches('"'),
    }
}

/// The module parameters a pool keeps: a key whose value every node of the pool configures
/// alike *and* has in effect (/proc/driver/nvidia/params). Returns (kept `NVreg_` keys and
/// values, and for each key left out the reason per node).
pub fn pool_params(nodes: &[&NodeReport]) -> (Vec<(String, String)>, Vec<String>) {
    let mut notes = Vec::new();
    // key → node → configured value (and its source).
    let mut keys: BTreeMap<String, BTreeMap<String, (String, String)>> = BTreeMap::new();
    for n in nodes {
        for p in n
            .module_params
            .as_ref()
            .and_then(|m| m.configured.as_ref())
            .into_iter()
            .flatten()
        {
            if let Some((_, why)) = DROPPED.iter().find(|(k, _)| *k == p.key) {
                notes.push(format!(
                    "{}: NVreg_{}={} ({}) left out: {why}",
                    n.name, p.key, p.value, p.source
                ));
                continue;
            }
            if !safe_key(&p.key) || !safe_value(&p.value) {
                notes.push(format!(
                    "{}: an option from {} left out: its key or value has characters nvidia.conf cannot carry safely",
                    n.name, p.source
                ));
                continue;
            }
            keys.entry(p.key.clone())
                .or_default()
                .insert(n.name.clone(), (p.value.clone(), p.source.clone()));
        }
    }
    let mut kept = Vec::new();
    for (key, set) in &keys {
        let Some((value, _)) = set.values().next() else {
            continue;
        };
        let mut why = Vec::new();
        for n in nodes {
            let in_effect = n.module_params.as_ref().and_then(|m| m.in_effect.as_ref());
            let now = in_effect.and_then(|m| m.get(key));
            match set.get(&n.name) {
                None => why.push(format!(
                    "{}: not configured{}",
                    n.name,
                    now.map(|v| format!(" (in effect: {v})")).unwrap_or_default()
                )),
                Some((v, _)) if !same_value(v, value) => {
                    why.push(format!("{}: configured {v}, not {value}", n.name))
                }
                Some((v, src)) => match (in_effect, now) {
                    (None, _) => why.push(format!(
                        "{}: configured {v} ({src}), but its parameters in effect are unknown",
                        n.name
                    )),
                    (Some(_), None) => why.push(format!(
                        "{}: configured {v} ({src}), but the loaded module does not list it in /proc/driver/nvidia/params",
                        n.name
                    )),
                    (Some(_), Some(e)) if !same_value(e, v) => why.push(format!(
                        "{}: configured {v} ({src}), but not in effect (/proc/driver/nvidia/params: {e})",
                        n.name
                    )),
                    _ => {}
                },
            }
        }
        if why.is_empty() {
            kept.push((key.clone(), value.clone()));
        } else {
            notes.push(format!("NVreg_{key} left out: {}", why.join("; ")));
        }
    }
    (kept, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(name: &str, id: u16, arch: &str, cc: f64) -> GpuFacts {
        GpuFacts {
            name: name.into(),
            device_id: Some(id),
            architecture: arch.into(),
            compute_capability: cc,
        }
    }

    #[test]
    fn ranges_follow_the_branch_table() {
        let v100 = [gpu("V100", 0x1DB5, "Volta", 7.0)];
        let r = range_of(&v100, ModuleType::Proprietary);
        assert_eq!(r.max_branch.as_ref().map(|m| m.0), Some(580));
        assert!(misfit("595.91.07", &r).is_some_and(|w| w.contains("580")));
        assert_eq!(misfit("580.126.20", &r), None);
        assert_eq!(
            propose(&r, "26.7").map(|p| p.version.as_str()),
            Ok("580.126.20")
        );

        let b200 = [gpu("B200", 0x2901, "Blackwell", 10.0)];
        let r = range_of(&b200, ModuleType::Open);
        assert!(misfit("565.57.01", &r).is_some_and(|w| w.contains("570.133.20")));
        assert_eq!(misfit("570.133.20", &r), None);
        assert_eq!(
            propose(&r, "26.7").map(|p| p.version.as_str()),
            Ok("595.91.07")
        );
        assert_eq!(
            propose(&r, "26.3").map(|p| p.version.as_str()),
            Ok("580.126.20")
        );
        assert!(misfit("r595", &r).is_some());

        let t4 = [gpu("T4", 0x1EB8, "Turing", 7.5)];
        assert!(misfit("470.256.02", &range_of(&t4, ModuleType::Open)).is_some());
    }

    #[test]
    fn names_and_module_types() {
        assert_eq!(pool_name(&["Ada Lovelace".into()]), "ada-lovelace");
        assert_eq!(
            pool_name(&["Ampere".into(), "Hopper".into()]),
            "ampere-hopper"
        );
        assert_eq!(
            module_type_for(&[gpu("T4", 0x1EB8, "Turing", 7.5)]),
            ModuleType::Open
        );
        assert_eq!(
            module_type_for(&[
                gpu("T4", 0x1EB8, "Turing", 7.5),
                gpu("P100", 0x15F8, "Pascal", 6.0)
            ]),
            ModuleType::Proprietary
        );
        assert_eq!(architecture_of_cc(7.2), Some("Volta"));
        assert_eq!(architecture_of_cc(12.0), Some("Blackwell"));
        assert_eq!(architecture_of_cc(1.0), None);
    }
}
