//! Drawing only: `draw(frame, &App, &Theme) -> Drawn`. No I/O; the returned layout (where the
//! header and rows landed) goes back into the app for paging and mouse hits. Only the visible
//! rows are formatted, so a frame costs the same for 100 or 10,000 nodes.

mod detail;
mod help;
mod rollout;
pub mod theme;

pub use detail::detail_lines;
use detail::*;
use help::draw_help;
pub use help::status_legend;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, Padding, Paragraph, Row as TRow, Table, TableState, Wrap,
};

pub use theme::{Role, Theme};

use crate::app::{App, Column, Mode, Probe, Row, cell};
use crate::model::text::screen_safe;
use crate::model::{NodeReport, NodeStatus, Severity};

pub use crate::app::Drawn;

/// The narrowest the kernel column is cut to before it is left out.
const KERNEL_MIN: u16 = 10;

/// The narrowest the node column gives way to, for the first columns that would not fit
/// otherwise.
const NODE_MIN: u16 = 15;

/// The priorities of the columns the node column gives way to (module, driver,
/// nvidia-peermem, DMA-BUF: `Spec::priority` ≤ this).
const FIRST_COLUMNS: u8 = 5;

const SPINNER: [&str; 8] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧"];

/// Draws the whole screen.
pub fn draw(f: &mut Frame, app: &App, t: &Theme) -> Drawn {
    let area = f.area();
    let legend_rows = u16::from(app.compare.is_some());
    let [top, legend, main, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(legend_rows),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_top(f, app, t, top);
    if legend_rows > 0 {
        draw_compare_legend(f, app, t, legend);
    }
    let (table_area, detail_area) = if app.mode == Mode::Detail {
        let [a, b] =
            Layout::vertical([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(main);
        (a, Some(b))
    } else {
        (main, None)
    };
    let mut drawn = draw_table(f, app, t, table_area);
    if let Some(d) = detail_area {
        drawn.detail_max = draw_detail(f, app, t, d);
    }
    draw_bottom(f, app, t, bottom);
    if app.mode == Mode::Help {
        drawn.help_max = draw_help(f, app, t, area);
    }
    if app.mode == Mode::Confirm {
        draw_confirm(f, app, t, area);
    }
    if app.mode == Mode::Result {
        drawn.result_max = rollout::draw_result(f, app, t, area);
    }
    drawn
}

/// The upgrade plan and the prompt for the node count.
fn draw_confirm(f: &mut Frame, app: &App, t: &Theme, area: Rect) {
    let Some(c) = &app.confirm else {
        return;
    };
    let w = area.width.saturating_sub(6).min(140);
    let h = area.height.saturating_sub(4);
    let popup = Rect {
        x: area.x + (area.width.saturating_sub(w)) / 2,
        y: area.y + 2,
        width: w,
        height: h,
    };
    let (title, warning) = rollout::confirm_words(c);
    let names: Vec<String> = c
        .names
        .iter()
        .map(|x| screen_safe(x).into_owned())
        .collect();
    let mut lines: Vec<Line> = vec![
        Line::from(Span::styled(
            format!("nodes: {}", names.join(", ")),
            t.role(Role::Title),
        )),
        Line::from(Span::styled(warning, t.role(Role::Warn))),
        Line::from(vec![
            Span::styled("node count: ", t.role(Role::Title)),
            Span::raw(c.input.clone()),
            Span::styled("█", t.role(Role::Dim)),
        ]),
        Line::default(),
    ];
    lines.extend(
        c.plan
            .iter()
            .map(|l| Line::from(Span::raw(screen_safe(l).into_owned()))),
    );
    draw_popup(f, t, popup, lines, &title, Role::Crit, app.detail_scroll);
}

/// The one header line: the title, the read-only badge, while a scan runs its progress (a
/// spinner and done/total), the count per status (worst first), stale / pending / cancelled
/// rows, when the scan ended `scanned N/M`, and the source (inventory or files), its middle cut to fit. The news comes
/// first: a narrow terminal loses the source's middle, then the end of the line, never the
/// counts.
fn draw_top(f: &mut Frame, app: &App, t: &Theme, area: Rect) {
    let mut spans = vec![
        Span::styled(" gpufleet ", t.role(Role::Title)),
        Span::raw(" "),
    ];
    if app.read_only {
        spans.push(Span::styled(" READ-ONLY ", t.role(Role::Badge)));
        spans.push(Span::raw("  "));
    }
    let p = app.progress;
    if p.running {
        spans.push(Span::styled(
            format!(
                "{} {}/{}",
                SPINNER[app.spin % SPINNER.len()],
                p.done,
                p.total
            ),
            t.role(Role::Gauge),
        ));
        spans.push(Span::raw("  "));
    }
    let counts = app.counts();
    let mut worst_first = NodeStatus::ALL;
    worst_first.sort();
    for s in worst_first {
        let n = counts.get(&s).copied().unwrap_or(0);
        if n > 0 {
            spans.push(Span::styled(format!("{n} {s}"), t.status(s)));
            spans.push(Span::raw("  "));
        }
    }
    let stale = app.rows.iter().filter(|r| r.stale()).count();
    if stale > 0 {
        spans.push(Span::styled(format!("{stale} stale"), t.role(Role::Dim)));
        spans.push(Span::raw("  "));
    }
    let unscanned = |cancelled: bool| {
        app.rows
            .iter()
            .filter(|r| r.report.is_none() && (r.probe == Probe::Cancelled) == cancelled)
            .count()
    };
    let pending = unscanned(false);
    if pending > 0 && !p.running {
        spans.push(Span::styled(
            format!("{pending} pending"),
            t.role(Role::Dim),
        ));
        spans.push(Span::raw("  "));
    }
    let cancelled = unscanned(true);
    if cancelled > 0 {
        spans.push(Span::styled(
            format!("{cancelled} not scanned (cancelled)"),
            t.role(Role::Dim),
        ));
        spans.push(Span::raw("  "));
    }
    // The end of the scan only whole: a cut `scanned 16/1` would say something else.
    let mut used: usize = spans.iter().map(|s| s.width()).sum();
    let ended = match (p.running, p.total) {
        (true, _) => None,
        (false, 0) => Some("not scanned yet".to_string()),
        (false, total) => Some(format!("scanned {}/{total}", p.done)),
    };
    if let Some(e) = ended.filter(|e| used + e.chars().count() <= usize::from(area.width)) {
        used += e.chars().count() + 2;
        spans.push(Span::styled(e, t.role(Role::Dim)));
        spans.push(Span::raw("  "));
    }
    let room = usize::from(area.width).saturating_sub(used);
    let source = screen_safe(&app.source);
    if room >= 24 {
        spans.push(Span::styled(
            crate::model::text::clip_middle(&source, room),
            t.role(Role::Dim),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The `--compare` legend: what the marks mean, and how many nodes changed, were added and
/// were removed (those named, as they have no row).
fn draw_compare_legend(f: &mut Frame, app: &App, t: &Theme, area: Rect) {
    let Some(c) = &app.compare else {
        return;
    };
    let changed = app
        .rows
        .iter()
        .filter(|r| matches!(r.diff, Some(crate::app::RowDiff::Changed(_))))
        .count();
    let added = app
        .rows
        .iter()
        .filter(|r| r.diff == Some(crate::app::RowDiff::Added))
        .count();
    let mut removed = format!("{} removed", c.removed.len());
    if !c.removed.is_empty() {
        let names: Vec<String> = c
            .removed
            .iter()
            .take(5)
            .map(|n| screen_safe(n).into_owned())
            .collect();
        removed.push_str(&format!(": {}", names.join(", ")));
        if c.removed.len() > 5 {
            removed.push_str(&format!(" (+{} more)", c.removed.len() - 5));
        }
    }
    let line = Line::from(vec![
        Span::styled(
            format!(" against {} ", screen_safe(&c.source)),
            t.role(Role::Title),
        ),
        Span::styled(" changed ", t.role(Role::Changed)),
        Span::styled(
            " cell · * changed node · + added node · ",
            t.role(Role::Dim),
        ),
        Span::raw(format!("{changed} changed, {added} added, {removed}")),
    ]);
    f.render_widget(Paragraph::new(line), area);
}

/// Column widths for the visible rows; `None` hides a column. Columns join in priority order
/// while they fit beside the reasons column's minimum (node, status, module, kernel, driver,
/// DMA-BUF, peermem, next boot, CC, GPUs); the kernel is cut rather than left out (down to
/// [`KERNEL_MIN`], the node column giving some room), so it stays at 80 columns; the reasons
/// column takes what is left. Hidden facts stay in the detail pane.
fn widths(app: &App, rows: &[&Row], total: u16) -> Vec<Option<u16>> {
    let cols: Vec<Column> = Column::matrix().collect();
    let natural: Vec<u16> = cols
        .iter()
        .map(|c| {
            // The canary marker "◆ " goes before the node name.
            let marker = |r: &&Row| {
                if *c != Column::Node {
                    return 0;
                }
                if r.canary { 2 } else { 0 }
            };
            let content = rows
                .iter()
                .map(|r| cell(r, *c).chars().count() + marker(r))
                .max()
                .unwrap_or(0);
            let title = c.title().chars().count() + usize::from(app.sort == *c);
            // The markers come on top of the name's own maximum.
            let markers = rows.iter().map(marker).max().unwrap_or(0) as u16;
            let spec = c.spec();
            // The sort arrow comes on top of a title as wide as the column's maximum (MIN CC).
            let arrow = u16::from(app.sort == *c);
            (content.max(title) as u16).clamp(spec.min, spec.max + markers + arrow)
        })
        .collect();
    // Columns join in priority order; the one of priority u8::MAX (reasons) takes the rest.
    let mut order: Vec<usize> = (0..cols.len())
        .filter(|&i| cols[i].spec().priority != u8::MAX)
        .collect();
    order.sort_by_key(|&i| cols[i].spec().priority);
    let rest = cols.iter().position(|c| c.spec().priority == u8::MAX);
    let reserve = rest.map_or(0, |i| 2 + cols[i].spec().min);
    let mut out = vec![None; cols.len()];
    let mut used: u16 = 2; // highlight symbol
    let node = cols.iter().position(|c| *c == Column::Node);
    // The reasons column keeps its minimum once node and status are in: it says why.
    for (k, &i) in order.iter().enumerate() {
        if cols[i].spec().optional && rows.iter().all(|r| cell(r, cols[i]).is_empty()) {
            continue;
        }
        let need = natural[i] + if used > 2 { 2 } else { 0 };
        let keep = if k < 2 { 0 } else { reserve };
        let over = (used + need + keep).saturating_sub(total);
        if over == 0 {
            out[i] = Some(natural[i]);
            used += need;
            continue;
        }
        // One of the first columns (module, driver, nvidia-peermem, DMA-BUF) that does not fit
        // takes cells from the node column, which gives down to NODE_MIN (names are then cut in
        // the middle, their distinguishing end kept). The kernel stays in at 80 columns (issue
        // 13): the node gives it up to 12 cells (never below 24) and it is cut, to no less than
        // KERNEL_MIN, ending in `…`. Later columns only join where there is room.
        let Some(n) = node else { continue };
        let Some(w) = out[n] else { continue };
        let (give, width) = if cols[i].spec().priority <= FIRST_COLUMNS {
            let spare = w.saturating_sub(NODE_MIN);
            if over > spare {
                continue;
            }
            (over, natural[i])
        } else if cols[i] == Column::Kernel {
            let spare = w.saturating_sub(24).min(12).min(over);
            let width = natural[i].saturating_sub(over - spare);
            if width < KERNEL_MIN.min(natural[i]) {
                continue;
            }
            (spare, width)
        } else {
            continue;
        };
        out[n] = Some(w - give);
        used -= give;
        out[i] = Some(width);
        used += need - (natural[i] - width);
    }
    if let Some(i) = rest
        && used + 2 + cols[i].spec().min <= total
    {
        out[i] = Some(total - used - 2);
    }
    out
}

/// The value of the grouping label for `r` (`None` when the node lacks it, or no grouping).
fn group_of<'a>(app: &App, r: &'a Row) -> Option<&'a str> {
    app.group_by
        .as_ref()
        .and_then(|k| r.labels.get(k))
        .map(String::as_str)
}

/// A line of the table body: a group's header row, or the node at this position of the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyLine<'a> {
    Group(Option<&'a str>),
    Node(usize),
}

/// The body lines from view position `offset` that fit `page` lines: with a grouping, a header
/// row before each group (and on top, for the group the first row is in).
fn body_lines(app: &App, offset: usize, page: usize) -> Vec<BodyLine<'_>> {
    let mut out = Vec::new();
    let mut current: Option<Option<&str>> = None;
    for pos in offset..app.view.len() {
        if app.group_by.is_some() {
            let g = group_of(app, &app.rows[app.view[pos]]);
            if current != Some(g) {
                // A header with no row under it is left out.
                if out.len() + 2 > page {
                    break;
                }
                out.push(BodyLine::Group(g));
                current = Some(g);
            }
        }
        if out.len() >= page {
            break;
        }
        out.push(BodyLine::Node(pos));
    }
    out
}

/// A group's header text: the label, its value, and its node count per status (over the
/// filtered view).
fn group_header(app: &App, value: Option<&str>) -> String {
    let key = app.group_by.as_deref().unwrap_or_default();
    let mut total = 0;
    let (mut pending, mut cancelled) = (0, 0);
    let mut by_status: std::collections::BTreeMap<NodeStatus, usize> = Default::default();
    for &i in &app.view {
        let r = &app.rows[i];
        if group_of(app, r) == value {
            total += 1;
            match r.status() {
                Some(s) => *by_status.entry(s).or_default() += 1,
                None if r.probe == Probe::Cancelled => cancelled += 1,
                None => pending += 1,
            }
        }
    }
    let mut counts: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
    if pending > 0 {
        counts.push(format!("{pending} pending"));
    }
    if cancelled > 0 {
        counts.push(format!("{cancelled} not scanned (cancelled)"));
    }
    format!(
        "▸ {} {} · {total} node{} · {}",
        screen_safe(key),
        value.map_or_else(|| "(not set)".to_string(), |v| screen_safe(v).into_owned()),
        if total == 1 { "" } else { "s" },
        counts.join(", ")
    )
}

fn draw_table(f: &mut Frame, app: &App, t: &Theme, area: Rect) -> Drawn {
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(t.role(Role::Border))
        .title(Span::styled(
            format!(
                " nodes {}/{}{}{} ",
                app.view.len(),
                app.rows.len(),
                if app.filter.is_empty() {
                    String::new()
                } else {
                    format!(" · filter: {}", screen_safe(&app.filter))
                },
                app.group_by
                    .as_ref()
                    .map(|g| format!(" · by label {}", screen_safe(g)))
                    .unwrap_or_default()
            ),
            t.role(Role::Title),
        ));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let page = inner.height.saturating_sub(1) as usize;
    let mut offset = app.drawn.offset.min(app.view.len().saturating_sub(1));
    if app.selected < offset {
        offset = app.selected;
    } else if page > 0 && app.selected >= offset + page {
        offset = app.selected + 1 - page;
    }
    // Never scrolled past a full page: rows hidden above while the detail pane took the space
    // come back when it closes (the selection stays visible: offset only goes down).
    offset = offset.min(app.view.len().saturating_sub(page));
    let mut lines = body_lines(app, offset, page);
    // Group headers take lines: scroll on until the selected row is in.
    while app.group_by.is_some()
        && offset < app.selected
        && !lines.contains(&BodyLine::Node(app.selected))
    {
        offset += 1;
        lines = body_lines(app, offset, page);
    }
    let visible: Vec<&Row> = lines
        .iter()
        .filter_map(|l| match l {
            BodyLine::Node(pos) => Some(&app.rows[app.view[*pos]]),
            BodyLine::Group(_) => None,
        })
        .collect();
    let w = widths(app, &visible, inner.width);
    let shown: Vec<(Column, u16)> = Column::matrix()
        .zip(&w)
        .filter_map(|(c, w)| w.map(|w| (c, w)))
        .collect();
    let header_cells: Vec<Cell> = shown
        .iter()
        .map(|(c, _)| {
            let arrow = if app.sort == *c {
                if app.descending { "▼" } else { "▲" }
            } else {
                ""
            };
            Cell::from(format!("{}{arrow}", c.title()))
        })
        .collect();
    let rows: Vec<TRow> = lines
        .iter()
        .map(|l| {
            let BodyLine::Node(pos) = l else {
                // Drawn over after the table (a header spans every column).
                return TRow::new(Vec::<Cell>::new());
            };
            let r = &app.rows[app.view[*pos]];
            let cells: Vec<Cell> = shown
                .iter()
                .map(|(c, _)| {
                    let c = *c;
                    let text = cell(r, c);
                    // By the cell's tone (what the report says), never by its words.
                    let style = match (c, r.status(), r.probe) {
                        (Column::Status, _, Probe::Running) => t.role(Role::Probing),
                        // A stale row (a cancelled scan): dim, whatever its status.
                        (_, _, Probe::Cancelled) => t.role(Role::Dim),
                        (Column::Status, None, _) => t.role(Role::Dim),
                        _ => t.tone(crate::app::tone(r, c)),
                    };
                    let style = if r.changed(c) {
                        style.patch(t.role(Role::Changed))
                    } else {
                        style
                    };
                    let text = if c == Column::Status && r.probe == Probe::Running {
                        format!(
                            "{} {}",
                            SPINNER[app.spin % SPINNER.len()],
                            if r.report.is_some() { text } else { "probing" }
                        )
                    } else if c == Column::Node && r.canary {
                        format!("◆ {text}")
                    } else {
                        text.to_string()
                    };
                    // A cell longer than its column ends in `…` so a cut value never looks
                    // whole (`el9_4` vs `el9_5`); `…` is one cell wide, as the other marks the
                    // matrix draws (`◆`, `▌`, `│`); the reasons list too, at the screen's edge.
                    let width =
                        usize::from(shown.iter().find(|(x, _)| *x == c).map_or(0, |(_, w)| *w));
                    // A node name keeps both ends (`gpu-a01-…-b07`): racks and indices are
                    // at the end as often as at the start.
                    let text = if width > 1 && c == Column::Node {
                        crate::model::text::clip_middle(&text, width)
                    } else if width > 1 {
                        crate::model::text::clip(&text, width)
                    } else {
                        text
                    };
                    Cell::from(Span::styled(text, style))
                })
                .collect();
            TRow::new(cells)
        })
        .collect();
    let constraints: Vec<Constraint> = shown.iter().map(|(_, x)| Constraint::Length(*x)).collect();
    let table = Table::new(rows, constraints)
        .header(TRow::new(header_cells).style(t.role(Role::Header)))
        .column_spacing(2)
        .row_highlight_style(t.role(Role::Selected))
        .highlight_symbol("▌ ");
    let mut state = TableState::default();
    state.select(
        lines
            .iter()
            .position(|l| *l == BodyLine::Node(app.selected)),
    );
    f.render_stateful_widget(table, inner, &mut state);
    for (k, l) in lines.iter().enumerate() {
        if let BodyLine::Group(g) = l {
            f.render_widget(
                Paragraph::new(Span::styled(group_header(app, *g), t.role(Role::Title))),
                Rect {
                    y: inner.y + 1 + k as u16,
                    height: 1,
                    ..inner
                },
            );
        }
    }
    // Header cell positions, for clicks (the highlight symbol, then cells and spacing).
    let mut x = inner.x + 2;
    let mut hits = Vec::new();
    for (c, width) in &shown {
        hits.push((*c, x, x + width));
        x += width + 2;
    }
    if app.view.is_empty() {
        let (msg, role) = if app.rows.is_empty() {
            ("no nodes in the inventory".to_string(), Role::Dim)
        } else if let Some(e) = &app.filter_error {
            (format!("filter error: {}", screen_safe(e)), Role::Crit)
        } else {
            (
                "no node matches the filter (esc clears it)".to_string(),
                Role::Dim,
            )
        };
        let y = inner.y + 1;
        if y < inner.y + inner.height {
            f.render_widget(
                Paragraph::new(Span::styled(msg, t.role(role))),
                Rect {
                    y,
                    height: 1,
                    ..inner
                },
            );
        }
    }
    Drawn {
        header_y: inner.y,
        body_y: inner.y + 1,
        header_hits: hits,
        page,
        offset,
        body_rows: lines
            .iter()
            .map(|l| match l {
                BodyLine::Node(pos) => Some(*pos),
                BodyLine::Group(_) => None,
            })
            .collect(),
        detail_max: 0,
        help_max: 0,
        result_max: 0,
    }
}

fn draw_bottom(f: &mut Frame, app: &App, t: &Theme, area: Rect) {
    let line = if app.mode == Mode::FilterInput {
        Line::from(vec![
            Span::styled("/", t.role(Role::Header)),
            Span::raw(screen_safe(&app.input).into_owned()),
            Span::styled("█", t.role(Role::Dim)),
            match &app.filter_error {
                Some(e) => Span::styled(format!("   {}", screen_safe(e)), t.role(Role::Crit)),
                None => Span::styled(
                    "   enter apply · esc cancel · status: flavor: label: group: reason: · a,b either · !x not",
                    t.role(Role::Dim),
                ),
            },
        ])
    } else if let Some(m) = &app.message {
        Line::from(Span::styled(
            screen_safe(m).into_owned(),
            t.role(Role::Warn),
        ))
    } else {
        let k = &app.keymap;
        let mut spans = Vec::new();
        // The rollout's result, once there is one, first.
        let result = app
            .result
            .as_ref()
            .map(|_| crate::app::Action::RolloutResult);
        for a in result.into_iter().chain([
            crate::app::Action::Help,
            crate::app::Action::Filter,
            crate::app::Action::Detail,
            crate::app::Action::SortNext,
            crate::app::Action::Rescan,
            crate::app::Action::Quit,
        ]) {
            let keys = k.keys_of(a);
            if let Some(first) = keys.split(", ").next().filter(|s| !s.is_empty()) {
                spans.push(Span::styled(format!(" {first} "), t.role(Role::Header)));
                spans.push(Span::styled(format!("{} ", a.name()), t.role(Role::Dim)));
            }
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(line), area);
}

/// A bordered popup over `area`, scrolled by `scroll` lines. Long lines wrap (the upgrade plan's
/// commands are shown whole, never cut).
fn draw_popup(
    f: &mut Frame,
    t: &Theme,
    area: Rect,
    lines: Vec<Line>,
    title: &str,
    border: Role,
    scroll: u16,
) {
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(t.role(border))
                    .padding(Padding::horizontal(1))
                    .title(Span::styled(title.to_string(), t.role(Role::Title))),
            )
            .scroll((scroll, 0)),
        area,
    );
}
