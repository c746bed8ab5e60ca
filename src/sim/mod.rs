//! `gpufleet sim`: a simulated fleet over real SSH on this machine, to try gpufleet without a
//! fleet and to measure the client at scale (issue 12, first slice).
//!
//! N nodes on 127.0.0.1, one TCP listener per node (nodes are keyed by port: one file
//! descriptor per node plus one per open connection), each with its own ed25519 host key, each
//! serving one fixture node of the corpus, cycling through it (node `i` serves fixture
//! `i mod len`). At startup the probe runs once per fixture used, locally, in that fixture's
//! environment ([`corpus::record`]); sessions replay that output with their own boundary
//! ([`server`]). **Nothing else is ever executed**: other commands get exit status 127 and a
//! message on stderr.
//!
//! It writes an inventory for gpufleet (and, beside it, the one user key it accepts and a
//! known_hosts file with every node's host key), prints where it listens, and runs until
//! SIGINT, SIGTERM or SIGHUP.
//!
//! Not in this slice (issue 12): simulated upgrade steps and reboots, the `sh -c "$(cat
//! probe.sh)"` form, `--drop` / `--refuse`, a latency spread, `--write-hosts`, per-session CPU
//! reports, `gpufleet demo`, and a corpus shipped inside the binary (the default corpus is
//! found through the source tree this binary was built from, `CARGO_MANIFEST_DIR`).

pub mod corpus;
pub mod server;

use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use russh::keys::ssh_key::LineEnding;
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{PrivateKey, PublicKey};
use russh::server::Server as _;

use self::corpus::Fixture;
use self::server::{NodeServer, Shared, SimNode};

/// `gpufleet sim --help`'s closing text.
pub const SIM_HELP: &str = "\
Each node serves one fixture node (cycling through the corpus) and is named after it
(sim-000-h200-open-580-k6.18-real). It answers gpufleet's probe from that fixture (recorded once
at startup, replayed per session) and runs nothing else: any other command gets exit status 127.
Only the user key written beside the inventory is accepted. Runs until Ctrl-C or SIGTERM.

Examples:
  gpufleet sim --write-inventory /tmp/sim/fleet.toml          then, in another terminal:
  gpufleet snapshot -i /tmp/sim/fleet.toml
  gpufleet tui -i /tmp/sim/fleet.toml
  gpufleet sim --nodes 200 --hang 5% --latency 40ms --write-inventory /tmp/sim/fleet.toml";

/// `gpufleet sim` options.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Number of simulated nodes
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub nodes: u32,

    /// Folder of fixture nodes (sub-folders with node.toml, root/, bin/, commands/), or one
    /// fixture node; repeatable. Nodes cycle through them in order. Their bin/ stand-ins run
    /// here at startup: use only fixtures you trust [default: this source tree's
    /// tests/fixtures/nodes and tests/fixtures/nodes-v2]
    #[arg(long, value_name = "DIR")]
    pub fixtures: Vec<PathBuf>,

    /// First port: nodes listen on P, P+1, … [default: any free ports]
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u16).range(1..))]
    pub base_port: Option<u16>,

    /// Write the inventory here, with the user key (FILE's name + .id_ed25519) and known_hosts
    /// (+ .known_hosts) beside it [default: inventory.toml in a new temporary folder, removed
    /// at exit]
    #[arg(long, value_name = "FILE")]
    pub write_inventory: Option<PathBuf>,

    /// Share of nodes that accept the probe and never answer it (`10%` or `10`), spread evenly
    #[arg(long, value_name = "P%", value_parser = parse_share, default_value = "0")]
    pub hang: f64,

    /// Sleep before each probe answer, in milliseconds (`40` or `40ms`)
    #[arg(long, value_name = "MS", value_parser = parse_millis, default_value = "0")]
    pub latency: u64,
}

/// `10%`, `10` or `2.5%` → 10.0, 10.0, 2.5; errors outside 0 to 100.
fn parse_share(s: &str) -> Result<f64, String> {
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

/// `40` or `40ms` → 40 (milliseconds); errors for anything else.
fn parse_millis(s: &str) -> Result<u64, String> {
    s.trim()
        .trim_end_matches("ms")
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number of milliseconds (like 40ms)"))
}

/// Whether node `i` of `n` hangs with a share of `pct` %: the nodes at which the running count
/// ⌊(i+1)·pct/100⌋ goes up, so ⌊n·pct/100⌋ of them, spread evenly.
fn hangs(i: usize, pct: f64) -> bool {
    let count = |k: usize| (k as f64 * pct / 100.0 + 1e-9).floor() as u64;
    count(i + 1) > count(i)
}

/// The default corpus: this source tree's fixtures (`CARGO_MANIFEST_DIR` at build time).
fn default_fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    vec![root.join("nodes"), root.join("nodes-v2")]
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
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// One node as bound: its name, port and what it serves.
struct Bound {
    node: Arc<SimNode>,
    fixture: String,
    port: u16,
    host_key: PrivateKey,
    listener: tokio::net::TcpListener,
}

/// Files written beside the inventory.
struct Written {
    inventory: PathBuf,
    key: PathBuf,
    known_hosts: PathBuf,
}

/// The inventory text for `nodes` (paths relative to the inventory's folder).
fn inventory_text(nodes: &[Bound], key_name: &str, kh_name: &str) -> String {
    let mut s = format!(
        "# Written by `gpufleet sim` (pid {}): {} simulated nodes on 127.0.0.1, valid while it runs.\n\
         # Read-only: the simulator answers the probe and refuses every other command.\n\
         known_hosts = {}\nread_only = true\n\n[defaults]\nuser = \"root\"\nidentity_file = {}\n",
        std::process::id(),
        nodes.len(),
        toml_str(kh_name),
        toml_str(key_name),
    );
    for b in nodes {
        let hang = if b.node.hang { ", sim = \"hang\"" } else { "" };
        let _ = write!(
            s,
            "\n[[nodes]]\nname = {}\nhost = \"127.0.0.1\"\nport = {}\nlabels = {{ fixture = {}{hang} }}\n",
            toml_str(&b.node.name),
            b.port,
            toml_str(&b.fixture),
        );
    }
    s
}

/// Writes the inventory, the user key pair and known_hosts; returns their paths.
fn write_inventory(path: &Path, nodes: &[Bound], user_key: &PrivateKey) -> anyhow::Result<Written> {
    let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
        bail!(
            "--write-inventory {}: not a UTF-8 file name",
            path.display()
        );
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
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
    let mut kh = String::new();
    for b in nodes {
        let _ = writeln!(
            kh,
            "[127.0.0.1]:{} {}",
            b.port,
            openssh_public(b.host_key.public_key())?
        );
    }
    write_file(&known_hosts, kh.as_bytes(), 0o644)?;
    write_file(
        path,
        inventory_text(nodes, &key_name, &kh_name).as_bytes(),
        0o644,
    )?;
    Ok(Written {
        inventory: path.to_path_buf(),
        key,
        known_hosts,
    })
}

/// Binds one listener per node on 127.0.0.1: ports `base`, `base`+1, … or free ones.
async fn bind(n: usize, base: Option<u16>) -> anyhow::Result<Vec<(u16, tokio::net::TcpListener)>> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let port = match base {
            Some(b) => u16::try_from(usize::from(b) + i)
                .ok()
                .with_context(|| format!("--base-port {b} + {n} nodes passes port 65535"))?,
            None => 0,
        };
        let l = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| {
                format!(
                    "cannot listen on 127.0.0.1:{port} (node {i}; open files: raise `ulimit -n` for many nodes)"
                )
            })?;
        let port = l.local_addr()?.port();
        out.push((port, l));
    }
    Ok(out)
}

/// Runs `gpufleet sim` until a stop signal; returns the exit code (0).
///
/// Errors: no fixtures, a probe recording that cannot start `sh`, a port that cannot be bound,
/// files that cannot be written.
pub fn run(args: &SimArgs) -> anyhow::Result<u8> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let temp = match &args.write_inventory {
        Some(_) => None,
        None => {
            // A fresh folder only this user can read (it holds the private key): a name no
            // one else can have created first.
            let mut salt = [0u8; 8];
            getrandom::fill(&mut salt)
                .map_err(|e| anyhow::anyhow!("the OS random number generator: {e}"))?;
            let salt: String = salt.iter().map(|b| format!("{b:02x}")).collect();
            let dir =
                std::env::temp_dir().join(format!("gpufleet-sim-{}-{salt}", std::process::id()));
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            Some(dir)
        }
    };
    let result = rt.block_on(serve(args, temp.as_deref()));
    rt.shutdown_timeout(Duration::from_secs(1));
    if let Some(dir) = temp {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

async fn serve(args: &SimArgs, temp: Option<&Path>) -> anyhow::Result<u8> {
    let dirs = if args.fixtures.is_empty() {
        default_fixtures()
    } else {
        args.fixtures.clone()
    };
    let fixtures = corpus::discover(&dirs)?;
    let n = args.nodes as usize;
    let used: Vec<Fixture> = fixtures.iter().take(n).cloned().collect();
    let out = anstream::stdout();
    let mut out = out.lock();
    writeln!(
        out,
        "gpufleet sim: recording the probe answers of {} fixture node{}…",
        used.len(),
        if used.len() == 1 { "" } else { "s" }
    )?;
    out.flush()?;
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
    let width = (n.saturating_sub(1)).to_string().len().max(3);
    let listeners = bind(n, args.base_port).await?;
    let mut bound = Vec::with_capacity(n);
    for (i, (port, listener)) in listeners.into_iter().enumerate() {
        let f = &used[i % used.len()];
        let name = format!("sim-{i:0width$}-{}", f.name);
        bound.push(Bound {
            node: Arc::new(SimNode {
                name: name.clone(),
                answer: answers[i % used.len()].clone(),
                hang: hangs(i, args.hang),
            }),
            fixture: f.name.clone(),
            port,
            host_key: new_key(&name)?,
            listener,
        });
    }
    let user_key = new_key("gpufleet-sim")?;
    let inv_path = match (&args.write_inventory, temp) {
        (Some(p), _) => p.clone(),
        (None, Some(t)) => t.join("inventory.toml"),
        (None, None) => bail!("no folder for the inventory"),
    };
    let written = write_inventory(&inv_path, &bound, &user_key)?;
    let shared = Arc::new(Shared {
        user_key: user_key.public_key().clone(),
        latency: Duration::from_millis(args.latency),
    });
    let mut summary = Vec::new();
    for b in bound {
        summary.push((b.node.name.clone(), b.port, b.node.hang));
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
        let mut srv = NodeServer {
            node: b.node,
            shared: shared.clone(),
        };
        let listener = b.listener;
        tokio::spawn(async move {
            if let Err(e) = srv.run_on_socket(config, &listener).await {
                eprintln!("gpufleet sim: {}: the listener failed: {e}", srv.node.name);
            }
        });
    }
    let hung = summary.iter().filter(|s| s.2).count();
    let (lo, hi) = summary
        .iter()
        .fold((u16::MAX, 0), |(lo, hi), s| (lo.min(s.1), hi.max(s.1)));
    writeln!(
        out,
        "gpufleet sim: {n} node{} on 127.0.0.1, ports {lo}–{hi}, {} fixture{}{}{}",
        if n == 1 { "" } else { "s" },
        used.len(),
        if used.len() == 1 { "" } else { "s" },
        if hung > 0 {
            format!(", {hung} hanging")
        } else {
            String::new()
        },
        if args.latency > 0 {
            format!(", {} ms latency", args.latency)
        } else {
            String::new()
        },
    )?;
    if n <= 32 {
        for (name, port, hang) in &summary {
            writeln!(
                out,
                "  127.0.0.1:{port}  {name}{}",
                if *hang { "  (hangs)" } else { "" }
            )?;
        }
    }
    writeln!(out, "inventory: {}", written.inventory.display())?;
    writeln!(out, "user key: {}", written.key.display())?;
    writeln!(out, "known_hosts: {}", written.known_hosts.display())?;
    writeln!(
        out,
        "try: gpufleet snapshot -i {}    (or: gpufleet tui -i …)",
        written.inventory.display()
    )?;
    if temp.is_some() {
        writeln!(out, "(these files are removed when the simulator stops)")?;
    }
    writeln!(out, "ready; Ctrl-C stops it")?;
    out.flush()?;
    drop(out);
    crate::rt::stop_requested().await;
    eprintln!("gpufleet sim: stopped");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_millis_parse() {
        assert_eq!(parse_share("10%"), Ok(10.0));
        assert_eq!(parse_share("2.5"), Ok(2.5));
        assert!(parse_share("101%").is_err());
        assert!(parse_share("-1").is_err());
        assert!(parse_share("x").is_err());
        assert_eq!(parse_millis("40ms"), Ok(40));
        assert_eq!(parse_millis("40"), Ok(40));
        assert!(parse_millis("4s").is_err());
    }

    #[test]
    fn hanging_nodes_are_the_share_asked_spread_evenly() {
        let which = |n: usize, p: f64| (0..n).filter(|&i| hangs(i, p)).collect::<Vec<_>>();
        assert_eq!(which(10, 0.0), Vec::<usize>::new());
        assert_eq!(which(4, 100.0), vec![0, 1, 2, 3]);
        assert_eq!(which(10, 20.0), vec![4, 9]);
        assert_eq!(which(2, 50.0), vec![1]);
        assert_eq!(which(1000, 10.0).len(), 100);
    }

    #[test]
    fn the_inventory_names_every_node_and_its_fixture() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let ls = rt.block_on(bind(2, None)).expect("bind");
        let answer = Arc::new(corpus::Answer::new(b"", "gpufleet-x", 0));
        let bound: Vec<Bound> = ls
            .into_iter()
            .enumerate()
            .map(|(i, (port, listener))| Bound {
                node: Arc::new(SimNode {
                    name: format!("sim-00{i}-f\"x"),
                    answer: answer.clone(),
                    hang: i == 1,
                }),
                fixture: "f\"x".into(),
                port,
                host_key: new_key("k").expect("key"),
                listener,
            })
            .collect();
        let text = inventory_text(&bound, "inv.toml.id_ed25519", "inv.toml.known_hosts");
        let doc: toml::Table = text.parse().expect("TOML");
        let nodes = doc["nodes"].as_array().expect("nodes");
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[0]["name"].as_str(), Some("sim-000-f\"x"));
        assert_eq!(nodes[1]["labels"]["sim"].as_str(), Some("hang"));
        assert_eq!(doc["read_only"].as_bool(), Some(true));
        let dir = tempfile::tempdir().expect("tempdir");
        let w = write_inventory(
            &dir.path().join("inv.toml"),
            &bound,
            &new_key("u").expect("key"),
        )
        .expect("write");
        let kh = std::fs::read_to_string(&w.known_hosts).expect("known_hosts");
        assert_eq!(kh.lines().count(), 2);
        assert!(kh.starts_with(&format!("[127.0.0.1]:{} ssh-ed25519 ", bound[0].port)));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&w.key).expect("key file").permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        let parsed = crate::inventory::Inventory::load(&w.inventory);
        assert!(parsed.is_ok(), "{:?}", parsed.err());
    }
}
