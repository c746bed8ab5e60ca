//! Unit tests of the app's state machine.

use super::*;
use crate::model::Code;
use crate::model::report::NodeReport;
use crate::probe::RawRun;
use ratatui::crossterm::event::{KeyCode, KeyModifiers};

fn report(name: &str, status: NodeStatus) -> NodeReport {
    let mut r = NodeReport::unreachable(
        name.into(),
        Code::SshTimeout,
        "x".into(),
        vec![],
        String::new(),
        0,
    );
    r.status = status;
    r
}

fn app(n: usize) -> App {
    let rows = (0..n).map(|i| Row::new(format!("gpu{i:03}"))).collect();
    App::new(rows, Keymap::default(), false, "test".into())
}

fn key(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

#[test]
fn stale_generations_are_dropped() {
    let mut a = app(2);
    let names = vec!["gpu000".to_string(), "gpu001".to_string()];
    a.update(Msg::ScanStarted {
        generation: 1,
        names: names.clone(),
    });
    a.update(Msg::ScanStarted {
        generation: 2,
        names,
    });
    a.update(Msg::NodeDone {
        generation: 1,
        report: Box::new(report("gpu000", NodeStatus::Ready)),
        raw: None,
    });
    assert!(a.rows[0].report.is_none());
    a.update(Msg::NodeDone {
        generation: 2,
        report: Box::new(report("gpu000", NodeStatus::Migrate)),
        raw: None,
    });
    assert_eq!(a.rows[0].status(), Some(NodeStatus::Migrate));
    assert_eq!(a.progress.done, 1);
}

#[test]
fn sort_filter_and_selection_follow_the_node() {
    let mut a = app(3);
    a.update(Msg::ScanStarted {
        generation: 1,
        names: a.rows.iter().map(|r| r.name.clone()).collect(),
    });
    for (n, s) in [
        ("gpu000", NodeStatus::Ready),
        ("gpu001", NodeStatus::Attention),
        ("gpu002", NodeStatus::Migrate),
    ] {
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(report(n, s)),
            raw: None,
        });
    }
    let names = |a: &App| {
        a.view
            .iter()
            .map(|&i| a.rows[i].name.clone())
            .collect::<Vec<_>>()
    };
    a.ensure_view();
    assert_eq!(
        names(&a),
        ["gpu001", "gpu002", "gpu000"],
        "worst status first"
    );
    assert_eq!(
        a.selected_row().unwrap().name,
        "gpu001",
        "the cursor nobody moved stays on the first row (the worst node), not on its node"
    );
    a.update(key('g'));
    a.update(key('j'));
    assert_eq!(a.selected_row().unwrap().name, "gpu002");
    a.update(key('S'));
    assert_eq!(names(&a), ["gpu000", "gpu002", "gpu001"]);
    assert_eq!(
        a.selected_row().unwrap().name,
        "gpu002",
        "selection follows the node"
    );
    a.update(key('/'));
    for c in "status:mig".chars() {
        a.update(key(c));
    }
    a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    assert_eq!(names(&a), ["gpu002"]);
    a.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    assert_eq!(a.view.len(), 3);
    // Esc while typing puts back the filter from before (it applies as it is typed).
    a.update(key('/'));
    for c in "status:mig".chars() {
        a.update(key(c));
    }
    assert_eq!(names(&a), ["gpu002"]);
    a.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    assert_eq!(a.filter, "");
    assert_eq!(a.view.len(), 3);
}

#[test]
fn unknown_is_counted_filtered_and_sorted_after_attention() {
    let mut a = app(4);
    a.update(Msg::ScanStarted {
        generation: 1,
        names: a.rows.iter().map(|r| r.name.clone()).collect(),
    });
    for (n, s) in [
        ("gpu000", NodeStatus::Ready),
        ("gpu001", NodeStatus::Unknown),
        ("gpu002", NodeStatus::Blocked),
        ("gpu003", NodeStatus::Attention),
    ] {
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(report(n, s)),
            raw: None,
        });
    }
    a.ensure_view();
    let names =
        |a: &App| -> Vec<String> { a.view.iter().map(|&i| a.rows[i].name.clone()).collect() };
    assert_eq!(names(&a), ["gpu003", "gpu001", "gpu002", "gpu000"]);
    assert_eq!(a.counts().get(&NodeStatus::Unknown), Some(&1));
    assert_eq!(cell(&a.rows[1], Column::Status), "unknown");
    a.update(key('/'));
    for c in "status:unknown".chars() {
        a.update(key(c));
    }
    a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    assert_eq!(names(&a), ["gpu001"]);
    assert!(!matches(&a.rows[1], "status:unreachable"));
}

#[test]
fn node_text_in_cells_is_screen_safe() {
    let mut r = report("evil\x1b]0;t\x07\u{202e}\u{fffd}", NodeStatus::Ready);
    r.kernel = Some(crate::model::report::KernelJson {
        release: Some("6.8\u{2028}x\u{feff}".into()),
    });
    let mut row = Row::new(r.name.clone());
    row.report = Some(r);
    row.refresh();
    assert_eq!(
        cell(&row, Column::Node),
        "evil\\x1b]0;t\\x07\\u{202e}\\u{fffd}"
    );
    assert_eq!(cell(&row, Column::Kernel), "6.8\\u{2028}x\\u{feff}");
    row.marked = true;
    row.refresh();
    assert!(!cell(&row, Column::Node).contains('\x1b'));
}

#[test]
fn labels_groups_and_canary_filters() {
    let mut rows: Vec<Row> = (0..3).map(|i| Row::new(format!("n{i}"))).collect();
    rows[0].canary = true;
    rows[1].labels.insert("rack".into(), "r2".into());
    rows[2].groups.push("a100".into());
    let a = App::new(rows, Keymap::default(), false, String::new());
    assert!(matches(&a.rows[0], "label:canary"));
    assert!(matches(&a.rows[1], "label:rack=r2"));
    assert!(matches(&a.rows[1], "label:r2"));
    assert!(matches(&a.rows[2], "group:a100 n2"));
    assert!(!matches(&a.rows[2], "group:a100 n1"));
}

#[test]
fn quit_rescan_cancel_export_effects() {
    let mut a = app(2);
    assert_eq!(a.update(key('q')), vec![Effect::Quit]);
    assert_eq!(
        a.update(key('R')),
        vec![Effect::Scan {
            generation: 1,
            names: None
        }]
    );
    a.update(Msg::ScanStarted {
        generation: 1,
        names: vec!["gpu000".into()],
    });
    assert_eq!(a.update(key('x')), vec![Effect::Cancel]);
    assert!(!a.progress.running);
    a.update(Msg::NodeDone {
        generation: 1,
        report: Box::new(report("gpu000", NodeStatus::Ready)),
        raw: None,
    });
    assert!(
        a.rows[0].report.is_none(),
        "results after cancel are ignored"
    );
    assert!(matches!(
        a.update(key('e'))[0],
        Effect::Export {
            format: ExportFormat::Json,
            ..
        }
    ));
}

#[test]
fn auto_refresh_starts_a_scan_when_due() {
    let mut a = app(1);
    assert!(
        a.update(Msg::Tick {
            since_scan_secs: Some(100)
        })
        .is_empty(),
        "off by default"
    );
    a.refresh_secs = Some(30);
    assert!(
        a.update(Msg::Tick {
            since_scan_secs: Some(10)
        })
        .is_empty()
    );
    assert_eq!(
        a.update(Msg::Tick {
            since_scan_secs: Some(30)
        })
        .len(),
        1
    );
}

#[test]
fn upgrade_needs_the_typed_node_count_and_read_only_refuses_it() {
    let mut a = app(2);
    a.update(Msg::ScanStarted {
        generation: 1,
        names: vec!["gpu000".into(), "gpu001".into()],
    });
    for n in ["gpu000", "gpu001"] {
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(report(n, NodeStatus::Migrate)),
            raw: None,
        });
    }
    a.update(key('g'));
    a.update(Msg::Key(KeyEvent::new(
        KeyCode::Char(' '),
        KeyModifiers::NONE,
    )));
    a.update(Msg::Key(KeyEvent::new(
        KeyCode::Char(' '),
        KeyModifiers::NONE,
    )));
    assert_eq!(a.rows.iter().filter(|r| r.marked).count(), 2);
    let e = a.update(key('U'));
    assert!(matches!(&e[..], [Effect::PlanUpgrade { nodes }] if nodes.len() == 2));
    let planned = Box::new(crate::actions::rollout::Plan {
        rollout: "r-1".into(),
        mode: crate::actions::rollout::Mode::Wave,
        nodes: ["gpu000", "gpu001"]
            .iter()
            .map(|n| crate::actions::rollout::NodePlan {
                node: n.to_string(),
                steps: vec![crate::actions::rollout::Step::Reprobe],
                next_boot: None,
                note: None,
            })
            .collect(),
        skipped: vec![],
        budget: None,
    });
    a.update(Msg::UpgradePlanned(Ok((
        vec!["plan".into()],
        planned.clone(),
    ))));
    assert_eq!(a.mode, Mode::Confirm);
    // A wrong count cancels.
    a.update(key('1'));
    assert!(
        a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)))
            .is_empty()
    );
    assert_eq!(a.mode, Mode::Matrix);
    a.update(key('U'));
    a.update(Msg::UpgradePlanned(Ok((vec![], planned.clone()))));
    a.update(key('2'));
    let e = a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    // The confirmed plan itself is what the runtime runs.
    assert_eq!(e, vec![Effect::RunUpgrade { plan: planned }]);

    // Read-only: the key is unbound, absent from help, and the action refused if reached.
    let rows = vec![Row::new("n")];
    let (km, _) = Keymap::new(&Default::default(), true);
    assert!(
        !km.bound()
            .any(|x| x == Action::Upgrade || x == Action::Mark)
    );
    let mut ro = App::new(rows, km, true, String::new());
    assert!(ro.update(key('U')).is_empty());
    assert!(
        ro.message
            .as_deref()
            .unwrap_or("")
            .contains("read-only session: `upgrade` is off"),
        "{:?}",
        ro.message
    );
    ro.message = None;
    assert!(ro.act(Action::Upgrade).is_empty());
    assert!(ro.message.as_deref().unwrap_or("").contains("read-only"));
}

#[test]
fn quitting_during_an_upgrade_takes_a_second_press() {
    let mut a = app(1);
    a.upgrading = true;
    assert!(a.update(key('q')).is_empty());
    assert!(a.message.as_deref().unwrap().contains("--resume"));
    assert_eq!(a.update(key('q')), vec![Effect::Quit]);
}

#[test]
fn messages_clear_themselves() {
    let mut a = app(1);
    a.message = Some("exported".into());
    for _ in 0..=MESSAGE_TICKS {
        a.update(Msg::Tick {
            since_scan_secs: None,
        });
    }
    assert_eq!(a.message, None);
    a.upgrading = true;
    a.message = Some("upgrading".into());
    for _ in 0..=MESSAGE_TICKS * 2 {
        a.update(Msg::Tick {
            since_scan_secs: None,
        });
    }
    assert!(a.message.is_some(), "kept while an upgrade runs");
}

/// Issue 13 item 6: filters take OR (`status:migrate,blocked`) and negation (`!status:ready`);
/// an unknown key or value is an error (shown in the filter bar), and then no row passes.
#[test]
fn filters_take_or_and_negation_and_name_unknown_keys_and_values() {
    let mut a = app(4);
    a.update(Msg::ScanStarted {
        generation: 1,
        names: a.rows.iter().map(|r| r.name.clone()).collect(),
    });
    for (n, s) in [
        ("gpu000", NodeStatus::Ready),
        ("gpu001", NodeStatus::Migrate),
        ("gpu002", NodeStatus::Blocked),
    ] {
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(report(n, s)),
            raw: None,
        });
    }
    let shown = |a: &mut App, f: &str| {
        a.filter = f.into();
        a.rebuild_view();
        let mut v: Vec<String> = a.view.iter().map(|&i| a.rows[i].name.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(
        shown(&mut a, "status:migrate,blocked"),
        ["gpu001", "gpu002"]
    );
    assert_eq!(
        shown(&mut a, "!status:ready"),
        ["gpu001", "gpu002", "gpu003"]
    );
    assert_eq!(shown(&mut a, "!status:ready,pending"), ["gpu001", "gpu002"]);
    assert_eq!(shown(&mut a, "status:mig,ready !gpu000"), ["gpu001"]);
    assert_eq!(a.filter_error, None);
    assert!(shown(&mut a, "stauts:ready").is_empty());
    assert_eq!(
        a.filter_error.as_deref(),
        Some(
            "unknown filter key `stauts:` (status: flavor: label: group: reason:); did you mean `status:`?"
        )
    );
    assert!(shown(&mut a, "status:redy").is_empty());
    assert_eq!(
        a.filter_error.as_deref(),
        Some("no status `redy`; did you mean `ready`?")
    );
    assert!(shown(&mut a, "flavor:closed").is_empty());
    assert!(
        a.filter_error
            .as_deref()
            .unwrap()
            .starts_with("no flavor `closed`")
    );
    assert!(shown(&mut a, "reason:nonsense").is_empty());
    assert!(shown(&mut a, "status:").is_empty());
    assert!(
        a.filter_error
            .as_deref()
            .unwrap()
            .contains("value is missing")
    );
    assert_eq!(shown(&mut a, "").len(), 4);
    assert_eq!(a.filter_error, None);
}

/// Issue 13 item 6: rows left over from a cancelled scan are marked stale (their report is the
/// previous scan's); a node never scanned says `cancelled`; a rescan clears the mark.
#[test]
fn rows_left_over_from_a_cancelled_scan_are_marked_stale() {
    let mut a = app(3);
    let names: Vec<String> = a.rows.iter().map(|r| r.name.clone()).collect();
    a.update(Msg::ScanStarted {
        generation: 1,
        names: names[..2].to_vec(),
    });
    for n in &names[..2] {
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(report(n, NodeStatus::Migrate)),
            raw: None,
        });
    }
    a.update(Msg::ScanFinished { generation: 1 });
    // A second scan: gpu000's result comes, then the operator cancels.
    let Effect::Scan { generation, .. } = a.update(key('R'))[0].clone() else {
        panic!("R starts a scan")
    };
    a.update(Msg::ScanStarted {
        generation,
        names: names.clone(),
    });
    a.update(Msg::NodeDone {
        generation,
        report: Box::new(report("gpu000", NodeStatus::Ready)),
        raw: None,
    });
    a.update(Msg::NodeRunning {
        generation,
        name: "gpu001".into(),
    });
    assert_eq!(a.update(key('x')), vec![Effect::Cancel]);
    assert!(!a.rows[0].stale());
    assert_eq!(cell(&a.rows[0], Column::Node), "gpu000");
    assert!(a.rows[1].stale());
    assert_eq!(cell(&a.rows[1], Column::Node), "gpu001 (stale)");
    assert_eq!(cell(&a.rows[1], Column::Status), "migrate");
    assert!(!a.rows[2].stale());
    assert_eq!(cell(&a.rows[2], Column::Status), "cancelled");
    assert!(
        a.message
            .as_deref()
            .unwrap()
            .contains("1 node(s) marked (stale)")
    );
    // The filter finds them.
    a.filter = "stale".into();
    a.rebuild_view();
    assert_eq!(a.view, [1]);
    // Rescanning the node clears the mark.
    a.update(Msg::ScanStarted {
        generation: generation + 2,
        names: vec!["gpu001".into()],
    });
    assert!(!a.rows[1].stale());
    assert_eq!(cell(&a.rows[1], Column::Node), "gpu001");
}

/// The sort keys made once per rebuild (`app/sort.rs`) order rows as comparing reports with
/// [`Column::compare`] (and computed cells for cell-sorted columns) does, for every matrix
/// column, both ways, grouped or not, with rows still pending among them.
#[test]
fn the_keyed_sort_orders_as_column_compare_does() {
    use crate::probe::{RawRun, RunEnd};
    use std::cmp::Ordering;
    let raw = RawRun {
        boundary: "gpufleet-RAW".into(),
        output: include_bytes!("../../docs/examples/h200-probe-raw.txt").to_vec(),
        end: RunEnd::Completed,
        duration: std::time::Duration::from_millis(100),
        exit: None,
    };
    let base = crate::probe::report(
        Some("x".into()),
        &raw,
        &crate::model::Thresholds::default(),
        "2026-11-30T10:00:00Z".into(),
    );
    let kernels = [
        Some("5.15.0-100-generic"),
        Some("5.15.0-9-generic"),
        Some("6.8.0"),
        None,
    ];
    let drivers = [Some("550.54.15"), Some("535.1"), Some("580.65.06"), None];
    let n = 24;
    let mut rows = Vec::new();
    for i in 0..n {
        let mut row = Row::new(format!("gpu{:02}", (i * 7) % n));
        if i % 2 == 0 {
            row.labels.insert("rack".into(), format!("r{}", i % 3));
        }
        rows.push(row);
    }
    let mut a = App::new(rows, Keymap::default(), false, "test".into());
    let names: Vec<String> = a.rows.iter().map(|r| r.name.clone()).collect();
    a.update(Msg::ScanStarted {
        generation: 1,
        names: names.clone(),
    });
    for (i, name) in names.iter().enumerate() {
        if i % 11 == 5 {
            continue; // still pending: no report
        }
        let mut r = if i % 9 == 4 {
            report(name, NodeStatus::Unreachable)
        } else {
            base.clone()
        };
        r.name = name.clone();
        if r.status != NodeStatus::Unreachable {
            r.status = NodeStatus::ALL[i % NodeStatus::ALL.len()];
            if let Some(k) = r.kernel.as_mut() {
                k.release = kernels[i % kernels.len()].map(str::to_string);
            }
            if let Some(d) = r.driver.as_mut() {
                d.version = drivers[(i / 2) % drivers.len()].map(str::to_string);
            }
            if let Some(g) = r.gpus.as_mut() {
                g.truncate(i % 4);
            }
        }
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(r),
            raw: None,
        });
    }
    // The comparison as it was made before the keys: from the reports and computed cells.
    let reference = |a: &App, x: &Row, y: &Row| -> Ordering {
        let group = |r: &Row| {
            a.group_by.as_ref().map(|k| {
                r.labels
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| "\u{10ffff}".into())
            })
        };
        let by_group = group(x).cmp(&group(y));
        if by_group != Ordering::Equal {
            return by_group;
        }
        let ord = if a.sort.spec().sort == crate::view::columns::SortKey::Cell {
            let (p, q) = (compute_cell(x, a.sort).text, compute_cell(y, a.sort).text);
            (p.is_empty(), p).cmp(&(q.is_empty(), q))
        } else {
            match (&x.report, &y.report) {
                (Some(p), Some(q)) => a.sort.compare(p, q),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
        };
        let ord = if a.descending { ord.reverse() } else { ord };
        ord.then_with(|| x.name.cmp(&y.name))
    };
    for group_by in [None, Some("rack".to_string())] {
        for column in Column::matrix() {
            for descending in [false, true] {
                a.group_by = group_by.clone();
                a.sort = column;
                a.descending = descending;
                a.rebuild_view();
                let mut want: Vec<usize> = (0..a.rows.len()).collect();
                want.sort_by(|&i, &j| reference(&a, &a.rows[i], &a.rows[j]));
                let shown = |v: &[usize]| {
                    v.iter()
                        .map(|&i| a.rows[i].name.clone())
                        .collect::<Vec<_>>()
                };
                assert_eq!(
                    shown(&a.view),
                    shown(&want),
                    "sorted by {column:?}, descending {descending}, grouped by {group_by:?}"
                );
            }
        }
    }
}

/// Free filter text is looked for in the node, kernel, driver and GPU cells, ignoring ASCII
/// case, and never across two cells.
#[test]
fn free_text_matches_one_cell_ignoring_ascii_case() {
    let mut r = Row::new("GPU07.Rack07-ÉTÉ");
    r.report = Some(report("GPU07.Rack07-ÉTÉ", NodeStatus::Ready));
    r.refresh();
    assert_eq!(cell(&r, Column::Kernel), "?");
    for (filter, want) in [
        ("rack07", true),
        ("gpu07.rack07-ÉtÉ", true),
        ("été", false),  // ASCII case only, as before
        ("ÉtÉ?", false), // the end of one cell and the start of the next
        ("status:ready rack", true),
    ] {
        assert_eq!(matches(&r, filter), want, "{filter}");
    }
}

/// Keys and clicks act on the view as last drawn: a result that re-sorts the rows before the
/// next frame does not move the row under the cursor or the mouse.
#[test]
fn input_acts_on_the_rows_as_drawn_while_results_stream_in() {
    use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mut a = app(3);
    let names: Vec<String> = a.rows.iter().map(|r| r.name.clone()).collect();
    a.update(Msg::ScanStarted {
        generation: 1,
        names: names.clone(),
    });
    for n in &names {
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(report(n, NodeStatus::Ready)),
            raw: None,
        });
    }
    a.ensure_view(); // drawn: gpu000, gpu001, gpu002
    a.drawn.body_y = 3;
    a.drawn.body_rows = vec![Some(0), Some(1), Some(2)];
    // gpu002 turns attention (it will sort first); the screen still shows the old order.
    a.update(Msg::NodeDone {
        generation: 1,
        report: Box::new(report("gpu002", NodeStatus::Attention)),
        raw: None,
    });
    a.update(Msg::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: 2,
        row: 4,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(a.selected_row().unwrap().name, "gpu001", "the row clicked");
    a.update(key('j'));
    assert_eq!(
        a.selected_row().unwrap().name,
        "gpu002",
        "the row shown below"
    );
    a.ensure_view(); // the next frame
    assert_eq!(
        a.view
            .iter()
            .map(|&i| a.rows[i].name.as_str())
            .collect::<Vec<_>>(),
        ["gpu002", "gpu000", "gpu001"]
    );
    assert_eq!(
        a.selected_row().unwrap().name,
        "gpu002",
        "the selection followed its node"
    );
}

/// The raw output kept per node is packed and gives back the same sections; damaged packed
/// bytes are an error, never an empty output.
#[test]
fn raw_output_is_kept_packed_and_unpacks_to_the_same_sections() {
    let run = RawRun {
        boundary: "gpufleet-RAW".into(),
        output: include_bytes!("../../docs/examples/h200-probe-raw.txt").to_vec(),
        end: crate::probe::RunEnd::Completed,
        duration: std::time::Duration::from_millis(1),
        exit: None,
    };
    let raw = RawOutput::of(&run);
    assert_eq!(raw.bytes, run.output.len());
    assert!(
        raw.packed.len() * 2 < run.output.len(),
        "{} packed of {}",
        raw.packed.len(),
        run.output.len()
    );
    let want = crate::model::parse::sections::parse(&run.output, &run.boundary);
    let got = raw.sections().unwrap();
    assert_eq!(got.sections.len(), want.sections.len());
    assert!(got.sections.len() > 10);
    for (g, w) in got.sections.iter().zip(&want.sections) {
        assert_eq!((&g.name, &g.body), (&w.name, &w.body));
    }
    assert_eq!(got.complete, want.complete);
    let mut damaged = raw.clone();
    damaged.packed.truncate(damaged.packed.len() / 2);
    assert!(damaged.sections().is_err());
}

/// Each key as typed, aliases included, parses to its typed key; a free word and `canary` to
/// their own, and the key's name is what errors say.
#[test]
fn filter_keys_parse_to_their_typed_key() {
    let keys = |f: &str| -> Vec<FilterKey> {
        parse_filter(f)
            .unwrap()
            .into_iter()
            .map(|t| t.key)
            .collect()
    };
    assert_eq!(
        keys(
            "status:ready flavor:open module:prop label:rack=r1 group:g reason:peermem a100 canary !canary"
        ),
        [
            FilterKey::Status,
            FilterKey::Flavor,
            FilterKey::Flavor,
            FilterKey::Label,
            FilterKey::Group,
            FilterKey::Reason,
            FilterKey::Text,
            FilterKey::Canary,
            FilterKey::Canary,
        ]
    );
    for (typed, key) in FILTER_KEYS {
        let value = match key {
            FilterKey::Status => "ready",
            FilterKey::Flavor => "open",
            FilterKey::Reason => "peermem",
            _ => "x",
        };
        assert_eq!(keys(&format!("{typed}:{value}"))[..], [key], "{typed}");
    }
    assert!(
        parse_filter("module:closed")
            .unwrap_err()
            .starts_with("no flavor `closed`")
    );
}
