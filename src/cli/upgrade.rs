//! `gpufleet upgrade`: canaries, then waves; `--resume`, `--abandon`, `--dry-run`.

use std::io::IsTerminal;

use clap::Args;

use super::{ScanArgs, Settings};
use crate::actions::rollout;

pub(super) const UPGRADE_HELP: &str = "\
Per node: lock (a marker on the node) → drain → the recipe's steps → after a reboot step, wait
until the node answers with a new boot identity (/proc/sys/kernel/random/boot_id) → re-probe → gates (open module, no nvidia-peermem, nvidia-smi healthy, DMA-BUF kernel support,
no error reasons) → uncordon → unlock. Only nodes whose status is `migrate` now are upgraded
(and `ready` ones whose rollout stopped before their gates): the node as probed now wins over the
journal, and a wave waits until every canary is ready now with its gates passed. A failed
step or gate stops that node and leaves it drained. Every step is written to the journal (fsynced)
before it runs; --resume continues an interrupted rollout without repeating completed steps.

Each rollout has its own id (r-<UTC time>-<random>); the node lock's marker names it and its
operator (user@host, pid), and no other rollout passes it. Recipe steps run detached on the node
(<root>/var/lib/gpufleet/steps/<rollout>/), so they finish if gpufleet or the connection dies;
--resume waits for a step still running there and takes its recorded exit status.

A node whose lock another rollout holds is skipped (the holder named: rollout, user@host, pid),
not failed: the rest of the wave goes on.

A recipe step is never killed unless it sets `kill_after` (seconds, or `10m`): past step_timeout
gpufleet stops waiting and the step goes on there (--resume waits for it). --cancel stops the
running step of the rollout that did not finish (its process group on the node, journaled); its
nodes stay drained and locked for --resume or --abandon.

--wave --until-done runs wave after wave, each opened only when the one before is healthy (every
node ready, probed again after --soak); Ctrl-C between waves loses nothing (the same command goes
on), during a wave it leaves a rollout for --resume. --events FILE appends JSON Lines progress
events. [upgrade] on_failure / on_success run here per node, with GPUFLEET_NODE, GPUFLEET_ROLLOUT,
GPUFLEET_STATE, GPUFLEET_STEP, GPUFLEET_REASON in their environment.

Exit codes: 0 done (or nothing to do, or --dry-run; nodes skipped for another rollout's lock are
listed), 1 a node failed (the rollout stopped) or a wave is blocked by its canaries, 2 usage, config, inventory or read-only errors, or nodes that
cannot be planned (no recipe, no drain setting, …: every such node is listed, each with why).

Examples:
  gpufleet upgrade -i fleet.toml --canary --dry-run     the plan with the exact commands
  gpufleet upgrade -i fleet.toml --canary               then type the number of nodes to go
  gpufleet upgrade -i fleet.toml --wave --yes           the next wave, no prompt (scripts)
  gpufleet upgrade -i fleet.toml --resume               after a crash or Ctrl-C
  gpufleet upgrade -i fleet.toml --cancel               stop a hung step (nodes stay drained)
  gpufleet upgrade -i fleet.toml --wave --until-done --soak 10m --yes --events ev.jsonl";

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["canary", "wave", "resume", "abandon", "cancel"])))]
pub struct UpgradeArgs {
    #[command(flatten)]
    pub scan: ScanArgs,

    /// Upgrade the canary nodes (`canary = true`), at most max_unavailable of them
    #[arg(long)]
    pub canary: bool,

    /// Upgrade the next wave of the other nodes (every canary must be ready now, its gates passed)
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

    /// Stop the running recipe step of the rollout that did not finish, on its nodes (its
    /// process group is killed; journaled); the nodes stay drained and locked for `--resume`
    /// (which runs the step again) or `--abandon`. Works while that rollout's gpufleet runs
    #[arg(long, conflicts_with = "dry_run")]
    pub cancel: bool,

    /// With --wave: run wave after wave until every node is upgraded; each wave opens only when
    /// the one before is healthy (every node `ready` when probed again after the soak)
    #[arg(long, requires = "wave")]
    pub until_done: bool,

    /// With --until-done: wait this long between waves before checking the last one's health
    /// (`600`, `600s`, `10m`, `1h`) [default: 0]
    #[arg(long, value_name = "DURATION", requires = "until_done", value_parser = crate::duration::parse_secs)]
    pub soak: Option<u64>,

    /// With --until-done: ask before each next wave (a line on stdin: `y` goes on; anything
    /// else, or end of input, stops between waves)
    #[arg(long, requires = "until_done")]
    pub pause_after_each: bool,

    /// Append progress events to FILE as JSON Lines, one per journal entry and per wave:
    /// {"time", "rollout", "node", "step", "state", "detail"} (for CI and notifications)
    #[arg(long, value_name = "FILE")]
    pub events: Option<std::path::PathBuf>,

    /// Print the plan with the exact commands and change nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Do not ask for confirmation (for scripts)
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Nodes out of service at once, N or P% of the selected nodes (at least 1); nodes already
    /// drained or down and nodes locked by other rollouts count against it [default: 1, or the
    /// config's [upgrade] max_unavailable]
    #[arg(long, value_name = "N|P%")]
    pub max_unavailable: Option<crate::config::MaxUnavailable>,

    /// Upgrade nodes already out of service too (drained, down, cordoned or reserved by someone
    /// else; skipped by default): gpufleet never gives them back (no uncordon, RESUME or UNDRAIN)
    #[arg(long)]
    pub include_drained: bool,

    /// Refuse to run (read-only fleet view)
    #[arg(long)]
    pub read_only: bool,
}

fn print_plan(plan: &rollout::Plan, dry_run: bool, progress: &rollout::Progress) {
    for l in rollout::plan_lines_with(plan, dry_run, progress) {
        crate::outln!("{l}");
    }
    if let Some(l) = crate::fleet::rollout::done_before(plan, progress) {
        crate::outln!("  {}", crate::model::text::terminal_safe(&l));
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

mod waves;

/// Runs `gpufleet upgrade`; returns the exit code (see [`UPGRADE_HELP`]): `--cancel` and
/// `--until-done` in [`waves`], one rollout in [`run_once`].
pub fn run(s: &Settings, args: &UpgradeArgs) -> anyhow::Result<u8> {
    if args.cancel {
        return waves::cancel(s, args);
    }
    let events = match &args.events {
        Some(p) => Some(rollout::EventSink::open(p).map_err(anyhow::Error::msg)?),
        None => None,
    };
    if args.until_done {
        return waves::run(s, args, events);
    }
    run_once(s, args, events.as_ref())
}

/// One rollout; returns the exit code (see [`UPGRADE_HELP`]). Parses, prints and prompts; the
/// rollout itself is [`crate::fleet::rollout`]. `events`: where progress events go.
fn run_once(
    s: &Settings,
    args: &UpgradeArgs,
    events: Option<&rollout::EventSink>,
) -> anyhow::Result<u8> {
    use crate::fleet::rollout::{Abandoned, Choice, Lock, RolloutError};
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    let (rollouts, inv) = rollouts(s, args)?;
    let settings = s.probe(&args.scan)?;
    // Refused before anything else when read-only, dry run included: nothing may start.
    let permit = rollouts.permit()?;
    let mut session = rollouts.open(match (args.dry_run, args.abandon) {
        (true, _) => Lock::None,
        (false, true) => Lock::Abandon,
        (false, false) => Lock::Take,
    })?;
    if let Some(w) = session.skipped_lines.warning(&session.journal_path) {
        eprintln!("{w}");
    }
    if args.abandon {
        match session.abandon()? {
            Abandoned::Unreadable(id) => crate::outln!(
                "abandoned rollout {id}; its plan could not be read, so check its nodes by hand: `gpufleet locks` lists node locks, and drained nodes stay drained"
            ),
            Abandoned::Rollout {
                id,
                nodes,
                left_behind,
            } => {
                crate::outln!(
                    "abandoned rollout {id} ({}); check those nodes: drained ones stay drained",
                    nodes.join(", ")
                );
                for l in left_behind {
                    crate::outln!("  {l}");
                }
            }
        }
        return Ok(0);
    }
    let resumed = if args.resume {
        Some(session.resume()?)
    } else {
        session.check_finished()?;
        None
    };
    let (scan, selected) = s.scan(&args.scan, &inv, settings)?;
    let rt = crate::rt::build()?;
    let (plan, progress) = if let Some(resumed) = resumed {
        resumed
    } else {
        let mode = if args.canary {
            rollout::Mode::Canary
        } else {
            rollout::Mode::Wave
        };
        // The canaries of the whole inventory gate the waves, selected or not.
        let planned = rt.block_on(rollouts.prepare(
            &session,
            scan.clone(),
            &selected,
            Choice::Next(mode),
            |n| eprintln!("probing {n} node(s) before planning…"),
        ));
        match planned {
            Ok(p) => (p, Default::default()),
            // A wave blocked by its canaries is a state of the fleet, not a usage error: exit 1.
            Err(RolloutError::CanariesFirst(why)) => {
                eprintln!("gpufleet: {why}");
                return Ok(1);
            }
            // Every node that cannot be planned, one per line (node names and recipe names are
            // inventory text: each line escaped).
            Err(e) => {
                let lines: Vec<String> = e.to_string().lines().map(safe).collect();
                return Err(anyhow::Error::msg(lines.join("\n")));
            }
        }
    };
    print_plan(&plan, args.dry_run, &progress);
    if args.dry_run {
        return Ok(0);
    }
    if plan.nodes.is_empty() {
        crate::outln!("nothing to do");
        return Ok(0);
    }
    session.note(&plan.rollout);
    if !args.yes && !confirm(plan.nodes.len())? {
        eprintln!("gpufleet: not confirmed; nothing changed");
        return Ok(2);
    }
    let run = rollouts.start(
        session,
        permit,
        scan,
        plan,
        progress,
        args.resume,
        Box::new(move |l| eprintln!("gpufleet: {}", safe(l))),
    )?;
    if let Some(e) = events {
        run.set_events(e.clone());
    }
    let report = rt.block_on(run.finish());
    for (node, why) in report.skipped() {
        eprintln!("gpufleet: {} skipped: {}", safe(node), safe(why));
    }
    for (node, what) in report.failures() {
        eprintln!("gpufleet: {} {}", safe(node), safe(&what));
    }
    for (node, said) in report.kept() {
        eprintln!("gpufleet: {} {}", safe(node), safe(said));
    }
    let failed = report.failed();
    if report.still_down() > 0 {
        eprintln!(
            "gpufleet: a node still down is its owner's to bring back; then `gpufleet upgrade --resume` finds it back in service and finishes (or `--abandon`)"
        );
    }
    if failed > report.still_down() {
        eprintln!(
            "gpufleet: fix what stopped them, then `gpufleet upgrade --resume` goes on from there (or `--abandon`)"
        );
    }
    // Node output is in it (a failed step's excerpt): escaped here, once.
    crate::outln!("{}", safe(&report.summary));
    Ok(if failed == 0 { 0 } else { 1 })
}

/// The rollout use case for `args`: the inventory's nodes, the `[upgrade]` config with the
/// flags over it (`--max-unavailable`, `--include-drained`), the recipes, the state folder.
///
/// Errors: `--local`/`--root` (a rollout works over SSH), no inventory, an inventory or state
/// folder that cannot be read.
fn rollouts(
    s: &Settings,
    args: &UpgradeArgs,
) -> anyhow::Result<(crate::fleet::rollout::Rollouts, crate::inventory::Inventory)> {
    if args.scan.local || args.scan.root.is_some() {
        anyhow::bail!(
            "--local and --root do not apply to upgrades: a rollout works on an inventory's nodes over SSH"
        );
    }
    let inv = s
        .inventory(&args.scan)?
        .ok_or_else(|| anyhow::anyhow!("upgrade needs an inventory (-i FILE)"))?;
    let mut cfg = s.config.upgrade.clone();
    if let Some(m) = args.max_unavailable {
        cfg.max_unavailable = m;
    }
    cfg.include_drained = args.include_drained;
    let r = crate::fleet::rollout::Rollouts {
        nodes: inv.nodes.clone(),
        cfg,
        recipes: s.config.recipes.clone(),
        state_dir: s.state_dir()?,
        read_only: s.read_only(args.read_only, Some(&inv)),
        inventory: Some(inv.path.display().to_string()),
    };
    Ok((r, inv))
}
