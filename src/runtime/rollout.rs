//! The TUI's rollout effects, each through the rollout use case ([`crate::fleet::rollout`])
//! that `gpufleet upgrade` calls: plan the marked nodes (`U`), run the confirmed plan, and
//! resume, abandon or cancel the unfinished rollout (`--resume`, `--abandon`, `--cancel`).
//! A run's progress events (the `--events` ones), its log lines and its end reach the app in
//! the order they happened, through one channel.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::actions::rollout::{EventSink, Plan};
use crate::app::{ConfirmKind, Msg, PlanRefused, RolloutResult, Unfinished, unfinished_lines};
use crate::fleet::rollout::{Lock, RolloutError};
use crate::fleet::scan::Source;
use crate::probe::scan::Scan;

use super::UpgradeCtx;

/// Why the TUI cannot act on rollouts: no inventory.
const NEEDS_INVENTORY: &str = "upgrades need an inventory (gpufleet tui -i FILE)";

/// The rollout context and the fleet's scan settings, when the TUI has an inventory.
pub(super) fn fleet(
    upgrade: &Option<Arc<UpgradeCtx>>,
    target: &Source,
) -> Result<(Arc<UpgradeCtx>, Arc<Scan>), String> {
    match (upgrade, target) {
        (Some(ctx), Source::Fleet(f)) => Ok((ctx.clone(), f.scan.clone())),
        _ => Err(NEEDS_INVENTORY.to_string()),
    }
}

/// A sender whose messages reach `tx` in the order they were sent, without blocking the
/// sender (the executor's tasks call it).
fn in_order(tx: mpsc::Sender<Msg>) -> mpsc::UnboundedSender<Msg> {
    let (utx, mut urx) = mpsc::unbounded_channel::<Msg>();
    tokio::spawn(async move {
        while let Some(m) = urx.recv().await {
            if tx.send(m).await.is_err() {
                break;
            }
        }
    });
    utx
}

/// `U`: the plan of exactly the nodes named `names`, answered with [`Msg::UpgradePlanned`].
pub(super) fn plan(
    ctx: Arc<UpgradeCtx>,
    scan: Arc<Scan>,
    names: Vec<String>,
    tx: mpsc::Sender<Msg>,
) {
    tokio::spawn(async move {
        let answer = ctx
            .plan_exactly(scan, &names)
            .await
            .map(|plan| {
                let lines = crate::actions::rollout::plan_lines(&plan, false);
                (lines, Box::new(plan))
            })
            .map_err(|e| PlanRefused {
                unfinished: matches!(
                    e,
                    RolloutError::Unfinished(_) | RolloutError::UnreadableUnfinished(_)
                ),
                why: e.to_string(),
            });
        let _ = tx.send(Msg::UpgradePlanned(answer)).await;
    });
}

/// What a run starts from.
pub(super) enum Start {
    /// The plan the operator confirmed (`U`): it is what runs.
    Plan(Box<Plan>),
    /// The unfinished rollout, if it is still this one (a resume).
    Resume(String),
}

/// Starts a rollout through the use case (journaled, locked, with the write permit): its
/// events and log lines go to the app as they come, then [`Msg::UpgradeDone`] with each
/// node's outcome.
///
/// Errors: the permit's, the lock's, the "did not finish" check's (another rollout may have
/// started, and stopped, since the plan was made), [`crate::fleet::rollout::Rollouts::start`]'s;
/// for a resume, nothing unfinished or another rollout unfinished than the one confirmed; in
/// words.
pub(super) fn run(
    ctx: &UpgradeCtx,
    start: Start,
    scan: Arc<Scan>,
    tx: mpsc::Sender<Msg>,
) -> Result<(), String> {
    let ordered = in_order(tx);
    let started = (|| {
        let permit = ctx.permit().map_err(|e| e.to_string())?;
        let session = ctx.open(Lock::Take).map_err(|e| e.to_string())?;
        let (plan, progress, resume) = match start {
            Start::Plan(p) => {
                session.check_finished().map_err(|e| e.to_string())?;
                (*p, Default::default(), false)
            }
            Start::Resume(id) => {
                let (p, progress) = session.resume().map_err(|e| e.to_string())?;
                if p.rollout != id {
                    return Err(changed(&id, &p.rollout));
                }
                (p, progress, true)
            }
        };
        let log_tx = ordered.clone();
        let log = Box::new(move |l: &str| {
            let _ = log_tx.send(Msg::UpgradeLog(l.to_string()));
        });
        ctx.start(session, permit, scan, plan, progress, resume, log)
            .map_err(|e| e.to_string())
    })();
    let run = started?;
    let ev_tx = ordered.clone();
    run.set_events(EventSink::call(move |e| {
        let _ = ev_tx.send(Msg::RolloutEvent(Box::new(e.clone())));
    }));
    let names = run.plan().nodes.iter().map(|n| n.node.clone()).collect();
    tokio::spawn(async move {
        let report = run.finish().await;
        let result = RolloutResult::of_report(&report);
        let _ = ordered.send(Msg::UpgradeDone {
            names,
            summary: report.summary,
            result: Some(Box::new(result)),
        });
    });
    Ok(())
}

fn changed(confirmed: &str, now: &str) -> String {
    format!(
        "the unfinished rollout is {now} now, not {confirmed} (the one confirmed): nothing done"
    )
}

/// The unfinished rollout, for the confirmation of `kind`.
///
/// Errors: nothing unfinished (`nothing to resume: …`), or a plan this version cannot read
/// (resume, abandon and cancel it with `gpufleet upgrade`), in words.
pub(super) fn find(ctx: &UpgradeCtx, kind: ConfirmKind) -> Result<Unfinished, String> {
    let session = ctx.open(Lock::None).map_err(|e| e.to_string())?;
    let (plan, progress) = session.resume().map_err(|e| match e {
        RolloutError::NothingUnfinished { journal, .. } => RolloutError::NothingUnfinished {
            what: kind.verb(),
            journal,
        }
        .to_string(),
        e => e.to_string(),
    })?;
    let lines = unfinished_lines(kind, &plan, &progress);
    Ok(Unfinished {
        kind,
        plan: Box::new(plan),
        lines,
    })
}

/// Gives up the unfinished rollout `id` (`--abandon`): journaled; refused while its process
/// runs, or when another rollout is unfinished now.
///
/// Errors: read-only; the rollout's process still runs; nothing unfinished, or another
/// rollout; the journal cannot be written; in words.
pub(super) fn abandon(ctx: &UpgradeCtx, id: &str) -> Result<(Vec<String>, RolloutResult), String> {
    ctx.permit().map_err(|e| e.to_string())?;
    let mut session = ctx.open(Lock::Abandon).map_err(|e| e.to_string())?;
    let (plan, _) = session.resume().map_err(|e| e.to_string())?;
    if plan.rollout != id {
        return Err(changed(id, &plan.rollout));
    }
    let a = session.abandon().map_err(|e| e.to_string())?;
    let names = plan.nodes.iter().map(|n| n.node.clone()).collect();
    Ok((names, RolloutResult::of_abandoned(&a)))
}

/// Stops the running steps of the unfinished rollout `id` (`--cancel`), answered with
/// [`Msg::RolloutActed`]; its log lines go to the status line.
pub(super) fn cancel(ctx: Arc<UpgradeCtx>, scan: Arc<Scan>, id: String, tx: mpsc::Sender<Msg>) {
    let ordered = in_order(tx);
    tokio::spawn(async move {
        let done = async {
            let permit = ctx.permit().map_err(|e| e.to_string())?;
            let (plan, _) = ctx
                .open(Lock::None)
                .and_then(|s| s.resume())
                .map_err(|e| e.to_string())?;
            if plan.rollout != id {
                return Err(changed(&id, &plan.rollout));
            }
            let log_tx = ordered.clone();
            let log = Box::new(move |l: &str| {
                let _ = log_tx.send(Msg::UpgradeLog(l.to_string()));
            });
            let report = ctx
                .cancel(permit, scan, log)
                .await
                .map_err(|e| e.to_string())?;
            let names: Vec<String> = report.nodes.iter().map(|n| n.node.clone()).collect();
            Ok((names, RolloutResult::of_cancel(&report)))
        };
        let msg = match done.await {
            Ok((names, r)) => Msg::RolloutActed {
                names,
                result: Ok(Box::new(r)),
            },
            Err(e) => Msg::RolloutActed {
                names: Vec::new(),
                result: Err(format!("cancel: {e}")),
            },
        };
        let _ = ordered.send(msg);
    });
}
