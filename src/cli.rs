//! Command line: arguments → plan → run → exit code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::Config;
use crate::model::report::Snapshot;
use crate::probe;
use crate::snapshot::{self, Format};

const ABOUT: &str = "Inspect GPU nodes for the move to NVIDIA open kernel modules + DMA-BUF";

const LONG_ABOUT: &str = "\
Inspect GPU nodes for the move from the proprietary NVIDIA module + nvidia-peermem to the open \
kernel modules + DMA-BUF GPUDirect RDMA.

gpufleet runs one read-only probe per node (files under /proc, /sys, /etc and /boot, then \
nvidia-smi under a time limit) and reports, per node: kernel, module flavour, driver, GPUs and \
their compute capability, DMA-BUF kernel support, nvidia-peermem state, and a status with \
reasons and evidence.

Statuses, worst first:
  unreachable  the scan could not run
  attention    something is broken now (nvidia-smi fails or hangs, GPUs not initialized, ...)
  blocked      the move is impossible until something else changes (pre-Turing GPU, kernel < 5.12, ...)
  migrate      on (part of) the legacy stack and nothing blocks the move
  no-driver    no NVIDIA module loaded and no NVIDIA GPU seen
  ready        open module loaded, no nvidia-peermem, DMA-BUF support not ruled out";

const AFTER_HELP: &str = "\
Examples:
  gpufleet snapshot                      this machine, as a table (JSON when piped)
  gpufleet snapshot --format json        the JSON document (schema_version 1)
  gpufleet snapshot --check              exit 0 only if this node is ready (CI gate)
  gpufleet snapshot --root /host         a host filesystem mounted at /host";

#[derive(Debug, Parser)]
#[command(name = "gpufleet", version, about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// Config file [default: ~/.config/gpufleet/config.toml]
    #[arg(long, global = true, env = "GPUFLEET_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Probe nodes once and print a report: table, JSON, JSON Lines or CSV
    #[command(after_help = SNAPSHOT_HELP)]
    Snapshot(SnapshotArgs),
}

const SNAPSHOT_HELP: &str = "\
Exit codes:
  0  the snapshot was produced, whatever the statuses
  2  usage or config errors
With --check:
  0  every node is ready
  1  some node is not ready (no-driver included)
  2  some node is unreachable, or an error

Examples:
  gpufleet snapshot
  gpufleet snapshot --format csv > fleet.csv
  gpufleet snapshot --root /host --nvidia-smi-timeout 5";

#[derive(Debug, Args, Default)]
pub struct SnapshotArgs {
    /// Probe this machine (the default while there is no inventory)
    #[arg(long)]
    pub local: bool,

    /// Read every probed path under DIR (a host filesystem mounted elsewhere)
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    /// Output format [default: table on a terminal, json otherwise]
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<Format>,

    /// Exit 0 only when every node is ready, 1 when any is not, 2 when any is unreachable
    #[arg(long)]
    pub check: bool,

    /// Time limit of each nvidia-smi call, in seconds [default: 10, or the config's]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub nvidia_smi_timeout: Option<u64>,

    /// Deadline for the whole probe of one node, in seconds [default: 60, or the config's]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub deadline: Option<u64>,
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| jiff::Timestamp::now().to_string())
}

/// Runs the parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    let config = match Config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gpufleet: config error: {e}");
            return ExitCode::from(2);
        }
    };
    let args = match cli.command {
        Some(Command::Snapshot(a)) => a,
        None => SnapshotArgs {
            root: PathBuf::from("/"),
            ..SnapshotArgs::default()
        },
    };
    match snapshot_cmd(&config, &args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("gpufleet: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn snapshot_cmd(config: &Config, args: &SnapshotArgs) -> anyhow::Result<u8> {
    let mut settings = config.probe_settings();
    settings.root = args.root.clone();
    if let Some(s) = args.nvidia_smi_timeout {
        settings.nvidia_smi_timeout_secs = s;
    }
    if let Some(s) = args.deadline {
        settings.deadline = Duration::from_secs(s);
    }
    if !settings.root.is_dir() {
        anyhow::bail!("--root {}: not a folder", settings.root.display());
    }
    let thresholds = config.thresholds();
    let stdout = std::io::stdout();
    let format = args.format.unwrap_or(if stdout.is_terminal() {
        Format::Table
    } else {
        Format::Json
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let scanned_at = now_rfc3339();
    let run = rt
        .block_on(probe::run_local(&settings))
        .map_err(|e| anyhow::anyhow!("cannot start sh for the local probe: {e}"))?;
    let node = probe::report(None, &run, &thresholds, scanned_at);
    let out: Box<dyn Write> = if format == Format::Table {
        Box::new(anstream::stdout())
    } else {
        Box::new(stdout.lock())
    };
    let mut sink = snapshot::sink(format, out);
    sink.node(&node)?;
    let doc = Snapshot::new(now_rfc3339(), vec![node]);
    sink.finish(&doc)?;
    Ok(snapshot::exit_code(&doc.nodes, args.check))
}
