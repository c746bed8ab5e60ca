//! The rollout plan, typed, and each node's steps (pure); the plan for people. Which nodes go
//! in a wave is [`super::waves`].

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::budget::Budget;
use super::live::Again;
use crate::actions::drain::{self, Local};
use crate::actions::node_side::{self, StepFiles};
use crate::actions::scheduler::{self, GiveBack, StateRead, Taken};
use crate::config::{Gate, Recipe, UpgradeConfig};
use crate::inventory::{DrainBackend, DrainSpec, Node};
use crate::model::NodeStatus;
use crate::model::report::{ManagedBy, NextBootDriver, NodeReport};

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
    /// `sinfo -o %T` says `drained` or `down` (a node out of service before this rollout,
    /// which gpufleet does not drain: [`Step::Drain`]'s `pre`).
    SlurmOut,
}

impl DrainCheck {
    fn of(backend: DrainBackend) -> DrainCheck {
        match backend {
            DrainBackend::Slurm => DrainCheck::Slurm,
            DrainBackend::Kubernetes => DrainCheck::Kubernetes,
            _ => DrainCheck::ExitStatus,
        }
    }

    pub(super) fn drained(self, output: &str, success: bool) -> bool {
        match self {
            DrainCheck::Slurm => drain::slurm_drained(output),
            DrainCheck::Kubernetes => success && output.trim() == "true",
            DrainCheck::ExitStatus => success,
            DrainCheck::SlurmOut => {
                drain::slurm_drained(output)
                    || output.lines().any(|l| {
                        l.trim()
                            .trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-'])
                            == "down"
                    })
            }
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
        /// Run first (kubernetes): reads the node's GPU Operator upgrade labels; the drain is
        /// refused while the Operator is upgrading the node or told to skip it
        /// ([`drain::operator_guard`]). Absent in journals older than it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        guard: Option<Local>,
        commands: Vec<Local>,
        until: Option<Local>,
        check: DrainCheck,
        timeout_s: u64,
        /// The node was out of service before this rollout (the state found, in words):
        /// gpufleet does not drain it (no command sends it; `until` waits for it to be idle)
        /// and never gives it back (`--include-drained`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pre: Option<String>,
        /// Run first (a node planned in service): its scheduler state read again; refused when
        /// someone took it out of service since the plan ([`scheduler::still_in_service`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recheck: Option<StateRead>,
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
        /// Opt-in: the step's process group is killed on the node past this many seconds of
        /// running ([`node_side::kill_command`]); absent: never killed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kill_after_s: Option<u64>,
    },
    /// Read the node's boot identity ([`node_side::boot_id_command`]) before the reboot step
    /// `before`, so that its reboot can be proven (read-only).
    BootId { before: String, root: String },
    /// After the reboot step `after`: wait until the node answers with a boot identity other
    /// than the one read before it (the node went away and came back), within `timeout_s`; the
    /// old identity at the end, or no answer, stops the node there (drained).
    WaitSsh {
        after: String,
        timeout_s: u64,
        /// The node's root, where its boot identity is read (absent in journals older than it).
        #[serde(default)]
        root: String,
    },
    /// The read-only probe, again.
    Reprobe,
    /// These gates, on the re-probe's report; then, on a canary with `nccl-dmabuf`, the
    /// recipe's NCCL test on the node ([`super::gates::plan_gates`]; absent in journals older
    /// than it).
    Gates {
        gates: Vec<Gate>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nccl: Option<super::gates::NcclTest>,
    },
    /// Give the node back to the scheduler.
    Uncordon {
        commands: Vec<Local>,
        timeout_s: u64,
        /// How it is given back beyond `commands`: Slurm reads the node first (RESUME, UNDRAIN
        /// or nothing); a node gpufleet did not drain is never given back
        /// ([`scheduler::give_back`]). Absent: `commands`, as in journals older than it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        back: Option<GiveBack>,
    },
    /// Give the node lock back (only if this rollout holds it).
    Unlock { root: String, sudo: bool },
}

impl Step {
    /// The step's label in the journal and the plan: `lock`, `drain`, `boot-id:<name>`,
    /// `step:<name>`, `wait-ssh:<name>`, `reprobe`, `gates`, `uncordon`, `unlock`.
    pub fn label(&self) -> String {
        match self {
            Step::Lock { .. } => "lock".into(),
            Step::Drain { .. } => "drain".into(),
            Step::BootId { before, .. } => format!("boot-id:{before}"),
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
            Step::Lock { .. } | Step::BootId { .. } | Step::Recipe { .. } | Step::Unlock { .. } => {
                Where::Node
            }
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
                guard,
                commands,
                until,
                pre,
                recheck,
                ..
            } => {
                let mut v: Vec<String> = pre
                    .iter()
                    .map(|p| {
                        format!(
                            "not drained by gpufleet, out of service before: {p}; never given back"
                        )
                    })
                    .collect();
                v.extend(recheck.iter().map(|r| {
                    format!(
                        "refused if someone took it out of service since the plan: {}",
                        r.command
                    )
                }));
                v.extend(guard.iter().map(|g| {
                    format!("refused while the GPU Operator upgrades the node or skips it: {g}")
                }));
                v.extend(commands.iter().map(|c| c.to_string()));
                v.extend(until.iter().map(|c| format!("until drained: {c}")));
                v
            }
            Step::Recipe {
                run, kill_after_s, ..
            } => {
                let mut v = vec![run.clone()];
                if let Some(k) = kill_after_s {
                    v.push(format!(
                        "killed on the node after {k} s of running (TERM to its process group, KILL {} s later)",
                        node_side::KILL_GRACE_S
                    ));
                }
                v
            }
            Step::BootId { root, .. } => vec![format!(
                "read the boot identity {}/{} (else btime of {}/proc/stat), to prove the reboot",
                root.trim_end_matches('/'),
                node_side::BOOT_ID,
                root.trim_end_matches('/')
            )],
            Step::WaitSsh { timeout_s, .. } => vec![format!(
                "wait up to {timeout_s} s until the node answers with a new boot identity (going away first, or its boot identity changed); the old one after {timeout_s} s, or no answer, stops the node here, drained"
            )],
            Step::Reprobe => vec!["the read-only probe".into()],
            Step::Gates { gates, nccl } => {
                let mut v = vec![
                    gates
                        .iter()
                        .map(|g| g.name())
                        .collect::<Vec<_>>()
                        .join(", "),
                ];
                if let Some(t) = nccl {
                    v.push(format!(
                        "nccl-dmabuf, once the others pass: on this canary over SSH (NCCL_DEBUG=INFO, up to {} s): {}; its output read as an NCCL log, joined with this re-probe: passes only on dma-buf for this node's host",
                        t.timeout_s, t.run
                    ));
                }
                v
            }
            Step::Uncordon { commands, back, .. } => {
                let mut v = Vec::new();
                if let Some(k) = back.as_ref().and_then(|b| b.kept.as_ref()) {
                    v.push(format!(
                        "never given back: gpufleet did not drain it ({k}); its state is only read"
                    ));
                }
                if let Some(r) = back.as_ref().and_then(|b| b.read.as_ref()) {
                    v.push(format!("read first: {}", r.command));
                }
                let kept = back.as_ref().is_some_and(|b| b.kept.is_some());
                if let Some(b) = back.as_ref().filter(|b| b.read.is_some() && !kept) {
                    v.extend(commands.iter().map(|c| {
                        format!("{c}    (only while this rollout's drain, or slurmctld's DOWN after the reboot, holds it)")
                    }));
                    v.extend(b.undrain.iter().map(|u| {
                        format!("{u}    (instead, when it is DOWN for another reason: reported still down)")
                    }));
                } else if !kept {
                    v.extend(commands.iter().map(|c| c.to_string()));
                }
                v
            }
            Step::Unlock { root, .. } => vec![format!(
                "remove the node lock {}/{} if rollout {rollout} holds it",
                root.trim_end_matches('/'),
                node_side::MARKER
            )],
        }
    }

    /// The exact command for the journal (`operator`: `user@host pid N`).
    pub(super) fn journal_command(&self, rollout: &str, seq: usize, operator: &str) -> String {
        match self {
            Step::Lock { root, takeover, .. } => {
                node_side::lock_command(root, rollout, operator, takeover)
            }
            Step::Unlock { root, .. } => node_side::unlock_command(root, rollout),
            Step::BootId { root, .. } => node_side::boot_id_command(root),
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
    /// Why the node is planned though the journal says otherwise (it calls it upgraded, but it
    /// probes `migrate` again; it probes `ready`, but its upgrade was never proven), and the
    /// status it was planned at: [`verdict`]. Absent for a `migrate` node the journal agrees on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<Again>,
}

impl NodePlan {
    /// Whether the node, probed `now` when its lock is taken, is still as it was planned:
    /// `migrate`, or `ready` when it was planned `ready` (its upgrade never proven).
    pub fn as_planned(&self, now: NodeStatus) -> bool {
        now == NodeStatus::Migrate || self.note.as_ref().is_some_and(|a| a.status == now)
    }

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
    r.managed_by() == Some(ManagedBy::GpuOperator)
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
        Some(NextBootDriver::Ok) => "has an nvidia.ko",
        Some(NextBootDriver::Missing) => {
            "has no nvidia.ko: the next reboot comes up without the driver"
        }
        Some(NextBootDriver::NotApplicable) => "no host nvidia.ko to check (n/a)",
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
    /// Nodes left out, with why (already ready, blocked, not reachable, done before, out of
    /// service before, past the budget).
    #[serde(default)]
    pub skipped: Vec<(String, String)>,
    /// The unavailability budget it was planned in ([`Budget`]); absent in journals older
    /// than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

pub(super) fn quote(s: &str) -> String {
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

/// Every name of `node` that reaches a command line on the write side, checked before a plan
/// is made ([`crate::actions::names`]): the SSH host and user (and its jump hosts'), the root
/// prefix, the scheduler name for its drain backend ([`drain::check_name`]) and, when the
/// recipe (a step or its `nccl_test`) uses `{node}`, the node's name. `Err`: each name that breaks its rule, `; `-joined.
pub fn check_names(node: &Node, spec: Option<&DrainSpec>, recipe: &Recipe) -> Result<(), String> {
    use crate::actions::names;
    let shown = drain::shown;
    let mut bad = Vec::new();
    if let Some(why) = names::ssh_host(&node.host) {
        bad.push(format!("SSH host {} is {why}", shown(&node.host)));
    }
    if let Some(why) = names::ssh_user(&node.user) {
        bad.push(format!("SSH user {} is {why}", shown(&node.user)));
    }
    for hop in &node.route.jump {
        if let Some(why) = names::ssh_host(&hop.host) {
            bad.push(format!("jump host {} is {why}", shown(&hop.host)));
        }
        if let Some(why) = names::ssh_user(&hop.login.user) {
            bad.push(format!(
                "jump host user {} is {why}",
                shown(&hop.login.user)
            ));
        }
    }
    if let Some(why) = names::root_prefix(&node.root) {
        bad.push(format!("root {} is {why}", shown(&node.root)));
    }
    if let Some(spec) = spec
        && let Err(e) = drain::check_name(spec, node)
    {
        bad.push(e);
    }
    if (recipe.steps.iter().any(|s| s.run.contains("{node}"))
        || recipe
            .nccl_test
            .as_ref()
            .is_some_and(|t| t.contains("{node}")))
        && let Some(why) = names::shell_name(&node.name)
    {
        bad.push(format!(
            "node name {} (the recipe's {{node}}) is {why}",
            shown(&node.name)
        ));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}; refused before anything runs",
            crate::model::text::terminal_safe(&node.name),
            bad.join("; ")
        ))
    }
}

/// The steps of one node (pure). Refused when a name of the node may not reach a command
/// line ([`check_names`]).
pub fn node_plan(
    node: &Node,
    report: &NodeReport,
    recipe: &Recipe,
    cfg: &UpgradeConfig,
    rollout: &str,
    takeover: &[String],
) -> Result<NodePlan, String> {
    node_plan_in(node, report, recipe, cfg, rollout, takeover, None, true)
}

/// [`node_plan`] of a node out of service before this rollout when `pre` says so
/// (`--include-drained`): not drained by gpufleet, never given back (docs/domain.md, "Drains
/// that respect what was there"). `recheck`: its state is read again before its drain (not for
/// a node locked by another rollout: if its lock is taken over, that rollout's drain is
/// gpufleet's own).
#[allow(clippy::too_many_arguments)]
pub fn node_plan_in(
    node: &Node,
    report: &NodeReport,
    recipe: &Recipe,
    cfg: &UpgradeConfig,
    rollout: &str,
    takeover: &[String],
    pre: Option<&Taken>,
    recheck: bool,
) -> Result<NodePlan, String> {
    let reason = format!("gpufleet rollout {rollout}");
    let timeout = Duration::from_secs(cfg.drain_timeout);
    let root = node.root.clone();
    check_names(node, node.drain.as_ref(), recipe)?;
    super::gates::check_driver_version(node, report, recipe)?;
    let mut steps = vec![Step::Lock {
        root: root.clone(),
        sudo: recipe.sudo,
        takeover: takeover.to_vec(),
    }];
    let spec = node.drain.as_ref().ok_or_else(|| {
        format!(
            "{}: the inventory sets no `drain` for this node, so its jobs would not be drained; \
             set `drain = {{ backend = \"slurm\" }}` (or \"kubernetes\", \"command\") on the node, \
             its group or [defaults], or `drain = {{ backend = \"none\" }}` to upgrade it without draining",
            node.name
        )
    })?;
    let drains = spec.backend != DrainBackend::None;
    let read = scheduler::state_read(spec, node, &cfg.unavailable_taints);
    // Kubernetes: a node only tainted (not cordoned) is cordoned by gpufleet, so it is its own
    // to uncordon; a cordoned one, a Slurm or command node out of service, are not.
    let kept = pre
        .filter(|t| spec.backend != DrainBackend::Kubernetes || t.cordoned)
        .map(Taken::words);
    if drains {
        let (commands, check) = match (&kept, spec.backend) {
            (None, b) => (
                drain::drain_commands(spec, node, timeout, &reason),
                DrainCheck::of(b),
            ),
            (Some(_), DrainBackend::Kubernetes) => (
                drain::drain_commands(spec, node, timeout, &reason),
                DrainCheck::Kubernetes,
            ),
            (Some(_), DrainBackend::Slurm) => (Vec::new(), DrainCheck::SlurmOut),
            (Some(_), _) => (Vec::new(), DrainCheck::ExitStatus),
        };
        steps.push(Step::Drain {
            guard: drain::operator_guard_command(spec, node),
            commands,
            until: drain::status_command(spec, node),
            check,
            timeout_s: cfg.drain_timeout,
            pre: kept.clone(),
            recheck: read.clone().filter(|_| recheck && pre.is_none()),
        });
    }
    for s in &recipe.steps {
        if s.reboot {
            steps.push(Step::BootId {
                before: s.name.clone(),
                root: root.clone(),
            });
        }
        steps.push(Step::Recipe {
            name: s.name.clone(),
            run: expand(&s.run, node, report)?,
            reboot: s.reboot,
            sudo: recipe.sudo,
            root: root.clone(),
            timeout_s: cfg.step_timeout,
            kill_after_s: s.kill_after,
        });
        if s.reboot {
            steps.push(Step::WaitSsh {
                after: s.name.clone(),
                timeout_s: cfg.reboot_timeout,
                root: root.clone(),
            });
        }
    }
    steps.push(Step::Reprobe);
    steps.push(super::gates::plan_gates(node, recipe, cfg, |run| {
        expand(run, node, report)
    })?);
    if drains {
        let slurm = spec.backend == DrainBackend::Slurm;
        let back = (slurm || kept.is_some()).then(|| GiveBack {
            read: read.filter(|_| slurm),
            reason: slurm.then(|| reason.clone()),
            undrain: slurm.then(|| drain::undrain_command(spec, node)),
            kept: kept.clone(),
        });
        steps.push(Step::Uncordon {
            commands: if kept.is_some() && !slurm {
                Vec::new()
            } else {
                drain::uncordon_commands(spec, node)
            },
            timeout_s: cfg.drain_timeout,
            back,
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
        note: None,
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

/// The plan of `n`: its recipe ([`recipe_for`]) through [`node_plan_in`], with `note`.
#[allow(clippy::too_many_arguments)]
pub(super) fn plan_node(
    n: &Node,
    r: &NodeReport,
    recipes: &BTreeMap<String, Recipe>,
    cfg: &UpgradeConfig,
    rollout: &str,
    takeover: &[String],
    note: Option<Again>,
    pre: Option<&Taken>,
    recheck: bool,
) -> Result<NodePlan, String> {
    let p = node_plan_in(
        n,
        r,
        recipe_for(n, recipes)?,
        cfg,
        rollout,
        takeover,
        pre,
        recheck,
    )?;
    Ok(NodePlan { note, ..p })
}

/// One error for every node that cannot be planned (each `node: why`, one per line), so an
/// operator fixes them all in one pass; `Ok` when there are none.
pub(super) fn none_unplannable(problems: Vec<String>) -> Result<(), String> {
    match problems.len() {
        0 => Ok(()),
        n => Err(format!(
            "{n} node{} cannot be planned; fix {}, then run again:\n  {}",
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "them all" },
            problems.join("\n  ")
        )),
    }
}

/// The plan as lines for people: each node, its steps with where they run, and every exact
/// command (terminal-safe), then the skipped nodes. A dry run shows each command sent to a node
/// too, exactly ([`plan_lines_with`]).
pub fn plan_lines(plan: &Plan, dry_run: bool) -> Vec<String> {
    plan_lines_with(plan, dry_run, &super::Progress::new())
}

/// [`plan_lines`], where `progress` says how far an earlier run of the plan got (`--resume
/// --dry-run`: a failed recipe step is started again, its launch says `retry`). With `dry_run`
/// every command sent to a node over SSH ([`Step::wire`]: lock, boot identity, launch, poll,
/// kill, unlock, sudo wrapping included) follows its step, exactly as the executor sends it,
/// one line of it after each `| ` ([`super::wire::exact_lines`]); the lock names this
/// process as the operator (`user@host pid N`: a run writes its own pid there).
pub fn plan_lines_with(plan: &Plan, dry_run: bool, progress: &super::Progress) -> Vec<String> {
    let operator = super::operator();
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
    if let Some(b) = &plan.budget {
        out.push(format!("  {}", safe(&b.line())));
    }
    for n in &plan.nodes {
        out.push(format!("  {}", safe(&n.node)));
        if let Some(note) = &n.note {
            out.push(format!("    ({})", safe(&note.why)));
        }
        if let Some(b) = &n.next_boot {
            out.push(format!("    ({})", safe(b)));
        }
        if !n.steps.iter().any(|s| matches!(s, Step::Drain { .. })) {
            out.push(
                "    (no drain: the inventory says `backend = \"none\"` for this node, so its jobs are NOT drained before the recipe runs)"
                    .into(),
            );
        }
        for (seq, s) in n.steps.iter().enumerate() {
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
                    notes.push("reboots: issued once it ends or the node goes away; proven by a new boot identity (wait-ssh)");
                }
            }
            let notes: String = notes.iter().map(|n| format!("; {n}")).collect();
            out.push(format!("    {:<22} [{at}{notes}]", safe(&s.label())));
            out.extend(
                s.shown(&plan.rollout)
                    .iter()
                    .map(|c| format!("        {}", safe(c))),
            );
            if dry_run {
                let retry = progress.get(&(n.node.clone(), seq))
                    == Some(&crate::actions::journal::Phase::Failed);
                for (when, cmd) in s.wire(&plan.rollout, seq, &operator, retry) {
                    out.push(format!(
                        "        sent to the node over SSH, {}:",
                        safe(&when)
                    ));
                    out.extend(super::wire::exact_lines(&cmd, "          "));
                }
            }
        }
    }
    out.extend(
        plan.skipped
            .iter()
            .map(|(n, why)| format!("  skipped {}: {}", safe(n), safe(why))),
    );
    out
}

/// A new rollout id: `r-<UTC time>-<6 random hex digits>` (`r-20261201T221503Z-3f9a2c`), so
/// two rollouts started in the same second, anywhere, have different ids.
#[allow(
    clippy::expect_used,
    reason = "no rollout may start with an id that is not unique: a failing OS RNG stops gpufleet"
)]
pub fn new_id() -> String {
    let t = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let mut b = [0u8; 3];
    getrandom::fill(&mut b).expect("the OS random number generator failed");
    format!("r-{t}-{:02x}{:02x}{:02x}", b[0], b[1], b[2])
}
