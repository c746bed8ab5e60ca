//! The rollouts' bookkeeping: `gpufleet rollouts`, `journal`, `locks` and `unlock`.

use std::io::IsTerminal;
use std::sync::Arc;

use clap::Args;

use super::{ScanArgs, Settings};
use crate::probe::scan::now_rfc3339;

#[derive(Debug, Args)]
pub struct RolloutsArgs {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LocksArgs {
    #[command(flatten)]
    pub scan: ScanArgs,

    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// The node whose lock to break
    #[arg(value_name = "NODE")]
    pub node: String,

    /// The rollout that holds it (the lock is broken only if this rollout holds it)
    #[arg(long, value_name = "ID")]
    pub rollout: String,

    /// Do not ask for confirmation (for scripts)
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Refuse to run (read-only fleet view)
    #[arg(long)]
    pub read_only: bool,
}

#[derive(Debug, Args)]
pub struct JournalArgs {
    /// Only this rollout
    #[arg(long, value_name = "ID")]
    pub rollout: Option<String>,

    /// Only this node's entries (and its rollouts' start and end)
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,

    /// Print the raw JSON Lines
    #[arg(long)]
    pub jsonl: bool,
}

/// `gpufleet rollouts`: the journal's rollouts, newest last; exit 0.
pub fn rollouts(s: &Settings, args: &RolloutsArgs) -> anyhow::Result<u8> {
    use crate::actions::{journal, rollout};
    let state = s.state_dir()?;
    let path = state.join("journal.jsonl");
    let (entries, skipped) = journal::read(&path)?;
    if let Some(w) = skipped.warning(&path) {
        eprintln!("{w}");
    }
    let holder = rollout::local_holder(&state);
    let mut list = rollout::rollouts(&entries);
    for r in list.iter_mut().filter(|r| r.state == "unfinished") {
        r.state = match &holder {
            Some(h) if h.contains(&format!("rollout {},", r.id)) => "running".into(),
            _ => "interrupted".into(),
        };
    }
    if args.json {
        crate::outln!("{}", crate::model::text::json_string(&list, true)?);
        return Ok(0);
    }
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    for r in &list {
        let mode = match r.mode {
            Some(rollout::Mode::Canary) => "canary",
            Some(rollout::Mode::Wave) => "wave",
            None => "?",
        };
        crate::outln!(
            "{}  {:<6} {:<11} {}  {}  {}{}",
            r.id,
            mode,
            r.state,
            safe(&r.who),
            r.started,
            safe(&r.nodes.join(",")),
            r.ended
                .as_ref()
                .map_or(String::new(), |e| format!("  (ended {e})"))
        );
    }
    if list.is_empty() {
        eprintln!("gpufleet: no rollouts in {}", state.display());
    }
    Ok(0)
}

/// `gpufleet locks`: each selected node's lock marker, read over SSH; exit 1 when one could
/// not be read.
pub fn locks(s: &Settings, args: &LocksArgs) -> anyhow::Result<u8> {
    let settings = s.probe(&args.scan)?;
    let inv = s
        .inventory(&args.scan)?
        .ok_or_else(|| anyhow::anyhow!("locks needs an inventory (-i FILE)"))?;
    let (scan, selected) = s.scan(&args.scan, &inv, settings)?;
    let rt = crate::rt::build()?;
    // Read-only: each node's marker, at most `concurrency` nodes at once.
    let found = rt.block_on(async {
        let permits = Arc::new(tokio::sync::Semaphore::new(crate::rt::concurrency_for(
            scan.ssh.concurrency,
        )));
        let mut set = tokio::task::JoinSet::new();
        for (i, n) in selected.iter().cloned().enumerate() {
            let (scan, permits) = (scan.clone(), permits.clone());
            set.spawn(async move {
                let _p = permits.acquire_owned().await;
                (i, crate::actions::rollout::read_lock(&scan, &n).await)
            });
        }
        let mut found = Vec::new();
        while let Some(r) = set.join_next().await {
            found.extend(r.ok());
        }
        found.sort_by_key(|(i, _)| *i);
        found
    });
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    let mut failed = false;
    let mut json = Vec::new();
    for (i, r) in found {
        let name = &selected[i].name;
        match r {
            Ok(None) => {
                json.push(serde_json::json!({"node": name, "locked": false}));
                crate::outln!("{}  free", safe(name));
            }
            Ok(Some(o)) => {
                crate::outln!(
                    "{}  locked by rollout {} ({}, since {})",
                    safe(name),
                    safe(&o.rollout),
                    safe(o.operator.as_deref().unwrap_or("operator unknown")),
                    safe(o.since.as_deref().unwrap_or("unknown"))
                );
                json.push(serde_json::json!({"node": name, "locked": true, "rollout": o.rollout, "operator": o.operator, "since": o.since}));
            }
            Err(e) => {
                failed = true;
                crate::outln!("{}  unknown: {}", safe(name), safe(&e));
                json.push(serde_json::json!({"node": name, "error": e}));
            }
        }
    }
    if args.json {
        crate::outln!("{}", crate::model::text::json_string(&json, true)?);
    }
    Ok(if failed { 1 } else { 0 })
}

/// `gpufleet unlock NODE --rollout ID`: breaks that rollout's lock on the node after
/// confirmation, journaled; exit 0 broken or not locked, 1 held by another or failed, 2 not
/// confirmed.
pub fn unlock(s: &Settings, args: &UnlockArgs) -> anyhow::Result<u8> {
    let config = &s.config;
    use crate::actions::{journal, permit::WritePermit, rollout};
    let scan_args = ScanArgs {
        select: super::SelectArgs::one(&args.node),
        ..ScanArgs::default()
    };
    let inv = s
        .inventory(&scan_args)?
        .ok_or_else(|| anyhow::anyhow!("unlock needs an inventory (-i FILE)"))?;
    let permit = WritePermit::new(s.read_only(args.read_only, Some(&inv)))?;
    let node = inv
        .nodes
        .iter()
        .find(|n| n.name == args.node)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("{} is not in {}", args.node, inv.path.display()))?;
    let state = s.state_dir()?;
    // Not while a rollout of this state folder runs (it may hold that very lock).
    let _local = rollout::lock_local(&state)?;
    let settings = s.probe(&scan_args)?;
    let (scan, _) = s.scan(&scan_args, &inv, settings)?;
    let rt = crate::rt::build()?;
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    let owner = rt
        .block_on(rollout::read_lock(&scan, &node))
        .map_err(anyhow::Error::msg)?;
    let Some(owner) = owner else {
        crate::outln!("{}: not locked; nothing to do", safe(&node.name));
        return Ok(0);
    };
    if owner.rollout != args.rollout {
        eprintln!(
            "gpufleet: {} is locked by rollout {}, not {}: nothing broken",
            safe(&node.name),
            safe(&owner.rollout),
            safe(&args.rollout)
        );
        return Ok(1);
    }
    let operator = owner.operator.clone().unwrap_or_default();
    // A holder on this machine whose process still runs is not broken.
    let me = journal::who();
    let host = |w: &str| {
        w.split_whitespace()
            .next()?
            .split_once('@')
            .map(|(_, h)| h.to_string())
    };
    if let (Some(h), Some(pid)) = (
        host(&operator),
        operator
            .split_whitespace()
            .last()
            .and_then(|p| p.parse::<u32>().ok()),
    ) && Some(h) == host(&me)
        && std::path::Path::new(&format!("/proc/{pid}")).exists()
    {
        anyhow::bail!(
            "not broken: rollout {} still runs here ({}); stop it first",
            args.rollout,
            safe(&operator)
        );
    }
    crate::outln!(
        "{} is locked by rollout {} ({}, since {}). Breaking the lock of a rollout that still runs lets two rollouts meet on the node.",
        safe(&node.name),
        safe(&owner.rollout),
        safe(if operator.is_empty() {
            "operator unknown"
        } else {
            &operator
        }),
        safe(owner.since.as_deref().unwrap_or("unknown"))
    );
    if !args.yes {
        use std::io::BufRead;
        if !std::io::stdin().is_terminal() {
            anyhow::bail!("not a terminal: pass --yes to confirm");
        }
        eprint!("Type the node's name to break its lock: ");
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if line.trim() != node.name {
            eprintln!("gpufleet: not confirmed; nothing changed");
            return Ok(2);
        }
    }
    let sudo = node
        .recipe
        .as_ref()
        .and_then(|r| config.recipes.get(r))
        .is_some_and(|r| r.sudo);
    let mut j = journal::Journal::open(&state)?;
    let entry = |phase, outcome: &str| journal::Entry {
        ts: now_rfc3339(),
        who: me.clone(),
        rollout: args.rollout.clone(),
        node: node.name.clone(),
        step: "break-lock".into(),
        seq: None,
        phase,
        command: crate::actions::node_side::unlock_command(&node.root, &args.rollout),
        outcome: outcome.to_string(),
    };
    j.append(&entry(
        journal::Phase::Start,
        &format!("held by {operator}"),
    ))?;
    match rt.block_on(rollout::break_lock(
        &permit,
        &scan,
        &node,
        &args.rollout,
        sudo,
    )) {
        Ok(said) => {
            j.append(&entry(journal::Phase::Done, &said))?;
            crate::outln!("{}: {said}", safe(&node.name));
            Ok(0)
        }
        Err(e) => {
            j.append(&entry(journal::Phase::Failed, &e))?;
            eprintln!("gpufleet: {}: {}", safe(&node.name), safe(&e));
            Ok(1)
        }
    }
}

/// `gpufleet journal`: the journal's entries, filtered by rollout or node; exit 0.
pub fn journal(s: &Settings, args: &JournalArgs) -> anyhow::Result<u8> {
    let path = s.state_dir()?.join("journal.jsonl");
    let (entries, skipped_lines) = crate::actions::journal::read(&path)?;
    if let Some(w) = skipped_lines.warning(&path) {
        eprintln!("{w}");
    }
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    // With --node: the rollouts that touched that node.
    let node_rollouts: std::collections::HashSet<&str> = entries
        .iter()
        .filter(|e| args.node.as_ref().is_some_and(|n| *n == e.node))
        .map(|e| e.rollout.as_str())
        .collect();
    let mut shown = 0;
    for e in entries
        .iter()
        .filter(|e| args.rollout.as_ref().is_none_or(|r| *r == e.rollout))
        .filter(|e| {
            args.node.as_ref().is_none_or(|n| {
                *n == e.node || (e.node.is_empty() && node_rollouts.contains(e.rollout.as_str()))
            })
        })
    {
        shown += 1;
        if args.jsonl {
            crate::outln!("{}", crate::model::text::json_string(e, false)?);
            continue;
        }
        let phase = format!("{:?}", e.phase).to_lowercase();
        let node = if e.node.is_empty() { "-" } else { &e.node };
        // The rollout's start holds its whole plan (for --resume): show the nodes only.
        let outcome: String =
            match serde_json::from_str::<crate::actions::rollout::Plan>(&e.outcome) {
                Ok(p) if e.step == "rollout" => {
                    let nodes: Vec<&str> = p.nodes.iter().map(|n| n.node.as_str()).collect();
                    format!("plan: {}", nodes.join(", "))
                }
                _ => e.outcome.chars().take(160).collect(),
            };
        crate::outln!(
            "{}  {}  {}  {:<24} {:<20} {:<6} {}",
            e.ts,
            safe(&e.who),
            e.rollout,
            safe(node),
            safe(&e.step),
            phase,
            safe(&outcome)
        );
    }
    if shown == 0 {
        match (&args.rollout, &args.node) {
            (Some(r), _) => eprintln!("gpufleet: no rollout {r} in {}", path.display()),
            (None, Some(n)) => eprintln!("gpufleet: no entries for node {n} in {}", path.display()),
            (None, None) => eprintln!("gpufleet: no journal entries in {}", path.display()),
        }
    }
    Ok(0)
}
