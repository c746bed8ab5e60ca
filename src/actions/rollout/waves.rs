//! Planning a rollout (pure): which nodes of the selection go in this wave, from each node as
//! probed now over the journal, its scheduler state and the unavailability budget
//! ([`Budget`]); the steps of each node are [`super::plan`]'s.

use std::collections::BTreeMap;

use super::budget::{Around, Budget, lock_holder};
use super::history::abandoned;
use super::live::{CanaryNow, Verdict, canaries_done, last_upgrades, verdict};
use super::plan::{Mode, OPERATOR_SKIP, Plan, none_unplannable, operator_managed, plan_node};
use crate::actions::journal::Entry;
use crate::actions::scheduler::{self, Taken};
use crate::config::{Recipe, UpgradeConfig};
use crate::inventory::Node;
use crate::model::report::NodeReport;

/// Plans the next rollout of `mode` (pure). `nodes` pairs each selected node with a fresh
/// report; `canaries` is every canary of the inventory as probed now. What is upgraded is
/// decided from the node as probed now over the journal ([`verdict`]): `migrate` nodes (one the
/// journal calls upgraded too, said so), and `ready` ones whose upgrade was never proven; the
/// others are skipped with the reason. Every such node is planned, those of later waves too:
/// when some cannot be (no recipe, a recipe not in the config, no drain setting, `{branch}` of
/// an unknown driver), the error names each of them with its reason.
pub fn plan(
    mode: Mode,
    nodes: &[(Node, NodeReport)],
    canaries: &[CanaryNow],
    journal: &[Entry],
    cfg: &UpgradeConfig,
    recipes: &BTreeMap<String, Recipe>,
    rollout: &str,
) -> Result<Plan, String> {
    let around = Around::default();
    plan_in(
        mode, nodes, canaries, journal, cfg, recipes, rollout, &around,
    )
}

/// [`plan`] with each node's scheduler state read before (`around`): a node out of service
/// before this rollout (drained, down, cordoned, reserved by someone else) is skipped with who
/// and why, or taken without ever being given back with `cfg.include_drained`; one whose state
/// could not be read is skipped. No more nodes are planned than the budget leaves
/// ([`Budget`]: nodes out of service and nodes locked by other rollouts count against it).
#[allow(clippy::too_many_arguments)]
pub fn plan_in(
    mode: Mode,
    nodes: &[(Node, NodeReport)],
    canaries: &[CanaryNow],
    journal: &[Entry],
    cfg: &UpgradeConfig,
    recipes: &BTreeMap<String, Recipe>,
    rollout: &str,
    around: &Around,
) -> Result<Plan, String> {
    let budget = Budget::of(nodes, around, cfg);
    let mut free = budget.left();
    let last = last_upgrades(journal);
    let takeover = abandoned(journal);
    if mode == Mode::Wave {
        canaries_done(canaries, &last)?;
    }
    let mut skipped = Vec::new();
    let mut chosen = Vec::new();
    let mut problems = Vec::new();
    for (n, r) in nodes
        .iter()
        .filter(|(n, _)| n.canary == (mode == Mode::Canary))
    {
        let Eligible { note, pre, charged } = match classify(n, r, &last, around, cfg) {
            Ok(e) => e,
            Err(why) => {
                skipped.push((n.name.clone(), why));
                continue;
            }
        };
        match plan_node(n, r, recipes, cfg, rollout, &takeover, note, pre, charged) {
            Err(e) => problems.push(e),
            Ok(p) if !charged || free > 0 => {
                free -= usize::from(charged);
                chosen.push(p)
            }
            Ok(_) => {
                skipped.push((
                    n.name.clone(),
                    format!("in a later wave (max_unavailable): {}", budget.line()),
                ));
            }
        }
    }
    none_unplannable(problems)?;
    Ok(Plan {
        rollout: rollout.to_string(),
        mode,
        nodes: chosen,
        skipped,
        budget: Some(budget),
    })
}

/// Plans an upgrade of `chosen` (the TUI's marked nodes), as one wave: nodes that are not to be
/// upgraded ([`verdict`], or managed by the GPU Operator) are skipped with the reason, as the
/// CLI does; of the others, non-canary nodes only once every canary of `canaries` is done
/// ([`canaries_done`]), canaries and other nodes never together, at most max_unavailable.
pub fn plan_selected(
    chosen: &[(Node, NodeReport)],
    canaries: &[CanaryNow],
    journal: &[Entry],
    cfg: &UpgradeConfig,
    recipes: &BTreeMap<String, Recipe>,
    rollout: &str,
) -> Result<Plan, String> {
    let around = Around::default();
    plan_selected_in(chosen, canaries, journal, cfg, recipes, rollout, &around)
}

/// [`plan_selected`] with each node's scheduler state read before, as [`plan_in`].
pub fn plan_selected_in(
    chosen: &[(Node, NodeReport)],
    canaries: &[CanaryNow],
    journal: &[Entry],
    cfg: &UpgradeConfig,
    recipes: &BTreeMap<String, Recipe>,
    rollout: &str,
    around: &Around,
) -> Result<Plan, String> {
    let budget = Budget::of(chosen, around, cfg);
    let last = last_upgrades(journal);
    let mut skipped = Vec::new();
    let mut eligible = Vec::new();
    for (n, r) in chosen {
        match classify(n, r, &last, around, cfg) {
            Ok(e) => eligible.push((n, r, e)),
            Err(why) => skipped.push((n.name.clone(), why)),
        }
    }
    if eligible.is_empty() {
        let why: Vec<String> = skipped.iter().map(|(n, w)| format!("{n}: {w}")).collect();
        return Err(format!("nothing to upgrade: {}", why.join("; ")));
    }
    let with_canary = eligible.iter().any(|(n, ..)| n.canary);
    let with_other = eligible.iter().any(|(n, ..)| !n.canary);
    if with_canary && with_other {
        return Err("canaries go alone: mark only canaries, or only other nodes".into());
    }
    if with_other {
        canaries_done(canaries, &last)?;
    }
    let charged = eligible.iter().filter(|(.., e)| e.charged).count();
    if charged > budget.left() {
        return Err(format!(
            "{charged} nodes in service chosen, more than max_unavailable leaves ({}): choose fewer",
            budget.line()
        ));
    }
    let takeover = abandoned(journal);
    let mut nodes = Vec::new();
    let mut problems = Vec::new();
    for (n, r, Eligible { note, pre, charged }) in eligible {
        match plan_node(n, r, recipes, cfg, rollout, &takeover, note, pre, charged) {
            Ok(p) => nodes.push(p),
            Err(e) => problems.push(e),
        }
    }
    none_unplannable(problems)?;
    Ok(Plan {
        rollout: rollout.to_string(),
        mode: if with_canary {
            Mode::Canary
        } else {
            Mode::Wave
        },
        nodes,
        skipped,
        budget: Some(budget),
    })
}

/// A node to plan, as [`classify`] found it.
struct Eligible<'a> {
    /// Why it is planned though the journal says otherwise ([`verdict`]).
    note: Option<super::live::Again>,
    /// Out of service before (`--include-drained`).
    pre: Option<&'a Taken>,
    /// It takes one of the budget (it is in service now: its drain makes one more node
    /// unavailable).
    charged: bool,
}

/// The one per-node classification of planning, for the CLI's waves and the TUI's marked nodes
/// alike: `Err(why)` when the node is not planned — managed by the GPU Operator, not to be
/// upgraded as probed now over the journal ([`verdict`]), out of service before without
/// `--include-drained`, or its scheduler state unknown ([`sched_verdict`]); else how it is.
fn classify<'a>(
    n: &Node,
    r: &NodeReport,
    last: &std::collections::HashMap<String, super::live::LastUpgrade>,
    around: &'a Around,
    cfg: &UpgradeConfig,
) -> Result<Eligible<'a>, String> {
    if operator_managed(r) {
        return Err(OPERATOR_SKIP.into());
    }
    let note = match verdict(r, last.get(&n.name)) {
        Verdict::Skip(why) => return Err(why),
        Verdict::Plan(note) => note,
    };
    match sched_verdict(n, r, around, cfg) {
        Sched::Skip(why) => Err(why),
        Sched::Plan { pre, charged } => Ok(Eligible { note, pre, charged }),
    }
}

/// Whether a node is planned, from its scheduler state and node lock.
enum Sched<'a> {
    /// Left out, with who and why.
    Skip(String),
    /// Planned: `pre`, out of service before (`--include-drained`); `charged`: it takes one of
    /// the budget (it is in service now: its drain makes one more node unavailable).
    Plan {
        pre: Option<&'a Taken>,
        charged: bool,
    },
}

fn sched_verdict<'a>(
    n: &Node,
    r: &NodeReport,
    around: &'a Around,
    cfg: &UpgradeConfig,
) -> Sched<'a> {
    // Locked by another rollout: counted in the budget already; its lock step skips it, naming
    // the holder, unless that rollout is gone by then.
    if lock_holder(r).is_some() {
        return Sched::Plan {
            pre: None,
            charged: false,
        };
    }
    match around.state(&n.name) {
        Some(Err(e)) => Sched::Skip(format!(
            "its scheduler state cannot be read ({e}); not drained: gpufleet drains only a node it sees in service"
        )),
        Some(Ok(scheduler::State::Taken(t))) if !cfg.include_drained => Sched::Skip(format!(
            "out of service before this rollout: {}; not upgraded (`--include-drained` upgrades it and never gives it back)",
            t.words()
        )),
        Some(Ok(scheduler::State::Taken(t))) => Sched::Plan {
            pre: Some(t),
            charged: false,
        },
        _ => Sched::Plan {
            pre: None,
            charged: true,
        },
    }
}
