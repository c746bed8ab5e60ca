//! The table: its layout at each size, cut cells, columns shown only when needed, stale rows,
//! the header's counts, and each cell drawn in its tone's style.

use crate::{app, find, fixture_reports, key, render, typed, unknown_report};
use gpufleet::app::App;
use gpufleet::app::Keymap;
use gpufleet::app::Msg;
use gpufleet::app::Row;
use gpufleet::ui;
use gpufleet::ui::Role;
use gpufleet::ui::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;

#[test]
fn matrix_with_mixed_statuses() {
    let mut a = app(false);
    insta::assert_snapshot!("matrix", render(&mut a, 160, 20));
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
