//! The rollout's screens: the words of the typed confirmation (an upgrade, a resume, an
//! abandon, a cancel) and the result pane, which lists each node's outcome whole, wrapped to
//! the pane's width (never cut at the screen's edge) and scrolled when it is taller.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

use super::{App, Role, Theme, draw_popup};
use crate::app::Confirm;
use crate::model::text::screen_safe;

/// The confirmation's title and its warning line (what typing the count does).
pub(super) fn confirm_words(c: &Confirm) -> (String, String) {
    let id = screen_safe(&c.planned.rollout).into_owned();
    (c.kind.title(&id), c.kind.warning(c.names.len(), &id))
}

/// `text` cut into lines of at most `width` terminal cells, between words where it can be
/// and inside a word longer than a line; `indent` cells of spaces start every line after the
/// first. Never loses a character.
pub fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let width = width.max(indent + 1).max(1);
    let mut out = Vec::new();
    let mut line = String::new();
    let mut used = 0usize;
    let cells = |s: &str| s.chars().map(|c| c.width().unwrap_or(0)).sum::<usize>();
    for (i, word) in text.split(' ').enumerate() {
        let w = cells(word);
        let sep = usize::from(i > 0 && used > 0);
        if used > 0 && used + sep + w > width {
            out.push(std::mem::take(&mut line));
            line = " ".repeat(indent);
            used = indent;
        } else if sep == 1 {
            line.push(' ');
            used += 1;
        }
        for ch in word.chars() {
            let cw = ch.width().unwrap_or(0);
            if used + cw > width && used > indent {
                out.push(std::mem::take(&mut line));
                line = " ".repeat(indent);
                used = indent;
            }
            line.push(ch);
            used += cw;
        }
    }
    out.push(line);
    out
}

/// The result pane over `area`; returns how far it can scroll.
pub(super) fn draw_result(f: &mut Frame, app: &App, t: &Theme, area: Rect) -> u16 {
    let Some(r) = &app.result else {
        return 0;
    };
    let w = area.width.saturating_sub(4).clamp(3, 140).min(area.width);
    // Inside the border and a cell of padding each side.
    let inner = usize::from(w.saturating_sub(4)).max(1);
    let mut lines: Vec<Line> = Vec::new();
    for l in wrap(&screen_safe(&r.title), inner, 0) {
        lines.push(Line::from(Span::styled(l, t.role(Role::Title))));
    }
    lines.push(Line::default());
    for n in &r.nodes {
        let node = screen_safe(&n.node);
        let outcome = screen_safe(&n.outcome);
        let role = if n.word.starts_with("failed") || n.word.starts_with("cancel failed") {
            Role::Crit
        } else if n.word == "done" {
            Role::Ok
        } else {
            Role::Warn
        };
        // The node's name on its own line, its outcome under it, indented.
        for l in wrap(&node, inner, 0) {
            lines.push(Line::from(Span::styled(l, t.role(role))));
        }
        for l in wrap(&format!("  {outcome}"), inner, 2) {
            lines.push(Line::from(Span::raw(l)));
        }
    }
    if !r.notes.is_empty() {
        lines.push(Line::default());
        for note in &r.notes {
            for l in wrap(&screen_safe(note), inner, 2) {
                lines.push(Line::from(Span::styled(l, t.role(Role::Dim))));
            }
        }
    }
    let rows = lines.len() as u16;
    // As tall as its lines, up to the screen's height (then it scrolls).
    let h = rows
        .saturating_add(2)
        .min(area.height.saturating_sub(2))
        .max(3)
        .min(area.height);
    let popup = Rect {
        x: area.x + (area.width.saturating_sub(w)) / 2,
        y: area.y + (area.height.saturating_sub(h)) / 2,
        width: w,
        height: h,
    };
    let max = rows.saturating_sub(popup.height.saturating_sub(2));
    let key = app.keymap.keys_of(crate::app::Action::RolloutResult);
    let key = key.split(", ").next().unwrap_or("esc");
    let title = if max > 0 {
        format!(" rollout result · j/k scroll · {key} closes ")
    } else {
        format!(" rollout result · {key} closes ")
    };
    draw_popup(
        f,
        t,
        popup,
        lines,
        &title,
        Role::Border,
        app.detail_scroll.min(max),
    );
    max
}

#[cfg(test)]
mod tests {
    use super::wrap;

    /// Wrapping keeps every character, never passes the width, breaks a word longer than a
    /// line inside it, and indents the lines after the first.
    #[test]
    fn wrapping_keeps_everything_within_the_width() {
        let text = "stopped at step:fail and stays drained: exit status 3: /opt/a/very/long/path/that/is/longer/than/the/line end";
        for width in [5usize, 10, 17, 40, 200] {
            let lines = wrap(text, width, 2);
            for l in &lines {
                assert!(l.chars().count() <= width.max(3), "{width}: {l:?}");
            }
            for l in &lines[1..] {
                assert!(l.starts_with("  "), "{width}: {l:?}");
            }
            let joined: String = lines
                .iter()
                .enumerate()
                .map(|(i, l)| if i == 0 { l.as_str() } else { &l[2..] })
                .collect::<Vec<_>>()
                .join("");
            let squeezed = |s: &str| s.replace(' ', "");
            assert_eq!(squeezed(&joined), squeezed(text), "{width}");
        }
        assert_eq!(wrap("", 10, 0), vec![String::new()]);
        assert_eq!(wrap("日本語の文", 4, 0), vec!["日本", "語の", "文"]);
    }

    /// The result pane on any terminal size: no panic, and at 80x24 the long reason is all
    /// there, none of it past the edge.
    #[test]
    fn the_result_pane_fits_any_terminal() {
        use crate::app::{App, Keymap, Mode, NodeResult, RolloutResult, Row};
        use ratatui::{Terminal, backend::TestBackend};
        let mut app = App::new(vec![Row::new("n")], Keymap::default(), false, String::new());
        let words: Vec<String> = (0..30).map(|i| format!("w{i:02}")).collect();
        app.result = Some(RolloutResult {
            title: "rollout r-1 stopped: 0 upgraded, 1 failed".into(),
            nodes: vec![NodeResult {
                node: "n".into(),
                word: "failed: x".into(),
                outcome: format!("stopped at step:x: {} END", words.join(" ")),
            }],
            notes: vec!["a note".into()],
        });
        app.mode = Mode::Result;
        for (w, h) in [(1u16, 1u16), (3, 2), (10, 3), (40, 10), (80, 24)] {
            let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
            let mut drawn = crate::app::Drawn::default();
            term.draw(|f| drawn = crate::ui::draw(f, &app, &crate::ui::Theme::default()))
                .unwrap();
            if (w, h) == (80, 24) {
                let buf = term.backend().buffer();
                let text: String = (0..h)
                    .map(|y| {
                        (0..w)
                            .map(|x| buf[(x, y)].symbol().to_string())
                            .collect::<String>()
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                for word in words.iter().map(String::as_str).chain(["END", "a note"]) {
                    assert!(text.contains(word), "{word}:\n{text}");
                }
                assert_eq!(drawn.result_max, 0);
            }
        }
    }
}
