//! One NCCL_DEBUG=INFO line → who printed it and what it says (docs/domain.md, "NCCL logs:
//! `gpufleet nccl`"). Pure functions on `&str`; every string they return is a sub-slice of the
//! line (never escaped here: the printer escapes).
//!
//! NCCL prints `HOST:PID:TID [DEV] NCCL INFO MESSAGE` (`NVIDIA/nccl: src/debug.cc`, the
//! `"%s:%d:%d [%d] NCCL %s "` prefix); launchers add their own prefix in front (`srun -l`'s
//! `0: `, `mpirun --tag-output`'s `[1,0]<stdout>:`), and `NCCL_DEBUG_FILE` logs or old
//! versions print `NCCL version 2.4.7+cuda10.0` bare. The messages read here, with the source
//! that prints them:
//!
//! | message | source |
//! |---|---|
//! | `NCCL version 2.21.5+cuda12.4` | `NVIDIA/nccl: src/init.cc` |
//! | `NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>` | `src/transport/net_ib/init.cc` |
//! | `NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'` (or `Disabled`, old NCCL adds ` (no module)`) | `src/graph/topo.cc` |
//! | `NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0` (no closing quote) | `Mellanox/nccl-rdma-sharp-plugins: src/p2p_plugin.c` |
//! | `NET/IB : GPU Direct RDMA (nvidia-peermem) enabled for HCA 0 'mlx5_0` | the same |
//! | `Channel 00/0 : 9[1] -> 0[0] [receive] via NET/IB/0/GDRDMA` (also `/0(1)/GDRDMA/Shared`) | `src/transport/net.cc` |
//! | `NCCL_DMABUF_ENABLE set by environment to 0.` | `src/misc/param.cc` |
//! | `DMA-BUF is available on GPU device 0` (printed at every init: proves nothing) | `src/init.cc` |
//! | `NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported` | `src/misc/ibvwrap.cc` |

/// Who printed a line: the host of its `HOST:PID:TID` prefix, if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line<'a> {
    /// The host name of the prefix (`None`: a bare line such as `NCCL version …`).
    pub host: Option<&'a str>,
    /// `WARN` rather than `INFO`.
    pub warn: bool,
    /// What was read from the message.
    pub event: Event<'a>,
}

/// How NCCL says GPUDirect RDMA stands for one HCA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gdr {
    /// Core NCCL: `GPU Direct RDMA Enabled for HCA` (the mechanism is not said).
    Enabled,
    /// Core NCCL: `GPU Direct RDMA Disabled for HCA`.
    Disabled,
    /// The IB plugin: `GPU Direct RDMA (DMABUF) enabled`.
    DmaBuf,
    /// The IB plugin: `GPU Direct RDMA (nvidia-peermem) enabled`.
    Peermem,
}

/// What one message says; `Other` for everything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    /// `NCCL version X` (the version token as printed: `2.21.5+cuda12.4`).
    Version(&'a str),
    /// `NET/<net> : Using [i]name:port/… …`: the devices by index.
    Using {
        net: &'a str,
        devs: Vec<(u32, &'a str)>,
    },
    /// `NET/<net> : GPU Direct RDMA … for HCA <i> '<name>'`.
    Gdr {
        hca: u32,
        name: Option<&'a str>,
        how: Gdr,
    },
    /// `Channel … via NET/<net>/<dev>[(…)][/GDRDMA][/Shared]`.
    Channel {
        net: &'a str,
        dev: u32,
        gdrdma: bool,
    },
    /// `NCCL_X set by environment to V.`
    Env { name: &'a str, value: &'a str },
    /// `DMA-BUF is available on GPU device N`.
    DmaBufAvailable,
    /// `… ibv_reg_dmabuf_mr failed …` (a WARN).
    DmaBufRegFailed,
    /// An NCCL line that says nothing read here.
    Other,
}

/// Reads one line; `None` when it is not an NCCL line at all (no `NCCL INFO` / `NCCL WARN`, and
/// not a bare `NCCL version`).
pub fn line(text: &str) -> Option<Line<'_>> {
    let (head, msg, warn) = if let Some(i) = text.find("NCCL INFO ") {
        (&text[..i], &text[i + "NCCL INFO ".len()..], false)
    } else if let Some(i) = text.find("NCCL WARN ") {
        (&text[..i], &text[i + "NCCL WARN ".len()..], true)
    } else {
        let t = text.trim_start();
        let rest = t.strip_prefix("NCCL version ")?;
        return Some(Line {
            host: None,
            warn: false,
            event: version(rest).map_or(Event::Other, Event::Version),
        });
    };
    Some(Line {
        host: host(head),
        warn,
        event: event(msg.trim_end(), warn),
    })
}

/// The host of `…HOST:PID:TID [DEV] ` (what comes before `NCCL INFO`), if it has that form.
fn host(head: &str) -> Option<&str> {
    let head = head.trim_end();
    // `[DEV]`
    let open = head.rfind('[')?;
    let dev = head[open..].strip_prefix('[')?.strip_suffix(']')?;
    if dev.is_empty() || !dev.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let token = head[..open].trim_end().rsplit(char::is_whitespace).next()?;
    let mut parts = token.rsplitn(3, ':');
    let (tid, pid, hostpart) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(tid) || !digits(pid) {
        return None;
    }
    // `[1,0]<stdout>:host`: the launcher's tag ends at the last `:` or `>`.
    let name = hostpart.rsplit([':', '>']).next()?;
    (!name.is_empty()).then_some(name)
}

/// The version token: starts with a digit, ends at whitespace.
fn version(rest: &str) -> Option<&str> {
    let v = rest.split_whitespace().next()?;
    v.starts_with(|c: char| c.is_ascii_digit()).then_some(v)
}

fn event(msg: &str, warn: bool) -> Event<'_> {
    if let Some(rest) = msg.strip_prefix("NCCL version ") {
        return version(rest).map_or(Event::Other, Event::Version);
    }
    if warn {
        return if msg.contains("ibv_reg_dmabuf_mr failed") {
            Event::DmaBufRegFailed
        } else {
            Event::Other
        };
    }
    if msg.starts_with("DMA-BUF is available on GPU device") {
        return Event::DmaBufAvailable;
    }
    if let Some(ev) = net_line(msg) {
        return ev;
    }
    if let Some(i) = msg.find(" via NET/")
        && msg.starts_with("Channel ")
    {
        return channel(&msg[i + " via NET/".len()..]).unwrap_or(Event::Other);
    }
    if let Some((name, value)) = msg.split_once(" set by environment to ")
        && name.starts_with("NCCL_")
        && !name.contains(char::is_whitespace)
    {
        let value = value
            .trim_end()
            .strip_suffix('.')
            .unwrap_or(value.trim_end());
        return Event::Env { name, value };
    }
    Event::Other
}

/// `NET/<net> : Using …` and `NET/<net> : GPU Direct RDMA …`.
fn net_line(msg: &str) -> Option<Event<'_>> {
    let rest = msg.strip_prefix("NET/")?;
    let (net, body) = rest.split_once(" : ")?;
    if net.is_empty() || net.contains(char::is_whitespace) {
        return None;
    }
    if let Some(list) = body.strip_prefix("Using ") {
        let list = list.split(';').next().unwrap_or("");
        let devs = list
            .split_whitespace()
            .filter_map(|t| {
                let (i, name) = t.strip_prefix('[')?.split_once(']')?;
                let name = name.split(':').next()?;
                Some((i.parse().ok()?, name))
            })
            .filter(|(_, n): &(u32, &str)| !n.is_empty())
            .collect();
        return Some(Event::Using { net, devs });
    }
    let gdr = body.strip_prefix("GPU Direct RDMA ")?;
    let (how, after) = if let Some(a) = gdr.strip_prefix("(DMABUF) enabled ") {
        (Gdr::DmaBuf, a)
    } else if let Some(a) = gdr.strip_prefix("(nvidia-peermem) enabled ") {
        (Gdr::Peermem, a)
    } else if let Some(a) = gdr.strip_prefix("Enabled ") {
        (Gdr::Enabled, a)
    } else if let Some(a) = gdr.strip_prefix("Disabled ") {
        (Gdr::Disabled, a)
    } else {
        return Some(Event::Other);
    };
    // `for HCA 0 'mlx5_0'`, `for GPU 0[0] / HCA 0 (distance 4 > 2)` (old NCCL).
    let Some(at) = after.find("HCA ") else {
        return Some(Event::Other);
    };
    let tail = &after[at + 4..];
    let n = tail.bytes().take_while(u8::is_ascii_digit).count();
    let Ok(hca) = tail[..n].parse() else {
        return Some(Event::Other);
    };
    let name = tail[n..].trim_start().strip_prefix('\'').map(|q| {
        let end = q.find('\'').unwrap_or(q.len());
        q[..end].trim_end()
    });
    let name = name.filter(|s| !s.is_empty());
    Some(Event::Gdr { hca, name, how })
}

/// `IB/0/GDRDMA`, `IB/0(1)/GDRDMA/Shared`, `Socket/1`, `AWS Libfabric/0/GDRDMA`.
fn channel(via: &str) -> Option<Event<'_>> {
    let mut parts = via.split('/');
    let net = parts.next()?;
    let dev_part = parts.next()?;
    let n = dev_part.bytes().take_while(u8::is_ascii_digit).count();
    let dev = dev_part[..n].parse().ok()?;
    // Flags end the message: nothing after them but whitespace.
    let gdrdma = parts.any(|p| p.trim_end() == "GDRDMA");
    (!net.is_empty()).then_some(Event::Channel { net, dev, gdrdma })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_lines_from_public_logs() {
        // NVIDIA/nccl#1537.
        let l = line("hostname1:25668:27396 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'").unwrap();
        assert_eq!(l.host, Some("hostname1"));
        assert_eq!(
            l.event,
            Event::Gdr {
                hca: 1,
                name: Some("mlx5_1"),
                how: Gdr::Disabled
            }
        );
        let l = line("hostname1:25668:27396 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB primaryip:10.10.10.10<0>").unwrap();
        assert_eq!(
            l.event,
            Event::Using {
                net: "IB",
                devs: vec![(0, "mlx5_0"), (1, "mlx5_1")]
            }
        );
        // Azure/aks-rdma-infiniband#36.
        let l = line("leader-h2nng:523:564 [0] NCCL INFO Channel 00/0 : 9[1] -> 0[0] [receive] via NET/IB/0/GDRDMA").unwrap();
        assert_eq!(l.host, Some("leader-h2nng"));
        assert_eq!(
            l.event,
            Event::Channel {
                net: "IB",
                dev: 0,
                gdrdma: true
            }
        );
        let l =
            line("leader-h2nng:523:564 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to SYS")
                .unwrap();
        assert_eq!(
            l.event,
            Event::Env {
                name: "NCCL_NET_GDR_LEVEL",
                value: "SYS"
            }
        );
        // NVIDIA/nccl#899 (old NCCL).
        let l = line("21346d5cefce:5325:5338 [0] NCCL INFO Channel 00 : 0[1a000] -> 1[1a000] [receive] via NET/IB/0").unwrap();
        assert_eq!(
            l.event,
            Event::Channel {
                net: "IB",
                dev: 0,
                gdrdma: false
            }
        );
        // NVIDIA/nccl-tests#245: no host prefix.
        let l = line("[0] NCCL INFO DMA-BUF is available on GPU device 0").unwrap();
        assert_eq!((l.host, l.event), (None, Event::DmaBufAvailable));
        // Mellanox/nv_peer_memory#56: a bare version line.
        let l = line("NCCL version 2.4.7+cuda10.0").unwrap();
        assert_eq!(l.event, Event::Version("2.4.7+cuda10.0"));
        // The IB plugin's line has no closing quote.
        let l =
            line("h:1:2 [3] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0")
                .unwrap();
        assert_eq!(
            l.event,
            Event::Gdr {
                hca: 0,
                name: Some("mlx5_0"),
                how: Gdr::DmaBuf
            }
        );
        let l = line("misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported").unwrap();
        assert!(l.warn);
        assert_eq!((l.host, l.event), (None, Event::DmaBufRegFailed));
    }

    #[test]
    fn launcher_prefixes_and_non_nccl_lines() {
        let l =
            line("[1,0]<stdout>:node-7:11:12 [0] NCCL INFO NCCL version 2.21.5+cuda12.4").unwrap();
        assert_eq!(l.host, Some("node-7"));
        assert_eq!(l.event, Event::Version("2.21.5+cuda12.4"));
        let l = line("3: node-8:11:12 [2] NCCL INFO Channel 01/0 : 1[2] -> 9[2] [send] via NET/IBext_v8/2(1)/GDRDMA/Shared").unwrap();
        assert_eq!(l.host, Some("node-8"));
        assert_eq!(
            l.event,
            Event::Channel {
                net: "IBext_v8",
                dev: 2,
                gdrdma: true
            }
        );
        assert_eq!(line("random text"), None);
        assert_eq!(line(""), None);
        // A forged prefix with no pid/tid is no host.
        assert_eq!(line("evil [0] NCCL INFO x").unwrap().host, None);
        // A channel whose flags are not at the end of a segment is not GDRDMA.
        let l = line("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/Socket/0 GDRDMAX")
            .unwrap();
        assert_eq!(
            l.event,
            Event::Channel {
                net: "Socket",
                dev: 0,
                gdrdma: false
            }
        );
    }
}
