//! The verdict: one status and every reason that applies (pure: no I/O).
//!
//! Vocabulary, rules and precedence from docs/domain.md ("Verdict: status + reasons" and
//! "Rules"): unreachable > attention > blocked > migrate > no-driver > ready; advisories never
//! change the status; `blocked` and `migrate` reasons apply only to nodes with an NVIDIA module
//! or GPU; all reasons that apply are listed.

use std::fmt;
use std::str::FromStr;

use procfs_core::sys::kernel::Version;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::driver::Flavor;
use super::facts::{Evidence, Facts, Gpu, SmiOutcome};
use super::smi::SmiFailure;

/// A node's status, from worst to best in precedence order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeStatus {
    Unreachable,
    Attention,
    /// No verdict: `ready` or `no-driver` would win, but a fact it rests on is unknown. Decided
    /// after the precedence of the others (docs/domain.md "Conclusions from absence need their
    /// facts"); sorts after `attention`.
    Unknown,
    Blocked,
    Migrate,
    NoDriver,
    Ready,
}

impl NodeStatus {
    pub const ALL: [NodeStatus; 7] = [
        NodeStatus::Ready,
        NodeStatus::Migrate,
        NodeStatus::Blocked,
        NodeStatus::Attention,
        NodeStatus::Unknown,
        NodeStatus::NoDriver,
        NodeStatus::Unreachable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Unreachable => "unreachable",
            NodeStatus::Attention => "attention",
            NodeStatus::Unknown => "unknown",
            NodeStatus::Blocked => "blocked",
            NodeStatus::Migrate => "migrate",
            NodeStatus::NoDriver => "no-driver",
            NodeStatus::Ready => "ready",
        }
    }

    /// What the status means, in words (docs/domain.md's status table).
    pub fn meaning(self) -> &'static str {
        match self {
            NodeStatus::Unreachable => "the scan could not run",
            NodeStatus::Attention => "something is broken now, or breaks at the next reboot",
            NodeStatus::Unknown => {
                "no verdict: ready or no-driver would win, but a fact it rests on is unknown"
            }
            NodeStatus::Blocked => {
                "the move to open modules + DMA-BUF is impossible until something else changes"
            }
            NodeStatus::Migrate => "on (part of) the legacy stack; nothing blocks the move",
            NodeStatus::NoDriver => "no NVIDIA driver loaded and no NVIDIA GPU seen",
            NodeStatus::Ready => "open kernel module + DMA-BUF path; nothing to migrate",
        }
    }
}

impl fmt::Display for NodeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reason severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warn,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warn => "warn",
            Severity::Info => "info",
        }
    }
}

macro_rules! reason_codes {
    ($($variant:ident = $code:literal, $sev:ident, $status:expr;)*) => {
        /// Reason codes (docs/domain.md, "Reason codes"), each with its severity and the status it implies
        /// (`None` for advisories).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code { $($variant,)* }

        impl Code {
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];
            pub fn as_str(self) -> &'static str { match self { $(Code::$variant => $code,)* } }
            pub fn severity(self) -> Severity { match self { $(Code::$variant => Severity::$sev,)* } }
            pub fn status(self) -> Option<NodeStatus> { match self { $(Code::$variant => $status,)* } }
        }
    };
}

use NodeStatus as S;
reason_codes! {
    SshTimeout = "ssh-timeout", Error, Some(S::Unreachable);
    SshRefused = "ssh-refused", Error, Some(S::Unreachable);
    SshResolveFailed = "ssh-resolve-failed", Error, Some(S::Unreachable);
    SshProtocolError = "ssh-protocol-error", Error, Some(S::Unreachable);
    SshAuthFailed = "ssh-auth-failed", Error, Some(S::Unreachable);
    HostKeyMismatch = "host-key-mismatch", Error, Some(S::Unreachable);
    HostKeyUnknown = "host-key-unknown", Error, Some(S::Unreachable);
    ProbeOutputInvalid = "probe-output-invalid", Error, Some(S::Unreachable);
    DriverLibraryMismatch = "driver-library-mismatch", Error, Some(S::Attention);
    NvidiaSmiFailed = "nvidia-smi-failed", Error, Some(S::Attention);
    NvidiaSmiTimeout = "nvidia-smi-timeout", Error, Some(S::Attention);
    GpuNotInitialized = "gpu-not-initialized", Error, Some(S::Attention);
    GpuWithoutDriver = "gpu-without-driver", Error, Some(S::Attention);
    GpuRequiresOpen = "gpu-requires-open", Error, Some(S::Attention);
    ModuleFlavorUnknown = "module-flavor-unknown", Error, Some(S::Attention);
    GpuFallenOffBus = "gpu-fallen-off-bus", Error, Some(S::Attention);
    PeermemLoadFailed = "peermem-load-failed", Error, Some(S::Attention);
    NextBootWithoutDriver = "next-boot-without-driver", Error, Some(S::Attention);
    GspFirmwareMissing = "gsp-firmware-missing", Error, Some(S::Attention);
    OpenGpuOptInMissing = "open-gpu-opt-in-missing", Error, Some(S::Attention);
    OpenGpuUnsupported = "open-gpu-unsupported", Error, Some(S::Attention);
    ModuleSignatureRejected = "module-signature-rejected", Error, Some(S::Attention);
    GpuPreTuring = "gpu-pre-turing", Error, Some(S::Blocked);
    KernelBelowDmabufMinimum = "kernel-below-dmabuf-minimum", Error, Some(S::Blocked);
    DmabufKernelMissing = "dmabuf-kernel-missing", Error, Some(S::Blocked);
    ProprietaryModule = "proprietary-module", Warn, Some(S::Migrate);
    PeermemLoaded = "peermem-loaded", Warn, Some(S::Migrate);
    PeermemConfigured = "peermem-configured", Warn, Some(S::Migrate);
    NoNvidiaModule = "no-nvidia-module", Info, Some(S::NoDriver);
    VerdictIncomplete = "verdict-incomplete", Error, Some(S::Unknown);
    ProbeIncomplete = "probe-incomplete", Error, None;
    KernelBelowGuideline = "kernel-below-guideline", Warn, None;
    ProprietaryTaintSticky = "proprietary-taint-sticky", Warn, None;
    DmabufKernelUnknown = "dmabuf-kernel-unknown", Warn, None;
    NextBootWithoutPeermem = "next-boot-without-peermem", Warn, None;
    PeermemNotRegistered = "peermem-not-registered", Warn, None;
    XidEvents = "xid-events", Warn, None;
    ModuleParamNotApplied = "module-param-not-applied", Warn, None;
    RdmaUserspaceLacksDmabuf = "rdma-userspace-lacks-dmabuf", Warn, None;
    NoRdmaDevice = "no-rdma-device", Info, None;
    ModuleParamIgnored = "module-param-ignored", Info, None;
    GpuOperatorManaged = "gpu-operator-managed", Info, None;
    GpuBoundElsewhere = "gpu-bound-elsewhere", Info, None;
    RebootPending = "reboot-pending", Info, None;
    FactUnknown = "fact-unknown", Info, None;
}

impl Serialize for Code {
    fn serialize<Z: Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for Code {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Code::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown reason code {s:?}"))
    }
}

/// One reason: code, severity, a message for people and the evidence lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub evidence: Vec<Evidence>,
}

impl Reason {
    pub fn new(code: Code, message: impl Into<String>, evidence: Vec<Evidence>) -> Self {
        Reason {
            code,
            severity: code.severity(),
            message: message.into(),
            evidence,
        }
    }
}

/// A "major.minor" number such as a compute capability (`7.5`) or a kernel threshold (`5.12`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MajorMinor(pub u32, pub u32);

impl FromStr for MajorMinor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, b) = s
            .trim()
            .split_once('.')
            .ok_or_else(|| format!("{s:?} is not major.minor"))?;
        let p = |x: &str| {
            x.parse::<u32>()
                .map_err(|_| format!("{s:?} is not major.minor"))
        };
        Ok(MajorMinor(p(a)?, p(b)?))
    }
}

impl fmt::Display for MajorMinor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// Thresholds from configuration (`[assessment]` in config.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Hard minimum kernel for DMA-BUF GPUDirect RDMA: 5.12 (NVIDIA GPU Operator RDMA docs).
    pub dmabuf_min_kernel: MajorMinor,
    /// Advisory kernel guideline: 6.0 (a common rule of thumb in migration guides).
    pub kernel_guideline: MajorMinor,
    /// Lowest compute capability the open modules support: 7.5 (Turing; GSP required).
    pub open_min_compute_capability: MajorMinor,
    /// Compute capability from which GPUs require the open modules: 10.0 (Blackwell).
    pub open_required_compute_capability: MajorMinor,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            dmabuf_min_kernel: MajorMinor(5, 12),
            kernel_guideline: MajorMinor(6, 0),
            open_min_compute_capability: MajorMinor(7, 5),
            open_required_compute_capability: MajorMinor(10, 0),
        }
    }
}

/// Why `dma_buf.kernel_support` has its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaBufBasis {
    /// `ib_umem_dmabuf_get` is in /proc/kallsyms.
    Kallsyms,
    /// Kernel release below the hard minimum.
    BelowMinimum,
    /// The kernel config has both options `=y`.
    Config,
    /// A config was read that lacks one of them.
    ConfigMissing,
    /// Release ≥ minimum but neither config nor symbol could be read.
    Unknown,
}

/// The whole assessment of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    pub status: NodeStatus,
    /// Sorted by severity (error, warn, info), then in rule order.
    pub reasons: Vec<Reason>,
    pub dma_buf: Option<bool>,
    pub dma_buf_basis: DmaBufBasis,
    /// The lines `dma_buf` rests on (kallsyms, the release, or the kernel config).
    pub dma_buf_evidence: Vec<Evidence>,
    /// `open_capable` per GPU, in `facts.gpus` order.
    pub open_capable: Vec<Option<bool>>,
}

fn kernel_version(release: &str) -> Option<Version> {
    Version::from_str(release).ok()
}

fn below(v: &Version, t: MajorMinor) -> bool {
    (u32::from(v.major), u32::from(v.minor)) < (t.0, t.1)
}

/// The DMA-BUF rule of docs/domain.md: kallsyms, else release below minimum, else kernel config.
pub fn dma_buf_support(f: &Facts, t: &Thresholds) -> (Option<bool>, DmaBufBasis, Vec<Evidence>) {
    if f.kallsyms_dmabuf == Some(true) {
        return (
            Some(true),
            DmaBufBasis::Kallsyms,
            f.kallsyms_evidence.iter().cloned().collect(),
        );
    }
    let release = f.kernel_release.as_deref().and_then(kernel_version);
    if let Some(v) = &release
        && below(v, t.dmabuf_min_kernel)
    {
        return (
            Some(false),
            DmaBufBasis::BelowMinimum,
            f.kernel_evidence.iter().cloned().collect(),
        );
    }
    if let Some((source, cfg)) = &f.kernel_config {
        const OPTS: [&str; 2] = ["CONFIG_DMA_SHARED_BUFFER", "CONFIG_INFINIBAND_USER_MEM"];
        let ev = OPTS
            .iter()
            .map(|o| {
                Evidence::new(
                    source.clone(),
                    cfg.line(o)
                        .map_or_else(|| format!("(no {o} line)"), str::to_string),
                )
            })
            .collect();
        return if OPTS.iter().all(|o| cfg.value(o) == Some("y")) {
            (Some(true), DmaBufBasis::Config, ev)
        } else {
            (Some(false), DmaBufBasis::ConfigMissing, ev)
        };
    }
    (None, DmaBufBasis::Unknown, Vec::new())
}

fn cc(g: &Gpu) -> Option<MajorMinor> {
    g.compute_capability.as_deref()?.parse().ok()
}

fn open_capable(g: &Gpu, t: &Thresholds) -> Option<bool> {
    match cc(g) {
        Some(c) => Some(c >= t.open_min_compute_capability),
        None => g
            .pci_device_id
            .filter(|id| super::gpudb::open_supported(*id))
            .map(|_| true),
    }
}

fn gpu_label(g: &Gpu) -> String {
    let name = g.name.as_deref().unwrap_or("NVIDIA GPU");
    match &g.bus_id {
        Some(b) => format!("{name} at {b}"),
        None => name.to_string(),
    }
}

/// Assesses one node's facts.
pub fn assess(f: &Facts, t: &Thresholds) -> Assessment {
    let mut r: Vec<Reason> = Vec::new();
    // `None`: the flavour evidence could not be read (a failed or missing section) — unknown,
    // which is not `module-flavor-unknown` (evidence that names no known flavour).
    let flavor = f.driver.as_ref().map(|d| d.flavor);
    let module_loaded = matches!(
        flavor,
        Some(Flavor::Open | Flavor::Proprietary | Flavor::Unknown)
    );
    let flavor = flavor.unwrap_or(Flavor::Unknown);
    let flavor_known = f.driver.is_some();
    // GPUs bound to another driver (vfio-pci passthrough, nouveau) are not the NVIDIA driver's:
    // they are said (`gpu-bound-elsewhere`) and otherwise left out.
    let (elsewhere, pci): (Vec<_>, Vec<_>) = f
        .pci_gpus
        .clone()
        .unwrap_or_default()
        .into_iter()
        .partition(|d| d.bound_elsewhere());
    let seen_gpus = f
        .gpus
        .iter()
        .filter(|g| {
            !elsewhere
                .iter()
                .any(|d| g.bus_id.as_deref() == Some(d.bus_id.as_str()))
        })
        .count();
    let nvidia_node = module_loaded || seen_gpus > 0 || !pci.is_empty();
    if !elsewhere.is_empty() {
        r.push(Reason::new(
            Code::GpuBoundElsewhere,
            format!(
                "{} NVIDIA GPU(s) bound to another driver ({}): passed through to VMs or driven by nouveau, not the NVIDIA driver's",
                elsewhere.len(),
                elsewhere
                    .iter()
                    .filter_map(|d| d.driver.clone())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            elsewhere
                .iter()
                .map(|d| {
                    Evidence::new(
                        format!("/sys/bus/pci/devices/{}/driver", d.bus_id),
                        format!("-> {}", d.driver.as_deref().unwrap_or("?")),
                    )
                })
                .collect(),
        ));
    }
    let driver_ev = f
        .driver
        .as_ref()
        .map(|d| d.evidence.clone())
        .unwrap_or_default();
    let version = f.driver.as_ref().and_then(|d| d.version.clone());

    // attention: nvidia-smi.
    match &f.smi {
        SmiOutcome::TimedOut { command } => r.push(Reason::new(
            Code::NvidiaSmiTimeout,
            "nvidia-smi did not answer within its time limit (a wedged driver or GPU); GPU facts come from /proc and PCI",
            vec![Evidence::new(command.clone(), "(no answer)")],
        )),
        SmiOutcome::Failed { command, failure, output } => {
            let ev = output
                .lines()
                .map(|l| Evidence::new(command.clone(), l))
                .collect();
            match failure {
                SmiFailure::Mismatch { nvml_version } => r.push(Reason::new(
                    Code::DriverLibraryMismatch,
                    format!(
                        "nvidia-smi: driver/library version mismatch (NVML {}, loaded module {}); reboot or reload the module",
                        nvml_version.as_deref().unwrap_or("?"),
                        version.as_deref().unwrap_or("?")
                    ),
                    ev,
                )),
                SmiFailure::NoDevices if !pci.is_empty() => {}
                _ if module_loaded => r.push(Reason::new(
                    Code::NvidiaSmiFailed,
                    format!("nvidia-smi failed: {}", match failure {
                        SmiFailure::Other(m) => m.clone(),
                        SmiFailure::NoDevices => "No devices were found".into(),
                        SmiFailure::CannotCommunicate => "it couldn't communicate with the NVIDIA driver".into(),
                        SmiFailure::Mismatch { .. } => unreachable!(),
                    }),
                    ev,
                )),
                _ => {}
            }
        }
        _ => {}
    }
    // attention: GPUs the driver did not take.
    let smi_no_devices = matches!(
        &f.smi,
        SmiOutcome::Failed {
            failure: SmiFailure::NoDevices,
            ..
        }
    );
    if flavor == Flavor::None && !pci.is_empty() {
        r.push(Reason::new(
            Code::GpuWithoutDriver,
            format!(
                "{} NVIDIA GPU(s) on the PCI bus but no nvidia module is loaded (failed install, or Secure Boot rejected it)",
                pci.len()
            ),
            pci_evidence(&pci),
        ));
    } else if module_loaded {
        let missing: Vec<_> = match &f.proc_gpus {
            Some(proc) => pci
                .iter()
                .filter(|d| !proc.iter().any(|p| p.bus_id == d.bus_id))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        if !missing.is_empty() {
            r.push(Reason::new(
                Code::GpuNotInitialized,
                format!(
                    "{} NVIDIA GPU(s) on the PCI bus are missing from /proc/driver/nvidia/gpus: the driver did not initialize them",
                    missing.len()
                ),
                pci_evidence(&missing),
            ));
        } else if smi_no_devices && !pci.is_empty() {
            r.push(Reason::new(
                Code::GpuNotInitialized,
                "nvidia-smi found no devices although NVIDIA GPUs are on the PCI bus",
                pci_evidence(&pci),
            ));
        }
    }
    // attention: GPUs that need the open module, with the proprietary one loaded.
    if flavor == Flavor::Proprietary {
        let need: Vec<&Gpu> = f
            .gpus
            .iter()
            .filter(|g| {
                cc(g).is_some_and(|c| c >= t.open_required_compute_capability)
                    || g.name.as_deref().is_some_and(|n| n.contains("GH200"))
            })
            .collect();
        if !need.is_empty() {
            r.push(Reason::new(
                Code::GpuRequiresOpen,
                format!(
                    "{} requires the open kernel modules, but the proprietary module is loaded",
                    gpu_label(need[0])
                ),
                need.iter().map(|g| g.evidence.clone()).collect(),
            ));
        }
    }
    if flavor_known && flavor == Flavor::Unknown {
        let why = f
            .unknowns
            .iter()
            .find(|u| u.fact == "driver.flavor")
            .map_or("no evidence", |u| u.why.as_str());
        r.push(Reason::new(
            Code::ModuleFlavorUnknown,
            format!("cannot tell whether the open or the proprietary module is loaded: {why}"),
            driver_ev.clone(),
        ));
    }

    // blocked.
    let (dma_buf, basis, dma_ev) = dma_buf_support(f, t);
    let rdma = rdma_applies(f);
    let open_caps: Vec<Option<bool>> = f.gpus.iter().map(|g| open_capable(g, t)).collect();
    if nvidia_node {
        let old: Vec<(MajorMinor, &Gpu)> = f
            .gpus
            .iter()
            .filter_map(|g| cc(g).map(|c| (c, g)))
            .filter(|(c, _)| *c < t.open_min_compute_capability)
            .collect();
        if let Some((c, g)) = old.iter().min_by_key(|(c, _)| *c) {
            r.push(Reason::new(
                Code::GpuPreTuring,
                format!(
                    "{} of {} GPUs have compute capability below {} (lowest: {} with {c}); the open kernel modules need {} or higher",
                    old.len(),
                    f.gpus.len(),
                    t.open_min_compute_capability,
                    gpu_label(g),
                    t.open_min_compute_capability
                ),
                old.iter().map(|(_, g)| g.evidence.clone()).collect(),
            ));
        }
        // The kernel's DMA-BUF support matters where GPUDirect RDMA applies (an RDMA device,
        // or nvidia-peermem in use); where it does not, or cannot be told, it blocks nothing.
        let basis = if rdma == Some(true) {
            basis
        } else {
            DmaBufBasis::Kallsyms
        };
        match basis {
            DmaBufBasis::BelowMinimum => r.push(Reason::new(
                Code::KernelBelowDmabufMinimum,
                format!(
                    "kernel {} is below {}, the minimum for DMA-BUF GPUDirect RDMA",
                    f.kernel_release.as_deref().unwrap_or("?"),
                    t.dmabuf_min_kernel
                ),
                dma_ev.clone(),
            )),
            DmaBufBasis::ConfigMissing => r.push(Reason::new(
                Code::DmabufKernelMissing,
                "the kernel is not built with CONFIG_DMA_SHARED_BUFFER=y and CONFIG_INFINIBAND_USER_MEM=y, which DMA-BUF RDMA needs",
                dma_ev.clone(),
            )),
            DmaBufBasis::Unknown => r.push(Reason::new(
                Code::DmabufKernelUnknown,
                "DMA-BUF kernel support unknown: no ib_umem_dmabuf_get in /proc/kallsyms and no kernel config could be read",
                Vec::new(),
            )),
            DmaBufBasis::Kallsyms | DmaBufBasis::Config => {}
        }
    }

    // migrate.
    if flavor == Flavor::Proprietary {
        r.push(Reason::new(
            Code::ProprietaryModule,
            format!(
                "proprietary NVIDIA module {} is loaded",
                version.as_deref().unwrap_or("(version unknown)")
            ),
            driver_ev.clone(),
        ));
    }
    if f.peermem_loaded == Some(true) {
        let legacy = f
            .peermem_loaded_evidence
            .iter()
            .any(|e| e.line.split_whitespace().next() == Some("nv_peer_mem"));
        r.push(Reason::new(
            Code::PeermemLoaded,
            if legacy {
                "nv_peer_mem (the legacy Mellanox peer-memory module nvidia-peermem replaced) is loaded"
            } else {
                "nvidia_peermem is loaded"
            },
            f.peermem_loaded_evidence.clone(),
        ));
    }
    if f.peermem_configured == Some(true) {
        r.push(Reason::new(
            Code::PeermemConfigured,
            "nvidia-peermem is loaded at boot",
            f.peermem_configured_evidence.clone(),
        ));
    }
    if flavor_known && flavor == Flavor::None && seen_gpus == 0 && pci.is_empty() {
        r.push(Reason::new(
            Code::NoNvidiaModule,
            "no NVIDIA driver loaded",
            driver_ev.clone(),
        ));
    }

    if nvidia_node && rdma == Some(false) {
        r.push(Reason::new(
            Code::NoRdmaDevice,
            "no RDMA device (/sys/class/infiniband is empty) and no nvidia-peermem: GPUDirect RDMA does not apply, and the kernel's DMA-BUF support does not block the move to open modules",
            vec![Evidence::new("/sys/class/infiniband", "(no entries)")],
        ));
    }
    super::diagnose::rules(f, t, &mut r);

    // advisories.
    if nvidia_node {
        if let Some(v) = f.kernel_release.as_deref().and_then(kernel_version)
            && below(&v, t.kernel_guideline)
        {
            r.push(Reason::new(
                Code::KernelBelowGuideline,
                format!(
                    "kernel {}.{} is below {} (advisory: DMA-BUF needs {}+, many guides say {})",
                    v.major, v.minor, t.kernel_guideline, t.dmabuf_min_kernel, t.kernel_guideline
                ),
                f.kernel_evidence.iter().cloned().collect(),
            ));
        }
        if flavor == Flavor::Open && f.taint.is_some_and(|v| v & 1 == 1) {
            r.push(Reason::new(
                Code::ProprietaryTaintSticky,
                "the open module is loaded but the kernel is still tainted by a proprietary module (switched without a reboot)",
                f.taint_evidence.iter().cloned().collect(),
            ));
        }
    }
    if let Some(cut) = &f.incomplete {
        r.push(Reason::new(
            Code::ProbeIncomplete,
            format!(
                "the probe did not finish ({}); it stopped after {}: facts it had not read yet are unknown",
                cut.why,
                cut.last_section.as_deref().unwrap_or("no section")
            ),
            Vec::new(),
        ));
    }
    for u in &f.unknowns {
        r.push(Reason::new(
            Code::FactUnknown,
            format!("{} unknown: {}", u.fact, u.why),
            Vec::new(),
        ));
    }

    // Precedence among the statuses of the reasons; `unknown` is decided after it.
    let mut status = r
        .iter()
        .filter_map(|x| x.code.status())
        .min()
        .unwrap_or(NodeStatus::Ready);
    if matches!(status, NodeStatus::Ready | NodeStatus::NoDriver) {
        let missing = verdict_unknowns(f, status, dma_buf);
        if !missing.is_empty() {
            r.push(Reason::new(
                Code::VerdictIncomplete,
                format!(
                    "no verdict: the node would be {status}, but {} unknown: {}",
                    if missing.len() == 1 {
                        "this fact is"
                    } else {
                        "these facts are"
                    },
                    missing.join("; ")
                ),
                Vec::new(),
            ));
            status = NodeStatus::Unknown;
        }
    }
    r.sort_by_key(|x| x.severity);
    Assessment {
        status,
        reasons: r,
        dma_buf,
        dma_buf_basis: basis,
        dma_buf_evidence: dma_ev,
        open_capable: open_caps,
    }
}

/// Whether GPUDirect RDMA applies to the node (docs/domain.md "GPUDirect RDMA applies"): it has an
/// RDMA device (an entry in /sys/class/infiniband) or uses nvidia-peermem (loaded or configured).
/// `None` when that cannot be told (the RDMA device list was not read and peermem is not known
/// to be in use).
pub fn rdma_applies(f: &Facts) -> Option<bool> {
    if f.peermem_loaded == Some(true) || f.peermem_configured == Some(true) {
        return Some(true);
    }
    match &f.rdma_devices {
        Some(d) if !d.is_empty() => Some(true),
        Some(_) if f.peermem_loaded.is_some() && f.peermem_configured.is_some() => Some(false),
        _ => None,
    }
}

/// The facts that a `ready` or `no-driver` verdict rests on which are unknown, each as
/// "fact (why)" (docs/domain.md "Conclusions from absence need their facts"). `ready` rests on the
/// probe's trailer, the module flavour, nvidia-peermem loaded and configured, the GPU list,
/// RDMA applicability and, where RDMA applies, DMA-BUF support; `no-driver` on the trailer,
/// the module flavour and the PCI scan.
fn verdict_unknowns(f: &Facts, status: NodeStatus, dma_buf: Option<bool>) -> Vec<String> {
    let why = |fact: &str| {
        f.unknowns
            .iter()
            .find(|u| u.fact == fact)
            .map_or_else(|| fact.to_string(), |u| format!("{fact} ({})", u.why))
    };
    let mut missing = Vec::new();
    if let Some(cut) = &f.incomplete {
        missing.push(format!("probe trailer ({})", cut.why));
    }
    if f.driver.is_none() {
        missing.push(why("driver.flavor"));
    }
    if status == NodeStatus::NoDriver {
        if f.pci_gpus.is_none() {
            missing.push(why("gpus (PCI)"));
        }
        return missing;
    }
    if f.peermem_loaded.is_none() {
        missing.push(why("peermem.loaded"));
    }
    if f.peermem_configured.is_none() {
        missing.push(why("peermem.configured"));
    }
    // Whether every GPU is the driver's needs the PCI scan and the driver's own list, unless
    // nvidia-smi listed every GPU the PCI scan saw.
    let smi_bus: Vec<&str> = match &f.smi {
        SmiOutcome::Answered { .. } => f
            .gpus
            .iter()
            .filter(|g| g.initialized)
            .filter_map(|g| g.bus_id.as_deref())
            .collect(),
        _ => Vec::new(),
    };
    let smi_covers_pci = matches!(f.smi, SmiOutcome::Answered { .. })
        && f.pci_gpus.as_ref().is_some_and(|pci| {
            pci.iter()
                .filter(|d| !d.bound_elsewhere())
                .all(|d| smi_bus.contains(&d.bus_id.as_str()))
        });
    if !smi_covers_pci {
        if f.proc_gpus.is_none() {
            missing.push(why("gpus (driver)"));
        }
        if f.pci_gpus.is_none() {
            missing.push(why("gpus (PCI)"));
        }
    }
    match rdma_applies(f) {
        // Unknown because the device list was not read, or because nvidia-peermem's use is.
        None if f.rdma_devices.is_none() => missing.push(why("rdma.devices")),
        None => missing.push(
            "GPUDirect RDMA applicability (no RDMA device, but whether nvidia-peermem is used is unknown)"
                .to_string(),
        ),
        Some(true) if dma_buf.is_none() => missing.push(format!(
            "dma_buf.kernel_support (RDMA applies; {})",
            why("kernel config")
        )),
        _ => {}
    }
    missing
}

fn pci_evidence(devs: &[super::sysfs::PciDevice]) -> Vec<Evidence> {
    devs.iter().map(super::facts::pci_evidence).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{collect, sections};

    const B: &str = "gpufleet-test";

    /// What a complete probe of a bare machine prints, overridden by `parts`.
    const BARE: &[(&str, &str, &str, &str)] = &[
        ("file", "/proc/sys/kernel/tainted", "ok", "0\n"),
        ("file", "/etc/os-release", "absent", ""),
        ("file", "/proc/driver/nvidia/version", "absent", ""),
        ("file", "/sys/module/nvidia/version", "absent", ""),
        ("file", "/proc/modules", "ok", ""),
        ("dir", "/sys/module", "ok", ""),
        ("dir", "/proc/driver/nvidia/gpus", "absent", ""),
        ("dir", "/sys/bus/pci/devices", "ok", ""),
        ("dir", "/etc/modules-load.d", "absent", ""),
        ("dir", "/etc/modprobe.d", "absent", ""),
        ("dir", "/run/modules-load.d", "absent", ""),
        ("dir", "/run/modprobe.d", "absent", ""),
        ("dir", "/usr/local/lib/modules-load.d", "absent", ""),
        ("dir", "/usr/local/lib/modprobe.d", "absent", ""),
        ("dir", "/usr/lib/modules-load.d", "absent", ""),
        ("dir", "/usr/lib/modprobe.d", "absent", ""),
        ("dir", "/lib/modules-load.d", "absent", ""),
        ("dir", "/lib/modprobe.d", "absent", ""),
        ("dir", "/sys/class/infiniband", "absent", ""),
        ("dir", "/lib/modules", "absent", ""),
        ("dir", "/boot", "absent", ""),
        ("link", "/boot/vmlinuz", "absent", ""),
        ("link", "/vmlinuz", "absent", ""),
        ("file", "/boot/grub2/grubenv", "absent", ""),
        ("file", "/run/reboot-required", "absent", ""),
        ("file", "/proc/driver/nvidia/params", "absent", ""),
        (
            "file",
            "/sys/kernel/mm/memory_peers/nv_mem/version",
            "absent",
            "",
        ),
        (
            "file",
            "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
            "absent",
            "",
        ),
        ("dir", "/run/nvidia/driver", "absent", ""),
        ("count", "/usr/lib64/libibverbs.so.1", "absent", ""),
        (
            "count",
            "/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
            "absent",
            "",
        ),
        (
            "count",
            "/usr/lib/aarch64-linux-gnu/libibverbs.so.1",
            "absent",
            "",
        ),
        ("count", "/usr/lib/libibverbs.so.1", "absent", ""),
        ("dir", "/sys/firmware/efi", "absent", ""),
        ("file", "/sys/kernel/security/lockdown", "absent", ""),
        ("file", "/proc/cmdline", "ok", "ro quiet\n"),
        ("cmd", "dmesg", "ok", ""),
        ("grep", "/proc/kallsyms", "ok", ""),
        ("grep", "/proc/config.gz", "absent", ""),
        (
            "cmd",
            "nvidia-smi --query-gpu=...",
            "missing-tool nvidia-smi",
            "",
        ),
    ];

    /// A probe output from `(kind, name, status, body)` sections, ending with the trailer (`meta complete`).
    fn probe(parts: &[(&str, &str, &str, &str)]) -> Facts {
        let mut raw = format!("{B} meta probe\nprotocol 1\n\n{B} end ok\n");
        let given = |k: &str, n: &str| {
            parts.iter().any(|(pk, pn, ..)| {
                let tool = |c: &str| c.split_whitespace().next().unwrap_or("").to_string();
                *pk == k && (*pn == n || k == "cmd" && tool(pn) == tool(n))
            })
        };
        let defaults = BARE.iter().filter(|(k, n, ..)| !given(k, n));
        for (kind, name, status, body) in parts.iter().chain(defaults) {
            raw.push_str(&format!("{B} {kind} {name}\n{body}\n{B} end {status}\n"));
        }
        raw.push_str(&format!("{B} meta complete\n\n{B} end ok\n"));
        collect(&sections::parse(raw.as_bytes(), B))
    }

    fn codes(a: &Assessment) -> Vec<&'static str> {
        a.reasons.iter().map(|r| r.code.as_str()).collect()
    }

    const OPEN: (&str, &str, &str, &str) = (
        "file",
        "/proc/driver/nvidia/version",
        "ok",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n",
    );
    const PROP: (&str, &str, &str, &str) = (
        "file",
        "/proc/driver/nvidia/version",
        "ok",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n",
    );
    const KALLSYMS: (&str, &str, &str, &str) = (
        "grep",
        "/proc/kallsyms",
        "ok",
        "0000000000000000 T ib_umem_dmabuf_get\t[ib_uverbs]\n",
    );

    fn rel(r: &str) -> (&'static str, &'static str, &'static str, String) {
        ("file", "/proc/sys/kernel/osrelease", "ok", format!("{r}\n"))
    }

    fn with_release(r: &str, rest: &[(&str, &str, &str, &str)]) -> Facts {
        let (k, n, s, b) = rel(r);
        let boot = format!("/boot/config-{r}");
        let mut parts = vec![(k, n, s, b.as_str())];
        if !rest.iter().any(|(_, n, ..)| *n == boot) {
            parts.push(("grep", &boot, "absent", ""));
        }
        parts.extend_from_slice(rest);
        probe(&parts)
    }

    #[test]
    fn kernel_without_modules_and_no_driver_is_no_driver_without_unknowns() {
        // This project's own CI machines: no /proc/modules, no NVIDIA files at all.
        let f = with_release(
            "6.1.0",
            &[
                ("file", "/proc/modules", "absent", ""),
                ("file", "/proc/driver/nvidia/version", "absent", ""),
                ("dir", "/sys/bus/pci/devices", "ok", "0000:00:01.0\n"),
                (
                    "file",
                    "/sys/bus/pci/devices/0000:00:01.0/vendor",
                    "ok",
                    "0x8086\n",
                ),
                ("dir", "/etc/modprobe.d", "absent", ""),
                ("dir", "/etc/modules-load.d", "absent", ""),
                ("file", "/proc/sys/kernel/tainted", "ok", "0\n"),
            ],
        );
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.status, NodeStatus::NoDriver);
        assert_eq!(codes(&a), vec!["no-nvidia-module"]);
        assert_eq!(f.modules, Some(vec![]));
        assert_eq!(f.peermem_loaded, Some(false));
        assert_eq!(f.peermem_configured, Some(false));
    }

    #[test]
    fn unreadable_version_file_makes_the_flavor_unknown() {
        let f = with_release(
            "6.8.0",
            &[
                ("file", "/proc/driver/nvidia/version", "denied", ""),
                ("file", "/proc/modules", "error 5", ""),
                ("dir", "/sys/module", "denied", ""),
            ],
        );
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.status, NodeStatus::Attention);
        assert!(codes(&a).contains(&"module-flavor-unknown"));
        assert!(codes(&a).contains(&"fact-unknown"));
        assert_eq!(f.peermem_loaded, None);
    }

    #[test]
    fn taint_letters_decide_the_flavor_when_the_banner_is_garbage() {
        let modules = "nvidia 56598528 147 nvidia_uvm, Live 0x0000000000000000 (POE)\n";
        let f = with_release(
            "6.8.0",
            &[
                (
                    "file",
                    "/proc/driver/nvidia/version",
                    "ok",
                    "\u{1}\u{2}garbage\n",
                ),
                ("file", "/proc/modules", "ok", modules),
                ("file", "/sys/module/nvidia/version", "ok", "535.183.01\n"),
                KALLSYMS,
            ],
        );
        let d = f.driver.clone().unwrap();
        assert_eq!(d.flavor, Flavor::Proprietary);
        assert_eq!(d.version.as_deref(), Some("535.183.01"));
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.status, NodeStatus::Migrate);
    }

    const PCI_GPU: [(&str, &str, &str, &str); 4] = [
        ("dir", "/sys/bus/pci/devices", "ok", "0000:18:00.0\n"),
        (
            "file",
            "/sys/bus/pci/devices/0000:18:00.0/vendor",
            "ok",
            "0x10de\n",
        ),
        (
            "file",
            "/sys/bus/pci/devices/0000:18:00.0/device",
            "ok",
            "0x20b2\n",
        ),
        (
            "file",
            "/sys/bus/pci/devices/0000:18:00.0/class",
            "ok",
            "0x030200\n",
        ),
    ];

    #[test]
    fn gpu_without_driver() {
        let mut parts = PCI_GPU.to_vec();
        parts.push(("file", "/proc/driver/nvidia/version", "absent", ""));
        parts.push(("file", "/proc/modules", "ok", ""));
        let f = with_release("6.8.0", &parts);
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.status, NodeStatus::Attention);
        assert!(codes(&a).contains(&"gpu-without-driver"));
        // The GPU is still reported, named from the PCI table.
        assert_eq!(f.gpus[0].name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
        assert!(!f.gpus[0].initialized);
    }

    #[test]
    fn gpu_not_initialized_while_the_module_is_loaded() {
        let mut parts = PCI_GPU.to_vec();
        parts.extend([
            OPEN,
            KALLSYMS,
            ("dir", "/proc/driver/nvidia/gpus", "ok", ""),
        ]);
        let f = with_release("6.8.0", &parts);
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.status, NodeStatus::Attention);
        assert!(codes(&a).contains(&"gpu-not-initialized"));
    }

    #[test]
    fn blackwell_with_the_proprietary_module_requires_open() {
        let smi = "index, name, pci.bus_id, compute_cap\n0, NVIDIA B200, 00000000:18:00.0, 10.0\n";
        let f = with_release(
            "6.8.0",
            &[
                PROP,
                KALLSYMS,
                ("cmd", "nvidia-smi --query-gpu=x", "ok", smi),
            ],
        );
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.status, NodeStatus::Attention);
        assert!(codes(&a).contains(&"gpu-requires-open"));
        assert!(codes(&a).contains(&"proprietary-module"));
    }

    #[test]
    fn open_with_sticky_taint_is_ready_with_an_advisory() {
        let f = with_release(
            "6.8.0",
            &[
                OPEN,
                KALLSYMS,
                ("file", "/proc/sys/kernel/tainted", "ok", "12289\n"),
            ],
        );
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.status, NodeStatus::Ready);
        assert_eq!(
            codes(&a),
            vec!["proprietary-taint-sticky", "no-rdma-device"]
        );
    }

    #[test]
    fn backported_kernel_with_the_symbol_is_not_blocked() {
        let f = with_release("4.18.0-513.el8.x86_64", &[OPEN, KALLSYMS]);
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.dma_buf, Some(true));
        assert_eq!(a.status, NodeStatus::Ready);
        assert!(!codes(&a).contains(&"kernel-below-dmabuf-minimum"));
        assert!(codes(&a).contains(&"kernel-below-guideline"));
    }

    const IB: (&str, &str, &str, &str) = ("dir", "/sys/class/infiniband", "ok", "mlx5_0\n");

    #[test]
    fn dmabuf_unknown_where_rdma_applies_is_unknown_and_missing_config_blocks() {
        let parts = [
            OPEN,
            IB,
            ("grep", "/proc/kallsyms", "ok", ""),
            ("grep", "/boot/config-6.8.0", "absent", ""),
        ];
        let f = with_release("6.8.0", &parts);
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.dma_buf, None);
        assert_eq!(a.status, NodeStatus::Unknown);
        assert!(codes(&a).contains(&"dmabuf-kernel-unknown"));
        assert!(codes(&a).contains(&"verdict-incomplete"));
        // Without an RDMA device the same node is ready: DMA-BUF support does not matter there.
        let f = with_release("6.8.0", &parts[..1]);
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.status, NodeStatus::Ready);
        assert!(!codes(&a).contains(&"dmabuf-kernel-unknown"));
        assert!(codes(&a).contains(&"no-rdma-device"));

        let cfg = "CONFIG_DMA_SHARED_BUFFER=y\n# CONFIG_INFINIBAND_USER_MEM is not set\n";
        let f = with_release(
            "6.8.0",
            &[
                OPEN,
                IB,
                ("grep", "/proc/kallsyms", "ok", ""),
                ("grep", "/boot/config-6.8.0", "ok", cfg),
            ],
        );
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.dma_buf, Some(false));
        assert_eq!(a.status, NodeStatus::Blocked);
        let r = a
            .reasons
            .iter()
            .find(|r| r.code == Code::DmabufKernelMissing)
            .unwrap();
        assert!(
            r.evidence
                .iter()
                .any(|e| e.line == "# CONFIG_INFINIBAND_USER_MEM is not set")
        );
    }

    #[test]
    fn thresholds_come_from_configuration() {
        let f = with_release("5.15.0-105-generic", &[OPEN, KALLSYMS]);
        let strict = Thresholds {
            kernel_guideline: MajorMinor(5, 10),
            ..Thresholds::default()
        };
        assert!(codes(&assess(&f, &Thresholds::default())).contains(&"kernel-below-guideline"));
        assert!(!codes(&assess(&f, &strict)).contains(&"kernel-below-guideline"));
        let f = with_release("5.15.0", &[OPEN, IB]);
        let higher_min = Thresholds {
            dmabuf_min_kernel: MajorMinor(6, 1),
            ..Thresholds::default()
        };
        assert_eq!(assess(&f, &higher_min).status, NodeStatus::Blocked);
    }

    #[test]
    fn a_cpu_node_on_an_old_kernel_is_no_driver_not_blocked() {
        let f = with_release(
            "4.18.0",
            &[
                ("file", "/proc/driver/nvidia/version", "absent", ""),
                ("file", "/proc/modules", "ok", ""),
            ],
        );
        let a = assess(&f, &Thresholds::default());
        assert_eq!(a.status, NodeStatus::NoDriver);
        assert_eq!(codes(&a), vec!["no-nvidia-module"]);
    }

    #[test]
    fn every_code_round_trips_and_has_the_documented_severity() {
        for c in Code::ALL {
            assert_eq!(c.as_str().parse::<Code>().unwrap(), *c);
            if c.status() == Some(NodeStatus::Migrate)
                || c.status().is_none()
                    && !matches!(
                        *c,
                        Code::FactUnknown
                            | Code::ProbeIncomplete
                            | Code::NoRdmaDevice
                            | Code::ModuleParamIgnored
                            | Code::GpuOperatorManaged
                            | Code::GpuBoundElsewhere
                            | Code::RebootPending
                    )
            {
                assert_eq!(c.severity(), Severity::Warn, "{c:?}");
            }
        }
        assert_eq!(Code::ALL.len(), 45);
    }
}
