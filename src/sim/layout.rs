//! Where the simulator's nodes listen and what they are called: loopback addresses (one, or a
//! CIDR range of them: `--listen`), ports (free ones, or from `--base-port`), and node names
//! (rack-style `gpu-r01-n01`, or the fixture's name: `--names`).
//!
//! A node is an address and a port. Node `i` of a range of `A` addresses listens on address
//! `i mod A` and, with a base port `P`, on port `P + i / A`: 16 nodes over `127.9.0.0/16` take
//! 16 addresses and one port each; 100,000 nodes take 65,534 addresses and two ports. Nothing is
//! kept per address: the `i`-th address is computed.

use std::net::{Ipv4Addr, SocketAddr};

use anyhow::Context;

use super::server::Fault;

/// Loopback IPv4 addresses to listen on: `count` consecutive ones from `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen {
    first: u32,
    count: u32,
}

impl Default for Listen {
    /// 127.0.0.1 alone.
    fn default() -> Listen {
        Listen {
            first: u32::from(Ipv4Addr::LOCALHOST),
            count: 1,
        }
    }
}

/// `127.0.0.1` → that address; `127.9.0.0/16` → its host addresses (the network and broadcast
/// addresses left out, as `ipaddress.hosts()` does: 127.9.0.1 to 127.9.255.254; a /31 or /32
/// keeps every address).
///
/// Errors: not an IPv4 address or CIDR, a prefix over 32, an address outside 127.0.0.0/8.
pub fn parse_listen(s: &str) -> Result<Listen, String> {
    let (ip, prefix) = match s.trim().split_once('/') {
        Some((ip, p)) => (
            ip,
            p.parse::<u32>()
                .ok()
                .filter(|p| *p <= 32)
                .ok_or_else(|| format!("{s:?}: the prefix length is 0 to 32"))?,
        ),
        None => (s.trim(), 32),
    };
    let ip: Ipv4Addr = ip.parse().map_err(|_| {
        format!("{s:?} is not an IPv4 address or range (like 127.0.0.1 or 127.9.0.0/16)")
    })?;
    // Loopback only: what the simulator serves must not reach the network (it accepts only its
    // own key and runs nothing, but it is a test fleet).
    if prefix < 8 || !ip.is_loopback() {
        return Err(format!(
            "{s:?} is not within 127.0.0.0/8: the simulator listens on loopback addresses only"
        ));
    }
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    let net = u32::from(ip) & mask;
    let size = 1u64 << (32 - prefix);
    let (first, count) = if prefix <= 30 {
        (net + 1, size - 2)
    } else {
        (net, size)
    };
    Ok(Listen {
        first,
        count: u32::try_from(count).map_err(|_| format!("{s:?}: too many addresses"))?,
    })
}

impl Listen {
    /// How many addresses.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// Never: a range holds at least one address.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The address of node `i` (`i mod len`).
    pub fn addr_of(&self, i: usize) -> Ipv4Addr {
        let k = u32::try_from(i % self.count as usize).unwrap_or(0);
        Ipv4Addr::from(self.first + k)
    }

    /// Which port slot node `i` takes on its address (`i / len`).
    pub fn slot_of(&self, i: usize) -> usize {
        i / self.count as usize
    }

    /// `127.0.0.1`, or `127.9.0.1–127.9.255.254 (65534 addresses)`.
    pub fn describe(&self, nodes: usize) -> String {
        let used = nodes.min(self.count as usize);
        if used <= 1 {
            self.addr_of(0).to_string()
        } else {
            format!(
                "{}–{} ({used} addresses)",
                self.addr_of(0),
                self.addr_of(used - 1)
            )
        }
    }
}

/// How nodes are named.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Names {
    /// Rack-style, as a real fleet is: gpu-r01-n01 … gpu-r01-n08, gpu-r02-n01 … (the fixture
    /// is in the inventory's `fixture` label)
    #[default]
    Rack,
    /// After the fixture the node serves: sim-000-h200-open-580-k6.18-real
    Fixture,
}

/// Nodes per rack in rack-style names.
pub const RACK: usize = 8;

/// The name of node `i` of `n`, serving fixture `fixture`.
pub fn node_name(names: Names, i: usize, n: usize, fixture: &str) -> String {
    match names {
        Names::Rack => {
            let racks = n.div_ceil(RACK);
            let w = racks.to_string().len().max(2);
            format!("gpu-r{:0w$}-n{:02}", i / RACK + 1, i % RACK + 1)
        }
        Names::Fixture => {
            let w = n.saturating_sub(1).to_string().len().max(3);
            format!("sim-{i:0w$}-{fixture}")
        }
    }
}

/// The listen queue of a `slow-accept` node: connections the kernel completed and the
/// simulator has not taken yet (a SYN backlog that fills).
pub const SLOW_BACKLOG: u32 = 4;

/// The first port of nodes spread over a range of addresses when `--base-port` is not given:
/// below the kernel's ephemeral range (32768–60999 by default), so that 100,000 listeners do
/// not take the ports the client's own connections need (each listener on a free port would
/// take one ephemeral port somewhere in the range, and `connect` then finds none left).
pub const RANGE_BASE_PORT: u16 = 2200;

/// The base port nodes get: `base`, else [`RANGE_BASE_PORT`] when `nodes` spread over more
/// than one address of `listen`, else none (free ports, on one address).
pub fn base_port(listen: Listen, nodes: usize, base: Option<u16>) -> Option<u16> {
    base.or((nodes > 1 && listen.len() > 1).then_some(RANGE_BASE_PORT))
}

/// A node's socket: a listener, or (a `refuse` node) a socket bound to its port and not
/// listening, so that connections to it are refused by the kernel.
pub(super) enum Socket {
    Listen(tokio::net::TcpListener),
    Refuse(tokio::net::TcpSocket),
}

/// Binds one socket per node: node `i` on [`Listen::addr_of`] `i`, port `base` +
/// [`Listen::slot_of`] `i` or a free one (`base` as [`base_port`] gives it); a listener (with a
/// queue of [`SLOW_BACKLOG`] for a `slow-accept` node), or for a `refuse` node a socket that
/// does not listen. Returns each node's address and socket.
///
/// Errors: ports past 65535 (said before anything is bound), a socket that cannot be bound
/// (taken, or out of open files).
pub(super) async fn bind(
    faults: &[Fault],
    listen: Listen,
    base: Option<u16>,
) -> anyhow::Result<Vec<(SocketAddr, Socket)>> {
    let n = faults.len();
    let base = base_port(listen, n, base);
    if let (Some(b), Some(last)) = (base, n.checked_sub(1)) {
        let top = usize::from(b) + listen.slot_of(last);
        if top > usize::from(u16::MAX) {
            anyhow::bail!(
                "--base-port {b}: {n} nodes on {} address{} need ports {b}–{top}, past 65535 \
                 (a lower --base-port, or more addresses: --listen 127.9.0.0/16)",
                listen.len(),
                if listen.len() == 1 { "" } else { "es" }
            );
        }
    }
    let mut out = Vec::with_capacity(n);
    for (i, fault) in faults.iter().enumerate() {
        let port = match base {
            Some(b) => u16::try_from(usize::from(b) + listen.slot_of(i)).unwrap_or(0),
            None => 0,
        };
        let addr = SocketAddr::from((listen.addr_of(i), port));
        let what = || {
            if port == 0 {
                format!(
                    "cannot bind {addr} (node {i}; for many nodes raise `ulimit -n`, and spread \
                     them over more addresses with --listen 127.9.0.0/16)"
                )
            } else {
                format!(
                    "cannot bind {addr} (node {i}; the port may be taken: another --base-port; \
                     for many nodes raise `ulimit -n`)"
                )
            }
        };
        let socket = if *fault == Fault::Refuse {
            let s = tokio::net::TcpSocket::new_v4().with_context(what)?;
            s.bind(addr).with_context(what)?;
            Socket::Refuse(s)
        } else if *fault == Fault::SlowAccept {
            let s = tokio::net::TcpSocket::new_v4().with_context(what)?;
            s.set_reuseaddr(true).with_context(what)?;
            s.bind(addr).with_context(what)?;
            Socket::Listen(s.listen(SLOW_BACKLOG).with_context(what)?)
        } else {
            Socket::Listen(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(what)?,
            )
        };
        let local = match &socket {
            Socket::Listen(l) => l.local_addr()?,
            Socket::Refuse(s) => s.local_addr()?,
        };
        out.push((local, socket));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_reads_an_address_or_a_loopback_range() {
        let one = parse_listen("127.0.0.1").unwrap();
        assert_eq!(
            (one.len(), one.addr_of(0), one.addr_of(5)),
            (1, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST)
        );
        let r = parse_listen("127.9.0.0/16").unwrap();
        assert_eq!(r.len(), 65534);
        assert_eq!(r.addr_of(0), Ipv4Addr::new(127, 9, 0, 1));
        assert_eq!(r.addr_of(65533), Ipv4Addr::new(127, 9, 255, 254));
        assert_eq!(r.addr_of(65534), Ipv4Addr::new(127, 9, 0, 1));
        assert_eq!(
            (r.slot_of(65533), r.slot_of(65534), r.slot_of(99_999)),
            (0, 1, 1)
        );
        // A host address in the range is read as its network, as `ipaddress.ip_network(strict=False)`.
        assert_eq!(
            parse_listen("127.9.3.7/24").unwrap().addr_of(0),
            Ipv4Addr::new(127, 9, 3, 1)
        );
        let p31 = parse_listen("127.0.0.8/31").unwrap();
        assert_eq!(
            (p31.len(), p31.addr_of(1)),
            (2, Ipv4Addr::new(127, 0, 0, 9))
        );
        assert_eq!(parse_listen("127.0.0.0/8").unwrap().len(), (1 << 24) - 2);
        for bad in [
            "10.0.0.1",
            "127.0.0.0/7",
            "0.0.0.0/0",
            "::1",
            "127.0.0.1/33",
            "localhost",
            "127.0.0.1/x",
        ] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
        assert!(parse_listen("10.0.0.0/8").unwrap_err().contains("loopback"));
    }

    #[test]
    fn rack_names_grow_with_the_fleet_and_fixture_names_stay() {
        assert_eq!(node_name(Names::Rack, 0, 16, "f"), "gpu-r01-n01");
        assert_eq!(node_name(Names::Rack, 7, 16, "f"), "gpu-r01-n08");
        assert_eq!(node_name(Names::Rack, 8, 16, "f"), "gpu-r02-n01");
        assert_eq!(
            node_name(Names::Rack, 99_999, 100_000, "f"),
            "gpu-r12500-n08"
        );
        assert_eq!(node_name(Names::Rack, 0, 100_000, "f"), "gpu-r00001-n01");
        assert_eq!(node_name(Names::Fixture, 5, 16, "h200"), "sim-005-h200");
        assert_eq!(
            node_name(Names::Fixture, 5, 10_000, "h200"),
            "sim-0005-h200"
        );
        // Unique and in sorting order.
        let names: Vec<String> = (0..1000)
            .map(|i| node_name(Names::Rack, i, 1000, "f"))
            .collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]));
    }

    /// 300 nodes over a /24 with a base port: node i on address i mod 254, port base + i / 254;
    /// every one bound where it says, and deterministic.
    #[test]
    fn nodes_spread_over_the_range_with_deterministic_ports() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let listen = parse_listen("127.77.3.0/24").unwrap();
        let faults = vec![Fault::None; 300];
        let base = 40_000 + (std::process::id() % 10_000) as u16;
        let got = rt.block_on(bind(&faults, listen, Some(base))).unwrap();
        for (i, (addr, _)) in got.iter().enumerate() {
            assert_eq!(
                addr.ip(),
                std::net::IpAddr::V4(Ipv4Addr::new(127, 77, 3, (i % 254) as u8 + 1))
            );
            assert_eq!(addr.port(), base + (i / 254) as u16);
        }
        let too_many = rt.block_on(bind(&faults, Listen::default(), Some(65_400)));
        let e = format!("{:#}", too_many.err().unwrap());
        assert!(e.contains("past 65535") && e.contains("--listen"), "{e}");
    }
}
