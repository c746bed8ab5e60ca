//! GPUs and PCI: the PCI scan (/sys/bus/pci/devices), /proc/driver/nvidia/gpus and nvidia-smi
//! (its `cmd nvidia-smi …` sections), merged into one list of GPUs with the GPU tables.

use super::*;

/// What nvidia-smi said.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SmiOutcome {
    /// Not on PATH nor in the GPU Operator's driver root.
    NotInstalled,
    /// The probe stopped before it reached nvidia-smi.
    #[default]
    NotRun,
    Answered {
        command: String,
        gpus: Vec<SmiGpu>,
        /// Fields an earlier attempt was refused (old drivers reject `compute_cap`).
        rejected: Vec<String>,
    },
    Failed {
        command: String,
        failure: SmiFailure,
        /// The first lines of its output, for evidence.
        output: String,
    },
    /// Over the per-call time limit, or cut off by the node's deadline.
    TimedOut { command: String },
}

/// One GPU, merged from nvidia-smi, /proc/driver/nvidia/gpus, PCI and the GPU tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// nvidia-smi's index; else the position in bus-id order.
    pub index: u32,
    pub name: Option<String>,
    /// Lower-case `dddd:bb:dd.f`.
    pub bus_id: Option<String>,
    pub uuid: Option<String>,
    pub pci_device_id: Option<u16>,
    /// "major.minor" from nvidia-smi, else from data/nvidia-gpus.tsv.
    pub compute_capability: Option<String>,
    /// Whether the NVIDIA driver took this GPU: seen by nvidia-smi or in /proc/driver/nvidia/gpus.
    pub initialized: bool,
    pub evidence: Evidence,
}

/// The functions the probe's PCI summary sent in full; what it could not read or send is
/// pushed to `failed` (any of them could be a GPU).
fn pci_summary_buses<'a>(text: &'a str, failed: &mut Vec<String>) -> Vec<&'a str> {
    let s = sysfs::parse_pci_summary(text);
    for bus in &s.unreadable {
        failed.push(format!(
            "/sys/bus/pci/devices/{bus}: its vendor could not be read"
        ));
    }
    for bus in &s.not_regular {
        failed.push(format!(
            "/sys/bus/pci/devices/{bus}/vendor: a FIFO, socket or device, not a file (not read)"
        ));
    }
    if s.cut_unreadable > 0 {
        failed.push(format!(
            "{} more PCI functions whose vendor could not be read",
            s.cut_unreadable
        ));
    }
    if s.cut_full > 0 {
        failed.push(format!(
            "{} NVIDIA or network PCI functions past the 256 the probe sends in full",
            s.cut_full
        ));
    }
    if s.functions.is_none() {
        failed.push("the probe's PCI summary has no count of functions: cut short".into());
    }
    s.full
}

pub(super) fn pci_and_proc_gpus(out: &ProbeOutput, f: &mut Facts) {
    const PCI: &str = "/sys/bus/pci/devices";
    // The probe's summary of the functions (`meta`: the ones sent in full, the rest counted),
    // else, from an older probe, the folder's listing with every function's vendor.
    let summary = out.get(Kind::Meta, PCI).is_some();
    match read(out, if summary { Kind::Meta } else { Kind::Dir }, PCI) {
        Read::Absent => f.pci_gpus = Some(Vec::new()),
        Read::Failed(why) => f.unknown("gpus (PCI)", why),
        Read::Text(listing) => {
            // Every listed function's vendor, and the device and class of NVIDIA ones, must
            // have arrived: a function whose files are missing or unreadable could be a GPU.
            let mut gpus = Vec::new();
            let mut failed = Vec::new();
            let attr = |bus: &str, name: &str| -> Result<Option<u32>, String> {
                match read(out, Kind::File, &format!("{PCI}/{bus}/{name}")) {
                    Read::Text(t) => Ok(sysfs::parse_hex(&t)),
                    Read::Absent => Ok(None),
                    Read::Failed(why) => Err(why),
                }
            };
            let buses: Vec<&str> = if summary {
                pci_summary_buses(&listing, &mut failed)
            } else {
                listing
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect()
            };
            for bus in buses {
                let dev = attr(bus, "vendor").and_then(|vendor| {
                    if vendor != Some(0x10de) {
                        return Ok(None);
                    }
                    let (device, class) = (attr(bus, "device")?, attr(bus, "class")?);
                    // The bound driver: the link's last component; unbound or unread is None.
                    let (driver, driver_read) =
                        match read(out, Kind::Link, &format!("{PCI}/{bus}/driver")) {
                            Read::Text(t) => (
                                first_line(&t)
                                    .rsplit('/')
                                    .next()
                                    .filter(|d| !d.is_empty())
                                    .map(str::to_string),
                                true,
                            ),
                            Read::Absent => (None, true),
                            Read::Failed(_) => (None, false),
                        };
                    Ok(sysfs::normalize_bus_id(bus)
                        .zip(device)
                        .zip(class)
                        .and_then(|((bus_id, device), class)| {
                            Some(PciDevice {
                                bus_id,
                                device_id: u16::try_from(device).ok()?,
                                class,
                                driver,
                                driver_read,
                            })
                        }))
                });
                match dev {
                    Ok(Some(d)) if d.is_gpu() => gpus.push(d),
                    Ok(_) => {}
                    Err(why) => failed.push(why),
                }
            }
            if failed.is_empty() {
                f.pci_gpus = Some(gpus);
            } else {
                f.unknown("gpus (PCI)", failed.join("; "));
            }
        }
    }
    const PROC: &str = "/proc/driver/nvidia/gpus";
    match read(out, Kind::Dir, PROC) {
        Read::Absent => f.proc_gpus = Some(Vec::new()),
        Read::Failed(why) => f.unknown("gpus (driver)", why),
        Read::Text(listing) => {
            let mut gpus = Vec::new();
            let entries: Vec<&str> = listing
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            if entries.len() > MAX_GPUS {
                f.unknown(
                    "gpus (driver)",
                    format!(
                        "{PROC} lists {} entries; only the first {MAX_GPUS} are read",
                        entries.len()
                    ),
                );
            }
            for bus in entries.into_iter().take(MAX_GPUS) {
                let name = format!("{PROC}/{bus}/information");
                match read(out, Kind::File, &name) {
                    Read::Text(t) => gpus.push(sysfs::parse_information(bus, &t)),
                    // Listed by the driver even if its information file could not be read.
                    _ => gpus.push(sysfs::parse_information(bus, "")),
                }
            }
            f.proc_gpus = Some(gpus);
        }
    }
}

/// More GPUs than any node has: longer listings come from a broken or hostile node.
pub(super) const MAX_GPUS: usize = 1024;

pub(super) fn nvidia_smi(out: &ProbeOutput, f: &mut Facts) {
    // The query's attempts; `nvidia-smi -q` and `nvidia-smi mig -lgi` are fabric.rs's.
    let attempts: Vec<&Section> = out
        .with_prefix(Kind::Cmd, "nvidia-smi")
        .filter(|s| s.name != fabric::SMI_Q && s.name != fabric::LGI)
        .collect();
    let Some(last) = attempts.last() else {
        f.smi = SmiOutcome::NotRun;
        if !out.complete {
            f.unknown("gpus", "the probe stopped before nvidia-smi ran");
        }
        return;
    };
    let command = last.name.clone();
    let text = String::from_utf8_lossy(&last.body);
    let rejected: Vec<String> = attempts[..attempts.len() - 1]
        .iter()
        .filter_map(|s| smi::rejected_field(&String::from_utf8_lossy(&s.body)).map(str::to_string))
        .collect();
    f.smi = match &last.status {
        Status::MissingTool(t) if t == "nvidia-smi" => SmiOutcome::NotInstalled,
        // Not run, its output could not be bounded: what it would have said is unknown (the
        // GPU facts come from /proc and PCI, as without nvidia-smi), never "it failed".
        Status::MissingTool(_) | Status::NoTmp => {
            f.unknown(
                "nvidia-smi",
                match &last.status {
                    Status::MissingTool(t) => format!(
                        "not run: {t}, which the probe needs to bound its output, is not installed on the node"
                    ),
                    _ => "not run: no writable temporary folder on the node for its output"
                        .to_string(),
                },
            );
            SmiOutcome::NotInstalled
        }
        // Its output was not all read: what it printed first is not an answer.
        Status::Cut(cap) => SmiOutcome::Failed {
            command,
            failure: SmiFailure::Other(format!(
                "it printed more than the probe's {cap}-byte cap for its output (not read further)"
            )),
            output: head_lines(&text, 4),
        },
        // Cut by gpufleet's output cap, not by its time limit: what it said is unknown.
        Status::Incomplete if out.output_cap.is_some() => {
            f.unknown(
                "gpus",
                format!(
                    "nvidia-smi's output was cut off by gpufleet's {}-byte output cap",
                    out.output_cap.unwrap_or_default()
                ),
            );
            SmiOutcome::NotRun
        }
        Status::Timeout | Status::Incomplete => SmiOutcome::TimedOut { command },
        Status::Ok => match smi::parse_query(&text) {
            Ok(gpus) => SmiOutcome::Answered {
                command,
                gpus,
                rejected,
            },
            Err(e) => SmiOutcome::Failed {
                command,
                failure: SmiFailure::Other(e),
                output: head_lines(&text, 4),
            },
        },
        _ => SmiOutcome::Failed {
            command,
            failure: smi::classify_failure(&text),
            output: head_lines(&text, 4),
        },
    };
}

pub(super) fn head_lines(text: &str, n: usize) -> String {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .take(n)
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn cc_for(id: Option<u16>) -> Option<String> {
    gpudb::by_device_id(id?)?.compute_capability.clone()
}

pub(super) fn merge_gpus(f: &mut Facts) {
    let pci = f.pci_gpus.clone().unwrap_or_default();
    let pci_id = |bus: &Option<String>| {
        let bus = bus.as_ref()?;
        pci.iter().find(|d| &d.bus_id == bus).map(|d| d.device_id)
    };
    let mut gpus: Vec<Gpu> = Vec::new();
    if let SmiOutcome::Answered {
        command,
        gpus: rows,
        ..
    } = &f.smi
    {
        for (i, r) in rows.iter().enumerate() {
            let bus_id = r.bus_id.as_deref().and_then(sysfs::normalize_bus_id);
            let device_id = r
                .pci_device_id
                .or_else(|| pci_id(&bus_id))
                .or_else(|| r.name.as_deref().and_then(gpudb::device_id_by_name));
            gpus.push(Gpu {
                index: r.index.unwrap_or(i as u32),
                name: r.name.clone(),
                bus_id,
                uuid: r.uuid.clone(),
                pci_device_id: device_id,
                compute_capability: r.compute_cap.clone().or_else(|| cc_for(device_id)),
                initialized: true,
                evidence: Evidence::new(command.clone(), r.line.clone()),
            });
        }
    } else {
        let mut proc = f.proc_gpus.clone().unwrap_or_default();
        proc.sort_by(|a, b| a.bus_id.cmp(&b.bus_id));
        for (i, p) in proc.iter().enumerate() {
            let bus_id = Some(p.bus_id.clone());
            let device_id =
                pci_id(&bus_id).or_else(|| p.model.as_deref().and_then(gpudb::device_id_by_name));
            let source = format!("/proc/driver/nvidia/gpus/{}/information", p.bus_id);
            gpus.push(Gpu {
                index: i as u32,
                name: p.model.clone(),
                bus_id,
                uuid: p.uuid.clone(),
                pci_device_id: device_id,
                compute_capability: cc_for(device_id),
                initialized: true,
                evidence: Evidence::new(source, p.model_line.clone().unwrap_or_default()),
            });
        }
    }
    // PCI GPUs that neither nvidia-smi nor the driver list: not taken by the driver.
    // Saturating: nvidia-smi's index is the node's word, and may be u32::MAX.
    let mut next = gpus
        .iter()
        .map(|g| g.index.saturating_add(1))
        .max()
        .unwrap_or(0);
    let proc = f.proc_gpus.clone().unwrap_or_default();
    for d in &pci {
        if gpus
            .iter()
            .any(|g| g.bus_id.as_deref() == Some(d.bus_id.as_str()))
        {
            continue;
        }
        let model = gpudb::by_device_id(d.device_id);
        gpus.push(Gpu {
            index: next,
            name: model.map(|m| m.name.clone()),
            bus_id: Some(d.bus_id.clone()),
            uuid: None,
            pci_device_id: Some(d.device_id),
            compute_capability: model.and_then(|m| m.compute_capability.clone()),
            initialized: proc.iter().any(|p| p.bus_id == d.bus_id),
            evidence: pci_evidence(d),
        });
        next = next.saturating_add(1);
    }
    f.gpus = gpus;
}

/// Evidence for one NVIDIA PCI function: its sysfs path and its vendor, device and class.
pub fn pci_evidence(d: &PciDevice) -> Evidence {
    Evidence::new(
        format!("/sys/bus/pci/devices/{}", d.bus_id),
        format!(
            "vendor 0x10de device 0x{:04x} class 0x{:06x}",
            d.device_id, d.class
        ),
    )
}

#[cfg(test)]
mod tests {
    use crate::model::facts::{SmiOutcome, collect};
    use crate::model::parse::sections;
    use crate::model::parse::smi::SmiFailure;

    fn smi_with(status: &str, body: &str) -> SmiOutcome {
        facts_with(status, body).smi
    }

    fn facts_with(status: &str, body: &str) -> crate::model::facts::Facts {
        let raw = format!(
            "gpufleet-RAW cmd nvidia-smi --query-gpu=index --format=csv,nounits\n{body}\n\
             gpufleet-RAW end {status}\ngpufleet-RAW meta complete\n\ngpufleet-RAW end ok\n"
        );
        collect(&sections::parse(raw.as_bytes(), "gpufleet-RAW"))
    }

    fn unknown_why(status: &str) -> String {
        let f = facts_with(status, "");
        assert_eq!(f.smi, SmiOutcome::NotInstalled);
        f.unknowns
            .iter()
            .find(|u| u.fact == "nvidia-smi")
            .map(|u| u.why.clone())
            .unwrap_or_default()
    }

    fn failure(o: &SmiOutcome) -> String {
        match o {
            SmiOutcome::Failed {
                failure: SmiFailure::Other(m),
                ..
            } => m.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_cut_nvidia_smi_is_a_failure_and_an_unbounded_one_is_unknown() {
        // The first 4 KiB of an output over the cap look like an answer: they are not one.
        let cut = smi_with("cut 262144", "index\n0");
        assert!(
            failure(&cut).contains("more than the probe's 262144-byte cap"),
            "{cut:?}"
        );
        // Not run (it could not be bounded): unknown, not a failure of nvidia-smi.
        assert!(unknown_why("no-tmp").contains("no writable temporary folder"));
        assert!(unknown_why("missing-tool head").contains("not run: head"));
        assert_eq!(
            smi_with("missing-tool nvidia-smi", ""),
            SmiOutcome::NotInstalled
        );
        assert!(matches!(
            smi_with("ok", "index\n0"),
            SmiOutcome::Answered { .. }
        ));
    }
}
