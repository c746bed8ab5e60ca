//! The NVLink fabric, MIG and row remapping of each GPU (`cmd nvidia-smi -q`), the GPU
//! instances (`cmd nvidia-smi mig -lgi`), the fabric daemons (`meta processes`, `cmd
//! nv-fabricmanager --version`) and the NVSwitch PCI functions: docs/domain.md "Schema 3", "New
//! facts". Every fact is three-valued: a value, n/a, or unknown with why ([`Tri`]).

use super::*;
use crate::model::parse::smiq::{self, FabricState, GpuInstance, Mode, QGpu};

/// A value, not applicable to this node or GPU, or unknown (with why).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Tri<T> {
    Known(T),
    #[default]
    NotApplicable,
    Unknown(String),
}

impl<T> Tri<T> {
    pub fn known(&self) -> Option<&T> {
        match self {
            Tri::Known(v) => Some(v),
            _ => None,
        }
    }
    pub fn why(&self) -> Option<&str> {
        match self {
            Tri::Unknown(w) => Some(w),
            _ => None,
        }
    }
}

/// A GPU's MIG mode (`MIG Mode`: `Current`, `Pending`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigMode {
    pub current: Mode,
    pub pending: Mode,
    pub evidence: Vec<Evidence>,
}

impl MigMode {
    /// Enabled now, or after the next GPU reset.
    pub fn enabled(&self) -> bool {
        self.current == Mode::Enabled || self.pending == Mode::Enabled
    }
}

/// A GPU's fabric (`Fabric`: `State`, `Status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuFabric {
    pub state: FabricState,
    /// `Success`, `N/A` or a failure text, as printed (empty when the line is missing).
    pub status: String,
    pub evidence: Vec<Evidence>,
}

impl GpuFabric {
    /// The GPU's fabric is not ready: `In Progress`, `Not Started`, or `Completed` with a
    /// status other than `Success`.
    pub fn not_ready(&self) -> bool {
        match self.state {
            FabricState::InProgress | FabricState::NotStarted => true,
            FabricState::Completed => self.status != "Success",
            FabricState::NotApplicable => false,
        }
    }
}

/// A GPU's row remapping (`Remapped Rows`: `Pending`, `Remapping Failure Occurred`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remap {
    pub pending: bool,
    pub failed: bool,
    pub evidence: Vec<Evidence>,
}

/// What `nvidia-smi -q` says of one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuQ {
    pub bus_id: String,
    pub name: Option<String>,
    pub mig: Tri<MigMode>,
    pub fabric: Tri<GpuFabric>,
    pub remapped_rows: Tri<Remap>,
}

/// A process of the fabric's: `nv-fabricmanage` (the kernel keeps 15 bytes of a command name,
/// so `nv-fabricmanager` reads so in /proc/<pid>/comm), `nvlsm`, `nvidia-imex`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricProc {
    pub pid: u32,
    pub name: String,
}

/// `fabric` in the JSON, and the per-GPU MIG and row-remapping facts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FabricFacts {
    /// Per GPU of `nvidia-smi -q`; n/a when nvidia-smi did not answer its query (its own
    /// reasons say why), unknown when `-q` failed or was cut.
    pub gpus: Tri<Vec<GpuQ>>,
    /// The `nvidia-smi -q` command's section name, for evidence.
    pub command: String,
    /// GPU instances (`nvidia-smi mig -lgi`): n/a unless a GPU has MIG enabled.
    pub instances: Tri<Vec<GpuInstance>>,
    /// NVIDIA PCI functions of class 0x0680xx (NVSwitch); unknown with the PCI scan.
    pub nvswitch_functions: Tri<u32>,
    /// The fabric daemons running (`meta processes`); unknown when /proc could not be listed.
    pub procs: Tri<Vec<FabricProc>>,
    /// `/usr/bin/nvidia-imex` is installed (from `meta processes`).
    pub imex_installed: Option<bool>,
    /// `nv-fabricmanager --version`: the version; n/a when not run (no nv-fabricmanager
    /// running).
    pub fm_version: Tri<(String, Evidence)>,
}

pub const SMI_Q: &str = "nvidia-smi -q";
pub const LGI: &str = "nvidia-smi mig -lgi";
pub const PROCS: &str = "processes";
pub const FM_VERSION: &str = "nv-fabricmanager --version";

fn ev(cmd: &str, f: &smiq::Field) -> Evidence {
    Evidence::new(cmd, f.line.trim_end())
}

/// One GPU's block.
fn gpu_q(cmd: &str, g: &QGpu) -> GpuQ {
    let missing = |what: &str| format!("{cmd}: no {what} line for GPU {}", g.bus_id);
    let mig = match (
        g.get("MIG Mode/Current"),
        g.get("MIG Mode/Pending"),
        g.get("MIG Mode"),
    ) {
        (Some(c), Some(p), _) => match (smiq::mode(&c.value), smiq::mode(&p.value)) {
            (Some(Mode::NotApplicable), _) => Tri::NotApplicable,
            (Some(current), Some(pending)) => Tri::Known(MigMode {
                current,
                pending,
                evidence: vec![ev(cmd, c), ev(cmd, p)],
            }),
            _ => Tri::Unknown(format!(
                "{cmd}: GPU {}: MIG mode {:?} / {:?} is not Enabled, Disabled or N/A",
                g.bus_id, c.value, p.value
            )),
        },
        (_, _, Some(m)) if smiq::mode(&m.value) == Some(Mode::NotApplicable) => Tri::NotApplicable,
        _ => Tri::Unknown(missing("MIG Mode Current/Pending")),
    };
    let fabric = match g.get("Fabric/State") {
        Some(s) => match smiq::fabric_state(&s.value) {
            Some(FabricState::NotApplicable) => Tri::NotApplicable,
            Some(state) => {
                let st = g.get("Fabric/Status");
                let mut evidence = vec![ev(cmd, s)];
                evidence.extend(st.map(|x| ev(cmd, x)));
                Tri::Known(GpuFabric {
                    state,
                    status: st.map(|x| x.value.clone()).unwrap_or_default(),
                    evidence,
                })
            }
            None => Tri::Unknown(format!(
                "{cmd}: GPU {}: fabric state {:?} is not Completed, In Progress, Not Started, Not Supported or N/A",
                g.bus_id, s.value
            )),
        },
        None if g
            .get("Fabric")
            .is_some_and(|f| smiq::fabric_state(&f.value) == Some(FabricState::NotApplicable)) =>
        {
            Tri::NotApplicable
        }
        None => Tri::Unknown(missing("Fabric State")),
    };
    let remapped_rows = match (
        g.get("Remapped Rows/Pending"),
        g.get("Remapped Rows/Remapping Failure Occurred"),
        g.get("Remapped Rows"),
    ) {
        (Some(p), Some(fl), _) => match (smiq::yes_no(&p.value), smiq::yes_no(&fl.value)) {
            (Some(pending), Some(failed)) => Tri::Known(Remap {
                pending,
                failed,
                evidence: vec![ev(cmd, p), ev(cmd, fl)],
            }),
            _ if p.value == "N/A" => Tri::NotApplicable,
            _ => Tri::Unknown(format!(
                "{cmd}: GPU {}: remapped rows {:?} / {:?} are not Yes or No",
                g.bus_id, p.value, fl.value
            )),
        },
        // GPUs before Ampere: `Remapped Rows : N/A`.
        (_, _, Some(r)) if r.value == "N/A" => Tri::NotApplicable,
        _ => Tri::Unknown(missing("Remapped Rows Pending/Remapping Failure Occurred")),
    };
    GpuQ {
        bus_id: g.bus_id.clone(),
        name: g.get("Product Name").map(|f| f.value.clone()),
        mig,
        fabric,
        remapped_rows,
    }
}

pub(super) fn collect(out: &ProbeOutput, f: &mut Facts) {
    let fx = &mut f.fabric;
    fx.command = SMI_Q.to_string();
    let answered = matches!(f.smi, SmiOutcome::Answered { .. });
    fx.gpus = match read(out, Kind::Cmd, SMI_Q) {
        Read::Text(t) => Tri::Known(smiq::parse_q(&t).iter().map(|g| gpu_q(SMI_Q, g)).collect()),
        // The probe runs `-q` only after the query answered: without it, n/a.
        _ if !answered => Tri::NotApplicable,
        Read::Absent => Tri::Unknown(format!("{SMI_Q}: no answer")),
        Read::Failed(why) => Tri::Unknown(why),
    };
    let mig_on = fx.gpus.known().is_some_and(|g| {
        g.iter()
            .any(|g| g.mig.known().is_some_and(MigMode::enabled))
    });
    fx.instances = match read(out, Kind::Cmd, LGI) {
        Read::Text(t) => match smiq::parse_lgi(&t) {
            Ok(rows) => Tri::Known(rows),
            Err(why) => Tri::Unknown(format!("{LGI}: {why}")),
        },
        _ if !mig_on => Tri::NotApplicable,
        Read::Absent => Tri::Unknown(format!("{LGI}: no answer")),
        // `No GPU instances found: Not Found` comes with exit 6: the body decides.
        Read::Failed(why) => match out.get(Kind::Cmd, LGI) {
            Some(s) if matches!(s.status, Status::Rc(_)) => {
                match smiq::parse_lgi(&String::from_utf8_lossy(&s.body)) {
                    Ok(rows) => Tri::Known(rows),
                    Err(e) => Tri::Unknown(format!("{why}: {e}")),
                }
            }
            _ => Tri::Unknown(why),
        },
    };
    fx.procs = match read(out, Kind::Meta, PROCS) {
        Read::Text(t) => {
            let mut v = Vec::new();
            for l in t.lines() {
                let mut w = l.split_whitespace();
                match (w.next(), w.next(), w.next()) {
                    (Some("proc"), Some(pid), Some(name)) => {
                        if let Ok(pid) = pid.parse()
                            && v.len() < 256
                        {
                            v.push(FabricProc {
                                pid,
                                name: name.to_string(),
                            });
                        }
                    }
                    (Some("imex-installed"), Some(x), None) => {
                        fx.imex_installed = Some(x == "yes");
                    }
                    _ => {}
                }
            }
            Tri::Known(v)
        }
        Read::Absent => Tri::Unknown(format!("{PROCS}: /proc not listed")),
        Read::Failed(why) => Tri::Unknown(why),
    };
    fx.fm_version = match read(out, Kind::Cmd, FM_VERSION) {
        // `Fabric Manager version is : 550.54.15`.
        Read::Text(t) => match t
            .lines()
            .find_map(|l| l.split_once("version is :").map(|(_, v)| (v.trim(), l)))
        {
            Some((v, l)) if !v.is_empty() => Tri::Known((
                v.split_whitespace().next().unwrap_or(v).to_string(),
                Evidence::new(FM_VERSION, l.trim_end()),
            )),
            _ => Tri::Unknown(format!(
                "{FM_VERSION}: no version line: {:?}",
                first_line(&t).chars().take(80).collect::<String>()
            )),
        },
        _ if out.get(Kind::Cmd, FM_VERSION).is_none() => Tri::NotApplicable,
        Read::Absent => Tri::NotApplicable,
        Read::Failed(why) => Tri::Unknown(why),
    };
    fx.nvswitch_functions = nvswitch_functions(out, f.pci_gpus.is_some());
}

/// NVIDIA functions of class 0x0680xx among those the PCI summary sent in full.
fn nvswitch_functions(out: &ProbeOutput, pci_known: bool) -> Tri<u32> {
    const PCI: &str = "/sys/bus/pci/devices";
    if !pci_known {
        return Tri::Unknown("the PCI scan is unknown (gpus (PCI))".into());
    }
    let buses: Vec<String> = match read(out, Kind::Meta, PCI) {
        Read::Text(t) => sysfs::parse_pci_summary(&t)
            .full
            .iter()
            .map(|s| s.to_string())
            .collect(),
        Read::Absent => return Tri::Known(0),
        Read::Failed(_) => match read(out, Kind::Dir, PCI) {
            Read::Text(t) => listing(&t).iter().map(|s| s.to_string()).collect(),
            _ => return Tri::Known(0),
        },
    };
    let hex = |bus: &str, attr: &str| match read(out, Kind::File, &format!("{PCI}/{bus}/{attr}")) {
        Read::Text(t) => sysfs::parse_hex(&t),
        _ => None,
    };
    let n = buses
        .iter()
        .filter(|b| {
            hex(b, "vendor") == Some(0x10de) && hex(b, "class").is_some_and(|c| c >> 8 == 0x0680)
        })
        .count();
    Tri::Known(u32::try_from(n).unwrap_or(u32::MAX))
}

/// Where the fabric is managed (docs/domain.md "Schema 3", `fabric.platform`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// NVSwitch HGX boards: NVSwitch PCI functions, or a Blackwell HGX GPU (B200, B300) that
    /// reports a fabric state (NVLink 5 switches are reached through the InfiniBand stack, not
    /// as PCI functions of the host: NVIDIA/gpu-operator#2781). Fabric Manager runs here.
    Hgx,
    /// GB200 / GB300 NVL racks: the switch trays manage the fabric; IMEX on the node.
    NvlRack,
    /// No NVLink fabric.
    None,
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Hgx => "hgx",
            Platform::NvlRack => "nvl-rack",
            Platform::None => "none",
        }
    }
}

/// Blackwell HGX boards (B200, B300; not GB200/GB300), which also need NVLSM.
pub fn blackwell_hgx(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    (n.contains("B200") || n.contains("B300")) && !n.contains("GB200") && !n.contains("GB300")
}

/// The node's fabric platform; unknown when the GPU names or the PCI scan are.
pub fn platform(f: &Facts) -> Tri<Platform> {
    let names: Vec<String> = f
        .gpus
        .iter()
        .filter_map(|g| g.name.clone())
        .chain(
            f.fabric
                .gpus
                .known()
                .into_iter()
                .flatten()
                .filter_map(|g| g.name.clone()),
        )
        .collect();
    if names
        .iter()
        .any(|n| n.contains("GB200") || n.contains("GB300"))
    {
        return Tri::Known(Platform::NvlRack);
    }
    match &f.fabric.nvswitch_functions {
        Tri::Known(n) if *n > 0 => return Tri::Known(Platform::Hgx),
        Tri::Unknown(w) => return Tri::Unknown(w.clone()),
        _ => {}
    }
    if names.iter().any(|n| blackwell_hgx(n)) {
        return match &f.fabric.gpus {
            Tri::Known(g) if g.iter().any(|g| g.fabric.known().is_some()) => {
                Tri::Known(Platform::Hgx)
            }
            Tri::Known(g)
                if !g.is_empty() && g.iter().all(|g| matches!(g.fabric, Tri::NotApplicable)) =>
            {
                Tri::Known(Platform::None)
            }
            Tri::Unknown(w) => Tri::Unknown(w.clone()),
            _ => Tri::Unknown("a Blackwell GPU whose fabric state is unknown".into()),
        };
    }
    Tri::Known(Platform::None)
}
