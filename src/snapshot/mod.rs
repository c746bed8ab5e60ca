//! Headless output: the snapshot as a table, JSON, JSON Lines or CSV, and its exit code
//! (docs/domain.md "Snapshot JSON").

use std::borrow::Cow;
use std::io::{self, Write};

use anstyle::{Ansi256Color, AnsiColor, Color, Style};
use clap::ValueEnum;

use crate::model::report::{NodeReport, Snapshot, summary};
use crate::model::text::{json_safe, terminal_safe};
use crate::model::{NodeStatus, Severity};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people, with what each status means and its reasons.
    Table,
    /// One JSON document (schema_version 2).
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

/// CSV columns, in order (docs/domain.md, "Snapshot JSON").
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

/// A CSV cell that a spreadsheet would run as a formula neutralized: a cell starting with `=`,
/// `+`, `-`, `@`, tab or carriage return gets a leading `'` (OWASP, "CSV Injection"). Applied to
/// the raw value, before [`terminal_safe`], so `\tx` becomes `'\tx` and then `'\\tx`. gpufleet
/// reads no CSV of its own back, so nothing has to undo it.
pub fn csv_cell(s: &str) -> String {
    let cell = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    terminal_safe(&cell).into_owned()
}

/// One CSV row for `n`; unknown values are empty; every cell through [`csv_cell`].
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
    .map(|s| csv_cell(&s))
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

/// The colour of a status, through the terminal's own palette. `unknown` (no verdict) is
/// orange (index 208 of the 256-colour palette) and underlined, so it reads as neither `ready`
/// nor `attention`, also without colour.
pub fn status_style(s: NodeStatus) -> Style {
    let c: Color = match s {
        NodeStatus::Ready => AnsiColor::Green.into(),
        NodeStatus::Migrate => AnsiColor::Yellow.into(),
        NodeStatus::Blocked => AnsiColor::Magenta.into(),
        NodeStatus::Attention | NodeStatus::Unreachable => AnsiColor::Red.into(),
        NodeStatus::NoDriver => AnsiColor::Blue.into(),
        NodeStatus::Unknown => Ansi256Color(208).into(),
    };
    let st = Style::new().fg_color(Some(c)).bold();
    if s == NodeStatus::Unknown {
        st.underline()
    } else {
        st
    }
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

/// The table cells of one node, each through `safe` ([`terminal_safe`] for the table,
/// [`crate::model::text::screen_safe`] for the TUI) and cut to 64 characters.
pub fn table_cells(n: &NodeReport, safe: fn(&str) -> Cow<'_, str>) -> [String; 10] {
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
        next_boot_cell(n).into(),
    ]
    .map(|s| clip(&safe(&s), 64))
}

/// The NEXT BOOT cell: `ok`, `no driver` (the next reboot comes up without nvidia.ko), `n/a`
/// (no host driver to check), `?` (unknown), `-` (unreachable). docs/domain.md, "Next boot".
pub fn next_boot_cell(n: &NodeReport) -> &'static str {
    if n.status == NodeStatus::Unreachable {
        return "-";
    }
    match n.next_boot_driver() {
        Some("ok") => "ok",
        Some("missing") => "no driver",
        Some(_) => "n/a",
        None => "?",
    }
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

const HEADERS: [&str; 10] = [
    "NODE",
    "STATUS",
    "KERNEL",
    "MODULE",
    "DRIVER",
    "GPUS",
    "MIN CC",
    "DMA-BUF",
    "PEERMEM",
    "NEXT BOOT",
];

impl Sink for TableSink<'_> {
    fn node(&mut self, _: &NodeReport) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        let rows: Vec<[String; 10]> = snapshot
            .nodes
            .iter()
            .map(|n| table_cells(n, terminal_safe))
            .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Code;
    use crate::model::facts::Evidence;
    use crate::model::report::{GpuJson, KernelJson};

    const HOSTILE: &str = "\x1b[2J\x1b]0;owned\x07\u{9b}31m\u{202e}\u{2066}\u{200b}\u{2028}\u{2029}\u{feff}\u{61c}\0\u{fffd}";

    fn hostile(status: NodeStatus) -> NodeReport {
        let mut n = NodeReport::unreachable(
            format!("node{HOSTILE}"),
            Code::VerdictIncomplete,
            format!("message{HOSTILE}"),
            vec![Evidence {
                source: format!("/etc/modprobe.d/x{HOSTILE}.conf"),
                line: format!("softdep nvidia post: nvidia-peermem # {HOSTILE}"),
            }],
            String::new(),
            0,
        );
        n.status = status;
        n.kernel = Some(KernelJson {
            release: Some(format!("-rc1{HOSTILE}")),
        });
        n.gpus = Some(vec![GpuJson {
            index: 0,
            name: Some(format!("=HYPERLINK(\"x\"){HOSTILE}")),
            bus_id: None,
            uuid: None,
            pci_device_id: None,
            compute_capability: Some("9.0".into()),
            open_capable: None,
        }]);
        n
    }

    /// No character that must never be written raw (README "Trust model") in `s`, but for the
    /// line ends gpufleet writes itself.
    fn assert_clean(what: &str, s: &str) {
        for c in s.chars().filter(|c| *c != '\n') {
            assert!(
                !crate::model::text::is_unsafe(c),
                "{what}: raw U+{:04X} in {s:?}",
                c as u32
            );
        }
    }

    #[test]
    fn csv_cells_that_start_a_formula_are_neutralized() {
        for (raw, want) in [
            ("=1+1", "'=1+1"),
            ("+cmd", "'+cmd"),
            ("-rc1", "'-rc1"),
            ("-2", "'-2"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tx", "'\\tx"),
            ("\rx", "'\\rx"),
            ("6.8.0-49-generic", "6.8.0-49-generic"),
            ("a=b", "a=b"),
            ("", ""),
            ("'quoted", "'quoted"),
        ] {
            assert_eq!(csv_cell(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn csv_rows_are_neutralized_and_escaped_through_the_csv_writer() {
        let n = hostile(NodeStatus::Unknown);
        let mut out = Vec::new();
        {
            let mut sink = sink(Format::Csv, Box::new(&mut out));
            sink.node(&n).unwrap();
            sink.finish(&Snapshot::new(String::new(), vec![n.clone()]))
                .unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert_clean("csv", &text);
        let mut rdr = csv::Reader::from_reader(text.as_bytes());
        let row = rdr.records().next().unwrap().unwrap();
        assert_eq!(&row[1], "unknown");
        assert!(row[2].starts_with("'-rc1\\x1b[2J"), "{}", &row[2]);
        assert!(row[5].starts_with("1x =HYPERLINK"), "{}", &row[5]);
        assert_eq!(&row[10], "verdict-incomplete");
    }

    #[test]
    fn the_table_shows_node_text_escaped_and_unknown_with_its_meaning() {
        let nodes = vec![hostile(NodeStatus::Unknown), hostile(NodeStatus::Ready)];
        let mut out = Vec::new();
        {
            let mut sink = sink(Format::Table, Box::new(&mut out));
            sink.finish(&Snapshot::new(String::new(), nodes)).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        // The only ESC bytes are gpufleet's own SGR colour sequences.
        let plain = text
            .split('\x1b')
            .enumerate()
            .map(|(i, part)| {
                if i == 0 {
                    return part.to_string();
                }
                let rest = part.strip_prefix('[').expect("only SGR sequences");
                let end = rest.find('m').expect("SGR ends with m");
                assert!(
                    rest[..end].chars().all(|c| c.is_ascii_digit() || c == ';'),
                    "not an SGR sequence: {part:?}"
                );
                rest[end + 1..].to_string()
            })
            .collect::<String>();
        assert_clean("table", &plain);
        assert!(plain.contains("node\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\u{202e}"));
        assert!(plain.contains(&format!("  unknown: {}", NodeStatus::Unknown.meaning())));
        assert!(plain.contains("message\\x1b[2J"));
        assert!(plain.contains("softdep nvidia post: nvidia-peermem # \\x1b[2J"));
        assert!(plain.contains("2 nodes: 1 ready, 1 unknown"), "{plain}");
        // Unknown is drawn in its own style, not ready's.
        assert!(text.contains(&format!("{}unknown", status_style(NodeStatus::Unknown))));
        assert_ne!(
            status_style(NodeStatus::Unknown),
            status_style(NodeStatus::Ready)
        );
    }

    #[test]
    fn json_keeps_exact_values_with_no_raw_format_characters() {
        let n = hostile(NodeStatus::Unknown);
        for format in [Format::Json, Format::Jsonl] {
            let mut out = Vec::new();
            {
                let mut sink = sink(format, Box::new(&mut out));
                sink.node(&n).unwrap();
                sink.finish(&Snapshot::new(String::new(), vec![n.clone()]))
                    .unwrap();
            }
            let text = String::from_utf8(out).unwrap();
            assert_clean("json", &text);
            let first = text.lines().next().unwrap();
            let doc: serde_json::Value = if format == Format::Json {
                serde_json::from_str(&text).unwrap()
            } else {
                serde_json::from_str(first).unwrap()
            };
            let node = if format == Format::Json {
                &doc["nodes"][0]
            } else {
                &doc["data"]
            };
            assert_eq!(node["name"], n.name);
            assert_eq!(
                node["reasons"][0]["evidence"][0]["line"],
                n.reasons[0].evidence[0].line
            );
        }
    }

    #[test]
    fn check_exits_2_on_unknown() {
        let n = |s| {
            let mut r = hostile(s);
            r.status = s;
            r
        };
        let check = Some(Check::default());
        assert_eq!(exit_code(&[n(NodeStatus::Ready)], check), 0);
        assert_eq!(
            exit_code(&[n(NodeStatus::Ready), n(NodeStatus::Migrate)], check),
            1
        );
        assert_eq!(
            exit_code(&[n(NodeStatus::Migrate), n(NodeStatus::Unknown)], check),
            2
        );
        assert_eq!(exit_code(&[n(NodeStatus::Unknown)], None), 0);
        let lenient = Some(Check {
            allow_no_driver: true,
        });
        assert_eq!(exit_code(&[n(NodeStatus::NoDriver)], check), 1);
        assert_eq!(exit_code(&[n(NodeStatus::NoDriver)], lenient), 0);
    }
}
