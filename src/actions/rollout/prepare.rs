//! `prepare`: probe the chosen nodes (and, for a wave, every other canary) concurrently
//! through the fleet scanner, then plan. Used by both the CLI and the TUI.

use std::collections::HashMap;
use std::sync::Arc;

use super::*;
use crate::actions::journal::Entry;
use crate::config::UpgradeConfig;
use crate::inventory::Node;
use crate::model::NodeStatus;
use crate::model::report::NodeReport;
use crate::probe::scan::Scan;

/// What to plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The next rollout of this mode among the chosen nodes (the CLI's `--canary`, `--wave`).
    Next(Mode),
    /// Exactly the chosen nodes (the TUI's marked ones); the mode follows from them.
    Exactly,
}

/// Why no plan was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoPlan {
    /// A wave waits for its canaries (a state of the fleet, not a mistake of the operator).
    CanariesFirst(String),
    /// Anything else (no recipe, too many nodes, …).
    Refused(String),
}

impl std::fmt::Display for NoPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoPlan::CanariesFirst(s) | NoPlan::Refused(s) => f.write_str(s),
        }
    }
}

/// Probes what a plan needs — `chosen`, and every other canary of `inventory` when nodes other
/// than canaries may be planned (the waves wait for them) — read-only and concurrently through
/// the fleet scanner, then plans: the one way to a plan, for the CLI and the TUI alike.
/// `announce` hears how many nodes are probed, before they are.
#[allow(clippy::too_many_arguments)]
pub async fn prepare(
    scan: Arc<Scan>,
    inventory: &[Node],
    chosen: &[Node],
    choice: Choice,
    journal: &[Entry],
    cfg: &UpgradeConfig,
    recipes: &std::collections::BTreeMap<String, crate::config::Recipe>,
    rollout: &str,
    announce: impl FnOnce(usize),
) -> Result<Plan, NoPlan> {
    let waves = match choice {
        Choice::Next(m) => m == Mode::Wave,
        Choice::Exactly => chosen.iter().any(|n| !n.canary),
    };
    let others: Vec<Node> = inventory
        .iter()
        .filter(|n| waves && n.canary && !chosen.iter().any(|c| c.name == n.name))
        .cloned()
        .collect();
    let mut all = chosen.to_vec();
    all.extend(others.iter().cloned());
    announce(all.len());
    let (tx, mut rx) = tokio::sync::mpsc::channel(256);
    let task = tokio::spawn(scan.run(all, tx));
    let mut reports: HashMap<String, NodeReport> = HashMap::new();
    while let Some((_, r)) = rx.recv().await {
        reports.insert(r.name.clone(), r);
    }
    let _ = task.await;
    let mut with = Vec::new();
    for n in chosen {
        let r = reports
            .remove(&n.name)
            .ok_or_else(|| NoPlan::Refused(format!("{}: the probe gave no report", n.name)))?;
        with.push((n.clone(), r));
    }
    let mut canaries: Vec<(String, Option<NodeStatus>)> = with
        .iter()
        .filter(|(n, _)| n.canary)
        .map(|(n, r)| (n.name.clone(), Some(r.status)))
        .collect();
    canaries.extend(
        others
            .iter()
            .map(|n| (n.name.clone(), reports.get(&n.name).map(|r| r.status))),
    );
    match choice {
        Choice::Next(mode) => {
            if mode == Mode::Wave {
                canaries_done(&canaries, &finished_nodes(journal))
                    .map_err(NoPlan::CanariesFirst)?;
            }
            plan(mode, &with, &canaries, journal, cfg, recipes, rollout)
        }
        Choice::Exactly => plan_selected(&with, &canaries, journal, cfg, recipes, rollout),
    }
    .map_err(NoPlan::Refused)
}
