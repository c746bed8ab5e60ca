//! Whole-screen snapshots of the TUI (ratatui TestBackend + insta), over reports that the real
//! binary produced from the fixture nodes, and the real H200's raw probe output for the detail
//! pane. Review changes with `cargo insta review`.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use gpufleet::app::{App, Keymap, Msg, Row};
use gpufleet::model::{NodeReport, Thresholds};
use gpufleet::probe::{RawRun, RunEnd};
use gpufleet::ui::{self, Role, Theme};
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

#[test]
fn matrix_with_mixed_statuses() {
    let mut a = app(false);
    insta::assert_snapshot!("matrix", render(&mut a, 160, 20));
}

#[test]
fn detail_pane_of_the_real_h200() {
    let mut a = app(false);
    let pos = a
        .view
        .iter()
        .position(|&i| a.rows[i].name == "h200-real")
        .unwrap();
    a.selected = pos;
    key(&mut a, KeyCode::Enter);
    insta::assert_snapshot!("detail", render(&mut a, 160, 45));
    // Scrolling reaches the raw probe sections.
    for _ in 0..40 {
        key(&mut a, KeyCode::Char('j'));
    }
    let screen = render(&mut a, 160, 45);
    assert!(
        screen.contains("raw probe output") || screen.contains("▸ file"),
        "{screen}"
    );
    // Scrolling stops at the end of the content instead of running into blank space.
    for _ in 0..2000 {
        key(&mut a, KeyCode::Char('j'));
    }
    let screen = render(&mut a, 160, 45);
    assert!(
        screen.contains("meta complete"),
        "the last section is still on screen:\n{screen}"
    );
}

#[test]
fn filter_by_status() {
    let mut a = app(false);
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, "status:migrate");
    insta::assert_snapshot!("filter-typing", render(&mut a, 160, 16));
    key(&mut a, KeyCode::Enter);
    let names: Vec<&str> = a.view.iter().map(|&i| a.rows[i].name.as_str()).collect();
    assert_eq!(
        names,
        [
            "a100-proprietary-535-k5.15-peermem",
            "h100-open-555-k6.6-peermem"
        ]
    );
}

/// An unknown filter key is said in the filter bar (and the table), not silently matched as text.
#[test]
fn an_unknown_filter_key_is_an_error_in_the_filter_bar() {
    let mut a = app(false);
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, "stauts:ready");
    let screen = render(&mut a, 160, 16);
    assert!(screen.contains("unknown filter key `stauts:`"), "{screen}");
    assert!(screen.contains("did you mean `status:`?"), "{screen}");
    assert!(screen.contains("filter error:"), "{screen}");
    assert!(a.view.is_empty());
}

#[test]
fn help_overlay_comes_from_the_keymap() {
    let mut a = app(false);
    key(&mut a, KeyCode::Char('?'));
    insta::assert_snapshot!("help", render(&mut a, 120, 34));
}

#[test]
fn read_only_badge() {
    let mut a = app(true);
    let screen = render(&mut a, 160, 8);
    assert!(screen.lines().next().unwrap().contains("READ-ONLY"));
    insta::assert_snapshot!("read-only", screen);
}

#[test]
fn small_terminal_80x24() {
    let mut a = app(false);
    let screen = render(&mut a, 80, 24);
    // At 80 columns the columns the move turns on come first (issue 23): node, status,
    // module, driver, nvidia-peermem, and the reasons (why) take the rest; node names give
    // way, cut in the middle with both ends kept.
    let header = screen.lines().nth(2).unwrap();
    for title in ["NODE", "STATUS", "MODULE", "DRIVER", "PEERMEM", "REASONS"] {
        assert!(header.contains(title), "{title} missing:\n{screen}");
    }
    assert!(screen.contains("550.90.07"), "{screen}");
    assert!(screen.contains("loaded+boot"), "{screen}");
    assert!(
        screen.contains("…ismatch"),
        "the end of a long name is kept:\n{screen}"
    );
    insta::assert_snapshot!("matrix-80x24", screen);
}

#[test]
fn sort_by_clicking_a_header() {
    use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mut a = app(false);
    // Wide enough for the kernel column (it is the first to go in narrower terminals).
    let mut term = Terminal::new(TestBackend::new(200, 20)).unwrap();
    let theme = Theme::default();
    let mut drawn = ui::Drawn::default();
    term.draw(|f| drawn = ui::draw(f, &a, &theme)).unwrap();
    let (_, x, _) = drawn
        .header_hits
        .iter()
        .find(|(c, ..)| *c == gpufleet::app::Column::Kernel)
        .unwrap();
    a.laid_out(drawn.clone());
    a.update(Msg::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: *x,
        row: drawn.header_y,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(a.sort, gpufleet::app::Column::Kernel);
    let kernels: Vec<String> = a
        .view
        .iter()
        .filter_map(|&i| a.rows[i].report.as_ref())
        .filter_map(|r| r.kernel.as_ref()?.release.clone())
        .collect();
    // By version, not as text: 5.4 before 5.15, 6.8 before 6.18.
    let mut sorted = kernels.clone();
    sorted.sort_by(|a, b| gpufleet::model::version_cmp(a, b));
    assert_eq!(kernels, sorted);
    let at = |prefix: &str| kernels.iter().position(|k| k.starts_with(prefix)).unwrap();
    assert!(at("5.4.") < at("5.15."), "{kernels:?}");
    assert!(at("6.8.") < at("6.18."), "{kernels:?}");
}

#[test]
fn grouped_by_label() {
    let mut a = app(false);
    a.rows[1].labels.insert("rack".into(), "r2".into());
    a.rows[1].refresh();
    a.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('L'),
        KeyModifiers::NONE,
    )));
    assert_eq!(a.group_by.as_deref(), Some("rack"));
    let screen = render(&mut a, 160, 20);
    // Issue 13 item 6: a header row per group, with its node count per status.
    let lines: Vec<&str> = screen.lines().collect();
    let at = |text: &str| {
        lines
            .iter()
            .position(|l| l.contains(text))
            .unwrap_or_else(|| panic!("{text:?} missing:\n{screen}"))
    };
    let r1 = at("▸ rack r1 · 1 node · 1 migrate");
    let r2 = at("▸ rack r2 · 1 node · ");
    let none = at(&format!("▸ rack (not set) · {} nodes · ", a.rows.len() - 2));
    assert!(
        lines[r1 + 1].contains("◆ a100-proprietary-535-k5.15-peermem"),
        "{screen}"
    );
    assert!(
        lines[r2 + 1].contains("a100-proprietary-535-rhel8-k4.18"),
        "{screen}"
    );
    assert!(r1 < r2 && r2 + 1 < none, "{screen}");
    assert!(lines[none].contains("1 pending"), "{screen}");
    insta::assert_snapshot!("grouped-by-label", screen);
    // Clicking a header row selects nothing; clicking the row under it selects that node.
    let mut term = Terminal::new(TestBackend::new(160, 20)).unwrap();
    let mut drawn = ui::Drawn::default();
    term.draw(|f| drawn = ui::draw(f, &a, &Theme::default()))
        .unwrap();
    a.laid_out(drawn.clone());
    let click = |a: &mut App, y: usize| {
        a.update(Msg::Mouse(ratatui::crossterm::event::MouseEvent {
            kind: ratatui::crossterm::event::MouseEventKind::Down(
                ratatui::crossterm::event::MouseButton::Left,
            ),
            column: 10,
            row: y as u16,
            modifiers: KeyModifiers::NONE,
        }));
    };
    let before = a.selected;
    click(&mut a, r2);
    assert_eq!(a.selected, before);
    click(&mut a, r2 + 1);
    assert_eq!(
        a.rows[a.view[a.selected]].name,
        "a100-proprietary-535-rhel8-k4.18"
    );
    // Groups are contiguous: r1, then r2, then nodes without the label.
    let order: Vec<String> = a
        .view
        .iter()
        .map(|&i| a.rows[i].labels.get("rack").cloned().unwrap_or_default())
        .collect();
    assert_eq!(&order[..2], ["r1", "r2"]);
}

/// Every screen draws at every small size without a panic (a terminal can be made tiny).
#[test]
fn tiny_terminals_do_not_panic() {
    let mut a = app(false);
    for mode_keys in [
        &[][..],
        &[KeyCode::Enter][..],
        &[KeyCode::Char('?')][..],
        &[KeyCode::Char('/')][..],
    ] {
        let mut a2 = a.clone();
        for k in mode_keys {
            key(&mut a2, *k);
        }
        for w in [1u16, 2, 5, 10, 20, 40] {
            for h in [1u16, 2, 3, 4, 5, 10] {
                render(&mut a2, w, h);
            }
        }
    }
    let planned = gpufleet::actions::rollout::Plan {
        rollout: "r-1".into(),
        mode: gpufleet::actions::rollout::Mode::Canary,
        nodes: vec![gpufleet::actions::rollout::NodePlan {
            node: "x".into(),
            steps: vec![],
            next_boot: None,
            note: None,
        }],
        skipped: vec![],
        budget: None,
    };
    a.update(Msg::UpgradePlanned(Ok((
        vec!["plan".into(); 50],
        Box::new(planned),
    ))));
    for (w, h) in [(1, 1), (10, 3), (40, 10)] {
        render(&mut a, w, h);
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

#[test]
fn an_unknown_node_is_counted_sorted_styled_filtered_and_explained() {
    let reports = fixture_reports();
    let unknown = unknown_report(&reports);
    let mut rows: Vec<Row> = reports.iter().map(|r| Row::new(r.name.clone())).collect();
    rows.push(Row::new("h200-unknown"));
    let mut a = App::new(
        rows,
        Keymap::default(),
        false,
        "fleet.toml (9 nodes)".into(),
    );
    let names: Vec<String> = a.rows.iter().map(|r| r.name.clone()).collect();
    a.update(Msg::ScanStarted {
        generation: 1,
        names,
    });
    for r in reports.into_iter().chain([unknown]) {
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(r),
            raw: None,
        });
    }
    a.ensure_view();
    let theme = Theme::default();
    let mut term = Terminal::new(TestBackend::new(160, 20)).unwrap();
    term.draw(|f| {
        ui::draw(f, &a, &theme);
    })
    .unwrap();
    let screen = format!("{}", term.backend());
    let top = screen.lines().next().unwrap();
    // The counts worst first (the status order), before the source.
    assert!(
        top.contains("2 attention  1 unknown  2 blocked  2 migrate  1 no-driver  1 ready"),
        "{top}"
    );
    // Sorted after attention, before blocked.
    let order: Vec<&str> = screen
        .lines()
        .filter_map(|l| {
            ["attention", "unknown", "blocked"]
                .into_iter()
                .find(|s| l.contains(&format!("  {s}  ")))
        })
        .collect();
    assert_eq!(
        order,
        ["attention", "attention", "unknown", "blocked", "blocked"],
        "{screen}"
    );
    // Drawn in its own role, on top and in the row; no-driver keeps its own.
    let (x, y) = find(&term, "1 unknown");
    let cell = &term.backend().buffer()[(x + 2, y)];
    assert_eq!(cell.fg, theme.role(Role::StatusUnknown).fg.unwrap());
    let (_, y) = find(&term, "h200-unknown");
    let row: String = (0..160)
        .map(|x| term.backend().buffer()[(x, y)].symbol().to_string())
        .collect();
    let sx = row.find(" unknown ").unwrap() as u16 + 1;
    let st = &term.backend().buffer()[(sx, y)];
    assert_eq!(st.fg, theme.role(Role::StatusUnknown).fg.unwrap());
    assert!(
        st.modifier
            .contains(theme.role(Role::StatusUnknown).add_modifier)
    );
    assert_ne!(
        st.fg,
        theme.status(gpufleet::model::NodeStatus::Ready).fg.unwrap()
    );
    // The unknown value (peermem at boot) is `?`, in the role for unknown values.
    assert!(row.contains("?"), "{row}");
    let qx = row.find('?').unwrap() as u16;
    assert_eq!(
        term.backend().buffer()[(qx, y)].fg,
        theme.role(Role::Unknown).fg.unwrap()
    );

    // status:unknown keeps only it.
    key(&mut a, KeyCode::Char('/'));
    typed(&mut a, "status:unknown");
    key(&mut a, KeyCode::Enter);
    let names: Vec<&str> = a.view.iter().map(|&i| a.rows[i].name.as_str()).collect();
    assert_eq!(names, ["h200-unknown"]);

    // The detail pane says what the status means and names the unknown fact.
    key(&mut a, KeyCode::Enter);
    let screen = render(&mut a, 160, 30);
    assert!(
        screen.contains(&format!(
            "h200-unknown  unknown: {}",
            gpufleet::model::NodeStatus::Unknown.meaning()
        )),
        "{screen}"
    );
    assert!(screen.contains("error verdict-incomplete"), "{screen}");
    assert!(screen.contains("peermem.configured"), "{screen}");
}

#[test]
fn help_lists_every_status_worst_first() {
    let mut a = app(false);
    key(&mut a, KeyCode::Char('?'));
    let screen = render(&mut a, 120, 50);
    let at = |s: &str| {
        screen
            .lines()
            .position(|l| l.contains(&format!("│ {s:<20}")))
            .unwrap_or_else(|| panic!("{s} not in the help:\n{screen}"))
    };
    let lines: Vec<usize> = [
        "unreachable",
        "attention",
        "unknown",
        "blocked",
        "migrate",
        "no-driver",
        "ready",
    ]
    .iter()
    .map(|s| at(s))
    .collect();
    assert!(lines.windows(2).all(|w| w[1] == w[0] + 1), "{screen}");
}

#[test]
fn closing_the_detail_pane_brings_back_the_rows_above() {
    let mut a = app(false);
    let first = render(&mut a, 160, 24);
    // The first row's node name (after the quote, the cursor mark and a space).
    let top: String = first
        .lines()
        .nth(4)
        .unwrap()
        .chars()
        .skip(3)
        .take(37)
        .collect();
    key(&mut a, KeyCode::End);
    key(&mut a, KeyCode::Enter);
    let with_pane = render(&mut a, 160, 24);
    assert!(!with_pane.contains(&top), "{with_pane}");
    key(&mut a, KeyCode::Enter);
    let after = render(&mut a, 160, 24);
    // Every row fits again, so none is hidden above (the last one stays selected).
    assert!(after.contains(&top), "{after}");
}

#[test]
fn a_cut_cell_says_so_and_a_cut_node_name_keeps_its_end() {
    // Two names alike in the first 40 characters (the NODE column's maximum).
    let stem = "gpu-rack07-row3-sxm-a100-80gb-ib-hdr-200-node-";
    let mut rows = Vec::new();
    let mut reports = Vec::new();
    for end in ["el9_4", "el9_5"] {
        let mut r = fixture_reports().remove(0);
        r.name = format!("{stem}{end}");
        rows.push(Row::new(r.name.clone()));
        reports.push(r);
    }
    let mut a = App::new(
        rows,
        Keymap::new(&Default::default(), false).0,
        false,
        "fleet.toml (2 nodes)".into(),
    );
    a.update(Msg::ScanStarted {
        generation: 1,
        names: reports.iter().map(|r| r.name.clone()).collect(),
    });
    for r in reports {
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(r),
            raw: None,
        });
    }
    a.ensure_view();
    let screen = render(&mut a, 160, 10);
    // A cut never looks whole, and a node name is cut in its middle: the two nodes stay apart
    // by their ends (they would read alike cut at the end).
    for end in ["el9_4", "el9_5"] {
        let name = format!("{stem}{end}");
        let cut = gpufleet::model::text::clip_middle(&name, 40);
        assert!(cut.contains('…') && cut.ends_with(end), "{cut}");
        assert_eq!(screen.matches(&cut).count(), 1, "{screen}");
    }
}

/// The upgrade plan shows each command whole: a line longer than the popup wraps, never cut.
#[test]
fn the_confirmed_plan_shows_long_commands_whole() {
    let mut a = app(false);
    let planned = gpufleet::actions::rollout::Plan {
        rollout: "r-1".into(),
        mode: gpufleet::actions::rollout::Mode::Canary,
        nodes: vec![gpufleet::actions::rollout::NodePlan {
            node: "x".into(),
            steps: vec![],
            next_boot: None,
            note: None,
        }],
        skipped: vec![],
        budget: None,
    };
    let long = format!(
        "    step:install  $ ssh x 'apt-get install -y {} nvidia-open-END'",
        "pkg ".repeat(40)
    );
    a.update(Msg::UpgradePlanned(Ok((
        vec!["plan of rollout r-1".into(), long],
        Box::new(planned),
    ))));
    let screen = render(&mut a, 100, 30);
    let joined: String = screen
        .lines()
        .map(|l| l.trim_matches(|c: char| c == '"' || c == ' ' || c == '│'))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(joined.contains("nvidia-open-END"), "{screen}");
    assert!(joined.contains("apt-get install -y pkg"), "{screen}");
}

/// The GPU Operator's upgrade labels (a Kubernetes inventory's node labels) get a column only
/// when some node has them; hostile label text is escaped.
#[test]
fn gpu_operator_upgrade_column_only_when_a_node_has_the_labels() {
    let mut a = app(false);
    let plain = render(&mut a, 200, 20);
    assert!(!plain.contains("GPU-OPERATOR"), "{plain}");
    let labels = [
        ("nvidia.com/gpu-driver-upgrade-state", "drain-required"),
        ("nvidia.com/gpu-driver-upgrade.skip", "true"),
    ];
    a.rows[1]
        .labels
        .insert(labels[0].0.into(), labels[0].1.into());
    a.rows[2]
        .labels
        .insert(labels[1].0.into(), labels[1].1.into());
    a.rows[3]
        .labels
        .insert(labels[0].0.into(), "\u{1b}[2Jx".into());
    for r in a.rows.iter_mut() {
        r.refresh();
    }
    a.dirty = true;
    a.ensure_view();
    let screen = render(&mut a, 200, 20);
    assert!(screen.contains("GPU-OPERATOR"), "{screen}");
    let row = |name: &str| {
        screen
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{name}: {screen}"))
            .to_string()
    };
    assert!(row(&a.rows[1].name).contains("drain-required"));
    assert!(row(&a.rows[2].name).contains("skip"));
    assert!(!screen.contains('\u{1b}'));
}

/// Issue 13 item 6: the help overlay scrolls (on a short terminal its last lines come into
/// view with `j` / `G`, and it stops at the end).
#[test]
fn the_help_overlay_scrolls() {
    let mut a = app(false);
    key(&mut a, KeyCode::Char('?'));
    let first = render(&mut a, 100, 20);
    assert!(first.contains("j/k scroll"), "{first}");
    assert!(first.contains("quit gpufleet"), "{first}");
    assert!(!first.contains("no NVIDIA module loaded"), "{first}");
    key(&mut a, KeyCode::Char('G'));
    let end = render(&mut a, 100, 20);
    assert!(!end.contains("quit gpufleet"), "{end}");
    // The last status of the legend (ready) is on screen at the end.
    assert!(end.contains("ready "), "{end}");
    let bottom = a.detail_scroll;
    assert!(bottom > 0 && bottom < 100, "{bottom}");
    key(&mut a, KeyCode::Char('j'));
    render(&mut a, 100, 20);
    assert_eq!(a.detail_scroll, bottom, "it stops at the end");
    key(&mut a, KeyCode::Char('g'));
    let top = render(&mut a, 100, 20);
    assert_eq!(top, first);
    // j scrolls one line: the first key line leaves the screen.
    key(&mut a, KeyCode::Char('j'));
    let one = render(&mut a, 100, 20);
    assert!(!one.contains("quit gpufleet"), "{one}");
}

/// Issue 13 item 6: with the detail pane open, `g` / `G` go to the top / bottom of the pane
/// (not the first / last node) and `n` / `p` go to the next / previous node, the pane open.
#[test]
fn in_the_detail_pane_g_moves_in_the_pane_and_n_p_change_node() {
    let mut a = app(false);
    let pos = a
        .view
        .iter()
        .position(|&i| a.rows[i].name == "h200-real")
        .unwrap();
    a.selected = pos;
    key(&mut a, KeyCode::Enter);
    render(&mut a, 160, 45);
    key(&mut a, KeyCode::Char('G'));
    let screen = render(&mut a, 160, 45);
    assert_eq!(a.selected, pos, "G stays on the node");
    assert!(a.detail_scroll > 0 && a.detail_scroll == a.drawn.detail_max);
    assert!(screen.contains("meta complete"), "{screen}");
    key(&mut a, KeyCode::Char('g'));
    render(&mut a, 160, 45);
    assert_eq!((a.selected, a.detail_scroll), (pos, 0));
    key(&mut a, KeyCode::Char('n'));
    let screen = render(&mut a, 160, 45);
    assert_eq!(a.selected, pos + 1);
    assert_eq!(a.mode, gpufleet::app::Mode::Detail);
    let next = a.rows[a.view[pos + 1]].name.clone();
    assert!(
        screen.contains(&format!("{next} ·")) || screen.contains(&next),
        "{screen}"
    );
    key(&mut a, KeyCode::Char('p'));
    key(&mut a, KeyCode::Char('p'));
    render(&mut a, 160, 45);
    assert_eq!(a.selected, pos - 1);
    assert_eq!(a.mode, gpufleet::app::Mode::Detail);
}

/// Issue 13 item 6: in the high-contrast theme the selected row is black on white in every
/// cell, whatever the cell's own colours (reversed, each cell kept its own colours, swapped).
#[test]
fn the_high_contrast_selected_row_is_black_on_white() {
    use ratatui::style::Color;
    let mut a = app(false);
    a.selected = a
        .view
        .iter()
        .position(|&i| a.rows[i].name == "a100-proprietary-535-k5.15-peermem")
        .unwrap();
    let theme = Theme::resolve("high-contrast", None, false).unwrap();
    let mut term = Terminal::new(TestBackend::new(160, 20)).unwrap();
    term.draw(|f| {
        ui::draw(f, &a, &theme);
    })
    .unwrap();
    let buf = term.backend().buffer().clone();
    let y = (0..20)
        .find(|y| buf[(0, *y)].symbol() == "▌")
        .expect("a selected row");
    let row: String = (0..160).map(|x| buf[(x, y)].symbol()).collect();
    // The row holds a warn cell (migrate, proprietary) and a loaded peermem.
    assert!(
        row.contains("migrate") && row.contains("proprietary"),
        "{row}"
    );
    for x in 0..160 {
        let c = &buf[(x, y)];
        assert_eq!(
            (c.fg, c.bg),
            (Color::Black, Color::White),
            "column {x} of {row}"
        );
    }
}

/// `tui --compare OLD.json`: changed cells take the `changed` role (per node, per column, from
/// `diff::compare`), changed nodes get `*`, added ones `+`, and the legend counts them and names
/// the removed ones; the detail pane says old → new.
#[test]
fn compare_marks_changed_cells_added_and_removed_nodes() {
    let mut a = app(false);
    let mut old = fixture_reports();
    let a100 = "a100-proprietary-535-k5.15-peermem";
    let k = old.iter_mut().find(|r| r.name == a100).unwrap();
    k.kernel.as_mut().unwrap().release = Some("5.15.0-99-generic".into());
    old.retain(|r| r.name != "cpu-node-no-driver-k6.8");
    let mut gone = old[0].clone();
    gone.name = "gpu-gone-07".into();
    old.push(gone);
    a.compare = Some(gpufleet::app::Compare::new(
        "yesterday.json".into(),
        old,
        &a.rows,
    ));
    // The results come in (again) with the comparison on.
    let now: Vec<NodeReport> = a.rows.iter().filter_map(|r| r.report.clone()).collect();
    a.progress.done = 0;
    for r in now {
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(r),
            raw: None,
        });
    }
    a.ensure_view();
    let theme = Theme::default();
    let mut term = Terminal::new(TestBackend::new(160, 20)).unwrap();
    term.draw(|f| {
        ui::draw(f, &a, &theme);
    })
    .unwrap();
    let screen = format!("{}", term.backend());
    // h200-real is not in the fixtures' old snapshot either: added, as the CPU node.
    assert!(
        screen.contains("against yesterday.json")
            && screen.contains("1 changed, 2 added, 1 removed: gpu-gone-07"),
        "{screen}"
    );
    assert!(screen.contains(&format!("◆ * {a100}")), "{screen}");
    assert!(screen.contains("+ cpu-node-no-driver-k6.8"), "{screen}");
    // The changed cell (the kernel) has the role's background; its neighbours do not.
    let buf = term.backend().buffer().clone();
    let (kx, ky) = find(&term, "5.15.0-105-generic");
    let changed = theme.role(Role::Changed).bg.unwrap();
    let (dx, dy) = find(&term, "h100-open-555-k6.6-peermem");
    assert_ne!(buf[(dx, dy)].bg, changed);
    // The a100 row starts selected (the selection's style covers the row): select another.
    assert_eq!(ky, find(&term, a100).1);
    a.selected = a
        .view
        .iter()
        .position(|&i| a.rows[i].name == "h100-open-555-k6.6-peermem")
        .unwrap();
    term.draw(|f| {
        ui::draw(f, &a, &theme);
    })
    .unwrap();
    let buf = term.backend().buffer().clone();
    assert_eq!(buf[(kx, ky)].bg, changed, "the changed kernel cell");
    assert_ne!(buf[(kx, ky + 1)].bg, changed, "the next node's kernel cell");
    let (mx, my) = find(&term, "proprietary  535.183.01");
    assert_eq!(my, ky);
    assert_ne!(buf[(mx, my)].bg, changed, "the unchanged module cell");
    insta::assert_snapshot!("compare", format!("{}", term.backend()));
    // The detail pane of the changed node says old → new.
    a.selected = a.view.iter().position(|&i| a.rows[i].name == a100).unwrap();
    key(&mut a, KeyCode::Enter);
    let screen = render(&mut a, 160, 45);
    assert!(
        screen.contains("changed kernel: 5.15.0-99-generic → 5.15.0-105-generic"),
        "{screen}"
    );
}

/// Issue 13 item 6: after a cancelled rescan, rows it had not reached say `(stale)` (their
/// report is the last scan's), a node never scanned says `cancelled`, and the top line counts
/// them.
#[test]
fn a_cancelled_rescan_marks_the_rows_it_left_stale() {
    let mut a = app(false);
    let names: Vec<String> = a.rows.iter().map(|r| r.name.clone()).collect();
    a.update(Msg::ScanStarted {
        generation: 2,
        names,
    });
    let first = a.rows[0].report.clone().unwrap();
    a.update(Msg::NodeDone {
        generation: 2,
        report: Box::new(first.clone()),
        raw: None,
    });
    key(&mut a, KeyCode::Char('x'));
    let screen = render(&mut a, 160, 20);
    let stale = a.rows.len() - 2;
    assert!(screen.contains(&format!("{stale} stale")), "{screen}");
    assert!(screen.contains("1 not scanned (cancelled)"), "{screen}");
    assert!(screen.contains("h200-real (stale)"), "{screen}");
    assert!(
        !screen.contains(&format!("{} (stale)", first.name)),
        "{screen}"
    );
    assert!(
        screen.contains("gpu-pending-01") && screen.contains("cancelled"),
        "{screen}"
    );
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

/// Results arrive in inventory order and the view sorts them by status: a cursor nobody moved
/// stays on the first row (the worst node, on screen), not on the first inventory node wherever
/// the sort took it; once moved, it follows its node through a re-sort.
#[test]
fn the_cursor_nobody_moved_stays_on_the_first_row_as_results_sort_in() {
    let mut a = app(false);
    let first = a.rows[0].name.clone();
    assert_ne!(a.view[0], 0, "the first inventory node is not the worst");
    assert_eq!(a.selected, 0);
    let screen = render(&mut a, 160, 12);
    let rows = body(&screen);
    assert!(rows[0].starts_with('▌'), "{screen}");
    assert!(rows[0].contains("attention"), "{screen}");
    assert!(!rows[0].contains(&first), "{screen}");
    // Moved, the cursor follows its node when the order flips.
    key(&mut a, KeyCode::Char('j'));
    let chosen = a.selected_row().unwrap().name.clone();
    key(&mut a, KeyCode::Char('S'));
    assert_eq!(a.selected_row().unwrap().name, chosen);
    assert_ne!(a.selected, 1);
}

/// The first sort key press sorts by a column on screen and its header shows the arrow (the
/// ROLLOUT column, hidden while no node has a rollout, is skipped); a full cycle comes back.
#[test]
fn every_sort_press_shows_its_arrow() {
    let mut a = app(false);
    let screen = render(&mut a, 160, 12);
    assert!(!screen.contains("ROLLOUT"), "{screen}");
    let header = |s: &str| s.lines().find(|l| l.contains("NODE")).unwrap().to_string();
    assert!(header(&screen).contains("STATUS▲"), "{screen}");
    let shown = a.drawn.header_hits.len();
    for _ in 0..shown {
        key(&mut a, KeyCode::Char('s'));
        let screen = render(&mut a, 160, 12);
        let h = header(&screen);
        assert_eq!(h.matches('▲').count(), 1, "sort {:?}: {h}", a.sort);
    }
    assert_eq!(
        a.sort,
        gpufleet::app::Column::Status,
        "a cycle over the shown columns"
    );
    key(&mut a, KeyCode::Left);
    let h = header(&render(&mut a, 160, 12));
    assert_eq!(h.matches('▲').count(), 1, "sort-prev {:?}: {h}", a.sort);
}

/// A long evidence line goes on over the next lines of the detail pane, indented, instead of
/// being cut at the pane's edge; scrolling to the end still reaches the last line.
#[test]
fn the_detail_pane_wraps_long_evidence_lines() {
    let mut a = app(false);
    let pos = a
        .view
        .iter()
        .position(|&i| a.rows[i].name == "a100-proprietary-550-mismatch")
        .unwrap();
    a.selected = pos;
    key(&mut a, KeyCode::Enter);
    let screen = render(&mut a, 80, 40);
    let pane: Vec<&str> = screen_lines(&screen)
        .into_iter()
        .skip_while(|l| !l.contains("detail (j/k"))
        .collect();
    let joined = pane.join("\n");
    // The evidence of driver-library-mismatch is longer than 80 columns; its end shows.
    let at = pane
        .iter()
        .position(|l| l.trim_start().starts_with("nvidia-smi --query-gpu="))
        .unwrap_or_else(|| panic!("{joined}"));
    let tail = pane[at + 1..]
        .iter()
        .take_while(|l| l.starts_with("          "))
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        tail.ends_with("Failed to initialize NVML: Driver/library version mismatch"),
        "{joined}"
    );
    assert!(pane[at].chars().count() == 80, "{joined}");
    // The end of the content is reachable (the scroll limit counts the wrapped lines).
    let last: String = ui::detail_lines(a.selected_row().unwrap(), &Theme::default())
        .last()
        .unwrap()
        .to_string();
    let tail: String = last
        .trim_end()
        .chars()
        .rev()
        .take(12)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    key(&mut a, KeyCode::Char('G'));
    let end = render(&mut a, 80, 40);
    assert!(end.contains(&tail), "`{tail}` of `{last}`:\n{end}");
}

/// One header line says the counts (issue 23): no other line repeats them, and the scan's
/// progress is on it.
#[test]
fn the_counts_are_on_one_header_line() {
    let mut a = app(false);
    for (w, h) in [(80, 24), (120, 40), (200, 50)] {
        let screen = render(&mut a, w, h);
        let lines: Vec<&str> = screen.lines().collect();
        assert!(
            lines[0].contains("2 attention") && lines[0].contains("9/10"),
            "{screen}"
        );
        assert!(
            lines[1..]
                .iter()
                .all(|l| !l.contains("2 attention") && !l.contains("9/10")),
            "{screen}"
        );
    }
}

/// The help overlay keeps a cell of padding inside its border on every line, wrapped ones too.
#[test]
fn the_help_overlay_is_padded() {
    let mut a = app(false);
    key(&mut a, KeyCode::Char('?'));
    for (w, h) in [(80, 50), (120, 50)] {
        let screen = render(&mut a, w, h);
        let inside: Vec<&str> = screen
            .lines()
            .filter_map(|l| {
                let l = l.trim_matches('"');
                let a = l.find('│')?;
                let b = l.rfind('│')?;
                (b > a).then(|| &l[a + '│'.len_utf8()..b])
            })
            .collect();
        assert!(inside.len() > 20, "{screen}");
        for l in inside {
            assert!(
                l.starts_with(' ') && l.ends_with(' '),
                "{l:?} touches the border:\n{screen}"
            );
        }
    }
}

/// A cell's colour is its tone's (`Theme::tone`, which takes no text): every drawn cell of
/// every fixture row, in every column shown, has the foreground and modifiers of the tone the
/// view gave it, and the tones that colour (warn, crit, dim, a status) are all among them.
#[test]
fn every_cell_is_drawn_in_the_style_of_its_tone() {
    use gpufleet::app::{Column, tone};
    use gpufleet::view::Tone;
    let mut a = app(false);
    let theme = Theme::default();
    let mut term = Terminal::new(TestBackend::new(220, 20)).unwrap();
    term.draw(|f| {
        ui::draw(f, &a, &theme);
    })
    .unwrap();
    a.ensure_view();
    let buf = term.backend().buffer().clone();
    let line = |y: u16| -> String { (0..220).map(|x| buf[(x, y)].symbol().to_string()).collect() };
    let (_, header) = find(&term, "NODE");
    let titles = line(header);
    let selected = a.selected_row().map(|r| r.name.clone());
    let mut checked = Vec::new();
    for row in a.rows.iter().filter(|r| r.report.is_some()) {
        if Some(&row.name) == selected.as_ref() {
            continue;
        }
        let (_, y) = find(&term, &format!(" {}  ", row.name));
        for c in Column::matrix() {
            let Some(i) = titles.find(&format!("  {}", c.title())) else {
                continue;
            };
            let x = titles[..i + 2].chars().count() as u16;
            let drawn = &buf[(x, y)];
            if drawn.symbol() == " " {
                continue;
            }
            let want = theme.tone(tone(row, c));
            assert_eq!(
                drawn.fg,
                want.fg.unwrap_or(ratatui::style::Color::Reset),
                "{c:?} of {}",
                row.name
            );
            assert!(
                drawn.modifier.contains(want.add_modifier),
                "{c:?} of {}",
                row.name
            );
            checked.push(tone(row, c));
        }
    }
    for t in [Tone::Warn, Tone::Crit, Tone::Dim, Tone::Plain] {
        assert!(checked.contains(&t), "no {t:?} cell drawn: {checked:?}");
    }
    assert!(checked.iter().any(|t| matches!(t, Tone::Status(_))));
}
