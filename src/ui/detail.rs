//! The detail pane: the selected node's status, reasons with evidence, every fact with the
//! lines that prove it, and the raw probe output (drawing only).

use super::*;

pub(super) fn severity_style(t: &Theme, s: Severity) -> Style {
    t.role(match s {
        Severity::Error => Role::Crit,
        Severity::Warn => Role::Warn,
        Severity::Info => Role::Info,
    })
}

/// The facts of a report with their evidence ([`crate::view::detail::fact_lines`]), drawn:
/// node text made screen safe, each value styled by its tone.
pub(super) fn fact_lines<'a>(out: &mut Vec<Line<'a>>, r: &NodeReport, t: &Theme) {
    use crate::view::detail::Line as Fact;
    let safe = |s: &str| screen_safe(s).into_owned();
    let evidence = |out: &mut Vec<Line<'a>>, path: &str| {
        for e in r.evidence.get(path).into_iter().flatten().take(8) {
            out.push(Line::from(Span::styled(
                evidence_text(e),
                t.role(Role::Dim),
            )));
        }
    };
    for line in crate::view::detail::fact_lines(r) {
        match line {
            Fact::Section(title) => {
                out.push(Line::default());
                out.push(Line::from(Span::styled(title, t.role(Role::Header))));
            }
            Fact::Fact {
                name,
                value,
                note,
                evidence: path,
            } => {
                // gpufleet's own words after the value, unescaped (one span: the pane wraps a
                // long value under itself).
                let text = safe(&value.text) + note.as_deref().unwrap_or_default();
                out.push(Line::from(vec![
                    Span::styled(format!("  {name:<20}"), t.role(Role::Title)),
                    Span::styled(text, t.tone(value.tone)),
                ]));
                evidence(out, path);
            }
            Fact::Gpu {
                index,
                name,
                bus_id,
                compute_capability,
            } => out.push(Line::from(vec![
                Span::styled(
                    format!("  {:<20}", format!("gpu {index}")),
                    t.role(Role::Title),
                ),
                Span::raw(format!(
                    "{} · {} · cc {}",
                    safe(&name),
                    safe(&bus_id),
                    safe(&compute_capability)
                )),
            ])),
            Fact::Evidence(path) => evidence(out, path),
            Fact::Kernel { release, modules } => out.push(Line::from(vec![
                Span::styled(format!("    {:<18}", safe(&release)), t.role(Role::Dim)),
                Span::styled(safe(&modules.text), t.tone(modules.tone)),
            ])),
            Fact::Param { key, value, source } => out.push(Line::from(vec![
                Span::styled(format!("  NVreg_{:<28}", safe(&key)), t.role(Role::Title)),
                Span::styled(safe(&value.text), t.tone(value.tone)),
                Span::styled(format!("  ({})", safe(&source)), t.role(Role::Dim)),
            ])),
        }
    }
}

/// One evidence line as the pane shows it, indented: the source and the raw line made screen
/// safe, its tabs as spaces (kallsyms and /proc files separate fields with tabs, which would
/// show as `\t`).
fn evidence_text(e: &crate::model::facts::Evidence) -> String {
    format!(
        "        {}: {}",
        screen_safe(&e.source),
        screen_safe(&e.line.trim_end().replace('\t', " "))
    )
}

/// The detail pane's lines for `row`: status, reasons with evidence, every fact with its
/// evidence, then the raw probe sections.
pub fn detail_lines<'a>(row: &Row, t: &Theme) -> Vec<Line<'a>> {
    let safe = |s: &str| screen_safe(s).into_owned();
    let mut out: Vec<Line> = Vec::new();
    let Some(r) = &row.report else {
        out.push(Line::from(Span::styled(
            format!("{}: not scanned yet", safe(&row.name)),
            t.role(Role::Dim),
        )));
        return out;
    };
    out.push(Line::from(vec![
        Span::styled(safe(&r.name), t.role(Role::Title)),
        Span::raw("  "),
        Span::styled(r.status.to_string(), t.status(r.status)),
        Span::styled(format!(": {}", r.status.meaning()), t.role(Role::Dim)),
    ]));
    out.push(Line::from(Span::styled(
        format!(
            "scanned at {} · took {} ms",
            safe(&r.scanned_at),
            r.duration_ms
        ),
        t.role(Role::Dim),
    )));
    match &row.diff {
        Some(crate::app::RowDiff::Added) => out.push(Line::from(Span::styled(
            "not in the --compare snapshot (added since)",
            t.role(Role::Changed),
        ))),
        Some(crate::app::RowDiff::Changed(d)) => {
            let v = |x: &Option<String>| x.as_deref().map_or("?".to_string(), safe);
            for c in &d.changes {
                out.push(Line::from(vec![
                    Span::styled(
                        format!("changed {}", c.field.as_str()),
                        t.role(Role::Changed),
                    ),
                    Span::raw(format!(": {} → {}", v(&c.old), v(&c.new))),
                ]));
            }
            for (sign, codes) in [("+", &d.reasons_added), ("-", &d.reasons_removed)] {
                if !codes.is_empty() {
                    out.push(Line::from(vec![
                        Span::styled("changed reasons", t.role(Role::Changed)),
                        Span::raw(format!(": {sign} {}", codes.join(" "))),
                    ]));
                }
            }
        }
        None => {}
    }
    if let Some(ro) = &r.rollout {
        let mut said = Vec::new();
        if let Some(id) = &ro.drained_by {
            said.push(format!(
                "drained by rollout {id} (this machine's journal; `gpufleet journal --node {}`)",
                r.name
            ));
        }
        match (ro.locked, &ro.lock) {
            (Some(true), Some(o)) => said.push(format!(
                "node lock held by rollout {} ({}, since {})",
                if o.rollout.is_empty() {
                    "?"
                } else {
                    &o.rollout
                },
                o.operator.as_deref().unwrap_or("operator unknown"),
                o.since.as_deref().unwrap_or("?")
            )),
            (Some(true), None) => said.push("node lock held (owner unknown)".into()),
            (None, _) if r.status != crate::model::NodeStatus::Unreachable => {
                said.push("node lock: unknown (this probe did not read its marker)".into())
            }
            _ => {}
        }
        for line in said {
            out.push(Line::from(Span::styled(
                safe(&format!("rollout: {line}")),
                t.role(Role::Warn),
            )));
        }
    }
    if !row.labels.is_empty() || !row.groups.is_empty() {
        let labels: Vec<String> = row.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push(Line::from(Span::styled(
            safe(&format!(
                "groups: {}  labels: {}",
                row.groups.join(", "),
                labels.join(", ")
            )),
            t.role(Role::Dim),
        )));
    }
    out.push(Line::default());
    out.push(Line::from(Span::styled("reasons", t.role(Role::Header))));
    if r.reasons.is_empty() {
        out.push(Line::from(Span::styled("  none", t.role(Role::Dim))));
    }
    for x in &r.reasons {
        out.push(Line::from(vec![
            Span::styled(
                format!("  {:<5} ", x.severity.as_str()),
                severity_style(t, x.severity),
            ),
            Span::styled(
                format!("{:<28} ", x.code.as_str()),
                severity_style(t, x.severity),
            ),
            Span::raw(safe(&x.message)),
        ]));
        for e in &x.evidence {
            out.push(Line::from(Span::styled(
                evidence_text(e),
                t.role(Role::Dim),
            )));
        }
    }
    fact_lines(&mut out, r, t);
    let Some(raw) = &row.raw else {
        return out;
    };
    out.push(Line::default());
    let parsed = match raw.sections() {
        Ok(p) => p,
        Err(e) => {
            out.push(Line::from(Span::styled(
                format!(
                    "raw probe output · {} bytes · unreadable here: {e}",
                    raw.bytes
                ),
                t.role(Role::Header),
            )));
            return out;
        }
    };
    out.push(Line::from(Span::styled(
        format!(
            "raw probe output · {} sections · {} bytes",
            parsed.sections.len(),
            raw.bytes
        ),
        t.role(Role::Header),
    )));
    for s in &parsed.sections {
        out.push(Line::from(vec![
            Span::styled(
                format!("▸ {:?} ", s.kind).to_lowercase(),
                t.role(Role::Title),
            ),
            Span::styled(safe(&s.name), t.role(Role::Title)),
            Span::styled(
                safe(&format!("  [{:?}]", s.status).to_lowercase()),
                t.role(Role::Dim),
            ),
        ]));
        for l in String::from_utf8_lossy(&s.body).lines().take(400) {
            out.push(Line::from(Span::raw(format!("  {}", safe(l)))));
        }
    }
    out
}

pub(super) fn draw_detail(f: &mut Frame, app: &App, t: &Theme, area: Rect) -> u16 {
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(t.role(Role::Border))
        .title(Span::styled(
            " detail (j/k scroll, g/G top/bottom, n/p next/previous node, enter closes) ",
            t.role(Role::Title),
        ));
    let lines = app
        .selected_row()
        .map(|r| detail_lines(r, t))
        .unwrap_or_default();
    let lines = wrap_lines(lines, block.inner(area).width);
    let max = (lines.len() as u16).saturating_sub(area.height.saturating_sub(1));
    let p = Paragraph::new(lines)
        .block(block)
        .scroll((app.detail_scroll, 0));
    f.render_widget(p, area);
    max
}

/// `lines` fitted to `width` columns: a longer line (evidence, a raw probe line) goes on over as
/// many lines as it needs, broken after a space in the second half of the piece where there is
/// one, else mid-word. Continuations are indented under the line's last span when the spans
/// before it (labels: a severity and code, a fact's name) take at most half the width, else
/// as far as the line's own leading spaces plus 2 (at most half the width). Styles are kept; nothing is cut. Widths are terminal columns
/// (unicode-width; the text is already [`screen_safe`]). A width under 8 leaves the lines as
/// they are (the pane is too narrow to read either way).
pub(super) fn wrap_lines(lines: Vec<Line<'_>>, width: u16) -> Vec<Line<'_>> {
    use unicode_width::UnicodeWidthChar;
    let width = usize::from(width);
    if width < 8 {
        return lines;
    }
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        if line.width() <= width {
            out.push(line);
            continue;
        }
        let cells: Vec<(char, Style, usize)> = line
            .spans
            .iter()
            .flat_map(|s| {
                s.content
                    .chars()
                    .map(move |c| (c, s.style, c.width().unwrap_or(0)))
            })
            .collect();
        // A line of labels then a text (a reason, a fact) goes on under its text; any other
        // under its own start, 2 further in.
        let label = line.spans.len().saturating_sub(1);
        let labels: usize = line.spans[..label].iter().map(|s| s.width()).sum();
        let lead = cells.iter().take_while(|c| c.0 == ' ').count();
        let indent = if label > 0 && labels <= width / 2 {
            labels
        } else {
            (lead + 2).min(width / 2)
        };
        let mut start = 0;
        let mut first = true;
        while start < cells.len() {
            let avail = if first { width } else { width - indent };
            let (mut end, mut used) = (start, 0);
            while end < cells.len() && used + cells[end].2 <= avail {
                used += cells[end].2;
                end += 1;
            }
            if end == start {
                // A character wider than the room: it goes alone (cut by the pane).
                end = start + 1;
            }
            if end < cells.len()
                && let Some(sp) = (start + (end - start) / 2..end)
                    .rev()
                    .find(|&k| cells[k].0 == ' ')
            {
                end = sp + 1;
            }
            let mut spans: Vec<Span> = Vec::new();
            if !first {
                spans.push(Span::raw(" ".repeat(indent)));
            }
            let mut text = String::new();
            let mut style = cells[start].1;
            for &(c, st, _) in &cells[start..end] {
                if st != style && !text.is_empty() {
                    spans.push(Span::styled(std::mem::take(&mut text), style));
                }
                style = st;
                text.push(c);
            }
            if !text.is_empty() {
                spans.push(Span::styled(text, style));
            }
            out.push(Line::from(spans).style(line.style));
            start = end;
            // A continuation starts at a word, not at the spaces it was broken at.
            while start < cells.len() && cells[start].0 == ' ' {
                start += 1;
            }
            first = false;
        }
    }
    out
}
