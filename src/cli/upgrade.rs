//! `gpufleet upgrade`: canaries, then waves; `--resume`, `--abandon`, `--dry-run`.

use std::io::IsTerminal;

use clap::Args;

use super::{ScanArgs, Settings};
use crate::probe::scan::now_rfc3339;

pub(super) const UPGRADE_HELP: &str = "\
Per node: lock (a marker on the node) → drain → the recipe's steps → wait for SSH after a reboot
→ re-probe → gates (open module, no nvidia-peermem, nvidia-smi healthy, DMA-BUF kernel support,
no error reasons) → uncordon → unlock. Only nodes whose status is `migrate` are upgraded. A failed
step or gate stops that node and leaves it drained. Every step is written to the journal (fsynced)
before it runs; --resume continues an interrupted rollout without repeating completed steps.

Each rollout has its own id (r-<UTC time>-<random>); the node lock's marker names it and its
operator (user@host, pid), and no other rollout passes it. Recipe steps run detached on the node
(<root>/var/lib/gpufleet/steps/<rollout>/), so they finish if gpufleet or the connection dies;
--resume waits for a step still running there and takes its recorded exit status.

Exit codes: 0 done (or nothing to do, or --dry-run), 1 a node failed (the rollout stopped) or a
wave is blocked by its canaries, 2 usage, config, inventory or read-only errors, or nodes that
cannot be planned (no recipe, no drain setting, …: every such node is listed, each with why).

Examples:
  gpufleet upgrade -i fleet.toml --canary --dry-run     the plan with the exact commands
  gpufleet upgrade -i fleet.toml --canary               then type the number of nodes to go
  gpufleet upgrade -i fleet.toml --wave --yes           the next wave, no prompt (scripts)
  gpufleet upgrade -i fleet.toml --resume               after a crash or Ctrl-C";

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["canary", "wave", "resume", "abandon"])))]
pub struct UpgradeArgs {
    #[command(flatten)]
    pub scan: ScanArgs,

    /// Upgrade the canary nodes (`canary = true`), at most max_unavailable of them
    #[arg(long)]
    pub canary: bool,

    /// Upgrade the next wave of the other nodes (every canary must be done)
    #[arg(long)]
    pub wave: bool,

    /// Continue the last rollout that did not finish (interrupted, or stopped by a failed step
    /// or gate): each node goes on from the step where it stopped
    #[arg(long)]
    pub resume: bool,

    /// Give up the last rollout that did not finish: its nodes stay as they are (drained ones
    /// stay drained; uncordon them yourself), and later rollouts may take over its node locks.
    /// Refused while the rollout's process still runs
    #[arg(long)]
    pub abandon: bool,

    /// Print the plan with the exact commands and change nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Do not ask for confirmation (for scripts)
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Nodes upgraded at once [default: 1, or the config's [upgrade] max_unavailable]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub max_unavailable: Option<u64>,

    /// Refuse to run (read-only fleet view)
    #[arg(long)]
    pub read_only: bool,
}

fn print_plan(
    plan: &crate::actions::rollout::Plan,
    dry_run: bool,
    progress: &crate::actions::rollout::Progress,
) {
    for l in crate::actions::rollout::plan_lines(plan, dry_run) {
        println!("{l}");
    }
    let mut steps: Vec<String> = plan
        .nodes
        .iter()
        .flat_map(|n| {
            n.steps
                .iter()
                .enumerate()
                .filter(|(i, _)| {
                    progress.get(&(n.node.clone(), *i))
                        == Some(&crate::actions::journal::Phase::Done)
                })
                .map(|(_, s)| format!("{} {}", n.node, s.label()))
        })
        .collect();
    if !steps.is_empty() {
        steps.sort();
        println!("  done before (skipped on resume): {}", steps.join(", "));
    }
}

fn confirm(count: usize) -> anyhow::Result<bool> {
    use std::io::BufRead;
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("not a terminal: pass --yes to confirm, or --dry-run to see the plan");
    }
    eprint!("This changes {count} node(s). Type {count} to go on: ");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim() == count.to_string())
}

/// Runs `gpufleet upgrade`; returns the exit code (see [`UPGRADE_HELP`]).
pub fn run(s: &Settings, args: &UpgradeArgs) -> anyhow::Result<u8> {
    let config = &s.config;
    use crate::actions::{journal, permit::WritePermit, rollout};
    if args.scan.local || args.scan.root.is_some() {
        anyhow::bail!(
            "--local and --root do not apply to upgrades: a rollout works on an inventory's nodes over SSH"
        );
    }
    let settings = s.probe(&args.scan)?;
    let inv = s
        .inventory(&args.scan)?
        .ok_or_else(|| anyhow::anyhow!("upgrade needs an inventory (-i FILE)"))?;
    // Refused before anything else when read-only, dry run included: nothing may start.
    let permit = WritePermit::new(s.read_only(args.read_only, Some(&inv)))?;
    let state = s.state_dir()?;
    // One rollout at a time per state folder, from here on (a dry run changes nothing and
    // takes no lock). `--abandon` is refused while the rollout's process runs.
    let mut local = if args.dry_run {
        None
    } else {
        match rollout::lock_local(&state) {
            Ok(l) => Some(l),
            Err(rollout::LocalLockError::Held { path, holder }) if args.abandon => {
                anyhow::bail!(
                    "not abandoned: the rollout is still running ({holder}; it holds {}); stop that process first (then `--resume` or `--abandon`), or wait for it to end",
                    path.display()
                );
            }
            Err(e) => return Err(e.into()),
        }
    };
    let journal_path = state.join("journal.jsonl");
    let (entries, skipped_lines) = journal::read(&journal_path)?;
    if skipped_lines > 0 {
        eprintln!(
            "gpufleet: warning: {}: {skipped_lines} line(s) that are not journal entries were skipped",
            journal_path.display()
        );
    }
    let stopped = rollout::unfinished(&entries);
    if stopped.is_none()
        && let Some(id) = rollout::unreadable_unfinished(&entries)
    {
        if !args.abandon {
            anyhow::bail!("{}", rollout::unreadable_message(&id));
        }
        let mut j = journal::Journal::open(&state)?;
        j.append(&journal::Entry {
            ts: now_rfc3339(),
            who: journal::who(),
            rollout: id.clone(),
            node: String::new(),
            step: "rollout".into(),
            seq: None,
            phase: journal::Phase::Abandoned,
            command: String::new(),
            outcome: "abandoned by the operator (its plan could not be read)".into(),
        })?;
        println!(
            "abandoned rollout {id}; its plan could not be read, so check its nodes by hand: `gpufleet locks` lists node locks, and drained nodes stay drained"
        );
        return Ok(0);
    }
    if args.abandon {
        let (plan, progress) = stopped.ok_or_else(|| {
            anyhow::anyhow!(
                "nothing to abandon: every rollout in {} finished",
                journal_path.display()
            )
        })?;
        let mut j = journal::Journal::open(&state)?;
        j.append(&journal::Entry {
            ts: now_rfc3339(),
            who: journal::who(),
            rollout: plan.rollout.clone(),
            node: String::new(),
            step: "rollout".into(),
            seq: None,
            phase: journal::Phase::Abandoned,
            command: String::new(),
            outcome: "abandoned by the operator".into(),
        })?;
        let nodes: Vec<&str> = plan.nodes.iter().map(|n| n.node.as_str()).collect();
        println!(
            "abandoned rollout {} ({}); check those nodes: drained ones stay drained",
            plan.rollout,
            nodes.join(", ")
        );
        for l in rollout::left_behind(&plan, &progress) {
            println!("  {l}");
        }
        return Ok(0);
    }
    if !args.resume
        && let Some((plan, _)) = &stopped
    {
        anyhow::bail!(
            "rollout {} did not finish: `gpufleet upgrade --resume` goes on with it, `--abandon` gives it up",
            plan.rollout
        );
    }
    let (scan, selected) = s.scan(&args.scan, &inv, settings)?;
    let mut ucfg = config.upgrade.clone();
    if let Some(m) = args.max_unavailable {
        ucfg.max_unavailable = m as usize;
    }
    let rt = crate::rt::build()?;
    let (plan, progress) = if args.resume {
        stopped.ok_or_else(|| {
            anyhow::anyhow!(
                "nothing to resume: every rollout in {} finished",
                journal_path.display()
            )
        })?
    } else {
        let mode = if args.canary {
            rollout::Mode::Canary
        } else {
            rollout::Mode::Wave
        };
        // The canaries of the whole inventory gate the waves, selected or not.
        let planned = rt.block_on(rollout::prepare(
            scan.clone(),
            &inv.nodes,
            &selected,
            rollout::Choice::Next(mode),
            &entries,
            &ucfg,
            &config.recipes,
            &rollout::new_id(),
            |n| eprintln!("probing {n} node(s) before planning…"),
        ));
        let plan = match planned {
            Ok(p) => p,
            // A wave blocked by its canaries is a state of the fleet, not a usage error: exit 1.
            Err(rollout::NoPlan::CanariesFirst(why)) => {
                eprintln!("gpufleet: {why}");
                return Ok(1);
            }
            // Every node that cannot be planned, one per line (node names and recipe names are
            // inventory text: each line escaped).
            Err(e) => {
                let lines: Vec<String> = e
                    .to_string()
                    .lines()
                    .map(|l| crate::model::text::terminal_safe(l).into_owned())
                    .collect();
                return Err(anyhow::Error::msg(lines.join("\n")));
            }
        };
        (plan, Default::default())
    };
    print_plan(&plan, args.dry_run, &progress);
    if args.dry_run {
        return Ok(0);
    }
    if plan.nodes.is_empty() {
        println!("nothing to do");
        return Ok(0);
    }
    if let Some(l) = local.as_mut() {
        l.note(&plan.rollout);
    }
    if !args.yes && !confirm(plan.nodes.len())? {
        eprintln!("gpufleet: not confirmed; nothing changed");
        return Ok(2);
    }
    // Only how to reach each node comes from the inventory; what runs is the plan.
    let nodes: Vec<crate::inventory::Node> = plan
        .nodes
        .iter()
        .map(|p| {
            inv.nodes
                .iter()
                .find(|n| n.name == p.node)
                .cloned()
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "{} is in the rollout but no longer in {}",
                        p.node,
                        inv.path.display()
                    )
                })
        })
        .collect::<anyhow::Result<_>>()?;
    let executor = std::sync::Arc::new(rollout::Executor::new(
        permit,
        journal::Journal::open(&state)?,
        scan,
        &ucfg,
        progress,
        Box::new(|l| eprintln!("gpufleet: {}", crate::model::text::terminal_safe(l))),
    ));
    if !args.resume {
        executor.start(&plan).map_err(anyhow::Error::msg)?;
    }
    let (outcomes, summary) = rt.block_on(executor.run_plan(&plan, nodes));
    let failed = outcomes.iter().filter(|o| o.failure.is_some()).count();
    for o in &outcomes {
        if let Some(f) = &o.failure {
            let drained = rollout::drained_note(&plan, &o.node, f.seq);
            let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
            eprintln!(
                "gpufleet: {} stopped at {}{drained}: {}",
                safe(&o.node),
                f.step,
                safe(&f.why)
            );
        }
    }
    if failed > 0 {
        eprintln!(
            "gpufleet: fix what stopped them, then `gpufleet upgrade --resume` goes on from there (or `--abandon`)"
        );
    }
    // Node output is in it (a failed step's excerpt): escaped here, once.
    println!("{}", crate::model::text::terminal_safe(&summary));
    drop(local);
    Ok(if failed == 0 { 0 } else { 1 })
}
