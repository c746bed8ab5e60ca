//! `gpufleet sim`: a simulated fleet over real SSH on this machine, to try gpufleet without a
//! fleet and to measure the client at scale (issue 12).
//!
//! N nodes on 127.0.0.1, or spread over a range of loopback addresses ([`layout`]: a node is an
//! address and a port), one TCP listener per node (one file descriptor per node plus one per
//! open connection), named rack-style (`gpu-r01-n01`) or after their fixture, each with its own ed25519 host key, each
//! serving one fixture node of the corpus, cycling through it (node `i` serves fixture
//! `i mod len`; the default corpus is ordered so that any 5 consecutive nodes show every status).
//! At startup the probe runs once per fixture used, locally, in that fixture's environment
//! ([`corpus::record`]); sessions replay that output with their own boundary ([`server`]).
//! **Nothing else is ever executed**: other commands get exit status 127 and a message on
//! stderr.
//!
//! Faults (shares of the nodes, spread evenly, each node at most one): `hang` (accepts the probe,
//! never answers), `drop` (sends half the answer, then closes the TCP connection), `refuse` (the
//! TCP connection is refused: the port is bound, not listening). Latency: a round trip of
//! `latency ± spread` per connection, added to every exchange of the session ([`stream`]).
//!
//! It writes an inventory for gpufleet (and, beside it, the one user key it accepts and a
//! known_hosts file with every node's host key), optionally a host list and an OpenSSH client
//! config for other tools, prints where it listens, and runs until SIGINT, SIGTERM or SIGHUP;
//! then it reports its own CPU time per session.
//!
//! With `allow_upgrades` the rollout's node-side commands are recognised and simulated on a
//! private copy of each node's fixture ([`upgrade`]: the node lock, detached steps, a
//! `switch-open` step and a reboot), still executing nothing; the inventory then names the
//! recipe `sim` of a config written beside it, no drain, and two canaries.
//!
//! The default corpus is built in ([`corpus::unpack_builtin`]): unpacked at startup into a
//! private temporary folder, removed when the simulator stops, so an installed binary needs no
//! source tree.

pub mod corpus;
pub mod latency;
pub mod layout;
pub mod server;
pub mod stream;
pub mod upgrade;

use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, bail};
use russh::keys::ssh_key::LineEnding;
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{PrivateKey, PublicKey};

use self::corpus::Fixture;
pub use self::latency::{Latency, Rtt, parse_latency};
use self::layout::Socket;
pub use self::layout::{Listen, Names, parse_listen};
use self::server::{Fault, NodeServer, Shared, SimNode};

/// What `gpufleet sim` (and `gpufleet demo`) serve.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Number of simulated nodes (at least 1).
    pub nodes: u32,
    /// Fixture folders; empty: the default corpus.
    pub fixtures: Vec<PathBuf>,
    /// The loopback addresses to listen on (127.0.0.1, or a range).
    pub listen: Listen,
    /// First port (on each address, nodes on P, P+1, …); `None`: any free ports.
    pub base_port: Option<u16>,
    /// How nodes are named.
    pub names: Names,
    /// Where to write the inventory; `None`: a new temporary folder, removed at exit.
    pub write_inventory: Option<PathBuf>,
    /// Where to write a host list (`127.0.0.1:PORT` lines) and, beside it, an OpenSSH client
    /// config (FILE.ssh_config).
    pub write_hosts: Option<PathBuf>,
    /// Shares of nodes that hang, drop, refuse, in % (their sum at most 100).
    pub hang: f64,
    /// See `hang`.
    pub drop: f64,
    /// See `hang`.
    pub refuse: f64,
    /// See `hang`: nodes slow to accept a connection ([`Fault::SlowAccept`]).
    pub slow_accept: f64,
    /// How long a slow-to-accept node waits before it takes each connection.
    pub accept_delay: Duration,
    /// Round-trip latency of every exchange, per rack group.
    pub latency: Latency,
    /// Simulate the rollout's node-side commands ([`upgrade`]); otherwise read-only.
    pub allow_upgrades: bool,
}

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            nodes: 8,
            fixtures: Vec::new(),
            listen: Listen::default(),
            base_port: None,
            names: Names::default(),
            write_inventory: None,
            write_hosts: None,
            hang: 0.0,
            drop: 0.0,
            refuse: 0.0,
            slow_accept: 0.0,
            accept_delay: DEFAULT_ACCEPT_DELAY,
            latency: Latency::default(),
            allow_upgrades: false,
        }
    }
}

/// How long a `slow-accept` node waits before it takes each connection, by default.
pub const DEFAULT_ACCEPT_DELAY: Duration = Duration::from_secs(1);

/// `10%`, `10` or `2.5%` → 10.0, 10.0, 2.5; errors outside 0 to 100.
pub fn parse_share(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage (like 10%)"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("{s:?} is not between 0% and 100%"));
    }
    Ok(v)
}

/// The faults of `n` nodes with shares `hang`, `drop`, `refuse`, `slow` (in %): each node's
/// place in a golden-ratio sequence (`frac((i+1)·φ)`, evenly spread over 0..1 for any prefix)
/// ranks the nodes; the first ⌊n·hang/100⌋ hang, the next ⌊n·drop/100⌋ drop, the next
/// ⌊n·refuse/100⌋ refuse, the next ⌊n·slow/100⌋ are slow to accept.
///
/// Errors: shares that add up to more than 100 %.
pub fn faults(
    n: usize,
    hang: f64,
    drop: f64,
    refuse: f64,
    slow: f64,
) -> Result<Vec<Fault>, String> {
    if hang + drop + refuse + slow > 100.0 + 1e-9 {
        return Err(format!(
            "--hang {hang}% + --drop {drop}% + --refuse {refuse}% + --slow-accept {slow}% is \
             more than 100%"
        ));
    }
    let count = |p: f64| (n as f64 * p / 100.0 + 1e-9).floor() as usize;
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    let mut order: Vec<usize> = (0..n).collect();
    let place = |i: usize| ((i + 1) as f64 * phi).fract();
    order.sort_by(|&a, &b| place(a).total_cmp(&place(b)));
    let mut out = vec![Fault::None; n];
    let (h, d, r, sl) = (count(hang), count(drop), count(refuse), count(slow));
    for (rank, &i) in order.iter().enumerate() {
        out[i] = if rank < h {
            Fault::Hang
        } else if rank < h + d {
            Fault::Drop
        } else if rank < h + d + r {
            Fault::Refuse
        } else if rank < h + d + r + sl {
            Fault::SlowAccept
        } else {
            Fault::None
        };
    }
    Ok(out)
}

/// A fresh ed25519 key from 32 bytes of the OS random number generator.
fn new_key(comment: &str) -> anyhow::Result<PrivateKey> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)
        .map_err(|e| anyhow::anyhow!("the OS random number generator: {e}"))?;
    let mut key = PrivateKey::from(Ed25519Keypair::from_seed(&seed));
    key.set_comment(comment);
    Ok(key)
}

/// `ssh-ed25519 AAAA…` (no comment) of `key`.
fn openssh_public(key: &PublicKey) -> anyhow::Result<String> {
    let mut k = key.clone();
    k.set_comment("");
    Ok(k.to_openssh()?.trim().to_string())
}

/// Writes `bytes` to `path` with mode `mode` (replacing the file; the mode applies when it is
/// created, so an old file is removed first).
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    write_with(path, mode, |w| w.write_all(bytes))
}

/// Writes to `path` with mode `mode` what `fill` writes, through a buffer (as
/// [`write_file`]; a 100,000-node inventory is written as it is made, never held whole).
fn write_with(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
    fill(&mut w)
        .and_then(|()| w.flush())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// One node as bound: its name, address, port and what it serves.
struct Bound {
    node: Arc<SimNode>,
    fixture: String,
    /// A canary of the upgrade inventory.
    canary: bool,
    ip: std::net::Ipv4Addr,
    port: u16,
    host_key: PrivateKey,
    socket: Socket,
}

/// Files written beside the inventory.
struct Written {
    inventory: PathBuf,
    key: PathBuf,
    known_hosts: PathBuf,
    config: Option<PathBuf>,
}

/// Writes the inventory for `nodes` to `out` (paths relative to the inventory's folder): a head
/// (known_hosts, read_only, `[defaults]`), then one `[[nodes]]` table a node, each starting a
/// line and holding one-line values only, so that gpufleet parses a large one node by node
/// (`inventory::parse_raw`). `upgrades`: the nodes take the recipe `sim`
/// ([`upgrade::CONFIG`]) without a drain, canaries marked; otherwise the inventory is
/// read-only.
fn inventory_to(
    out: &mut dyn std::io::Write,
    nodes: &[Bound],
    key_name: &str,
    kh_name: &str,
    upgrades: bool,
) -> std::io::Result<()> {
    let (what, mode, defaults) = if upgrades {
        (
            "Upgrades are simulated: the rollout's node-side commands change a copy of the \
             node's fixture; nothing runs.\n# Use it with the config written beside it (--config).",
            "",
            "recipe = \"sim\"\ndrain = { backend = \"none\" }\n",
        )
    } else {
        (
            "Read-only: the simulator answers the probe and refuses every other command.",
            "read_only = true\n",
            "",
        )
    };
    let head = format!(
        "# Written by `gpufleet sim` (pid {}): {} simulated nodes on loopback, valid while it runs.\n\
         # {what}\n\
         known_hosts = {}\n{mode}\n[defaults]\nuser = \"root\"\nidentity_file = {}\n{defaults}",
        std::process::id(),
        nodes.len(),
        toml_str(kh_name),
        toml_str(key_name),
    );
    out.write_all(head.as_bytes())?;
    for b in nodes {
        let fault = match b.node.fault {
            Fault::None => String::new(),
            f => format!(", sim = {}", toml_str(f.word())),
        };
        write!(
            out,
            "\n[[nodes]]\nname = {}\nhost = \"{}\"\nport = {}\n{}labels = {{ fixture = {}{fault} }}\n",
            toml_str(&b.node.name),
            b.ip,
            b.port,
            if b.canary { "canary = true\n" } else { "" },
            toml_str(&b.fixture),
        )?;
    }
    Ok(())
}

/// The folder of `path` (`.` when it has none) and its file name.
fn split_path<'a>(path: &'a Path, flag: &str) -> anyhow::Result<(&'a Path, &'a str)> {
    let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
        bail!("{flag} {}: not a UTF-8 file name", path.display());
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok((dir, file))
}

/// Writes the inventory, the user key pair and known_hosts (and with `upgrades` the config
/// FILE.config.toml); returns their paths.
fn write_inventory(
    path: &Path,
    nodes: &[Bound],
    user_key: &PrivateKey,
    upgrades: bool,
) -> anyhow::Result<Written> {
    let (dir, file) = split_path(path, "--write-inventory")?;
    let key_name = format!("{file}.id_ed25519");
    let kh_name = format!("{file}.known_hosts");
    let key = dir.join(&key_name);
    let known_hosts = dir.join(&kh_name);
    let private = user_key
        .to_openssh(LineEnding::LF)
        .context("cannot encode the user key")?;
    write_file(&key, private.as_bytes(), 0o600)?;
    let public = format!("{} gpufleet-sim\n", openssh_public(user_key.public_key())?);
    write_file(
        &dir.join(format!("{key_name}.pub")),
        public.as_bytes(),
        0o644,
    )?;
    write_with(&known_hosts, 0o644, |w| {
        for b in nodes {
            let key = openssh_public(b.host_key.public_key()).map_err(std::io::Error::other)?;
            writeln!(w, "[{}]:{} {key}", b.ip, b.port)?;
        }
        Ok(())
    })?;
    write_with(path, 0o644, |w| {
        inventory_to(w, nodes, &key_name, &kh_name, upgrades)
    })?;
    let config = if upgrades {
        let c = dir.join(format!("{file}.config.toml"));
        write_file(&c, upgrade::CONFIG.as_bytes(), 0o644)?;
        Some(c)
    } else {
        None
    };
    Ok(Written {
        inventory: path.to_path_buf(),
        key,
        known_hosts,
        config,
    })
}

/// An OpenSSH client config line's value, quoted when it holds a space or a quote.
fn ssh_config_value(s: &str) -> String {
    if s.contains([' ', '"', '\t']) {
        format!("\"{}\"", s.replace('"', ""))
    } else {
        s.to_string()
    }
}

/// Writes the host list (`ADDRESS:PORT`, one node a line, in node order) to `path` and an
/// OpenSSH client config to `path`.ssh_config: a `Host` block per node name (its port), then
/// `Host *` with the user, the user key and the known_hosts (absolute paths), strict host key
/// checking and batch mode. Returns the config's path.
fn write_hosts(path: &Path, nodes: &[Bound], w: &Written) -> anyhow::Result<PathBuf> {
    let (dir, file) = split_path(path, "--write-hosts")?;
    let mut list = String::new();
    for b in nodes {
        let _ = writeln!(list, "{}:{}", b.ip, b.port);
    }
    write_file(path, list.as_bytes(), 0o644)?;
    let abs = |p: &Path| -> anyhow::Result<String> {
        let p = std::path::absolute(p)
            .with_context(|| format!("cannot make {} absolute", p.display()))?;
        p.to_str()
            .map(ssh_config_value)
            .with_context(|| format!("{}: not UTF-8", p.display()))
    };
    let mut cfg = format!(
        "# Written by `gpufleet sim` (pid {}): its {} nodes for OpenSSH (`ssh -F THIS NAME`, or\n\
         # `ssh -F THIS -p PORT ADDRESS` for a line of the host list). Valid while it runs.\n",
        std::process::id(),
        nodes.len()
    );
    for b in nodes {
        let _ = write!(
            cfg,
            "Host {}\n  HostName {}\n  Port {}\n",
            b.node.name, b.ip, b.port
        );
    }
    let _ = write!(
        cfg,
        "Host *\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n  \
         GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
        abs(&w.key)?,
        abs(&w.known_hosts)?
    );
    let cfg_path = dir.join(format!("{file}.ssh_config"));
    write_file(&cfg_path, cfg.as_bytes(), 0o644)?;
    Ok(cfg_path)
}

/// This process's CPU time so far (user, system); zero when it cannot be read.
pub fn cpu_now() -> (Duration, Duration) {
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(u) = getrusage(UsageWho::RUSAGE_SELF) else {
        return (Duration::ZERO, Duration::ZERO);
    };
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    (tv(u.user_time()), tv(u.system_time()))
}

/// A started simulator: its files, and what it needs for the report at exit. Its nodes are
/// tasks of the tokio runtime it was started on; they stop with it.
pub struct Running {
    /// The inventory written for gpufleet.
    pub inventory: PathBuf,
    /// The user key it accepts.
    pub key: PathBuf,
    /// Every node's host key.
    pub known_hosts: PathBuf,
    /// The host list and the OpenSSH client config, when asked for.
    pub hosts: Option<(PathBuf, PathBuf)>,
    /// The config naming the recipe `sim` (with `allow_upgrades`).
    pub config: Option<PathBuf>,
    /// The folder of the nodes' fixture copies (with `allow_upgrades`), removed on drop.
    copies: Option<PathBuf>,
    /// The unpacked built-in corpus (when no fixtures were given), removed on drop.
    _builtin: Option<tempfile::TempDir>,
    /// One line per node: `ADDRESS:PORT  NAME  FIXTURE  (fault)`.
    pub listing: Vec<String>,
    /// One line: how many nodes, ports, fixtures, faults, latency.
    pub summary: String,
    shared: Arc<Shared>,
    _refusing: Vec<tokio::net::TcpSocket>,
    cpu_at_ready: (Duration, Duration),
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(dir) = &self.copies {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Running {
    /// What the simulator did since it was ready, and its own CPU time per connection.
    pub fn report(&self) -> String {
        let st = &self.shared.stats;
        let (u0, s0) = self.cpu_at_ready;
        let (u1, s1) = cpu_now();
        let (u, s) = (u1.saturating_sub(u0), s1.saturating_sub(s0));
        let conns = st.connections.load(Ordering::Relaxed);
        let per = if conns > 0 {
            format!(
                " = {:.3} ms per connection",
                (u + s).as_secs_f64() * 1e3 / conns as f64
            )
        } else {
            String::new()
        };
        format!(
            "gpufleet sim: {conns} connections: {} probes answered, {} hung, {} dropped, {} \
             commands refused, {} other commands; its own CPU since ready {:.3} s user + {:.3} s \
             system{per}",
            st.probes.load(Ordering::Relaxed),
            st.hung.load(Ordering::Relaxed),
            st.dropped.load(Ordering::Relaxed),
            st.refused.load(Ordering::Relaxed),
            st.other.load(Ordering::Relaxed),
            u.as_secs_f64(),
            s.as_secs_f64(),
        )
    }
}

/// Records the fixtures' answers, binds every node, writes the files and starts serving on the
/// current tokio runtime. Progress goes to `progress`. `temp`: the folder for the files when
/// `opts.write_inventory` is `None`.
///
/// Errors: no fixtures, fault shares over 100 %, a probe recording that cannot start `sh`, a
/// port that cannot be bound, files that cannot be written.
pub async fn start(
    opts: &SimOptions,
    temp: Option<&Path>,
    progress: &mut dyn std::io::Write,
) -> anyhow::Result<Running> {
    let n = opts.nodes.max(1) as usize;
    // One listener per node, one socket per connection: as many files as this user may open
    // (raised to the hard limit, checked below).
    let faults = faults(n, opts.hang, opts.drop, opts.refuse, opts.slow_accept)
        .map_err(anyhow::Error::msg)?;
    check_open_files(n, crate::rt::raise_open_files())?;
    // The built-in corpus lives in the simulator's own temporary folder when it has one (the
    // demo removes that one at a signal too), else in a private one; removed on drop.
    let mut builtin = None;
    let fixtures = if opts.fixtures.is_empty() {
        let made = match temp {
            Some(t) => tempfile::Builder::new().prefix("corpus.").tempdir_in(t),
            None => tempfile::Builder::new()
                .prefix("gpufleet-sim-corpus.")
                .tempdir(),
        };
        let dir = made.context("cannot make a temporary folder for the built-in corpus")?;
        let folders = corpus::unpack_builtin(dir.path())?;
        builtin = Some(dir);
        corpus::mix(corpus::discover(&folders)?)
    } else {
        corpus::discover(&opts.fixtures)?
    };
    let used: Vec<Fixture> = fixtures.iter().take(n).cloned().collect();
    writeln!(
        progress,
        "gpufleet sim: recording the probe answers of {} fixture node{}…",
        used.len(),
        if used.len() == 1 { "" } else { "s" }
    )?;
    progress.flush()?;
    let placeholder = crate::probe::new_boundary();
    let answers = corpus::record_all(&used, &placeholder).await?;
    for (f, a) in used.iter().zip(&answers) {
        if !a.complete {
            eprintln!(
                "gpufleet sim: warning: fixture {}: the probe did not complete (exit status {}); its answer is served as it is",
                f.name, a.exit_status
            );
        }
    }
    let sockets = layout::bind(&faults, opts.listen, opts.base_port).await?;
    let copies = if opts.allow_upgrades {
        Some(private_temp_dir("sim-nodes")?)
    } else {
        None
    };
    let migrate: Vec<bool> = used
        .iter()
        .map(|f| corpus::expected_status(f).as_deref() == Some("migrate"))
        .collect();
    let mut canaries = 0;
    let mut bound = Vec::with_capacity(n);
    for (i, (addr, socket)) in sockets.into_iter().enumerate() {
        let f = &used[i % used.len()];
        let name = layout::node_name(opts.names, i, n, &f.name);
        let answer = answers[i % used.len()].clone();
        let upgrade = copies
            .as_deref()
            .map(|dir| Arc::new(upgrade::Upgradable::new(&name, f, answer.clone(), dir)));
        // Two canaries: the first healthy nodes a rollout would take.
        let canary = opts.allow_upgrades
            && canaries < CANARIES
            && faults[i] == Fault::None
            && migrate[i % used.len()];
        canaries += usize::from(canary);
        bound.push(Bound {
            node: Arc::new(SimNode {
                name: name.clone(),
                answer,
                rtt: opts.latency.of_node(i),
                fault: faults[i],
                upgrade,
            }),
            canary,
            fixture: f.name.clone(),
            ip: match addr.ip() {
                std::net::IpAddr::V4(ip) => ip,
                std::net::IpAddr::V6(_) => opts.listen.addr_of(i),
            },
            port: addr.port(),
            host_key: new_key(&name)?,
            socket,
        });
    }
    let user_key = new_key("gpufleet-sim")?;
    let inv_path = match (&opts.write_inventory, temp) {
        (Some(p), _) => p.clone(),
        (None, Some(t)) => t.join("inventory.toml"),
        (None, None) => bail!("no folder for the inventory"),
    };
    let written = write_inventory(&inv_path, &bound, &user_key, opts.allow_upgrades)?;
    let hosts = match &opts.write_hosts {
        Some(p) => Some((p.clone(), write_hosts(p, &bound, &written)?)),
        None => None,
    };
    let shared = Arc::new(Shared {
        user_key: user_key.public_key().clone(),
        accept_delay: opts.accept_delay,
        stats: Default::default(),
    });
    let mut listing = Vec::with_capacity(n);
    let mut refusing = Vec::new();
    let (mut lo, mut hi) = (u16::MAX, 0);
    for b in bound {
        lo = lo.min(b.port);
        hi = hi.max(b.port);
        let fault = match b.node.fault {
            Fault::None => String::new(),
            f => format!("  ({})", f.word()),
        };
        listing.push(format!(
            "{}:{}  {}  {}{fault}",
            b.ip, b.port, b.node.name, b.fixture
        ));
        let listener = match b.socket {
            Socket::Listen(l) => l,
            Socket::Refuse(s) => {
                refusing.push(s);
                continue;
            }
        };
        let config = Arc::new(russh::server::Config {
            keys: vec![b.host_key],
            methods: russh::MethodSet::from(&[russh::MethodKind::PublicKey][..]),
            // Refusing a key costs nothing here: there is no secret to time.
            auth_rejection_time: Duration::ZERO,
            auth_rejection_time_initial: Some(Duration::ZERO),
            inactivity_timeout: Some(Duration::from_secs(600)),
            nodelay: true,
            ..Default::default()
        });
        let srv = NodeServer {
            node: b.node,
            shared: shared.clone(),
        };
        tokio::spawn(server::serve_node(listener, config, srv));
    }
    let count = |f: Fault| faults.iter().filter(|&&x| x == f).count();
    let mut extras = String::new();
    for (f, what) in [
        (Fault::Hang, "hanging"),
        (Fault::Drop, "dropping"),
        (Fault::Refuse, "refusing"),
        (Fault::SlowAccept, "slow to accept"),
    ] {
        if count(f) > 0 {
            let _ = write!(extras, ", {} {what}", count(f));
        }
    }
    if count(Fault::SlowAccept) > 0 {
        let _ = write!(extras, " ({} ms)", opts.accept_delay.as_millis());
    }
    if !opts.latency.is_zero() {
        let _ = write!(extras, ", {}", opts.latency.describe());
    }
    let summary = format!(
        "gpufleet sim: {n} node{} on {}, {}, {} fixture{}{extras}",
        if n == 1 { "" } else { "s" },
        opts.listen.describe(n),
        if lo == hi {
            format!("port {lo}")
        } else {
            format!("ports {lo}–{hi}")
        },
        used.len(),
        if used.len() == 1 { "" } else { "s" },
    );
    Ok(Running {
        inventory: written.inventory,
        key: written.key,
        known_hosts: written.known_hosts,
        hosts,
        config: written.config,
        copies,
        _builtin: builtin,
        listing,
        summary,
        shared,
        _refusing: refusing,
        cpu_at_ready: cpu_now(),
    })
}

/// File descriptors the simulator keeps for itself (the runtime, the corpus, stdio).
const FD_RESERVE: u64 = 64;

/// Refuses `nodes` listeners that cannot fit in `open_files` (the soft limit in force, after
/// [`crate::rt::raise_open_files`]): one file a node and [`FD_RESERVE`], before anything is
/// bound; connections need one more each, said in the message. `None`: unknown, not checked.
fn check_open_files(nodes: usize, open_files: Option<u64>) -> anyhow::Result<()> {
    let Some(limit) = open_files else {
        return Ok(());
    };
    let need = nodes as u64 + FD_RESERVE;
    if need > limit {
        bail!(
            "{nodes} nodes need {need} open files (one listener a node, {FD_RESERVE} for the \
             simulator) and one more per connection served at once; this process may open \
             {limit} (RLIMIT_NOFILE, raised to the hard limit): raise it with `ulimit -Hn` as \
             root, or serve fewer nodes"
        );
    }
    Ok(())
}

/// Canary nodes of an upgrade inventory.
const CANARIES: usize = 2;

/// A fresh folder only this user can read (it holds the private key), with a name no one else
/// can have made first: `<tmp>/gpufleet-<what>-<pid>-<random>`.
pub fn private_temp_dir(what: &str) -> anyhow::Result<PathBuf> {
    let mut salt = [0u8; 8];
    getrandom::fill(&mut salt)
        .map_err(|e| anyhow::anyhow!("the OS random number generator: {e}"))?;
    let salt: String = salt.iter().map(|b| format!("{b:02x}")).collect();
    let dir = std::env::temp_dir().join(format!("gpufleet-{what}-{}-{salt}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Runs `gpufleet sim` until a stop signal; returns the exit code (0). At the stop it prints
/// [`Running::report`] on stderr.
///
/// Errors: as [`start`].
pub fn run(opts: &SimOptions) -> anyhow::Result<u8> {
    let rt = crate::rt::build()?;
    let temp = match &opts.write_inventory {
        Some(_) => None,
        None => Some(private_temp_dir("sim")?),
    };
    let result = rt.block_on(serve(opts, temp.as_deref()));
    rt.shutdown_timeout(Duration::from_secs(1));
    if let Some(dir) = temp {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

async fn serve(opts: &SimOptions, temp: Option<&Path>) -> anyhow::Result<u8> {
    let stdout = anstream::stdout();
    let mut out = stdout.lock();
    let sim = start(opts, temp, &mut out).await?;
    writeln!(out, "{}", sim.summary)?;
    if sim.listing.len() <= 32 {
        for line in &sim.listing {
            writeln!(out, "  {line}")?;
        }
    }
    writeln!(out, "inventory: {}", sim.inventory.display())?;
    writeln!(out, "user key: {}", sim.key.display())?;
    writeln!(out, "known_hosts: {}", sim.known_hosts.display())?;
    if let Some((list, cfg)) = &sim.hosts {
        writeln!(out, "hosts: {}", list.display())?;
        writeln!(out, "ssh_config: {}", cfg.display())?;
    }
    writeln!(
        out,
        "try: gpufleet snapshot -i {}    (or: gpufleet tui -i …)",
        sim.inventory.display()
    )?;
    if let Some(c) = &sim.config {
        writeln!(out, "config: {}", c.display())?;
        writeln!(
            out,
            "upgrades are simulated: gpufleet --config {} -i {} upgrade --canary --yes",
            c.display(),
            sim.inventory.display()
        )?;
    }
    if temp.is_some() {
        writeln!(out, "(these files are removed when the simulator stops)")?;
    }
    writeln!(out, "ready; Ctrl-C stops it")?;
    out.flush()?;
    drop(out);
    crate::rt::stop_requested().await;
    eprintln!("{}", sim.report());
    eprintln!("gpufleet sim: stopped");
    Ok(0)
}

#[cfg(test)]
mod tests;
