//! `gpufleet diff OLD NEW` (the comparison is `crate::diff`).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::model::text::{json_string, terminal_safe};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// One line per changed, added or removed node, then the counts
    Text,
    /// {"changed": [{node, changes: [{field, old, new}], reasons_added, reasons_removed}], "added", "removed", "unchanged"}
    Json,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier snapshot (`snapshot --format json` or `jsonl`; schema 1 or 2; 256 MiB at
    /// most, as NEW)
    #[arg(value_name = "OLD")]
    pub old: PathBuf,
    /// The later snapshot
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value = "text")]
    pub format: DiffFormat,
}

pub const DIFF_HELP: &str = "\
Compares per node: status, kernel, flavor, driver, gpus, peermem_loaded, peermem_configured,
peermem_registered, next_boot_kernel, next_boot_driver, and the reason codes added (+) and
removed (-); and lists the nodes added and removed. A node unreachable in either snapshot is
compared by status and reasons only (its facts are unknown, not changed).

Exit codes: 0 nothing changed, 1 something changed (for cron alerts), 2 an unreadable input or
usage error.

Examples:
  gpufleet snapshot -i fleet.toml -o /var/lib/gpufleet/today.json
  gpufleet diff yesterday.json today.json
  gpufleet diff yesterday.json today.json --format json";

pub(super) fn run(args: &DiffArgs) -> anyhow::Result<u8> {
    let read =
        |p: &PathBuf| crate::diff::read(p).map_err(|e| anyhow::anyhow!("{}", terminal_safe(&e)));
    let (old, new) = (read(&args.old)?, read(&args.new)?);
    let d = crate::diff::compare(&old, &new);
    match args.format {
        DiffFormat::Json => crate::outln!("{}", json_string(&d, true)?),
        DiffFormat::Text => super::out::text(&crate::diff::render_text(&d, &|s| {
            terminal_safe(s).into_owned()
        })),
    }
    Ok(if d.is_empty() { 0 } else { 1 })
}
