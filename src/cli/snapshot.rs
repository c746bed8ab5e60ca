//! `gpufleet snapshot`: probe nodes once and print a report (table, JSON, JSON Lines, CSV).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::Args;

use super::{Interrupted, ScanArgs, Settings};
use crate::fleet::scan::{Event, ScanError, Source};
use crate::model::{Code, NodeStatus};
use crate::probe::scan::now_rfc3339;
use crate::snapshot::{self, Format};

pub(super) const SNAPSHOT_HELP: &str = "\
Which nodes:
  no inventory (and none at ~/.config/gpufleet/inventory.toml), or --local: this machine
  -i FILE: every node of the inventory, narrowed by --node, --group and --label
  (several values of one selector are a union; different selectors intersect)
  --from FILE...: no probe; snapshots collected elsewhere (a DaemonSet, srun), merged by node

Exit codes:
  0  the snapshot was produced, whatever the statuses
  2  no node answered (every selected node unreachable; the snapshot is still written), --from
     files with no node report, or usage, config or inventory errors
With --check:
  0  every node is ready
  1  some node is not ready (no-driver included, unless --allow-no-driver)
  2  some node is unreachable or unknown, or an error

Examples:
  gpufleet snapshot
  gpufleet snapshot -i fleet.toml --node 'gpu[001-016]' --format jsonl
  gpufleet snapshot -i fleet.toml --label rack=r2 --host-key-policy accept-new
  gpufleet snapshot --root /host --nvidia-smi-timeout 5
  gpufleet snapshot --local --root /host --name \"$NODE_NAME\" -f prometheus -o /textfile/gpufleet.prom
  srun -N \"$SLURM_NNODES\" --ntasks-per-node=1 gpufleet snapshot --local --format jsonl > fleet.jsonl
  gpufleet snapshot --from fleet.jsonl /collected/*.json --check

What a reason code means and what to do: gpufleet reasons CODE (docs/reasons.md).";

#[derive(Debug, Args, Default)]
pub struct SnapshotArgs {
    /// Output format [default: table on a terminal, json otherwise]
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<FormatArg>,

    /// Exit 0 only when every node is ready, 1 when any is not, 2 when any is unreachable or
    /// unknown
    #[arg(long)]
    pub check: bool,

    /// Table: one line per node (its columns and reason codes; no meanings, evidence or
    /// summary), for grep and wc -l; implies --format table
    #[arg(long)]
    pub brief: bool,

    /// With --check: count no-driver nodes as passing (a fleet with CPU nodes)
    #[arg(long, requires = "check")]
    pub allow_no_driver: bool,

    /// Show snapshots collected elsewhere instead of probing: `gpufleet snapshot --format json`
    /// or `--format jsonl` files (schema 1 or 2; a DaemonSet's files, an srun's JSON Lines),
    /// merged by node name, the newest scanned_at per node winning; 256 MiB at most each
    #[arg(
        long,
        value_name = "FILE",
        num_args = 1..,
        conflicts_with_all = FROM_CONFLICTS
    )]
    pub from: Vec<PathBuf>,

    /// With --from: how far after now a report's scanned_at may be before it is a merge finding
    /// and never preferred (clock skew), as seconds (600) or with units (10m) [default: 10m, or
    /// the config's [collected] clock_skew]
    #[arg(long, value_name = "DURATION", requires = "from", value_parser = crate::snapshot::collected::parse_clock_skew)]
    pub clock_skew: Option<std::time::Duration>,

    /// Write to FILE instead of stdout, atomically (temp file in the same folder, fsync,
    /// rename): for node_exporter's textfile collector or cron [default format: by the
    /// extension: .prom prometheus, .csv, .jsonl, .txt table, else json]
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,

    // Which nodes and how they are probed: after the output flags, so that `--help` starts
    // with what people look for first (the format).
    #[command(flatten)]
    pub scan: ScanArgs,
}

/// The scan flags that `--from` (no scan) conflicts with (their clap ids).
pub(super) const FROM_CONFLICTS: [&str; 11] = [
    "local",
    "root",
    "name",
    "node",
    "group",
    "label",
    "nvidia_smi_timeout",
    "deadline",
    "concurrency",
    "connect_timeout",
    "host_key_policy",
];

/// `--format`'s values (clap's side of [`Format`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// Aligned columns for people, with what each status means and its reasons.
    Table,
    /// One JSON document (schema_version 3).
    Json,
    /// JSON Lines: one {"type":"node"} object per node as it finishes, then {"type":"summary"}.
    Jsonl,
    /// One row per node (name, status, kernel, flavor, driver, gpus, ...).
    Csv,
    /// Prometheus text exposition for node_exporter's textfile collector (gauges per node).
    Prometheus,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Table => Format::Table,
            FormatArg::Json => Format::Json,
            FormatArg::Jsonl => Format::Jsonl,
            FormatArg::Csv => Format::Csv,
            FormatArg::Prometheus => Format::Prometheus,
        }
    }
}

/// The format a `--output` file's extension names: `.prom` Prometheus, `.csv`, `.jsonl`,
/// `.txt` a table; anything else JSON.
fn format_of_file(file: &std::path::Path) -> Format {
    match file.extension().and_then(|e| e.to_str()) {
        Some("prom") => Format::Prometheus,
        Some("csv") => Format::Csv,
        Some("jsonl") | Some("ndjson") => Format::Jsonl,
        Some("txt") => Format::Table,
        _ => Format::Json,
    }
}

/// Runs `gpufleet snapshot`; returns the exit code (see [`SNAPSHOT_HELP`]).
pub fn run(s: &Settings, args: &SnapshotArgs) -> anyhow::Result<u8> {
    let settings = s.probe(&args.scan)?;
    let stdout = std::io::stdout();
    let format = match (args.format, &args.output) {
        (Some(f), _) => Format::from(f),
        (None, _) if args.brief => Format::Table,
        (None, Some(file)) => format_of_file(file),
        (None, None) if stdout.is_terminal() => Format::Table,
        (None, None) => Format::Json,
    };
    if args.brief && format != Format::Table {
        anyhow::bail!(
            "--brief is for the table format (one line per node), not --format {}",
            format!("{format:?}").to_lowercase()
        );
    }
    // The selected nodes are copies: the inventory is not needed while they are scanned.
    let (source, _) = s.source(&args.scan, &args.from, args.clock_skew, settings)?;
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
    let mut sink = if args.brief {
        snapshot::brief_table_sink(out)
    } else {
        snapshot::sink(format, out)
    };
    let (statuses, codes) = scan_into(&source, &mut *sink)?;
    drop(sink);
    if let Some(f) = file {
        f.commit()?;
    }
    if args.brief {
        brief_hints(&codes);
    }
    let check = args.check.then_some(snapshot::Check {
        allow_no_driver: args.allow_no_driver,
    });
    Ok(snapshot::exit_code(&statuses, check))
}

/// Scans `source` ([`Source::run`]), giving each report to `sink` as it arrives, placed at its
/// node's position (progress on stderr when it is a terminal and the nodes are probed over
/// SSH), then the end; returns the nodes' statuses in that order. No report is kept here: the
/// sink keeps what it needs.
///
/// Errors: [`Interrupted`] on Ctrl-C/SIGTERM; the local probe cannot start; the sink's write
/// errors.
fn scan_into(
    source: &Source,
    sink: &mut dyn snapshot::Sink,
) -> anyhow::Result<(Vec<NodeStatus>, Seen)> {
    let total = source.len();
    let fleet = match source {
        Source::Fleet(f) => Some(f),
        _ => None,
    };
    // The fleet's many nodes on the workers; one node or files on this thread.
    let rt = match fleet {
        Some(_) => crate::rt::build()?,
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
    };
    let progress = fleet.is_some() && std::io::stderr().is_terminal();
    let clear = || {
        if progress {
            eprint!("\r\x1b[2K");
        }
    };
    let statuses = rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(256);
        let on = move |ev: Event| {
            let tx = tx.clone();
            async move {
                match ev {
                    Event::Done { pos, report, .. } => {
                        let _ = tx.send((pos, report)).await;
                    }
                    Event::Warning(w) => eprintln!("gpufleet: warning: {w}"),
                    Event::Running { .. } => {}
                }
            }
        };
        let scan = source.run(None, on, crate::rt::stop_requested());
        let mut scan = std::pin::pin!(scan);
        let mut statuses = vec![NodeStatus::Unknown; total];
        let mut seen = Seen::new();
        let (mut done, mut failed, mut scanning) = (0usize, 0usize, true);
        loop {
            tokio::select! {
                ended = &mut scan, if scanning => {
                    scanning = false;
                    match ended {
                        Ok(()) => {}
                        Err(ScanError::Interrupted) => {
                            clear();
                            return Err(anyhow::Error::new(Interrupted));
                        }
                        Err(e) => return Err(anyhow::anyhow!("{}", crate::model::text::terminal_safe(&e.to_string()))),
                    }
                }
                got = rx.recv() => {
                    let Some((pos, r)) = got else { break };
                    if let Some(s) = statuses.get_mut(pos) {
                        *s = r.status;
                    }
                    done += 1;
                    failed += usize::from(r.status == NodeStatus::Unreachable);
                    count_codes(&mut seen, r.reasons.iter().map(|x| x.code));
                    sink.node(pos, *r)?;
                    if progress {
                        eprint!("\r\x1b[2Kscanning {done}/{total} nodes, {failed} unreachable");
                    }
                }
            }
        }
        clear();
        Ok::<_, anyhow::Error>((statuses, seen))
    })?;
    if let Some(f) = fleet {
        for m in f
            .scan
            .keys
            .learned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            eprintln!("gpufleet: {m}");
        }
        let adapted = f.scan.adapted.lock();
        if let Some(line) = adapted.as_deref().ok().and_then(Option::as_ref) {
            eprintln!("gpufleet: {line}");
        }
    }
    let mut end = snapshot::End::new(now_rfc3339(), &statuses.0);
    if let Source::Files(f) = source {
        end.merge_warnings = Some(f.findings.clone());
    }
    sink.finish(&end)?;
    Ok(statuses)
}

/// The reason codes a scan showed, in the order first seen, with how many nodes had each.
type Seen = Vec<(Code, usize)>;

/// Counts each of one node's reason codes once.
fn count_codes(seen: &mut Seen, codes: impl Iterator<Item = Code>) {
    let mut this: Vec<Code> = Vec::new();
    for code in codes {
        if this.contains(&code) {
            continue;
        }
        this.push(code);
        match seen.iter_mut().find(|(c, _)| *c == code) {
            Some((_, n)) => *n += 1,
            None => seen.push((code, 1)),
        }
    }
}

/// `--brief` keeps stdout one line per node; what to do for each code it showed (errors and
/// warnings; [`crate::advice`]) goes to stderr, one line a code.
fn brief_hints(seen: &Seen) {
    let mut err = std::io::stderr().lock();
    for (code, n) in seen {
        if code.severity() == crate::model::Severity::Info {
            continue;
        }
        let _ = writeln!(
            err,
            "hint: {} ({n} node{}): {}",
            code.as_str(),
            if *n == 1 { "" } else { "s" },
            crate::advice::reason(*code).action
        );
    }
    if seen
        .iter()
        .any(|(c, _)| c.severity() != crate::model::Severity::Info)
    {
        let _ = writeln!(err, "hint: `gpufleet reasons CODE` says what a code means");
    }
}
