//! What each host's NCCL lines prove about GPUDirect RDMA: per HCA and per host, DMA-BUF,
//! nvidia-peermem, no GDR, or `gdr-mechanism-unknown` (docs/domain.md, "NCCL logs: `gpufleet
//! nccl`", the decision table).

use std::collections::BTreeMap;

use serde::Serialize;

use super::parse::{self, Event, Gdr};

/// Evidence lines kept per HCA and per host (the first of each kind).
const MAX_EVIDENCE: usize = 8;
/// HCAs kept per host (indices past it are ignored): a real host has at most a few dozen.
pub const MAX_HCAS: usize = 256;

/// How GPUDirect RDMA ran on an HCA or a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Mechanism {
    /// GPU memory registered through DMA-BUF (the target stack).
    #[serde(rename = "dma-buf")]
    DmaBuf,
    /// The log does not say which (with why).
    #[serde(rename = "gdr-mechanism-unknown")]
    Unknown,
    /// GPU memory registered through nvidia-peermem (the legacy stack).
    #[serde(rename = "nvidia-peermem")]
    Peermem,
    /// No GPUDirect RDMA: traffic staged through host memory.
    #[serde(rename = "no-gdr")]
    NoGdr,
}

impl Mechanism {
    /// The word the table and `--help` use.
    pub fn word(self) -> &'static str {
        match self {
            Mechanism::DmaBuf => "dma-buf",
            Mechanism::Peermem => "nvidia-peermem",
            Mechanism::NoGdr => "no-gdr",
            Mechanism::Unknown => "gdr-mechanism-unknown",
        }
    }
}

/// One line of a log that proves something: the file, its 1-based line, the text (raw: the
/// printer escapes it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub file: String,
    pub line: u64,
    pub text: String,
}

/// What the hosts' probe reports (`--snapshot`) say of nvidia_peermem on a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peermem {
    /// No `--snapshot` was given.
    NoSnapshot,
    /// The snapshot has no node of this name.
    NotInSnapshot,
    /// The node's `peermem.loaded` (`None`: unknown there), and where it was read
    /// (`FILE:LINE, scanned_at T`).
    Report {
        loaded: Option<bool>,
        source: String,
    },
}

#[derive(Debug, Default)]
struct Hca {
    name: Option<String>,
    socket: bool,
    enabled: bool,
    disabled: bool,
    dmabuf: bool,
    peermem: bool,
    gdr_channels: u64,
    other_channels: u64,
    evidence: Vec<Evidence>,
}

/// Everything read of one host so far.
#[derive(Debug, Default)]
pub(super) struct Host {
    versions: Vec<String>,
    dmabuf_enable: Option<String>,
    gdr_level: Option<String>,
    dmabuf_available: u64,
    dmabuf_reg_failed: bool,
    /// By (socket transport, device index).
    hcas: BTreeMap<(bool, u32), Hca>,
    /// Device names from `NET/… : Using`, by index (not Socket).
    names: BTreeMap<u32, String>,
    evidence: Vec<Evidence>,
    /// Named after the file: its lines had no `HOST:PID:TID` prefix.
    pub(super) from_file: bool,
}

/// Where a line was read, borrowed: made an [`Evidence`] only when it is kept.
#[derive(Debug, Clone, Copy)]
pub(super) struct At<'a> {
    pub file: &'a str,
    pub line: u64,
    pub text: &'a str,
}

fn keep(list: &mut Vec<Evidence>, at: &At<'_>) {
    if list.len() < MAX_EVIDENCE && !list.iter().any(|e| e.text == at.text) {
        list.push(Evidence {
            file: at.file.to_string(),
            line: at.line,
            text: at.text.to_string(),
        });
    }
}

impl Host {
    /// Adds one line's event (`ev`: where it was read).
    pub(super) fn add(&mut self, event: &Event<'_>, ev: &At<'_>) {
        match event {
            Event::Version(v) => {
                if !self.versions.iter().any(|x| x == v) && self.versions.len() < MAX_EVIDENCE {
                    self.versions.push((*v).to_string());
                    keep(&mut self.evidence, ev);
                }
            }
            Event::Using { net, devs } => {
                if !net.starts_with("Socket") {
                    for (i, name) in devs {
                        if self.names.len() < MAX_HCAS {
                            self.names.insert(*i, (*name).to_string());
                        }
                    }
                }
            }
            Event::Gdr { hca, name, how } => {
                if let Some(h) = self.hca(false, *hca) {
                    if h.name.is_none() {
                        h.name = name.map(str::to_string);
                    }
                    match how {
                        Gdr::Enabled => h.enabled = true,
                        Gdr::Disabled => h.disabled = true,
                        Gdr::DmaBuf => h.dmabuf = true,
                        Gdr::Peermem => h.peermem = true,
                    }
                    keep(&mut h.evidence, ev);
                }
            }
            Event::Channel { net, dev, gdrdma } => {
                let socket = net.starts_with("Socket");
                if let Some(h) = self.hca(socket, *dev) {
                    h.socket = socket;
                    let seen = if *gdrdma {
                        h.gdr_channels += 1;
                        h.gdr_channels
                    } else {
                        h.other_channels += 1;
                        h.other_channels
                    };
                    if seen == 1 {
                        keep(&mut h.evidence, ev);
                    }
                }
            }
            Event::Env { name, value } => {
                let slot = match *name {
                    "NCCL_DMABUF_ENABLE" => &mut self.dmabuf_enable,
                    "NCCL_NET_GDR_LEVEL" => &mut self.gdr_level,
                    _ => return,
                };
                *slot = Some((*value).to_string());
                keep(&mut self.evidence, ev);
            }
            Event::DmaBufAvailable => self.dmabuf_available += 1,
            Event::DmaBufRegFailed => {
                self.dmabuf_reg_failed = true;
                keep(&mut self.evidence, ev);
            }
            Event::Other => {}
        }
    }

    fn hca(&mut self, socket: bool, i: u32) -> Option<&mut Hca> {
        if self.hcas.len() >= MAX_HCAS && !self.hcas.contains_key(&(socket, i)) {
            return None;
        }
        Some(self.hcas.entry((socket, i)).or_default())
    }

    /// Whether DMA-BUF was turned off (`NCCL_DMABUF_ENABLE set by environment to 0`).
    fn dmabuf_off(&self) -> bool {
        self.dmabuf_enable
            .as_deref()
            .is_some_and(|v| v.trim().parse::<i64>() == Ok(0))
    }
}

/// One HCA's answer.
#[derive(Debug, Clone, Serialize)]
pub struct HcaVerdict {
    /// NCCL's device index (`for HCA <i>`, `via NET/IB/<i>`).
    pub index: u32,
    /// `mlx5_0`, from the GDR line or `NET/IB : Using`; `null` when the log never names it.
    pub name: Option<String>,
    /// `IB` (any RDMA transport) or `Socket` (TCP).
    pub transport: &'static str,
    pub gdr: Mechanism,
    pub why: String,
    pub gdrdma_channels: u64,
    pub other_channels: u64,
    pub evidence: Vec<Evidence>,
}

/// One host's answer.
#[derive(Debug, Clone, Serialize)]
pub struct HostVerdict {
    pub host: String,
    /// The host is named after its file: its lines had no `HOST:PID:TID` prefix.
    pub from_file: bool,
    pub gdr: Mechanism,
    pub why: String,
    /// Every `NCCL version` the host printed (several: ranks of different builds).
    pub nccl_version: Vec<String>,
    /// `peermem.loaded` of the host's probe report (`null`: no snapshot, not in it, unknown).
    pub peermem_loaded: Option<bool>,
    /// Where `peermem_loaded` was read, or why it is `null`.
    pub peermem_source: String,
    /// `NCCL_DMABUF_ENABLE` / `NCCL_NET_GDR_LEVEL` as the environment set them (`null`: default).
    pub dmabuf_enable: Option<String>,
    pub net_gdr_level: Option<String>,
    /// How many `DMA-BUF is available on GPU device` lines (proof of nothing: printed at init).
    pub dmabuf_available_lines: u64,
    pub hcas: Vec<HcaVerdict>,
    pub evidence: Vec<Evidence>,
}

fn hca_verdict(host: &Host, (socket, index): (bool, u32), h: &Hca, pm: &Peermem) -> HcaVerdict {
    let name = h
        .name
        .clone()
        .or_else(|| (!socket).then(|| host.names.get(&index).cloned()).flatten());
    let n = h.gdr_channels;
    let (gdr, why) = if socket {
        (
            Mechanism::NoGdr,
            "channels over NET/Socket (TCP): no GPUDirect RDMA".to_string(),
        )
    } else if n > 0 {
        if h.dmabuf {
            (
                Mechanism::DmaBuf,
                "GDRDMA channels, and the IB plugin says \"(DMABUF) enabled\"".to_string(),
            )
        } else if h.peermem {
            (
                Mechanism::Peermem,
                "GDRDMA channels, and the IB plugin says \"(nvidia-peermem) enabled\"".to_string(),
            )
        } else {
            by_probe(host.dmabuf_off(), pm)
        }
    } else if h.other_channels > 0 {
        let also = if h.disabled {
            " and \"GPU Direct RDMA Disabled\""
        } else {
            ""
        };
        (
            Mechanism::NoGdr,
            format!("channels over the network without GDRDMA{also}"),
        )
    } else if h.disabled {
        (
            Mechanism::NoGdr,
            "\"GPU Direct RDMA Disabled\" and no channel over it".to_string(),
        )
    } else {
        (
            Mechanism::Unknown,
            "no channel over it in the log".to_string(),
        )
    };
    HcaVerdict {
        index,
        name,
        transport: if socket { "Socket" } else { "IB" },
        gdr,
        why,
        gdrdma_channels: h.gdr_channels,
        other_channels: h.other_channels,
        evidence: h.evidence.clone(),
    }
}

/// GDRDMA channels without a plugin line: the host's probe report decides.
fn by_probe(dmabuf_off: bool, pm: &Peermem) -> (Mechanism, String) {
    let unknown = |why: String| (Mechanism::Unknown, why);
    match pm {
        Peermem::NoSnapshot => unknown(
            "GDRDMA channels, no plugin line saying how, and no --snapshot to tell whether nvidia_peermem was loaded"
                .to_string(),
        ),
        Peermem::NotInSnapshot => unknown(
            "GDRDMA channels, no plugin line saying how, and the snapshot has no node of this name"
                .to_string(),
        ),
        Peermem::Report { loaded: None, source } => unknown(format!(
            "GDRDMA channels, no plugin line saying how, and nvidia_peermem is unknown in {source}"
        )),
        Peermem::Report { loaded: Some(false), source } if dmabuf_off => unknown(format!(
            "GDRDMA channels with NCCL_DMABUF_ENABLE=0, yet {source} shows nvidia_peermem not loaded: the probe and the job disagree (another boot?)"
        )),
        Peermem::Report { loaded: Some(false), source } => (
            Mechanism::DmaBuf,
            format!("GDRDMA channels and {source} shows nvidia_peermem not loaded"),
        ),
        Peermem::Report { loaded: Some(true), source } if dmabuf_off => (
            Mechanism::Peermem,
            format!("GDRDMA channels, NCCL_DMABUF_ENABLE=0, and {source} shows nvidia_peermem loaded"),
        ),
        Peermem::Report { loaded: Some(true), source } => unknown(format!(
            "GDRDMA channels, nvidia_peermem loaded ({source}) and DMA-BUF not turned off: NCCL prefers DMA-BUF where the HCA supports it, and core NCCL does not log which it chose"
        )),
    }
}

/// The host's answer from its HCAs: the worst of those that carried channels (no-gdr, then
/// nvidia-peermem, then unknown, then dma-buf).
pub(super) fn host_verdict(name: &str, host: &Host, pm: &Peermem) -> HostVerdict {
    let hcas: Vec<HcaVerdict> = host
        .hcas
        .iter()
        .map(|(k, h)| hca_verdict(host, *k, h, pm))
        .collect();
    let used: Vec<&HcaVerdict> = hcas
        .iter()
        .filter(|h| h.gdrdma_channels + h.other_channels > 0)
        .collect();
    let label = |h: &HcaVerdict| {
        h.name
            .clone()
            .unwrap_or_else(|| format!("NET/{}/{}", h.transport, h.index))
    };
    let (gdr, why) = if let Some(worst) = used.iter().max_by_key(|h| h.gdr) {
        let same = used.iter().all(|h| h.gdr == worst.gdr);
        let who = if same && used.len() > 1 {
            format!("all {} HCAs", used.len())
        } else {
            label(worst)
        };
        (worst.gdr, format!("{who}: {}", worst.why))
    } else if !hcas.is_empty() && hcas.iter().all(|h| h.gdr == Mechanism::NoGdr) {
        (
            Mechanism::NoGdr,
            "\"GPU Direct RDMA Disabled\" for every HCA, and no channel over the network".into(),
        )
    } else {
        (
            Mechanism::Unknown,
            "no channel over the network in the log (a single-node job, a log cut before the connections, or NCCL_DEBUG below INFO)"
                .into(),
        )
    };
    let why = if host.dmabuf_reg_failed && gdr != Mechanism::DmaBuf {
        format!("{why}; NCCL warned that ibv_reg_dmabuf_mr failed")
    } else {
        why
    };
    let (peermem_loaded, peermem_source) = match pm {
        Peermem::NoSnapshot => (None, "no --snapshot".to_string()),
        Peermem::NotInSnapshot => (None, "not in the snapshot".to_string()),
        Peermem::Report { loaded, source } => (*loaded, source.clone()),
    };
    HostVerdict {
        host: name.to_string(),
        from_file: host.from_file,
        gdr,
        why,
        nccl_version: host.versions.clone(),
        peermem_loaded,
        peermem_source,
        dmabuf_enable: host.dmabuf_enable.clone(),
        net_gdr_level: host.gdr_level.clone(),
        dmabuf_available_lines: host.dmabuf_available,
        hcas,
        evidence: host.evidence.clone(),
    }
}

/// `parse::line`'s event for the host, or nothing (a line of no interest).
pub(super) fn interesting(l: &parse::Line<'_>) -> bool {
    !matches!(l.event, Event::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(text: &str) -> At<'_> {
        At {
            file: "f",
            line: 1,
            text,
        }
    }

    fn host(lines: &[&str]) -> Host {
        let mut h = Host::default();
        for l in lines {
            let p = parse::line(l).unwrap();
            h.add(&p.event, &ev(l));
        }
        h
    }

    const GDR_CH: &str =
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA";
    const PLAIN_CH: &str = "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0";

    fn report(loaded: Option<bool>) -> Peermem {
        Peermem::Report {
            loaded,
            source: "s.json:1".into(),
        }
    }

    #[test]
    fn the_decision_table() {
        let dmabuf =
            "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0";
        let peer = "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA (nvidia-peermem) enabled for HCA 0 'mlx5_0";
        let off = "h:1:2 [0] NCCL INFO NCCL_DMABUF_ENABLE set by environment to 0.";
        let disabled = "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'";
        let v = |lines: &[&str], pm: Peermem| host_verdict("h", &host(lines), &pm).gdr;
        use Mechanism as M;
        assert_eq!(v(&[dmabuf, GDR_CH], Peermem::NoSnapshot), M::DmaBuf);
        assert_eq!(v(&[peer, GDR_CH], Peermem::NoSnapshot), M::Peermem);
        assert_eq!(v(&[GDR_CH], Peermem::NoSnapshot), M::Unknown);
        assert_eq!(v(&[GDR_CH], Peermem::NotInSnapshot), M::Unknown);
        assert_eq!(v(&[GDR_CH], report(None)), M::Unknown);
        assert_eq!(v(&[GDR_CH], report(Some(false))), M::DmaBuf);
        assert_eq!(v(&[GDR_CH], report(Some(true))), M::Unknown);
        assert_eq!(v(&[off, GDR_CH], report(Some(true))), M::Peermem);
        assert_eq!(v(&[off, GDR_CH], report(Some(false))), M::Unknown);
        assert_eq!(v(&[disabled, PLAIN_CH], Peermem::NoSnapshot), M::NoGdr);
        assert_eq!(v(&[disabled], Peermem::NoSnapshot), M::NoGdr);
        assert_eq!(v(&[PLAIN_CH], Peermem::NoSnapshot), M::NoGdr);
        // Init lines only: nothing proven, whatever "DMA-BUF is available" says.
        let avail = "h:1:2 [0] NCCL INFO DMA-BUF is available on GPU device 0";
        assert_eq!(v(&[avail, dmabuf], Peermem::NoSnapshot), M::Unknown);
        assert_eq!(v(&[avail], report(Some(false))), M::Unknown);
    }

    #[test]
    fn the_worst_hca_that_carried_traffic_decides() {
        let lines = [
            "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0",
            "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'",
            GDR_CH,
        ];
        // mlx5_1 carried nothing: it does not count.
        let v = host_verdict("h", &host(&lines), &Peermem::NoSnapshot);
        assert_eq!(v.gdr, Mechanism::DmaBuf, "{v:?}");
        let mut more = lines.to_vec();
        more.push("h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1");
        let v = host_verdict("h", &host(&more), &Peermem::NoSnapshot);
        assert_eq!(v.gdr, Mechanism::NoGdr);
        assert!(v.why.starts_with("mlx5_1: "), "{}", v.why);
    }
}
