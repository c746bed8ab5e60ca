//! Moving through the table: the filter, sorting (keys and header clicks), grouping by a
//! label, and where the cursor stays as results arrive.

use crate::{app, body, key, render, typed};
use gpufleet::app::App;
use gpufleet::app::Msg;
use gpufleet::ui;
use gpufleet::ui::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;
use ratatui::crossterm::event::KeyEvent;
use ratatui::crossterm::event::KeyModifiers;

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
