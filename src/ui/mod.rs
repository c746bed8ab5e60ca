//! Drawing only: `draw(frame, &App, &Theme) -> Drawn`. No I/O; the returned layout (where the
//! header and rows landed) goes back into the app for paging and mouse hits. Only the visible
//! rows are formatted, so a frame costs the same for 100 or 10,000 nodes.

mod detail;
pub mod theme;

pub use detail::detail_lines;
use detail::*;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, LineGauge, Paragraph, Row as TRow, Table, TableState, Wrap,
};

pub use theme::{Role, Theme};

use crate::app::{App, Column, Mode, Probe, Row, cell};
use crate::model::text::screen_safe;
use crate::model::{NodeReport, NodeStatus, Severity};

/// Where the last frame put things, for the app.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drawn {
    pub header_y: u16,
    pub body_y: u16,
    pub header_hits: Vec<(Column, u16, u16)>,
    /// Table rows visible.
    pub page: usize,
    /// First visible position in the view.
    pub offset: usize,
    /// How far the detail pane can scroll (its lines minus its height).
    pub detail_max: u16,
}

const SPINNER: [&str; 8] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧"];

/// Draws the whole screen.
pub fn draw(f: &mut Frame, app: &App, t: &Theme) -> Drawn {
    let area = f.area();
    let [top, gauge, main, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_top(f, app, t, top);
    draw_gauge(f, app, t, gauge);
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
        draw_help(f, app, t, area);
    }
    if app.mode == Mode::Confirm {
        draw_confirm(f, app, t, area);
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
    let n = c.names.len();
    let names: Vec<String> = c
        .names
        .iter()
        .map(|x| screen_safe(x).into_owned())
        .collect();
    let mut lines: Vec<Line> = vec![
        Line::from(Span::styled(
            format!(" nodes: {}", names.join(", ")),
            t.role(Role::Title),
        )),
        Line::from(Span::styled(
            format!(
                " This drains and upgrades {n} node(s). Type {n} and press enter to go on; anything else cancels."
            ),
            t.role(Role::Warn),
        )),
        Line::from(vec![
            Span::styled(" node count: ", t.role(Role::Title)),
            Span::raw(c.input.clone()),
            Span::styled("█", t.role(Role::Dim)),
        ]),
        Line::default(),
    ];
    lines.extend(
        c.plan
            .iter()
            .map(|l| Line::from(Span::raw(format!(" {}", screen_safe(l))))),
    );
    draw_popup(
        f,
        t,
        popup,
        lines,
        " upgrade plan ",
        Role::Crit,
        app.detail_scroll,
    );
}

fn draw_top(f: &mut Frame, app: &App, t: &Theme, area: Rect) {
    let mut spans = vec![
        Span::styled(" gpufleet ", t.role(Role::Title)),
        Span::styled(screen_safe(&app.source).into_owned(), t.role(Role::Dim)),
        Span::raw("  "),
    ];
    if app.read_only {
        spans.push(Span::styled(" READ-ONLY ", t.role(Role::Badge)));
        spans.push(Span::raw("  "));
    }
    let counts = app.counts();
    for s in NodeStatus::ALL {
        let n = counts.get(&s).copied().unwrap_or(0);
        if n > 0 {
            spans.push(Span::styled(format!("{n} {s}"), t.status(s)));
            spans.push(Span::raw("  "));
        }
    }
    let pending = app.rows.iter().filter(|r| r.report.is_none()).count();
    if pending > 0 {
        spans.push(Span::styled(
            format!("{pending} pending"),
            t.role(Role::Dim),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_gauge(f: &mut Frame, app: &App, t: &Theme, area: Rect) {
    let p = app.progress;
    let ratio = if p.total == 0 {
        1.0
    } else {
        p.done as f64 / p.total as f64
    };
    let label = if p.running {
        format!(
            " {} scanning {}/{} · {} unreachable ",
            SPINNER[app.spin % SPINNER.len()],
            p.done,
            p.total,
            p.failed
        )
    } else if p.total > 0 {
        format!(
            " scanned {}/{} · {} unreachable ",
            p.done, p.total, p.failed
        )
    } else {
        " not scanned yet ".to_string()
    };
    let g = LineGauge::default()
        .filled_style(t.role(Role::Gauge))
        .unfilled_style(t.role(Role::Dim))
        .label(label)
        .ratio(ratio.clamp(0.0, 1.0));
    f.render_widget(g, area);
}

/// Column widths for the visible rows; `None` hides a column. Columns join in priority order
/// while they fit beside the reasons column's minimum (node, status, module, driver, DMA-BUF,
/// peermem, next boot, CC, GPUs, kernel); the reasons column takes what is left. Hidden facts
/// stay in the detail pane.
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
                let group = app
                    .group_by
                    .as_ref()
                    .map_or(0, |_| group_of(app, r).chars().count() + 3);
                group + if r.canary { 2 } else { 0 }
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
            (content.max(title) as u16).clamp(spec.min, spec.max + markers)
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
    // The reasons column keeps its minimum once node and status are in: it says why.
    for (k, &i) in order.iter().enumerate() {
        if cols[i].spec().optional && rows.iter().all(|r| cell(r, cols[i]).is_empty()) {
            continue;
        }
        let need = natural[i] + if used > 2 { 2 } else { 0 };
        let keep = if k < 2 { 0 } else { reserve };
        if used + need + keep <= total {
            out[i] = Some(natural[i]);
            used += need;
        }
    }
    if let Some(i) = rest
        && used + 2 + cols[i].spec().min <= total
    {
        out[i] = Some(total - used - 2);
    }
    out
}

/// Whether GPUDirect RDMA does not apply to the node (`no-rdma-device`): its kernel's DMA-BUF
/// support then blocks nothing.
fn rdma_na(r: &Row) -> bool {
    r.report.as_ref().is_some_and(|x| {
        x.reasons
            .iter()
            .any(|r| r.code == crate::model::Code::NoRdmaDevice)
    })
}

/// The value of the grouping label for `r` (`-` when the node lacks the label).
fn group_of(app: &App, r: &Row) -> String {
    let value = app.group_by.as_ref().and_then(|k| r.labels.get(k));
    screen_safe(value.map_or("-", String::as_str)).into_owned()
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
    let mut offset = app.offset.min(app.view.len().saturating_sub(1));
    if app.selected < offset {
        offset = app.selected;
    } else if page > 0 && app.selected >= offset + page {
        offset = app.selected + 1 - page;
    }
    // Never scrolled past a full page: rows hidden above while the detail pane took the space
    // come back when it closes (the selection stays visible: offset only goes down).
    offset = offset.min(app.view.len().saturating_sub(page));
    let visible: Vec<&Row> = app
        .view
        .iter()
        .skip(offset)
        .take(page)
        .map(|&i| &app.rows[i])
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
    let rows: Vec<TRow> = visible
        .iter()
        .map(|r| {
            let cells: Vec<Cell> = shown
                .iter()
                .map(|(c, _)| {
                    let c = *c;
                    let text = cell(r, c);
                    let style = match (c, r.status(), r.probe) {
                        (Column::Status, _, Probe::Running) => t.role(Role::Probing),
                        (Column::Status, Some(s), _) => t.status(s),
                        (Column::Status, None, _) => t.role(Role::Dim),
                        // "no" blocks only where GPUDirect RDMA applies.
                        (Column::DmaBuf, _, _) if text == "no" && !rdma_na(r) => t.role(Role::Crit),
                        (Column::NextBoot, _, _) if text == "no driver" => t.role(Role::Crit),
                        (Column::Peermem, _, _)
                            if text.starts_with("loaded") || text == "at boot" =>
                        {
                            t.role(Role::Warn)
                        }
                        (Column::Flavor, _, _) if text == "proprietary" => t.role(Role::Warn),
                        (Column::Reasons, _, _) => t.role(Role::Dim),
                        // An unknown value (the report has `null` there).
                        _ if text == "?" => t.role(Role::Unknown),
                        _ => Style::default(),
                    };
                    let text = if c == Column::Status && r.probe == Probe::Running {
                        format!(
                            "{} {}",
                            SPINNER[app.spin % SPINNER.len()],
                            if r.report.is_some() { text } else { "probing" }
                        )
                    } else if c == Column::Node && (r.canary || app.group_by.is_some()) {
                        let group = match app.group_by {
                            Some(_) => format!("{} │ ", group_of(app, r)),
                            None => String::new(),
                        };
                        let canary = if r.canary { "◆ " } else { "" };
                        format!("{group}{canary}{text}")
                    } else {
                        text.to_string()
                    };
                    // A cell longer than its column ends in `~` (not `…`: its width is
                    // ambiguous) so a cut value never looks whole (`el9_4` vs `el9_5`). Reasons
                    // run to the edge as a list.
                    let width =
                        usize::from(shown.iter().find(|(x, _)| *x == c).map_or(0, |(_, w)| *w));
                    let text = if c != Column::Reasons && width > 1 {
                        crate::snapshot::clip_with(&text, width, '~')
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
    if !app.view.is_empty() {
        state.select(Some(app.selected - offset));
    }
    f.render_stateful_widget(table, inner, &mut state);
    // Header cell positions, for clicks (the highlight symbol, then cells and spacing).
    let mut x = inner.x + 2;
    let mut hits = Vec::new();
    for (c, width) in &shown {
        hits.push((*c, x, x + width));
        x += width + 2;
    }
    if app.view.is_empty() {
        let msg = if app.rows.is_empty() {
            "no nodes in the inventory"
        } else {
            "no node matches the filter (esc clears it)"
        };
        let y = inner.y + 1;
        if y < inner.y + inner.height {
            f.render_widget(
                Paragraph::new(Span::styled(msg, t.role(Role::Dim))),
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
        detail_max: 0,
    }
}

fn draw_bottom(f: &mut Frame, app: &App, t: &Theme, area: Rect) {
    let line = if app.mode == Mode::FilterInput {
        Line::from(vec![
            Span::styled("/", t.role(Role::Header)),
            Span::raw(screen_safe(&app.input).into_owned()),
            Span::styled("█", t.role(Role::Dim)),
            Span::styled(
                "   enter apply · esc cancel · status: flavor: label: group: reason:",
                t.role(Role::Dim),
            ),
        ])
    } else if let Some(m) = &app.message {
        Line::from(Span::styled(
            screen_safe(m).into_owned(),
            t.role(Role::Warn),
        ))
    } else {
        let k = &app.keymap;
        let mut spans = Vec::new();
        for a in [
            crate::app::Action::Help,
            crate::app::Action::Filter,
            crate::app::Action::Detail,
            crate::app::Action::SortNext,
            crate::app::Action::Rescan,
            crate::app::Action::Quit,
        ] {
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

fn draw_help(f: &mut Frame, app: &App, t: &Theme, area: Rect) {
    let w = area.width.saturating_sub(8).min(100);
    let actions: Vec<_> = app.keymap.bound().collect();
    let legend = status_legend(t);
    let h = (actions.len() as u16 + legend.len() as u16 + 7).min(area.height.saturating_sub(2));
    let popup = Rect {
        x: area.x + (area.width.saturating_sub(w)) / 2,
        y: area.y + (area.height.saturating_sub(h)) / 2,
        width: w,
        height: h,
    };
    let mut lines: Vec<Line> = actions
        .iter()
        .map(|a| {
            Line::from(vec![
                Span::styled(
                    format!(" {:<20}", app.keymap.keys_of(*a)),
                    t.role(Role::Header),
                ),
                Span::raw(a.help()),
            ])
        })
        .collect();
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        " mouse: click a row to select it, a header to sort by it; wheel scrolls",
        t.role(Role::Dim),
    )));
    lines.push(Line::from(Span::styled(
        " ◆ before a node's name: a canary (inventory `canary = true`), upgraded before the waves",
        t.role(Role::Dim),
    )));
    if app.read_only {
        lines.push(Line::from(Span::styled(
            " read-only: actions that change nodes are not available",
            t.role(Role::Warn),
        )));
    }
    lines.push(Line::default());
    lines.extend(legend);
    draw_popup(
        f,
        t,
        popup,
        lines,
        " keys (from the active keymap) · ? closes ",
        Role::Border,
        app.detail_scroll,
    );
}

/// The statuses, worst first (the matrix's sort order), each in its theme style with what it
/// means: a title line, then one line per status.
pub fn status_legend<'a>(t: &Theme) -> Vec<Line<'a>> {
    let mut statuses = NodeStatus::ALL;
    statuses.sort();
    let mut out = vec![Line::from(Span::styled(
        " statuses, worst first (filter: status:NAME)",
        t.role(Role::Header),
    ))];
    out.extend(statuses.iter().map(|s| {
        Line::from(vec![
            Span::raw(" "),
            Span::styled(s.as_str(), t.status(*s)),
            Span::raw(" ".repeat(20 - s.as_str().len())),
            Span::raw(s.meaning()),
        ])
    }));
    out
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
                    .title(Span::styled(title.to_string(), t.role(Role::Title))),
            )
            .scroll((scroll, 0)),
        area,
    );
}
