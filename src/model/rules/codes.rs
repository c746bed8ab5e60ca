//! The verdict's vocabulary: statuses (worst first), severities, the reason codes with their
//! severity and implied status (docs/domain.md, "Reason codes"), reasons and thresholds.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::facts::Evidence;

/// A node's status, from worst to best in precedence order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
    // Issue 24, driver slice (docs/domain.md "Schema 3").
    DriverBranchDropsGpu = "driver-branch-drops-gpu", Error, Some(S::Attention);
    GpuInitFailed = "gpu-init-failed", Error, Some(S::Attention);
    ModuleKeyUntrusted = "module-key-untrusted", Error, Some(S::Attention);
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
    ProbeLeftProcesses = "probe-left-processes", Warn, None;
    ModuleParamNotApplied = "module-param-not-applied", Warn, None;
    RdmaUserspaceLacksDmabuf = "rdma-userspace-lacks-dmabuf", Warn, None;
    // Issue 24, driver slice.
    GspFirmwareAbsent = "gsp-firmware-absent", Warn, None;
    NoRdmaDevice = "no-rdma-device", Info, None;
    ModuleParamIgnored = "module-param-ignored", Info, None;
    GpuOperatorManaged = "gpu-operator-managed", Info, None;
    GpuBoundElsewhere = "gpu-bound-elsewhere", Info, None;
    RebootPending = "reboot-pending", Info, None;
    FactUnknown = "fact-unknown", Info, None;
    // Schema 3: the NVLink fabric, Xid recovery actions, MIG (docs/domain.md "Schema 3").
    FabricNotReady = "fabric-not-ready", Error, Some(S::Attention);
    XidActionRequired = "xid-action-required", Error, Some(S::Attention);
    MigWithoutInstances = "mig-without-instances", Warn, None;
    // The scheduler's view, joined by the scan (src/fleet/scheduler.rs), not by a rule.
    SchedulerDown = "scheduler-down", Info, None;
    SchedulerDrained = "scheduler-drained", Info, None;
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
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Reason {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub evidence: Vec<Evidence>,
}

impl Reason {
    /// The status this reason implies: its code's, except that `gpu-bound-elsewhere` raised to
    /// `error` (nouveau or nova_core holding a GPU where an NVIDIA module is installed for the
    /// running kernel, docs/domain.md "Schema 3") implies `attention`.
    pub fn status(&self) -> Option<NodeStatus> {
        match (self.code, self.severity) {
            (Code::GpuBoundElsewhere, Severity::Error) => Some(NodeStatus::Attention),
            _ => self.code.status(),
        }
    }

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
