//! The TUI's rollout display: each node's progress in the ROLLOUT column, from the rollout's
//! progress events (the same [`Event`]s `gpufleet upgrade --events` writes); the typed
//! confirmation of an upgrade, a resume, an abandon or a cancel; and the result pane, which
//! lists each node's outcome whole. The rollout itself is [`crate::fleet::rollout`]: the
//! runtime calls it; nothing here changes a node.

use crate::actions::journal::Phase;
use crate::actions::rollout::{self, Event, Plan, Progress, Step};
use crate::fleet::rollout::{Abandoned, CancelReport, Report};

use super::*;

/// What a typed confirmation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmKind {
    /// The plan of the marked nodes (`U`).
    Upgrade,
    /// Go on with the unfinished rollout (`gpufleet upgrade --resume`).
    Resume,
    /// Give the unfinished rollout up (`--abandon`).
    Abandon,
    /// Stop the running steps of the unfinished rollout (`--cancel`).
    Cancel,
}

impl ConfirmKind {
    /// The popup's title.
    pub fn title(self, rollout: &str) -> String {
        match self {
            ConfirmKind::Upgrade => " upgrade plan ".into(),
            ConfirmKind::Resume => format!(" resume rollout {rollout} "),
            ConfirmKind::Abandon => format!(" abandon rollout {rollout} "),
            ConfirmKind::Cancel => format!(" cancel the running steps of rollout {rollout} "),
        }
    }

    /// What typing the count does, and how to type it.
    pub fn warning(self, n: usize, rollout: &str) -> String {
        let what = match self {
            ConfirmKind::Upgrade => format!("This drains and upgrades {n} node(s)."),
            ConfirmKind::Resume => format!(
                "This goes on with rollout {rollout} on its {n} node(s): the steps that did not finish run (drains, recipe steps, reboots)."
            ),
            ConfirmKind::Abandon => format!(
                "This gives up rollout {rollout} of {n} node(s): journaled; its nodes stay as they are (drained ones stay drained) and the next rollout may take over their node locks."
            ),
            ConfirmKind::Cancel => format!(
                "This stops the running recipe step of rollout {rollout} on its {n} node(s) (its process group is killed there); they stay drained and locked, for resume or abandon."
            ),
        };
        format!("{what} Type {n} and press enter to go on; anything else cancels.")
    }

    /// The action in one word (`upgrade`, `resume`, `abandon`, `cancel`).
    pub fn verb(self) -> &'static str {
        match self {
            ConfirmKind::Upgrade => "upgrade",
            ConfirmKind::Resume => "resume",
            ConfirmKind::Abandon => "abandon",
            ConfirmKind::Cancel => "cancel",
        }
    }
}

/// A plan that could not be made (`U`), and whether it is because a rollout did not finish
/// (then the message names the keys that resume, abandon or cancel it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRefused {
    pub why: String,
    pub unfinished: bool,
}

/// The unfinished rollout, found for a resume, an abandon or a cancel: what the confirmation
/// shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    pub kind: ConfirmKind,
    /// Its plan (as the journal has it).
    pub plan: Box<Plan>,
    /// The lines the confirmation shows ([`unfinished_lines`]).
    pub lines: Vec<String>,
}

/// What the confirmation of `kind` shows of the unfinished `plan`, with how far each node got
/// (`progress`): for a resume the steps done before (skipped), then its plan; for an abandon
/// what each node is left with ([`rollout::left_behind`]) and its plan; for a cancel the step
/// running on each node (node text in them: escape it where it is shown).
pub fn unfinished_lines(kind: ConfirmKind, plan: &Plan, progress: &Progress) -> Vec<String> {
    let mut out = Vec::new();
    match kind {
        ConfirmKind::Upgrade | ConfirmKind::Resume => {
            out.extend(crate::fleet::rollout::done_before(plan, progress));
            out.extend(rollout::plan_lines(plan, false));
        }
        ConfirmKind::Abandon => {
            out.push("what each node is left with:".into());
            out.extend(
                rollout::left_behind(plan, progress)
                    .into_iter()
                    .map(|l| format!("  {l}")),
            );
            out.push(String::new());
            out.extend(rollout::plan_lines(plan, false));
        }
        ConfirmKind::Cancel => {
            for np in &plan.nodes {
                let running = (0..np.steps.len()).rev().find(|s| {
                    progress.get(&(np.node.clone(), *s)) == Some(&Phase::Start)
                        && matches!(np.steps[*s], Step::Recipe { .. })
                });
                out.push(match running {
                    Some(s) => format!(
                        "{}: stops {} (started, not ended)",
                        np.node,
                        np.steps[s].label()
                    ),
                    None => format!(
                        "{}: no recipe step runs on it now (nothing to stop)",
                        np.node
                    ),
                });
            }
        }
    }
    out
}

/// One node's outcome, as the result pane lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeResult {
    pub node: String,
    /// The ROLLOUT cell it leaves: `done`, `failed: STEP`, `skipped`, `cancelled`, ….
    pub word: String,
    /// What happened to it, whole (node text in it: escape it where it is shown).
    pub outcome: String,
}

/// What the result pane shows of the last rollout action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutResult {
    /// One line: `rollout r-… done: 2 upgraded, 1 failed` (the status line says it, with the
    /// key of the result pane: `… (o: result)`; ASCII only: the status line escapes `·` and `…`).
    pub title: String,
    pub nodes: Vec<NodeResult>,
    /// Lines after the nodes (what to do next).
    pub notes: Vec<String>,
}

/// A step label as short as the ROLLOUT column wants it (16 cells at most): `step:switch`
/// → `switch`, `wait-ssh:reboot` → `reboot`, `gates` → `gates`.
fn step_short(label: &str) -> &str {
    label.split_once(':').map_or(label, |(_, name)| name)
}

impl RolloutResult {
    /// The result of a run (`U` or a resume): each node of the plan in plan order, upgraded,
    /// skipped (why) or stopped (where, its drain, why: [`Report::failures`]).
    pub fn of_report(r: &Report) -> RolloutResult {
        let failures: std::collections::HashMap<&str, String> = r.failures().into_iter().collect();
        let skipped: std::collections::HashMap<&str, &str> = r.skipped().into_iter().collect();
        let mut nodes = Vec::new();
        let (mut up, mut failed, mut skip, mut down) = (0, 0, 0, 0);
        for np in &r.plan.nodes {
            let o = r.outcomes.iter().find(|o| o.node == np.node);
            let n = np.node.as_str();
            let (word, outcome) = match (o, failures.get(n), skipped.get(n)) {
                (Some(o), Some(f), _) if o.drained == rollout::Drained::StillDown => {
                    down += 1;
                    ("still down".to_string(), f.clone())
                }
                (Some(o), Some(f), _) => {
                    failed += 1;
                    let at = o.failure.as_ref().map_or("", |f| f.step.as_str());
                    (format!("failed: {}", step_short(at)), f.clone())
                }
                (Some(_), None, Some(why)) => {
                    skip += 1;
                    ("skipped".to_string(), format!("skipped: {why}"))
                }
                (Some(o), None, None) => {
                    up += 1;
                    let outcome = match (o.drained, &o.kept) {
                        (rollout::Drained::Kept, Some(said)) => {
                            format!("upgraded, gates passed; not given back: {said}")
                        }
                        (rollout::Drained::Kept, None) => {
                            "upgraded, gates passed; not given back: gpufleet did not drain it"
                                .to_string()
                        }
                        _ => "upgraded: every step done, gates passed".to_string(),
                    };
                    ("done".to_string(), outcome)
                }
                (None, ..) => {
                    failed += 1;
                    (
                        "failed".to_string(),
                        "no outcome: the rollout ended before it".to_string(),
                    )
                }
            };
            nodes.push(NodeResult {
                node: np.node.clone(),
                word,
                outcome,
            });
        }
        let mut counts = vec![format!("{up} upgraded")];
        if failed > 0 {
            counts.push(format!("{failed} failed"));
        }
        if down > 0 {
            counts.push(format!("{down} still down"));
        }
        if skip > 0 {
            counts.push(format!("{skip} skipped"));
        }
        let ended = if failed + down > 0 { "stopped" } else { "done" };
        let mut notes = Vec::new();
        if down > 0 {
            notes.push(
                "a node still down is its owner's to bring back; then resume finds it back in service and finishes".into(),
            );
        }
        if failed > 0 {
            notes.push(
                "fix what stopped them, then resume goes on from there (or abandon gives the rollout up)".into(),
            );
        }
        RolloutResult {
            title: format!("rollout {} {ended}: {}", r.plan.rollout, counts.join(", ")),
            nodes,
            notes,
        }
    }

    /// The result of an abandon: each node and what it is left with.
    pub fn of_abandoned(a: &Abandoned) -> RolloutResult {
        match a {
            Abandoned::Unreadable(id) => RolloutResult {
                title: format!("rollout {id} abandoned"),
                nodes: Vec::new(),
                notes: vec![
                    "its plan could not be read, so check its nodes by hand: `gpufleet locks` lists node locks, and drained nodes stay drained".into(),
                ],
            },
            Abandoned::Rollout {
                id,
                nodes,
                left_behind,
            } => RolloutResult {
                title: format!("rollout {id} abandoned ({} node(s))", nodes.len()),
                nodes: nodes
                    .iter()
                    .map(|n| NodeResult {
                        node: n.clone(),
                        word: "abandoned".into(),
                        outcome: "abandoned: its state is as the rollout left it".into(),
                    })
                    .collect(),
                notes: std::iter::once("what each node is left with:".to_string())
                    .chain(left_behind.iter().map(|l| format!("  {l}")))
                    .collect(),
            },
        }
    }

    /// The result of a cancel: each node, the step stopped or why nothing was.
    pub fn of_cancel(c: &CancelReport) -> RolloutResult {
        let mut notes = Vec::new();
        if let Some(h) = &c.running {
            notes.push(format!(
                "the rollout's gpufleet still runs ({h}): it sees its step stopped and stops the node"
            ));
        }
        notes.push(
            "its nodes stay drained and locked: resume runs the stopped steps again, abandon gives it up".into(),
        );
        RolloutResult {
            title: format!("rollout {} cancelled", c.rollout),
            nodes: c
                .nodes
                .iter()
                .map(|n| NodeResult {
                    node: n.node.clone(),
                    word: if n.said.starts_with("could not be stopped") {
                        "cancel failed".into()
                    } else if n.step.is_some() {
                        "cancelled".into()
                    } else {
                        String::new()
                    },
                    outcome: match &n.step {
                        Some(s) => format!("{s} {}", n.said),
                        None => n.said.clone(),
                    },
                })
                .collect(),
            notes,
        }
    }
}

/// The ROLLOUT cell a progress event leaves on its node (`None`: the cell stays as it is):
/// `locking`, `draining`, `step NAME`, `rebooting` (a reboot step, and the wait for the new
/// boot), `gates`, `uncordoning`, `unlocking`, `done` (the last step done), `failed: STEP`,
/// `stopping NAME` (a cancel or `kill_after`), `skipped`. `plan`: the running plan (which steps reboot).
pub fn live_word(ev: &Event, plan: Option<&Plan>) -> Option<String> {
    let reboots = |name: &str| {
        plan.is_some_and(|p| {
            p.nodes.iter().any(|n| {
                n.node == ev.node
                    && n.steps.iter().any(
                        |s| matches!(s, Step::Recipe { name: x, reboot: true, .. } if x == name),
                    )
            })
        })
    };
    let last = |label: &str| {
        plan.and_then(|p| p.nodes.iter().find(|n| n.node == ev.node))
            .and_then(|n| n.steps.last())
            .is_some_and(|s| s.label() == label)
    };
    let (kind, name) = ev.step.split_once(':').unwrap_or((ev.step.as_str(), ""));
    match ev.state.as_str() {
        "failed" if kind != "hook" && kind != "kill" => {
            Some(format!("failed: {}", step_short(&ev.step)))
        }
        "skipped" => Some("skipped".into()),
        "start" => Some(match kind {
            "lock" => "locking".into(),
            "drain" => "draining".into(),
            "boot-id" => format!("step {name}"),
            "step" if reboots(name) => "rebooting".into(),
            "step" => format!("step {name}"),
            "kill" => format!("stopping {name}"),
            "wait-ssh" => "rebooting".into(),
            "reprobe" | "gates" => "gates".into(),
            "uncordon" => "uncordoning".into(),
            "unlock" => "unlocking".into(),
            _ => return None,
        }),
        "done" if last(&ev.step) => Some("done".into()),
        "done" if kind == "step" && reboots(name) => Some("rebooting".into()),
        _ => None,
    }
}

impl App {
    /// Whether the status line says the last rollout's result: that line stays until another
    /// message replaces it (a rollout's outcome must not vanish after a few seconds).
    pub(super) fn message_is_result(&self) -> bool {
        match (&self.message, &self.result) {
            (Some(m), Some(r)) => m.starts_with(&r.title),
            _ => false,
        }
    }

    /// A progress event of the running rollout: its node's ROLLOUT cell follows it; events of
    /// another rollout are not this TUI's run and are left out.
    pub(super) fn rollout_event(&mut self, ev: &Event) {
        let Some(plan) = &self.running_plan else {
            return;
        };
        if ev.rollout != plan.rollout || ev.node.is_empty() {
            return;
        }
        if let Some(word) = live_word(ev, Some(plan))
            && let Some(r) = self.row_mut(&ev.node.clone())
        {
            r.live = Some(word);
            r.refresh();
            self.dirty = true;
        }
    }

    /// A rollout starts from the TUI (`plan`): every node's ROLLOUT cell from an earlier one is
    /// cleared, and its nodes show `queued` until their first event.
    pub(super) fn rollout_started(&mut self, plan: Box<Plan>) {
        for r in &mut self.rows {
            if r.live.take().is_some() {
                r.refresh();
            }
        }
        let names: Vec<String> = plan.nodes.iter().map(|n| n.node.clone()).collect();
        for n in names {
            if let Some(r) = self.row_mut(&n) {
                r.live = Some("queued".into());
                r.refresh();
            }
        }
        self.running_plan = Some(plan);
        self.dirty = true;
    }

    /// A rollout action ended with `result`: each node's ROLLOUT cell says how it ended, the
    /// status line says the counts and the key of the result pane, which lists it whole.
    pub(super) fn rollout_result(&mut self, result: RolloutResult) {
        for n in &result.nodes {
            if n.word.is_empty() {
                continue;
            }
            if let Some(r) = self.row_mut(&n.node.clone()) {
                r.live = Some(n.word.clone());
                r.refresh();
            }
        }
        let key = self.keymap.keys_of(Action::RolloutResult);
        let key = key.split(", ").next().unwrap_or("");
        self.message = Some(if key.is_empty() {
            result.title.clone()
        } else {
            // The key last but short: at 80 columns the line still shows it.
            format!("{} ({key}: result)", result.title)
        });
        self.result = Some(result);
        self.dirty = true;
    }

    /// A plan refused: one line; when a rollout did not finish, with the keys that resume,
    /// abandon or cancel it here.
    pub(super) fn plan_refused(&mut self, r: PlanRefused) {
        // The message line is one line: a list of nodes that cannot be planned is joined
        // with `; `.
        let e = r.why.replace(":\n  ", ": ").replace("\n  ", "; ");
        let mut m = format!("upgrade: {e}");
        if r.unfinished {
            let k = |a: Action| {
                let keys = self.keymap.keys_of(a);
                keys.split(", ").next().unwrap_or("").to_string()
            };
            m.push_str(&format!(
                " (here: {} resume, {} abandon, {} cancel its running step)",
                k(Action::ResumeRollout),
                k(Action::AbandonRollout),
                k(Action::CancelRollout)
            ));
        }
        self.message = Some(m);
    }

    /// The unfinished rollout found for `u.kind`: its confirmation, the node count to type.
    pub(super) fn unfinished_found(&mut self, u: Unfinished) {
        self.confirm = Some(Confirm {
            kind: u.kind,
            names: u.plan.nodes.iter().map(|n| n.node.clone()).collect(),
            plan: u.lines,
            planned: u.plan,
            input: String::new(),
        });
        self.mode = Mode::Confirm;
        self.detail_scroll = 0;
    }

    /// Resume, abandon or cancel pressed: asks the runtime for the unfinished rollout. A
    /// resume or an abandon waits while this TUI's rollout runs (its process holds it); a
    /// cancel does not (it stops the running step, which this run then sees fail).
    pub(super) fn ask_unfinished(&mut self, kind: ConfirmKind) -> Vec<Effect> {
        if self.upgrading && kind != ConfirmKind::Cancel {
            self.message = Some(format!(
                "a rollout is running here: {} waits for it to end (cancel stops its running step)",
                kind.verb()
            ));
            return Vec::new();
        }
        self.message = Some(format!(
            "reading the unfinished rollout to {}...",
            kind.verb()
        ));
        vec![Effect::FindUnfinished { kind }]
    }

    /// The typed count matched: what the confirmation runs.
    pub(super) fn confirmed(&mut self, c: Confirm) -> Vec<Effect> {
        let n = c.names.len();
        let id = c.planned.rollout.clone();
        match c.kind {
            ConfirmKind::Upgrade | ConfirmKind::Resume => {
                self.upgrading = true;
                self.upgrade_log.clear();
                self.rollout_started(c.planned.clone());
                if c.kind == ConfirmKind::Upgrade {
                    self.message = Some(format!("upgrading {n} node(s)..."));
                    vec![Effect::RunUpgrade { plan: c.planned }]
                } else {
                    self.message = Some(format!("resuming rollout {id} on {n} node(s)..."));
                    vec![Effect::Resume { rollout: id }]
                }
            }
            ConfirmKind::Abandon => {
                self.message = Some(format!("abandoning rollout {id}..."));
                vec![Effect::Abandon { rollout: id }]
            }
            ConfirmKind::Cancel => {
                self.message = Some(format!("stopping the running steps of rollout {id}..."));
                vec![Effect::CancelRollout { rollout: id }]
            }
        }
    }

    /// The result pane: shown or hidden (nothing to show before a rollout action ended here).
    pub(super) fn toggle_result(&mut self) {
        if self.mode == Mode::Result {
            self.mode = Mode::Matrix;
        } else if self.result.is_some() {
            self.mode = Mode::Result;
            self.detail_scroll = 0;
        } else {
            self.message = Some("no rollout result yet: it comes when a rollout ends".into());
        }
    }
}

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;
