//! Whole-screen snapshots of the TUI (ratatui TestBackend + insta), over reports that the real
//! binary produced from the fixture nodes, and the real H200's raw probe output for the detail
//! pane. Review changes with `INSTA_UPDATE=always` and the diff.
//!
//! One test binary, its tests by subject in tests/tui_screens/: `matrix` (the table: layout,
//! sizes, cells and their tones), `navigate` (filter, sort, group, cursor), `detail` (the
//! detail pane, `--compare`), `overlays` (help, the upgrade plan). This file holds the shared
//! helpers: the fixture reports, the app over them, rendering and keys.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[path = "tui_screens/detail.rs"]
mod detail;
#[path = "tui_screens/matrix.rs"]
mod matrix;
#[path = "tui_screens/navigate.rs"]
mod navigate;
#[path = "tui_screens/overlays.rs"]
mod overlays;

use std::sync::Arc;
use std::time::Duration;

use gpufleet::app::{App, Keymap, Msg, Row};
use gpufleet::model::{NodeReport, Thresholds};
use gpufleet::probe::{RawRun, RunEnd};
use gpufleet::ui::{self, Theme};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Every fixture's report, as `gpufleet snapshot --format json` printed it: its committed copy
/// in tests/golden/ (tests/fixture_nodes.rs holds it equal to what the binary prints on the
/// fixture, so these screens need not run the binary again), times normalized.
fn fixture_reports() -> Vec<NodeReport> {
    support::fixture_nodes()
        .iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let golden = support::manifest()
                .join("tests/golden")
                .join(f.parent().unwrap().file_name().unwrap())
                .join(format!("{name}.json"));
            let text = std::fs::read_to_string(&golden)
                .unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
            let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
            let mut r: NodeReport = serde_json::from_value(doc["nodes"][0].clone()).unwrap();
            r.name = name;
            r.scanned_at = "2026-11-30T10:00:00Z".into();
            r.duration_ms = 42;
            r
        })
        .collect()
}

fn h200_raw() -> (NodeReport, Arc<RawRun>) {
    let run = RawRun {
        boundary: "gpufleet-RAW".into(),
        output: std::fs::read(support::manifest().join("docs/examples/h200-probe-raw.txt"))
            .unwrap(),
        end: RunEnd::Completed,
        duration: Duration::from_millis(119),
        exit: None,
    };
    let r = gpufleet::probe::report(
        Some("h200-real".into()),
        &run,
        &Thresholds::default(),
        "2026-11-30T10:37:23Z".into(),
    );
    (r, Arc::new(run))
}

fn app(read_only: bool) -> App {
    let reports = fixture_reports();
    let mut rows: Vec<Row> = reports.iter().map(|r| Row::new(r.name.clone())).collect();
    rows.push(Row::new("h200-real"));
    rows.push(Row::new("gpu-pending-01"));
    rows[0].canary = true;
    rows[0].labels.insert("rack".into(), "r1".into());
    for r in rows.iter_mut() {
        r.refresh();
    }
    let mut a = App::new(
        rows,
        Keymap::new(&Default::default(), read_only).0,
        read_only,
        "fleet.toml (10 nodes)".into(),
    );
    let names: Vec<String> = a.rows.iter().map(|r| r.name.clone()).collect();
    a.update(Msg::ScanStarted {
        generation: 1,
        names,
    });
    for r in reports {
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(r),
            raw: None,
        });
    }
    let (r, raw) = h200_raw();
    a.update(Msg::NodeDone {
        generation: 1,
        report: Box::new(r),
        raw: Some(Arc::new(gpufleet::app::RawOutput::of(&raw))),
    });
    a.update(Msg::NodeRunning {
        generation: 1,
        name: "gpu-pending-01".into(),
    });
    a.ensure_view();
    a
}

fn render(app: &mut App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    let theme = Theme::default();
    let mut drawn = ui::Drawn::default();
    term.draw(|f| drawn = ui::draw(f, app, &theme)).unwrap();
    // As the TUI's loop does: the sort keys cycle over the columns shown.
    app.laid_out(drawn);
    format!("{}", term.backend())
}

fn key(app: &mut App, code: KeyCode) {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

fn typed(app: &mut App, s: &str) {
    for c in s.chars() {
        key(app, KeyCode::Char(c));
    }
}

/// A node the verdict could not be given for: the real H200 fixture's report with the facts of
/// peermem at boot unknown, as `assess` reports it (status `unknown`, `verdict-incomplete` and
/// a `fact-unknown`).
fn unknown_report(reports: &[NodeReport]) -> NodeReport {
    let h200 = reports
        .iter()
        .find(|r| r.name == "h200-open-580-k6.18-real")
        .unwrap();
    let mut v = serde_json::to_value(h200).unwrap();
    v["name"] = "h200-unknown".into();
    v["status"] = "unknown".into();
    v["peermem"]["configured"] = serde_json::Value::Null;
    v["reasons"] = serde_json::json!([
        {"code": "verdict-incomplete", "severity": "error", "evidence": [],
         "message": "no verdict: the node would be ready, but these facts are unknown: peermem.configured (/etc/modprobe.d/x.conf: not read)"},
        {"code": "fact-unknown", "severity": "info", "evidence": [],
         "message": "peermem.configured unknown: /etc/modprobe.d/x.conf: not read"}
    ]);
    serde_json::from_value(v).unwrap()
}

/// The screen cell where `text` starts on the first line that holds it: (x, y).
fn find(term: &Terminal<TestBackend>, text: &str) -> (u16, u16) {
    let buf = term.backend().buffer();
    for y in 0..buf.area.height {
        let line: String = (0..buf.area.width)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect();
        if let Some(i) = line.find(text) {
            return (line[..i].chars().count() as u16, y);
        }
    }
    panic!("{text:?} not on screen:\n{}", term.backend());
}

/// The lines of a rendered screen (TestBackend quotes each one), unquoted.
fn screen_lines(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .map(|l| l.trim_start_matches('"').trim_end_matches('"'))
        .collect()
}

/// The table body's lines of a rendered screen (after the header line).
fn body(screen: &str) -> Vec<&str> {
    let lines = screen_lines(screen);
    let header = lines.iter().position(|l| l.contains("NODE")).unwrap();
    lines[header + 1..].to_vec()
}
