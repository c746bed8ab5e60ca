//! What is around a plan: each selected node's scheduler state, read before planning
//! ([`Around::read`]), and the unavailability budget they leave (docs/domain.md, "The
//! unavailability budget"): max_unavailable (`N` or `P%` of the selected nodes, at least 1),
//! less the nodes already out of service, less the nodes locked by other rollouts (their node
//! lock, as the probe read it), so that two operators together never exceed it.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::actions::scheduler::{self, State};
use crate::config::UpgradeConfig;
use crate::inventory::{DrainBackend, Node};
use crate::model::report::NodeReport;

/// Each selected node's scheduler state (by node name), as read before planning; a node not in
/// it was not read (no drain backend that can say). `Err`: it could not be read (unknown).
#[derive(Debug, Clone, Default)]
pub struct Around {
    pub states: HashMap<String, Result<State, String>>,
}

/// How many reads run at once.
const AT_ONCE: usize = 16;

impl Around {
    /// Reads the scheduler state of every node of `nodes` whose drain backend can say, at most
    /// [`AT_ONCE`] at a time (read-only: [`scheduler::read`]).
    pub async fn read(nodes: &[Node], cfg: &UpgradeConfig) -> Around {
        let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
        let mut set = tokio::task::JoinSet::new();
        for n in nodes {
            let Some(spec) = n.drain.clone() else {
                continue;
            };
            // A name the plan refuses never reaches a tool ([`crate::actions::drain::check_name`]).
            if spec.backend == DrainBackend::None
                || crate::actions::drain::check_name(&spec, n).is_err()
            {
                continue;
            }
            let (n, taints, sem) = (n.clone(), cfg.unavailable_taints.clone(), sem.clone());
            set.spawn(async move {
                let _p = sem.acquire_owned().await;
                let st = scheduler::read(&spec, &n, &taints).await;
                (n.name, st)
            });
        }
        let mut states = HashMap::new();
        while let Some(r) = set.join_next().await {
            if let Ok((name, st)) = r {
                states.insert(name, st);
            }
        }
        Around { states }
    }

    /// The state of `node`, when read.
    pub fn state(&self, node: &str) -> Option<&Result<State, String>> {
        self.states.get(node)
    }
}

/// The rollout holding `r`'s node lock, as the probe read it (an empty owner: `(no owner)`).
pub fn lock_holder(r: &NodeReport) -> Option<String> {
    let ro = r.rollout.as_ref()?;
    if ro.locked != Some(true) {
        return None;
    }
    Some(match ro.lock.as_ref().map(|l| l.rollout.trim()) {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => "(no owner)".into(),
    })
}

/// The budget of a plan: how many nodes may be out of service at once, what already is, and
/// what is left for the plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// max_unavailable as given (`4`, `25%`).
    pub max: String,
    /// How many nodes were selected (the base of a percentage).
    pub selected: usize,
    /// The budget: max_unavailable of the selected nodes, at least 1.
    pub limit: usize,
    /// Selected nodes out of service, not by a rollout (drained, down, cordoned, reserved).
    pub drained: Vec<String>,
    /// Selected nodes whose scheduler state could not be read (counted: unknown is not free).
    pub unknown: Vec<String>,
    /// Selected nodes held by other rollouts (their node lock, or a Slurm Reason naming them),
    /// by rollout.
    pub rollouts: BTreeMap<String, Vec<String>>,
}

impl Budget {
    /// The budget of `nodes` (the selected nodes, with their reports) around `around`.
    pub fn of(nodes: &[(Node, NodeReport)], around: &Around, cfg: &UpgradeConfig) -> Budget {
        let mut b = Budget {
            max: cfg.max_unavailable.to_string(),
            selected: nodes.len(),
            limit: cfg.max_unavailable.of(nodes.len()),
            ..Default::default()
        };
        for (n, r) in nodes {
            if let Some(id) = lock_holder(r) {
                b.rollouts.entry(id).or_default().push(n.name.clone());
                continue;
            }
            match around.state(&n.name) {
                Some(Ok(State::Taken(t))) => match &t.rollout {
                    Some(id) => b
                        .rollouts
                        .entry(id.clone())
                        .or_default()
                        .push(n.name.clone()),
                    None => b.drained.push(n.name.clone()),
                },
                Some(Err(_)) => b.unknown.push(n.name.clone()),
                _ => {}
            }
        }
        b
    }

    /// Nodes counted against the budget.
    pub fn used(&self) -> usize {
        self.drained.len()
            + self.unknown.len()
            + self.rollouts.values().map(Vec::len).sum::<usize>()
    }

    /// What is left for this rollout's nodes that are in service now.
    pub fn left(&self) -> usize {
        self.limit.saturating_sub(self.used())
    }

    /// For people: `budget 4 (max_unavailable 25% of 16 selected nodes): 1 used by a drained
    /// node (gpu3), 1 by rollout r-… (gpu4); 2 left for this rollout`.
    pub fn line(&self) -> String {
        let base = if self.max.ends_with('%') {
            format!(
                "max_unavailable {} of {} selected nodes",
                self.max, self.selected
            )
        } else {
            format!("max_unavailable {}", self.max)
        };
        let mut used = Vec::new();
        let count = |n: usize, one: &str, many: &str| {
            if n == 1 {
                format!("1 {one}")
            } else {
                format!("{n} {many}")
            }
        };
        if !self.drained.is_empty() {
            used.push(format!(
                "{} ({})",
                count(
                    self.drained.len(),
                    "used by a drained or down node",
                    "used by drained or down nodes"
                ),
                self.drained.join(", ")
            ));
        }
        if !self.unknown.is_empty() {
            used.push(format!(
                "{} ({})",
                count(
                    self.unknown.len(),
                    "by a node whose scheduler state could not be read",
                    "by nodes whose scheduler state could not be read"
                ),
                self.unknown.join(", ")
            ));
        }
        for (id, nodes) in &self.rollouts {
            used.push(format!(
                "{} by rollout {id} ({})",
                nodes.len(),
                nodes.join(", ")
            ));
        }
        let used = if used.is_empty() {
            "none used by other nodes or rollouts".to_string()
        } else {
            used.join(", ")
        };
        let left = match self.left() {
            0 => "none left for this rollout: no node in service is drained until some are back"
                .to_string(),
            n => format!("{n} left for this rollout"),
        };
        format!("budget {} ({base}): {used}; {left}", self.limit)
    }
}
