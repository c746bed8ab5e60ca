//! The verdict: one status and every reason that applies (pure: no I/O).
//!
//! Vocabulary, rules and precedence from docs/domain.md ("Verdict: status + reasons" and
//! "Rules"): unreachable > attention > blocked > migrate > no-driver > ready; advisories never
//! change the status; `blocked` and `migrate` reasons apply only to nodes with an NVIDIA module
//! or GPU; all reasons that apply are listed.
//!
//! Every rule is one row of [`RULES`], in the order they run: a rule may read the reasons of the
//! rules above it (the cause of a GPU that is not initialized is said only beside the symptom),
//! and reasons of one severity keep that order in the report. Each row names the codes it may
//! emit (codes.rs gives each its severity and status); its check lives in the file of its
//! subject: gpus.rs (GPUs, and why one is not initialized), driver.rs (the module, nvidia-smi,
//! parameters), rdma.rs (DMA-BUF, peermem, RDMA), boot.rs (the next boot), klog.rs (the kernel
//! log: broken now), node.rs (the kernel's advisories, the probe, the GPU Operator, unknown
//! facts). verdict.rs decides the status from the reasons, and what a `ready` or `no-driver`
//! verdict still lacks.

use crate::model::facts::{Evidence, Facts};
use crate::model::parse::driver::Flavor;
use crate::model::parse::klog::Message;
use crate::model::parse::sysfs::PciDevice;

mod boot;
mod branch;
mod codes;
mod driver;
mod fabric;
mod firmware;
mod gpus;
mod klog;
mod node;
mod other_driver;
mod rdma;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_driver;
mod verdict;

pub use codes::*;
pub use rdma::{DmaBufBasis, dma_buf_support, rdma_applies};

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

/// What several rules read about one node, worked out once from its facts.
struct Node<'a> {
    f: &'a Facts,
    t: &'a Thresholds,
    /// The module's flavour; `Unknown` also when its evidence could not be read.
    flavor: Flavor,
    /// The flavour evidence was read (`f.driver` is there).
    flavor_known: bool,
    /// An NVIDIA module is loaded (open, proprietary, or one of unknown flavour).
    module_loaded: bool,
    /// NVIDIA GPUs on the PCI bus bound to another driver (vfio-pci, nouveau).
    elsewhere: Vec<PciDevice>,
    /// The other NVIDIA GPUs on the PCI bus: the NVIDIA driver's.
    pci: Vec<PciDevice>,
    /// GPUs in `f.gpus` that are not bound elsewhere.
    seen_gpus: usize,
    /// A module is loaded or a GPU is seen: the `blocked` and `migrate` rules apply.
    nvidia_node: bool,
    /// The loaded module's evidence lines.
    driver_ev: Vec<Evidence>,
    /// The loaded module's version.
    version: Option<String>,
    /// `dma_buf.kernel_support`, why, and its lines ([`dma_buf_support`]).
    dma_buf: (Option<bool>, DmaBufBasis, Vec<Evidence>),
    /// Whether GPUDirect RDMA applies ([`rdma_applies`]).
    rdma: Option<bool>,
    /// The kernel log's messages, when it was read.
    log: Option<&'a [Message]>,
}

impl<'a> Node<'a> {
    fn new(f: &'a Facts, t: &'a Thresholds) -> Self {
        // `None`: the flavour evidence could not be read (a failed or missing section) —
        // unknown, which is not `module-flavor-unknown` (evidence that names no known flavour).
        let flavor = f.driver.as_ref().map(|d| d.flavor);
        let module_loaded = matches!(
            flavor,
            Some(Flavor::Open | Flavor::Proprietary | Flavor::Unknown)
        );
        // GPUs bound to another driver (vfio-pci passthrough, nouveau) are not the NVIDIA
        // driver's: they are said (`gpu-bound-elsewhere`) and otherwise left out.
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
        Node {
            f,
            t,
            flavor: flavor.unwrap_or(Flavor::Unknown),
            flavor_known: f.driver.is_some(),
            module_loaded,
            elsewhere,
            pci,
            seen_gpus,
            nvidia_node,
            driver_ev: f
                .driver
                .as_ref()
                .map(|d| d.evidence.clone())
                .unwrap_or_default(),
            version: f.driver.as_ref().and_then(|d| d.version.clone()),
            dma_buf: dma_buf_support(f, t),
            rdma: rdma_applies(f),
            log: f.kernel_log.messages.value.as_deref(),
        }
    }
}

/// One rule of docs/domain.md: its name, the codes it may emit, and its check, which adds
/// its reasons (with the lines that prove them) after those of the rules above it.
pub struct Rule {
    /// What it checks, in a few words.
    pub name: &'static str,
    /// The codes it may emit.
    pub codes: &'static [Code],
    check: fn(&Node, &mut Vec<Reason>),
}

macro_rules! rules {
    ($($check:path => $name:literal, [$($code:ident),+];)*) => {
        /// Every rule, in the order it runs (docs/domain.md "Rules"); the statuses come after
        /// them (verdict.rs). Symptoms first, then what blocks, what migrates, the causes of
        /// the symptoms (beside them only), the kernel log, the next boot, drift and advisories.
        pub const RULES: &[Rule] = &[$(Rule {
            name: $name,
            codes: &[$(Code::$code),+],
            check: $check,
        },)*];
    };
}

rules! {
    other_driver::bound_elsewhere => "GPUs bound to another driver", [GpuBoundElsewhere];
    driver::nvidia_smi => "nvidia-smi", [NvidiaSmiTimeout, DriverLibraryMismatch, NvidiaSmiFailed];
    gpus::not_taken => "GPUs the driver did not take", [GpuWithoutDriver, GpuNotInitialized];
    gpus::requires_open => "GPUs that require open modules", [GpuRequiresOpen];
    driver::flavor_unknown => "the module flavour", [ModuleFlavorUnknown];
    gpus::pre_turing => "eligibility for open modules", [GpuPreTuring];
    rdma::dma_buf_kernel => "DMA-BUF kernel support",
        [KernelBelowDmabufMinimum, DmabufKernelMissing, DmabufKernelUnknown];
    driver::proprietary => "the proprietary module", [ProprietaryModule];
    rdma::peermem_loaded => "nvidia-peermem loaded", [PeermemLoaded];
    rdma::peermem_configured => "nvidia-peermem loaded at boot", [PeermemConfigured];
    driver::no_module => "no NVIDIA module", [NoNvidiaModule];
    rdma::no_rdma_device => "GPUDirect RDMA applies", [NoRdmaDevice];
    gpus::gsp_firmware => "why a GPU is not initialized: GSP firmware", [GspFirmwareMissing];
    gpus::open_opt_in => "why a GPU is not initialized: the open module's opt-in",
        [OpenGpuOptInMissing];
    gpus::open_unsupported => "why a GPU is not initialized: no GSP", [OpenGpuUnsupported];
    gpus::signature_rejected => "why no module is loaded: signatures", [ModuleSignatureRejected];
    // Issue 24 (driver branches, GSP firmware, signing keys): causes, then the failed init.
    branch::drops_gpu => "driver branch vs GPU", [DriverBranchDropsGpu];
    firmware::key_untrusted => "why no module is loaded: the signing key", [ModuleKeyUntrusted];
    firmware::gsp_absent => "GSP firmware of the loaded module", [GspFirmwareAbsent];
    firmware::init_failed => "GPUs whose initialization failed", [GpuInitFailed];
    klog::fallen_off_bus => "broken now: a GPU fell off the bus", [GpuFallenOffBus];
    klog::peermem_load_failed => "broken now: nvidia-peermem failed to load", [PeermemLoadFailed];
    klog::xid_events => "Xid events", [XidEvents];
    // Schema 3: the NVLink fabric, Xid recovery actions, MIG (fabric.rs).
    fabric::not_ready => "the NVLink fabric", [FabricNotReady];
    fabric::xid_action => "Xid recovery actions and row remapping", [XidActionRequired];
    fabric::mig_without_instances => "MIG without GPU instances", [MigWithoutInstances];
    fabric::unknowns => "unknown fabric, Xid and MIG facts", [FactUnknown];
    boot::without_driver => "next boot: the driver", [NextBootWithoutDriver];
    boot::without_peermem => "next boot: nvidia-peermem", [NextBootWithoutPeermem];
    boot::reboot_pending => "a pending reboot", [RebootPending];
    driver::param_drift => "configuration drift", [ModuleParamIgnored, ModuleParamNotApplied];
    rdma::peermem_not_registered => "peermem not visible to older NCCL", [PeermemNotRegistered];
    rdma::userspace => "RDMA userspace", [RdmaUserspaceLacksDmabuf];
    node::gpu_operator => "GPU Operator-managed nodes", [GpuOperatorManaged];
    node::leftovers => "processes the probe left", [ProbeLeftProcesses];
    node::unknown_subjects => "unknown facts that a rule above needs", [FactUnknown];
    node::kernel_guideline => "the kernel guideline", [KernelBelowGuideline];
    node::sticky_taint => "a sticky proprietary taint", [ProprietaryTaintSticky];
    node::probe_incomplete => "the probe's trailer", [ProbeIncomplete];
    node::unknown_facts => "unknown facts", [FactUnknown];
}

/// Assesses one node's facts: every rule of [`RULES`] in order, then the status.
pub fn assess(f: &Facts, t: &Thresholds) -> Assessment {
    let n = Node::new(f, t);
    let mut r: Vec<Reason> = Vec::new();
    for rule in RULES {
        let before = r.len();
        (rule.check)(&n, &mut r);
        debug_assert!(
            r[before..].iter().all(|x| rule.codes.contains(&x.code)),
            "rule {:?} emitted a code it does not list",
            rule.name
        );
    }
    let status = verdict::decide(f, &mut r, n.dma_buf.0);
    r.sort_by_key(|x| x.severity);
    let (dma_buf, basis, dma_ev) = n.dma_buf;
    Assessment {
        status,
        reasons: r,
        dma_buf,
        dma_buf_basis: basis,
        dma_buf_evidence: dma_ev,
        open_capable: f.gpus.iter().map(|g| gpus::open_capable(g, t)).collect(),
    }
}

/// Whether a rule above already gave `code`.
fn has(r: &[Reason], code: Code) -> bool {
    r.iter().any(|x| x.code == code)
}
