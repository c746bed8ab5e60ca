//! The TUI's state machine: `App::update(Msg) -> Vec<Effect>`. No terminal I/O here; the
//! runtime feeds it messages (keys, mouse, scan results with their scan generation) and carries
//! out the effects it returns (start or cancel scans, export, quit).

pub mod keys;

use std::collections::BTreeMap;
use std::sync::Arc;

use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

pub use keys::{Action, Keymap};

use crate::model::text::screen_safe;
use crate::model::{NodeReport, NodeStatus};
use crate::probe::RawRun;

/// Ticks (250 ms each) a status-line message stays.
pub const MESSAGE_TICKS: u32 = 40;

/// Where a node's scan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Queued, not started.
    Pending,
    /// Connecting or running the probe now.
    Running,
    /// The report is in.
    Done,
}

/// One node of the matrix.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub groups: Vec<String>,
    pub canary: bool,
    pub probe: Probe,
    /// The last report (kept while a rescan runs).
    pub report: Option<NodeReport>,
    /// The last raw probe output, for the detail pane.
    pub raw: Option<Arc<RawRun>>,
    /// Cell texts per [`Column`], computed when the report or probe state changes (sorting and
    /// drawing read these; formatting 10,000 rows per frame would not fit a frame).
    pub cells: Vec<String>,
    /// Marked for an upgrade.
    pub marked: bool,
}

impl Row {
    pub fn new(name: impl Into<String>) -> Row {
        Row {
            name: name.into(),
            labels: BTreeMap::new(),
            groups: Vec::new(),
            canary: false,
            probe: Probe::Pending,
            report: None,
            raw: None,
            cells: Vec::new(),
            marked: false,
        }
        .refreshed()
    }

    fn refreshed(mut self) -> Row {
        self.refresh();
        self
    }

    /// Recomputes the cached cells.
    pub fn refresh(&mut self) {
        self.cells = Column::matrix().map(|c| compute_cell(self, c)).collect();
    }

    pub fn status(&self) -> Option<NodeStatus> {
        self.report.as_ref().map(|r| r.status)
    }
}

/// Matrix columns: the one registry of the TUI, the table and the CSV.
pub use crate::columns::Column;

/// What the screen shows on top of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Matrix,
    Detail,
    Help,
    /// Typing a filter after `/`.
    FilterInput,
    /// An upgrade plan on screen, waiting for the operator to type the node count.
    Confirm,
}

/// An upgrade waiting for confirmation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    pub names: Vec<String>,
    /// The plan, one line per step (with the exact commands).
    pub plan: Vec<String>,
    /// The plan itself: what runs once confirmed.
    pub planned: Box<crate::actions::rollout::Plan>,
    /// What the operator typed so far.
    pub input: String,
}

/// Inputs to the state machine.
#[derive(Debug, Clone)]
pub enum Msg {
    Key(KeyEvent),
    Mouse(MouseEvent),
    /// The terminal's new size (columns, rows).
    Resize(u16, u16),
    /// A scan of generation `gen` started on these nodes.
    ScanStarted {
        generation: u64,
        names: Vec<String>,
    },
    NodeRunning {
        generation: u64,
        name: String,
    },
    NodeDone {
        generation: u64,
        report: Box<NodeReport>,
        raw: Option<Arc<RawRun>>,
    },
    ScanFinished {
        generation: u64,
    },
    /// Time passes (spinner, auto-refresh); seconds since the last scan finished, if any.
    Tick {
        since_scan_secs: Option<u64>,
    },
    /// An export finished: the file written, or why not.
    Exported(Result<String, String>),
    /// The plan for an upgrade (its lines for people, and the plan itself), or why there is
    /// none.
    UpgradePlanned(Result<(Vec<String>, Box<crate::actions::rollout::Plan>), String>),
    /// A progress line of the running upgrade.
    UpgradeLog(String),
    /// The upgrade ended: these nodes, and a summary.
    UpgradeDone {
        names: Vec<String>,
        summary: String,
    },
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Json,
    Csv,
}

/// What the runtime must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Start scan `generation` on `names` (every node when `None`), cancelling a running one.
    Scan {
        generation: u64,
        names: Option<Vec<String>>,
    },
    /// Cancel the running scan.
    Cancel,
    /// Write these reports to a file in this format.
    Export {
        format: ExportFormat,
        reports: Vec<NodeReport>,
    },
    /// Plan an upgrade of these nodes with their current reports (answered by
    /// [`Msg::UpgradePlanned`]).
    PlanUpgrade {
        nodes: Vec<NodeReport>,
    },
    /// Run the confirmed plan (the operator typed the node count).
    RunUpgrade {
        plan: Box<crate::actions::rollout::Plan>,
    },
    Quit,
}

/// Scan progress for the gauge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub generation: u64,
    pub total: usize,
    pub done: usize,
    pub failed: usize,
    pub running: bool,
}

/// The whole TUI state.
#[derive(Debug, Clone)]
pub struct App {
    pub rows: Vec<Row>,
    /// Indices into `rows`: filtered, grouped and sorted — what the matrix shows.
    pub view: Vec<usize>,
    /// Position in `view`.
    pub selected: usize,
    pub sort: Column,
    pub descending: bool,
    /// The applied filter.
    pub filter: String,
    /// The filter being typed.
    pub input: String,
    /// The filter in force when typing began: Esc goes back to it.
    pub filter_before: String,
    /// Label key rows are grouped by, if any.
    pub group_by: Option<String>,
    pub mode: Mode,
    pub read_only: bool,
    pub keymap: Keymap,
    pub progress: Progress,
    /// Auto-refresh interval in seconds (off when `None`).
    pub refresh_secs: Option<u64>,
    /// One line for the status bar (errors, export results, refusals).
    pub message: Option<String>,
    pub detail_scroll: u16,
    /// Table rows visible, from the last draw (for paging and mouse hits).
    pub page: usize,
    /// First visible position in `view` (kept by the UI, used for mouse hits).
    pub offset: usize,
    /// Frames drawn while scanning (spinner).
    pub spin: usize,
    /// Where the last draw put the header cells: (column, x start, x end), and its screen row.
    pub header_hits: Vec<(Column, u16, u16)>,
    pub header_y: u16,
    /// Screen row of the first table row.
    pub body_y: u16,
    /// `view` must be rebuilt before it is next used (results arrive in bursts).
    pub dirty: bool,
    /// Row position by node name (rows are never reordered, only appended at start).
    index: std::collections::HashMap<String, usize>,
    /// The context line: "fleet.toml (128 nodes)" or "local".
    pub source: String,
    /// The upgrade waiting for confirmation.
    pub confirm: Option<Confirm>,
    /// An upgrade is running.
    pub upgrading: bool,
    /// The last lines of the running or last upgrade.
    pub upgrade_log: Vec<String>,
    /// `quit` was pressed once while an upgrade runs; a second press quits.
    pub quit_armed: bool,
    /// How far the detail pane can scroll (from the last draw).
    pub detail_max: u16,
    /// The status line as of the last tick, and for how many ticks it has stood: messages
    /// clear themselves after about 10 s (not while an upgrade runs).
    message_seen: Option<String>,
    message_age: u32,
}

/// Cell text of `row` in column `c`, from the cache.
pub fn cell(row: &Row, c: Column) -> &str {
    let i = Column::matrix().position(|x| x == c).unwrap_or(0);
    row.cells.get(i).map_or("", String::as_str)
}

/// Cell text of `row` in column `c` (through [`screen_safe`]; empty until the first report).
fn compute_cell(row: &Row, c: Column) -> String {
    if c == Column::Node && row.marked {
        return format!("✓ {}", screen_safe(&row.name));
    }
    let Some(r) = &row.report else {
        return match c {
            Column::Node => screen_safe(&row.name).into_owned(),
            Column::Status => match row.probe {
                Probe::Running => "probing".into(),
                _ => "pending".into(),
            },
            _ => String::new(),
        };
    };
    crate::snapshot::clip(&screen_safe(&c.display(r)), 64)
}

/// Whether `row` passes every term of `filter` (space-separated, all must match).
/// Terms: `status:S`, `flavor:F` (or `module:`), `label:K`, `label:K=V`, `group:G`, `reason:C`,
/// `canary` / `label:canary`, else a case-insensitive substring of the node, kernel, driver
/// or GPU model.
pub fn matches(row: &Row, filter: &str) -> bool {
    filter.split_whitespace().all(|term| {
        let t = term.to_ascii_lowercase();
        let (key, val) = t.split_once(':').unwrap_or(("", t.as_str()));
        let report = row.report.as_ref();
        match key {
            "status" => {
                row.status().is_some_and(|s| s.as_str().starts_with(val))
                    || (val == "pending" && row.report.is_none())
            }
            "flavor" | "module" => report
                .and_then(|r| r.driver.as_ref())
                .is_some_and(|d| d.flavor.as_str().starts_with(val)),
            "label" => match val.split_once('=') {
                Some((k, v)) => row.labels.get(k).is_some_and(|x| x.eq_ignore_ascii_case(v)),
                None => {
                    row.labels.contains_key(val)
                        || row.labels.values().any(|v| v.eq_ignore_ascii_case(val))
                        || (val == "canary" && row.canary)
                }
            },
            "group" => row.groups.iter().any(|g| g.eq_ignore_ascii_case(val)),
            "reason" => {
                report.is_some_and(|r| r.reasons.iter().any(|x| x.code.as_str().contains(val)))
            }
            _ if t == "canary" => row.canary,
            _ => [Column::Node, Column::Kernel, Column::Driver, Column::Gpus]
                .iter()
                .any(|c| cell(row, *c).to_ascii_lowercase().contains(&t)),
        }
    })
}

impl App {
    /// An app over `rows`, sorted by status (worst first).
    pub fn new(rows: Vec<Row>, keymap: Keymap, read_only: bool, source: String) -> App {
        let mut app = App {
            rows,
            view: Vec::new(),
            selected: 0,
            sort: Column::Status,
            descending: false,
            filter: String::new(),
            input: String::new(),
            filter_before: String::new(),
            group_by: None,
            mode: Mode::Matrix,
            read_only,
            keymap,
            progress: Progress::default(),
            refresh_secs: None,
            message: None,
            detail_scroll: 0,
            page: 10,
            offset: 0,
            spin: 0,
            header_hits: Vec::new(),
            header_y: 0,
            body_y: 0,
            dirty: false,
            index: std::collections::HashMap::new(),
            source,
            confirm: None,
            upgrading: false,
            upgrade_log: Vec::new(),
            quit_armed: false,
            detail_max: u16::MAX,
            message_seen: None,
            message_age: 0,
        };
        app.rebuild_view();
        app
    }

    /// The selected row, if any.
    pub fn selected_row(&self) -> Option<&Row> {
        self.view.get(self.selected).map(|&i| &self.rows[i])
    }

    /// Node counts per status over all rows (pending ones not counted).
    pub fn counts(&self) -> BTreeMap<NodeStatus, usize> {
        let mut m = BTreeMap::new();
        for r in &self.rows {
            if let Some(s) = r.status() {
                *m.entry(s).or_default() += 1;
            }
        }
        m
    }

    fn sort_key_cmp(&self, a: &Row, b: &Row) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let group = |r: &Row| {
            self.group_by.as_ref().map(|k| {
                r.labels
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| "\u{10ffff}".into())
            })
        };
        let by_group = group(a).cmp(&group(b));
        if by_group != Ordering::Equal {
            return by_group;
        }
        // Rows without a report yet sort after those with one.
        let ord = match (&a.report, &b.report) {
            (Some(x), Some(y)) => self.sort.compare(x, y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        let ord = if self.descending { ord.reverse() } else { ord };
        ord.then_with(|| a.name.cmp(&b.name))
    }

    /// Rebuilds `view` if results arrived since it was last built.
    pub fn ensure_view(&mut self) {
        if self.dirty {
            self.rebuild_view();
        }
    }

    /// Recomputes `view` from filter, grouping and sort, keeping the selected node selected.
    pub fn rebuild_view(&mut self) {
        self.dirty = false;
        let keep = self.selected_row().map(|r| r.name.clone());
        let mut view: Vec<usize> = (0..self.rows.len())
            .filter(|&i| self.filter.is_empty() || matches(&self.rows[i], &self.filter))
            .collect();
        view.sort_by(|&a, &b| self.sort_key_cmp(&self.rows[a], &self.rows[b]));
        self.view = view;
        self.selected = keep
            .and_then(|n| self.view.iter().position(|&i| self.rows[i].name == n))
            .unwrap_or(0)
            .min(self.view.len().saturating_sub(1));
    }

    fn row_mut(&mut self, name: &str) -> Option<&mut Row> {
        if self.index.len() != self.rows.len() {
            self.index = self
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| (r.name.clone(), i))
                .collect();
        }
        let i = *self.index.get(name)?;
        self.rows.get_mut(i)
    }

    fn start_scan(&mut self, names: Option<Vec<String>>) -> Vec<Effect> {
        let generation = self.progress.generation + 1;
        vec![Effect::Scan { generation, names }]
    }

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
                if let Some(r) = self.row_mut(&report.name.clone()) {
                    r.probe = Probe::Done;
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
                } else if self.message.is_some() && !self.upgrading {
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
                    names: planned.nodes.iter().map(|n| n.node.clone()).collect(),
                    plan,
                    planned,
                    input: String::new(),
                });
                self.mode = Mode::Confirm;
                self.detail_scroll = 0;
                Vec::new()
            }
            Msg::UpgradePlanned(Err(e)) => {
                self.message = Some(format!("upgrade: {e}"));
                Vec::new()
            }
            Msg::UpgradeLog(line) => {
                self.message = Some(line.clone());
                self.upgrade_log.push(line);
                let n = self.upgrade_log.len();
                if n > 200 {
                    self.upgrade_log.drain(..n - 200);
                }
                Vec::new()
            }
            Msg::UpgradeDone { names, summary } => {
                self.upgrading = false;
                self.quit_armed = false;
                self.message = Some(summary);
                for r in &mut self.rows {
                    r.marked = false;
                    r.refresh();
                }
                self.dirty = true;
                self.start_scan(Some(names))
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

    fn key(&mut self, k: KeyEvent) -> Vec<Effect> {
        self.ensure_view();
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
                self.detail_scroll = self.detail_scroll.saturating_sub(self.page as u16);
                Vec::new()
            }
            KeyCode::PageDown => {
                self.detail_scroll = self.detail_scroll.saturating_add(self.page as u16);
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
                let n = c.names.len();
                let plan = c.planned.clone();
                self.confirm = None;
                self.mode = Mode::Matrix;
                self.upgrading = true;
                self.upgrade_log.clear();
                self.message = Some(format!("upgrading {n} node(s)…"));
                vec![Effect::RunUpgrade { plan }]
            }
            _ => {
                self.confirm = None;
                self.mode = Mode::Matrix;
                self.message = Some("upgrade cancelled; nothing changed".into());
                Vec::new()
            }
        }
    }

    fn move_to(&mut self, pos: usize) {
        self.selected = pos.min(self.view.len().saturating_sub(1));
        self.detail_scroll = 0;
    }

    /// Carries out `action` (from a key or elsewhere). Write actions are refused in read-only
    /// mode even if reached.
    pub fn act(&mut self, action: Action) -> Vec<Effect> {
        if self.read_only && action.is_write() {
            self.message = Some(format!("read-only: `{}` is not allowed", action.name()));
            return Vec::new();
        }
        let scrolling = matches!(self.mode, Mode::Detail | Mode::Help);
        match action {
            Action::Quit if self.upgrading && !self.quit_armed => {
                self.quit_armed = true;
                self.message = Some(
                    "an upgrade is running: quit again to stop it mid-step (then `gpufleet upgrade --resume` goes on)".into(),
                );
            }
            Action::Quit => return vec![Effect::Quit],
            Action::Down if scrolling => {
                let max = if self.mode == Mode::Detail {
                    self.detail_max
                } else {
                    u16::MAX
                };
                self.detail_scroll = self.detail_scroll.saturating_add(1).min(max);
            }
            Action::Up if scrolling => self.detail_scroll = self.detail_scroll.saturating_sub(1),
            Action::PageDown if scrolling => {
                self.detail_scroll = self.detail_scroll.saturating_add(self.page as u16)
            }
            Action::PageUp if scrolling => {
                self.detail_scroll = self.detail_scroll.saturating_sub(self.page as u16)
            }
            Action::Down => self.move_to(self.selected + 1),
            Action::Up => self.move_to(self.selected.saturating_sub(1)),
            Action::PageDown => self.move_to(self.selected + self.page.max(1)),
            Action::PageUp => self.move_to(self.selected.saturating_sub(self.page.max(1))),
            Action::Top => self.move_to(0),
            Action::Bottom => self.move_to(usize::MAX),
            Action::SortNext | Action::SortPrev => {
                let cols: Vec<Column> = Column::matrix().collect();
                let i = cols.iter().position(|c| *c == self.sort).unwrap_or(0);
                let n = cols.len();
                let j = if action == Action::SortNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.sort = cols[j];
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
                    for r in &mut self.rows {
                        if r.probe != Probe::Done {
                            r.probe = Probe::Done;
                        }
                    }
                    self.message = Some("scan cancelled".into());
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
            Action::ExportJson | Action::ExportCsv => {
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

    fn mouse(&mut self, m: MouseEvent) -> Vec<Effect> {
        self.ensure_view();
        match m.kind {
            MouseEventKind::ScrollDown => self.act(Action::Down),
            MouseEventKind::ScrollUp => self.act(Action::Up),
            MouseEventKind::Down(MouseButton::Left) => {
                if self.mode != Mode::Matrix && self.mode != Mode::Detail {
                    return Vec::new();
                }
                if m.row == self.header_y {
                    if let Some((c, ..)) = self
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
                } else if m.row >= self.body_y {
                    let pos = self.offset + (m.row - self.body_y) as usize;
                    if pos < self.view.len() {
                        self.move_to(pos);
                    }
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Code;
    use crate::model::report::NodeReport;

    fn report(name: &str, status: NodeStatus) -> NodeReport {
        let mut r = NodeReport::unreachable(
            name.into(),
            Code::SshTimeout,
            "x".into(),
            vec![],
            String::new(),
            0,
        );
        r.status = status;
        r
    }

    fn app(n: usize) -> App {
        let rows = (0..n).map(|i| Row::new(format!("gpu{i:03}"))).collect();
        App::new(rows, Keymap::default(), false, "test".into())
    }

    fn key(c: char) -> Msg {
        Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
    }

    #[test]
    fn stale_generations_are_dropped() {
        let mut a = app(2);
        let names = vec!["gpu000".to_string(), "gpu001".to_string()];
        a.update(Msg::ScanStarted {
            generation: 1,
            names: names.clone(),
        });
        a.update(Msg::ScanStarted {
            generation: 2,
            names,
        });
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(report("gpu000", NodeStatus::Ready)),
            raw: None,
        });
        assert!(a.rows[0].report.is_none());
        a.update(Msg::NodeDone {
            generation: 2,
            report: Box::new(report("gpu000", NodeStatus::Migrate)),
            raw: None,
        });
        assert_eq!(a.rows[0].status(), Some(NodeStatus::Migrate));
        assert_eq!(a.progress.done, 1);
    }

    #[test]
    fn sort_filter_and_selection_follow_the_node() {
        let mut a = app(3);
        a.update(Msg::ScanStarted {
            generation: 1,
            names: a.rows.iter().map(|r| r.name.clone()).collect(),
        });
        for (n, s) in [
            ("gpu000", NodeStatus::Ready),
            ("gpu001", NodeStatus::Attention),
            ("gpu002", NodeStatus::Migrate),
        ] {
            a.update(Msg::NodeDone {
                generation: 1,
                report: Box::new(report(n, s)),
                raw: None,
            });
        }
        let names = |a: &App| {
            a.view
                .iter()
                .map(|&i| a.rows[i].name.clone())
                .collect::<Vec<_>>()
        };
        a.ensure_view();
        assert_eq!(
            names(&a),
            ["gpu001", "gpu002", "gpu000"],
            "worst status first"
        );
        assert_eq!(
            a.selected_row().unwrap().name,
            "gpu000",
            "the selection stayed on its node"
        );
        a.update(key('g'));
        a.update(key('j'));
        assert_eq!(a.selected_row().unwrap().name, "gpu002");
        a.update(key('S'));
        assert_eq!(names(&a), ["gpu000", "gpu002", "gpu001"]);
        assert_eq!(
            a.selected_row().unwrap().name,
            "gpu002",
            "selection follows the node"
        );
        a.update(key('/'));
        for c in "status:mig".chars() {
            a.update(key(c));
        }
        a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
        assert_eq!(names(&a), ["gpu002"]);
        a.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
        assert_eq!(a.view.len(), 3);
        // Esc while typing puts back the filter from before (it applies as it is typed).
        a.update(key('/'));
        for c in "status:mig".chars() {
            a.update(key(c));
        }
        assert_eq!(names(&a), ["gpu002"]);
        a.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
        assert_eq!(a.filter, "");
        assert_eq!(a.view.len(), 3);
    }

    #[test]
    fn unknown_is_counted_filtered_and_sorted_after_attention() {
        let mut a = app(4);
        a.update(Msg::ScanStarted {
            generation: 1,
            names: a.rows.iter().map(|r| r.name.clone()).collect(),
        });
        for (n, s) in [
            ("gpu000", NodeStatus::Ready),
            ("gpu001", NodeStatus::Unknown),
            ("gpu002", NodeStatus::Blocked),
            ("gpu003", NodeStatus::Attention),
        ] {
            a.update(Msg::NodeDone {
                generation: 1,
                report: Box::new(report(n, s)),
                raw: None,
            });
        }
        a.ensure_view();
        let names =
            |a: &App| -> Vec<String> { a.view.iter().map(|&i| a.rows[i].name.clone()).collect() };
        assert_eq!(names(&a), ["gpu003", "gpu001", "gpu002", "gpu000"]);
        assert_eq!(a.counts().get(&NodeStatus::Unknown), Some(&1));
        assert_eq!(cell(&a.rows[1], Column::Status), "unknown");
        a.update(key('/'));
        for c in "status:unknown".chars() {
            a.update(key(c));
        }
        a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
        assert_eq!(names(&a), ["gpu001"]);
        assert!(!matches(&a.rows[1], "status:unreachable"));
    }

    #[test]
    fn node_text_in_cells_is_screen_safe() {
        let mut r = report("evil\x1b]0;t\x07\u{202e}\u{fffd}", NodeStatus::Ready);
        r.kernel = Some(crate::model::report::KernelJson {
            release: Some("6.8\u{2028}x\u{feff}".into()),
        });
        let mut row = Row::new(r.name.clone());
        row.report = Some(r);
        row.refresh();
        assert_eq!(
            cell(&row, Column::Node),
            "evil\\x1b]0;t\\x07\\u{202e}\\u{fffd}"
        );
        assert_eq!(cell(&row, Column::Kernel), "6.8\\u{2028}x\\u{feff}");
        row.marked = true;
        row.refresh();
        assert!(!cell(&row, Column::Node).contains('\x1b'));
    }

    #[test]
    fn labels_groups_and_canary_filters() {
        let mut rows: Vec<Row> = (0..3).map(|i| Row::new(format!("n{i}"))).collect();
        rows[0].canary = true;
        rows[1].labels.insert("rack".into(), "r2".into());
        rows[2].groups.push("a100".into());
        let a = App::new(rows, Keymap::default(), false, String::new());
        assert!(matches(&a.rows[0], "label:canary"));
        assert!(matches(&a.rows[1], "label:rack=r2"));
        assert!(matches(&a.rows[1], "label:r2"));
        assert!(matches(&a.rows[2], "group:a100 n2"));
        assert!(!matches(&a.rows[2], "group:a100 n1"));
    }

    #[test]
    fn quit_rescan_cancel_export_effects() {
        let mut a = app(2);
        assert_eq!(a.update(key('q')), vec![Effect::Quit]);
        assert_eq!(
            a.update(key('R')),
            vec![Effect::Scan {
                generation: 1,
                names: None
            }]
        );
        a.update(Msg::ScanStarted {
            generation: 1,
            names: vec!["gpu000".into()],
        });
        assert_eq!(a.update(key('x')), vec![Effect::Cancel]);
        assert!(!a.progress.running);
        a.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(report("gpu000", NodeStatus::Ready)),
            raw: None,
        });
        assert!(
            a.rows[0].report.is_none(),
            "results after cancel are ignored"
        );
        assert!(matches!(
            a.update(key('e'))[0],
            Effect::Export {
                format: ExportFormat::Json,
                ..
            }
        ));
    }

    #[test]
    fn auto_refresh_starts_a_scan_when_due() {
        let mut a = app(1);
        assert!(
            a.update(Msg::Tick {
                since_scan_secs: Some(100)
            })
            .is_empty(),
            "off by default"
        );
        a.refresh_secs = Some(30);
        assert!(
            a.update(Msg::Tick {
                since_scan_secs: Some(10)
            })
            .is_empty()
        );
        assert_eq!(
            a.update(Msg::Tick {
                since_scan_secs: Some(30)
            })
            .len(),
            1
        );
    }

    #[test]
    fn upgrade_needs_the_typed_node_count_and_read_only_refuses_it() {
        let mut a = app(2);
        a.update(Msg::ScanStarted {
            generation: 1,
            names: vec!["gpu000".into(), "gpu001".into()],
        });
        for n in ["gpu000", "gpu001"] {
            a.update(Msg::NodeDone {
                generation: 1,
                report: Box::new(report(n, NodeStatus::Migrate)),
                raw: None,
            });
        }
        a.update(key('g'));
        a.update(Msg::Key(KeyEvent::new(
            KeyCode::Char(' '),
            KeyModifiers::NONE,
        )));
        a.update(Msg::Key(KeyEvent::new(
            KeyCode::Char(' '),
            KeyModifiers::NONE,
        )));
        assert_eq!(a.rows.iter().filter(|r| r.marked).count(), 2);
        let e = a.update(key('U'));
        assert!(matches!(&e[..], [Effect::PlanUpgrade { nodes }] if nodes.len() == 2));
        let planned = Box::new(crate::actions::rollout::Plan {
            rollout: "r-1".into(),
            mode: crate::actions::rollout::Mode::Wave,
            nodes: ["gpu000", "gpu001"]
                .iter()
                .map(|n| crate::actions::rollout::NodePlan {
                    node: n.to_string(),
                    steps: vec![crate::actions::rollout::Step::Reprobe],
                    next_boot: None,
                })
                .collect(),
            skipped: vec![],
        });
        a.update(Msg::UpgradePlanned(Ok((
            vec!["plan".into()],
            planned.clone(),
        ))));
        assert_eq!(a.mode, Mode::Confirm);
        // A wrong count cancels.
        a.update(key('1'));
        assert!(
            a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)))
                .is_empty()
        );
        assert_eq!(a.mode, Mode::Matrix);
        a.update(key('U'));
        a.update(Msg::UpgradePlanned(Ok((vec![], planned.clone()))));
        a.update(key('2'));
        let e = a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
        // The confirmed plan itself is what the runtime runs.
        assert_eq!(e, vec![Effect::RunUpgrade { plan: planned }]);

        // Read-only: the key is unbound, absent from help, and the action refused if reached.
        let rows = vec![Row::new("n")];
        let (km, _) = Keymap::new(&Default::default(), true);
        assert!(
            !km.bound()
                .any(|x| x == Action::Upgrade || x == Action::Mark)
        );
        let mut ro = App::new(rows, km, true, String::new());
        assert!(ro.update(key('U')).is_empty());
        assert!(
            ro.message
                .as_deref()
                .unwrap_or("")
                .contains("read-only session: `upgrade` is off"),
            "{:?}",
            ro.message
        );
        ro.message = None;
        assert!(ro.act(Action::Upgrade).is_empty());
        assert!(ro.message.as_deref().unwrap_or("").contains("read-only"));
    }

    #[test]
    fn quitting_during_an_upgrade_takes_a_second_press() {
        let mut a = app(1);
        a.upgrading = true;
        assert!(a.update(key('q')).is_empty());
        assert!(a.message.as_deref().unwrap().contains("--resume"));
        assert_eq!(a.update(key('q')), vec![Effect::Quit]);
    }

    #[test]
    fn messages_clear_themselves() {
        let mut a = app(1);
        a.message = Some("exported".into());
        for _ in 0..=MESSAGE_TICKS {
            a.update(Msg::Tick {
                since_scan_secs: None,
            });
        }
        assert_eq!(a.message, None);
        a.upgrading = true;
        a.message = Some("upgrading".into());
        for _ in 0..=MESSAGE_TICKS * 2 {
            a.update(Msg::Tick {
                since_scan_secs: None,
            });
        }
        assert!(a.message.is_some(), "kept while an upgrade runs");
    }
}
