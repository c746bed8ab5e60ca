//! `gpufleet upgrade --wave --until-done [--soak D] [--pause-after-each]`: wave after wave, each
//! its own rollout ([`super::run_once`]), each opened only when the wave before it is healthy
//! after the soak (every node of it `ready`, probed again); and `gpufleet upgrade --cancel`.
//!
//! Between waves nothing runs: Ctrl-C there ends gpufleet with every rollout finished, and the
//! same command goes on with the next wave; Ctrl-C during a wave leaves that wave's rollout
//! unfinished, for `--resume`.

use std::io::BufRead;

use super::*;
use crate::fleet::rollout::{Lock, Rollouts};

/// The last rollout started in the state folder: its id and its nodes (from its plan).
fn last_rollout(r: &Rollouts) -> anyhow::Result<Option<(String, Vec<String>)>> {
    let session = r.open(Lock::None)?;
    Ok(session
        .entries
        .iter()
        .rev()
        .find(|e| e.node.is_empty() && e.step == "rollout" && e.phase == Phase::Start)
        .map(|e| {
            let nodes = serde_json::from_str::<rollout::Plan>(&e.outcome)
                .map(|p| p.nodes.into_iter().map(|n| n.node).collect())
                .unwrap_or_default();
            (e.rollout.clone(), nodes)
        }))
}

use crate::actions::journal::Phase;

/// Runs waves until none is left (exit 0), a wave fails or is blocked (its exit code), a wave
/// is unhealthy after its soak (exit 1), or the operator stops between waves (exit 0).
pub(super) fn run(
    s: &Settings,
    args: &UpgradeArgs,
    events: Option<rollout::EventSink>,
) -> anyhow::Result<u8> {
    let safe = |t: &str| crate::model::text::terminal_safe(t).into_owned();
    if args.dry_run {
        // A dry run plans the next wave only: the waves after it depend on how it goes.
        eprintln!("gpufleet: --dry-run with --until-done shows the next wave only");
        return run_once(s, args, events.as_ref());
    }
    let (r, inv) = super::rollouts(s, args)?;
    let soak = args.soak.unwrap_or(0);
    let emit = |id: &str, state: &str, detail: &str| {
        if let Some(e) = &events {
            e.emit(id, "", "wave", state, detail);
        }
    };
    let mut wave = 0;
    loop {
        let before = last_rollout(&r)?.map(|(id, _)| id);
        let code = run_once(s, args, events.as_ref())?;
        let Some((id, nodes)) = last_rollout(&r)?.filter(|(id, _)| Some(id) != before.as_ref())
        else {
            if code == 0 {
                let said = format!("every wave done ({wave} run by this command)");
                emit("", "all-done", &said);
                crate::outln!("{said}");
            }
            return Ok(code);
        };
        wave += 1;
        if code != 0 {
            emit(&id, "failed", &format!("wave {wave} stopped (exit {code})"));
            return Ok(code);
        }
        let names = nodes.join(", ");
        emit(&id, "done", &format!("wave {wave}: {names}"));
        if soak > 0 {
            eprintln!(
                "gpufleet: wave {wave} done ({}); soaking {soak} s before checking it (Ctrl-C stops here: nothing runs, and this command goes on with the next wave)",
                safe(&names)
            );
            emit(&id, "soak", &format!("{soak} s"));
            std::thread::sleep(std::time::Duration::from_secs(soak));
        }
        let settings = s.probe(&args.scan)?;
        let (scan, _) = s.scan(&args.scan, &inv, settings)?;
        let rt = crate::rt::build()?;
        let bad = rt.block_on(r.not_ready(scan, &nodes))?;
        if !bad.is_empty() {
            let list: Vec<String> = bad
                .iter()
                .map(|(n, st)| format!("{} is {st} ({})", safe(n), st.meaning()))
                .collect();
            let said = format!(
                "wave {wave} (rollout {id}) is not healthy after its soak: {}; the next wave does not open",
                list.join("; ")
            );
            emit(&id, "unhealthy", &said);
            eprintln!("gpufleet: {said}");
            return Ok(1);
        }
        emit(&id, "healthy", &format!("wave {wave}: every node ready"));
        if args.pause_after_each {
            eprint!("gpufleet: wave {wave} done and healthy. Go on with the next wave? [y/N] ");
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            if !matches!(line.trim(), "y" | "Y" | "yes") {
                let said = format!(
                    "stopped after wave {wave}; `gpufleet upgrade --wave --until-done` goes on with the next"
                );
                emit(&id, "paused", &said);
                crate::outln!("{said}");
                return Ok(0);
            }
        }
    }
}

/// `gpufleet upgrade --cancel`: exit 0 when every running step was stopped (or none ran), 1
/// when one could not be.
pub(super) fn cancel(s: &Settings, args: &UpgradeArgs) -> anyhow::Result<u8> {
    let safe = |t: &str| crate::model::text::terminal_safe(t).into_owned();
    let settings = s.probe(&args.scan)?;
    let (r, inv) = super::rollouts(s, args)?;
    let permit = r.permit()?;
    let (scan, _) = s.scan(&args.scan, &inv, settings)?;
    let rt = crate::rt::build()?;
    let report = rt
        .block_on(r.cancel(
            permit,
            scan,
            Box::new(move |l| eprintln!("gpufleet: {}", safe(l))),
        ))
        .map_err(|e| anyhow::Error::msg(safe(&e.to_string())))?;
    if let Some(h) = &report.running {
        eprintln!(
            "gpufleet: the rollout's gpufleet still runs ({}): it sees its step stopped and stops the node",
            safe(h)
        );
    }
    let mut failed = 0;
    for c in &report.nodes {
        if c.said.starts_with("could not be stopped") {
            failed += 1;
        }
        crate::outln!(
            "{}: {}{}",
            safe(&c.node),
            c.step
                .as_deref()
                .map(|s| format!("{} ", safe(s)))
                .unwrap_or_default(),
            safe(&c.said)
        );
    }
    crate::outln!(
        "rollout {} cancelled: its nodes stay drained and locked; `gpufleet upgrade --resume` runs the stopped steps again, `--abandon` gives it up",
        report.rollout
    );
    Ok(if failed == 0 { 0 } else { 1 })
}
