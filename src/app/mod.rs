//! The TUI's state machine: `App::update(Msg) -> Vec<Effect>`. No terminal I/O here; the
//! runtime feeds it messages (keys, mouse, scan results with their scan generation) and carries
//! out the effects it returns (start or cancel scans, export, quit).

pub mod keys;
#[cfg(test)]
mod tests;
mod update;

use std::collections::BTreeMap;
use std::sync::Arc;

use ratatui::crossterm::event::{KeyEvent, MouseEvent};

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

/// A probe's raw output as the detail pane shows it: its sections (parsed once, when the
/// result arrives) and its size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSections {
    pub output: crate::model::sections::ProbeOutput,
    pub bytes: usize,
}

impl RawSections {
    /// Splits `run`'s output at its boundary.
    pub fn of(run: &RawRun) -> RawSections {
        RawSections {
            output: crate::model::sections::parse(&run.output, &run.boundary),
            bytes: run.output.len(),
        }
    }
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
    /// The last raw probe output, split into its sections once when it arrived, for the
    /// detail pane.
    pub raw: Option<Arc<RawSections>>,
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
    /// A line for the status bar (a collected snapshot that could not be read again).
    Notice(String),
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
    if c == Column::OperatorUpgrade {
        let cell = crate::columns::operator_upgrade_cell(&row.labels);
        return crate::snapshot::clip(&screen_safe(&cell), 64);
    }
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
        if self.sort.spec().sort == crate::columns::SortKey::Cell {
            let (x, y) = (compute_cell(a, self.sort), compute_cell(b, self.sort));
            // Empty cells last.
            let ord = (x.is_empty(), x).cmp(&(y.is_empty(), y));
            let ord = if self.descending { ord.reverse() } else { ord };
            return ord.then_with(|| a.name.cmp(&b.name));
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
}
