//! Peer memory and RDMA: nvidia_peermem loaded (/proc/modules, /sys/module) and registered
//! with the RDMA stack (/sys/kernel/mm/memory_peers), the RDMA devices (/sys/class/infiniband)
//! and the host's verbs library (`ibv_reg_dmabuf_mr` in libibverbs.so.1). Whether peermem is
//! configured to load at boot is read with the boot configuration ([`super::boot`]).

use super::driver::sys_module_listing;
use super::gpus::MAX_GPUS;
use super::*;

/// nvidia-peermem (`peermem` in the JSON).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeermemFacts {
    /// nvidia_peermem (or nv_peer_mem) in /proc/modules, else in /sys/module.
    pub loaded: Option<bool>,
    pub loaded_evidence: Vec<Evidence>,
    /// Loaded at boot by modules-load.d, modprobe.d or the kernel command line, unmasked.
    pub configured: Option<bool>,
    pub configured_evidence: Vec<Evidence>,
    /// The /proc/modules line that names nvidia_peermem (understood or not).
    pub named: Option<String>,
    /// nv_mem or nv_mem_nc registered with the RDMA stack's peer-memory interface.
    pub registered: Proved<bool>,
}

/// RDMA devices and userspace (`rdma` in the JSON).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RdmaFacts {
    /// Entries of /sys/class/infiniband (RDMA devices, RoCE NICs too): `Some(empty)` when the
    /// folder is absent or empty, `None` when it could not be read.
    pub devices: Option<Vec<String>>,
    /// `ibv_reg_dmabuf_mr` in the host's libibverbs.so.1 (`None` with no host library).
    pub libibverbs_dmabuf: Proved<bool>,
}

pub(super) fn peermem_loaded(out: &ProbeOutput, f: &mut Facts) {
    if let Some(line) = f.peermem.named.clone() {
        f.peermem.loaded = Some(true);
        f.peermem.loaded_evidence = vec![Evidence::new("/proc/modules", line)];
        return;
    }
    match sys_module_listing(out) {
        Some(list) if list.iter().any(|m| modconf::is_peermem(m)) => {
            let name = list
                .iter()
                .find(|m| modconf::is_peermem(m))
                .cloned()
                .unwrap_or_default();
            f.peermem.loaded = Some(true);
            f.peermem.loaded_evidence = vec![Evidence::new("/sys/module", name)];
        }
        Some(_) => f.peermem.loaded = Some(false),
        None if f.modules.is_some() => f.peermem.loaded = Some(false),
        None => f.unknown(
            "peermem.loaded",
            "neither /proc/modules nor /sys/module could be read",
        ),
    }
}

/// The facts of this subject without an unknown entry of their own: peermem registered, the
/// host's verbs library.
pub(super) fn collect(out: &ProbeOutput, f: &mut Facts) {
    peermem_registered(out, f);
    libibverbs(out, f);
}

/// /sys/kernel/mm/memory_peers/nv_mem/version or …/nv_mem_nc/version exists.
fn peermem_registered(out: &ProbeOutput, f: &mut Facts) {
    f.peermem.registered = {
        let a = exists(
            out,
            Kind::File,
            "/sys/kernel/mm/memory_peers/nv_mem/version",
        );
        let b = exists(
            out,
            Kind::File,
            "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
        );
        match (a.value, b.value) {
            (Some(true), _) => a,
            (_, Some(true)) => b,
            (Some(false), Some(false)) => Proved::known(false, Vec::new()),
            _ => Proved::unknown(a.why.or(b.why).unwrap_or_default()),
        }
    };
}

pub(super) fn devices(out: &ProbeOutput, f: &mut Facts) {
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
            f.rdma.devices = Some(devs);
        }
        Read::Absent => f.rdma.devices = Some(Vec::new()),
        Read::Failed(why) => f.unknown("rdma.devices", why),
    }
}

fn libibverbs(out: &ProbeOutput, f: &mut Facts) {
    for d in [
        "/usr/lib64",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ] {
        let name = format!("{d}/libibverbs.so.1");
        match read(out, Kind::Count, &name) {
            Read::Absent => continue,
            Read::Failed(why) => {
                f.rdma.libibverbs_dmabuf = Proved::unknown(why);
                return;
            }
            Read::Text(t) => {
                let n: u64 = first_line(&t).trim().parse().unwrap_or(0);
                f.rdma.libibverbs_dmabuf = Proved::known(
                    n > 0,
                    vec![Evidence::new(
                        name,
                        if n > 0 {
                            "ibv_reg_dmabuf_mr (present)".to_string()
                        } else {
                            "(no ibv_reg_dmabuf_mr: rdma-core older than 34)".to_string()
                        },
                    )],
                );
                return;
            }
        }
    }
}
