//! Facts about one node, built from its probe output (pure: no I/O), one file per subject:
//! kernel.rs (release, taint, DMA-BUF inputs), driver.rs (the loaded module, the module
//! list, parameters in effect), gpus.rs (PCI, /proc/driver/nvidia/gpus, nvidia-smi, merged into
//! one GPU list), rdma.rs (nvidia-peermem, RDMA devices, libibverbs), boot.rs (installed
//! kernels, the next boot, the boot configuration), firmware.rs (GSP firmware, Secure Boot and
//! module signatures), klog.rs (the kernel log), gpu_operator.rs (the GPU Operator's
//! driver folder and node labels); gpudb.rs holds the GPU tables compiled from data/. The probe
//! run itself (trailer, leftovers) and gpufleet's node lock are here.
//!
//! Each fact follows docs/domain.md's facts table (primary evidence, then fallbacks) and its rule
//! "absent is not unknown": a file the kernel only creates when a feature exists is an answer
//! when missing; a fact is unknown (`None`, with an [`Unknown`] entry saying why) only when a
//! read failed or no evidence exists either way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::parse::kconfig::{self, KernelConfig};
use crate::model::parse::modules::{self, Module};
use crate::model::parse::sections::{Kind, ProbeOutput, Section, Status};
use crate::model::parse::smi::{self, SmiFailure, SmiGpu};
use crate::model::parse::sysfs::{self, PciDevice, ProcGpu};
use crate::model::parse::{Read, first_line, lock, modconf, os, params, read, secureboot, why_not};

mod boot;
pub mod branches;
mod driver;
pub mod fabric;
mod firmware;
pub mod gpu_operator;
pub mod gpudb;
mod gpus;
mod kernel;
mod klog;
mod rdma;

pub use boot::{BOOT_CONFIG_DIRS, Blacklist, BootFacts, KernelInstall};
pub use driver::{DriverFacts, ModuleParams};
pub use fabric::{FabricFacts, Tri};
pub use firmware::{FirmwareFacts, GspDir};
pub use gpus::{Gpu, SmiOutcome, pci_evidence};
pub use kernel::KernelFacts;
pub use klog::KernelLogFacts;
pub use rdma::{PeermemFacts, RdmaFacts};

/// The line that proves a fact: the file or command it came from and the raw line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Evidence {
    /// The file (as the node names it, without the root prefix) or the command it came from.
    pub source: String,
    /// The raw line, or what was seen in parentheses (`(absent)`, `(no entries)`).
    pub line: String,
}

impl Evidence {
    pub fn new(source: impl Into<String>, line: impl Into<String>) -> Self {
        Evidence {
            source: source.into(),
            line: line.into(),
        }
    }
}

/// A fact that could not be established, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The fact's name as in the JSON (`kernel.release`, `peermem.configured`, ...).
    pub fact: &'static str,
    pub why: String,
}

/// Everything gpufleet knows about a node after one probe, by subject (each subject's type and
/// collection in its own file of this folder).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Facts {
    /// /proc/sys/kernel/hostname.
    pub hostname: Option<String>,
    /// /etc/os-release PRETTY_NAME (`None` also when the file is absent).
    pub os_pretty_name: Option<String>,
    /// The running kernel (kernel.rs).
    pub kernel: KernelFacts,
    /// The loaded NVIDIA module (driver.rs); `None` when its evidence could not be read.
    pub driver: Option<DriverFacts>,
    /// /proc/modules (all lines); `Some(empty)` on a kernel without loadable modules.
    pub modules: Option<Vec<Module>>,
    /// The NVIDIA module's parameters, in effect and configured (driver.rs, boot.rs).
    pub module_params: ModuleParams,
    /// NVIDIA display/3D PCI functions (`Some(empty)` when there are none) (gpus.rs).
    pub pci_gpus: Option<Vec<PciDevice>>,
    /// GPUs the driver lists in /proc/driver/nvidia/gpus (`Some(empty)` when the folder is absent).
    pub proc_gpus: Option<Vec<ProcGpu>>,
    /// What nvidia-smi said.
    pub smi: SmiOutcome,
    /// The GPUs, merged from nvidia-smi, /proc/driver/nvidia/gpus, PCI and the GPU tables.
    pub gpus: Vec<Gpu>,
    /// nvidia-peermem loaded, configured at boot, registered (rdma.rs, boot.rs).
    pub peermem: PeermemFacts,
    /// RDMA devices and the host's verbs library (rdma.rs).
    pub rdma: RdmaFacts,
    /// Installed kernels and the next boot (boot.rs).
    pub boot: BootFacts,
    /// GSP firmware, Secure Boot and module signatures (firmware.rs).
    pub firmware: FirmwareFacts,
    /// The kernel log (klog.rs).
    pub kernel_log: KernelLogFacts,
    /// The NVLink fabric, MIG and row remapping per GPU (`nvidia-smi -q`), GPU instances, the
    /// fabric daemons and NVSwitch functions (fabric.rs; schema 3).
    pub fabric: FabricFacts,
    /// `<root>/run/nvidia/driver` exists: the GPU Operator's driver container manages the driver
    /// (gpu_operator.rs).
    pub gpu_operator: Proved<bool>,
    /// gpufleet's node lock: `Some(None)` free, `Some(Some(owner))` held by a rollout.
    pub node_lock: Proved<Option<lock::LockOwner>>,
    /// Processes a command of the probe left running (`<pid> <name>`, from `meta leftover`
    /// sections), killed by the probe.
    pub leftovers: Vec<String>,
    /// Whether the probe ran to its end (its trailer section, `meta complete`, arrived).
    pub complete: bool,
    /// Why the probe did not finish, when its trailer is missing.
    pub incomplete: Option<Incomplete>,
    pub unknowns: Vec<Unknown>,
}

/// A fact with the lines that prove it; `value` `None` = unknown (the reason is in
/// [`Facts::unknowns`] when it matters) or not applicable.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Proved<T> {
    pub value: Option<T>,
    pub evidence: Vec<Evidence>,
    /// Why the value is unknown, when it is.
    pub why: Option<String>,
}

impl<T> Proved<T> {
    pub(super) fn known(value: T, evidence: Vec<Evidence>) -> Self {
        Proved {
            value: Some(value),
            evidence,
            why: None,
        }
    }
    pub(super) fn unknown(why: impl Into<String>) -> Self {
        Proved {
            value: None,
            evidence: Vec::new(),
            why: Some(why.into()),
        }
    }
}

/// A probe whose trailer never arrived: after which section it stopped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incomplete {
    /// `kind name` of the last section that arrived (`None`: not even one).
    pub last_section: Option<String>,
    /// Why it stopped: `the node deadline (60 s) passed`, `the connection closed`, `end of
    /// output` (the probe exited or was killed on the node without its trailer).
    pub why: String,
}

impl Facts {
    pub(super) fn unknown(&mut self, fact: &'static str, why: impl Into<String>) {
        self.unknowns.push(Unknown {
            fact,
            why: why.into(),
        });
    }
}

/// Builds the facts from one probe's output.
pub fn collect(out: &ProbeOutput) -> Facts {
    let mut f = Facts {
        complete: out.complete,
        incomplete: (!out.complete).then(|| Incomplete {
            last_section: out.sections.last().map(|s| {
                let status = if s.status == Status::Incomplete {
                    " (cut off)"
                } else {
                    ""
                };
                format!("{} {}{status}", s.kind.as_str(), s.name)
            }),
            why: "end of output".to_string(),
        }),
        ..Facts::default()
    };
    // The facts that say why they are unknown in `unknowns`, in the order of their
    // `fact-unknown` reasons; each may read what the ones above it found (the release, the
    // module list, the PCI scan).
    kernel::release(out, &mut f);
    if let Read::Text(t) = read(out, Kind::File, "/proc/sys/kernel/hostname") {
        f.hostname = Some(t.trim().to_string()).filter(|h| !h.is_empty());
    }
    match read(out, Kind::File, "/etc/os-release") {
        Read::Text(t) => f.os_pretty_name = os::pretty_name(&t),
        Read::Absent => {}
        Read::Failed(why) => f.unknown("os.pretty_name", why),
    }
    kernel::taint(out, &mut f);
    driver::module_list(out, &mut f);
    driver::loaded(out, &mut f);
    rdma::peermem_loaded(out, &mut f);
    boot::configuration(out, &mut f);
    kernel::dma_buf_inputs(out, &mut f);
    gpus::pci_and_proc_gpus(out, &mut f);
    gpus::nvidia_smi(out, &mut f);
    gpus::merge_gpus(&mut f);
    fabric::collect(out, &mut f);
    rdma::devices(out, &mut f);
    // Each subject's other facts: they say why they are unknown in their own `Proved`, so
    // their order is free but for what one reads of another (firmware reads boot's kernels).
    // A fact added to a subject goes into its `collect`.
    boot::collect(out, &mut f);
    firmware::collect(out, &mut f);
    driver::collect(out, &mut f);
    rdma::collect(out, &mut f);
    klog::collect(out, &mut f);
    gpu_operator::collect(out, &mut f);
    f.leftovers = leftovers(out);
    f.node_lock = node_lock(out);
    f
}

/// The `meta leftover` sections: processes a command of the probe left running, at most 64.
fn leftovers(out: &ProbeOutput) -> Vec<String> {
    out.sections
        .iter()
        .filter(|s| s.kind == Kind::Meta && s.name == "leftover")
        .flat_map(|s| {
            String::from_utf8_lossy(&s.body)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .take(64)
        .collect()
}

/// gpufleet's node lock: the folder (absent: free), then its owner file (absent or unreadable
/// while the folder exists: held, owner not known).
fn node_lock(out: &ProbeOutput) -> Proved<Option<lock::LockOwner>> {
    const DIR: &str = "/var/lib/gpufleet/rollout.lock";
    const OWNER: &str = "/var/lib/gpufleet/rollout.lock/owner";
    match read(out, Kind::Dir, DIR) {
        Read::Absent => Proved::known(None, Vec::new()),
        Read::Failed(why) => Proved::unknown(why),
        Read::Text(_) => match read(out, Kind::File, OWNER) {
            Read::Text(t) => Proved::known(
                Some(lock::parse_owner(&t)),
                vec![Evidence::new(OWNER, first_line(&t))],
            ),
            Read::Absent | Read::Failed(_) => Proved::known(
                Some(lock::LockOwner::default()),
                vec![Evidence::new(DIR, "exists (no readable owner file)")],
            ),
        },
    }
}

/// Whether `name` exists: a section that was read (`true`, with it as evidence), `absent`
/// (`false`), or unknown.
pub(super) fn exists(out: &ProbeOutput, kind: Kind, name: &str) -> Proved<bool> {
    match read(out, kind, name) {
        Read::Text(t) => Proved::known(
            true,
            vec![Evidence::new(
                name,
                first_line(&t).chars().take(120).collect::<String>(),
            )],
        ),
        Read::Absent => Proved::known(false, Vec::new()),
        Read::Failed(why) => Proved::unknown(why),
    }
}

pub(super) fn listing(t: &str) -> Vec<&str> {
    t.lines().map(str::trim).filter(|l| !l.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::parse::sections;

    #[test]
    fn fuzz_regression_smi_index_u32_max() {
        // An nvidia-smi index of u32::MAX overflowed the next free GPU index in merge_gpus
        // (a panic with overflow checks, a wrapped index 0 without). The exact input that
        // crashed the `pipeline` fuzz target:
        let raw = b"gpufleet-RAW cmd nvidia-smi\nindex\n4294967295\n\ngpufleet-RAW end ok\n";
        let f = collect(&sections::parse(raw, "gpufleet-RAW"));
        assert_eq!(f.gpus.len(), 1);
        assert_eq!(f.gpus[0].index, u32::MAX);

        // The same index with a PCI GPU that nvidia-smi does not list: it gets an index too.
        let mut raw = raw.to_vec();
        let dev = "/sys/bus/pci/devices/0000:18:00.0";
        raw.extend_from_slice(
            format!(
                "gpufleet-RAW dir /sys/bus/pci/devices\n0000:18:00.0\n\ngpufleet-RAW end ok\n\
                 gpufleet-RAW file {dev}/vendor\n0x10de\n\ngpufleet-RAW end ok\n\
                 gpufleet-RAW file {dev}/device\n0x2335\n\ngpufleet-RAW end ok\n\
                 gpufleet-RAW file {dev}/class\n0x030200\n\ngpufleet-RAW end ok\n"
            )
            .as_bytes(),
        );
        let f = collect(&sections::parse(&raw, "gpufleet-RAW"));
        assert_eq!(f.gpus.len(), 2);
        assert_eq!(f.gpus[1].bus_id.as_deref(), Some("0000:18:00.0"));
        assert_eq!(f.gpus[1].index, u32::MAX);
    }
}

#[cfg(test)]
mod hostile_tests {
    use super::*;
    use crate::model::parse::sections;

    /// A node listing 262,144 GPUs (1 MiB of probe output, the cap) and thousands of sections:
    /// the listing is cut at MAX_GPUS and said so; lookups are indexed, so this stays linear.
    #[test]
    fn a_huge_gpu_listing_is_capped() {
        let b = "gpufleet-RAW";
        let mut raw = format!("{b} dir /proc/driver/nvidia/gpus\n");
        for i in 0..262_144u32 {
            raw.push_str(&format!("{:04x}:{:02x}:00.0\n", i >> 8, i & 0xff));
        }
        raw.push_str(&format!("\n{b} end ok\n"));
        for i in 0..12_800u32 {
            raw.push_str(&format!("{b} file /proc/driver/nvidia/gpus/{:04x}:{:02x}:00.0/information\nModel: X\n\n{b} end ok\n", i >> 8, i & 0xff));
        }
        let started = std::time::Instant::now();
        let f = collect(&sections::parse(raw.as_bytes(), b));
        assert_eq!(f.proc_gpus.as_ref().map(Vec::len), Some(gpus::MAX_GPUS));
        assert!(
            f.unknowns
                .iter()
                .any(|u| u.why.contains("only the first 1024"))
        );
        eprintln!("collect over {} bytes: {:?}", raw.len(), started.elapsed());
    }
}
