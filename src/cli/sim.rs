//! `gpufleet sim` and `gpufleet demo`: their options and glue (the simulator is
//! [`crate::sim`]).

use std::path::PathBuf;

use clap::Args;

use crate::sim::{self, Latency, Listen, Names, SimOptions};

/// The most nodes `sim` and `demo` serve: 1,000,000. Free ports run out first on one address
/// (the kernel's ephemeral range, about 28,000); `--listen 127.9.0.0/16` has 65,534 addresses.
const MAX_NODES: i64 = 1_000_000;

/// `gpufleet sim --help`'s closing text.
pub const SIM_HELP: &str = "\
Each node serves one fixture node (cycling through the corpus), is named rack-style (gpu-r01-n01;
--names fixture: sim-000-h200-open-580-k6.18-real) and carries its fixture in the inventory's
`fixture` label. A node is an address and a port: --listen 127.9.0.0/16 spreads the nodes over
that range's addresses (node i on address i mod the range's size), --base-port P gives each
address the ports P, P+1, … in turn (deterministic). It answers gpufleet's probe from that fixture (recorded once
at startup, replayed per session) — `sh -s` with the probe on stdin, or
`B=… R=… T=… D=… L=… sh -c \"$(cat probe.sh)\"` for tools that cannot feed stdin — and runs
nothing else: any other command gets exit status 127. Only the user key written beside the
inventory is accepted. Runs until Ctrl-C or SIGTERM, then reports its own CPU per connection.

Faults: --hang nodes accept the probe and never answer; --drop nodes send half the answer and
close the TCP connection; --refuse nodes refuse the TCP connection (port bound, not listening);
--slow-accept nodes take each connection --accept-delay late. --latency can differ per rack
group (a rack: 8 nodes, the rNN of the name): --latency 5ms,r1-r100=50ms±10ms.

Examples:
  gpufleet sim --write-inventory /tmp/sim/fleet.toml          then, in another terminal:
  gpufleet snapshot -i /tmp/sim/fleet.toml
  gpufleet tui -i /tmp/sim/fleet.toml
  gpufleet sim --nodes 200 --hang 5% --drop 1% --latency 40ms±10ms --write-inventory /tmp/sim/fleet.toml
  gpufleet sim --nodes 1000 --write-hosts /tmp/sim/hosts      pdsh/clush/pssh: host:port lines
                                                             and /tmp/sim/hosts.ssh_config
  gpufleet sim --nodes 100000 --listen 127.9.0.0/16 --write-inventory /tmp/sim/big.toml
                                      (over a range, ports from 2200 unless --base-port says)";

/// `gpufleet sim` options.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Number of simulated nodes (past about 28,000 on one address, spread them with --listen)
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=MAX_NODES))]
    pub nodes: u32,

    /// Loopback address to listen on, or a CIDR range of them to spread the nodes over
    /// (127.9.0.0/16: 65,534 addresses)
    #[arg(long, value_name = "ADDR|CIDR", value_parser = sim::parse_listen, default_value = "127.0.0.1")]
    pub listen: Listen,

    /// How nodes are named
    #[arg(long, value_enum, default_value_t = Names::Rack)]
    pub names: Names,

    /// Folder of fixture nodes (sub-folders with node.toml, root/, bin/, commands/), or one
    /// fixture node; repeatable. Nodes cycle through them in order. Their bin/ stand-ins run
    /// here at startup: use only fixtures you trust [default: the built-in corpus (the
    /// source's tests/fixtures/nodes and nodes-v2, unpacked into a temporary folder removed at
    /// exit), mixed so that the first 5 nodes show every status]
    #[arg(long, value_name = "DIR")]
    pub fixtures: Vec<PathBuf>,

    /// First port: on each address, nodes listen on P, P+1, … [default: free ports on one
    /// address; 2200 over a range of them, below the ephemeral ports the connections need]
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u16).range(1..))]
    pub base_port: Option<u16>,

    /// Write the inventory here, with the user key (FILE's name + .id_ed25519) and known_hosts
    /// (+ .known_hosts) beside it [default: inventory.toml in a new temporary folder, removed
    /// at exit]
    #[arg(long, value_name = "FILE")]
    pub write_inventory: Option<PathBuf>,

    /// Write a host list for other tools here (`ADDRESS:PORT`, one node a line) and an
    /// OpenSSH client config beside it (FILE.ssh_config: every node by name, the user key and
    /// known_hosts)
    #[arg(long, value_name = "FILE")]
    pub write_hosts: Option<PathBuf>,

    /// Share of nodes that accept the probe and never answer it (`10%` or `10`), spread evenly
    #[arg(long, value_name = "P%", value_parser = sim::parse_share, default_value = "0")]
    pub hang: f64,

    /// Share of nodes that send half of the probe's answer, then close the TCP connection
    #[arg(long, value_name = "P%", value_parser = sim::parse_share, default_value = "0")]
    pub drop: f64,

    /// Share of nodes whose TCP connection is refused (the SSH server is never reached)
    #[arg(long, value_name = "P%", value_parser = sim::parse_share, default_value = "0")]
    pub refuse: f64,

    /// Share of nodes slow to accept a TCP connection: the kernel completes the handshake, the
    /// SSH server takes it --accept-delay later (a listen queue of 4 that fills)
    #[arg(long, value_name = "P%", value_parser = sim::parse_share, default_value = "0")]
    pub slow_accept: f64,

    /// How long a --slow-accept node waits before it takes each connection
    #[arg(long, value_name = "MS", value_parser = parse_ms, default_value = "1000ms")]
    pub accept_delay: std::time::Duration,

    /// Round-trip latency added to every exchange of a session, drawn per connection
    /// (`40ms`, or `40ms±10ms` for 30 to 50 ms); per rack group: `5ms,r1-r100=50ms,r101=200ms`
    /// (a rack is 8 nodes: node i is in rack i/8+1, its name's rNN; groups may not overlap;
    /// the plain item is every other node's, zero without one)
    #[arg(long, value_name = "[RACKS=]MS[±MS],…", value_parser = sim::parse_latency, default_value = "0")]
    pub latency: Latency,

    /// Simulate upgrades: the rollout's node-side commands (node lock, detached recipe steps)
    /// change a private copy of each node's fixture, with the steps `gpufleet-sim switch-open`
    /// and `gpufleet-sim reboot`; still nothing runs. Writes FILE.config.toml (the recipe `sim`)
    /// beside the inventory, which then names it, no drain, and two canaries
    #[arg(long)]
    pub allow_upgrades: bool,
}

impl SimArgs {
    /// The simulator's options.
    pub fn options(&self) -> SimOptions {
        SimOptions {
            nodes: self.nodes,
            fixtures: self.fixtures.clone(),
            listen: self.listen,
            base_port: self.base_port,
            names: self.names,
            write_inventory: self.write_inventory.clone(),
            write_hosts: self.write_hosts.clone(),
            hang: self.hang,
            drop: self.drop,
            refuse: self.refuse,
            slow_accept: self.slow_accept,
            accept_delay: self.accept_delay,
            latency: self.latency.clone(),
            allow_upgrades: self.allow_upgrades,
        }
    }
}

/// `1000`, `1000ms` → 1 s; errors for anything else.
fn parse_ms(s: &str) -> Result<std::time::Duration, String> {
    s.trim()
        .trim_end_matches("ms")
        .trim()
        .parse::<u64>()
        .map(std::time::Duration::from_millis)
        .map_err(|_| format!("{s:?} is not a time in whole milliseconds (like 1000ms)"))
}

/// `gpufleet sim`.
pub fn sim_cmd(args: &SimArgs) -> anyhow::Result<u8> {
    sim::run(&args.options())
}

/// `gpufleet demo --help`'s closing text.
pub const DEMO_HELP: &str = "\
Starts `gpufleet sim` inside this process (its files in a temporary folder, removed at exit) and
opens the fleet matrix on it: fixture nodes of every status over real SSH on 127.0.0.1 (or
--listen's addresses, --base-port's ports), named rack-style (gpu-r01-n01), with a
round-trip latency and a few nodes that hang, drop the connection or refuse it. When stdout is
not a terminal it prints the simulated fleet's snapshot table instead and exits 0.

Read-only: the simulator answers the probe and runs nothing else. With --allow-upgrades the
matrix can upgrade (mark nodes, U): the simulator plays the rollout's node side — the node lock,
a `switch-open` step that makes the next probe show the open kernel module and no nvidia-peermem,
and a reboot that drops the session and comes back 3 s later — on copies of the fixtures; it
still executes nothing. Two migrate nodes are canaries; waves take 5 nodes.

Examples:
  gpufleet demo                          200 nodes in the TUI (q quits)
  gpufleet demo | less                   the same fleet as a table
  gpufleet demo --nodes 2000 --latency 50ms±20ms --hang 2%
  gpufleet demo --allow-upgrades         upgrade simulated nodes from the matrix
  gpufleet demo --listen 127.9.0.0/16 --base-port 2200   every node on its own address, port 2200";

/// `gpufleet demo` options.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Number of simulated nodes
    #[arg(long, value_name = "N", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..=MAX_NODES))]
    pub nodes: u32,

    /// Loopback address to listen on, or a CIDR range of them to spread the nodes over
    #[arg(long, value_name = "ADDR|CIDR", value_parser = sim::parse_listen, default_value = "127.0.0.1")]
    pub listen: Listen,

    /// First port: on each address, nodes listen on P, P+1, … [default: free ports on one
    /// address; 2200 over a range of them, below the ephemeral ports the connections need]
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u16).range(1..))]
    pub base_port: Option<u16>,

    /// How nodes are named
    #[arg(long, value_enum, default_value_t = Names::Rack)]
    pub names: Names,

    /// Round-trip latency of every exchange, drawn per connection
    #[arg(long, value_name = "MS[±MS]", value_parser = sim::parse_latency, default_value = "20ms±10ms")]
    pub latency: Latency,

    /// Share of nodes that accept the probe and never answer it
    #[arg(long, value_name = "P%", value_parser = sim::parse_share, default_value = "1%")]
    pub hang: f64,

    /// Share of nodes that send half of the probe's answer, then close the connection
    #[arg(long, value_name = "P%", value_parser = sim::parse_share, default_value = "1%")]
    pub drop: f64,

    /// Share of nodes whose TCP connection is refused
    #[arg(long, value_name = "P%", value_parser = sim::parse_share, default_value = "1%")]
    pub refuse: f64,

    /// Deadline of each node's probe, in seconds (a hanging node shows after it)
    #[arg(long, value_name = "SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub deadline: u64,

    /// Let the matrix upgrade the simulated nodes (simulated; see above)
    #[arg(long)]
    pub allow_upgrades: bool,
}

/// `gpufleet demo`: the simulator on its own runtime, then the TUI (or, when stdout is not a
/// terminal, a snapshot table) on its inventory. Exit code 0 unless something could not start.
pub fn demo_cmd(s: &super::Settings, args: &DemoArgs) -> anyhow::Result<u8> {
    let temp = RemovedOnDrop(sim::private_temp_dir("demo")?);
    demo_in(s, args, &temp.0)
}

/// A folder removed when dropped, also when a panic unwinds (an `eprintln!` to a terminal that
/// was closed panics): the demo's private key never outlives it.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn demo_in(s: &super::Settings, args: &DemoArgs, temp: &std::path::Path) -> anyhow::Result<u8> {
    use std::io::IsTerminal;
    let opts = SimOptions {
        nodes: args.nodes,
        latency: args.latency.clone(),
        hang: args.hang,
        drop: args.drop,
        refuse: args.refuse,
        allow_upgrades: args.allow_upgrades,
        listen: args.listen,
        base_port: args.base_port,
        names: args.names,
        ..SimOptions::default()
    };
    // The simulator's nodes are tasks of this runtime's worker threads; they serve while the
    // TUI or the scan runs on its own, and stop when it is dropped.
    let rt = crate::rt::build()?;
    // A closed terminal (SIGHUP) can end the TUI in a panic that aborts (its restore writes to
    // the gone terminal from the panic hook): the private files go at the signal itself.
    let private = temp.to_path_buf();
    rt.spawn(async move {
        crate::rt::stop_requested().await;
        let _ = std::fs::remove_dir_all(&private);
    });
    let running = rt.block_on(sim::start(&opts, Some(temp), &mut std::io::stderr()))?;
    eprintln!("{}", running.summary);
    // Only the simulator's files: the user's known_hosts, ssh_config and journal stay untouched.
    let paths = crate::config::Paths {
        config: None,
        inventory: Some(running.inventory.clone()),
        known_hosts: Some(temp.join("gpufleet_known_hosts")),
        state_dir: Some(temp.join("state")),
        ssh_config: Some(PathBuf::from("none")),
        inventory_format: None,
    };
    let scan = super::ScanArgs {
        deadline: Some(args.deadline),
        ..super::ScanArgs::default()
    };
    let mut s = s.with_paths(paths);
    if let Some(c) = &running.config {
        // The demo's own config: the recipe the simulator plays, nothing of the user's.
        let text = std::fs::read_to_string(c)?;
        s.config = crate::config::Config::parse(&text, c)?;
    }
    let code = if std::io::stdout().is_terminal() {
        let t = super::TuiSession::new(
            &s,
            &super::TuiArgs {
                scan,
                read_only: !args.allow_upgrades,
                ..super::TuiArgs::default()
            },
        )?;
        let mut app = t.app;
        // The first screen says what this is, and how to try the write side.
        app.message.get_or_insert_with(|| {
            if args.allow_upgrades {
                "simulated fleet on this machine: mark canaries with space, then U upgrades them"
                    .to_string()
            } else {
                "simulated fleet on this machine, read-only: `gpufleet demo --allow-upgrades` lets you try U"
                    .to_string()
            }
        });
        crate::runtime::run(app, t.theme, t.target, t.upgrade)?;
        0
    } else {
        super::snapshot::run(
            &s,
            &super::SnapshotArgs {
                scan,
                format: Some(super::snapshot::FormatArg::Table),
                ..super::SnapshotArgs::default()
            },
        )?;
        0
    };
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(code)
}
