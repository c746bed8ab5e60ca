//! What the journal says of rollouts (pure): how far one got, which one is unfinished, the
//! list `gpufleet rollouts` prints, what an abandoned one leaves behind, which nodes are
//! drained.

use std::collections::HashMap;

use serde::Serialize;

use super::*;
use crate::actions::journal::{Entry, Phase};
use crate::actions::node_side;
use crate::actions::scheduler;

/// How far a rollout got, per (node, step number): the last phase the journal says (a map:
/// `get`, `insert`, … through `Deref`), and the nodes whose give-back last said "still down"
/// ([`Progress::record`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    phases: HashMap<(String, usize), Phase>,
    /// Nodes whose last uncordon ended `failed` with [`scheduler::STILL_DOWN`]: upgraded, gates
    /// passed, gpufleet's drain removed, DOWN for a reason of someone else's.
    still_down: std::collections::BTreeSet<String>,
}

impl Progress {
    pub fn new() -> Progress {
        Progress::default()
    }

    /// Records one journal entry of a node step: its phase, and whether its give-back said
    /// the node is still down (an uncordon `failed` whose outcome starts with
    /// [`scheduler::STILL_DOWN`]; any later uncordon entry of the node clears it).
    pub fn record(&mut self, node: &str, seq: usize, step: &str, phase: Phase, outcome: &str) {
        self.phases.insert((node.to_string(), seq), phase);
        if step == "uncordon" {
            if phase == Phase::Failed && outcome.starts_with(scheduler::STILL_DOWN) {
                self.still_down.insert(node.to_string());
            } else {
                self.still_down.remove(node);
            }
        }
    }

    /// Whether `node`'s last give-back said "still down".
    pub fn still_down(&self, node: &str) -> bool {
        self.still_down.contains(node)
    }
}

impl std::ops::Deref for Progress {
    type Target = HashMap<(String, usize), Phase>;
    fn deref(&self) -> &Self::Target {
        &self.phases
    }
}

impl std::ops::DerefMut for Progress {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.phases
    }
}

impl FromIterator<((String, usize), Phase)> for Progress {
    fn from_iter<I: IntoIterator<Item = ((String, usize), Phase)>>(iter: I) -> Progress {
        Progress {
            phases: iter.into_iter().collect(),
            still_down: Default::default(),
        }
    }
}

/// What a rollout left of its drain on a node, from the phases of its drain and uncordon steps
/// (the journal's, or the executor's as it goes): never a guess from where the node stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Its drain never started (no drain step, or the node stopped before it).
    No,
    /// Its drain started and did not finish (failed, or interrupted): the node may be drained.
    Maybe,
    /// Drained by this rollout, and not given back.
    Yes,
    /// Drained, then given back to the scheduler (its uncordon finished).
    GivenBack,
    /// Drained, upgraded (its gates passed), then found DOWN for a reason of someone else's:
    /// gpufleet's drain flag removed (Slurm UNDRAIN), its DOWN state and Reason kept; not back
    /// in service, never `done` (docs/domain.md's give-back table).
    StillDown,
    /// Out of service before this rollout (`--include-drained`, [`Step::Drain`]'s `pre`):
    /// gpufleet did not drain it, and never gives it back.
    Kept,
}

/// [`Drained`] of `np` as `progress` (each step's last phase) says.
pub fn drained_state(np: &NodePlan, progress: &Progress) -> Drained {
    let phase = |pred: &dyn Fn(&Step) -> bool| {
        np.steps
            .iter()
            .position(pred)
            .and_then(|i| progress.get(&(np.node.clone(), i)).copied())
    };
    let drain = phase(&|s| matches!(s, Step::Drain { .. }));
    let uncordon = phase(&|s| matches!(s, Step::Uncordon { .. }));
    let kept = np
        .steps
        .iter()
        .any(|s| matches!(s, Step::Drain { pre: Some(_), .. }));
    match drain {
        None | Some(Phase::Skipped) => Drained::No,
        Some(_) if kept => Drained::Kept,
        Some(Phase::Done) if uncordon == Some(Phase::Done) => Drained::GivenBack,
        Some(Phase::Done) if uncordon == Some(Phase::Failed) && progress.still_down(&np.node) => {
            Drained::StillDown
        }
        Some(Phase::Done) => Drained::Yes,
        Some(_) => Drained::Maybe,
    }
}

/// The words after `stopped at STEP` for a node that stopped with `drained`:
/// ` and stays drained`, ` and may be drained (its drain started)`, ` (uncordoned)`,
/// ` (its gates passed)` for a node still down (the why says "still down (…)"), ` (out of
/// service before this rollout: gpufleet did not drain it)`, or nothing (a node stopped before
/// its drain, by its lock or a halt, was never drained).
pub fn drained_note(drained: Drained) -> &'static str {
    match drained {
        Drained::No => "",
        Drained::Maybe => " and may be drained (its drain started)",
        Drained::Yes => " and stays drained",
        Drained::GivenBack => " (uncordoned)",
        Drained::StillDown => " (its gates passed)",
        Drained::Kept => " (out of service before this rollout: gpufleet did not drain it)",
    }
}

/// The latest rollout in the journal that has no end entry (or stopped with a failure): its
/// plan, and how far each node got.
pub fn unfinished(journal: &[Entry]) -> Option<(Plan, Progress)> {
    let start = open_start(journal)?;
    let plan: Plan = serde_json::from_str(&start.outcome).ok()?;
    let mut progress = Progress::new();
    for e in journal
        .iter()
        .filter(|e| e.rollout == start.rollout && !e.node.is_empty())
    {
        // Entries without a step number (older journals): the first step of that label.
        let seq = e.seq.or_else(|| {
            plan.nodes
                .iter()
                .find(|n| n.node == e.node)?
                .steps
                .iter()
                .position(|s| s.label() == e.step)
        });
        if let Some(seq) = seq {
            progress.record(&e.node, seq, &e.step, e.phase, &e.outcome);
        }
    }
    Some((plan, progress))
}

/// The id of the last rollout that started and did not finish but whose plan cannot be read
/// (written by another gpufleet version): it must be finished with that version or abandoned,
/// never taken for finished.
pub fn unreadable_unfinished(journal: &[Entry]) -> Option<String> {
    let start = open_start(journal)?;
    serde_json::from_str::<Plan>(&start.outcome)
        .is_err()
        .then(|| start.rollout.clone())
}

/// The start entry of the latest rollout, unless it ended: a rollout that stopped (failed,
/// halted) is resumable (`--resume` retries each node from the step where it stopped); done,
/// skipped (every node held by another rollout: it did nothing) and abandoned ones are not.
fn open_start(journal: &[Entry]) -> Option<&Entry> {
    let start = journal
        .iter()
        .rev()
        .find(|e| e.step == "rollout" && e.phase == Phase::Start)?;
    let closed = journal.iter().any(|e| {
        e.rollout == start.rollout
            && e.step == "rollout"
            && matches!(e.phase, Phase::Done | Phase::Skipped | Phase::Abandoned)
    });
    (!closed).then_some(start)
}

/// The refusal when [`unreadable_unfinished`] names a rollout.
pub fn unreadable_message(id: &str) -> String {
    format!(
        "rollout {id} did not finish, and its plan was written by another gpufleet version that this one cannot read: finish it with that version, or `gpufleet upgrade --abandon` it and check its nodes (`gpufleet locks` lists node locks; drained nodes stay drained)"
    )
}

/// A rollout as `gpufleet rollouts` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RolloutSummary {
    pub id: String,
    /// From its plan (absent when the plan cannot be read).
    pub mode: Option<Mode>,
    /// `done`, `skipped` (it did nothing: another rollout held each of its nodes), `failed`
    /// (resumable), `abandoned`, or `unfinished` (running, or interrupted: resumable).
    pub state: String,
    pub nodes: Vec<String>,
    pub who: String,
    pub started: String,
    /// The last end entry's time, if any.
    pub ended: Option<String>,
}

/// Every rollout of the journal, oldest first.
pub fn rollouts(journal: &[Entry]) -> Vec<RolloutSummary> {
    let mut out: Vec<RolloutSummary> = Vec::new();
    for e in journal.iter().filter(|e| e.step == "rollout") {
        let i = match out.iter().position(|r| r.id == e.rollout) {
            Some(i) => i,
            None => {
                out.push(RolloutSummary {
                    id: e.rollout.clone(),
                    mode: None,
                    state: "unfinished".into(),
                    nodes: Vec::new(),
                    who: e.who.clone(),
                    started: e.ts.clone(),
                    ended: None,
                });
                out.len() - 1
            }
        };
        let r = &mut out[i];
        match e.phase {
            Phase::Start => {
                if let Ok(p) = serde_json::from_str::<Plan>(&e.outcome) {
                    r.mode = Some(p.mode);
                    r.nodes = p.nodes.iter().map(|n| n.node.clone()).collect();
                }
            }
            Phase::Abandoned => {
                r.state = "abandoned".into();
                r.ended = Some(e.ts.clone());
            }
            Phase::Done | Phase::Skipped | Phase::Failed if r.state != "abandoned" => {
                r.state = match e.phase {
                    Phase::Done => "done",
                    Phase::Skipped => "skipped",
                    _ => "failed",
                }
                .into();
                r.ended = Some(e.ts.clone());
            }
            _ => {}
        }
    }
    out
}

/// The state a node was found in before this rollout when gpufleet did not drain it
/// ([`Step::Drain`]'s `pre`).
pub fn pre_state(np: &NodePlan) -> Option<String> {
    np.steps.iter().find_map(|s| match s {
        Step::Drain { pre, .. } => pre.clone(),
        _ => None,
    })
}

/// What a rollout given up leaves on each node of `plan`, in words, with the exact commands
/// that give a drained node back to its scheduler.
pub fn left_behind(plan: &Plan, progress: &Progress) -> Vec<String> {
    let mut out = Vec::new();
    for np in &plan.nodes {
        let at = |pred: &dyn Fn(&Step) -> bool| np.steps.iter().position(pred);
        let phase = |i: Option<usize>| i.and_then(|i| progress.get(&(np.node.clone(), i)));
        let uncordon = at(&|s| matches!(s, Step::Uncordon { .. }));
        let lock = at(&|s| matches!(s, Step::Lock { .. }));
        let unlock = at(&|s| matches!(s, Step::Unlock { .. }));
        let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
        let give_back = || {
            let cmds: Vec<String> = uncordon
                .map(|u| np.steps[u].shown(&plan.rollout))
                .unwrap_or_default();
            safe(&cmds.join(" && "))
        };
        match drained_state(np, progress) {
            Drained::Yes => out.push(format!(
                "{} stays drained; give it back with: {}",
                safe(&np.node),
                give_back()
            )),
            Drained::Maybe => out.push(format!(
                "{} may be drained (its drain started); give it back with: {}",
                safe(&np.node),
                give_back()
            )),
            Drained::GivenBack => {
                out.push(format!("{} was given back (uncordoned)", safe(&np.node)))
            }
            Drained::StillDown => out.push(format!(
                "{} is still down: upgraded, its gates passed, gpufleet's drain flag removed (UNDRAIN); its DOWN state and Reason are someone else's: nothing of this rollout's to give back",
                safe(&np.node)
            )),
            Drained::Kept => out.push(format!(
                "{} was out of service before this rollout ({}): gpufleet did not drain it, and it stays as its owner left it (nothing to give back)",
                safe(&np.node),
                safe(&pre_state(np).unwrap_or_default())
            )),
            Drained::No => {}
        }
        let root = match lock.map(|l| &np.steps[l]) {
            Some(Step::Lock { root, .. }) => root.trim_end_matches('/').to_string(),
            _ => String::new(),
        };
        let released = phase(unlock) == Some(&Phase::Done);
        // Only a lock this rollout took (its lock step done) is its own; a lock step that did
        // not end may have taken it; one refused (another rollout held the node) did not.
        match phase(lock) {
            Some(Phase::Done) if !released => out.push(format!(
                "{} keeps this rollout's node lock ({root}/{}); the next rollout from this state folder takes it over",
                safe(&np.node),
                node_side::MARKER
            )),
            Some(Phase::Start | Phase::Failed) => out.push(format!(
                "{} may keep this rollout's node lock ({root}/{}: its lock step did not finish); the next rollout from this state folder takes it over",
                safe(&np.node),
                node_side::MARKER
            )),
            Some(Phase::Skipped) => out.push(format!(
                "{} was not touched: another rollout held it (or it changed since the plan)",
                safe(&np.node)
            )),
            None => out.push(format!("{} was not touched", safe(&np.node))),
            _ => {}
        }
    }
    out
}

/// The nodes a rollout of `journal` drained and has not given back: node → rollout id. A drain
/// that started counts (the node may be drained); an uncordon that finished gives it back.
pub fn drained_by(journal: &[Entry]) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for e in journal {
        match (e.step.as_str(), e.phase) {
            ("drain", Phase::Start | Phase::Done | Phase::Failed) => {
                out.insert(e.node.clone(), e.rollout.clone());
            }
            ("uncordon", Phase::Done) => {
                out.remove(&e.node);
            }
            _ => {}
        }
    }
    out
}

/// [`drained_by`] of the journal at `path` (none without a journal).
///
/// Errors: the journal exists but cannot be read.
pub fn drained_in(
    path: &std::path::Path,
) -> std::io::Result<std::collections::BTreeMap<String, String>> {
    crate::actions::journal::read(path).map(|(entries, _)| drained_by(&entries))
}

/// Rollouts given up with `--abandon`: their node markers may be taken over.
pub fn abandoned(journal: &[Entry]) -> Vec<String> {
    journal
        .iter()
        .filter(|e| e.step == "rollout" && e.phase == Phase::Abandoned)
        .map(|e| e.rollout.clone())
        .collect()
}
