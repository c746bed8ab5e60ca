//! `nvidia-smi -q` (the per-GPU report; the probe keeps its GPU headers, every top-level field and
//! the second-level `Current`, `Pending`, `State`, `Status` and `Remapping Failure Occurred`
//! lines) and `nvidia-smi mig -lgi` (the GPU instance table). Pure: no I/O. docs/domain.md,
//! "Schema 3": facts `fabric.gpus[]`, `gpus[].mig`, `gpus[].remapped_rows`.
//!
//! `nvidia-smi -q` prints one block per GPU, `GPU 00000000:18:00.0`, then `Key : value` lines
//! indented by four spaces per level; a line without ` : ` opens a level (`    MIG Mode`,
//! `    Fabric`, `    Remapped Rows`). Keys here are paths joined with `/` (`Fabric/State`).

use std::collections::BTreeMap;

use super::sysfs::normalize_bus_id;

/// One `Key : value` line: the value and the raw line (for evidence).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub value: String,
    pub line: String,
}

/// One GPU's block of `nvidia-smi -q`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QGpu {
    /// Lower-case `dddd:bb:dd.f` from the `GPU 00000000:18:00.0` header.
    pub bus_id: String,
    /// The header line as printed.
    pub header: String,
    /// `Key : value` by path (`Product Name`, `MIG Mode/Current`, `Fabric/State`); the first one
    /// wins when a path repeats. At most [`MAX_FIELDS`] per GPU.
    pub fields: BTreeMap<String, Field>,
}

impl QGpu {
    pub fn get(&self, path: &str) -> Option<&Field> {
        self.fields.get(path)
    }
}

/// More fields than a GPU block has (about 250 in a full report): the rest are dropped.
pub const MAX_FIELDS: usize = 4096;
/// More GPU blocks than any node has.
pub const MAX_GPUS: usize = 1024;

/// Parses `nvidia-smi -q` into its GPU blocks (lines before the first `GPU <bus>` header, the
/// driver and CUDA versions, are not a GPU's). A header whose bus id does not parse opens no
/// block: its lines are dropped.
pub fn parse_q(text: &str) -> Vec<QGpu> {
    let mut gpus: Vec<QGpu> = Vec::new();
    let mut open = false;
    // The open levels: (indent, name).
    let mut stack: Vec<(usize, String)> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start_matches(' ').len();
        if indent == 0 {
            open = false;
            if let Some(bus) = line.strip_prefix("GPU ")
                && gpus.len() < MAX_GPUS
                && let Some(bus_id) = normalize_bus_id(bus)
            {
                gpus.push(QGpu {
                    bus_id,
                    header: line.to_string(),
                    fields: BTreeMap::new(),
                });
                open = true;
                stack.clear();
            }
            continue;
        }
        let Some(gpu) = gpus.last_mut().filter(|_| open) else {
            continue;
        };
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let body = line.trim();
        match body.split_once(" : ").or_else(|| {
            // `Key :` with an empty value.
            body.strip_suffix(" :").map(|k| (k, ""))
        }) {
            Some((key, value)) => {
                let key = key.trim();
                if key.is_empty() || gpu.fields.len() >= MAX_FIELDS {
                    continue;
                }
                let mut path: Vec<&str> = stack.iter().map(|(_, n)| n.as_str()).collect();
                path.push(key);
                gpu.fields.entry(path.join("/")).or_insert_with(|| Field {
                    value: value.trim().to_string(),
                    line: line.to_string(),
                });
            }
            None => {
                if stack.len() < 16 {
                    stack.push((indent, body.to_string()));
                }
            }
        }
    }
    gpus
}

/// A MIG mode value (`Enabled`, `Disabled`, `N/A`), as nvidia-smi prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Enabled,
    Disabled,
    NotApplicable,
}

/// Parses a MIG mode word; `None` for anything else.
pub fn mode(value: &str) -> Option<Mode> {
    match value.trim() {
        "Enabled" => Some(Mode::Enabled),
        "Disabled" => Some(Mode::Disabled),
        "N/A" | "Not Supported" => Some(Mode::NotApplicable),
        _ => None,
    }
}

/// A GPU's fabric state (`Fabric/State`), as nvidia-smi prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricState {
    Completed,
    InProgress,
    NotStarted,
    /// `N/A` or `Not Supported`: the fabric does not apply to this GPU.
    NotApplicable,
}

impl FabricState {
    pub fn as_str(self) -> &'static str {
        match self {
            FabricState::Completed => "Completed",
            FabricState::InProgress => "In Progress",
            FabricState::NotStarted => "Not Started",
            FabricState::NotApplicable => "N/A",
        }
    }
}

/// Parses a fabric state word; `None` for anything else (unknown, never a pass).
pub fn fabric_state(value: &str) -> Option<FabricState> {
    match value.trim() {
        "Completed" => Some(FabricState::Completed),
        "In Progress" => Some(FabricState::InProgress),
        "Not Started" => Some(FabricState::NotStarted),
        "N/A" | "Not Supported" => Some(FabricState::NotApplicable),
        _ => None,
    }
}

/// `Yes` / `No`; `None` for anything else (`N/A` included: the caller decides what it means).
pub fn yes_no(value: &str) -> Option<bool> {
    match value.trim() {
        "Yes" => Some(true),
        "No" => Some(false),
        _ => None,
    }
}

/// One row of `nvidia-smi mig -lgi`: `|   0  MIG 1g.5gb       19        7          0:1     |`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInstance {
    /// nvidia-smi's GPU index.
    pub gpu: u32,
    /// The profile name (`MIG 1g.5gb`).
    pub profile: String,
    pub profile_id: u32,
    pub instance_id: u32,
    /// `Start:Size`.
    pub placement: String,
    pub line: String,
}

/// Parses `nvidia-smi mig -lgi`: `Ok(rows)` for the table, `Ok([])` for `No GPU instances
/// found`, `Err(why)` for anything else (a table row that does not parse, no table at all).
pub fn parse_lgi(text: &str) -> Result<Vec<GpuInstance>, String> {
    let t = text.trim();
    if t.starts_with("No GPU instances found") {
        return Ok(Vec::new());
    }
    if !t.lines().any(|l| l.contains("GPU instances:")) {
        let first = t
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(120)
            .collect::<String>();
        return Err(format!("not a GPU instance table: {first:?}"));
    }
    let mut rows = Vec::new();
    let mut body = false;
    for line in t.lines() {
        let l = line.trim();
        if l.starts_with("|=") {
            body = true;
            continue;
        }
        if !body || l.starts_with('+') || l.is_empty() {
            continue;
        }
        let inner = l.trim_start_matches('|').trim_end_matches('|');
        let words: Vec<&str> = inner.split_whitespace().collect();
        // GPU, "MIG", "<profile>", profile id, instance id, placement.
        let parsed = match words.as_slice() {
            [gpu, mig, prof, pid, iid, place] if *mig == "MIG" && place.contains(':') => gpu
                .parse()
                .ok()
                .zip(pid.parse().ok())
                .zip(iid.parse().ok())
                .map(|((gpu, profile_id), instance_id)| GpuInstance {
                    gpu,
                    profile: format!("MIG {prof}"),
                    profile_id,
                    instance_id,
                    placement: place.to_string(),
                    line: line.to_string(),
                }),
            _ => None,
        };
        match parsed {
            Some(r) if rows.len() < 4096 => rows.push(r),
            Some(_) => {}
            None => return Err(format!("a GPU instance row that does not parse: {l:?}")),
        }
    }
    if !body {
        return Err("a GPU instance table without its header rule".into());
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The real H200's `nvidia-smi -q` (tests/fixtures/nodes/h200-open-580-k6.18-real), excerpt.
    const H200: &str = r#"
==============NVSMI LOG==============

Driver Version                                         : 580.159.04

Attached GPUs                                          : 1
GPU 00000000:00:06.0
    Product Name                                       : NVIDIA H200
    MIG Mode
        Current                                        : Disabled
        Pending                                        : Disabled
    GPU Recovery Action                                : None
    Remapped Rows
        Correctable Error                              : 0
        Pending                                        : No
        Remapping Failure Occurred                     : No
        Bank Remap Availability Histogram
            Max                                        : 3072 bank(s)
    Fabric
        State                                          : N/A
        Status                                         : N/A
        Health
            Summary                                    : N/A
    Processes                                          : None
"#;

    #[test]
    fn the_real_h200() {
        let g = parse_q(H200);
        assert_eq!(g.len(), 1);
        let g = &g[0];
        assert_eq!(g.bus_id, "0000:00:06.0");
        assert_eq!(g.get("Product Name").unwrap().value, "NVIDIA H200");
        assert_eq!(g.get("MIG Mode/Current").unwrap().value, "Disabled");
        assert_eq!(g.get("Remapped Rows/Pending").unwrap().value, "No");
        assert_eq!(
            g.get("Remapped Rows/Bank Remap Availability Histogram/Max")
                .unwrap()
                .value,
            "3072 bank(s)"
        );
        assert_eq!(
            fabric_state(&g.get("Fabric/State").unwrap().value),
            Some(FabricState::NotApplicable)
        );
        assert_eq!(g.get("Fabric/Health/Summary").unwrap().value, "N/A");
        assert_eq!(g.get("Processes").unwrap().value, "None");
        assert!(g.get("Driver Version").is_none());
    }

    #[test]
    fn several_gpus_and_words() {
        let t = "GPU 00000000:1B:00.0\n    Fabric\n        State : In Progress\n        Status : N/A\n\
                 GPU 00000000:43:00.0\n    Fabric\n        State : Completed\n        Status : Success\n\
                 GPU garbage\n    Fabric\n        State : Completed\n";
        let g = parse_q(t);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].bus_id, "0000:1b:00.0");
        assert_eq!(
            fabric_state(&g[0].get("Fabric/State").unwrap().value),
            Some(FabricState::InProgress)
        );
        assert_eq!(g[1].get("Fabric/Status").unwrap().value, "Success");
        assert_eq!(fabric_state("Degraded"), None);
        assert_eq!(mode("Enabled"), Some(Mode::Enabled));
        assert_eq!(mode("Enabled*"), None);
        assert_eq!(yes_no("N/A"), None);
    }

    #[test]
    fn lgi_tables() {
        // NVIDIA/k8s-device-plugin#257 and the A100 docs' layout.
        let t = "+----------------------------------------------------+\n\
| GPU instances:                                     |\n\
| GPU   Name          Profile  Instance   Placement  |\n\
|                       ID       ID       Start:Size |\n\
|====================================================|\n\
|   0  MIG 1g.5gb       19        7          0:1     |\n\
+----------------------------------------------------+\n\
|   0  MIG 1g.5gb       19        8          1:1     |\n\
+----------------------------------------------------+\n";
        let rows = parse_lgi(t).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].profile, "MIG 1g.5gb");
        assert_eq!(rows[1].instance_id, 8);
        assert_eq!(rows[1].placement, "1:1");
        assert_eq!(
            parse_lgi("No GPU instances found: Not Found\n").unwrap(),
            vec![]
        );
        assert!(parse_lgi("No MIG-enabled devices found.\n").is_err());
        assert!(parse_lgi(&t.replace("  19  ", "  xx  ")).is_err());
        assert!(parse_lgi("").is_err());
    }
}
