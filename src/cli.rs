//! Command line: arguments (clap) → one resolved [`Settings`] → one file per subcommand → exit
//! code.
//!
//! - `settings`: flags + environment + config file + defaults, each value with its origin;
//!   the read-only decision; the inventory, probe and SSH settings of a scan.
//! - `snapshot`, `tui`, `upgrade`, `rollouts` (rollouts, journal, locks, unlock),
//!   `config_cmd` (`config show`, `paths`), `sim` (`sim`, `demo`), `inventory_list`
//!   (`inventory list`), `diff`, `completions` (`completions`, `man`), `policy` (`policy check`, `policy generate`),
//!   `keys`, `reasons`: the subcommands.
//! - `select`: the node selector flags (`-n`, `-g`, `-l`), flattened into each command that
//!   selects nodes.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod completions;
mod config_cmd;
mod diff;
mod inventory_list;
mod keys;
mod nccl;
pub mod out;
mod policy;
mod reasons;
mod rollouts;
mod select;
mod settings;
#[cfg(feature = "sim")]
mod sim;
mod snapshot;
mod tui;
mod upgrade;

pub use select::SelectArgs;
pub use settings::{Given, Origin, ScanArgs, Settings};
pub use snapshot::SnapshotArgs;
pub use tui::{TuiArgs, TuiSession};

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
  gpufleet demo                              a simulated fleet of 200 nodes over SSH, in the TUI
  gpufleet sim --nodes 16 --write-inventory /tmp/sim/fleet.toml   serve one, to scan it
  gpufleet snapshot                          this machine, as a table (JSON when piped)
  gpufleet snapshot -i fleet.toml            every node of an inventory, over SSH
  gpufleet snapshot -i fleet.toml -g a100 --format csv > a100.csv
  gpufleet snapshot -i fleet.toml --check    exit 0 only if every node is ready (CI gate)
  gpufleet paths                             where gpufleet reads and writes its files";

#[derive(Debug, Parser)]
#[command(next_help_heading = "Global options")]
#[command(name = "gpufleet", version = crate::VERSION, about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// Config file [default: ~/.config/gpufleet/config.toml]
    #[arg(long, global = true, env = "GPUFLEET_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Inventory: FILE (gpufleet TOML, Ansible INI/YAML, host list), - (hosts on stdin),
    /// slurm:[PARTITION|NODES], k8s:[SELECTOR]; a file or stdin may be 64 MiB at most
    /// [default: ~/.config/gpufleet/inventory.toml if it exists]
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

    /// Worker threads of the runtime: scans, the TUI's scans, the simulator [default: the CPUs
    /// this process may use, at most 8, or the config's [ssh] workers]
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=crate::config::MAX_WORKERS))]
    pub workers: Option<u64>,

    /// Without a subcommand: `tui`'s flags (`gpufleet [tui] … [--read-only]`)
    #[command(flatten)]
    pub tui: TuiArgs,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Probe nodes once and print a report: table, JSON, JSON Lines, CSV or Prometheus text
    #[command(after_help = snapshot::SNAPSHOT_HELP)]
    Snapshot(snapshot::SnapshotArgs),
    /// Interactive fleet matrix: scan results stream in; sort, filter, drill into evidence
    #[command(after_help = tui::TUI_HELP)]
    Tui(tui::TuiArgs),
    /// Upgrade nodes to the open modules: canaries first, then waves (drain, recipe, reboot,
    /// re-probe, gates, uncordon), journaled and resumable
    #[command(
        after_help = upgrade::UPGRADE_HELP,
        mut_arg("local", |a| a.hide(true)),
        mut_arg("root", |a| a.hide(true))
    )]
    Upgrade(upgrade::UpgradeArgs),
    /// Show the rollout journal (who, when, node, step, command, outcome)
    Journal(rollouts::JournalArgs),
    /// List the rollouts of the journal: id, mode, state, nodes, who, when
    Rollouts(rollouts::RolloutsArgs),
    /// Show each node's lock: which rollout holds it, its operator (user@host, pid), since when
    Locks(rollouts::LocksArgs),
    /// Break a node's lock held by a given rollout (one abandoned, or whose process died
    /// elsewhere), after confirmation; journaled
    Unlock(rollouts::UnlockArgs),
    /// Print where gpufleet reads and writes its files
    Paths,
    /// Show the resolved settings and where each came from (flag, environment, config file,
    /// inventory or default), like `ssh -G`
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
    /// Serve a simulated fleet over SSH on 127.0.0.1 (fixture nodes; read-only) and write an
    /// inventory for it: try gpufleet without a fleet
    #[cfg(feature = "sim")]
    #[command(after_help = sim::SIM_HELP)]
    Sim(sim::SimArgs),
    /// Try gpufleet without a fleet: a simulated fleet of 200 nodes over SSH on 127.0.0.1, in
    /// the TUI (a table when stdout is not a terminal); read-only
    #[cfg(feature = "sim")]
    #[command(after_help = sim::DEMO_HELP)]
    Demo(sim::DemoArgs),
    /// Check (and generate) the Kubernetes side: GPU Operator ClusterPolicy / NVIDIADriver,
    /// OpenShift MachineConfigs, module-parameter ConfigMaps; against a fleet snapshot too
    Policy(policy::PolicyArgs),
    /// The inventory's nodes as gpufleet resolves them (TOML, Ansible, Slurm, Kubernetes, host list)
    #[command(subcommand, after_help = inventory_list::INVENTORY_HELP)]
    Inventory(inventory_list::InventoryCommand),
    /// What changed between two snapshots, per node; exit 1 when anything did
    #[command(after_help = diff::DIFF_HELP)]
    Diff(diff::DiffArgs),
    /// Whether a job's GPUDirect RDMA ran over DMA-BUF, nvidia-peermem or not at all, per host
    /// and HCA, from its NCCL_DEBUG=INFO log; exit 0 only when every host used DMA-BUF
    #[command(after_help = nccl::NCCL_HELP)]
    Nccl(nccl::NcclArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell)
    #[command(after_help = completions::COMPLETIONS_HELP)]
    Completions(completions::CompletionsArgs),
    /// Print the man page (roff)
    #[command(after_help = completions::MAN_HELP)]
    Man(completions::ManArgs),
    /// List the TUI's actions (their [keys] names), the keys bound to each after the config
    /// file's overrides, and what they do
    #[command(after_help = keys::KEYS_HELP)]
    Keys(keys::KeysArgs),
    /// What each reason code means and what to do about it (docs/reasons.md is generated
    /// from it)
    #[command(after_help = reasons::REASONS_HELP)]
    Reasons(reasons::ReasonsArgs),
}

/// Parses the process's arguments and runs them; returns the exit code.
pub fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    if let Some(e) = tui::misplaced_flags(&matches) {
        e.exit();
    }
    let given = Given::from_matches(&matches);
    match Cli::from_arg_matches(&matches) {
        Ok(cli) => run(cli, given),
        Err(e) => e.exit(),
    }
}

/// Runs the parsed command line; `given` says which arguments the command line or the
/// environment gave (for origins). Returns the process exit code.
pub fn run(cli: Cli, given: Given) -> ExitCode {
    let settings = match Settings::resolve(&cli, given) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gpufleet: config error: {e}");
            return ExitCode::from(2);
        }
    };
    let s = &settings;
    crate::rt::set_workers(s.workers());
    let interactive = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    // A gate: its exit status is a verdict, which a reader that left early has not seen.
    let gate = match &cli.command {
        Some(Command::Snapshot(a)) => a.check,
        Some(Command::Policy(p)) => matches!(p.command, policy::PolicyCommand::Check(_)),
        _ => false,
    };
    let result = match cli.command {
        Some(Command::Paths) => config_cmd::paths(s),
        Some(Command::Config(c)) => config_cmd::run(s, &c),
        Some(Command::Snapshot(a)) => snapshot::run(s, &a),
        Some(Command::Tui(a)) => tui::run(s, &a),
        Some(Command::Upgrade(a)) => upgrade::run(s, &a),
        Some(Command::Journal(a)) => rollouts::journal(s, &a),
        Some(Command::Rollouts(a)) => rollouts::rollouts(s, &a),
        Some(Command::Locks(a)) => rollouts::locks(s, &a),
        Some(Command::Unlock(a)) => rollouts::unlock(s, &a),
        #[cfg(feature = "sim")]
        Some(Command::Sim(a)) => sim::sim_cmd(&a),
        #[cfg(feature = "sim")]
        Some(Command::Demo(a)) => sim::demo_cmd(s, &a),
        Some(Command::Policy(a)) => policy::run(&a),
        Some(Command::Inventory(c)) => inventory_list::run(s, &c),
        Some(Command::Diff(a)) => diff::run(&a),
        Some(Command::Nccl(a)) => nccl::run(&a),
        Some(Command::Completions(a)) => completions::completions(&a),
        Some(Command::Man(a)) => completions::man(&a),
        Some(Command::Keys(a)) => keys::run(s, &a),
        Some(Command::Reasons(a)) => reasons::run(&a),
        None if interactive => tui::run(s, &cli.tui),
        None => tui::not_a_terminal(s, &cli.tui),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) if e.is::<Interrupted>() => {
            eprintln!("gpufleet: interrupted");
            ExitCode::from(130)
        }
        // The reader went away (`| head`): stop quietly (no message). The commands' own
        // lines go through `cli::out`, which never fails; a document written through a writer
        // (snapshot, policy, completions, man, keys) ends here: 0, as for any command whose
        // output was cut short by its reader — but a gate (`snapshot --check`, `policy
        // check`) exits as a C tool killed by SIGPIPE, 128 + 13: a verdict its reader left
        // before has not passed (`set -o pipefail` sees it).
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::from(if gate { 141 } else { 0 })
        }
        Err(e) => {
            // Not `eprintln!`: it panics when stderr is gone (a closed terminal).
            let _ = writeln!(std::io::stderr(), "gpufleet: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Ctrl-C or SIGTERM during a snapshot: the scan stops, the probe processes are killed, and
/// gpufleet exits 130.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;
