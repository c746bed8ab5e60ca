//! The app's update: messages (keys by mode — the matrix, the filter line, the upgrade
//! confirmation —, mouse, scan results, upgrade progress, ticks) and the actions keys map to.

use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

use super::*;

impl App {
    /// Handles one message; returns what the runtime must do.
    pub fn update(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::Key(k) => self.key(k),
            Msg::Mouse(m) => self.mouse(m),
            Msg::Resize(..) => Vec::new(),
            Msg::ScanStarted { generation, names } => {
                self.progress = Progress {
                    generation,
                    total: names.len(),
                    done: 0,
                    failed: 0,
                    running: true,
                };
                for n in &names {
                    if let Some(r) = self.row_mut(n) {
                        r.probe = Probe::Pending;
                        r.refresh();
                    }
                }
                self.dirty = true;
                Vec::new()
            }
            Msg::NodeRunning { generation, name } => {
                if generation == self.progress.generation
                    && let Some(r) = self.row_mut(&name)
                {
                    r.probe = Probe::Running;
                    r.refresh();
                }
                Vec::new()
            }
            Msg::NodeDone {
                generation,
                report,
                raw,
            } => {
                // A result of an older scan no longer applies.
                if generation != self.progress.generation {
                    return Vec::new();
                }
                self.progress.done += 1;
                if report.status == NodeStatus::Unreachable {
                    self.progress.failed += 1;
                }
                let diff = self.compare.as_ref().and_then(|c| c.of(&report));
                if let Some(r) = self.row_mut(&report.name.clone()) {
                    r.probe = Probe::Done;
                    r.diff = diff;
                    r.report = Some(*report);
                    r.raw = raw;
                    r.refresh();
                }
                self.dirty = true;
                Vec::new()
            }
            Msg::ScanFinished { generation } => {
                if generation == self.progress.generation {
                    self.progress.running = false;
                    for r in &mut self.rows {
                        if r.probe != Probe::Done && r.report.is_some() {
                            r.probe = Probe::Done;
                        }
                    }
                }
                Vec::new()
            }
            Msg::Tick { since_scan_secs } => {
                if self.progress.running {
                    self.spin = self.spin.wrapping_add(1);
                }
                if self.message != self.message_seen {
                    self.message_seen = self.message.clone();
                    self.message_age = 0;
                } else if self.message.is_some() && !self.upgrading && !self.message_is_result() {
                    self.message_age += 1;
                    if self.message_age >= MESSAGE_TICKS {
                        self.message = None;
                    }
                }
                match (self.refresh_secs, since_scan_secs) {
                    (Some(every), Some(since)) if !self.progress.running && since >= every => {
                        self.start_scan(None)
                    }
                    _ => Vec::new(),
                }
            }
            Msg::UpgradePlanned(Ok((plan, planned))) => {
                self.confirm = Some(Confirm {
                    kind: ConfirmKind::Upgrade,
                    names: planned.nodes.iter().map(|n| n.node.clone()).collect(),
                    plan,
                    planned,
                    input: String::new(),
                });
                self.mode = Mode::Confirm;
                self.detail_scroll = 0;
                Vec::new()
            }
            Msg::UpgradePlanned(Err(r)) => {
                self.plan_refused(r);
                Vec::new()
            }
            Msg::RolloutEvent(ev) => {
                self.rollout_event(&ev);
                Vec::new()
            }
            Msg::UnfinishedFound(Ok(u)) => {
                self.unfinished_found(u);
                Vec::new()
            }
            Msg::UnfinishedFound(Err(e)) => {
                self.message = Some(e.replace('\n', "; "));
                Vec::new()
            }
            Msg::RolloutActed { names, result } => match result {
                Ok(r) => {
                    self.rollout_result(*r);
                    self.start_scan(Some(names))
                }
                Err(e) => {
                    self.message = Some(e.replace('\n', "; "));
                    Vec::new()
                }
            },
            Msg::UpgradeLog(line) => {
                // The status line escapes `…` (its width is ambiguous): the executor's lines
                // say `...` here.
                let line = line.replace('…', "...");
                self.message = Some(line.clone());
                self.upgrade_log.push(line);
                let n = self.upgrade_log.len();
                if n > 200 {
                    self.upgrade_log.drain(..n - 200);
                }
                Vec::new()
            }
            Msg::UpgradeDone {
                names,
                summary,
                result,
            } => {
                self.upgrading = false;
                self.quit_armed = false;
                match result {
                    Some(r) => self.rollout_result(*r),
                    None => {
                        // Not started: the nodes shown as queued are not.
                        for r in &mut self.rows {
                            if r.live.as_deref() == Some("queued") {
                                r.live = None;
                            }
                        }
                        self.message = Some(summary)
                    }
                }
                for r in &mut self.rows {
                    r.marked = false;
                    r.refresh();
                }
                self.dirty = true;
                self.start_scan(Some(names))
            }
            Msg::Notice(m) => {
                self.message = Some(m);
                Vec::new()
            }
            Msg::Exported(r) => {
                self.message = Some(match r {
                    Ok(path) => format!("exported {} nodes to {path}", self.view.len()),
                    Err(e) => format!("export failed: {e}"),
                });
                Vec::new()
            }
        }
    }

    /// A key acts on the view as last drawn (results that came since re-sort it at the next
    /// frame, the selection following its node): what is on screen, and no rebuild of 10,000
    /// rows before each key while results stream in.
    fn key(&mut self, k: KeyEvent) -> Vec<Effect> {
        if self.mode == Mode::FilterInput {
            return self.filter_key(k);
        }
        if self.mode == Mode::Confirm {
            return self.confirm_key(k);
        }
        let Some(action) = self.keymap.action(&k) else {
            if let Some(a) = self.keymap.withheld(&k) {
                self.message = Some(format!(
                    "read-only session: `{}` is off (read-only comes from --read-only, the config or the inventory)",
                    a.name()
                ));
            }
            return Vec::new();
        };
        self.act(action)
    }

    fn filter_key(&mut self, k: KeyEvent) -> Vec<Effect> {
        match k.code {
            KeyCode::Enter => {
                self.filter = self.input.trim().to_string();
                self.mode = Mode::Matrix;
            }
            KeyCode::Esc => {
                // The filter applies as it is typed; Esc puts back the one from before.
                self.filter = self.filter_before.clone();
                self.input = self.filter.clone();
                self.mode = Mode::Matrix;
                self.rebuild_view();
            }
            KeyCode::Backspace => {
                self.input.pop();
                self.filter = self.input.trim().to_string();
            }
            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                self.mode = Mode::Matrix;
            }
            KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                self.input.clear();
                self.filter.clear();
            }
            KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => {
                self.input.push(c);
                // Live filtering while typing.
                self.filter = self.input.trim().to_string();
            }
            _ => {}
        }
        self.rebuild_view();
        Vec::new()
    }

    /// Typing the node count: Enter with the right number runs the upgrade; anything else,
    /// or Esc, cancels it.
    fn confirm_key(&mut self, k: KeyEvent) -> Vec<Effect> {
        let Some(c) = self.confirm.as_mut() else {
            self.mode = Mode::Matrix;
            return Vec::new();
        };
        match k.code {
            KeyCode::Up | KeyCode::Char('k') => {
                self.detail_scroll = self.detail_scroll.saturating_sub(1);
                Vec::new()
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.detail_scroll = self.detail_scroll.saturating_add(1);
                Vec::new()
            }
            KeyCode::PageUp => {
                self.detail_scroll = self.detail_scroll.saturating_sub(self.drawn.page as u16);
                Vec::new()
            }
            KeyCode::PageDown => {
                self.detail_scroll = self.detail_scroll.saturating_add(self.drawn.page as u16);
                Vec::new()
            }
            KeyCode::Char(ch)
                if ch.is_ascii_digit() && !k.modifiers.contains(KeyModifiers::CONTROL) =>
            {
                c.input.push(ch);
                Vec::new()
            }
            KeyCode::Backspace => {
                c.input.pop();
                Vec::new()
            }
            KeyCode::Enter if c.input == c.names.len().to_string() => {
                let c = c.clone();
                self.confirm = None;
                self.mode = Mode::Matrix;
                self.confirmed(c)
            }
            _ => {
                let kind = c.kind;
                self.confirm = None;
                self.mode = Mode::Matrix;
                self.message = Some(match kind {
                    ConfirmKind::Upgrade => "upgrade cancelled; nothing changed".into(),
                    ConfirmKind::Resume => "resume not confirmed; nothing changed".into(),
                    ConfirmKind::Abandon => "abandon not confirmed; nothing changed".into(),
                    ConfirmKind::Cancel => "cancel not confirmed; nothing changed".into(),
                });
                Vec::new()
            }
        }
    }

    fn move_to(&mut self, pos: usize) {
        self.selected = pos.min(self.view.len().saturating_sub(1));
        self.cursor_moved = true;
        self.detail_scroll = 0;
    }

    /// The matrix column after (or before, `forward` false) the sort column among those the
    /// last draw showed (`header_hits`; before any draw: those with a cell on some row), so
    /// that every sort press shows its arrow.
    fn next_sort_column(&self, forward: bool) -> Column {
        let cols: Vec<Column> = Column::matrix().collect();
        let shown = |c: &Column| {
            if self.drawn.header_hits.is_empty() {
                !c.spec().optional || self.rows.iter().any(|r| !cell(r, *c).is_empty())
            } else {
                self.drawn.header_hits.iter().any(|(h, ..)| h == c)
            }
        };
        let n = cols.len();
        let i = cols.iter().position(|c| *c == self.sort).unwrap_or(0);
        (1..=n)
            .map(|k| {
                if forward {
                    (i + k) % n
                } else {
                    (i + n - k) % n
                }
            })
            .map(|j| cols[j])
            .find(shown)
            .unwrap_or(self.sort)
    }

    /// Carries out `action` (from a key or elsewhere). Write actions are refused in read-only
    /// mode even if reached.
    pub fn act(&mut self, action: Action) -> Vec<Effect> {
        if self.read_only && action.is_write() {
            self.message = Some(format!("read-only: `{}` is not allowed", action.name()));
            return Vec::new();
        }
        let scrolling = matches!(self.mode, Mode::Detail | Mode::Help | Mode::Result);
        let max = match self.mode {
            Mode::Detail => self.drawn.detail_max,
            Mode::Result => self.drawn.result_max,
            _ => self.drawn.help_max,
        };
        match action {
            Action::Quit if self.upgrading && !self.quit_armed => {
                self.quit_armed = true;
                self.message = Some(
                    "an upgrade is running: quit again to stop it mid-step (then resume goes on: here, or `gpufleet upgrade --resume`)".into(),
                );
            }
            Action::Quit => return vec![Effect::Quit],
            Action::Down if scrolling => {
                self.detail_scroll = self.detail_scroll.saturating_add(1).min(max);
            }
            Action::Up if scrolling => self.detail_scroll = self.detail_scroll.saturating_sub(1),
            Action::PageDown if scrolling => {
                self.detail_scroll = self
                    .detail_scroll
                    .saturating_add(self.drawn.page as u16)
                    .min(max)
            }
            Action::PageUp if scrolling => {
                self.detail_scroll = self.detail_scroll.saturating_sub(self.drawn.page as u16)
            }
            Action::Top if scrolling => self.detail_scroll = 0,
            Action::Bottom if scrolling => self.detail_scroll = max,
            Action::Down | Action::NextNode => self.move_to(self.selected + 1),
            Action::PrevNode => self.move_to(self.selected.saturating_sub(1)),
            Action::Up => self.move_to(self.selected.saturating_sub(1)),
            Action::PageDown => self.move_to(self.selected + self.drawn.page.max(1)),
            Action::PageUp => self.move_to(self.selected.saturating_sub(self.drawn.page.max(1))),
            Action::Top => self.move_to(0),
            Action::Bottom => self.move_to(usize::MAX),
            Action::SortNext | Action::SortPrev => {
                self.sort = self.next_sort_column(action == Action::SortNext);
                self.rebuild_view();
            }
            Action::SortReverse => {
                self.descending = !self.descending;
                self.rebuild_view();
            }
            Action::Filter => {
                self.input = self.filter.clone();
                self.filter_before = self.filter.clone();
                self.mode = Mode::FilterInput;
            }
            Action::ClearFilter => {
                if self.mode != Mode::Matrix {
                    self.mode = Mode::Matrix;
                } else {
                    self.filter.clear();
                    self.input.clear();
                    self.group_by = None;
                    self.message = None;
                    self.rebuild_view();
                }
            }
            Action::Detail => {
                self.mode = if self.mode == Mode::Detail {
                    Mode::Matrix
                } else {
                    Mode::Detail
                };
                self.detail_scroll = 0;
            }
            Action::Help => {
                self.mode = if self.mode == Mode::Help {
                    Mode::Matrix
                } else {
                    Mode::Help
                };
                self.detail_scroll = 0;
            }
            Action::GroupByLabel => {
                let keys: Vec<String> = self
                    .rows
                    .iter()
                    .flat_map(|r| r.labels.keys().cloned())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                self.group_by = match &self.group_by {
                    None => keys.first().cloned(),
                    Some(k) => keys.iter().skip_while(|x| *x != k).nth(1).cloned(),
                };
                self.message = Some(match &self.group_by {
                    Some(k) => format!("grouped by label {k}"),
                    None if keys.is_empty() => "no labels to group by".into(),
                    None => "not grouped".into(),
                });
                self.rebuild_view();
            }
            Action::Rescan => return self.start_scan(None),
            Action::RescanSelected => {
                if let Some(r) = self.selected_row() {
                    let name = r.name.clone();
                    return self.start_scan(Some(vec![name]));
                }
            }
            Action::Cancel => {
                if self.progress.running {
                    self.progress.running = false;
                    // Results of the cancelled generation are ignored from now on.
                    self.progress.generation += 1;
                    let mut stale = 0;
                    for r in &mut self.rows {
                        if matches!(r.probe, Probe::Pending | Probe::Running) {
                            r.probe = Probe::Cancelled;
                            stale += usize::from(r.report.is_some());
                            r.refresh();
                        }
                    }
                    self.dirty = true;
                    self.message = Some(if stale > 0 {
                        format!(
                            "scan cancelled: {stale} node(s) marked (stale) show the last scan's result"
                        )
                    } else {
                        "scan cancelled".into()
                    });
                    return vec![Effect::Cancel];
                }
            }
            Action::Mark => {
                if let Some(&i) = self.view.get(self.selected) {
                    let r = &mut self.rows[i];
                    r.marked = !r.marked;
                    r.refresh();
                }
                self.move_to(self.selected + 1);
            }
            Action::Upgrade => {
                if self.upgrading {
                    self.message = Some("an upgrade is running".into());
                    return Vec::new();
                }
                let marked: Vec<&Row> = self.rows.iter().filter(|r| r.marked).collect();
                let chosen: Vec<&Row> = if marked.is_empty() {
                    self.selected_row().into_iter().collect()
                } else {
                    marked
                };
                let nodes: Vec<NodeReport> =
                    chosen.iter().filter_map(|r| r.report.clone()).collect();
                if nodes.len() != chosen.len() || nodes.is_empty() {
                    self.message = Some("upgrade: scan the node first".into());
                    return Vec::new();
                }
                self.message = Some(format!(
                    "probing {} node(s) again before planning...",
                    nodes.len()
                ));
                return vec![Effect::PlanUpgrade { nodes }];
            }
            Action::ResumeRollout => return self.ask_unfinished(ConfirmKind::Resume),
            Action::AbandonRollout => return self.ask_unfinished(ConfirmKind::Abandon),
            Action::CancelRollout => return self.ask_unfinished(ConfirmKind::Cancel),
            Action::RolloutResult => self.toggle_result(),
            Action::ExportJson | Action::ExportCsv => {
                // Every node the filter passes now, results since the last frame included.
                self.ensure_view();
                let reports: Vec<NodeReport> = self
                    .view
                    .iter()
                    .filter_map(|&i| self.rows[i].report.clone())
                    .collect();
                let format = if action == Action::ExportJson {
                    ExportFormat::Json
                } else {
                    ExportFormat::Csv
                };
                return vec![Effect::Export { format, reports }];
            }
        }
        Vec::new()
    }

    /// As keys, on the view as last drawn: a click hits the row shown under it.
    fn mouse(&mut self, m: MouseEvent) -> Vec<Effect> {
        match m.kind {
            MouseEventKind::ScrollDown => self.act(Action::Down),
            MouseEventKind::ScrollUp => self.act(Action::Up),
            MouseEventKind::Down(MouseButton::Left) => {
                if self.mode != Mode::Matrix && self.mode != Mode::Detail {
                    return Vec::new();
                }
                if m.row == self.drawn.header_y {
                    if let Some((c, ..)) = self
                        .drawn
                        .header_hits
                        .iter()
                        .find(|(_, a, b)| (*a..*b).contains(&m.column))
                    {
                        if self.sort == *c {
                            self.descending = !self.descending;
                        } else {
                            self.sort = *c;
                            self.descending = false;
                        }
                        self.rebuild_view();
                    }
                } else if m.row >= self.drawn.body_y {
                    let line = (m.row - self.drawn.body_y) as usize;
                    // A group's header row selects nothing.
                    let pos = if self.drawn.body_rows.is_empty() {
                        Some(self.drawn.offset + line)
                    } else {
                        self.drawn.body_rows.get(line).copied().flatten()
                    };
                    if let Some(pos) = pos.filter(|p| *p < self.view.len()) {
                        self.move_to(pos);
                    }
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }
}
