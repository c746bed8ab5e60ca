//! Kernel log rules (docs/domain.md "Rules", "Broken now"): a GPU fallen off the bus,
//! nvidia-peermem failing to load, other Xid events; and the log lines other rules cite.

use std::collections::BTreeMap;

use super::{Code, Node, Reason};
use crate::model::facts::Evidence;
use crate::model::parse::klog::{self, Message};

/// The lines of `msgs` as evidence, at most 12.
pub(super) fn log_evidence(msgs: &[&Message]) -> Vec<Evidence> {
    msgs.iter()
        .flat_map(|m| m.lines.iter().map(|l| Evidence::new("dmesg", l.clone())))
        .take(12)
        .collect()
}

/// The kernel log's messages that begin with `prefix` (the driver's or the kernel's own words)
/// and contain `needle`; none when the log was not read.
pub(super) fn from_log<'a>(n: &Node<'a>, prefix: &str, needle: &str) -> Vec<&'a Message> {
    n.log
        .map(|l| klog::find_from(l, prefix, needle))
        .unwrap_or_default()
}

/// `gpu-fallen-off-bus`: Xid 79, or the driver's banner, naming the bus ids.
pub(super) fn fallen_off_bus(n: &Node, r: &mut Vec<Reason>) {
    let Some(log) = n.log else {
        return;
    };
    // Fallen off the bus: Xid 79, or the driver's banner, naming the bus ids.
    let fallen: Vec<&Message> = log.iter().filter(|m| klog::fallen_off_bus(m)).collect();
    if !fallen.is_empty() {
        let mut buses: Vec<String> = fallen.iter().filter_map(|m| klog::fallen_bus(m)).collect();
        buses.sort();
        buses.dedup();
        // An Xid names `0000:9b:00`, the banner `0000:9b:00.0`: keep the fuller form.
        let all = buses.clone();
        buses.retain(|b| !all.iter().any(|o| o != b && o.starts_with(b.as_str())));
        r.push(Reason::new(
            Code::GpuFallenOffBus,
            format!(
                "GPU {} fell off the bus (Xid 79): it does not answer until the node is power-cycled or the GPU reset; check power, cooling and the PCIe slot",
                if buses.is_empty() { "?".to_string() } else { buses.join(", ") }
            ),
            log_evidence(&fallen),
        ));
    }
}

/// `peermem-load-failed`: configured at boot, not loaded, and the loader's symbol errors.
pub(super) fn peermem_load_failed(n: &Node, r: &mut Vec<Reason>) {
    let f = n.f;
    let Some(log) = n.log else {
        return;
    };
    if f.peermem.configured == Some(true) && f.peermem.loaded == Some(false) {
        let mut failed =
            klog::find_from(log, "nvidia_peermem: disagrees about version of symbol", "");
        failed.extend(klog::find_from(log, "nvidia_peermem: Unknown symbol", ""));
        if !failed.is_empty() {
            r.push(Reason::new(
                Code::PeermemLoadFailed,
                "nvidia-peermem is configured to load but failed: it was built against another RDMA stack (MOFED vs inbox) than the one running; rebuild it, or move to DMA-BUF and drop it",
                log_evidence(&failed),
            ));
        }
    }
}

/// `xid-events`: the other Xid codes in the lines read, with their counts.
pub(super) fn xid_events(n: &Node, r: &mut Vec<Reason>) {
    let Some(log) = n.log else {
        return;
    };
    let counts = klog::xid_counts(log);
    let others: BTreeMap<u32, u32> = counts.into_iter().filter(|(c, _)| *c != 79).collect();
    if !others.is_empty() {
        let list: Vec<String> = others.iter().map(|(c, n)| format!("{c} ({n}x)")).collect();
        let lines: Vec<&Message> = log
            .iter()
            .filter(|m| klog::xid(m).is_some_and(|x| x.code != 79))
            .collect();
        r.push(Reason::new(
            Code::XidEvents,
            format!(
                "Xid events in the kernel log: {} (NVIDIA's Xid catalog says what each means)",
                list.join(", ")
            ),
            log_evidence(&lines),
        ));
    }
}
