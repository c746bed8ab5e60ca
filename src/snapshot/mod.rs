//! Headless output: the snapshot as a table, JSON, JSON Lines or CSV, and its exit code
//! (design/domain.md "Snapshot JSON").

use std::io::{self, Write};

use anstyle::{AnsiColor, Style};
use clap::ValueEnum;

use crate::model::report::{NodeReport, Snapshot, summary};
use crate::model::text::{json_safe, terminal_safe};
use crate::model::{NodeStatus, Severity};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people, with what each status means and its reasons.
    Table,
    /// One JSON document (schema_version 1).
    Json,
    /// JSON Lines: one {"type":"node"} object per node as it finishes, then {"type":"summary"}.
    Jsonl,
    /// One row per node (name, status, kernel, flavor, driver, gpus, ...).
    Csv,
}

/// Writes nodes as they finish, and the end of the document once all are done.
pub trait Sink {
    fn node(&mut self, node: &NodeReport) -> io::Result<()>;
    fn finish(&mut self, snapshot: &Snapshot) -> io::Result<()>;
}

/// The writer for `format` on `out`.
pub fn sink<'a>(format: Format, out: Box<dyn Write + 'a>) -> Box<dyn Sink + 'a> {
    match format {
        Format::Table => Box::new(TableSink { out }),
        Format::Json => Box::new(JsonSink { out }),
        Format::Jsonl => Box::new(JsonlSink { out }),
        Format::Csv => Box::new(CsvSink {
            out: csv::Writer::from_writer(out),
            header: false,
        }),
    }
}

struct JsonSink<'a> {
    out: Box<dyn Write + 'a>,
}

impl Sink for JsonSink<'_> {
    fn node(&mut self, _: &NodeReport) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        let json = serde_json::to_string_pretty(snapshot)?;
        writeln!(self.out, "{}", json_safe(json))?;
        self.out.flush()
    }
}

struct JsonlSink<'a> {
    out: Box<dyn Write + 'a>,
}

impl Sink for JsonlSink<'_> {
    fn node(&mut self, node: &NodeReport) -> io::Result<()> {
        let json = serde_json::to_string(&serde_json::json!({"type": "node", "data": node}))?;
        writeln!(self.out, "{}", json_safe(json))?;
        self.out.flush()
    }
    fn finish(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        let line = serde_json::json!({"type": "summary", "data": snapshot.summary});
        serde_json::to_writer(&mut self.out, &line)?;
        writeln!(self.out)?;
        self.out.flush()
    }
}

/// CSV columns, in order (domain.md).
pub const CSV_COLUMNS: [&str; 13] = [
    "name",
    "status",
    "kernel",
    "flavor",
    "driver",
    "gpus",
    "min_compute_capability",
    "dma_buf",
    "peermem_loaded",
    "peermem_configured",
    "reasons",
    "next_boot_driver",
    "rdma_devices",
];

fn opt_bool(b: Option<bool>) -> String {
    b.map_or(String::new(), |b| b.to_string())
}

/// One CSV row for `n`; unknown values are empty.
pub fn csv_row(n: &NodeReport) -> [String; 13] {
    let driver = n.driver.as_ref();
    [
        n.name.clone(),
        n.status.to_string(),
        n.kernel
            .as_ref()
            .and_then(|k| k.release.clone())
            .unwrap_or_default(),
        driver
            .map(|d| d.flavor.as_str().to_string())
            .unwrap_or_default(),
        driver.and_then(|d| d.version.clone()).unwrap_or_default(),
        n.gpu_summary().unwrap_or_default(),
        n.min_compute_capability().unwrap_or_default(),
        opt_bool(n.dma_buf.as_ref().and_then(|d| d.kernel_support)),
        opt_bool(n.peermem.as_ref().and_then(|p| p.loaded)),
        opt_bool(n.peermem.as_ref().and_then(|p| p.configured)),
        n.reasons
            .iter()
            .map(|r| r.code.as_str())
            .collect::<Vec<_>>()
            .join(";"),
        n.next_boot_driver().unwrap_or_default().to_string(),
        n.rdma
            .as_ref()
            .and_then(|r| r.devices.as_ref())
            .map_or(String::new(), |d| d.len().to_string()),
    ]
    .map(|s| terminal_safe(&s).into_owned())
}

struct CsvSink<'a> {
    out: csv::Writer<Box<dyn Write + 'a>>,
    header: bool,
}

impl Sink for CsvSink<'_> {
    fn node(&mut self, node: &NodeReport) -> io::Result<()> {
        if !self.header {
            self.out.write_record(CSV_COLUMNS)?;
            self.header = true;
        }
        self.out.write_record(csv_row(node))?;
        self.out.flush()
    }
    fn finish(&mut self, _: &Snapshot) -> io::Result<()> {
        if !self.header {
            self.out.write_record(CSV_COLUMNS)?;
        }
        self.out.flush()
    }
}

struct TableSink<'a> {
    out: Box<dyn Write + 'a>,
}

/// The colour of a status, through the terminal's own palette.
pub fn status_style(s: NodeStatus) -> Style {
    let c = match s {
        NodeStatus::Ready => AnsiColor::Green,
        NodeStatus::Migrate => AnsiColor::Yellow,
        NodeStatus::Blocked => AnsiColor::Magenta,
        NodeStatus::Attention | NodeStatus::Unreachable => AnsiColor::Red,
        NodeStatus::NoDriver => AnsiColor::Blue,
        NodeStatus::Unknown => AnsiColor::BrightWhite,
    };
    Style::new().fg_color(Some(c.into())).bold()
}

fn severity_style(s: Severity) -> Style {
    match s {
        Severity::Error => Style::new().fg_color(Some(AnsiColor::Red.into())),
        Severity::Warn => Style::new().fg_color(Some(AnsiColor::Yellow.into())),
        Severity::Info => Style::new().dimmed(),
    }
}

fn yes_no(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "?",
    }
}

fn peermem_cell(n: &NodeReport) -> String {
    let Some(p) = &n.peermem else {
        return "-".into();
    };
    match (p.loaded, p.configured) {
        (Some(true), Some(true)) => "loaded+boot".into(),
        (Some(true), _) => "loaded".into(),
        (_, Some(true)) => "at boot".into(),
        (Some(false), Some(false)) => "no".into(),
        _ => "?".into(),
    }
}

/// The table cells of one node (already terminal-safe).
pub fn table_cells(n: &NodeReport) -> [String; 9] {
    let unreachable = n.status == NodeStatus::Unreachable;
    let dash =
        |s: Option<String>| s.unwrap_or_else(|| if unreachable { "-".into() } else { "?".into() });
    let driver = n.driver.as_ref();
    [
        n.name.clone(),
        n.status.to_string(),
        dash(n.kernel.as_ref().and_then(|k| k.release.clone())),
        dash(driver.map(|d| d.flavor.as_str().to_string())),
        driver.map_or_else(
            || dash(None),
            |d| d.version.clone().unwrap_or_else(|| "-".into()),
        ),
        dash(
            n.gpu_summary()
                .map(|s| if s.is_empty() { "none".into() } else { s }),
        ),
        n.min_compute_capability().unwrap_or_else(|| "-".into()),
        if unreachable {
            "-".into()
        } else {
            yes_no(n.dma_buf.as_ref().and_then(|d| d.kernel_support)).into()
        },
        peermem_cell(n),
    ]
    .map(|s| clip(&terminal_safe(&s), 64))
}

/// `s` cut to `max` characters, the last one an ellipsis when cut.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

const HEADERS: [&str; 9] = [
    "NODE", "STATUS", "KERNEL", "MODULE", "DRIVER", "GPUS", "MIN CC", "DMA-BUF", "PEERMEM",
];

impl Sink for TableSink<'_> {
    fn node(&mut self, _: &NodeReport) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        let rows: Vec<[String; 9]> = snapshot.nodes.iter().map(table_cells).collect();
        let mut widths = HEADERS.map(|h| h.chars().count());
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let pad =
            |s: &str, w: usize| format!("{s}{}", " ".repeat(w.saturating_sub(s.chars().count())));
        let header: Vec<String> = HEADERS.iter().zip(widths).map(|(h, w)| pad(h, w)).collect();
        let bold = Style::new().bold();
        writeln!(self.out, "{bold}{}{bold:#}", header.join("  ").trim_end())?;
        for (n, cells) in snapshot.nodes.iter().zip(&rows) {
            let st = status_style(n.status);
            let mut line = String::new();
            for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                if i == 1 {
                    line.push_str(&format!("{st}{}{st:#}", pad(c, w)));
                } else {
                    line.push_str(&pad(c, w));
                }
            }
            writeln!(self.out, "{}", line.trim_end())?;
            writeln!(self.out, "  {st}{}{st:#}: {}", n.status, n.status.meaning())?;
            for r in &n.reasons {
                let sv = severity_style(r.severity);
                writeln!(
                    self.out,
                    "    {sv}{:<5}{sv:#} {:<28} {}",
                    r.severity.as_str(),
                    r.code.as_str(),
                    terminal_safe(&r.message)
                )?;
                for e in r.evidence.iter().take(3) {
                    let dim = Style::new().dimmed();
                    writeln!(
                        self.out,
                        "          {dim}{}: {}{dim:#}",
                        terminal_safe(&e.source),
                        terminal_safe(e.line.trim_end())
                    )?;
                }
            }
        }
        let total = snapshot.nodes.len();
        let counts: Vec<String> = summary(&snapshot.nodes)
            .iter()
            .filter(|(_, c)| **c > 0)
            .map(|(s, c)| format!("{c} {s}"))
            .collect();
        writeln!(
            self.out,
            "\n{total} node{}: {}",
            if total == 1 { "" } else { "s" },
            if counts.is_empty() {
                "none".to_string()
            } else {
                counts.join(", ")
            }
        )?;
        self.out.flush()
    }
}

/// What `--check` lets pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct Check {
    /// `--allow-no-driver`: `no-driver` nodes pass too (a fleet with CPU nodes).
    pub allow_no_driver: bool,
}

/// Exit code of `gpufleet snapshot`: 0 once the snapshot is produced; with `check` (for CI
/// gates), 0 when every node is `ready` (or `no-driver` with `allow_no_driver`), 1 when any is
/// not, 2 when any is `unreachable` or `unknown` (docs/domain.md, "Snapshot JSON": exit codes).
pub fn exit_code(nodes: &[NodeReport], check: Option<Check>) -> u8 {
    let Some(check) = check else {
        return 0;
    };
    let passes = |s: NodeStatus| {
        s == NodeStatus::Ready || check.allow_no_driver && s == NodeStatus::NoDriver
    };
    if nodes
        .iter()
        .any(|n| matches!(n.status, NodeStatus::Unreachable | NodeStatus::Unknown))
    {
        2
    } else if nodes.iter().all(|n| passes(n.status)) {
        0
    } else {
        1
    }
}
