//! DMA-BUF and RDMA rules (docs/domain.md "Rules"): the kernel's DMA-BUF support and when it
//! blocks, whether GPUDirect RDMA applies, nvidia-peermem (loaded, loaded at boot, registered
//! for older NCCL) and the host's verbs library.

use procfs_core::sys::kernel::Version;

use super::{Code, MajorMinor, Node, Reason, Thresholds};
use crate::model::facts::{Evidence, Facts};

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

/// The release as a kernel version (`None` when it does not parse as one).
pub(super) fn kernel_version(release: &str) -> Option<Version> {
    Version::from_str(release).ok()
}

/// Whether `v` is below the major.minor `t`.
pub(super) fn below(v: &Version, t: MajorMinor) -> bool {
    (u32::from(v.major), u32::from(v.minor)) < (t.0, t.1)
}

/// The DMA-BUF rule of docs/domain.md: kallsyms, else release below minimum, else kernel config.
pub fn dma_buf_support(f: &Facts, t: &Thresholds) -> (Option<bool>, DmaBufBasis, Vec<Evidence>) {
    if f.kernel.kallsyms_dmabuf == Some(true) {
        return (
            Some(true),
            DmaBufBasis::Kallsyms,
            f.kernel.kallsyms_evidence.iter().cloned().collect(),
        );
    }
    let release = f.kernel.release.as_deref().and_then(kernel_version);
    if let Some(v) = &release
        && below(v, t.dmabuf_min_kernel)
    {
        return (
            Some(false),
            DmaBufBasis::BelowMinimum,
            f.kernel.evidence.iter().cloned().collect(),
        );
    }
    if let Some((source, cfg)) = &f.kernel.config {
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

/// Whether GPUDirect RDMA applies to the node (docs/domain.md "GPUDirect RDMA applies"): it has an
/// RDMA device (an entry in /sys/class/infiniband) or uses nvidia-peermem (loaded or configured).
/// `None` when that cannot be told (the RDMA device list was not read and peermem is not known
/// to be in use).
pub fn rdma_applies(f: &Facts) -> Option<bool> {
    if f.peermem.loaded == Some(true) || f.peermem.configured == Some(true) {
        return Some(true);
    }
    match &f.rdma.devices {
        Some(d) if !d.is_empty() => Some(true),
        Some(_) if f.peermem.loaded.is_some() && f.peermem.configured.is_some() => Some(false),
        _ => None,
    }
}

/// `kernel-below-dmabuf-minimum`, `dmabuf-kernel-missing`, `dmabuf-kernel-unknown`: the
/// kernel's DMA-BUF support matters where GPUDirect RDMA applies (an RDMA device, or
/// nvidia-peermem in use); where it does not, or cannot be told, it blocks nothing.
pub(super) fn dma_buf_kernel(n: &Node, r: &mut Vec<Reason>) {
    let (f, t) = (n.f, n.t);
    if !n.nvidia_node {
        return;
    }
    let (_, basis, dma_ev) = &n.dma_buf;
    let basis = if n.rdma == Some(true) {
        *basis
    } else {
        DmaBufBasis::Kallsyms
    };
    match basis {
        DmaBufBasis::BelowMinimum => r.push(Reason::new(
            Code::KernelBelowDmabufMinimum,
            format!(
                "kernel {} is below {}, the minimum for DMA-BUF GPUDirect RDMA",
                f.kernel.release.as_deref().unwrap_or("?"),
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

/// `peermem-loaded` (migrate): nvidia_peermem, or the legacy nv_peer_mem, is loaded.
pub(super) fn peermem_loaded(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if f.peermem.loaded == Some(true) {
        let legacy = f
            .peermem
            .loaded_evidence
            .iter()
            .any(|e| e.line.split_whitespace().next() == Some("nv_peer_mem"));
        r.push(Reason::new(
            Code::PeermemLoaded,
            if legacy {
                "nv_peer_mem (the legacy Mellanox peer-memory module nvidia-peermem replaced) is loaded"
            } else {
                "nvidia_peermem is loaded"
            },
            f.peermem.loaded_evidence.clone(),
        ));
    }
}

/// `peermem-configured` (migrate): the boot configuration loads nvidia-peermem.
pub(super) fn peermem_configured(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if f.peermem.configured == Some(true) {
        r.push(Reason::new(
            Code::PeermemConfigured,
            "nvidia-peermem is loaded at boot",
            f.peermem.configured_evidence.clone(),
        ));
    }
}

/// `no-rdma-device`: on an NVIDIA node where GPUDirect RDMA does not apply.
pub(super) fn no_rdma_device(n: &Node, r: &mut Vec<Reason>) {
    if n.nvidia_node && n.rdma == Some(false) {
        r.push(Reason::new(
            Code::NoRdmaDevice,
            "no RDMA device (/sys/class/infiniband is empty) and no nvidia-peermem: GPUDirect RDMA does not apply, and the kernel's DMA-BUF support does not block the move to open modules",
            vec![Evidence::new("/sys/class/infiniband", "(no entries)")],
        ));
    }
}

/// `peermem-not-registered`: loaded, but neither nv_mem nor nv_mem_nc is registered.
pub(super) fn peermem_not_registered(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if f.peermem.loaded == Some(true) && f.peermem.registered.value == Some(false) {
        let mut ev = f.peermem.loaded_evidence.clone();
        ev.push(Evidence::new(
            "/sys/kernel/mm/memory_peers",
            "(no nv_mem/version, no nv_mem_nc/version)",
        ));
        r.push(Reason::new(
            Code::PeermemNotRegistered,
            "nvidia_peermem is loaded but not registered as nv_mem or nv_mem_nc: NCCL before 2.23 then runs without GPUDirect RDMA (later NCCL also accepts /sys/module/nvidia_peermem)",
            ev,
        ));
    }
}

/// The node has an entry in /sys/class/infiniband.
pub(super) fn has_rdma_device(f: &Facts) -> bool {
    f.rdma.devices.as_ref().is_some_and(|d| !d.is_empty())
}

/// `rdma-userspace-lacks-dmabuf`: an RDMA device, and a host libibverbs without
/// `ibv_reg_dmabuf_mr`.
pub(super) fn userspace(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    if has_rdma_device(f) && f.rdma.libibverbs_dmabuf.value == Some(false) {
        r.push(Reason::new(
            Code::RdmaUserspaceLacksDmabuf,
            "the host's libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than 34): jobs that use the host's verbs library cannot register DMA-BUF memory (containers with their own rdma-core are not affected)",
            f.rdma.libibverbs_dmabuf.evidence.clone(),
        ));
    }
}
