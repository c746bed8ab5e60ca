//! The help overlay: every bound action with its keys (from the active keymap), the mouse, the
//! canary mark, the read-only note and the statuses, padded inside its border.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{App, Role, Theme, draw_popup};
use crate::model::NodeStatus;

/// The help overlay; returns how far it can scroll.
pub(super) fn draw_help(f: &mut Frame, app: &App, t: &Theme, area: Rect) -> u16 {
    // Wide enough for the longest status meaning beside its name (inside a border and a cell
    // of padding each side), narrower on a small terminal, where lines wrap.
    let w = area.width.saturating_sub(8).min(104);
    let actions: Vec<_> = app.keymap.bound().collect();
    let legend = status_legend(t);
    // What an action does wraps under itself, past the keys column.
    let text_width = usize::from(w.saturating_sub(4)).saturating_sub(20).max(20);
    let mut lines: Vec<Line> = Vec::new();
    for a in &actions {
        for (k, part) in wrap_words(a.help(), text_width).into_iter().enumerate() {
            let keys = if k == 0 {
                app.keymap.keys_of(*a)
            } else {
                String::new()
            };
            lines.push(Line::from(vec![
                Span::styled(format!("{keys:<20}"), t.role(Role::Header)),
                Span::raw(part),
            ]));
        }
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        "mouse: click a row to select it, a header to sort by it; wheel scrolls",
        t.role(Role::Dim),
    )));
    lines.push(Line::from(Span::styled(
        "◆ before a node's name: a canary (inventory `canary = true`), upgraded before the waves",
        t.role(Role::Dim),
    )));
    if app.read_only {
        lines.push(Line::from(Span::styled(
            "read-only: actions that change nodes are not available",
            t.role(Role::Warn),
        )));
    }
    lines.push(Line::default());
    lines.extend(legend);
    // Lines wrap inside the borders and their padding: the popup is as tall as the rows they
    // take, up to the screen's height, and scrolls past it.
    let inner = usize::from(w.saturating_sub(4)).max(1);
    let rows: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner)).sum();
    let h = (rows as u16 + 2).min(area.height.saturating_sub(2));
    let popup = Rect {
        x: area.x + (area.width.saturating_sub(w)) / 2,
        y: area.y + (area.height.saturating_sub(h)) / 2,
        width: w,
        height: h,
    };
    let max = (rows as u16).saturating_sub(popup.height.saturating_sub(2));
    let title = if max > 0 {
        " keys (from the active keymap) · j/k scroll · ? closes "
    } else {
        " keys (from the active keymap) · ? closes "
    };
    draw_popup(
        f,
        t,
        popup,
        lines,
        title,
        Role::Border,
        app.detail_scroll.min(max),
    );
    max
}

/// `text` in lines of at most `width` characters, broken between words (a longer word stands
/// alone on its line).
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push(line);
    out
}

/// The statuses, worst first (the matrix's sort order), each in its theme style with what it
/// means: a title line, then one line per status.
pub fn status_legend<'a>(t: &Theme) -> Vec<Line<'a>> {
    let mut statuses = NodeStatus::ALL;
    statuses.sort();
    let mut out = vec![Line::from(Span::styled(
        "statuses, worst first (filter: status:NAME)",
        t.role(Role::Header),
    ))];
    out.extend(statuses.iter().map(|s| {
        Line::from(vec![
            Span::styled(s.as_str(), t.status(*s)),
            Span::raw(" ".repeat(20 - s.as_str().len())),
            Span::raw(s.meaning()),
        ])
    }));
    out
}
