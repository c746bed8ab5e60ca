//! The rollout use case: open the state folder → prepare (probe, then plan) → the plan the
//! operator confirms → execute → report, for `gpufleet upgrade` and the TUI's `U` alike. The
//! CLI prints and prompts, the TUI shows and asks; the checks ("a rollout did not finish") and
//! their refusal texts are here, once. What changes nodes is [`crate::actions`]: the executor,
//! the journal, the locks, behind the write permit.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use crate::actions::journal::{self, Entry, Phase};
use crate::actions::permit::{ReadOnly, ReadOnlySources, WritePermit};
use crate::actions::rollout::{
    self, CanaryNow, Executor, LocalLock, LocalLockError, Mode, NodeOutcome, Plan, Progress,
};
use crate::config::{Recipe, UpgradeConfig};
use crate::inventory::Node;
use crate::model::report::NodeReport;
use crate::probe::scan::{Scan, now_rfc3339};

use super::scan::{Fleet, Source};

/// What to plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The next rollout of this mode among the chosen nodes (the CLI's `--canary`, `--wave`).
    Next(Mode),
    /// Exactly the chosen nodes (the TUI's marked ones); the mode follows from them.
    Exactly,
}

/// Why a rollout use case stopped before changing anything, or could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    /// Some source says read-only.
    #[error(transparent)]
    ReadOnly(#[from] ReadOnly),
    /// The state folder's lock is held (or cannot be taken).
    #[error(transparent)]
    Lock(LocalLockError),
    /// `--abandon` while the rollout's own process still runs.
    #[error(
        "not abandoned: the rollout is still running ({holder}; it holds {}); stop that process first (then `--resume` or `--abandon`), or wait for it to end",
        path.display()
    )]
    StillRunning { path: PathBuf, holder: String },
    /// The journal cannot be read or written.
    #[error("{0}")]
    Journal(String),
    /// A rollout did not finish: it is resumed or abandoned before another starts.
    #[error(
        "rollout {0} did not finish: `gpufleet upgrade --resume` goes on with it, `--abandon` gives it up"
    )]
    Unfinished(String),
    /// A rollout did not finish and its plan was written by another gpufleet version.
    #[error("{}", rollout::unreadable_message(.0))]
    UnreadableUnfinished(String),
    /// `--resume` / `--abandon` with nothing unfinished.
    #[error("nothing to {what}: every rollout in {} finished", journal.display())]
    NothingUnfinished {
        what: &'static str,
        journal: PathBuf,
    },
    /// A node to plan or to run is not in the inventory (any more).
    #[error("{node} is not in the inventory{}", inventory.as_ref().map(|i| format!(" {i}")).unwrap_or_default())]
    NotInInventory {
        node: String,
        inventory: Option<String>,
    },
    /// A wave waits for its canaries: a state of the fleet, not a mistake of the operator.
    #[error("{0}")]
    CanariesFirst(String),
    /// No plan: every node that cannot be planned, one per line (node and recipe names are
    /// inventory text: escape each line where it is shown).
    #[error("{0}")]
    Refused(String),
}

/// A rollout's context: the nodes it may reach, its settings and its state folder.
pub struct Rollouts {
    /// How to reach each node, and the canaries whose state gates the waves.
    pub nodes: Vec<Node>,
    pub cfg: UpgradeConfig,
    pub recipes: BTreeMap<String, Recipe>,
    /// The state folder: its journal (`journal.jsonl`) and its lock (`rollout.lock`).
    pub state_dir: PathBuf,
    /// What each read-only source says (the permit is made from them: [`Rollouts::permit`]).
    pub read_only: ReadOnlySources,
    /// Where the inventory was read from, for people (errors name it).
    pub inventory: Option<String>,
}

/// Whether [`Rollouts::open`] takes the state folder's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// No lock (a dry run, or planning in the TUI: nothing changes).
    None,
    /// The lock, held until the session (or the run it starts) ends.
    Take,
    /// The lock, to abandon the unfinished rollout: refused while its process runs.
    Abandon,
}

/// The state folder opened: its journal as read, and the lock when taken.
pub struct Session {
    lock: Option<LocalLock>,
    /// The journal's entries.
    pub entries: Vec<Entry>,
    /// Lines of the journal that are not entries (skipped; said as a warning).
    pub skipped_lines: journal::Skipped,
    /// The journal's path.
    pub journal_path: PathBuf,
    state_dir: PathBuf,
}

/// What `--abandon` gave up.
pub enum Abandoned {
    /// A rollout whose plan this version cannot read: its id.
    Unreadable(String),
    /// A rollout: its id, its nodes, and what it left behind on each (lines for people).
    Rollout {
        id: String,
        nodes: Vec<String>,
        left_behind: Vec<String>,
    },
}

/// A rollout started (its start journaled): [`Run::finish`] runs it.
pub struct Run {
    lock: Option<LocalLock>,
    executor: Arc<Executor>,
    plan: Plan,
    nodes: Vec<Node>,
}

/// What a rollout did.
pub struct Report {
    pub plan: Plan,
    /// Each node's outcome.
    pub outcomes: Vec<NodeOutcome>,
    /// One line for people (node output in it: escape it where it is shown).
    pub summary: String,
}

impl Rollouts {
    /// The write permit.
    ///
    /// Errors: [`RolloutError::ReadOnly`] when any source says read-only.
    pub fn permit(&self) -> Result<WritePermit, RolloutError> {
        Ok(WritePermit::new(self.read_only)?)
    }

    /// Opens the state folder: takes its lock as `lock` says, reads its journal.
    ///
    /// Errors: the lock is held ([`RolloutError::StillRunning`] with [`Lock::Abandon`]) or
    /// cannot be taken; the journal cannot be read.
    pub fn open(&self, lock: Lock) -> Result<Session, RolloutError> {
        Session::open(&self.state_dir, lock)
    }

    /// The node named `name` of [`Rollouts::nodes`].
    fn node(&self, name: &str) -> Result<Node, RolloutError> {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .cloned()
            .ok_or_else(|| RolloutError::NotInInventory {
                node: name.to_string(),
                inventory: self.inventory.clone(),
            })
    }

    /// Probes what a plan needs — `chosen`, and every other canary of [`Rollouts::nodes`] when
    /// nodes other than canaries may be planned (the waves wait for them) — read-only and
    /// concurrently through the fleet scan, then plans (canaries first, waves no larger than
    /// max-unavailable: [`rollout::plan`]). `announce` hears how many nodes are probed, before
    /// they are. What is planned, and whether the canaries open the waves, is decided from the
    /// nodes as probed now over the journal ([`rollout::verdict`], [`rollout::canaries_done`]).
    /// Refused while a rollout of `session` did not finish.
    ///
    /// Errors: [`RolloutError::Unfinished`] / [`RolloutError::UnreadableUnfinished`];
    /// [`RolloutError::CanariesFirst`]; [`RolloutError::Refused`].
    pub async fn prepare(
        &self,
        session: &Session,
        scan: Arc<Scan>,
        chosen: &[Node],
        choice: Choice,
        announce: impl FnOnce(usize),
    ) -> Result<Plan, RolloutError> {
        session.check_finished()?;
        let waves = match choice {
            Choice::Next(m) => m == Mode::Wave,
            Choice::Exactly => chosen.iter().any(|n| !n.canary),
        };
        let others: Vec<Node> = self
            .nodes
            .iter()
            .filter(|n| waves && n.canary && !chosen.iter().any(|c| c.name == n.name))
            .cloned()
            .collect();
        let mut all = chosen.to_vec();
        all.extend(others.iter().cloned());
        announce(all.len());
        let source = Source::Fleet(Fleet {
            scan,
            nodes: all,
            journal: None,
            schedulers: None,
        });
        let mut reports: HashMap<String, NodeReport> = source
            .reports(std::future::pending())
            .await
            .map_err(|e| RolloutError::Refused(e.to_string()))?
            .into_iter()
            .map(|r| (r.name.clone(), r))
            .collect();
        let mut with = Vec::new();
        for n in chosen {
            let r = reports.remove(&n.name).ok_or_else(|| {
                RolloutError::Refused(format!("{}: the probe gave no report", n.name))
            })?;
            with.push((n.clone(), r));
        }
        // The canaries as probed now (status and node lock) gate the waves, with the journal's
        // record of their gates ([`rollout::canaries_done`]).
        let mut canaries: Vec<CanaryNow> = with
            .iter()
            .filter(|(n, _)| n.canary)
            .map(|(n, r)| CanaryNow::of(&n.name, Some(r)))
            .collect();
        canaries.extend(
            others
                .iter()
                .map(|n| CanaryNow::of(&n.name, reports.get(&n.name))),
        );
        // Each selected node's scheduler state, read-only, before anything is planned.
        let around = rollout::Around::read(chosen, &self.cfg).await;
        let (journal, id) = (&session.entries, &rollout::new_id());
        match choice {
            Choice::Next(mode) => {
                if mode == Mode::Wave {
                    rollout::canaries_done(&canaries, &rollout::last_upgrades(journal))
                        .map_err(RolloutError::CanariesFirst)?;
                }
                rollout::plan_in(
                    mode,
                    &with,
                    &canaries,
                    journal,
                    &self.cfg,
                    &self.recipes,
                    id,
                    &around,
                )
            }
            Choice::Exactly => rollout::plan_selected_in(
                &with,
                &canaries,
                journal,
                &self.cfg,
                &self.recipes,
                id,
                &around,
            ),
        }
        .map_err(RolloutError::Refused)
    }

    /// The TUI's plan of the nodes named `names` (the marked rows): the journal read again
    /// (no lock: planning changes nothing), then [`Rollouts::prepare`] of exactly them, with
    /// fresh probes, so a node upgraded meanwhile is not planned again.
    ///
    /// Errors: as [`Rollouts::open`]'s and [`Rollouts::prepare`]'s; a name not in
    /// [`Rollouts::nodes`].
    pub async fn plan_exactly(
        &self,
        scan: Arc<Scan>,
        names: &[String],
    ) -> Result<Plan, RolloutError> {
        let session = self.open(Lock::None)?;
        session.check_finished()?;
        let chosen = names
            .iter()
            .map(|n| self.node(n))
            .collect::<Result<Vec<_>, _>>()?;
        self.prepare(&session, scan, &chosen, Choice::Exactly, |_| {})
            .await
    }

    /// Starts `plan`, the one the operator confirmed (only how to reach each node comes from
    /// the inventory; what runs is the plan): the session's lock notes it, the journal records
    /// its start (whole, for `--resume`) unless `progress` continues it (`resume`), and the
    /// returned [`Run`] runs it. `log` hears each step as it goes (node text in it: escape it
    /// where it is shown).
    ///
    /// Errors: a node of the plan is not in [`Rollouts::nodes`] any more; the journal cannot be
    /// opened or written.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &self,
        mut session: Session,
        permit: WritePermit,
        scan: Arc<Scan>,
        plan: Plan,
        progress: Progress,
        resume: bool,
        log: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Result<Run, RolloutError> {
        let nodes = plan
            .nodes
            .iter()
            .map(|p| self.node(&p.node))
            .collect::<Result<Vec<_>, _>>()?;
        session.note(&plan.rollout);
        let journal = journal::Journal::open(&session.state_dir)
            .map_err(|e| RolloutError::Journal(e.to_string()))?;
        let executor = Arc::new(Executor::new(
            permit, journal, scan, &self.cfg, progress, log,
        ));
        if !resume {
            executor.start(&plan).map_err(RolloutError::Journal)?;
        }
        Ok(Run {
            lock: session.lock,
            executor,
            plan,
            nodes,
        })
    }
}

impl Session {
    /// See [`Rollouts::open`].
    pub fn open(state_dir: &std::path::Path, lock: Lock) -> Result<Session, RolloutError> {
        // One rollout at a time per state folder, from here on (a dry run changes nothing and
        // takes no lock). `--abandon` is refused while the rollout's process runs.
        let lock = match lock {
            Lock::None => None,
            Lock::Take | Lock::Abandon => match rollout::lock_local(state_dir) {
                Ok(l) => Some(l),
                Err(LocalLockError::Held { path, holder }) if lock == Lock::Abandon => {
                    return Err(RolloutError::StillRunning { path, holder });
                }
                Err(e) => return Err(RolloutError::Lock(e)),
            },
        };
        let journal_path = state_dir.join("journal.jsonl");
        let (entries, skipped_lines) =
            journal::read(&journal_path).map_err(|e| RolloutError::Journal(e.to_string()))?;
        Ok(Session {
            lock,
            entries,
            skipped_lines,
            journal_path,
            state_dir: state_dir.to_path_buf(),
        })
    }

    /// The one check before a new rollout: none may be unfinished.
    ///
    /// Errors: [`RolloutError::Unfinished`], [`RolloutError::UnreadableUnfinished`].
    pub fn check_finished(&self) -> Result<(), RolloutError> {
        if let Some((p, _)) = rollout::unfinished(&self.entries) {
            return Err(RolloutError::Unfinished(p.rollout));
        }
        if let Some(id) = rollout::unreadable_unfinished(&self.entries) {
            return Err(RolloutError::UnreadableUnfinished(id));
        }
        Ok(())
    }

    /// The unfinished rollout to go on with (`--resume`): its plan and how far each node got.
    ///
    /// Errors: [`RolloutError::UnreadableUnfinished`]; [`RolloutError::NothingUnfinished`].
    pub fn resume(&self) -> Result<(Plan, Progress), RolloutError> {
        match rollout::unfinished(&self.entries) {
            Some(found) => Ok(found),
            None => Err(self.none_unfinished("resume")),
        }
    }

    /// Whether a rollout did not finish (readable or not).
    pub fn has_unfinished(&self) -> bool {
        rollout::unfinished(&self.entries).is_some()
            || rollout::unreadable_unfinished(&self.entries).is_some()
    }

    fn none_unfinished(&self, what: &'static str) -> RolloutError {
        match rollout::unreadable_unfinished(&self.entries) {
            Some(id) => RolloutError::UnreadableUnfinished(id),
            None => RolloutError::NothingUnfinished {
                what,
                journal: self.journal_path.clone(),
            },
        }
    }

    /// Gives up the unfinished rollout (`--abandon`): journaled; its nodes stay as they are.
    ///
    /// Errors: nothing unfinished; the journal cannot be written.
    pub fn abandon(&mut self) -> Result<Abandoned, RolloutError> {
        let (id, found, outcome) = match rollout::unfinished(&self.entries) {
            Some((plan, progress)) => (
                plan.rollout.clone(),
                Some((plan, progress)),
                "abandoned by the operator",
            ),
            None => match rollout::unreadable_unfinished(&self.entries) {
                Some(id) => (
                    id,
                    None,
                    "abandoned by the operator (its plan could not be read)",
                ),
                None => return Err(self.none_unfinished("abandon")),
            },
        };
        let mut j = journal::Journal::open(&self.state_dir)
            .map_err(|e| RolloutError::Journal(e.to_string()))?;
        j.append(&Entry {
            ts: now_rfc3339(),
            who: journal::who(),
            rollout: id.clone(),
            node: String::new(),
            step: "rollout".into(),
            seq: None,
            phase: Phase::Abandoned,
            command: String::new(),
            outcome: outcome.into(),
        })
        .map_err(|e| RolloutError::Journal(e.to_string()))?;
        Ok(match found {
            None => Abandoned::Unreadable(id),
            Some((plan, progress)) => Abandoned::Rollout {
                id,
                nodes: plan.nodes.iter().map(|n| n.node.clone()).collect(),
                left_behind: rollout::left_behind(&plan, &progress),
            },
        })
    }

    /// Writes `rollout` into the lock's file (who holds it, for the others), when held.
    pub fn note(&mut self, rollout: &str) {
        if let Some(l) = self.lock.as_mut() {
            l.note(rollout);
        }
    }
}

impl Run {
    /// Runs every node of the plan at once and writes the rollout's end (the lock is held
    /// until then).
    pub async fn finish(self) -> Report {
        let Run {
            lock,
            executor,
            plan,
            nodes,
        } = self;
        let (outcomes, summary) = executor.run_plan(&plan, nodes).await;
        drop(lock);
        Report {
            plan,
            outcomes,
            summary,
        }
    }

    /// The plan being run.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Sends every journal entry of the run to `sink` as a progress event too (`--events`).
    pub fn set_events(&self, sink: rollout::EventSink) {
        self.executor.set_events(sink);
    }
}

/// The steps of `plan` done before, as `progress` (an earlier run of it) says, for the plan a
/// resume shows: `done before (skipped on resume): NODE STEP, …` (sorted), or `None` when none
/// is (node text in it: escape it where it is shown). The CLI's `--resume` and the TUI's resume
/// confirmation both show it.
pub fn done_before(plan: &Plan, progress: &Progress) -> Option<String> {
    let mut done: Vec<String> = plan
        .nodes
        .iter()
        .flat_map(|n| {
            n.steps
                .iter()
                .enumerate()
                .filter(|(i, _)| progress.get(&(n.node.clone(), *i)) == Some(&Phase::Done))
                .map(|(_, s)| format!("{} {}", n.node, s.label()))
        })
        .collect();
    if done.is_empty() {
        return None;
    }
    done.sort();
    Some(format!(
        "done before (skipped on resume): {}",
        done.join(", ")
    ))
}

/// What `gpufleet upgrade --cancel` did.
pub struct CancelReport {
    /// The unfinished rollout's id.
    pub rollout: String,
    /// Its gpufleet process, when it still runs (what the state folder's lock says): it sees
    /// its step killed and stops the node itself.
    pub running: Option<String>,
    /// Each node: what was stopped, or why nothing was.
    pub nodes: Vec<rollout::Cancelled>,
}

impl Rollouts {
    /// `gpufleet upgrade --cancel`: stops the running recipe step of each node of the unfinished
    /// rollout on the node ([`Executor::cancel`]: journaled), leaving the node drained and
    /// locked for `--resume` or `--abandon`. Works while the rollout's own process runs (it
    /// then sees the step killed) and after it died.
    ///
    /// Errors: nothing unfinished; the state folder's lock cannot be read; the journal cannot be
    /// written.
    pub async fn cancel(
        &self,
        permit: WritePermit,
        scan: Arc<Scan>,
        log: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Result<CancelReport, RolloutError> {
        let (session, running) = match self.open(Lock::Take) {
            Ok(s) => (s, None),
            Err(RolloutError::Lock(LocalLockError::Held { holder, .. })) => {
                (self.open(Lock::None)?, Some(holder))
            }
            Err(e) => return Err(e),
        };
        let (plan, progress) = session.resume().map_err(|e| match e {
            RolloutError::NothingUnfinished { journal, .. } => RolloutError::NothingUnfinished {
                what: "cancel",
                journal,
            },
            e => e,
        })?;
        let journal = journal::Journal::open(&session.state_dir)
            .map_err(|e| RolloutError::Journal(e.to_string()))?;
        let executor = Executor::new(permit, journal, scan, &self.cfg, progress, log);
        let nodes = executor.cancel(&plan, &self.nodes).await;
        drop(session);
        Ok(CancelReport {
            rollout: plan.rollout,
            running,
            nodes,
        })
    }

    /// Probes the nodes named `names` now (read-only): each that is not `ready`, with its
    /// status (a node the probe gave no report for is `unreachable`). For multi-wave runs: a
    /// wave opens only when the one before it is healthy after its soak.
    ///
    /// Errors: a name not in [`Rollouts::nodes`]; the probe could not run.
    pub async fn not_ready(
        &self,
        scan: Arc<Scan>,
        names: &[String],
    ) -> Result<Vec<(String, crate::model::NodeStatus)>, RolloutError> {
        let nodes = names
            .iter()
            .map(|n| self.node(n))
            .collect::<Result<Vec<_>, _>>()?;
        let source = Source::Fleet(Fleet {
            scan,
            nodes,
            journal: None,
            schedulers: None,
        });
        let reports: HashMap<String, crate::model::NodeStatus> = source
            .reports(std::future::pending())
            .await
            .map_err(|e| RolloutError::Refused(e.to_string()))?
            .into_iter()
            .map(|r| (r.name.clone(), r.status))
            .collect();
        Ok(names
            .iter()
            .filter_map(|n| {
                let st = reports
                    .get(n)
                    .copied()
                    .unwrap_or(crate::model::NodeStatus::Unreachable);
                (st != crate::model::NodeStatus::Ready).then(|| (n.clone(), st))
            })
            .collect())
    }
}

impl Report {
    /// How many nodes stopped with a failure.
    pub fn failed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.failure.is_some()).count()
    }

    /// Each node that stopped, and where, what it left of its drain, and why (`stopped at STEP
    /// and stays drained: WHY`, `… and may be drained (its drain started): …`, `stopped at
    /// STEP: WHY` for a node this rollout never drained, [`rollout::drained_note`]), or, for a
    /// node still down after its upgrade, `upgraded, its gates passed, but still down (…)`
    /// ([`rollout::stopped_words`]); node text in both: escape them where they are shown.
    pub fn failures(&self) -> Vec<(&str, String)> {
        self.outcomes
            .iter()
            .filter_map(|o| {
                Some((
                    o.node.as_str(),
                    rollout::stopped_words(o, o.failure.as_ref()?),
                ))
            })
            .collect()
    }

    /// How many nodes are still down after their upgrade ([`rollout::Drained::StillDown`]:
    /// counted in [`Report::failed`], never done).
    pub fn still_down(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| o.drained == rollout::Drained::StillDown)
            .count()
    }

    /// Each upgraded node gpufleet did not drain (`--include-drained`), and what its give-back
    /// said (`down after reboot, admin drain kept (…)`; node text: escape it).
    pub fn kept(&self) -> Vec<(&str, &str)> {
        self.outcomes
            .iter()
            .filter(|o| o.failure.is_none() && o.drained == rollout::Drained::Kept)
            .filter_map(|o| Some((o.node.as_str(), o.kept.as_deref()?)))
            .collect()
    }

    /// Each node skipped with nothing done (another rollout holds it: its rollout, operator
    /// `user@host pid N` and since when), and why; not failures (node text: escape it).
    pub fn skipped(&self) -> Vec<(&str, &str)> {
        self.outcomes
            .iter()
            .filter_map(|o| Some((o.node.as_str(), o.skipped.as_deref()?)))
            .collect()
    }
}
