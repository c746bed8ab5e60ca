//! Rollouts: canaries first, then waves no larger than max-unavailable. Per node: lock →
//! drain → recipe steps → (reboot → wait for SSH) → re-probe → gates → uncordon → unlock.
//!
//! The plan is typed ([`Step`]) and carries every command it runs: the plan the operator
//! confirms is the plan the executor runs and the journal keeps (whole, in the rollout's
//! start entry); nothing is derived again from the inventory (only how to reach a node is
//! read from it). Every step is journaled before it runs; a failed step or gate stops that
//! node and leaves it drained; a node task that panics is that node's failure; `--resume`
//! continues a rollout from its journal without repeating completed steps, and attaches to a
//! recipe step still running on the node (recipe steps run detached: [`node_side`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::drain::{self, Local};
use super::journal::{Entry, Journal, Phase, who};
use super::node_side::{self, StepFiles, StepState};
use super::permit::WritePermit;
use crate::config::{Gate, Recipe, UpgradeConfig};
use crate::inventory::{DrainBackend, Node};
use crate::model::report::NodeReport;
use crate::model::{Code, NodeStatus, Severity};
use crate::probe::scan::{Scan, now_rfc3339};
use crate::probe::ssh;

/// Which part of the fleet a rollout takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Canary nodes (`canary = true`), at most max-unavailable of them.
    Canary,
    /// The next wave of other nodes, once every canary is done.
    Wave,
}

/// Where a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Where {
    /// On this machine (scheduler commands).
    Here,
    /// On the node, over SSH.
    Node,
    /// gpufleet itself (wait, probe, gates).
    Gpufleet,
}

/// How a drain's status command says "drained".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DrainCheck {
    /// `sinfo -o %T` says `drained`.
    Slurm,
    /// `.spec.unschedulable` is `true`.
    Kubernetes,
    /// The command succeeds.
    ExitStatus,
}

impl DrainCheck {
    fn of(backend: DrainBackend) -> DrainCheck {
        match backend {
            DrainBackend::Slurm => DrainCheck::Slurm,
            DrainBackend::Kubernetes => DrainCheck::Kubernetes,
            _ => DrainCheck::ExitStatus,
        }
    }

    fn drained(self, output: &str, success: bool) -> bool {
        match self {
            DrainCheck::Slurm => drain::slurm_drained(output),
            DrainCheck::Kubernetes => success && output.trim() == "true",
            DrainCheck::ExitStatus => success,
        }
    }
}

/// One planned step, with everything it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Step {
    /// Take the node lock (`<root>/var/lib/gpufleet/rollout.lock`, naming the rollout and the
    /// operator); a lock of a rollout in `takeover` (abandoned ones) is taken over.
    Lock {
        root: String,
        sudo: bool,
        takeover: Vec<String>,
    },
    /// Take the node out of service here; then run `until` until `check` says drained.
    Drain {
        commands: Vec<Local>,
        until: Option<Local>,
        check: DrainCheck,
        timeout_s: u64,
    },
    /// One recipe step, run detached on the node ([`node_side::launch_command`]).
    Recipe {
        name: String,
        /// The command line, with `{node}`, `{root}` and `{branch}` replaced.
        run: String,
        /// The step reboots the node: the node going away is its success.
        reboot: bool,
        sudo: bool,
        root: String,
        timeout_s: u64,
    },
    /// Wait for SSH after the reboot step `after`.
    WaitSsh { after: String, timeout_s: u64 },
    /// The read-only probe, again.
    Reprobe,
    /// These gates, on the re-probe's report.
    Gates { gates: Vec<Gate> },
    /// Give the node back to the scheduler.
    Uncordon {
        commands: Vec<Local>,
        timeout_s: u64,
    },
    /// Give the node lock back (only if this rollout holds it).
    Unlock { root: String, sudo: bool },
}

impl Step {
    /// The step's label in the journal and the plan: `lock`, `drain`, `step:<name>`,
    /// `wait-ssh:<name>`, `reprobe`, `gates`, `uncordon`, `unlock`.
    pub fn label(&self) -> String {
        match self {
            Step::Lock { .. } => "lock".into(),
            Step::Drain { .. } => "drain".into(),
            Step::Recipe { name, .. } => format!("step:{name}"),
            Step::WaitSsh { after, .. } => format!("wait-ssh:{after}"),
            Step::Reprobe => "reprobe".into(),
            Step::Gates { .. } => "gates".into(),
            Step::Uncordon { .. } => "uncordon".into(),
            Step::Unlock { .. } => "unlock".into(),
        }
    }

    pub fn at(&self) -> Where {
        match self {
            Step::Drain { .. } | Step::Uncordon { .. } => Where::Here,
            Step::Lock { .. } | Step::Recipe { .. } | Step::Unlock { .. } => Where::Node,
            Step::WaitSsh { .. } | Step::Reprobe | Step::Gates { .. } => Where::Gpufleet,
        }
    }

    fn sudo(&self) -> bool {
        match self {
            Step::Lock { sudo, .. } | Step::Recipe { sudo, .. } | Step::Unlock { sudo, .. } => {
                *sudo
            }
            _ => false,
        }
    }

    /// What the step runs, for people: the exact commands of the drain, the recipe and the
    /// uncordon; what gpufleet does for the others.
    pub fn shown(&self, rollout: &str) -> Vec<String> {
        match self {
            Step::Lock { root, takeover, .. } => {
                let mut s = format!(
                    "take the node lock {}/{} for rollout {rollout} (atomic mkdir; its marker names the rollout and the operator; another rollout's lock stops this node)",
                    root.trim_end_matches('/'),
                    node_side::MARKER
                );
                if !takeover.is_empty() {
                    s.push_str(&format!(
                        "; takes over the lock of abandoned rollout(s) {}",
                        takeover.join(", ")
                    ));
                }
                vec![s]
            }
            Step::Drain {
                commands, until, ..
            } => {
                let mut v: Vec<String> = commands.iter().map(|c| c.to_string()).collect();
                v.extend(until.iter().map(|c| format!("until drained: {c}")));
                v
            }
            Step::Recipe { run, .. } => vec![run.clone()],
            Step::WaitSsh { timeout_s, .. } => vec![format!("wait up to {timeout_s} s for SSH")],
            Step::Reprobe => vec!["the read-only probe".into()],
            Step::Gates { gates } => {
                vec![
                    gates
                        .iter()
                        .map(|g| g.name())
                        .collect::<Vec<_>>()
                        .join(", "),
                ]
            }
            Step::Uncordon { commands, .. } => commands.iter().map(|c| c.to_string()).collect(),
            Step::Unlock { root, .. } => vec![format!(
                "remove the node lock {}/{} if rollout {rollout} holds it",
                root.trim_end_matches('/'),
                node_side::MARKER
            )],
        }
    }

    /// The exact command for the journal (`operator`: `user@host pid N`).
    fn journal_command(&self, rollout: &str, seq: usize, operator: &str) -> String {
        match self {
            Step::Lock { root, takeover, .. } => {
                node_side::lock_command(root, rollout, operator, takeover)
            }
            Step::Unlock { root, .. } => node_side::unlock_command(root, rollout),
            Step::Recipe {
                name, run, root, ..
            } => format!(
                "{run}    (detached on the node: {}.{{out,rc}})",
                StepFiles::new(root, rollout, seq, name).prefix
            ),
            _ => self.shown(rollout).join(" && "),
        }
    }
}

/// One node's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePlan {
    pub node: String,
    pub steps: Vec<Step>,
    /// Where the node's next boot stands before the upgrade (the boot kernel and whether it
    /// has an nvidia.ko), for the plan shown before anything runs.
    #[serde(default)]
    pub next_boot: Option<String>,
}

impl NodePlan {
    /// Whether a node stopped at step `seq` has been drained by this rollout.
    pub fn drained_at(&self, seq: usize) -> bool {
        self.steps
            .iter()
            .position(|s| matches!(s, Step::Drain { .. }))
            .is_some_and(|d| seq >= d)
    }
}

/// Why a GPU Operator-managed node is not upgraded by a host recipe, and what to change
/// instead (docs/domain.md, "GPU Operator-managed nodes").
pub const OPERATOR_SKIP: &str = "the driver is managed by the GPU Operator: host recipes do not change it; set driver.kernelModuleType: open in the ClusterPolicy (or the NVIDIADriver resource), and driver.rdma.enabled: false to drop nvidia-peermem";

/// Whether a report says the GPU Operator manages the node's driver.
pub fn operator_managed(r: &NodeReport) -> bool {
    r.driver.as_ref().and_then(|d| d.managed_by.as_deref()) == Some("gpu-operator")
}

/// The next boot in words, from a report: `boot kernel 5.15.0-124-generic (no nvidia.ko: the
/// next reboot comes up without the driver)`.
pub fn next_boot_line(r: &NodeReport) -> Option<String> {
    let boot = r.boot.as_ref()?;
    if boot.kernels.as_ref().is_some_and(|k| k.is_empty()) {
        return Some(
            "next boot: no kernel under /lib/modules, no host nvidia.ko to check (n/a)".into(),
        );
    }
    let target = boot.boot_kernel.as_deref().unwrap_or("unknown");
    let state = match r.next_boot_driver() {
        Some("ok") => "has an nvidia.ko",
        Some("missing") => "has no nvidia.ko: the next reboot comes up without the driver",
        Some(_) => "no host nvidia.ko to check (n/a)",
        None => "nvidia.ko unknown",
    };
    Some(format!(
        "next boot: kernel {target} (running {}), {state}",
        boot.running.as_deref().unwrap_or("unknown")
    ))
}

/// A rollout: one wave of nodes with their steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub rollout: String,
    pub mode: Mode,
    pub nodes: Vec<NodePlan>,
    /// Nodes left out, with why (already ready, blocked, not reachable, done before).
    #[serde(default)]
    pub skipped: Vec<(String, String)>,
}

fn quote(s: &str) -> String {
    drain::quote_arg(s)
}

/// The loaded driver's major version (`535` of 535.183.01), for `{branch}`.
pub fn branch(report: &NodeReport) -> Option<String> {
    let v = report.driver.as_ref()?.version.as_ref()?;
    v.split('.').next().map(str::to_string)
}

fn expand(run: &str, node: &Node, report: &NodeReport) -> Result<String, String> {
    if run.contains("{branch}") && branch(report).is_none() {
        return Err(format!(
            "{}: the recipe uses {{branch}} but the driver version is unknown",
            node.name
        ));
    }
    Ok(run
        .replace("{node}", &quote(&node.name))
        .replace("{root}", &quote(&node.root))
        .replace("{branch}", &branch(report).unwrap_or_default()))
}

/// The steps of one node (pure).
pub fn node_plan(
    node: &Node,
    report: &NodeReport,
    recipe: &Recipe,
    cfg: &UpgradeConfig,
    rollout: &str,
    takeover: &[String],
) -> Result<NodePlan, String> {
    let reason = format!("gpufleet rollout {rollout}");
    let timeout = Duration::from_secs(cfg.drain_timeout);
    let root = node.root.clone();
    let mut steps = vec![Step::Lock {
        root: root.clone(),
        sudo: recipe.sudo,
        takeover: takeover.to_vec(),
    }];
    let drains = node.drain.backend != DrainBackend::None;
    if drains {
        steps.push(Step::Drain {
            commands: drain::drain_commands(&node.drain, node, timeout, &reason),
            until: drain::status_command(&node.drain, node),
            check: DrainCheck::of(node.drain.backend),
            timeout_s: cfg.drain_timeout,
        });
    }
    for s in &recipe.steps {
        steps.push(Step::Recipe {
            name: s.name.clone(),
            run: expand(&s.run, node, report)?,
            reboot: s.reboot,
            sudo: recipe.sudo,
            root: root.clone(),
            timeout_s: cfg.step_timeout,
        });
        if s.reboot {
            steps.push(Step::WaitSsh {
                after: s.name.clone(),
                timeout_s: cfg.reboot_timeout,
            });
        }
    }
    steps.push(Step::Reprobe);
    steps.push(Step::Gates {
        gates: cfg.gates.clone(),
    });
    if drains {
        steps.push(Step::Uncordon {
            commands: drain::uncordon_commands(&node.drain, node),
            timeout_s: cfg.drain_timeout,
        });
    }
    steps.push(Step::Unlock {
        root,
        sudo: recipe.sudo,
    });
    Ok(NodePlan {
        node: node.name.clone(),
        steps,
        next_boot: next_boot_line(report),
    })
}

/// The recipe the inventory names for `n`.
fn recipe_for<'a>(n: &Node, recipes: &'a BTreeMap<String, Recipe>) -> Result<&'a Recipe, String> {
    let name = n
        .recipe
        .as_ref()
        .ok_or_else(|| format!("{}: no `recipe` for this node in the inventory", n.name))?;
    recipes.get(name).ok_or_else(|| {
        format!(
            "{}: recipe `{name}` is not in the config's [recipes]",
            n.name
        )
    })
}

/// Nodes whose upgrade finished (their `unlock` is done) in any rollout of the journal.
pub fn finished_nodes(journal: &[Entry]) -> HashSet<String> {
    journal
        .iter()
        .filter(|e| e.step == "unlock" && e.phase == Phase::Done)
        .map(|e| e.node.clone())
        .collect()
}

/// Plans the next rollout of `mode` (pure). `nodes` pairs each selected node with a fresh
/// report. Only `migrate` nodes are upgraded; others are skipped with the reason.
pub fn plan(
    mode: Mode,
    nodes: &[(Node, NodeReport)],
    canaries: &[(String, Option<NodeStatus>)],
    journal: &[Entry],
    cfg: &UpgradeConfig,
    recipes: &BTreeMap<String, Recipe>,
    rollout: &str,
) -> Result<Plan, String> {
    let finished = finished_nodes(journal);
    if mode == Mode::Wave {
        canaries_done(canaries, &finished)?;
    }
    let mut skipped = Vec::new();
    let mut chosen = Vec::new();
    for (n, r) in nodes
        .iter()
        .filter(|(n, _)| n.canary == (mode == Mode::Canary))
    {
        if finished.contains(&n.name) {
            skipped.push((n.name.clone(), "upgraded by an earlier rollout".into()));
        } else if operator_managed(r) {
            skipped.push((n.name.clone(), OPERATOR_SKIP.into()));
        } else if r.status != NodeStatus::Migrate {
            skipped.push((
                n.name.clone(),
                format!("status {}: {}", r.status, r.status.meaning()),
            ));
        } else if chosen.len() >= cfg.max_unavailable.max(1) {
            skipped.push((n.name.clone(), "in a later wave (max_unavailable)".into()));
        } else {
            chosen.push(node_plan(
                n,
                r,
                recipe_for(n, recipes)?,
                cfg,
                rollout,
                &abandoned(journal),
            )?);
        }
    }
    Ok(Plan {
        rollout: rollout.to_string(),
        mode,
        nodes: chosen,
        skipped,
    })
}

/// Every canary of the inventory (`canaries`: name and current status) must be done before any
/// other node: upgraded by a rollout (journal) or `ready` now. A canary that failed, is
/// unreachable or was never upgraded blocks the waves.
pub fn canaries_done(
    canaries: &[(String, Option<NodeStatus>)],
    finished: &HashSet<String>,
) -> Result<(), String> {
    let pending: Vec<String> = canaries
        .iter()
        .filter(|(n, st)| !finished.contains(n) && *st != Some(NodeStatus::Ready))
        .map(|(n, st)| match st {
            Some(st) => format!("{n} ({st})"),
            None => format!("{n} (not scanned)"),
        })
        .collect();
    if pending.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "canaries first: {} not upgraded and ready yet; run `gpufleet upgrade --canary`",
            pending.join(", ")
        ))
    }
}

/// Plans an upgrade of `chosen` (the TUI's marked nodes), as one wave: nodes that cannot be
/// upgraded (not `migrate`, managed by the GPU Operator, upgraded before) are skipped with the
/// reason, as the CLI does; of the others, non-canary nodes only once every canary of
/// `canaries` is done, canaries and other nodes never together, at most max_unavailable.
pub fn plan_selected(
    chosen: &[(Node, NodeReport)],
    canaries: &[(String, Option<NodeStatus>)],
    journal: &[Entry],
    cfg: &UpgradeConfig,
    recipes: &BTreeMap<String, Recipe>,
    rollout: &str,
) -> Result<Plan, String> {
    let finished = finished_nodes(journal);
    let mut skipped = Vec::new();
    let mut eligible = Vec::new();
    for (n, r) in chosen {
        if finished.contains(&n.name) {
            skipped.push((n.name.clone(), "upgraded by an earlier rollout".into()));
        } else if operator_managed(r) {
            skipped.push((n.name.clone(), OPERATOR_SKIP.into()));
        } else if r.status != NodeStatus::Migrate {
            skipped.push((
                n.name.clone(),
                format!(
                    "status {}: {}; only migrate nodes are upgraded",
                    r.status,
                    r.status.meaning()
                ),
            ));
        } else {
            eligible.push((n, r));
        }
    }
    if eligible.is_empty() {
        let why: Vec<String> = skipped.iter().map(|(n, w)| format!("{n}: {w}")).collect();
        return Err(format!("nothing to upgrade: {}", why.join("; ")));
    }
    let with_canary = eligible.iter().any(|(n, _)| n.canary);
    let with_other = eligible.iter().any(|(n, _)| !n.canary);
    if with_canary && with_other {
        return Err("canaries go alone: mark only canaries, or only other nodes".into());
    }
    if with_other {
        canaries_done(canaries, &finished)?;
    }
    if eligible.len() > cfg.max_unavailable.max(1) {
        return Err(format!(
            "{} nodes chosen, more than max_unavailable ({}): choose fewer",
            eligible.len(),
            cfg.max_unavailable
        ));
    }
    let mut nodes = Vec::new();
    for (n, r) in &eligible {
        nodes.push(node_plan(
            n,
            r,
            recipe_for(n, recipes)?,
            cfg,
            rollout,
            &abandoned(journal),
        )?);
    }
    Ok(Plan {
        rollout: rollout.to_string(),
        mode: if with_canary {
            Mode::Canary
        } else {
            Mode::Wave
        },
        nodes,
        skipped,
    })
}

/// The plan as lines for people: each node, its steps with where they run, and every exact
/// command (terminal-safe), then the skipped nodes.
pub fn plan_lines(plan: &Plan, dry_run: bool) -> Vec<String> {
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    let mode = match plan.mode {
        Mode::Canary => "canary",
        Mode::Wave => "wave",
    };
    let mut out = vec![format!(
        "rollout {} ({mode}): {} node(s){}",
        plan.rollout,
        plan.nodes.len(),
        if dry_run {
            " — dry run, nothing will change"
        } else {
            ""
        }
    )];
    for n in &plan.nodes {
        out.push(format!("  {}", safe(&n.node)));
        if let Some(b) = &n.next_boot {
            out.push(format!("    ({})", safe(b)));
        }
        for s in &n.steps {
            let at = match s.at() {
                Where::Here => "here",
                Where::Node => "node",
                Where::Gpufleet => "gpufleet",
            };
            let mut notes = Vec::new();
            if s.sudo() {
                notes.push("sudo -n");
            }
            if let Step::Recipe { reboot, .. } = s {
                notes.push("detached, one step at a time: flock <root>/var/lib/gpufleet/step.lock");
                if *reboot {
                    notes.push("reboots: the node going away is its success");
                }
            }
            let notes: String = notes.iter().map(|n| format!("; {n}")).collect();
            out.push(format!("    {:<22} [{at}{notes}]", safe(&s.label())));
            out.extend(
                s.shown(&plan.rollout)
                    .iter()
                    .map(|c| format!("        {}", safe(c))),
            );
        }
    }
    out.extend(
        plan.skipped
            .iter()
            .map(|(n, why)| format!("  skipped {}: {}", safe(n), safe(why))),
    );
    out
}

/// Gate results for a re-probed node: the gates that failed, each with why in words
/// (`no-peermem: nvidia-peermem is loaded and configured at boot`).
pub fn check_gates(report: &NodeReport, gates: &[Gate]) -> Vec<String> {
    let mut failed = Vec::new();
    let smi_codes = [
        Code::DriverLibraryMismatch,
        Code::NvidiaSmiFailed,
        Code::NvidiaSmiTimeout,
        Code::GpuNotInitialized,
    ];
    for g in gates {
        let why = match g {
            Gate::OpenModule => match report.driver.as_ref().map(|d| d.flavor.as_str()) {
                Some("open") => None,
                Some("proprietary") => {
                    Some("the proprietary kernel module is loaded, not the open one".into())
                }
                Some("none") => Some("no NVIDIA kernel module is loaded".into()),
                _ => Some("which NVIDIA kernel module is loaded is unknown".into()),
            },
            Gate::NoPeermem => {
                let p = report.peermem.as_ref();
                match (p.and_then(|p| p.loaded), p.and_then(|p| p.configured)) {
                    (Some(false), Some(false)) => None,
                    (Some(true), Some(true)) => {
                        Some("nvidia-peermem is loaded and configured at boot".into())
                    }
                    (Some(true), Some(false)) => {
                        Some("nvidia-peermem is loaded (not configured at boot)".into())
                    }
                    (Some(true), None) => Some(
                        "nvidia-peermem is loaded (whether it is configured at boot is unknown)"
                            .into(),
                    ),
                    (Some(false), Some(true)) => {
                        Some("nvidia-peermem is configured at boot (not loaded now)".into())
                    }
                    (None, Some(true)) => Some(
                        "nvidia-peermem is configured at boot (whether it is loaded is unknown)"
                            .into(),
                    ),
                    _ => Some(
                        "whether nvidia-peermem is loaded or configured at boot is unknown".into(),
                    ),
                }
            }
            Gate::NvidiaSmiHealthy => {
                let bad: Vec<&str> = report
                    .reasons
                    .iter()
                    .filter(|r| smi_codes.contains(&r.code))
                    .map(|r| r.code.as_str())
                    .collect();
                let answered = report
                    .driver
                    .as_ref()
                    .and_then(|d| d.userspace_version.as_ref())
                    .is_some();
                if !bad.is_empty() {
                    Some(format!("nvidia-smi is not healthy: {}", bad.join(", ")))
                } else if !answered {
                    Some("nvidia-smi did not answer".into())
                } else {
                    None
                }
            }
            Gate::DmabufKernel => {
                // Only where GPUDirect RDMA applies: a node without an RDMA device or
                // nvidia-peermem is not failed for its kernel's DMA-BUF support.
                let no_rdma = report.reasons.iter().any(|r| r.code == Code::NoRdmaDevice);
                match report.dma_buf.as_ref().and_then(|d| d.kernel_support) {
                    _ if no_rdma => None,
                    Some(true) => None,
                    Some(false) => Some("the kernel has no DMA-BUF support".into()),
                    None => Some("whether the kernel supports DMA-BUF is unknown".into()),
                }
            }
            Gate::NextBootHasDriver => match report.next_boot_driver() {
                Some("ok") | Some("n/a") => None,
                Some(_) => Some(
                    next_boot_line(report)
                        .unwrap_or_else(|| "the next boot has no nvidia.ko".into()),
                ),
                None => Some("the next boot kernel or its nvidia.ko is unknown".into()),
            },
            Gate::NoErrors => {
                let errs: Vec<&str> = report
                    .reasons
                    .iter()
                    .filter(|r| r.severity == Severity::Error)
                    .map(|r| r.code.as_str())
                    .collect();
                (!errs.is_empty()).then(|| format!("error reasons: {}", errs.join(", ")))
            }
        };
        if let Some(w) = why {
            failed.push(format!("{}: {w}", g.name()));
        }
    }
    failed
}

/// How far a rollout got, per (node, step number): the last phase the journal says.
pub type Progress = HashMap<(String, usize), Phase>;

/// Runs plans: owns the journal and the write permit.
pub struct Executor {
    permit: WritePermit,
    journal: Mutex<Journal>,
    scan: Arc<Scan>,
    /// Failed nodes tolerated before no node starts another step.
    max_failures: usize,
    /// Where an earlier run of this rollout stopped (from the journal, on resume): done steps
    /// are skipped, a recipe step that started is attached to, a failed one retried.
    progress: Progress,
    /// Progress lines for the operator.
    log: Box<dyn Fn(&str) + Send + Sync>,
    /// Nodes failed so far in this run; past `max_failures` no node starts another step.
    failures: AtomicUsize,
    /// `user@host pid N`, written into the node locks.
    operator: String,
    /// Each node's current step (number and label), for a task that panics.
    at: Mutex<HashMap<String, (usize, String)>>,
}

/// Why a node stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The step's number in the node's plan, where known.
    pub seq: Option<usize>,
    /// The step's label.
    pub step: String,
    pub why: String,
}

/// How one node's rollout ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOutcome {
    pub node: String,
    /// `None` on success; else where it stopped and why (the node stays drained).
    pub failure: Option<Failure>,
}

fn excerpt(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let s = s.trim();
    let tail: String = s
        .chars()
        .rev()
        .take(400)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    crate::model::text::terminal_safe(&tail).into_owned()
}

/// `user@host pid N`: who runs this process.
pub fn operator() -> String {
    format!("{} pid {}", who(), std::process::id())
}

fn with_sudo(command: &str, sudo: bool) -> String {
    if sudo {
        format!("sudo -n sh -c {}", quote(command))
    } else {
        command.to_string()
    }
}

async fn exec(
    session: &ssh::Session,
    command: &str,
    sudo: bool,
    timeout: Duration,
) -> Result<ssh::ExecOutput, ssh::Unreachable> {
    session
        .exec(
            &with_sudo(command, sudo),
            b"",
            tokio::time::Instant::now() + timeout,
            1 << 20,
            true,
        )
        .await
}

/// Runs a write-side `command` on `node` over a fresh SSH connection (under `sudo -n` when
/// `sudo`). Needs the write permit.
pub async fn node_write(
    _permit: &WritePermit,
    scan: &Scan,
    node: &Node,
    command: &str,
    sudo: bool,
    timeout: Duration,
) -> Result<ssh::ExecOutput, ssh::Unreachable> {
    let session = ssh::connect(node, &scan.ssh, scan.keys.clone()).await?;
    let out = exec(&session, command, sudo, timeout).await;
    session.close().await;
    out
}

/// Starts (or attaches to) a recipe step on the node: a write. Needs the write permit.
pub async fn launch_step(
    _permit: &WritePermit,
    session: &ssh::Session,
    launch: &str,
    sudo: bool,
) -> Result<ssh::ExecOutput, ssh::Unreachable> {
    exec(session, launch, sudo, Duration::from_secs(60)).await
}

/// A read-only command on `node` (no permit: it changes nothing).
async fn node_read(
    scan: &Scan,
    node: &Node,
    command: &str,
    timeout: Duration,
) -> Result<ssh::ExecOutput, ssh::Unreachable> {
    let session = ssh::connect(node, &scan.ssh, scan.keys.clone()).await?;
    let out = exec(&session, command, false, timeout).await;
    session.close().await;
    out
}

fn exit_words(o: &ssh::ExecOutput) -> String {
    o.describe_exit()
        .unwrap_or_else(|| "cut off (no exit status)".to_string())
}

/// The text of a task's panic.
fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

/// Test hook (debug builds only, for tests/upgrade.rs): `GPUFLEET_TEST_PANIC_NODE=NODE` (or
/// `NODE@STEP`, default step `gates`) makes that node's task panic once that step's start is
/// journaled, as a bug in gpufleet would.
#[cfg(debug_assertions)]
fn test_panic_hook(node: &str, label: &str) {
    if let Ok(v) = std::env::var("GPUFLEET_TEST_PANIC_NODE") {
        let (n, s) = v.split_once('@').unwrap_or((v.as_str(), "gates"));
        if n == node && s == label {
            panic!("GPUFLEET_TEST_PANIC_NODE: a test panic in {node} at {label}");
        }
    }
}

impl Executor {
    pub fn new(
        permit: WritePermit,
        journal: Journal,
        scan: Arc<Scan>,
        cfg: &UpgradeConfig,
        progress: Progress,
        log: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Executor {
        Executor {
            permit,
            journal: Mutex::new(journal),
            scan,
            max_failures: cfg.max_failures,
            progress,
            log,
            failures: AtomicUsize::new(0),
            operator: operator(),
            at: Mutex::new(HashMap::new()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        rollout: &str,
        node: &str,
        seq: Option<usize>,
        step: &str,
        phase: Phase,
        command: &str,
        outcome: &str,
    ) -> Result<(), String> {
        let e = Entry {
            ts: now_rfc3339(),
            who: who(),
            rollout: rollout.into(),
            node: node.into(),
            step: step.into(),
            seq,
            phase,
            command: command.into(),
            outcome: outcome.into(),
        };
        self.journal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .append(&e)
            .map_err(|e| format!("journal: {e}"))
    }

    /// Records the start of `plan` (with the whole plan, for `--resume`).
    pub fn start(&self, plan: &Plan) -> Result<(), String> {
        let json = serde_json::to_string(plan).map_err(|e| e.to_string())?;
        self.write(&plan.rollout, "", None, "rollout", Phase::Start, "", &json)
    }

    fn node_failed(
        &self,
        rollout: &str,
        node: &str,
        seq: Option<usize>,
        step: &str,
        why: String,
    ) -> NodeOutcome {
        let _ = self.write(rollout, node, seq, step, Phase::Failed, "", &why);
        self.failures.fetch_add(1, Ordering::SeqCst);
        (self.log)(&format!("{node}: {step} FAILED: {why}"));
        NodeOutcome {
            node: node.to_string(),
            failure: Some(Failure {
                seq,
                step: step.to_string(),
                why,
            }),
        }
    }

    /// Runs every node of `plan` at once (`nodes`: how to reach them, from the inventory),
    /// writes the rollout's end, and returns each node's outcome and a one-line summary. A
    /// node task that panics or is cancelled is that node's failure; the rollout is `done`
    /// only when every node of the plan finished.
    pub async fn run_plan(
        self: Arc<Self>,
        plan: &Plan,
        nodes: Vec<Node>,
    ) -> (Vec<NodeOutcome>, String) {
        let mut set = tokio::task::JoinSet::new();
        let mut names = HashMap::new();
        let mut outcomes = Vec::new();
        for np in &plan.nodes {
            let Some(node) = nodes.iter().find(|n| n.name == np.node).cloned() else {
                let seq = (0..np.steps.len())
                    .find(|s| self.progress.get(&(np.node.clone(), *s)) != Some(&Phase::Done));
                let label = seq.map_or_else(|| "rollout".into(), |s| np.steps[s].label());
                outcomes.push(self.node_failed(
                    &plan.rollout,
                    &np.node,
                    seq,
                    &label,
                    "not in the inventory any more: gpufleet cannot reach it".into(),
                ));
                continue;
            };
            let name = np.node.clone();
            let (ex, id, np) = (self.clone(), plan.rollout.clone(), np.clone());
            let h = set.spawn(async move { ex.run_node(&id, &node, &np).await });
            names.insert(h.id(), name);
        }
        while let Some(r) = set.join_next_with_id().await {
            match r {
                Ok((_, o)) => outcomes.push(o),
                Err(e) => {
                    let node = names.get(&e.id()).cloned().unwrap_or_default();
                    let why = if e.is_panic() {
                        format!(
                            "internal error: the node's task panicked ({}); `gpufleet upgrade --resume` goes on from this step",
                            panic_text(e.into_panic())
                        )
                    } else {
                        "the node's task was cancelled; `gpufleet upgrade --resume` goes on from this step".to_string()
                    };
                    let at = self
                        .at
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get(&node)
                        .cloned();
                    let (seq, label) = match at {
                        Some((s, l)) => (Some(s), l),
                        None => (None, "rollout".to_string()),
                    };
                    outcomes.push(self.node_failed(&plan.rollout, &node, seq, &label, why));
                }
            }
        }
        let failed: Vec<String> = outcomes
            .iter()
            .filter_map(|o| {
                let f = o.failure.as_ref()?;
                Some(format!(
                    "{} stopped at {}{}: {}",
                    o.node,
                    f.step,
                    drained_note(plan, &o.node, f.seq),
                    f.why
                ))
            })
            .collect();
        let finished = failed.is_empty() && outcomes.len() == plan.nodes.len();
        let phase = if finished { Phase::Done } else { Phase::Failed };
        let summary = if failed.is_empty() {
            format!(
                "rollout {}: {} node(s) upgraded",
                plan.rollout,
                outcomes.len()
            )
        } else {
            format!(
                "rollout {}: {} upgraded, {} failed: {}",
                plan.rollout,
                outcomes.len() - failed.len(),
                failed.len(),
                failed.join("; ")
            )
        };
        let _ = self.write(&plan.rollout, "", None, "rollout", phase, "", &summary);
        (outcomes, summary)
    }

    async fn wait_ssh(&self, node: &Node, timeout_s: u64) -> Result<String, String> {
        let start = Instant::now();
        let limit = Duration::from_secs(timeout_s);
        // Give the reboot a moment to take the node down.
        tokio::time::sleep(Duration::from_secs(2)).await;
        loop {
            match node_read(&self.scan, node, "true", Duration::from_secs(10)).await {
                Ok(out) if out.exit_status == Some(0) => {
                    return Ok(format!("SSH back after {} s", start.elapsed().as_secs()));
                }
                // A node that answers with another host key is not the node we rebooted.
                Err(u) if matches!(u.code, Code::HostKeyMismatch | Code::HostKeyUnknown) => {
                    return Err(u.message);
                }
                _ => {}
            }
            if start.elapsed() >= limit {
                return Err(format!(
                    "SSH did not come back within {} s",
                    limit.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    /// A command run here (drain, uncordon): each must succeed.
    async fn here(&self, commands: &[Local], timeout: Duration) -> Result<Vec<String>, String> {
        let mut said = Vec::new();
        for c in commands {
            let out = drain::run(&self.permit, c, timeout).await?;
            if !out.success {
                return Err(format!(
                    "`{c}` exited {}: {}",
                    out.code.map_or("by a signal".into(), |c| c.to_string()),
                    out.output
                ));
            }
            said.push(out.output);
        }
        Ok(said)
    }

    /// One recipe step: started detached on the node (or attached to, when an earlier run
    /// started it), then polled over this SSH session until its exit status is recorded on
    /// the node, within `timeout_s`. A reboot step succeeds when the node goes away.
    #[allow(clippy::too_many_arguments)]
    async fn recipe_step(
        &self,
        rollout: &str,
        seq: usize,
        node: &Node,
        name: &str,
        run: &str,
        reboot: bool,
        sudo: bool,
        root: &str,
        timeout_s: u64,
    ) -> Result<String, String> {
        let files = StepFiles::new(root, rollout, seq, name);
        let retry = self.progress.get(&(node.name.clone(), seq)) == Some(&Phase::Failed);
        let start = Instant::now();
        let timeout = Duration::from_secs(timeout_s);
        let session = ssh::connect(node, &self.scan.ssh, self.scan.keys.clone())
            .await
            .map_err(|u| u.message)?;
        let launch = node_side::launch_command(&files, run, timeout_s, retry);
        let attached = match launch_step(&self.permit, &session, &launch, sudo).await {
            Ok(o) if o.exit_status == Some(0) => {
                String::from_utf8_lossy(&o.output).contains("gpufleet-step attached")
            }
            Ok(o) => {
                session.close().await;
                return Err(format!(
                    "could not start the step on the node: {}: {}",
                    exit_words(&o),
                    excerpt(&o.output)
                ));
            }
            Err(u) if reboot => {
                return Ok(format!(
                    "reboot issued (the connection dropped: {})",
                    u.message
                ));
            }
            Err(u) => return Err(u.message),
        };
        if attached {
            (self.log)(&format!(
                "{}: step:{name} was started before; waiting for it on the node",
                node.name
            ));
        }
        let recorded = if attached {
            " (recorded on the node by the run started before)"
        } else {
            ""
        };
        let mut session = Some(session);
        let mut dead_seen = 0;
        let mut pause = Duration::from_millis(300);
        let poll = node_side::poll_command(&files);
        loop {
            tokio::time::sleep(pause).await;
            pause = Duration::from_secs(1);
            let s = match session.take() {
                Some(s) => Ok(s),
                None => ssh::connect(node, &self.scan.ssh, self.scan.keys.clone()).await,
            };
            let polled = match s {
                Ok(s) => {
                    let r = exec(&s, &poll, sudo, Duration::from_secs(30)).await;
                    match &r {
                        Ok(o) if o.exit_status.is_some() => session = Some(s),
                        _ => s.close().await,
                    }
                    r.map_err(|u| u.message).and_then(|o| {
                        node_side::parse_poll(&String::from_utf8_lossy(&o.output)).ok_or_else(
                            || format!("the step's status could not be read: {}", exit_words(&o)),
                        )
                    })
                }
                Err(u) => Err(u.message),
            };
            let over = start.elapsed() >= timeout;
            match polled {
                Err(e) if reboot => {
                    if let Some(s) = session.take() {
                        s.close().await;
                    }
                    return Ok(format!("reboot issued; the node went away ({e})"));
                }
                Err(e) if over => {
                    return Err(format!(
                        "the node did not answer for the step's status within {timeout_s} s ({e}); the step goes on there: `gpufleet upgrade --resume` waits for it"
                    ));
                }
                Err(_) => continue,
                Ok(StepState::Running) if over => {
                    if let Some(s) = session.take() {
                        s.close().await;
                    }
                    return Err(format!(
                        "still running on the node after {timeout_s} s; it goes on there: `gpufleet upgrade --resume` waits for it again"
                    ));
                }
                Ok(StepState::Running) => {}
                Ok(StepState::Done(rc, out)) => {
                    if let Some(s) = session.take() {
                        s.close().await;
                    }
                    let out = excerpt(out.as_bytes());
                    return if rc == "0" {
                        Ok(format!(
                            "{}exit status 0{recorded}: {out}",
                            if reboot { "reboot issued, " } else { "" }
                        ))
                    } else {
                        Err(format!("exit status {rc}{recorded}: {out}"))
                    };
                }
                Ok(StepState::Dead(out)) => {
                    dead_seen += 1;
                    if dead_seen < 2 {
                        continue;
                    }
                    if let Some(s) = session.take() {
                        s.close().await;
                    }
                    if reboot {
                        return Ok(
                            "reboot issued; the step ended without an exit status (the node went down)"
                                .into(),
                        );
                    }
                    return Err(format!(
                        "the step started but ended without an exit status (killed, or the node restarted): {}; check the node, then `gpufleet upgrade --resume` runs it again",
                        excerpt(out.as_bytes())
                    ));
                }
                Ok(StepState::Busy) => {
                    return Err(format!(
                        "another step held the node's step lock ({}) for {timeout_s} s: this step did not run; `gpufleet upgrade --resume` starts it once the lock is free",
                        files.lock
                    ));
                }
                Ok(StepState::None) => {
                    return Err(format!(
                        "the step's files are gone from the node ({}.*)",
                        files.prefix
                    ));
                }
            }
        }
    }

    async fn run_step(
        &self,
        rollout: &str,
        seq: usize,
        node: &Node,
        step: &Step,
        report: &mut Option<NodeReport>,
    ) -> Result<String, String> {
        match step {
            Step::Lock {
                root,
                sudo,
                takeover,
            } => {
                let cmd = node_side::lock_command(root, rollout, &self.operator, takeover);
                let o = node_write(
                    &self.permit,
                    &self.scan,
                    node,
                    &cmd,
                    *sudo,
                    Duration::from_secs(60),
                )
                .await
                .map_err(|u| u.message)?;
                match o.exit_status {
                    Some(0) => Ok(format!("locked for rollout {rollout} by {}", self.operator)),
                    Some(node_side::LOCKED) => Err(excerpt(&o.output)),
                    _ => Err(format!("{}: {}", exit_words(&o), excerpt(&o.output))),
                }
            }
            Step::Unlock { root, sudo } => {
                let cmd = node_side::unlock_command(root, rollout);
                let o = node_write(
                    &self.permit,
                    &self.scan,
                    node,
                    &cmd,
                    *sudo,
                    Duration::from_secs(60),
                )
                .await
                .map_err(|u| u.message)?;
                if o.exit_status == Some(0) {
                    Ok("unlocked".into())
                } else {
                    Err(format!("{}: {}", exit_words(&o), excerpt(&o.output)))
                }
            }
            Step::Drain {
                commands,
                until,
                check,
                timeout_s,
            } => {
                let timeout = Duration::from_secs(*timeout_s);
                let said = self.here(commands, timeout).await?;
                if let Some(status) = until {
                    let start = Instant::now();
                    loop {
                        let out = drain::run(&self.permit, status, Duration::from_secs(60)).await?;
                        if check.drained(&out.output, out.success) {
                            break;
                        }
                        if start.elapsed() >= timeout {
                            return Err(format!(
                                "not drained within {} s (`{status}`: {})",
                                timeout.as_secs(),
                                out.output
                            ));
                        }
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                }
                Ok(said.join(" / "))
            }
            Step::Uncordon {
                commands,
                timeout_s,
            } => Ok(self
                .here(commands, Duration::from_secs(*timeout_s))
                .await?
                .join(" / ")),
            Step::Recipe {
                name,
                run,
                reboot,
                sudo,
                root,
                timeout_s,
            } => {
                self.recipe_step(
                    rollout, seq, node, name, run, *reboot, *sudo, root, *timeout_s,
                )
                .await
            }
            Step::WaitSsh { timeout_s, .. } => self.wait_ssh(node, *timeout_s).await,
            Step::Reprobe => {
                let (r, _) = self.scan.probe_node(node).await;
                let s = format!("status {}", r.status);
                let bad = r.status == NodeStatus::Unreachable;
                *report = Some(r);
                if bad { Err(s) } else { Ok(s) }
            }
            Step::Gates { gates } => {
                let r = match report.take() {
                    Some(r) => r,
                    None => self.scan.probe_node(node).await.0,
                };
                let failed = check_gates(&r, gates);
                if failed.is_empty() {
                    let names: Vec<&str> = gates.iter().map(|g| g.name()).collect();
                    Ok(format!("passed: {}", names.join(", ")))
                } else {
                    Err(failed.join("; "))
                }
            }
        }
    }

    /// Runs one node's plan, skipping steps done before; stops at the first failure.
    pub async fn run_node(&self, rollout: &str, node: &Node, plan: &NodePlan) -> NodeOutcome {
        let mut report = None;
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
                return NodeOutcome {
                    node: node.name.clone(),
                    failure: Some(Failure {
                        seq: Some(seq),
                        step: label,
                        why,
                    }),
                };
            }
            self.at
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(node.name.clone(), (seq, label.clone()));
            let cmd = step.journal_command(rollout, seq, &self.operator);
            if let Err(e) = self.write(
                rollout,
                &node.name,
                Some(seq),
                &label,
                Phase::Start,
                &cmd,
                "",
            ) {
                return NodeOutcome {
                    node: node.name.clone(),
                    failure: Some(Failure {
                        seq: Some(seq),
                        step: label,
                        why: e,
                    }),
                };
            }
            #[cfg(debug_assertions)]
            test_panic_hook(&node.name, &label);
            (self.log)(&format!("{}: {label} …", node.name));
            match self.run_step(rollout, seq, node, step, &mut report).await {
                Ok(out) => {
                    let _ = self.write(
                        rollout,
                        &node.name,
                        Some(seq),
                        &label,
                        Phase::Done,
                        &cmd,
                        &out,
                    );
                    (self.log)(&format!("{}: {label} done", node.name));
                }
                Err(why) => {
                    let _ = self.write(
                        rollout,
                        &node.name,
                        Some(seq),
                        &label,
                        Phase::Failed,
                        &cmd,
                        &why,
                    );
                    self.failures.fetch_add(1, Ordering::SeqCst);
                    (self.log)(&format!("{}: {label} FAILED: {why}", node.name));
                    return NodeOutcome {
                        node: node.name.clone(),
                        failure: Some(Failure {
                            seq: Some(seq),
                            step: label,
                            why,
                        }),
                    };
                }
            }
        }
        NodeOutcome {
            node: node.name.clone(),
            failure: None,
        }
    }
}

/// " and stays drained" when `node` stopped at or after its drain step `seq` (a node stopped
/// by its lock was never drained by this rollout).
pub fn drained_note(plan: &Plan, node: &str, seq: Option<usize>) -> &'static str {
    let drained = plan
        .nodes
        .iter()
        .find(|n| n.node == node)
        .zip(seq)
        .is_some_and(|(np, s)| np.drained_at(s));
    if drained { " and stays drained" } else { "" }
}

/// The latest rollout in the journal that has no end entry (or stopped with a failure): its
/// plan, and how far each node got.
pub fn unfinished(journal: &[Entry]) -> Option<(Plan, Progress)> {
    let start = journal
        .iter()
        .rev()
        .find(|e| e.step == "rollout" && e.phase == Phase::Start)?;
    // A rollout that stopped (failed, halted) is resumable: --resume retries each node from
    // the step where it stopped. Done and abandoned rollouts are not.
    let closed = journal.iter().any(|e| {
        e.rollout == start.rollout
            && e.step == "rollout"
            && matches!(e.phase, Phase::Done | Phase::Abandoned)
    });
    if closed {
        return None;
    }
    let plan: Plan = serde_json::from_str(&start.outcome).ok()?;
    let mut progress = Progress::new();
    for e in journal
        .iter()
        .filter(|e| e.rollout == start.rollout && !e.node.is_empty())
    {
        // Entries without a step number (older journals): the first step of that label.
        let seq = e.seq.or_else(|| {
            plan.nodes
                .iter()
                .find(|n| n.node == e.node)?
                .steps
                .iter()
                .position(|s| s.label() == e.step)
        });
        if let Some(seq) = seq {
            progress.insert((e.node.clone(), seq), e.phase);
        }
    }
    Some((plan, progress))
}

/// Reads `node`'s node lock (read-only: no permit): `None` when free.
pub async fn read_lock(scan: &Scan, node: &Node) -> Result<Option<node_side::LockOwner>, String> {
    let o = node_read(
        scan,
        node,
        &node_side::read_lock_command(&node.root),
        Duration::from_secs(30),
    )
    .await
    .map_err(|u| u.message)?;
    node_side::parse_lock(&String::from_utf8_lossy(&o.output))
        .ok_or_else(|| format!("{}: {}", exit_words(&o), excerpt(&o.output)))
}

/// Breaks `node`'s lock if rollout `rollout` holds it (and only then). Needs the write permit.
pub async fn break_lock(
    permit: &WritePermit,
    scan: &Scan,
    node: &Node,
    rollout: &str,
    sudo: bool,
) -> Result<String, String> {
    let cmd = node_side::unlock_command(&node.root, rollout);
    let o = node_write(permit, scan, node, &cmd, sudo, Duration::from_secs(60))
        .await
        .map_err(|u| u.message)?;
    if o.exit_status == Some(0) {
        Ok(format!("the lock of rollout {rollout} is broken"))
    } else {
        Err(format!("{}: {}", exit_words(&o), excerpt(&o.output)))
    }
}

/// A rollout as `gpufleet rollouts` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RolloutSummary {
    pub id: String,
    /// From its plan (absent when the plan cannot be read).
    pub mode: Option<Mode>,
    /// `done`, `failed` (resumable), `abandoned`, or `unfinished` (running, or interrupted:
    /// resumable).
    pub state: String,
    pub nodes: Vec<String>,
    pub who: String,
    pub started: String,
    /// The last end entry's time, if any.
    pub ended: Option<String>,
}

/// Every rollout of the journal, oldest first.
pub fn rollouts(journal: &[Entry]) -> Vec<RolloutSummary> {
    let mut out: Vec<RolloutSummary> = Vec::new();
    for e in journal.iter().filter(|e| e.step == "rollout") {
        let i = match out.iter().position(|r| r.id == e.rollout) {
            Some(i) => i,
            None => {
                out.push(RolloutSummary {
                    id: e.rollout.clone(),
                    mode: None,
                    state: "unfinished".into(),
                    nodes: Vec::new(),
                    who: e.who.clone(),
                    started: e.ts.clone(),
                    ended: None,
                });
                out.len() - 1
            }
        };
        let r = &mut out[i];
        match e.phase {
            Phase::Start => {
                if let Ok(p) = serde_json::from_str::<Plan>(&e.outcome) {
                    r.mode = Some(p.mode);
                    r.nodes = p.nodes.iter().map(|n| n.node.clone()).collect();
                }
            }
            Phase::Abandoned => {
                r.state = "abandoned".into();
                r.ended = Some(e.ts.clone());
            }
            Phase::Done | Phase::Failed if r.state != "abandoned" => {
                r.state = if e.phase == Phase::Done {
                    "done"
                } else {
                    "failed"
                }
                .into();
                r.ended = Some(e.ts.clone());
            }
            _ => {}
        }
    }
    out
}

/// What a rollout given up leaves on each node of `plan`, in words, with the exact commands
/// that give a drained node back to its scheduler.
pub fn left_behind(plan: &Plan, progress: &Progress) -> Vec<String> {
    let mut out = Vec::new();
    for np in &plan.nodes {
        let at = |pred: &dyn Fn(&Step) -> bool| np.steps.iter().position(pred);
        let phase = |i: Option<usize>| i.and_then(|i| progress.get(&(np.node.clone(), i)));
        let drain = at(&|s| matches!(s, Step::Drain { .. }));
        let uncordon = at(&|s| matches!(s, Step::Uncordon { .. }));
        let lock = at(&|s| matches!(s, Step::Lock { .. }));
        let unlock = at(&|s| matches!(s, Step::Unlock { .. }));
        let given_back = phase(uncordon) == Some(&Phase::Done);
        let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
        match phase(drain) {
            Some(p) if !given_back => {
                let cmds: Vec<String> = uncordon
                    .map(|u| np.steps[u].shown(&plan.rollout))
                    .unwrap_or_default();
                out.push(format!(
                    "{} {}; give it back with: {}",
                    safe(&np.node),
                    if *p == Phase::Done {
                        "stays drained"
                    } else {
                        "may be drained (its drain started)"
                    },
                    safe(&cmds.join(" && "))
                ));
            }
            _ if given_back => out.push(format!("{} was given back (uncordoned)", safe(&np.node))),
            _ => {}
        }
        if phase(lock).is_some() && phase(unlock) != Some(&Phase::Done) {
            let root = match &np.steps[lock.unwrap_or(0)] {
                Step::Lock { root, .. } => root.trim_end_matches('/').to_string(),
                _ => String::new(),
            };
            out.push(format!(
                "{} keeps this rollout's node lock ({root}/{}); the next rollout from this state folder takes it over",
                safe(&np.node),
                node_side::MARKER
            ));
        }
        if phase(lock).is_none() {
            out.push(format!("{} was not touched", safe(&np.node)));
        }
    }
    out
}

/// Rollouts given up with `--abandon`: their node markers may be taken over.
pub fn abandoned(journal: &[Entry]) -> Vec<String> {
    journal
        .iter()
        .filter(|e| e.step == "rollout" && e.phase == Phase::Abandoned)
        .map(|e| e.rollout.clone())
        .collect()
}

/// A new rollout id: `r-<UTC time>-<6 random hex digits>` (`r-20261201T221503Z-3f9a2c`), so
/// two rollouts started in the same second, anywhere, have different ids.
pub fn new_id() -> String {
    let t = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let mut b = [0u8; 3];
    getrandom::fill(&mut b).expect("the OS random number generator failed");
    format!("r-{t}-{:02x}{:02x}{:02x}", b[0], b[1], b[2])
}

/// The local lock: one rollout at a time from a state folder, held while this lives. Its file
/// says who holds it (operator, pid, since, and the rollout once known).
pub struct LocalLock {
    file: std::fs::File,
    pub path: PathBuf,
    since: String,
}

/// The local lock was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalLockError {
    Io(String),
    /// Another process holds it; what its file says.
    Held {
        path: PathBuf,
        holder: String,
    },
}

impl std::fmt::Display for LocalLockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LocalLockError::Io(e) => f.write_str(e),
            LocalLockError::Held { path, holder } => write!(
                f,
                "another gpufleet rollout holds {} ({holder}); wait for it, or check `gpufleet journal`",
                path.display()
            ),
        }
    }
}

impl std::error::Error for LocalLockError {}

impl LocalLock {
    /// Writes who holds the lock, and `rollout` (`planning` before one is planned).
    pub fn note(&mut self, rollout: &str) {
        use std::io::{Seek, Write};
        let text = format!(
            "rollout {rollout}, operator {}, since {}\n",
            operator(),
            self.since
        );
        let _ = self.file.set_len(0);
        let _ = self.file.rewind();
        let _ = self.file.write_all(text.as_bytes());
        let _ = self.file.sync_data();
    }
}

/// Who holds the local lock of `state_dir` now (what its file says), without taking it;
/// `None` when nobody does.
pub fn local_holder(state_dir: &Path) -> Option<String> {
    let path = state_dir.join("rollout.lock");
    let file = std::fs::File::open(&path).ok()?;
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            None
        }
        Err(_) => Some(
            crate::model::text::terminal_safe(
                std::fs::read_to_string(&path).unwrap_or_default().trim(),
            )
            .into_owned(),
        ),
    }
}

/// Takes the local lock of `state_dir` without waiting: refused, with who holds it, while
/// another process holds it.
pub fn lock_local(state_dir: &Path) -> Result<LocalLock, LocalLockError> {
    std::fs::create_dir_all(state_dir)
        .map_err(|e| LocalLockError::Io(format!("{}: {e}", state_dir.display())))?;
    let path = state_dir.join("rollout.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| LocalLockError::Io(format!("{}: {e}", path.display())))?;
    if file.try_lock().is_err() {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let holder = match text.trim() {
            "" => "who holds it is not written down".to_string(),
            t => crate::model::text::terminal_safe(t).into_owned(),
        };
        return Err(LocalLockError::Held { path, holder });
    }
    let mut lock = LocalLock {
        file,
        path,
        since: now_rfc3339(),
    };
    lock.note("planning");
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RecipeStep;
    use crate::inventory::DrainSpec;
    use crate::model::Code;

    fn node(name: &str, canary: bool) -> Node {
        Node {
            canary,
            recipe: Some("r".into()),
            drain: DrainSpec {
                backend: DrainBackend::Slurm,
                ..Default::default()
            },
            ..Node::for_test(name, "h")
        }
    }

    fn report(name: &str, status: NodeStatus) -> NodeReport {
        let mut r = NodeReport::unreachable(
            name.into(),
            Code::SshTimeout,
            String::new(),
            vec![],
            String::new(),
            0,
        );
        r.status = status;
        r.driver = Some(crate::model::report::DriverJson {
            flavor: crate::model::driver::Flavor::Proprietary,
            version: Some("535.183.01".into()),
            arch: None,
            userspace_version: None,
            managed_by: Some("host".into()),
        });
        r
    }

    fn recipes() -> BTreeMap<String, Recipe> {
        let mut m = BTreeMap::new();
        m.insert(
            "r".into(),
            Recipe {
                sudo: true,
                steps: vec![
                    RecipeStep {
                        name: "install".into(),
                        run: "apt-get install -y nvidia-driver-{branch}-open".into(),
                        reboot: false,
                    },
                    RecipeStep {
                        name: "reboot".into(),
                        run: "systemctl reboot".into(),
                        reboot: true,
                    },
                ],
            },
        );
        m
    }

    #[test]
    fn canaries_first_then_waves_of_max_unavailable() {
        let cfg = UpgradeConfig {
            max_unavailable: 2,
            ..Default::default()
        };
        let nodes: Vec<(Node, NodeReport)> = vec![
            (node("c1", true), report("c1", NodeStatus::Migrate)),
            (node("n1", false), report("n1", NodeStatus::Migrate)),
            (node("n2", false), report("n2", NodeStatus::Ready)),
            (node("n3", false), report("n3", NodeStatus::Migrate)),
            (node("n4", false), report("n4", NodeStatus::Migrate)),
            (node("n5", false), report("n5", NodeStatus::Blocked)),
        ];
        let canaries = vec![("c1".to_string(), Some(NodeStatus::Migrate))];
        let p = plan(Mode::Canary, &nodes, &canaries, &[], &cfg, &recipes(), "r1").unwrap();
        assert_eq!(
            p.nodes.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(),
            ["c1"]
        );
        let steps: Vec<String> = p.nodes[0].steps.iter().map(|s| s.label()).collect();
        assert_eq!(
            steps,
            [
                "lock",
                "drain",
                "step:install",
                "step:reboot",
                "wait-ssh:reboot",
                "reprobe",
                "gates",
                "uncordon",
                "unlock"
            ]
        );
        assert!(
            matches!(&p.nodes[0].steps[2], Step::Recipe { run, sudo: true, reboot: false, .. } if run == "apt-get install -y nvidia-driver-535-open"),
            "{:?}",
            p.nodes[0].steps[2]
        );
        // The plan goes into the journal whole and comes back the same.
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), p);
        assert!(json.contains(r#""kind":"recipe""#), "{json}");
        // Drained from the drain step on.
        assert_eq!(drained_note(&p, "c1", Some(0)), "");
        assert_eq!(drained_note(&p, "c1", Some(1)), " and stays drained");
        assert_eq!(drained_note(&p, "c1", None), "");
        let e = plan(Mode::Wave, &nodes, &canaries, &[], &cfg, &recipes(), "r2").unwrap_err();
        assert!(e.contains("canaries first: c1"), "{e}");
        let journal = vec![Entry {
            ts: String::new(),
            who: String::new(),
            rollout: "r1".into(),
            node: "c1".into(),
            step: "unlock".into(),
            seq: Some(8),
            phase: Phase::Done,
            command: String::new(),
            outcome: String::new(),
        }];
        let p = plan(
            Mode::Wave,
            &nodes,
            &canaries,
            &journal,
            &cfg,
            &recipes(),
            "r2",
        )
        .unwrap();
        assert_eq!(
            p.nodes.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(),
            ["n1", "n3"]
        );
        let skipped: Vec<&str> = p.skipped.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(skipped, ["n2", "n4", "n5"]);
    }

    #[test]
    fn gates() {
        let mut r = report("a", NodeStatus::Ready);
        let failed = check_gates(&r, &Gate::ALL);
        assert!(failed.iter().any(|f| f.starts_with("open-module")));
        assert!(failed.iter().any(|f| f.starts_with("nvidia-smi-healthy")));
        // Said in words, never as Rust values.
        assert!(
            failed.contains(
                &"open-module: the proprietary kernel module is loaded, not the open one"
                    .to_string()
            ),
            "{failed:?}"
        );
        r.peermem = Some(crate::model::report::PeermemJson {
            loaded: Some(true),
            configured: Some(true),
            registered: None,
        });
        assert_eq!(
            check_gates(&r, &[Gate::NoPeermem]),
            ["no-peermem: nvidia-peermem is loaded and configured at boot"]
        );
        assert!(!format!("{:?}", check_gates(&r, &Gate::ALL)).contains("Some("));
        r.driver.as_mut().unwrap().flavor = crate::model::driver::Flavor::Open;
        r.driver.as_mut().unwrap().userspace_version = Some("580".into());
        r.peermem = Some(crate::model::report::PeermemJson {
            loaded: Some(false),
            configured: Some(false),
            registered: None,
        });
        r.dma_buf = Some(crate::model::report::DmaBufJson {
            kernel_support: Some(true),
        });
        r.reasons.clear();
        let boot = |boot_kernel: &str, with_driver: bool| crate::model::report::BootJson {
            running: Some("6.8.0-1".into()),
            boot_kernel: Some(boot_kernel.into()),
            reboot_pending: Some(false),
            kernels: Some(vec![
                crate::model::report::InstalledKernelJson {
                    release: "6.8.0-1".into(),
                    nvidia_modules: Some(vec![
                        "/lib/modules/6.8.0-1/updates/dkms/nvidia.ko".into(),
                    ]),
                },
                crate::model::report::InstalledKernelJson {
                    release: "6.8.0-2".into(),
                    nvidia_modules: Some(if with_driver {
                        vec!["/lib/modules/6.8.0-2/updates/dkms/nvidia.ko".into()]
                    } else {
                        vec![]
                    }),
                },
            ]),
        };
        r.boot = Some(boot("6.8.0-2", true));
        assert_eq!(check_gates(&r, &Gate::ALL), Vec::<String>::new());

        // The next boot loses the driver: the gate says so.
        r.reasons.push(crate::model::assess::Reason::new(
            Code::NextBootWithoutDriver,
            "x",
            vec![],
        ));
        r.boot = Some(boot("6.8.0-2", false));
        let failed = check_gates(&r, &[Gate::NextBootHasDriver]);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].contains("6.8.0-2"), "{failed:?}");
        // Unknown is not a pass.
        r.reasons.clear();
        r.boot.as_mut().unwrap().boot_kernel = None;
        assert_eq!(check_gates(&r, &[Gate::NextBootHasDriver]).len(), 1);

        // DMA-BUF support does not gate a node where GPUDirect RDMA does not apply.
        r.dma_buf = Some(crate::model::report::DmaBufJson {
            kernel_support: Some(false),
        });
        assert_eq!(check_gates(&r, &[Gate::DmabufKernel]).len(), 1);
        r.reasons.push(crate::model::assess::Reason::new(
            Code::NoRdmaDevice,
            "x",
            vec![],
        ));
        assert!(check_gates(&r, &[Gate::DmabufKernel]).is_empty());
    }

    #[test]
    fn gpu_operator_nodes_are_skipped_by_host_recipes() {
        let mut op = report("op", NodeStatus::Migrate);
        op.driver.as_mut().unwrap().managed_by = Some("gpu-operator".into());
        let nodes = vec![
            (node("op", false), op.clone()),
            (node("host", false), report("host", NodeStatus::Migrate)),
        ];
        let cfg = UpgradeConfig {
            max_unavailable: 5,
            ..UpgradeConfig::default()
        };
        let p = plan(Mode::Wave, &nodes, &[], &[], &cfg, &recipes(), "r-1").unwrap();
        let chosen: Vec<&str> = p.nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(chosen, ["host"]);
        assert_eq!(p.skipped[0].0, "op");
        assert!(
            p.skipped[0].1.contains("driver.kernelModuleType"),
            "{:?}",
            p.skipped
        );
        let e = plan_selected(&nodes[..1], &[], &[], &cfg, &recipes(), "r-2").unwrap_err();
        assert!(
            e.contains("nothing to upgrade: op: the driver is managed by the GPU Operator"),
            "{e}"
        );
        // Marked with an eligible node, it is skipped with the reason, as the CLI does.
        let p = plan_selected(&nodes, &[], &[], &cfg, &recipes(), "r-3").unwrap();
        assert_eq!(p.nodes.len(), 1);
        assert_eq!(p.nodes[0].node, "host");
        assert_eq!(p.skipped[0].0, "op");
    }

    #[test]
    fn rollout_ids_are_unique_within_a_second() {
        let ids: HashSet<String> = (0..200).map(|_| new_id()).collect();
        assert!(ids.len() >= 199, "{}", ids.len());
        let id = ids.iter().next().unwrap();
        // r-20261201T221503Z-3f9a2c
        assert_eq!(id.len(), 25, "{id}");
        assert!(id.starts_with("r-") && id.as_bytes()[10] == b'T' && &id[17..19] == "Z-");
    }

    #[test]
    fn resume_knows_each_steps_last_phase_by_its_number() {
        let p = plan(
            Mode::Canary,
            &[(node("c1", true), report("c1", NodeStatus::Migrate))],
            &[],
            &[],
            &UpgradeConfig::default(),
            &recipes(),
            "r1",
        )
        .unwrap();
        let e = |step: &str, seq: Option<usize>, phase: Phase| Entry {
            ts: String::new(),
            who: String::new(),
            rollout: "r1".into(),
            node: if step == "rollout" { "" } else { "c1" }.into(),
            step: step.into(),
            seq,
            phase,
            command: String::new(),
            outcome: if step == "rollout" && phase == Phase::Start {
                serde_json::to_string(&p).unwrap()
            } else {
                String::new()
            },
        };
        let mut j = vec![
            e("rollout", None, Phase::Start),
            e("lock", Some(0), Phase::Start),
            e("lock", Some(0), Phase::Done),
            // An entry of an older journal, without a number: matched by its label.
            e("drain", None, Phase::Done),
            e("step:install", Some(2), Phase::Start),
            e("step:install", Some(2), Phase::Failed),
            e("step:reboot", Some(3), Phase::Start),
        ];
        let (back, progress) = unfinished(&j).unwrap();
        assert_eq!(back, p);
        let at = |s: usize| progress.get(&("c1".to_string(), s)).copied();
        assert_eq!(at(0), Some(Phase::Done));
        assert_eq!(at(1), Some(Phase::Done));
        assert_eq!(at(2), Some(Phase::Failed));
        assert_eq!(at(3), Some(Phase::Start));
        assert_eq!(at(4), None);
        // A failed rollout stays resumable; a done one is not.
        j.push(e("rollout", None, Phase::Failed));
        assert!(unfinished(&j).is_some());
        j.push(e("rollout", None, Phase::Done));
        assert!(unfinished(&j).is_none());
    }

    #[test]
    fn the_local_lock_says_who_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut held = lock_local(dir.path()).unwrap();
        held.note("r-1");
        match lock_local(dir.path()) {
            Err(LocalLockError::Held { holder, .. }) => {
                assert!(holder.starts_with("rollout r-1, operator "), "{holder}");
                assert!(
                    holder.contains(&format!("pid {}", std::process::id())),
                    "{holder}"
                );
            }
            other => panic!("{:?}", other.err()),
        }
        drop(held);
        assert!(lock_local(dir.path()).is_ok());
    }
}
