//! The detail pane (facts, evidence, scrolling, changing node with it open) and `tui --compare`.

use crate::{app, find, fixture_reports, key, render, screen_lines};
use gpufleet::app::Msg;
use gpufleet::model::NodeReport;
use gpufleet::ui;
use gpufleet::ui::Role;
use gpufleet::ui::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;

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
