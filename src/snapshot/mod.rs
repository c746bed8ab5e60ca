//! Headless output: the snapshot as a table, JSON, JSON Lines, CSV or Prometheus text, and its
//! exit code (docs/domain.md "Snapshot JSON", "Prometheus"); [`AtomicFile`] for `--output`.

pub mod collected;
mod json;
mod output;
mod prometheus;

pub use output::{AtomicFile, StripAnsi};
pub use prometheus::{escape_label_value, render as prometheus_text};

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, Write};

use anstyle::{Ansi256Color, AnsiColor, Color, Style};

use crate::model::report::{NodeReport, Snapshot, summary};
use crate::model::text::{clip, json_string, terminal_safe};
use crate::model::{NodeStatus, Severity};
use crate::view::columns::Column;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
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

/// Writes nodes as they finish, and the end of the document once all are done.
pub trait Sink {
    /// One node's report, as it finishes (in any order); `pos` is its place in the document
    /// (the inventory's order, from 0), each place given once. Streaming formats (JSON Lines,
    /// CSV) write it at once; the others place it at the end.
    fn node(&mut self, pos: usize, node: NodeReport) -> io::Result<()>;
    /// The end, once every node is in.
    fn finish(&mut self, end: &End) -> io::Result<()>;
}

/// What the end of a snapshot says besides its nodes.
#[derive(Debug, Clone)]
pub struct End {
    /// RFC 3339 UTC, when the snapshot was made.
    pub generated_at: String,
    /// Node counts per status ([`summary`]).
    pub summary: BTreeMap<&'static str, usize>,
    /// A snapshot of collected files (`--from`): the merge's findings (raw node text, as
    /// [`collected::Loaded::warnings`] gives them), written as the JSON document's
    /// `merge_warnings` and a JSON Lines `merge_warnings` record; `None`: a scan (no such field).
    pub merge_warnings: Option<Vec<String>>,
}

impl End {
    /// The end of a snapshot of nodes with these statuses, made now-ish (`generated_at`).
    pub fn new(generated_at: String, statuses: &[NodeStatus]) -> End {
        End {
            generated_at,
            summary: summary(statuses.iter().copied()),
            merge_warnings: None,
        }
    }
}

/// Writes `nodes` (in document order) and the end through `sink`: for a snapshot that is
/// whole already (collected files, the TUI's export).
///
/// Errors: the sink's write errors.
pub fn write_all(
    sink: &mut dyn Sink,
    generated_at: String,
    nodes: Vec<NodeReport>,
) -> io::Result<Vec<NodeStatus>> {
    let statuses: Vec<NodeStatus> = nodes.iter().map(|n| n.status).collect();
    for (pos, n) in nodes.into_iter().enumerate() {
        sink.node(pos, n)?;
    }
    sink.finish(&End::new(generated_at, &statuses))?;
    Ok(statuses)
}

/// The nodes of sinks that lay out the whole document at the end (the table, Prometheus), in
/// document order.
#[derive(Default)]
struct Placed(Vec<Option<NodeReport>>);

impl Placed {
    fn put(&mut self, pos: usize, node: NodeReport) {
        if self.0.len() <= pos {
            self.0.resize_with(pos + 1, || None);
        }
        self.0[pos] = Some(node);
    }

    /// The snapshot document of the nodes placed so far (they are taken).
    fn take(&mut self, end: &End) -> Snapshot {
        let nodes: Vec<NodeReport> = std::mem::take(&mut self.0).into_iter().flatten().collect();
        Snapshot {
            summary: end.summary.clone(),
            ..Snapshot::new(end.generated_at.clone(), nodes)
        }
    }
}

/// The writer for `format` on `out`.
pub fn sink<'a>(format: Format, out: Box<dyn Write + 'a>) -> Box<dyn Sink + 'a> {
    match format {
        Format::Table => Box::new(TableSink {
            out,
            brief: false,
            nodes: Placed::default(),
        }),
        Format::Json => Box::new(json::JsonSink::new(out)),
        Format::Jsonl => Box::new(JsonlSink { out }),
        Format::Csv => Box::new(CsvSink {
            out: csv::Writer::from_writer(out),
            header: false,
        }),
        Format::Prometheus => Box::new(prometheus::PromSink::new(out)),
    }
}

struct JsonlSink<'a> {
    out: Box<dyn Write + 'a>,
}

/// One JSON Lines record: `type` first, then `data` (a struct keeps the field order; a
/// `serde_json::json!` map would sort the keys and put `data` first).
#[derive(serde::Serialize)]
struct Line<'a, T: serde::Serialize> {
    #[serde(rename = "type")]
    kind: &'static str,
    data: &'a T,
}

impl Sink for JsonlSink<'_> {
    fn node(&mut self, _: usize, node: NodeReport) -> io::Result<()> {
        let json = json_string(
            &Line {
                kind: "node",
                data: &node,
            },
            false,
        )?;
        writeln!(self.out, "{json}")?;
        self.out.flush()
    }
    fn finish(&mut self, end: &End) -> io::Result<()> {
        if let Some(w) = &end.merge_warnings {
            let json = json_string(
                &Line {
                    kind: "merge_warnings",
                    data: w,
                },
                false,
            )?;
            writeln!(self.out, "{json}")?;
        }
        let json = json_string(
            &Line {
                kind: "summary",
                data: &end.summary,
            },
            false,
        )?;
        writeln!(self.out, "{json}")?;
        self.out.flush()
    }
}

/// CSV columns, in order (docs/domain.md, "Snapshot JSON").
/// CSV header names, in order (docs/domain.md "Snapshot JSON"; the registry: [`Column::csv`]).
pub fn csv_columns() -> Vec<&'static str> {
    Column::csv().into_iter().map(|(_, name)| name).collect()
}

/// A CSV cell that a spreadsheet would run as a formula neutralized: a cell starting with `=`,
/// `+`, `-`, `@`, tab or carriage return (after leading whitespace too, and their fullwidth
/// forms) gets a leading `'` (OWASP, "CSV Injection"). Applied to the raw value, before
/// [`terminal_safe`], so `\tx` becomes `'\tx` and then `'\\tx`. gpufleet reads no CSV of its
/// own back, so nothing has to undo it.
pub fn csv_cell(s: &str) -> String {
    // Spreadsheets skip leading spaces before a formula (` =1+1`) and read the fullwidth signs
    // (`＝`, `＋`, `－`, `＠`, U+FF1D and kin) as the ASCII ones.
    const STARTS: [char; 10] = [
        '=', '+', '-', '@', '\t', '\r', '\u{ff1d}', '\u{ff0b}', '\u{ff0d}', '\u{ff20}',
    ];
    let cell = if s.starts_with(STARTS) || s.trim_start().starts_with(STARTS) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    terminal_safe(&cell).into_owned()
}

/// One CSV row for `n`; unknown values are empty; every cell through [`csv_cell`].
pub fn csv_row(n: &NodeReport) -> Vec<String> {
    Column::csv()
        .into_iter()
        .map(|(c, _)| csv_cell(&c.csv_value(n)))
        .collect()
}

struct CsvSink<'a> {
    out: csv::Writer<Box<dyn Write + 'a>>,
    header: bool,
}

impl Sink for CsvSink<'_> {
    fn node(&mut self, _: usize, node: NodeReport) -> io::Result<()> {
        if !self.header {
            self.out.write_record(csv_columns())?;
            self.header = true;
        }
        self.out.write_record(csv_row(&node))?;
        self.out.flush()
    }
    fn finish(&mut self, _: &End) -> io::Result<()> {
        if !self.header {
            self.out.write_record(csv_columns())?;
        }
        self.out.flush()
    }
}

/// The table writer with one line per node (`--brief`): the header, then per node its columns
/// and its reason codes (no status meanings, evidence or summary line), for `grep` and `wc -l`.
pub fn brief_table_sink<'a>(out: Box<dyn Write + 'a>) -> Box<dyn Sink + 'a> {
    Box::new(TableSink {
        out,
        brief: true,
        nodes: Placed::default(),
    })
}

struct TableSink<'a> {
    out: Box<dyn Write + 'a>,
    /// One line per node.
    brief: bool,
    nodes: Placed,
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

/// The table's columns for `nodes`: an optional column (rollout state) only when some node
/// has a value in it.
pub fn table_columns(nodes: &[NodeReport]) -> Vec<Column> {
    Column::table()
        .filter(|c| !c.spec().optional || nodes.iter().any(|n| !c.display(n).is_empty()))
        .collect()
}

/// The table cells of one node in `columns`, each through `safe` ([`terminal_safe`] for the
/// table) and cut to 64 characters.
pub fn table_cells(
    n: &NodeReport,
    columns: &[Column],
    safe: fn(&str) -> Cow<'_, str>,
) -> Vec<String> {
    columns
        .iter()
        .map(|c| clip(&safe(&c.display(n)), 64))
        .collect()
}

impl Sink for TableSink<'_> {
    fn node(&mut self, pos: usize, node: NodeReport) -> io::Result<()> {
        self.nodes.put(pos, node);
        Ok(())
    }

    fn finish(&mut self, end: &End) -> io::Result<()> {
        let snapshot = &self.nodes.take(end);
        let mut columns = table_columns(&snapshot.nodes);
        if self.brief {
            columns.push(Column::Reasons);
        }
        let headers: Vec<&str> = columns.iter().map(|c| c.title()).collect();
        let rows: Vec<Vec<String>> = snapshot
            .nodes
            .iter()
            .map(|n| {
                let mut cells = table_cells(n, &columns, terminal_safe);
                if self.brief
                    && let Some(last) = cells.last_mut()
                {
                    // Every code, never cut: the line is the node's whole verdict.
                    *last = n
                        .reasons
                        .iter()
                        .map(|r| r.code.as_str())
                        .collect::<Vec<_>>()
                        .join(" ");
                }
                cells
            })
            .collect();
        let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let pad =
            |s: &str, w: usize| format!("{s}{}", " ".repeat(w.saturating_sub(s.chars().count())));
        let header: Vec<String> = headers
            .iter()
            .zip(&widths)
            .map(|(h, w)| pad(h, *w))
            .collect();
        let bold = Style::new().bold();
        writeln!(self.out, "{bold}{}{bold:#}", header.join("  ").trim_end())?;
        for (n, cells) in snapshot.nodes.iter().zip(&rows) {
            let st = status_style(n.status);
            let mut line = String::new();
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                if columns[i] == Column::Status {
                    line.push_str(&format!("{st}{}{st:#}", pad(c, *w)));
                } else {
                    line.push_str(&pad(c, *w));
                }
            }
            writeln!(self.out, "{}", line.trim_end())?;
            if self.brief {
                continue;
            }
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
                let more = r.evidence.len().saturating_sub(3);
                for e in r.evidence.iter().take(3) {
                    let dim = Style::new().dimmed();
                    writeln!(
                        self.out,
                        "          {dim}{}: {}{dim:#}",
                        terminal_safe(&e.source),
                        terminal_safe(e.line.trim_end())
                    )?;
                }
                if more > 0 {
                    let dim = Style::new().dimmed();
                    writeln!(
                        self.out,
                        "          {dim}(+{more} more line(s): `--format json` lists every one){dim:#}"
                    )?;
                }
            }
        }
        if self.brief {
            return self.out.flush();
        }
        let total = snapshot.nodes.len();
        let counts: Vec<String> = snapshot
            .summary
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

/// Exit code of `gpufleet snapshot`: 0 once the snapshot is produced, but 2 when no node
/// answered (every one `unreachable`: nothing was assessed, which a cron job or a DaemonSet
/// must see); with `check` (for CI gates), 0 when every node is `ready` (or `no-driver` with
/// `allow_no_driver`), 1 when any is not, 2 when any is `unreachable` or `unknown`
/// (docs/domain.md, "Snapshot JSON": exit codes).
pub fn exit_code(statuses: &[NodeStatus], check: Option<Check>) -> u8 {
    if !statuses.is_empty() && statuses.iter().all(|s| *s == NodeStatus::Unreachable) {
        return 2;
    }
    let Some(check) = check else {
        return 0;
    };
    let passes = |s: NodeStatus| {
        s == NodeStatus::Ready || check.allow_no_driver && s == NodeStatus::NoDriver
    };
    if statuses
        .iter()
        .any(|s| matches!(s, NodeStatus::Unreachable | NodeStatus::Unknown))
    {
        2
    } else if statuses.iter().all(|&s| passes(s)) {
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
            mig: None,
            remapped_rows: None,
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
            (" =1+1", "' =1+1"),
            ("  @SUM(A1)", "'  @SUM(A1)"),
            ("\u{ff1d}1+1", "'\u{ff1d}1+1"),
            ("\u{3000}\u{ff0b}x", "'\u{3000}\u{ff0b}x"),
            ("a \u{ff1d} b", "a \u{ff1d} b"),
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
            write_all(&mut *sink, String::new(), vec![n.clone()]).unwrap();
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
            write_all(&mut *sink, String::new(), nodes).unwrap();
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
                write_all(&mut *sink, String::new(), vec![n.clone()]).unwrap();
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
    fn json_lines_start_with_their_type() {
        let n = hostile(NodeStatus::Migrate);
        let mut out = Vec::new();
        {
            let mut sink = sink(Format::Jsonl, Box::new(&mut out));
            write_all(&mut *sink, String::new(), vec![n.clone()]).unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with(r#"{"type":"node","data":{"name":"#),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with(r#"{"type":"summary","data":{"#),
            "{}",
            lines[1]
        );
        let summary: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(summary["data"]["migrate"], 1);
    }

    #[test]
    fn check_exits_2_on_unknown() {
        let check = Some(Check::default());
        assert_eq!(exit_code(&[NodeStatus::Ready], check), 0);
        assert_eq!(
            exit_code(&[NodeStatus::Ready, NodeStatus::Migrate], check),
            1
        );
        assert_eq!(
            exit_code(&[NodeStatus::Migrate, NodeStatus::Unknown], check),
            2
        );
        assert_eq!(exit_code(&[NodeStatus::Unknown], None), 0);
        // No node answered: 2, with or without --check; one that answered is enough for 0.
        let down = [NodeStatus::Unreachable, NodeStatus::Unreachable];
        assert_eq!(exit_code(&down, None), 2);
        assert_eq!(exit_code(&down, check), 2);
        assert_eq!(
            exit_code(&[NodeStatus::Unreachable, NodeStatus::Migrate], None),
            0
        );
        let lenient = Some(Check {
            allow_no_driver: true,
        });
        assert_eq!(exit_code(&[NodeStatus::NoDriver], check), 1);
        assert_eq!(exit_code(&[NodeStatus::NoDriver], lenient), 0);
    }
}
