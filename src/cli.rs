//! Command line: arguments → plan → run → exit code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, Paths};
use crate::inventory::{Inventory, Selection};
use crate::model::report::Snapshot;
use crate::model::{NodeReport, NodeStatus};
use crate::probe::known_hosts::KnownHosts;
use crate::probe::scan::{Scan, now_rfc3339};
use crate::probe::ssh::{HostKeyPolicy, HostKeys};
use crate::probe::{self, ProbeSettings};
use crate::snapshot::{self, Format};

mod completions;
mod diff;
mod inventory_list;

const ABOUT: &str = "Inspect GPU nodes for the move to NVIDIA open kernel modules + DMA-BUF";

const LONG_ABOUT: &str = "\
Inspect GPU nodes for the move from the proprietary NVIDIA module + nvidia-peermem to the open \
kernel modules + DMA-BUF GPUDirect RDMA.

gpufleet runs one read-only probe per node (files under /proc, /sys, /etc and /boot, then \
nvidia-smi under a time limit), locally or over SSH for every node of an inventory, and reports \
per node: kernel, module flavour, driver, GPUs and their compute capability, DMA-BUF kernel \
support, nvidia-peermem state, and a status with reasons and evidence.

Statuses, worst first:
  unreachable  the scan could not run (name does not resolve, SSH timeout, refused, not an SSH
               server, auth failed, host key)
  attention    something is broken now (nvidia-smi fails or hangs, GPU not initialized)
  unknown      no verdict: ready or no-driver would win, but a fact it rests on is unknown
               (a cut-short probe, an unreadable file; reason verdict-incomplete names them)
  blocked      the move is impossible until something changes (pre-Turing GPU, kernel < 5.12)
  migrate      on (part of) the legacy stack and nothing blocks the move
  no-driver    no NVIDIA module loaded and no NVIDIA GPU seen
  ready        open module loaded, no nvidia-peermem, DMA-BUF supported where RDMA applies";

const AFTER_HELP: &str = "\
Examples:
  gpufleet snapshot                          this machine, as a table (JSON when piped)
  gpufleet snapshot -i fleet.toml            every node of an inventory, over SSH
  gpufleet snapshot -i fleet.toml -g a100 --format csv > a100.csv
  gpufleet snapshot -i fleet.toml --check    exit 0 only if every node is ready (CI gate)
  gpufleet paths                             where gpufleet reads and writes its files";

#[derive(Debug, Parser)]
#[command(name = "gpufleet", version = crate::VERSION, about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// Config file [default: ~/.config/gpufleet/config.toml]
    #[arg(long, global = true, env = "GPUFLEET_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Inventory: FILE (gpufleet TOML, Ansible INI/YAML, host list), - (hosts on stdin),
    /// slurm:[PARTITION|NODES], k8s:[SELECTOR] [default: ~/.config/gpufleet/inventory.toml if it
    /// exists]
    #[arg(
        short,
        long,
        global = true,
        env = "GPUFLEET_INVENTORY",
        value_name = "FILE"
    )]
    pub inventory: Option<PathBuf>,

    /// The kind of the -i file (detected when not given)
    #[arg(long, global = true, value_name = "KIND", value_parser = inventory_list::format_parser())]
    pub inventory_format: Option<crate::inventory::source::InventoryFormat>,

    /// gpufleet's known_hosts, read with ~/.ssh/known_hosts [default: ~/.local/share/gpufleet/known_hosts]
    #[arg(long, global = true, env = "GPUFLEET_KNOWN_HOSTS", value_name = "FILE")]
    pub known_hosts: Option<PathBuf>,

    /// State folder for rollout journals [default: ~/.local/state/gpufleet]
    #[arg(long, global = true, env = "GPUFLEET_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// OpenSSH client config that fills host names, users, ports and keys the inventory leaves
    /// unset; `none` to read none [default: ~/.ssh/config if it exists]
    #[arg(long, global = true, env = "GPUFLEET_SSH_CONFIG", value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Probe nodes once and print a report: table, JSON, JSON Lines or CSV
    #[command(after_help = SNAPSHOT_HELP)]
    Snapshot(SnapshotArgs),
    /// Interactive fleet matrix: scan results stream in; sort, filter, drill into evidence
    #[command(after_help = TUI_HELP)]
    Tui(TuiArgs),
    /// Upgrade nodes to the open modules: canaries first, then waves (drain, recipe, reboot,
    /// re-probe, gates, uncordon), journaled and resumable
    #[command(
        after_help = UPGRADE_HELP,
        mut_arg("local", |a| a.hide(true)),
        mut_arg("root", |a| a.hide(true))
    )]
    Upgrade(UpgradeArgs),
    /// Show the rollout journal (who, when, node, step, command, outcome)
    Journal(JournalArgs),
    /// List the rollouts of the journal: id, mode, state, nodes, who, when
    Rollouts(RolloutsArgs),
    /// Show each node's lock: which rollout holds it, its operator (user@host, pid), since when
    Locks(LocksArgs),
    /// Break a node's lock held by a given rollout (one abandoned, or whose process died
    /// elsewhere), after confirmation; journaled
    Unlock(UnlockArgs),
    /// Print where gpufleet reads and writes its files
    Paths,
    /// Serve a simulated fleet over SSH on 127.0.0.1 (fixture nodes; read-only) and write an
    /// inventory for it: try gpufleet without a fleet
    #[command(after_help = crate::sim::SIM_HELP)]
    Sim(crate::sim::SimArgs),
    /// The inventory's nodes as gpufleet resolves them (TOML, Ansible, Slurm, Kubernetes, host list)
    #[command(subcommand, after_help = inventory_list::INVENTORY_HELP)]
    Inventory(inventory_list::InventoryCommand),
    /// What changed between two snapshots, per node; exit 1 when anything did
    #[command(after_help = diff::DIFF_HELP)]
    Diff(diff::DiffArgs),
    /// Print shell completions (bash, zsh, fish)
    #[command(after_help = completions::COMPLETIONS_HELP)]
    Completions(completions::CompletionsArgs),
    /// Print the man page (roff)
    #[command(after_help = completions::MAN_HELP)]
    Man(completions::ManArgs),
}

const UPGRADE_HELP: &str = "\
Per node: lock (a marker on the node) → drain → the recipe's steps → wait for SSH after a reboot
→ re-probe → gates (open module, no nvidia-peermem, nvidia-smi healthy, DMA-BUF kernel support,
no error reasons) → uncordon → unlock. Only nodes whose status is `migrate` are upgraded. A failed
step or gate stops that node and leaves it drained. Every step is written to the journal (fsynced)
before it runs; --resume continues an interrupted rollout without repeating completed steps.

Each rollout has its own id (r-<UTC time>-<random>); the node lock's marker names it and its
operator (user@host, pid), and no other rollout passes it. Recipe steps run detached on the node
(<root>/var/lib/gpufleet/steps/<rollout>/), so they finish if gpufleet or the connection dies;
--resume waits for a step still running there and takes its recorded exit status.

Exit codes: 0 done (or nothing to do, or --dry-run), 1 a node failed (the rollout stopped) or a
wave is blocked by its canaries, 2 usage, config, inventory or read-only errors.

Examples:
  gpufleet upgrade -i fleet.toml --canary --dry-run     the plan with the exact commands
  gpufleet upgrade -i fleet.toml --canary               then type the number of nodes to go
  gpufleet upgrade -i fleet.toml --wave --yes           the next wave, no prompt (scripts)
  gpufleet upgrade -i fleet.toml --resume               after a crash or Ctrl-C";

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["canary", "wave", "resume", "abandon"])))]
pub struct UpgradeArgs {
    #[command(flatten)]
    pub scan: ScanArgs,

    /// Upgrade the canary nodes (`canary = true`), at most max_unavailable of them
    #[arg(long)]
    pub canary: bool,

    /// Upgrade the next wave of the other nodes (every canary must be done)
    #[arg(long)]
    pub wave: bool,

    /// Continue the last rollout that did not finish (interrupted, or stopped by a failed step
    /// or gate): each node goes on from the step where it stopped
    #[arg(long)]
    pub resume: bool,

    /// Give up the last rollout that did not finish: its nodes stay as they are (drained ones
    /// stay drained; uncordon them yourself), and later rollouts may take over its node locks.
    /// Refused while the rollout's process still runs
    #[arg(long)]
    pub abandon: bool,

    /// Print the plan with the exact commands and change nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Do not ask for confirmation (for scripts)
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Nodes upgraded at once [default: 1, or the config's [upgrade] max_unavailable]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub max_unavailable: Option<u64>,

    /// Refuse to run (read-only fleet view)
    #[arg(long)]
    pub read_only: bool,
}

#[derive(Debug, Args)]
pub struct RolloutsArgs {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LocksArgs {
    #[command(flatten)]
    pub scan: ScanArgs,

    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// The node whose lock to break
    #[arg(value_name = "NODE")]
    pub node: String,

    /// The rollout that holds it (the lock is broken only if this rollout holds it)
    #[arg(long, value_name = "ID")]
    pub rollout: String,

    /// Do not ask for confirmation (for scripts)
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Refuse to run (read-only fleet view)
    #[arg(long)]
    pub read_only: bool,
}

#[derive(Debug, Args)]
pub struct JournalArgs {
    /// Only this rollout
    #[arg(long, value_name = "ID")]
    pub rollout: Option<String>,

    /// Only this node's entries (and its rollouts' start and end)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,

    /// Print the raw JSON Lines
    #[arg(long)]
    pub jsonl: bool,
}

const TUI_HELP: &str = "\
With no subcommand, gpufleet starts this view when run in a terminal.
Keys: ? help · / filter (status:migrate flavor:proprietary label:canary group:a100) ·
enter details · s / S sort · click a header to sort · R rescan · r rescan node · x cancel ·
e / E export JSON / CSV · q quit. Keys can be changed under [keys] in the config file.

Examples:
  gpufleet tui                               this machine
  gpufleet tui -i fleet.toml --read-only     the fleet, read-only
  gpufleet tui -i fleet.toml -g h100 --refresh 300 --theme high-contrast";

const SNAPSHOT_HELP: &str = "\
Which nodes:
  no inventory (and none at ~/.config/gpufleet/inventory.toml), or --local: this machine
  -i FILE: every node of the inventory, narrowed by --node, --group and --label
  (several values of one selector are a union; different selectors intersect)

Exit codes:
  0  the snapshot was produced, whatever the statuses
  2  usage, config or inventory errors
With --check:
  0  every node is ready
  1  some node is not ready (no-driver included)
  2  some node is unreachable or unknown, or an error

Examples:
  gpufleet snapshot
  gpufleet snapshot -i fleet.toml --node 'gpu[001-016]' --format jsonl
  gpufleet snapshot -i fleet.toml --label rack=r2 --host-key-policy accept-new
  gpufleet snapshot --root /host --nvidia-smi-timeout 5";

/// Which nodes and how to probe them (shared by `snapshot` and `tui`).
#[derive(Debug, Args, Default, Clone)]
pub struct ScanArgs {
    /// Probe this machine, even when an inventory is configured
    #[arg(long, conflicts_with_all = ["node", "group", "label"])]
    pub local: bool,

    /// Local mode: read every probed path under DIR (a host filesystem mounted elsewhere) [default: /]
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Only these nodes (names, ranges like gpu[001-008], globs like 'gpu0*'); repeatable
    #[arg(short, long, value_name = "NAME")]
    pub node: Vec<String>,

    /// Only nodes in this inventory group; repeatable
    #[arg(short, long, value_name = "GROUP")]
    pub group: Vec<String>,

    /// Only nodes with this label (key=value, or key); repeatable
    #[arg(short, long, value_name = "LABEL")]
    pub label: Vec<String>,

    /// Time limit of each nvidia-smi call, in seconds [default: 10, or the config's]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub nvidia_smi_timeout: Option<u64>,

    /// Deadline for the whole probe of one node, in seconds [default: 60, or the config's]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub deadline: Option<u64>,

    /// Nodes probed at once [default: 64, or the config's]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub concurrency: Option<u64>,

    /// Seconds to resolve each node's name and open its TCP connection [default: 10, or the config's]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub connect_timeout: Option<u64>,

    /// Unknown host keys: refuse (strict) or learn (accept-new); changed keys are always refused
    #[arg(long, value_enum, value_name = "POLICY")]
    pub host_key_policy: Option<HostKeyPolicy>,
}

#[derive(Debug, Args, Default)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub scan: ScanArgs,

    /// Output format [default: table on a terminal, json otherwise]
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<Format>,

    /// Exit 0 only when every node is ready, 1 when any is not, 2 when any is unreachable or
    /// unknown
    #[arg(long)]
    pub check: bool,

    /// With --check: count no-driver nodes as passing (a fleet with CPU nodes)
    #[arg(long, requires = "check")]
    pub allow_no_driver: bool,

    /// Write to FILE instead of stdout, atomically (temp file in the same folder, fsync,
    /// rename): for node_exporter's textfile collector or cron [default format: json]
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args, Default)]
pub struct TuiArgs {
    #[command(flatten)]
    pub scan: ScanArgs,

    /// Read-only fleet view: actions that change nodes are unbound and refused
    #[arg(long)]
    pub read_only: bool,

    /// Theme: default, light, high-contrast, or NAME for ~/.config/gpufleet/themes/NAME.toml
    #[arg(long, value_name = "NAME")]
    pub theme: Option<String>,

    /// Rescan every SECS seconds after a scan ends [default: off]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub refresh: Option<u64>,
}

/// Runs the parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    // Given by flag or environment (clap merges both): such a file must exist.
    let explicit_config = cli.config.is_some();
    let explicit_inventory = cli.inventory.is_some();
    let ssh_config = cli.ssh_config.clone();
    let paths = Paths::resolve(cli.config, cli.inventory, cli.known_hosts, cli.state_dir);
    let paths = Paths {
        ssh_config,
        inventory_format: cli.inventory_format,
        ..paths
    };
    let config = match Config::load(paths.config.as_deref().filter(|_| explicit_config)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gpufleet: config error: {e}");
            return ExitCode::from(2);
        }
    };
    let interactive = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    let result = match cli.command {
        Some(Command::Paths) => print_paths(&paths),
        Some(Command::Snapshot(a)) => snapshot_cmd(&config, &paths, explicit_inventory, &a),
        Some(Command::Tui(a)) => tui_cmd(&config, &paths, explicit_inventory, &a),
        Some(Command::Upgrade(a)) => upgrade_cmd(&config, &paths, explicit_inventory, &a),
        Some(Command::Journal(a)) => journal_cmd(&paths, &a),
        Some(Command::Rollouts(a)) => rollouts_cmd(&paths, &a),
        Some(Command::Locks(a)) => locks_cmd(&config, &paths, explicit_inventory, &a),
        Some(Command::Unlock(a)) => unlock_cmd(&config, &paths, explicit_inventory, &a),
        Some(Command::Sim(a)) => crate::sim::run(&a),
        Some(Command::Inventory(c)) => inventory_list::run(&paths, explicit_inventory, &c),
        Some(Command::Diff(a)) => diff::run(&a),
        Some(Command::Completions(a)) => completions::completions(&a),
        Some(Command::Man(a)) => completions::man(&a),
        None if interactive => tui_cmd(
            &config,
            &paths,
            explicit_inventory,
            &TuiArgs {
                scan: ScanArgs::default(),
                ..TuiArgs::default()
            },
        ),
        None => snapshot_cmd(
            &config,
            &paths,
            explicit_inventory,
            &SnapshotArgs {
                scan: ScanArgs::default(),
                ..SnapshotArgs::default()
            },
        ),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) if e.is::<Interrupted>() => {
            eprintln!("gpufleet: interrupted");
            ExitCode::from(130)
        }
        // The reader went away (`| head`): stop quietly, as other Unix tools do.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gpufleet: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn print_paths(paths: &Paths) -> anyhow::Result<u8> {
    let show = |p: &Option<PathBuf>| {
        p.as_ref()
            .map_or("(none: no home folder)".to_string(), |p| {
                let state = if p.exists() { "" } else { "  (absent)" };
                format!("{}{state}", p.display())
            })
    };
    let rows = [
        ("config", show(&paths.config)),
        ("inventory", show(&paths.inventory)),
        ("known_hosts", show(&paths.known_hosts)),
        ("ssh known_hosts", show(&Paths::user_known_hosts())),
        (
            "ssh config",
            show(&paths.ssh_config.clone().or_else(|| {
                directories::BaseDirs::new().map(|b| b.home_dir().join(".ssh/config"))
            })),
        ),
        (
            "themes",
            show(&crate::config::config_dir().map(|d| d.join("themes"))),
        ),
        ("state", show(&paths.state_dir)),
    ];
    for (k, v) in rows {
        println!("{k:<16} {v}");
    }
    if let Some(inv) = paths.inventory.as_ref().filter(|p| p.exists())
        && let Ok(inv) = Inventory::load(inv)
        && let Some(kh) = &inv.known_hosts
    {
        println!("{:<16} {} (the inventory's)", "known_hosts", kh.display());
    }
    Ok(0)
}

/// The inventory to scan: `-i`/`$GPUFLEET_INVENTORY` must exist; the default one is used when
/// it exists; otherwise `None` (local mode).
fn inventory_for(
    paths: &Paths,
    explicit: bool,
    args: &ScanArgs,
) -> anyhow::Result<Option<Inventory>> {
    if args.local {
        return Ok(None);
    }
    let Some(path) = &paths.inventory else {
        return Ok(None);
    };
    let using = explicit || path.exists();
    if using && let Some(root) = &args.root {
        anyhow::bail!(
            "--root {} applies to local mode; with an inventory, set `root` for the nodes in {}",
            root.display(),
            path.display()
        );
    }
    if !explicit && !path.exists() {
        if !(args.node.is_empty() && args.group.is_empty() && args.label.is_empty()) {
            anyhow::bail!("--node, --group and --label need an inventory (-i FILE)");
        }
        return Ok(None);
    }
    Ok(Some(inventory_list::load(
        paths,
        path,
        ssh_config(paths)?.as_ref(),
    )?))
}

/// The OpenSSH client config to read: `--ssh-config FILE` (an error if it does not parse),
/// `none`, or ~/.ssh/config when it exists (a warning if it does not parse).
fn ssh_config(paths: &Paths) -> anyhow::Result<Option<ssh2_config::SshConfig>> {
    use ssh2_config::{ParseRule, SshConfig};
    let (path, explicit) = match &paths.ssh_config {
        Some(p) if p.as_os_str() == "none" => return Ok(None),
        Some(p) => (p.clone(), true),
        None => match directories::BaseDirs::new().map(|b| b.home_dir().join(".ssh/config")) {
            Some(p) if p.exists() => (p, false),
            _ => return Ok(None),
        },
    };
    let parsed = std::fs::File::open(&path)
        .map_err(|e| e.to_string())
        .and_then(|f| {
            SshConfig::default()
                .parse(
                    &mut std::io::BufReader::new(f),
                    ParseRule::ALLOW_UNKNOWN_FIELDS,
                )
                .map_err(|e| e.to_string())
        });
    match parsed {
        Ok(c) => Ok(Some(c)),
        Err(e) if explicit => anyhow::bail!("--ssh-config {}: {e}", path.display()),
        Err(e) => {
            eprintln!("gpufleet: warning: {}: {e}; not used", path.display());
            Ok(None)
        }
    }
}

/// Ctrl-C or SIGTERM during a snapshot: the scan stops, the probe processes are killed, and
/// gpufleet exits 130.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Probe settings from the config with the flags applied.
fn probe_settings(config: &Config, args: &ScanArgs) -> anyhow::Result<ProbeSettings> {
    let mut settings = config.probe_settings();
    if let Some(s) = args.nvidia_smi_timeout {
        settings.nvidia_smi_timeout_secs = s;
    }
    if let Some(s) = args.deadline {
        settings.deadline = Duration::from_secs(s);
        // A shorter deadline alone brings the nvidia-smi limit (from the config) down with it.
        if args.nvidia_smi_timeout.is_none() && s >= 2 && settings.nvidia_smi_timeout_secs >= s {
            settings.nvidia_smi_timeout_secs = s - 1;
        }
    }
    if settings.nvidia_smi_timeout_secs >= settings.deadline.as_secs() {
        anyhow::bail!(
            "the nvidia-smi time limit ({} s) must be shorter than the node deadline ({} s): see --nvidia-smi-timeout and --deadline",
            settings.nvidia_smi_timeout_secs,
            settings.deadline.as_secs()
        );
    }
    Ok(settings)
}

fn snapshot_cmd(
    config: &Config,
    paths: &Paths,
    explicit_inventory: bool,
    args: &SnapshotArgs,
) -> anyhow::Result<u8> {
    let mut settings = probe_settings(config, &args.scan)?;
    let thresholds = config.thresholds();
    let stdout = std::io::stdout();
    let format = args
        .format
        .unwrap_or(if stdout.is_terminal() && args.output.is_none() {
            Format::Table
        } else {
            Format::Json
        });
    let inventory = inventory_for(paths, explicit_inventory, &args.scan)?;
    let mut file = args
        .output
        .as_deref()
        .map(snapshot::AtomicFile::create)
        .transpose()?;
    let out: Box<dyn Write + '_> = match file.as_mut() {
        Some(f) => Box::new(snapshot::StripAnsi::new(f)),
        None if format == Format::Table => Box::new(anstream::stdout()),
        None => Box::new(stdout.lock()),
    };
    let mut sink = snapshot::sink(format, out);
    let nodes = match inventory {
        None => {
            settings.root = local_root(&args.scan)?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let scanned_at = now_rfc3339();
            let run = rt
                .block_on(probe::run_local_cancellable(
                    &settings,
                    crate::rt::stop_requested(),
                ))
                .map_err(|e| anyhow::anyhow!("cannot start sh for the local probe: {e}"))?
                .ok_or(Interrupted)?;
            let node = probe::report(None, &run, &thresholds, scanned_at);
            sink.node(&node)?;
            vec![node]
        }
        Some(inv) => {
            let (scan, selected) =
                build_scan(config, paths, &args.scan, &inv, settings, thresholds)?;
            scan_fleet(scan, selected, &mut *sink)?
        }
    };
    let doc = Snapshot::new(now_rfc3339(), nodes);
    sink.finish(&doc)?;
    drop(sink);
    if let Some(f) = file {
        f.commit()?;
    }
    let check = args.check.then_some(snapshot::Check {
        allow_no_driver: args.allow_no_driver,
    });
    Ok(snapshot::exit_code(&doc.nodes, check))
}

fn local_root(args: &ScanArgs) -> anyhow::Result<PathBuf> {
    let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    if !root.is_dir() {
        anyhow::bail!("--root {}: not a folder", root.display());
    }
    if !root.join("proc").is_dir() {
        anyhow::bail!(
            "--root {}: no proc/ folder in it; it should be a node's root filesystem (such as /host)",
            root.display()
        );
    }
    Ok(root)
}

/// The selected nodes and a scan over them, with SSH settings, host keys and thresholds.
fn build_scan(
    config: &Config,
    paths: &Paths,
    args: &ScanArgs,
    inv: &Inventory,
    settings: ProbeSettings,
    thresholds: crate::model::Thresholds,
) -> anyhow::Result<(Arc<Scan>, Vec<crate::inventory::Node>)> {
    let selection = Selection {
        nodes: args.node.clone(),
        groups: args.group.clone(),
        labels: args.label.clone(),
    };
    let selected: Vec<_> = selection
        .apply(inv)
        .map_err(anyhow::Error::msg)?
        .into_iter()
        .cloned()
        .collect();
    let mut ssh = config.ssh_settings();
    if let Some(c) = args.concurrency {
        ssh.concurrency = c as usize;
    }
    if let Some(c) = args.connect_timeout {
        ssh.connect_timeout = Duration::from_secs(c);
    }
    if let Some(p) = args.host_key_policy {
        ssh.host_key_policy = p;
    }
    let mut files: Vec<PathBuf> = Paths::user_known_hosts().into_iter().collect();
    files.extend(inv.known_hosts.clone());
    files.extend(paths.known_hosts.clone());
    let learn_to = inv
        .known_hosts
        .clone()
        .or_else(|| paths.known_hosts.clone());
    let db = KnownHosts::load(&files, learn_to)?;
    for (f, line) in db.skipped.iter().take(3) {
        eprintln!(
            "gpufleet: warning: {}:{line}: not a known_hosts line; skipped",
            f.display()
        );
    }
    let keys = Arc::new(HostKeys::new(db, ssh.host_key_policy));
    let scan = Arc::new(Scan {
        probe: settings,
        ssh,
        keys,
        thresholds,
    });
    Ok((scan, selected))
}

fn tui_cmd(
    config: &Config,
    paths: &Paths,
    explicit_inventory: bool,
    args: &TuiArgs,
) -> anyhow::Result<u8> {
    use crate::app::{App, Keymap, Row};
    use crate::runtime::Target;
    let mut settings = probe_settings(config, &args.scan)?;
    let thresholds = config.thresholds();
    let inventory = inventory_for(paths, explicit_inventory, &args.scan)?;
    let read_only =
        args.read_only || config.tui.read_only || inventory.as_ref().is_some_and(|i| i.read_only);
    let theme_name = args
        .theme
        .clone()
        .unwrap_or_else(|| config.tui.theme.clone());
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let theme = crate::ui::Theme::load(
        &theme_name,
        crate::config::config_dir().as_deref(),
        no_color,
    )
    .map_err(anyhow::Error::msg)?;
    let (keymap, problems) = Keymap::new(&config.keys, read_only);
    let (target, rows, source) = match &inventory {
        None => {
            settings.root = local_root(&args.scan)?;
            let name = std::fs::read_to_string(settings.root.join("proc/sys/kernel/hostname"))
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "localhost".into());
            let rows = vec![Row::new(name.clone())];
            (
                Target::Local {
                    name,
                    settings,
                    thresholds,
                },
                rows,
                "local".to_string(),
            )
        }
        Some(inv) => {
            let (scan, selected) =
                build_scan(config, paths, &args.scan, inv, settings, thresholds)?;
            let rows = selected
                .iter()
                .map(|n| {
                    let mut r = Row::new(n.name.clone());
                    r.labels = n.labels.clone();
                    r.groups = n.groups.clone();
                    r.canary = n.canary;
                    r.refresh();
                    r
                })
                .collect();
            let source = format!("{} ({} nodes)", inv.path.display(), selected.len());
            (
                Target::Fleet {
                    scan,
                    nodes: selected,
                },
                rows,
                source,
            )
        }
    };
    let mut app = App::new(rows, keymap, read_only, source);
    app.refresh_secs = args.refresh.or(config.tui.refresh);
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("gpufleet: config: {p}");
        }
        app.message = Some(format!(
            "config: {} (and {} more)",
            problems[0],
            problems.len() - 1
        ));
    }
    let upgrade = match (&inventory, &target) {
        (Some(inv), Target::Fleet { nodes, .. }) => Some(crate::runtime::UpgradeCtx {
            nodes: nodes.clone(),
            cfg: config.upgrade.clone(),
            recipes: config.recipes.clone(),
            state_dir: state_dir(paths)?,
            read_only: crate::actions::permit::ReadOnlySources {
                flag: args.read_only,
                config: config.tui.read_only,
                inventory: inv.read_only,
            },
        }),
        _ => None,
    };
    crate::runtime::run(app, theme, target, upgrade)?;
    Ok(0)
}

fn scan_fleet(
    scan: Arc<Scan>,
    selected: Vec<crate::inventory::Node>,
    sink: &mut dyn snapshot::Sink,
) -> anyhow::Result<Vec<NodeReport>> {
    let total = selected.len();
    let keys = scan.keys.clone();
    let order: Vec<String> = selected.iter().map(|n| n.name.clone()).collect();
    let rt = crate::rt::build()?;
    let progress = std::io::stderr().is_terminal();
    let mut reports = rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(256);
        let task = tokio::spawn(scan.run(selected, tx));
        let mut reports = Vec::with_capacity(total);
        let mut stop = std::pin::pin!(crate::rt::stop_requested());
        loop {
            let r = tokio::select! {
                r = rx.recv() => r,
                _ = &mut stop => {
                    task.abort();
                    if progress {
                        eprint!("\r\x1b[2K");
                    }
                    return Err(anyhow::Error::new(Interrupted));
                }
            };
            let Some(r) = r else { break };
            sink.node(&r)?;
            reports.push(r);
            if progress {
                let failed = reports
                    .iter()
                    .filter(|r| r.status == NodeStatus::Unreachable)
                    .count();
                eprint!(
                    "\r\x1b[2Kscanning {}/{total} nodes, {failed} unreachable",
                    reports.len()
                );
            }
        }
        let _ = task.await;
        if progress {
            eprint!("\r\x1b[2K");
        }
        for m in keys
            .learned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            eprintln!("gpufleet: {m}");
        }
        Ok::<_, anyhow::Error>(reports)
    })?;
    let rank: std::collections::HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    reports.sort_by_key(|r| rank.get(r.name.as_str()).copied());
    Ok(reports)
}

fn state_dir(paths: &Paths) -> anyhow::Result<PathBuf> {
    paths
        .state_dir
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no state folder (no home folder?): set --state-dir"))
}

fn print_plan(
    plan: &crate::actions::rollout::Plan,
    dry_run: bool,
    progress: &crate::actions::rollout::Progress,
) {
    for l in crate::actions::rollout::plan_lines(plan, dry_run) {
        println!("{l}");
    }
    let mut steps: Vec<String> = plan
        .nodes
        .iter()
        .flat_map(|n| {
            n.steps
                .iter()
                .enumerate()
                .filter(|(i, _)| {
                    progress.get(&(n.node.clone(), *i))
                        == Some(&crate::actions::journal::Phase::Done)
                })
                .map(|(_, s)| format!("{} {}", n.node, s.label()))
        })
        .collect();
    if !steps.is_empty() {
        steps.sort();
        println!("  done before (skipped on resume): {}", steps.join(", "));
    }
}

fn confirm(count: usize) -> anyhow::Result<bool> {
    use std::io::BufRead;
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("not a terminal: pass --yes to confirm, or --dry-run to see the plan");
    }
    eprint!("This changes {count} node(s). Type {count} to go on: ");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim() == count.to_string())
}

fn upgrade_cmd(
    config: &Config,
    paths: &Paths,
    explicit_inventory: bool,
    args: &UpgradeArgs,
) -> anyhow::Result<u8> {
    use crate::actions::{journal, permit::WritePermit, rollout};
    if args.scan.local || args.scan.root.is_some() {
        anyhow::bail!(
            "--local and --root do not apply to upgrades: a rollout works on an inventory's nodes over SSH"
        );
    }
    let settings = probe_settings(config, &args.scan)?;
    let thresholds = config.thresholds();
    let inv = inventory_for(paths, explicit_inventory, &args.scan)?
        .ok_or_else(|| anyhow::anyhow!("upgrade needs an inventory (-i FILE)"))?;
    // Refused before anything else when read-only, dry run included: nothing may start.
    let permit = WritePermit::new(crate::actions::permit::ReadOnlySources {
        flag: args.read_only,
        config: config.tui.read_only,
        inventory: inv.read_only,
    })?;
    let state = state_dir(paths)?;
    // One rollout at a time per state folder, from here on (a dry run changes nothing and
    // takes no lock). `--abandon` is refused while the rollout's process runs.
    let mut local = if args.dry_run {
        None
    } else {
        match rollout::lock_local(&state) {
            Ok(l) => Some(l),
            Err(rollout::LocalLockError::Held { path, holder }) if args.abandon => {
                anyhow::bail!(
                    "not abandoned: the rollout is still running ({holder}; it holds {}); stop that process first (then `--resume` or `--abandon`), or wait for it to end",
                    path.display()
                );
            }
            Err(e) => return Err(e.into()),
        }
    };
    let journal_path = state.join("journal.jsonl");
    let (entries, skipped_lines) = journal::read(&journal_path)?;
    if skipped_lines > 0 {
        eprintln!(
            "gpufleet: warning: {}: {skipped_lines} line(s) that are not journal entries were skipped",
            journal_path.display()
        );
    }
    let stopped = rollout::unfinished(&entries);
    if stopped.is_none()
        && let Some(id) = rollout::unreadable_unfinished(&entries)
    {
        if !args.abandon {
            anyhow::bail!("{}", rollout::unreadable_message(&id));
        }
        let mut j = journal::Journal::open(&state)?;
        j.append(&journal::Entry {
            ts: now_rfc3339(),
            who: journal::who(),
            rollout: id.clone(),
            node: String::new(),
            step: "rollout".into(),
            seq: None,
            phase: journal::Phase::Abandoned,
            command: String::new(),
            outcome: "abandoned by the operator (its plan could not be read)".into(),
        })?;
        println!(
            "abandoned rollout {id}; its plan could not be read, so check its nodes by hand: `gpufleet locks` lists node locks, and drained nodes stay drained"
        );
        return Ok(0);
    }
    if args.abandon {
        let (plan, progress) = stopped.ok_or_else(|| {
            anyhow::anyhow!(
                "nothing to abandon: every rollout in {} finished",
                journal_path.display()
            )
        })?;
        let mut j = journal::Journal::open(&state)?;
        j.append(&journal::Entry {
            ts: now_rfc3339(),
            who: journal::who(),
            rollout: plan.rollout.clone(),
            node: String::new(),
            step: "rollout".into(),
            seq: None,
            phase: journal::Phase::Abandoned,
            command: String::new(),
            outcome: "abandoned by the operator".into(),
        })?;
        let nodes: Vec<&str> = plan.nodes.iter().map(|n| n.node.as_str()).collect();
        println!(
            "abandoned rollout {} ({}); check those nodes: drained ones stay drained",
            plan.rollout,
            nodes.join(", ")
        );
        for l in rollout::left_behind(&plan, &progress) {
            println!("  {l}");
        }
        return Ok(0);
    }
    if !args.resume
        && let Some((plan, _)) = &stopped
    {
        anyhow::bail!(
            "rollout {} did not finish: `gpufleet upgrade --resume` goes on with it, `--abandon` gives it up",
            plan.rollout
        );
    }
    let (scan, selected) = build_scan(config, paths, &args.scan, &inv, settings, thresholds)?;
    let mut ucfg = config.upgrade.clone();
    if let Some(m) = args.max_unavailable {
        ucfg.max_unavailable = m as usize;
    }
    let rt = crate::rt::build()?;
    let (plan, progress) = if args.resume {
        stopped.ok_or_else(|| {
            anyhow::anyhow!(
                "nothing to resume: every rollout in {} finished",
                journal_path.display()
            )
        })?
    } else {
        let mode = if args.canary {
            rollout::Mode::Canary
        } else {
            rollout::Mode::Wave
        };
        // The canaries of the whole inventory gate the waves, selected or not.
        let planned = rt.block_on(rollout::prepare(
            scan.clone(),
            &inv.nodes,
            &selected,
            rollout::Choice::Next(mode),
            &entries,
            &ucfg,
            &config.recipes,
            &rollout::new_id(),
            |n| eprintln!("probing {n} node(s) before planning…"),
        ));
        let plan = match planned {
            Ok(p) => p,
            // A wave blocked by its canaries is a state of the fleet, not a usage error: exit 1.
            Err(rollout::NoPlan::CanariesFirst(why)) => {
                eprintln!("gpufleet: {why}");
                return Ok(1);
            }
            Err(e) => return Err(anyhow::Error::msg(e.to_string())),
        };
        (plan, Default::default())
    };
    print_plan(&plan, args.dry_run, &progress);
    if args.dry_run {
        return Ok(0);
    }
    if plan.nodes.is_empty() {
        println!("nothing to do");
        return Ok(0);
    }
    if let Some(l) = local.as_mut() {
        l.note(&plan.rollout);
    }
    if !args.yes && !confirm(plan.nodes.len())? {
        eprintln!("gpufleet: not confirmed; nothing changed");
        return Ok(2);
    }
    // Only how to reach each node comes from the inventory; what runs is the plan.
    let nodes: Vec<crate::inventory::Node> = plan
        .nodes
        .iter()
        .map(|p| {
            inv.nodes
                .iter()
                .find(|n| n.name == p.node)
                .cloned()
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "{} is in the rollout but no longer in {}",
                        p.node,
                        inv.path.display()
                    )
                })
        })
        .collect::<anyhow::Result<_>>()?;
    let executor = std::sync::Arc::new(rollout::Executor::new(
        permit,
        journal::Journal::open(&state)?,
        scan,
        &ucfg,
        progress,
        Box::new(|l| eprintln!("gpufleet: {}", crate::model::text::terminal_safe(l))),
    ));
    if !args.resume {
        executor.start(&plan).map_err(anyhow::Error::msg)?;
    }
    let (outcomes, summary) = rt.block_on(executor.run_plan(&plan, nodes));
    let failed = outcomes.iter().filter(|o| o.failure.is_some()).count();
    for o in &outcomes {
        if let Some(f) = &o.failure {
            let drained = rollout::drained_note(&plan, &o.node, f.seq);
            eprintln!(
                "gpufleet: {} stopped at {}{drained}: {}",
                o.node, f.step, f.why
            );
        }
    }
    if failed > 0 {
        eprintln!(
            "gpufleet: fix what stopped them, then `gpufleet upgrade --resume` goes on from there (or `--abandon`)"
        );
    }
    println!("{summary}");
    drop(local);
    Ok(if failed == 0 { 0 } else { 1 })
}

fn rollouts_cmd(paths: &Paths, args: &RolloutsArgs) -> anyhow::Result<u8> {
    use crate::actions::{journal, rollout};
    let state = state_dir(paths)?;
    let (entries, _) = journal::read(&state.join("journal.jsonl"))?;
    let holder = rollout::local_holder(&state);
    let mut list = rollout::rollouts(&entries);
    for r in list.iter_mut().filter(|r| r.state == "unfinished") {
        r.state = match &holder {
            Some(h) if h.contains(&format!("rollout {},", r.id)) => "running".into(),
            _ => "interrupted".into(),
        };
    }
    if args.json {
        println!(
            "{}",
            crate::model::text::json_safe(serde_json::to_string_pretty(&list)?)
        );
        return Ok(0);
    }
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    for r in &list {
        let mode = match r.mode {
            Some(rollout::Mode::Canary) => "canary",
            Some(rollout::Mode::Wave) => "wave",
            None => "?",
        };
        println!(
            "{}  {:<6} {:<11} {}  {}  {}{}",
            r.id,
            mode,
            r.state,
            safe(&r.who),
            r.started,
            safe(&r.nodes.join(",")),
            r.ended
                .as_ref()
                .map_or(String::new(), |e| format!("  (ended {e})"))
        );
    }
    if list.is_empty() {
        eprintln!("gpufleet: no rollouts in {}", state.display());
    }
    Ok(0)
}

fn locks_cmd(
    config: &Config,
    paths: &Paths,
    explicit_inventory: bool,
    args: &LocksArgs,
) -> anyhow::Result<u8> {
    let settings = probe_settings(config, &args.scan)?;
    let inv = inventory_for(paths, explicit_inventory, &args.scan)?
        .ok_or_else(|| anyhow::anyhow!("locks needs an inventory (-i FILE)"))?;
    let (scan, selected) = build_scan(
        config,
        paths,
        &args.scan,
        &inv,
        settings,
        config.thresholds(),
    )?;
    let rt = crate::rt::build()?;
    // Read-only: each node's marker, at most `concurrency` nodes at once.
    let found = rt.block_on(async {
        let permits = Arc::new(tokio::sync::Semaphore::new(scan.ssh.concurrency.max(1)));
        let mut set = tokio::task::JoinSet::new();
        for (i, n) in selected.iter().cloned().enumerate() {
            let (scan, permits) = (scan.clone(), permits.clone());
            set.spawn(async move {
                let _p = permits.acquire_owned().await;
                (i, crate::actions::rollout::read_lock(&scan, &n).await)
            });
        }
        let mut found = Vec::new();
        while let Some(r) = set.join_next().await {
            found.extend(r.ok());
        }
        found.sort_by_key(|(i, _)| *i);
        found
    });
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    let mut failed = false;
    let mut json = Vec::new();
    for (i, r) in found {
        let name = &selected[i].name;
        match r {
            Ok(None) => {
                json.push(serde_json::json!({"node": name, "locked": false}));
                println!("{}  free", safe(name));
            }
            Ok(Some(o)) => {
                println!(
                    "{}  locked by rollout {} ({}, since {})",
                    safe(name),
                    safe(&o.rollout),
                    safe(o.operator.as_deref().unwrap_or("operator unknown")),
                    safe(o.since.as_deref().unwrap_or("unknown"))
                );
                json.push(serde_json::json!({"node": name, "locked": true, "rollout": o.rollout, "operator": o.operator, "since": o.since}));
            }
            Err(e) => {
                failed = true;
                println!("{}  unknown: {}", safe(name), safe(&e));
                json.push(serde_json::json!({"node": name, "error": e}));
            }
        }
    }
    if args.json {
        println!(
            "{}",
            crate::model::text::json_safe(serde_json::to_string_pretty(&json)?)
        );
    }
    Ok(if failed { 1 } else { 0 })
}

fn unlock_cmd(
    config: &Config,
    paths: &Paths,
    explicit_inventory: bool,
    args: &UnlockArgs,
) -> anyhow::Result<u8> {
    use crate::actions::{journal, permit::WritePermit, rollout};
    let scan_args = ScanArgs {
        node: vec![args.node.clone()],
        ..ScanArgs::default()
    };
    let inv = inventory_for(paths, explicit_inventory, &scan_args)?
        .ok_or_else(|| anyhow::anyhow!("unlock needs an inventory (-i FILE)"))?;
    let permit = WritePermit::new(crate::actions::permit::ReadOnlySources {
        flag: args.read_only,
        config: config.tui.read_only,
        inventory: inv.read_only,
    })?;
    let node = inv
        .nodes
        .iter()
        .find(|n| n.name == args.node)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("{} is not in {}", args.node, inv.path.display()))?;
    let state = state_dir(paths)?;
    // Not while a rollout of this state folder runs (it may hold that very lock).
    let _local = rollout::lock_local(&state)?;
    let settings = probe_settings(config, &scan_args)?;
    let (scan, _) = build_scan(
        config,
        paths,
        &scan_args,
        &inv,
        settings,
        config.thresholds(),
    )?;
    let rt = crate::rt::build()?;
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    let owner = rt
        .block_on(rollout::read_lock(&scan, &node))
        .map_err(anyhow::Error::msg)?;
    let Some(owner) = owner else {
        println!("{}: not locked; nothing to do", safe(&node.name));
        return Ok(0);
    };
    if owner.rollout != args.rollout {
        eprintln!(
            "gpufleet: {} is locked by rollout {}, not {}: nothing broken",
            safe(&node.name),
            safe(&owner.rollout),
            safe(&args.rollout)
        );
        return Ok(1);
    }
    let operator = owner.operator.clone().unwrap_or_default();
    // A holder on this machine whose process still runs is not broken.
    let me = journal::who();
    let host = |w: &str| {
        w.split_whitespace()
            .next()?
            .split_once('@')
            .map(|(_, h)| h.to_string())
    };
    if let (Some(h), Some(pid)) = (
        host(&operator),
        operator
            .split_whitespace()
            .last()
            .and_then(|p| p.parse::<u32>().ok()),
    ) && Some(h) == host(&me)
        && std::path::Path::new(&format!("/proc/{pid}")).exists()
    {
        anyhow::bail!(
            "not broken: rollout {} still runs here ({}); stop it first",
            args.rollout,
            safe(&operator)
        );
    }
    println!(
        "{} is locked by rollout {} ({}, since {}). Breaking the lock of a rollout that still runs lets two rollouts meet on the node.",
        safe(&node.name),
        safe(&owner.rollout),
        safe(if operator.is_empty() {
            "operator unknown"
        } else {
            &operator
        }),
        safe(owner.since.as_deref().unwrap_or("unknown"))
    );
    if !args.yes {
        use std::io::BufRead;
        if !std::io::stdin().is_terminal() {
            anyhow::bail!("not a terminal: pass --yes to confirm");
        }
        eprint!("Type the node's name to break its lock: ");
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if line.trim() != node.name {
            eprintln!("gpufleet: not confirmed; nothing changed");
            return Ok(2);
        }
    }
    let sudo = node
        .recipe
        .as_ref()
        .and_then(|r| config.recipes.get(r))
        .is_some_and(|r| r.sudo);
    let mut j = journal::Journal::open(&state)?;
    let entry = |phase, outcome: &str| journal::Entry {
        ts: now_rfc3339(),
        who: me.clone(),
        rollout: args.rollout.clone(),
        node: node.name.clone(),
        step: "break-lock".into(),
        seq: None,
        phase,
        command: crate::actions::node_side::unlock_command(&node.root, &args.rollout),
        outcome: outcome.to_string(),
    };
    j.append(&entry(
        journal::Phase::Start,
        &format!("held by {operator}"),
    ))?;
    match rt.block_on(rollout::break_lock(
        &permit,
        &scan,
        &node,
        &args.rollout,
        sudo,
    )) {
        Ok(said) => {
            j.append(&entry(journal::Phase::Done, &said))?;
            println!("{}: {said}", safe(&node.name));
            Ok(0)
        }
        Err(e) => {
            j.append(&entry(journal::Phase::Failed, &e))?;
            eprintln!("gpufleet: {}: {}", safe(&node.name), safe(&e));
            Ok(1)
        }
    }
}

fn journal_cmd(paths: &Paths, args: &JournalArgs) -> anyhow::Result<u8> {
    let path = state_dir(paths)?.join("journal.jsonl");
    let (entries, skipped_lines) = crate::actions::journal::read(&path)?;
    if skipped_lines > 0 {
        eprintln!(
            "gpufleet: warning: {}: {skipped_lines} line(s) that are not journal entries were skipped",
            path.display()
        );
    }
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    // With --node: the rollouts that touched that node.
    let node_rollouts: std::collections::HashSet<&str> = entries
        .iter()
        .filter(|e| args.node.as_ref().is_some_and(|n| *n == e.node))
        .map(|e| e.rollout.as_str())
        .collect();
    let mut shown = 0;
    for e in entries
        .iter()
        .filter(|e| args.rollout.as_ref().is_none_or(|r| *r == e.rollout))
        .filter(|e| {
            args.node.as_ref().is_none_or(|n| {
                *n == e.node || (e.node.is_empty() && node_rollouts.contains(e.rollout.as_str()))
            })
        })
    {
        shown += 1;
        if args.jsonl {
            println!(
                "{}",
                crate::model::text::json_safe(serde_json::to_string(e)?)
            );
            continue;
        }
        let phase = format!("{:?}", e.phase).to_lowercase();
        let node = if e.node.is_empty() { "-" } else { &e.node };
        // The rollout's start holds its whole plan (for --resume): show the nodes only.
        let outcome: String =
            match serde_json::from_str::<crate::actions::rollout::Plan>(&e.outcome) {
                Ok(p) if e.step == "rollout" => {
                    let nodes: Vec<&str> = p.nodes.iter().map(|n| n.node.as_str()).collect();
                    format!("plan: {}", nodes.join(", "))
                }
                _ => e.outcome.chars().take(160).collect(),
            };
        println!(
            "{}  {}  {}  {:<24} {:<20} {:<6} {}",
            e.ts,
            safe(&e.who),
            e.rollout,
            safe(node),
            safe(&e.step),
            phase,
            safe(&outcome)
        );
    }
    if shown == 0 {
        match (&args.rollout, &args.node) {
            (Some(r), _) => eprintln!("gpufleet: no rollout {r} in {}", path.display()),
            (None, Some(n)) => eprintln!("gpufleet: no entries for node {n} in {}", path.display()),
            (None, None) => eprintln!("gpufleet: no journal entries in {}", path.display()),
        }
    }
    Ok(0)
}
