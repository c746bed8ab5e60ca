//! The overlays over the table: the help (from the keymap, scrolling, padding) and the upgrade
//! plan's confirmation.

use crate::{app, key, render};
use gpufleet::app::Msg;
use ratatui::crossterm::event::KeyCode;

#[test]
fn help_overlay_comes_from_the_keymap() {
    let mut a = app(false);
    key(&mut a, KeyCode::Char('?'));
    insta::assert_snapshot!("help", render(&mut a, 120, 34));
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
