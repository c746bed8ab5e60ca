//! Facts about one node, built from its probe output (pure: no I/O).
//!
//! Each fact follows docs/domain.md's facts table (primary evidence, then fallbacks) and its rule
//! "absent is not unknown": a file the kernel only creates when a feature exists is an answer
//! when missing; a fact is unknown (`None`, with an [`Unknown`] entry saying why) only when a
//! read failed or no evidence exists either way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::boot;
use crate::model::driver::{self, Flavor};
use crate::model::kconfig::{self, KernelConfig};
use crate::model::klog;
use crate::model::lock;
use crate::model::modconf;
use crate::model::modules::{self, Module};
use crate::model::os;
use crate::model::params;
use crate::model::sections::{Kind, ProbeOutput, Section, Status};
use crate::model::secureboot;
use crate::model::smi::{self, SmiFailure, SmiGpu};
use crate::model::sysfs::{self, PciDevice, ProcGpu};

pub mod gpu_operator;
pub mod gpudb;
mod gpus;
#[path = "boot.rs"]
mod v2;

pub use gpus::pci_evidence;
use gpus::*;
use v2::*;

/// The line that proves a fact: the file or command it came from and the raw line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub source: String,
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

/// The loaded NVIDIA module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverFacts {
    pub flavor: Flavor,
    /// Version of the loaded kernel module.
    pub version: Option<String>,
    pub arch: Option<String>,
    pub evidence: Vec<Evidence>,
}

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

/// Everything gpufleet knows about a node after one probe.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Facts {
    /// /proc/sys/kernel/hostname.
    pub hostname: Option<String>,
    /// /proc/sys/kernel/osrelease, else the third word of /proc/version.
    pub kernel_release: Option<String>,
    pub kernel_evidence: Option<Evidence>,
    /// /etc/os-release PRETTY_NAME (`None` also when the file is absent).
    pub os_pretty_name: Option<String>,
    pub driver: Option<DriverFacts>,
    /// /proc/modules (all lines); `Some(empty)` on a kernel without loadable modules.
    pub modules: Option<Vec<Module>>,
    pub peermem_loaded: Option<bool>,
    pub peermem_loaded_evidence: Vec<Evidence>,
    pub peermem_configured: Option<bool>,
    pub peermem_configured_evidence: Vec<Evidence>,
    /// `ib_umem_dmabuf_get` in /proc/kallsyms: `Some(false)` when read and missing, `None` when
    /// /proc/kallsyms could not be read.
    pub kallsyms_dmabuf: Option<bool>,
    pub kallsyms_evidence: Option<Evidence>,
    /// The kernel config that was read, with its source path.
    pub kernel_config: Option<(String, KernelConfig)>,
    /// NVIDIA display/3D PCI functions (`Some(empty)` when there are none).
    pub pci_gpus: Option<Vec<PciDevice>>,
    /// GPUs the driver lists in /proc/driver/nvidia/gpus (`Some(empty)` when the folder is absent).
    pub proc_gpus: Option<Vec<ProcGpu>>,
    pub smi: SmiOutcome,
    pub gpus: Vec<Gpu>,
    /// /proc/sys/kernel/tainted.
    pub taint: Option<u64>,
    pub taint_evidence: Option<Evidence>,
    /// Entries of /sys/class/infiniband (RDMA devices, RoCE NICs too): `Some(empty)` when the
    /// folder is absent or empty, `None` when it could not be read.
    pub rdma_devices: Option<Vec<String>>,
    /// Schema-2 facts: the next boot, firmware, parameters, RDMA userspace, signatures, the
    /// kernel log, the GPU Operator (docs/domain.md, facts table).
    pub v2: V2Facts,
    /// The /proc/modules line that names nvidia_peermem (understood or not).
    pub peermem_named: Option<String>,
    /// Whether the probe ran to its end (its trailer section, `meta complete`, arrived).
    pub complete: bool,
    /// Why the probe did not finish, when its trailer is missing.
    pub incomplete: Option<Incomplete>,
    pub unknowns: Vec<Unknown>,
}

/// One installed kernel (docs/domain.md: `/boot/vmlinuz-<k>`, `/lib/modules/<k>/vmlinuz` or
/// `/lib/modules/<k>/modules.dep` exists) and the NVIDIA module files under its
/// /lib/modules/<k> (`None` when that walk failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInstall {
    pub release: String,
    pub nvidia_modules: Option<Vec<String>>,
}

impl KernelInstall {
    /// Whether a driver module (`nvidia.ko` or Debian's names) is among its files; `None` unknown.
    pub fn has(&self, kind: boot::ModuleFile) -> Option<bool> {
        self.nvidia_modules
            .as_ref()
            .map(|m| m.iter().any(|p| boot::module_file(p) == Some(kind)))
    }
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
    fn known(value: T, evidence: Vec<Evidence>) -> Self {
        Proved {
            value: Some(value),
            evidence,
            why: None,
        }
    }
    fn unknown(why: impl Into<String>) -> Self {
        Proved {
            value: None,
            evidence: Vec::new(),
            why: Some(why.into()),
        }
    }
}

/// Schema-2 facts (docs/domain.md, facts table; JSON schema version 2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct V2Facts {
    /// Installed kernels with their NVIDIA module files (`Some(empty)`: none installed).
    pub kernels: Proved<Vec<KernelInstall>>,
    /// The release the next reboot starts; `heuristic` when only "the highest installed" says so.
    pub boot_kernel: Proved<String>,
    pub boot_kernel_heuristic: bool,
    /// /run/reboot-required exists.
    pub reboot_pending: Proved<bool>,
    /// `gsp*.bin` for the loaded driver version in a firmware search folder.
    pub gsp_files_present: Proved<bool>,
    /// /proc/driver/nvidia/params (`None` without a loaded module or when unreadable).
    pub params_in_effect: Proved<BTreeMap<String, String>>,
    /// `options nvidia NVreg_K=V` of the boot configuration, in reading order, with their file.
    pub options_configured: Vec<(params::Configured, String)>,
    /// nv_mem or nv_mem_nc registered with the RDMA stack's peer-memory interface.
    pub peermem_registered: Proved<bool>,
    /// `ibv_reg_dmabuf_mr` in the host's libibverbs.so.1 (`None` with no host library).
    pub libibverbs_dmabuf: Proved<bool>,
    /// Secure Boot enabled (efivar); `Some(false)` on a BIOS boot.
    pub secure_boot: Proved<bool>,
    /// The lockdown mode (`none`, `integrity`, `confidentiality`).
    pub lockdown: Proved<String>,
    /// Module signatures enforced: Secure Boot, CONFIG_MODULE_SIG_FORCE=y or module.sig_enforce=1.
    pub signature_enforced: Proved<bool>,
    /// The running kernel's host nvidia.ko ends with the signature trailer.
    pub nvidia_ko_signed: Proved<bool>,
    /// The kept kernel log messages (`None`: dmesg denied, missing or failed).
    pub kernel_log: Proved<Vec<klog::Message>>,
    /// dmesg printed more than the probe's cap: the messages it would have given are unknown,
    /// and a verdict cannot rest on a log that may hide a fallen-off GPU.
    pub kernel_log_cut: bool,
    /// Processes a command of the probe left running (`<pid> <name>`, from `meta leftover`
    /// sections), killed by the probe.
    pub leftovers: Vec<String>,
    /// `<root>/run/nvidia/driver` exists: the GPU Operator's driver container manages the driver.
    pub gpu_operator: Proved<bool>,
    /// gpufleet's node lock: `Some(None)` free, `Some(Some(owner))` held by a rollout.
    pub node_lock: Proved<Option<lock::LockOwner>>,
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

/// A section's text, or why there is none. Text is decoded lossily: a byte that is not UTF-8
/// (a Latin-1 comment) becomes U+FFFD and never hides the lines around it.
enum Read<'a> {
    Text(std::borrow::Cow<'a, str>),
    Absent,
    Failed(String),
}

fn why_not(name: &str, s: &Section) -> String {
    match &s.status {
        Status::Ok | Status::Absent => String::new(),
        Status::Denied => format!("{name}: permission denied"),
        // ELOOP: the probe followed 40 symlinks under the root prefix without an end.
        Status::Error(40) => format!("{name}: too many levels of symbolic links (a loop)"),
        Status::Error(rc) => format!("{name}: read failed (exit {rc})"),
        Status::Rc(rc) => format!("{name}: exit {rc}"),
        Status::Timeout => format!("{name}: time limit reached"),
        Status::MissingTool(t) => format!("{name}: {t} is not installed on the node"),
        Status::Incomplete => format!("{name}: cut off by the node deadline or output cap"),
        Status::NotRegular => format!("{name}: a FIFO, socket or device, not a file (not read)"),
        Status::Masked => format!("{name}: masked (a symlink to /dev/null)"),
        Status::Same => format!("{name}: the same folder as one read before"),
        Status::Cut(cap) => format!("{name}: longer than the {cap}-byte cap (not trusted)"),
        Status::NotLink => format!("{name}: not a symlink"),
        Status::NoTmp => {
            format!("{name}: not run (no writable temporary folder on the node for its output)")
        }
        Status::Unrecognized(x) => format!("{name}: unrecognized status {x:?}"),
    }
}

fn read<'a>(out: &'a ProbeOutput, kind: Kind, name: &str) -> Read<'a> {
    // A root prefix without proc/ or sys/ is a missing mount: nothing under it is "absent".
    let top = name.trim_start_matches('/').split('/').next().unwrap_or("");
    if out.meta_all("root-missing").any(|d| d == top) {
        return Read::Failed(format!(
            "{name}: the root prefix has no {top}/ (a missing mount, not a node without it)"
        ));
    }
    match out.get(kind, name) {
        None if out.complete => Read::Failed(format!("{name}: not in the probe output")),
        None => Read::Failed(format!("{name}: the probe stopped before reading it")),
        Some(s) => match s.status {
            Status::Ok => Read::Text(String::from_utf8_lossy(&s.body)),
            Status::Absent => Read::Absent,
            _ => Read::Failed(why_not(name, s)),
        },
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim_end()
}

impl Facts {
    fn unknown(&mut self, fact: &'static str, why: impl Into<String>) {
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
    kernel(out, &mut f);
    if let Read::Text(t) = read(out, Kind::File, "/proc/sys/kernel/hostname") {
        f.hostname = Some(t.trim().to_string()).filter(|h| !h.is_empty());
    }
    match read(out, Kind::File, "/etc/os-release") {
        Read::Text(t) => f.os_pretty_name = os::pretty_name(&t),
        Read::Absent => {}
        Read::Failed(why) => f.unknown("os.pretty_name", why),
    }
    match read(out, Kind::File, "/proc/sys/kernel/tainted") {
        Read::Text(t) => match t.trim().parse::<u64>() {
            Ok(v) => {
                f.taint = Some(v);
                f.taint_evidence = Some(Evidence::new("/proc/sys/kernel/tainted", t.trim()));
            }
            Err(_) => f.unknown(
                "taint.value",
                format!(
                    "/proc/sys/kernel/tainted is not a number: {:?}",
                    first_line(&t)
                ),
            ),
        },
        Read::Absent => f.unknown("taint.value", "/proc/sys/kernel/tainted is absent"),
        Read::Failed(why) => f.unknown("taint.value", why),
    }
    modules_fact(out, &mut f);
    driver_fact(out, &mut f);
    peermem_loaded(out, &mut f);
    peermem_configured(out, &mut f);
    dma_buf_inputs(out, &mut f);
    pci_and_proc_gpus(out, &mut f);
    smi_fact(out, &mut f);
    merge_gpus(&mut f);
    rdma_devices(out, &mut f);
    v2_facts(out, &mut f);
    f
}

fn rdma_devices(out: &ProbeOutput, f: &mut Facts) {
    const IB: &str = "/sys/class/infiniband";
    match read(out, Kind::Dir, IB) {
        Read::Text(t) => {
            let devs: Vec<String> = t
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .take(MAX_GPUS)
                .map(str::to_string)
                .collect();
            f.rdma_devices = Some(devs);
        }
        Read::Absent => f.rdma_devices = Some(Vec::new()),
        Read::Failed(why) => f.unknown("rdma.devices", why),
    }
}

/// A kernel release as `uname -r` prints it: letters, digits and `._+~-` (what the probe also
/// accepts to build `/boot/config-<release>`); anything else (a NUL, an invalid byte) is not one.
fn is_release(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '~' | '-'))
}

fn kernel(out: &ProbeOutput, f: &mut Facts) {
    match read(out, Kind::File, "/proc/sys/kernel/osrelease") {
        Read::Text(t) if is_release(t.trim()) => {
            f.kernel_release = Some(t.trim().to_string());
            f.kernel_evidence = Some(Evidence::new("/proc/sys/kernel/osrelease", t.trim()));
            return;
        }
        _ => {}
    }
    // Fallback: "Linux version <release> (...)".
    if let Read::Text(t) = read(out, Kind::File, "/proc/version") {
        let mut w = t.split_whitespace();
        if let (Some("Linux"), Some("version"), Some(rel)) = (w.next(), w.next(), w.next())
            && is_release(rel)
        {
            f.kernel_release = Some(rel.to_string());
            f.kernel_evidence = Some(Evidence::new("/proc/version", first_line(&t)));
            return;
        }
    }
    f.unknown(
        "kernel.release",
        "neither /proc/sys/kernel/osrelease nor /proc/version could be read",
    );
}

fn modules_fact(out: &ProbeOutput, f: &mut Facts) {
    match read(out, Kind::File, "/proc/modules") {
        Read::Text(t) => {
            let (good, bad) = modules::parse(&t);
            // A line that is not understood could be any module (nvidia_peermem too): the list
            // is then not known whole, so nothing is concluded from what it lacks.
            // nvidia_peermem on a line that was understood, or first on one that was not,
            // is loaded whatever else the file holds.
            let named = good
                .iter()
                .find(|m| modconf::is_peermem(&m.name))
                .map(|m| m.line.clone())
                .or_else(|| {
                    bad.iter()
                        .find(|b| {
                            b.line
                                .split_whitespace()
                                .next()
                                .is_some_and(modconf::is_peermem)
                        })
                        .map(|b| b.line.clone())
                });
            if let Some(line) = named {
                f.peermem_named = Some(line);
            }
            match bad.first() {
                Some(b) => f.unknown(
                    "modules",
                    format!(
                        "/proc/modules: {} line(s) not understood, first: {:?} ({})",
                        bad.len(),
                        b.line,
                        b.why
                    ),
                ),
                None => f.modules = Some(good),
            }
        }
        // A kernel without loadable modules has no /proc/modules: nothing is loaded.
        Read::Absent => f.modules = Some(Vec::new()),
        Read::Failed(why) => f.unknown("modules", why),
    }
}

fn module<'a>(f: &'a Facts, name: &str) -> Option<&'a Module> {
    f.modules.as_ref()?.iter().find(|m| m.name == name)
}

fn sys_module_listing(out: &ProbeOutput) -> Option<Vec<String>> {
    match read(out, Kind::Dir, "/sys/module") {
        Read::Text(t) => Some(t.lines().map(|l| l.trim().to_string()).collect()),
        _ => None,
    }
}

fn driver_fact(out: &ProbeOutput, f: &mut Facts) {
    const VERSION: &str = "/proc/driver/nvidia/version";
    let sys_version = match read(out, Kind::File, "/sys/module/nvidia/version") {
        Read::Text(t) => driver::parse_sys_version(&t).map(|v| (v, t.trim().to_string())),
        _ => None,
    };
    let banner_read = read(out, Kind::File, VERSION);
    if let Read::Text(ref t) = banner_read
        && let Some(b) = driver::parse_banner(t)
    {
        let mut evidence = vec![Evidence::new(VERSION, b.line.clone())];
        let version = b.version.clone().or_else(|| {
            let (v, line) = sys_version.clone()?;
            evidence.push(Evidence::new("/sys/module/nvidia/version", line));
            Some(v)
        });
        f.driver = Some(DriverFacts {
            flavor: b.flavor,
            version,
            arch: Some(b.arch),
            evidence,
        });
        return;
    }
    let nvidia_mod = module(f, "nvidia").cloned();
    let banner_absent = matches!(banner_read, Read::Absent);
    if banner_absent && nvidia_mod.is_none() && sys_version.is_none() && f.modules.is_some() {
        f.driver = Some(DriverFacts {
            flavor: Flavor::None,
            version: None,
            arch: None,
            evidence: vec![Evidence::new(VERSION, "(absent: no nvidia module loaded)")],
        });
        return;
    }
    // Fallback: the taint letters of the nvidia line in /proc/modules ("P" only on proprietary).
    if let Some(m) = nvidia_mod.filter(|m| !m.taint.is_empty()) {
        let flavor = if m.taint.contains('P') {
            Flavor::Proprietary
        } else {
            Flavor::Open
        };
        let mut evidence = vec![Evidence::new("/proc/modules", m.line.clone())];
        if let Some((_, line)) = &sys_version {
            evidence.push(Evidence::new("/sys/module/nvidia/version", line.clone()));
        }
        f.driver = Some(DriverFacts {
            flavor,
            version: sys_version.map(|(v, _)| v),
            arch: None,
            evidence,
        });
        return;
    }
    let why = match banner_read {
        Read::Text(t) => format!(
            "{VERSION} does not name a kernel module: {:?}",
            first_line(&t)
        ),
        Read::Absent if f.modules.is_none() => {
            format!("{VERSION} is absent and /proc/modules could not be read")
        }
        Read::Absent => format!("{VERSION} is absent but an nvidia module is loaded"),
        Read::Failed(why) => why,
    };
    f.unknown("driver.flavor", why);
    f.driver = Some(DriverFacts {
        flavor: Flavor::Unknown,
        version: sys_version.map(|(v, _)| v),
        arch: None,
        evidence: Vec::new(),
    });
}

fn peermem_loaded(out: &ProbeOutput, f: &mut Facts) {
    if let Some(line) = f.peermem_named.clone() {
        f.peermem_loaded = Some(true);
        f.peermem_loaded_evidence = vec![Evidence::new("/proc/modules", line)];
        return;
    }
    match sys_module_listing(out) {
        Some(list) if list.iter().any(|m| modconf::is_peermem(m)) => {
            let name = list
                .iter()
                .find(|m| modconf::is_peermem(m))
                .cloned()
                .unwrap_or_default();
            f.peermem_loaded = Some(true);
            f.peermem_loaded_evidence = vec![Evidence::new("/sys/module", name)];
        }
        Some(_) => f.peermem_loaded = Some(false),
        None if f.modules.is_some() => f.peermem_loaded = Some(false),
        None => f.unknown(
            "peermem.loaded",
            "neither /proc/modules nor /sys/module could be read",
        ),
    }
}

/// Folders that hold boot configuration (`modprobe.d/`, `modules-load.d/`), in the precedence
/// order of modprobe.d(5) and modules-load.d(5): a file in an earlier folder overrides a
/// same-named one in a later folder.
pub const BOOT_CONFIG_DIRS: [&str; 5] = ["/etc", "/run", "/usr/local/lib", "/usr/lib", "/lib"];

/// The files of one boot-configuration kind (`modprobe.d` or `modules-load.d`) that take
/// effect: per file name, the one in the first folder that has it; a masked one (a symlink to
/// /dev/null) hides the same name in later folders and contributes nothing. Reads that failed
/// for a file that would take effect, or for a whole folder, go to `failures`.
fn boot_config<'a>(
    out: &'a ProbeOutput,
    kind: &str,
    failures: &mut Vec<String>,
) -> Vec<(String, std::borrow::Cow<'a, str>)> {
    let mut chosen: BTreeMap<String, Option<(String, std::borrow::Cow<'a, str>)>> = BTreeMap::new();
    for base in BOOT_CONFIG_DIRS {
        let folder = format!("{base}/{kind}");
        if out
            .get(Kind::Dir, &folder)
            .is_some_and(|s| s.status == Status::Same)
        {
            continue;
        }
        let listing = match read(out, Kind::Dir, &folder) {
            Read::Absent => continue,
            Read::Failed(why) => {
                failures.push(why);
                continue;
            }
            Read::Text(t) => t,
        };
        // modprobe reads *.conf (and, in kmod before 2024, *.alias); modules-load.d *.conf.
        let wanted =
            |n: &&str| n.ends_with(".conf") || kind == "modprobe.d" && n.ends_with(".alias");
        for name in listing.lines().filter(wanted) {
            if chosen.contains_key(name) {
                continue;
            }
            let path = format!("{folder}/{name}");
            if out
                .get(Kind::File, &path)
                .is_some_and(|s| s.status == Status::Masked)
            {
                chosen.insert(name.to_string(), None);
                continue;
            }
            match read(out, Kind::File, &path) {
                Read::Text(t) => {
                    chosen.insert(name.to_string(), Some((path, t)));
                }
                // A dangling symlink (modprobe skips it too), or removed since it was listed.
                // A listed name with no entry at all (part of a name with a newline) comes as
                // `error 2`: a failure above.
                Read::Absent => {}
                Read::Failed(why) => {
                    failures.push(why);
                    chosen.insert(name.to_string(), None);
                }
            }
        }
    }
    chosen.into_values().flatten().collect()
}

fn peermem_configured(out: &ProbeOutput, f: &mut Facts) {
    let mut evidence = Vec::new();
    let mut masks = Vec::new();
    let mut failures = Vec::new();
    for (path, text) in boot_config(out, "modules-load.d", &mut failures) {
        evidence.extend(
            modconf::modules_load(&text)
                .into_iter()
                .map(|l| Evidence::new(path.clone(), l.line)),
        );
    }
    // modprobe uses the first `install` line of a module, files read in name order.
    let mut first_install: Option<(Evidence, bool)> = None;
    for (path, text) in boot_config(out, "modprobe.d", &mut failures) {
        f.v2.options_configured.extend(
            params::parse_options(&text)
                .into_iter()
                .map(|c| (c, path.clone())),
        );
        evidence.extend(
            modconf::modprobe(&text)
                .into_iter()
                .map(|l| Evidence::new(path.clone(), l.line)),
        );
        if first_install.is_none()
            && let Some((line, masks)) = modconf::peermem_install(&text)
        {
            first_install = Some((Evidence::new(path.clone(), line), masks));
        }
    }
    // The kernel command line loads modules too (systemd-modules-load reads modules-load=).
    if let Read::Text(t) = read(out, Kind::File, "/proc/cmdline")
        && modconf::cmdline_loads_peermem(&t)
    {
        evidence.push(Evidence::new("/proc/cmdline", first_line(&t)));
    }
    if let Some((ev, true)) = &first_install
        && failures.is_empty()
    {
        // `install nvidia-peermem /bin/false` runs instead of every load, whatever asks for it.
        masks.push(ev.clone());
        f.peermem_configured = Some(false);
        f.peermem_configured_evidence = masks;
    } else if !evidence.is_empty() {
        f.peermem_configured = Some(true);
        f.peermem_configured_evidence = evidence;
    } else if failures.is_empty() {
        f.peermem_configured = Some(false);
    } else {
        // An unreadable file could load it, or hold the first install line.
        f.unknown("peermem.configured", failures.join("; "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sections;

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
    use crate::model::sections;

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
        assert_eq!(f.proc_gpus.as_ref().map(Vec::len), Some(MAX_GPUS));
        assert!(
            f.unknowns
                .iter()
                .any(|u| u.why.contains("only the first 1024"))
        );
        eprintln!("collect over {} bytes: {:?}", raw.len(), started.elapsed());
    }
}
