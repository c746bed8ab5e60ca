//! One node's run (lock → … → unlock, skipping steps done before), the node lock step, and
//! what the run says of each node: upgraded, skipped (another rollout holds it: not a failure,
//! the rest of the wave goes on), or stopped with a failure — with what it left of its drain,
//! from the journal's phases, never guessed from where the node stopped.

use super::*;

/// Why a step stopped its node.
pub(super) enum Stop {
    /// A failure: the node stops there (journaled `failed`, counted against max_failures).
    Failed(String),
    /// Nothing was done, and it is not a failure (journaled `skipped`): another rollout holds
    /// the node's lock, or another rollout upgraded the node since the plan.
    Skipped(String),
}

impl Stop {
    pub(super) fn into_why(self) -> String {
        match self {
            Stop::Failed(w) | Stop::Skipped(w) => w,
        }
    }
}

impl Executor {
    /// What this run (and the runs before it, on resume) left of `np`'s drain.
    pub(super) fn drained(&self, np: &NodePlan) -> Drained {
        drained_state(np, &self.phases.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Takes the node lock for `rollout` (or takes over an abandoned rollout's, `takeover`),
    /// then probes the node again: the plan was made from an earlier probe, and another
    /// operator's rollout may have changed the node since (the lock only puts them in turn).
    /// `Ok` when locked and still as planned ([`NodePlan::as_planned`]: `migrate`); [`Stop::Skipped`] with the holder (rollout,
    /// operator `user@host pid N`, since when) when another rollout holds the lock, or when
    /// the node is `ready` now (its lock given back); [`Stop::Failed`] otherwise.
    pub(super) async fn lock(
        &self,
        rollout: &str,
        node: &Node,
        np: &NodePlan,
        root: &str,
        sudo: bool,
        takeover: &[String],
    ) -> Result<String, Stop> {
        let cmd = wire::lock(root, rollout, &self.operator, takeover, sudo);
        let o = node_write(
            &self.permit,
            &self.scan,
            node,
            &cmd,
            Duration::from_secs(60),
        )
        .await
        .map_err(|u| Stop::Failed(u.message))?;
        match o.exit_status {
            Some(0) => {}
            Some(node_side::LOCKED) => {
                return Err(Stop::Skipped(format!(
                    "another rollout holds the node: {}; nothing was done",
                    excerpt(&o.output)
                )));
            }
            _ => {
                return Err(Stop::Failed(format!(
                    "{}: {}",
                    exit_words(&o),
                    excerpt(&o.output)
                )));
            }
        }
        let (now, _) = self.scan.probe_node(node).await;
        if np.as_planned(now.status) {
            return Ok(format!("locked for rollout {rollout} by {}", self.operator));
        }
        let released = match self.unlock(rollout, node, root, sudo).await {
            Ok(_) => "its lock is released".to_string(),
            Err(e) => format!("its lock could not be released ({e}): `gpufleet unlock`"),
        };
        let why = format!(
            "the node changed since the plan: it is {} now ({}); nothing was done and {released}",
            now.status,
            now.status.meaning()
        );
        if now.status == NodeStatus::Ready && released.starts_with("its lock is released") {
            Err(Stop::Skipped(format!(
                "{why} (upgraded by another rollout meanwhile)"
            )))
        } else {
            Err(Stop::Failed(format!("{why}: plan again")))
        }
    }

    /// The outcome of `np`'s node: `failure` or `skipped` as given, its drain from the phases.
    fn outcome(
        &self,
        np: &NodePlan,
        failure: Option<Failure>,
        skipped: Option<String>,
    ) -> NodeOutcome {
        NodeOutcome {
            node: np.node.clone(),
            failure,
            skipped,
            drained: self.drained(np),
            kept: None,
        }
    }

    /// Runs one node's plan, skipping steps done before; stops at the first failure, or at a
    /// skip (another rollout holds the node).
    pub async fn run_node(&self, rollout: &str, node: &Node, plan: &NodePlan) -> NodeOutcome {
        let mut report = None;
        let mut kept = None;
        let failed = |seq, step: String, why| {
            Some(Failure {
                seq: Some(seq),
                step,
                why,
            })
        };
        for (seq, step) in plan.steps.iter().enumerate() {
            let label = step.label();
            if self.progress.get(&(node.name.clone(), seq)) == Some(&Phase::Done) {
                (self.log)(&format!("{}: {label} done before, skipped", node.name));
                continue;
            }
            let failures = self.failures.load(Ordering::SeqCst);
            if failures > self.max_failures {
                let why = format!(
                    "halted: {failures} node(s) failed, more than max_failures ({}); `--resume` goes on from here",
                    self.max_failures
                );
                (self.log)(&format!("{}: {why}", node.name));
                return self.outcome(plan, failed(seq, label, why), None);
            }
            self.at
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(node.name.clone(), (seq, label.clone()));
            let cmd = step.journal_command(rollout, seq, &self.operator);
            let write = |phase, out: &str| {
                self.write(rollout, &node.name, Some(seq), &label, phase, &cmd, out)
            };
            if let Err(e) = write(Phase::Start, "") {
                return self.outcome(plan, failed(seq, label.clone(), e), None);
            }
            #[cfg(debug_assertions)]
            test_panic_hook(&node.name, &label);
            (self.log)(&format!("{}: {label} …", node.name));
            let result = match step {
                Step::Lock {
                    root,
                    sudo,
                    takeover,
                } => self.lock(rollout, node, plan, root, *sudo, takeover).await,
                _ => self
                    .run_step(rollout, seq, node, plan, &mut report)
                    .await
                    .map_err(Stop::Failed),
            };
            match result {
                Ok(out) => {
                    if matches!(step, Step::Uncordon { back: Some(b), .. } if b.kept.is_some()) {
                        kept = Some(out.clone());
                    }
                    let _ = write(Phase::Done, &out);
                    (self.log)(&format!("{}: {label} done", node.name));
                }
                Err(Stop::Skipped(why)) => {
                    let _ = write(Phase::Skipped, &why);
                    (self.log)(&format!("{}: skipped: {why}", node.name));
                    return self.outcome(plan, None, Some(why));
                }
                Err(Stop::Failed(why)) => {
                    let _ = write(Phase::Failed, &why);
                    self.failures.fetch_add(1, Ordering::SeqCst);
                    (self.log)(&format!("{}: {label} FAILED: {why}", node.name));
                    return self.outcome(plan, failed(seq, label.clone(), why), None);
                }
            }
        }
        NodeOutcome {
            kept,
            ..self.outcome(plan, None, None)
        }
    }
}

/// What the report says of a node that stopped (`failure`): `stopped at STEP` with what it left
/// of its drain ([`drained_note`]) and why, or, for a node still down after its upgrade
/// ([`Drained::StillDown`]), `upgraded, its gates passed, but still down (…)`.
pub fn stopped_words(o: &NodeOutcome, f: &Failure) -> String {
    if o.drained == Drained::StillDown {
        format!("upgraded, its gates passed, but {}", f.why)
    } else {
        format!(
            "stopped at {}{}: {}",
            f.step,
            drained_note(o.drained),
            f.why
        )
    }
}

/// The rollout's end from its nodes' outcomes: its phase (`done` when every node of the plan
/// ended without a failure and one was upgraded, `skipped` when each was skipped: the rollout
/// did nothing, `failed` — resumable — otherwise: a node still down after its upgrade is not
/// done) and a one-line summary that says what happened to each node that was not upgraded, and
/// to each upgraded node gpufleet did not drain (node text in it: escape it where it is shown).
pub fn summarize(plan: &Plan, outcomes: &[NodeOutcome]) -> (Phase, String) {
    let stopped = |down: bool| -> Vec<String> {
        outcomes
            .iter()
            .filter(|o| (o.drained == Drained::StillDown) == down)
            .filter_map(|o| {
                Some(format!(
                    "{} {}",
                    o.node,
                    stopped_words(o, o.failure.as_ref()?)
                ))
            })
            .collect()
    };
    let (failed, down) = (stopped(false), stopped(true));
    let kept: Vec<String> = outcomes
        .iter()
        .filter(|o| o.failure.is_none() && o.skipped.is_none() && o.drained == Drained::Kept)
        .map(|o| {
            format!(
                "{}: {}",
                o.node,
                o.kept
                    .as_deref()
                    .unwrap_or("gpufleet did not drain it; not given back")
            )
        })
        .collect();
    let skipped: Vec<String> = outcomes
        .iter()
        .filter_map(|o| Some(format!("{} skipped: {}", o.node, o.skipped.as_ref()?)))
        .collect();
    let upgraded = outcomes.len() - failed.len() - down.len() - skipped.len();
    let all = outcomes.len() == plan.nodes.len();
    let phase = if !failed.is_empty() || !down.is_empty() || !all {
        Phase::Failed
    } else if upgraded == 0 && !skipped.is_empty() {
        Phase::Skipped
    } else {
        Phase::Done
    };
    let mut parts = vec![format!("{upgraded} node(s) upgraded")];
    if !kept.is_empty() {
        parts[0].push_str(&format!(
            " ({} out of service before, left so: {})",
            kept.len(),
            kept.join("; ")
        ));
    }
    if !down.is_empty() {
        parts.push(format!("{} still down: {}", down.len(), down.join("; ")));
    }
    if !skipped.is_empty() {
        parts.push(format!("{} skipped: {}", skipped.len(), skipped.join("; ")));
    }
    if !failed.is_empty() {
        parts.push(format!("{} failed: {}", failed.len(), failed.join("; ")));
    }
    (
        phase,
        format!("rollout {}: {}", plan.rollout, parts.join(", ")),
    )
}
