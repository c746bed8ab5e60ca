//! The TUI's state machine: `App::update(Msg) -> Vec<Effect>`. No terminal I/O here; the
//! runtime feeds it messages (keys, mouse, scan results with their scan generation) and carries
//! out the effects it returns (start or cancel scans, export, quit).

pub mod keys;
mod raw;
mod rollout;
mod sort;
#[cfg(test)]
mod tests;
mod update;

use std::collections::BTreeMap;
use std::sync::Arc;

use ratatui::crossterm::event::{KeyEvent, MouseEvent};

pub use keys::{Action, Keymap};
pub use raw::RawOutput;
pub use rollout::{
    ConfirmKind, NodeResult, PlanRefused, RolloutResult, Unfinished, live_word, unfinished_lines,
};

use crate::model::text::screen_safe;
use crate::model::{NodeReport, NodeStatus};

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
    /// The scan was cancelled before this node's result came: its report, if any, is from an
    /// earlier scan (stale), else it was never scanned.
    Cancelled,
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
    pub raw: Option<Arc<RawOutput>>,
    /// Cell texts per [`Column`], computed when the report or probe state changes (sorting and
    /// drawing read these; formatting 10,000 rows per frame would not fit a frame).
    pub cells: Vec<String>,
    /// The tone of each cell ([`Column::cell`]; plain until the first report), computed with
    /// them: the matrix colours by it.
    pub tones: Vec<crate::view::Tone>,
    /// The node, kernel, driver and GPU cells lowercased (ASCII), one a line: what free filter
    /// text is looked for in (cells never hold a line break: they are screen-safe).
    search: String,
    /// Marked for an upgrade.
    pub marked: bool,
    /// Where this TUI's rollout is on the node (`draining`, `step NAME`, `rebooting`, `gates`,
    /// `done`, `failed: STEP`: [`live_word`]), shown in the ROLLOUT column over the report's
    /// cell; from the rollout's progress events, until the next rollout starts here.
    pub live: Option<String>,
    /// How the report differs from the `--compare` snapshot (`None`: no comparison, no report
    /// yet, or nothing changed).
    pub diff: Option<RowDiff>,
}

/// A row against the `--compare` snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowDiff {
    /// The old snapshot does not have this node.
    Added,
    /// What changed ([`crate::diff::NodeDiff::columns`] gives the changed cells).
    Changed(crate::diff::NodeDiff),
}

/// The snapshot `--compare` reads, by node name, and the nodes it has that the matrix does
/// not (removed since).
#[derive(Debug, Clone)]
pub struct Compare {
    /// The file, as given (shown in the legend).
    pub source: String,
    old: std::collections::HashMap<String, NodeReport>,
    /// Nodes of the old snapshot not in the matrix, in its order.
    pub removed: Vec<String>,
}

impl Compare {
    /// The comparison with `old` (a snapshot's nodes) for a matrix of `rows`.
    pub fn new(source: String, old: Vec<NodeReport>, rows: &[Row]) -> Compare {
        let names: std::collections::HashSet<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        let removed = old
            .iter()
            .filter(|n| !names.contains(n.name.as_str()))
            .map(|n| n.name.clone())
            .collect();
        Compare {
            source,
            old: old.into_iter().map(|n| (n.name.clone(), n)).collect(),
            removed,
        }
    }

    /// How `new` differs from the old snapshot's node of the same name, through
    /// [`crate::diff::compare`].
    pub fn of(&self, new: &NodeReport) -> Option<RowDiff> {
        let Some(old) = self.old.get(&new.name) else {
            return Some(RowDiff::Added);
        };
        let d = crate::diff::compare(std::slice::from_ref(old), std::slice::from_ref(new));
        d.node(&new.name).cloned().map(RowDiff::Changed)
    }
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
            tones: Vec::new(),
            search: String::new(),
            marked: false,
            live: None,
            diff: None,
        }
        .refreshed()
    }

    fn refreshed(mut self) -> Row {
        self.refresh();
        self
    }

    /// Recomputes the cached cells.
    pub fn refresh(&mut self) {
        (self.cells, self.tones) = Column::matrix()
            .map(|c| {
                let cell = compute_cell(self, c);
                (cell.text, cell.tone)
            })
            .unzip();
        self.search = FREE_TEXT
            .iter()
            .map(|c| cell(self, *c).to_ascii_lowercase())
            .collect::<Vec<_>>()
            .join("\n");
    }

    pub fn status(&self) -> Option<NodeStatus> {
        self.report.as_ref().map(|r| r.status)
    }

    /// The report is left over from an earlier scan: the last one was cancelled before this
    /// node's result came.
    pub fn stale(&self) -> bool {
        self.probe == Probe::Cancelled && self.report.is_some()
    }

    /// Whether the cell of column `c` differs from the `--compare` snapshot.
    pub fn changed(&self, c: Column) -> bool {
        match &self.diff {
            Some(RowDiff::Changed(d)) => d.columns().contains(&crate::diff::ColumnKey(c)),
            _ => false,
        }
    }
}

/// Matrix columns: the one registry of the TUI, the table and the CSV.
pub use crate::view::columns::Column;

/// What the screen shows on top of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Matrix,
    Detail,
    Help,
    /// Typing a filter after `/`.
    FilterInput,
    /// An upgrade plan (or a resume, an abandon, a cancel) on screen, waiting for the operator
    /// to type the node count.
    Confirm,
    /// The last rollout action's result, each node's outcome whole.
    Result,
}

/// An upgrade waiting for confirmation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    /// What typing the count runs.
    pub kind: ConfirmKind,
    pub names: Vec<String>,
    /// The plan, one line per step (with the exact commands).
    pub plan: Vec<String>,
    /// The plan itself: what runs once confirmed (for a resume, an abandon or a cancel: the
    /// unfinished rollout's, whose id the runtime checks again).
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
        raw: Option<Arc<RawOutput>>,
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
    UpgradePlanned(Result<(Vec<String>, Box<crate::actions::rollout::Plan>), PlanRefused>),
    /// A progress line of the running upgrade.
    UpgradeLog(String),
    /// A progress event of the running rollout (the `--events` ones).
    RolloutEvent(Box<crate::actions::rollout::Event>),
    /// The unfinished rollout for a resume, an abandon or a cancel, or why there is none.
    UnfinishedFound(Result<Unfinished, String>),
    /// The upgrade ended (or did not start): these nodes (rescanned), a summary for the status
    /// line when there is no `result`, and the result when it ran.
    UpgradeDone {
        names: Vec<String>,
        summary: String,
        result: Option<Box<RolloutResult>>,
    },
    /// An abandon or a cancel ended: its result, or why it did not happen; `names` are
    /// rescanned.
    RolloutActed {
        names: Vec<String>,
        result: Result<Box<RolloutResult>, String>,
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
    /// Read the unfinished rollout for a confirmation of `kind` (answered by
    /// [`Msg::UnfinishedFound`]).
    FindUnfinished {
        kind: ConfirmKind,
    },
    /// Go on with the unfinished rollout, if it is still `rollout` (answered by
    /// [`Msg::UpgradeDone`]).
    Resume {
        rollout: String,
    },
    /// Give up the unfinished rollout, if it is still `rollout` ([`Msg::RolloutActed`]).
    Abandon {
        rollout: String,
    },
    /// Stop the running steps of the unfinished rollout, if it is still `rollout`
    /// ([`Msg::RolloutActed`]).
    CancelRollout {
        rollout: String,
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

/// What a frame laid out, as the drawing returns it ([`crate::ui::draw`]): what keys and clicks
/// act on until the next frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drawn {
    /// The screen row of the header, and where its cells are: (column, x start, x end).
    pub header_y: u16,
    pub header_hits: Vec<(Column, u16, u16)>,
    /// The screen row of the first table row.
    pub body_y: u16,
    /// Table rows visible.
    pub page: usize,
    /// First visible position in the view.
    pub offset: usize,
    /// The view position on each body line (`None` on a group's header row), top down; empty
    /// before the first frame.
    pub body_rows: Vec<Option<usize>>,
    /// How far the detail pane can scroll (its lines minus its height).
    pub detail_max: u16,
    /// How far the help overlay can scroll (its wrapped lines minus its height).
    pub help_max: u16,
    /// How far the result pane can scroll (its wrapped lines minus its height).
    pub result_max: u16,
}

/// The whole TUI state.
#[derive(Debug, Clone)]
pub struct App {
    pub rows: Vec<Row>,
    /// Indices into `rows`: filtered, grouped and sorted — what the matrix shows.
    pub view: Vec<usize>,
    /// Position in `view`.
    pub selected: usize,
    /// Whether the user has moved the cursor (a key, a click). Until then it stays on the first
    /// row as results arrive and the view is re-sorted (the worst node first); from then on it
    /// follows its node.
    pub cursor_moved: bool,
    pub sort: Column,
    pub descending: bool,
    /// The applied filter.
    pub filter: String,
    /// Why the applied filter is invalid (an unknown key or value); it then shows no row.
    pub filter_error: Option<String>,
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
    /// What the last frame laid out (paging, mouse hits, scroll limits): [`App::laid_out`].
    pub drawn: Drawn,
    /// Frames drawn while scanning (spinner).
    pub spin: usize,
    /// `view` must be rebuilt before it is next used (results arrive in bursts).
    pub dirty: bool,
    /// Row position by node name (rows are never reordered, only appended at start).
    index: std::collections::HashMap<String, usize>,
    /// The context line: "fleet.toml (128 nodes)" or "local".
    pub source: String,
    /// The upgrade waiting for confirmation.
    pub confirm: Option<Confirm>,
    /// `--compare OLD.json`: the snapshot changed cells are marked against.
    pub compare: Option<Compare>,
    /// An upgrade is running.
    pub upgrading: bool,
    /// The last lines of the running or last upgrade.
    pub upgrade_log: Vec<String>,
    /// `quit` was pressed once while an upgrade runs; a second press quits.
    pub quit_armed: bool,
    /// The plan of the rollout running here (or the last one): its events are shown.
    pub running_plan: Option<Box<crate::actions::rollout::Plan>>,
    /// The last rollout action's result (the result pane).
    pub result: Option<RolloutResult>,
    /// The status line as of the last tick, and for how many ticks it has stood: messages
    /// clear themselves after about 10 s (not while an upgrade runs).
    message_seen: Option<String>,
    message_age: u32,
}

/// Cell text of `row` in column `c`, from the cache.
pub fn cell(row: &Row, c: Column) -> &str {
    row.cells.get(matrix_index(c)).map_or("", String::as_str)
}

/// The tone of `row`'s cell in column `c` ([`Column::cell`]), from the cache.
pub fn tone(row: &Row, c: Column) -> crate::view::Tone {
    row.tones
        .get(matrix_index(c))
        .copied()
        .unwrap_or(crate::view::Tone::Plain)
}

/// The place of column `c` in the matrix, which [`Row::cells`] and [`Row::tones`] follow.
fn matrix_index(c: Column) -> usize {
    Column::matrix().position(|x| x == c).unwrap_or(0)
}

/// The cell of `row` in column `c`: its text through [`screen_safe`] (empty until the first
/// report) and its tone ([`Column::cell`]; plain before the first report).
fn compute_cell(row: &Row, c: Column) -> crate::view::Cell {
    use crate::view::Cell;
    if c == Column::OperatorUpgrade {
        let cell = crate::view::columns::operator_upgrade_cell(&row.labels);
        return Cell::plain(crate::model::text::clip(&screen_safe(&cell), 64));
    }
    if c == Column::Node {
        let mark = if row.marked { "✓ " } else { "" };
        // Against --compare's snapshot: `+` a node it lacks, `*` one that changed.
        let diff = match row.diff {
            Some(RowDiff::Added) => "+ ",
            Some(RowDiff::Changed(_)) => "* ",
            None => "",
        };
        let stale = if row.stale() { " (stale)" } else { "" };
        return Cell::plain(format!("{mark}{diff}{}{stale}", screen_safe(&row.name)));
    }
    // This TUI's rollout on the node, over what the report says.
    if c == Column::Rollout
        && let Some(live) = &row.live
    {
        return Cell::plain(crate::model::text::clip(&screen_safe(live), 64));
    }
    let Some(r) = &row.report else {
        return Cell::plain(match c {
            Column::Node => screen_safe(&row.name).into_owned(),
            Column::Status => match row.probe {
                Probe::Running => "probing".into(),
                Probe::Cancelled => "cancelled".into(),
                _ => "pending".into(),
            },
            _ => String::new(),
        });
    };
    let cell = c.cell(r);
    Cell::new(
        crate::model::text::clip(&screen_safe(&cell.text), 64),
        cell.tone,
    )
}

/// What a filter term looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKey {
    /// Free text: a substring of the node, kernel, driver or GPU model cells.
    Text,
    /// `canary` on its own: the inventory's canary flag.
    Canary,
    /// `status:S`: a status or a prefix of one, or `pending`.
    Status,
    /// `flavor:F` / `module:F`: the module's flavour, or a prefix.
    Flavor,
    /// `label:K` / `label:K=V`.
    Label,
    /// `group:G`.
    Group,
    /// `reason:C`: part of a reason code.
    Reason,
}

impl FilterKey {
    /// Its name before `:` (`""` for free text).
    pub fn as_str(self) -> &'static str {
        match self {
            FilterKey::Text => "",
            FilterKey::Canary => "canary",
            FilterKey::Status => "status",
            FilterKey::Flavor => "flavor",
            FilterKey::Label => "label",
            FilterKey::Group => "group",
            FilterKey::Reason => "reason",
        }
    }
}

/// One term of a filter: a key ([`FilterKey`]), its values (any one may match:
/// `status:migrate,blocked`), and `!` before it (none may match).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub negated: bool,
    pub key: FilterKey,
    pub values: Vec<String>,
}

/// The filter keys as typed, aliases included.
const FILTER_KEYS: [(&str, FilterKey); 6] = [
    ("status", FilterKey::Status),
    ("flavor", FilterKey::Flavor),
    ("module", FilterKey::Flavor),
    ("label", FilterKey::Label),
    ("group", FilterKey::Group),
    ("reason", FilterKey::Reason),
];

const FLAVORS: [&str; 4] = ["open", "proprietary", "none", "unknown"];

/// Parses a filter: space-separated terms, all of which must hold. A term is `key:v1,v2` (any
/// value), `!key:v` (none), a free word (a case-insensitive substring of the node, kernel,
/// driver or GPU model; `!word` for none), or `canary`. Keys: `status:S` (a status or a prefix
/// of one, or `pending`), `flavor:F` / `module:F` (open, proprietary, none, unknown, or a
/// prefix), `label:K` / `label:K=V` (`label:canary` is the inventory's canary flag too),
/// `group:G`, `reason:C` (part of a reason code).
///
/// Errors: an unknown key, or a status, flavour or reason that names none (with "did you
/// mean" where one is close), or an empty value.
pub fn parse_filter(filter: &str) -> Result<Vec<Term>, String> {
    let mut out = Vec::new();
    for raw in filter.split_whitespace() {
        let t = raw.to_ascii_lowercase();
        let (negated, t) = match t.strip_prefix('!') {
            Some(rest) => (true, rest.to_string()),
            None => (false, t),
        };
        if t.is_empty() {
            return Err("`!` needs a term after it (`!status:ready`)".into());
        }
        let Some((key, vals)) = t.split_once(':') else {
            let key = if t == "canary" {
                FilterKey::Canary
            } else {
                FilterKey::Text
            };
            out.push(Term {
                negated,
                key,
                values: vec![t],
            });
            continue;
        };
        let Some(&(_, key)) = FILTER_KEYS.iter().find(|(k, _)| *k == key) else {
            let hint = crate::diag::closest(key, FILTER_KEYS.iter().map(|(k, _)| *k))
                .map(|s| format!("; did you mean `{s}:`?"))
                .unwrap_or_default();
            return Err(format!(
                "unknown filter key `{key}:` (status: flavor: label: group: reason:){hint}"
            ));
        };
        let values: Vec<String> = vals.split(',').map(str::to_string).collect();
        for v in &values {
            if v.is_empty() {
                return Err(format!(
                    "`{raw}`: a value is missing after `{}:`",
                    key.as_str()
                ));
            }
            let known: Vec<&str> = match key {
                FilterKey::Status => NodeStatus::ALL
                    .iter()
                    .map(|s| s.as_str())
                    .chain(["pending"])
                    .collect(),
                FilterKey::Flavor => FLAVORS.to_vec(),
                FilterKey::Reason => crate::model::Code::ALL.iter().map(|c| c.as_str()).collect(),
                _ => continue,
            };
            let ok = match key {
                FilterKey::Reason => known.iter().any(|k| k.contains(v.as_str())),
                _ => known.iter().any(|k| k.starts_with(v.as_str())),
            };
            if !ok {
                let hint = crate::diag::closest(v, known.iter().copied())
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                return Err(format!("no {} `{v}`{hint}", key.as_str()));
            }
        }
        out.push(Term {
            negated,
            key,
            values,
        });
    }
    Ok(out)
}

/// Whether `row` passes `filter` (see [`parse_filter`]); an invalid filter passes no row.
pub fn matches(row: &Row, filter: &str) -> bool {
    parse_filter(filter).is_ok_and(|terms| matches_terms(row, &terms))
}

/// Whether `row` passes every term.
pub fn matches_terms(row: &Row, terms: &[Term]) -> bool {
    terms
        .iter()
        .all(|t| t.values.iter().any(|v| term_matches(row, t.key, v)) != t.negated)
}

fn term_matches(row: &Row, key: FilterKey, val: &str) -> bool {
    let report = row.report.as_ref();
    match key {
        FilterKey::Status => {
            row.status().is_some_and(|s| s.as_str().starts_with(val))
                || (val == "pending" && row.report.is_none())
        }
        FilterKey::Flavor => report
            .and_then(crate::view::machine::flavor)
            .is_some_and(|f| f.starts_with(val)),
        FilterKey::Label => match val.split_once('=') {
            Some((k, v)) => row.labels.get(k).is_some_and(|x| x.eq_ignore_ascii_case(v)),
            None => {
                row.labels.contains_key(val)
                    || row.labels.values().any(|v| v.eq_ignore_ascii_case(val))
                    || (val == "canary" && row.canary)
            }
        },
        FilterKey::Group => row.groups.iter().any(|g| g.eq_ignore_ascii_case(val)),
        FilterKey::Reason => {
            report.is_some_and(|r| r.reasons.iter().any(|x| x.code.as_str().contains(val)))
        }
        FilterKey::Canary => val == "canary" && row.canary,
        // In one of the cells: no cell holds a line break, so no match spans two of them.
        FilterKey::Text => row.search.contains(val),
    }
}

/// The columns free filter text is looked for in.
const FREE_TEXT: [Column; 4] = [Column::Node, Column::Kernel, Column::Driver, Column::Gpus];

impl App {
    /// An app over `rows`, sorted by status (worst first).
    pub fn new(rows: Vec<Row>, keymap: Keymap, read_only: bool, source: String) -> App {
        let mut app = App {
            rows,
            view: Vec::new(),
            selected: 0,
            cursor_moved: false,
            sort: Column::Status,
            descending: false,
            filter: String::new(),
            filter_error: None,
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
            // Before the first frame: a page of 10, no scroll limit.
            drawn: Drawn {
                page: 10,
                detail_max: u16::MAX,
                help_max: u16::MAX,
                result_max: u16::MAX,
                ..Drawn::default()
            },
            spin: 0,
            dirty: false,
            index: std::collections::HashMap::new(),
            source,
            confirm: None,
            compare: None,
            upgrading: false,
            upgrade_log: Vec::new(),
            quit_armed: false,
            running_plan: None,
            result: None,
            message_seen: None,
            message_age: 0,
        };
        app.rebuild_view();
        app
    }

    /// Keeps what a frame laid out ([`Drawn`]): keys and clicks act on it until the next
    /// frame. The scroll limit of the detail pane (the help overlay) is the one of the last
    /// frame that drew it, and the scroll is kept within it.
    pub fn laid_out(&mut self, mut d: Drawn) {
        if self.mode == Mode::Detail {
            self.detail_scroll = self.detail_scroll.min(d.detail_max);
        } else {
            d.detail_max = self.drawn.detail_max;
        }
        if self.mode == Mode::Help {
            self.detail_scroll = self.detail_scroll.min(d.help_max);
        } else {
            d.help_max = self.drawn.help_max;
        }
        if self.mode == Mode::Result {
            self.detail_scroll = self.detail_scroll.min(d.result_max);
        } else {
            d.result_max = self.drawn.result_max;
        }
        self.drawn = d;
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

    /// Rebuilds `view` if results arrived since it was last built.
    pub fn ensure_view(&mut self) {
        if self.dirty {
            self.rebuild_view();
        }
    }

    /// Recomputes `view` from filter, grouping and sort, keeping the selected node selected once
    /// the user has moved the cursor ([`App::cursor_moved`]); before that, on the first row.
    /// The rows are taken in the order of the view before (then the others): mostly in order
    /// already while results stream in, which the (adaptive, stable) sort finishes quickly; the
    /// order is the same from any start, ties being broken by the unique node name.
    pub fn rebuild_view(&mut self) {
        self.dirty = false;
        let keep = self
            .view
            .get(self.selected)
            .copied()
            .filter(|_| self.cursor_moved);
        let terms = parse_filter(&self.filter);
        self.filter_error = terms.as_ref().err().cloned();
        let mut seen = vec![false; self.rows.len()];
        let view: Vec<usize> = match &terms {
            Ok(terms) => self
                .view
                .iter()
                .copied()
                .chain(0..self.rows.len())
                .filter(|&i| i < seen.len() && !std::mem::replace(&mut seen[i], true))
                .filter(|&i| matches_terms(&self.rows[i], terms))
                .collect(),
            Err(_) => Vec::new(),
        };
        self.view = self.sorted(view);
        self.selected = keep
            .and_then(|k| self.view.iter().position(|&i| i == k))
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
