//! Rollouts: canaries first, then waves no larger than max-unavailable. Per node: lock →
//! drain → recipe steps → (reboot → wait for SSH) → re-probe → gates → uncordon → unlock. Every
//! step is journaled before it runs; a failed step or gate stops that node and leaves it
//! drained; `--resume` continues a rollout from its journal without repeating completed steps.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::drain::{self, Local};
use super::journal::{Entry, Journal, Phase, who};
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

/// One planned step with its exact commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepPlan {
    /// `lock`, `drain`, `step:<name>`, `wait-ssh:<name>` (after a reboot step), `reprobe`,
    /// `gates`, `uncordon`, `unlock`.
    pub id: String,
    pub at: Where,
    pub commands: Vec<String>,
    /// The step reboots the node.
    #[serde(default)]
    pub reboot: bool,
    /// Run on the node with `sudo -n`.
    #[serde(default)]
    pub sudo: bool,
    /// Run under the node's step lock ([`guarded`]): a recipe step.
    #[serde(default)]
    pub guard: bool,
}

/// One node's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePlan {
    pub node: String,
    pub steps: Vec<StepPlan>,
    /// Where the node's next boot stands before the upgrade (the boot kernel and whether it
    /// has an nvidia.ko), for the plan shown before anything runs.
    #[serde(default)]
    pub next_boot: Option<String>,
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

const MARKER: &str = "var/lib/gpufleet/rollout.lock";

fn quote(s: &str) -> String {
    drain::quote_arg(s)
}

fn root_path(root: &str, rel: &str) -> String {
    format!("{}/{rel}", root.trim_end_matches('/'))
}

/// The node-side lock: `mkdir` is atomic, so two operators cannot both take it; the owner
/// file says which rollout holds it (a resume of the same rollout takes it again).
pub fn lock_command(root: &str, rollout: &str, takeover: &[String]) -> String {
    let m = quote(&root_path(root, MARKER));
    let r = quote(rollout);
    let mut owners = vec![r.clone()];
    owners.extend(takeover.iter().map(|t| quote(t)));
    let test = owners
        .iter()
        .map(|o| format!("[ \"$o\" = {o} ]"))
        .collect::<Vec<_>>()
        .join(" || ");
    format!(
        "mkdir -p \"$(dirname {m})\" && if mkdir {m} 2>/dev/null; then echo {r} > {m}/owner; \
         else o=$(cat {m}/owner 2>/dev/null); if {test}; then echo {r} > {m}/owner; \
         else echo \"locked by rollout $o\" >&2; exit 3; fi; fi"
    )
}

pub fn unlock_command(root: &str) -> String {
    format!("rm -rf {}", quote(&root_path(root, MARKER)))
}

/// Exit status of a guarded step whose previous run still holds the node's step lock.
pub const STEP_BUSY: u32 = 75;

/// `command` under the node's step lock (`flock -n` on `<root>/var/lib/gpufleet/step.lock`,
/// where flock exists): when gpufleet dies mid-step, the step goes on on the node, and a
/// `--resume` must not start it a second time beside it.
pub fn guarded(root: &str, command: &str) -> String {
    let lock = quote(&root_path(root, "var/lib/gpufleet/step.lock"));
    let cmd = quote(command);
    format!(
        "if command -v flock >/dev/null 2>&1; then mkdir -p \"$(dirname {lock})\" && exec flock -n -E {STEP_BUSY} {lock} sh -c {cmd}; else exec sh -c {cmd}; fi"
    )
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
    let here = |cmds: Vec<Local>| cmds.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    let mut steps = vec![StepPlan {
        id: "lock".into(),
        at: Where::Node,
        commands: vec![lock_command(&node.root, rollout, takeover)],
        reboot: false,
        sudo: recipe.sudo,
        guard: false,
    }];
    if node.drain.backend != DrainBackend::None {
        let mut cmds = here(drain::drain_commands(&node.drain, node, timeout, &reason));
        cmds.extend(
            drain::status_command(&node.drain, node).map(|c| format!("until drained: {c}")),
        );
        steps.push(StepPlan {
            id: "drain".into(),
            at: Where::Here,
            commands: cmds,
            reboot: false,
            sudo: false,
            guard: false,
        });
    }
    for s in &recipe.steps {
        steps.push(StepPlan {
            id: format!("step:{}", s.name),
            at: Where::Node,
            commands: vec![expand(&s.run, node, report)?],
            reboot: s.reboot,
            sudo: recipe.sudo,
            guard: true,
        });
        if s.reboot {
            steps.push(StepPlan {
                id: format!("wait-ssh:{}", s.name),
                at: Where::Gpufleet,
                commands: vec![format!("wait up to {} s for SSH", cfg.reboot_timeout)],
                reboot: false,
                sudo: false,
                guard: false,
            });
        }
    }
    let gates: Vec<&str> = cfg.gates.iter().map(|g| g.name()).collect();
    steps.push(StepPlan {
        id: "reprobe".into(),
        at: Where::Gpufleet,
        commands: vec!["the read-only probe".into()],
        reboot: false,
        sudo: false,
        guard: false,
    });
    steps.push(StepPlan {
        id: "gates".into(),
        at: Where::Gpufleet,
        commands: vec![gates.join(", ")],
        reboot: false,
        sudo: false,
        guard: false,
    });
    if node.drain.backend != DrainBackend::None {
        steps.push(StepPlan {
            id: "uncordon".into(),
            at: Where::Here,
            commands: here(drain::uncordon_commands(&node.drain, node)),
            reboot: false,
            sudo: false,
            guard: false,
        });
    }
    steps.push(StepPlan {
        id: "unlock".into(),
        at: Where::Node,
        commands: vec![unlock_command(&node.root)],
        reboot: false,
        sudo: recipe.sudo,
        guard: false,
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

/// Plans an upgrade of exactly `chosen` (the TUI's marked nodes), as one wave: each must be
/// `migrate` and have a recipe; non-canary nodes only once every canary of `canaries` is done.
pub fn plan_selected(
    chosen: &[(Node, NodeReport)],
    canaries: &[(String, Option<NodeStatus>)],
    journal: &[Entry],
    cfg: &UpgradeConfig,
    recipes: &BTreeMap<String, Recipe>,
    rollout: &str,
) -> Result<Plan, String> {
    let finished = finished_nodes(journal);
    let with_canary = chosen.iter().any(|(n, _)| n.canary);
    let with_other = chosen.iter().any(|(n, _)| !n.canary);
    if with_canary && with_other {
        return Err("canaries go alone: mark only canaries, or only other nodes".into());
    }
    if with_other {
        canaries_done(canaries, &finished)?;
    }
    if chosen.len() > cfg.max_unavailable.max(1) {
        return Err(format!(
            "{} nodes chosen, more than max_unavailable ({}): choose fewer",
            chosen.len(),
            cfg.max_unavailable
        ));
    }
    let mut nodes = Vec::new();
    for (n, r) in chosen {
        if operator_managed(r) {
            return Err(format!("{}: {OPERATOR_SKIP}", n.name));
        }
        if r.status != NodeStatus::Migrate {
            return Err(format!(
                "{}: status {} ({}); only migrate nodes are upgraded",
                n.name,
                r.status,
                r.status.meaning()
            ));
        }
        nodes.push(node_plan(
            n,
            r,
            recipe_for(n, recipes)?,
            cfg,
            rollout,
            &abandoned(journal),
        )?);
    }
    let mode = if chosen.iter().all(|(n, _)| n.canary) {
        Mode::Canary
    } else {
        Mode::Wave
    };
    Ok(Plan {
        rollout: rollout.to_string(),
        mode,
        nodes,
        skipped: Vec::new(),
    })
}

/// The plan as lines for people: each node, its steps with where they run, and every exact
/// command (terminal-safe), then the skipped nodes.
pub fn plan_lines(plan: &Plan, dry_run: bool) -> Vec<String> {
    let safe = |s: &str| crate::model::text::terminal_safe(s).into_owned();
    let mut out = vec![format!(
        "rollout {} ({:?}): {} node(s){}",
        plan.rollout,
        plan.mode,
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
            let at = match s.at {
                Where::Here => "here",
                Where::Node => "node",
                Where::Gpufleet => "gpufleet",
            };
            let sudo = match (s.sudo, s.guard) {
                (true, true) => {
                    " (sudo -n, one run at a time: flock <root>/var/lib/gpufleet/step.lock)"
                }
                (false, true) => " (one run at a time: flock <root>/var/lib/gpufleet/step.lock)",
                (true, false) => " (sudo -n)",
                (false, false) => "",
            };
            out.push(format!("    {:<22} [{at}{sudo}]", safe(&s.id)));
            out.extend(s.commands.iter().map(|c| format!("        {}", safe(c))));
        }
    }
    out.extend(
        plan.skipped
            .iter()
            .map(|(n, why)| format!("  skipped {}: {}", safe(n), safe(why))),
    );
    out
}

/// Gate results for a re-probed node: the gates that failed, with why.
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
            Gate::OpenModule => {
                let f = report
                    .driver
                    .as_ref()
                    .map(|d| d.flavor.as_str())
                    .unwrap_or("unknown");
                (f != "open").then(|| format!("module flavour is {f}"))
            }
            Gate::NoPeermem => {
                let p = report.peermem.as_ref();
                let loaded = p.and_then(|p| p.loaded);
                let configured = p.and_then(|p| p.configured);
                let word = |b: Option<bool>| match b {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "unknown",
                };
                (loaded != Some(false) || configured != Some(false)).then(|| {
                    format!(
                        "nvidia-peermem loaded: {}, configured at boot: {}",
                        word(loaded),
                        word(configured)
                    )
                })
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
                    Some(bad.join(", "))
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
                let d = report.dma_buf.as_ref().and_then(|d| d.kernel_support);
                (!no_rdma && d != Some(true)).then(|| {
                    format!(
                        "DMA-BUF kernel support is {}",
                        d.map_or("unknown", |b| if b { "yes" } else { "no" })
                    )
                })
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
                (!errs.is_empty()).then(|| errs.join(", "))
            }
        };
        if let Some(w) = why {
            failed.push(format!("{}: {w}", g.name()));
        }
    }
    failed
}

/// Runs plans: owns the journal and the write permit.
pub struct Executor {
    pub permit: WritePermit,
    pub journal: Mutex<Journal>,
    pub scan: Arc<Scan>,
    pub cfg: UpgradeConfig,
    /// (node, step) pairs already done in this rollout (from the journal, on resume).
    pub done: HashSet<(String, String)>,
    /// Progress lines for the operator.
    pub log: Box<dyn Fn(&str) + Send + Sync>,
    /// Nodes failed so far in this run; past `cfg.max_failures` no node starts another step.
    pub failures: std::sync::atomic::AtomicUsize,
}

/// How one node's rollout ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOutcome {
    pub node: String,
    /// `None` on success; else the step that failed and why (the node stays drained).
    pub failure: Option<(String, String)>,
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

impl Executor {
    fn write(
        &self,
        rollout: &str,
        node: &str,
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
            phase,
            command: command.into(),
            outcome: outcome.into(),
        };
        self.journal
            .lock()
            .expect("journal lock")
            .append(&e)
            .map_err(|e| format!("journal: {e}"))
    }

    /// Records the start of `plan` (with the whole plan, for `--resume`).
    pub fn start(&self, plan: &Plan) -> Result<(), String> {
        let json = serde_json::to_string(plan).map_err(|e| e.to_string())?;
        self.write(&plan.rollout, "", "rollout", Phase::Start, "", &json)
    }

    /// Runs every node of `plan` at once (`nodes` are the inventory's entries for them),
    /// writes the rollout's end, and returns each node's outcome and a one-line summary.
    pub async fn run_plan(
        self: std::sync::Arc<Self>,
        plan: &Plan,
        nodes: Vec<Node>,
    ) -> (Vec<NodeOutcome>, String) {
        let mut set = tokio::task::JoinSet::new();
        for np in &plan.nodes {
            let Some(node) = nodes.iter().find(|n| n.name == np.node).cloned() else {
                continue;
            };
            let (ex, id, np) = (self.clone(), plan.rollout.clone(), np.clone());
            set.spawn(async move { ex.run_node(&id, &node, &np).await });
        }
        let mut outcomes = Vec::new();
        while let Some(r) = set.join_next().await {
            if let Ok(o) = r {
                outcomes.push(o);
            }
        }
        let failed: Vec<String> = outcomes
            .iter()
            .filter_map(|o| {
                let (step, why) = o.failure.as_ref()?;
                Some(format!(
                    "{} stopped at {step}{}: {why}",
                    o.node,
                    drained_note(plan, &o.node, step)
                ))
            })
            .collect();
        let phase = if failed.is_empty() {
            Phase::Done
        } else {
            Phase::Failed
        };
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
        let _ = self.write(&plan.rollout, "", "rollout", phase, "", &summary);
        (outcomes, summary)
    }

    async fn remote(
        &self,
        node: &Node,
        command: &str,
        sudo: bool,
        timeout: Duration,
    ) -> Result<ssh::ExecOutput, ssh::Unreachable> {
        let session = ssh::connect(node, &self.scan.ssh, self.scan.keys.clone()).await?;
        let cmd = if sudo {
            format!("sudo -n sh -c {}", quote(command))
        } else {
            command.to_string()
        };
        let out = session
            .exec(
                &cmd,
                b"",
                tokio::time::Instant::now() + timeout,
                1 << 20,
                true,
            )
            .await;
        session.close().await;
        out
    }

    async fn wait_ssh(&self, node: &Node) -> Result<String, String> {
        let start = Instant::now();
        let limit = Duration::from_secs(self.cfg.reboot_timeout);
        // Give the reboot a moment to take the node down.
        tokio::time::sleep(Duration::from_secs(2)).await;
        loop {
            match self
                .remote(node, "true", false, Duration::from_secs(10))
                .await
            {
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

    async fn run_step(
        &self,
        rollout: &str,
        node: &Node,
        step: &StepPlan,
        report: &mut Option<NodeReport>,
    ) -> Result<String, String> {
        match step.at {
            Where::Here => {
                let timeout = Duration::from_secs(self.cfg.drain_timeout);
                let mut said = Vec::new();
                let cmds = if step.id == "drain" {
                    drain::drain_commands(
                        &node.drain,
                        node,
                        timeout,
                        &format!("gpufleet rollout {rollout}"),
                    )
                } else {
                    drain::uncordon_commands(&node.drain, node)
                };
                for c in &cmds {
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
                if step.id == "drain"
                    && let Some(status) = drain::status_command(&node.drain, node)
                {
                    let start = Instant::now();
                    loop {
                        let out =
                            drain::run(&self.permit, &status, Duration::from_secs(60)).await?;
                        let drained = drain::drained(node.drain.backend, &out.output, out.success);
                        if drained {
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
            Where::Node => {
                let timeout = Duration::from_secs(self.cfg.step_timeout);
                let command = if step.guard {
                    guarded(&node.root, &step.commands[0])
                } else {
                    step.commands[0].clone()
                };
                let out = self
                    .remote(node, &command, step.sudo, timeout)
                    .await
                    .map_err(|u| u.message);
                if let Ok(o) = &out
                    && o.exit_status == Some(STEP_BUSY)
                {
                    return Err(
                        "a previous run of this step is still running on the node (gpufleet was stopped while it ran); wait for it to end, then --resume".into(),
                    );
                }
                match (out, step.reboot) {
                    // A reboot may cut the connection before any exit status: expected.
                    (Err(e), true) => Ok(format!("reboot issued (connection: {e})")),
                    (Ok(o), true) if o.exit_status.is_none_or(|s| s == 0) => {
                        Ok(format!("reboot issued {}", excerpt(&o.output)))
                    }
                    (Ok(o), _) if o.exit_status == Some(0) => Ok(excerpt(&o.output)),
                    (Ok(o), _) => Err(format!(
                        "{}: {}",
                        o.exit_status
                            .map_or("cut off (no exit status)".to_string(), |s| format!(
                                "exit status {s}"
                            )),
                        excerpt(&o.output)
                    )),
                    (Err(e), false) => Err(e),
                }
            }
            Where::Gpufleet => match step.id.as_str() {
                id if id.starts_with("wait-ssh") => self.wait_ssh(node).await,
                "reprobe" => {
                    let (r, _) = self.scan.probe_node(node).await;
                    let s = format!("status {}", r.status);
                    let bad = r.status == NodeStatus::Unreachable;
                    *report = Some(r);
                    if bad { Err(s) } else { Ok(s) }
                }
                "gates" => {
                    let r = match report.take() {
                        Some(r) => r,
                        None => self.scan.probe_node(node).await.0,
                    };
                    let failed = check_gates(&r, &self.cfg.gates);
                    if failed.is_empty() {
                        Ok(format!("passed: {}", step.commands.join(", ")))
                    } else {
                        Err(failed.join("; "))
                    }
                }
                other => Err(format!("unknown step {other}")),
            },
        }
    }

    /// Runs one node's plan, skipping steps done before; stops at the first failure.
    pub async fn run_node(&self, rollout: &str, node: &Node, plan: &NodePlan) -> NodeOutcome {
        let mut report = None;
        for step in &plan.steps {
            if self.done.contains(&(node.name.clone(), step.id.clone())) {
                (self.log)(&format!("{}: {} done before, skipped", node.name, step.id));
                continue;
            }
            let failures = self.failures.load(std::sync::atomic::Ordering::SeqCst);
            if failures > self.cfg.max_failures {
                let why = format!(
                    "halted: {failures} node(s) failed, more than max_failures ({}); `--resume` goes on from here",
                    self.cfg.max_failures
                );
                (self.log)(&format!("{}: {why}", node.name));
                return NodeOutcome {
                    node: node.name.clone(),
                    failure: Some((step.id.clone(), why)),
                };
            }
            let cmd = step.commands.join(" && ");
            if let Err(e) = self.write(rollout, &node.name, &step.id, Phase::Start, &cmd, "") {
                return NodeOutcome {
                    node: node.name.clone(),
                    failure: Some((step.id.clone(), e)),
                };
            }
            (self.log)(&format!("{}: {} …", node.name, step.id));
            match self.run_step(rollout, node, step, &mut report).await {
                Ok(out) => {
                    let _ = self.write(rollout, &node.name, &step.id, Phase::Done, &cmd, &out);
                    (self.log)(&format!("{}: {} done", node.name, step.id));
                }
                Err(why) => {
                    let _ = self.write(rollout, &node.name, &step.id, Phase::Failed, &cmd, &why);
                    self.failures
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    (self.log)(&format!("{}: {} FAILED: {why}", node.name, step.id));
                    return NodeOutcome {
                        node: node.name.clone(),
                        failure: Some((step.id.clone(), why)),
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

/// " and stays drained" when `node` stopped at or after its drain step (a node stopped by its
/// lock was never drained by this rollout).
pub fn drained_note(plan: &Plan, node: &str, step: &str) -> &'static str {
    let Some(np) = plan.nodes.iter().find(|n| n.node == node) else {
        return "";
    };
    let pos = |id: &str| np.steps.iter().position(|s| s.id == id);
    match (pos("drain"), pos(step)) {
        (Some(d), Some(s)) if s >= d => " and stays drained",
        _ => "",
    }
}

/// The latest rollout in the journal that has no end entry: its plan, and the steps done.
pub fn unfinished(journal: &[Entry]) -> Option<(Plan, HashSet<(String, String)>)> {
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
    let done = journal
        .iter()
        .filter(|e| e.rollout == start.rollout && e.phase == Phase::Done && !e.node.is_empty())
        .map(|e| (e.node.clone(), e.step.clone()))
        .collect();
    Some((plan, done))
}

/// Rollouts given up with `--abandon`: their node markers may be taken over.
pub fn abandoned(journal: &[Entry]) -> Vec<String> {
    journal
        .iter()
        .filter(|e| e.step == "rollout" && e.phase == Phase::Abandoned)
        .map(|e| e.rollout.clone())
        .collect()
}

/// A new rollout id: `r-<UTC time>-<mode>`.
pub fn new_id(mode: Mode) -> String {
    let t = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let m = match mode {
        Mode::Canary => "canary",
        Mode::Wave => "wave",
    };
    format!("r-{t}-{m}")
}

/// The local lock: one rollout at a time from this state folder. Held while the file lives.
pub fn lock_local(state_dir: &Path) -> Result<std::fs::File, String> {
    std::fs::create_dir_all(state_dir).map_err(|e| format!("{}: {e}", state_dir.display()))?;
    let path = state_dir.join("rollout.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.try_lock().map_err(|_| {
        format!(
            "another gpufleet rollout holds {}; wait for it, or check `gpufleet journal`",
            path.display()
        )
    })?;
    Ok(f)
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
        let steps: Vec<&str> = p.nodes[0].steps.iter().map(|s| s.id.as_str()).collect();
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
        assert_eq!(
            p.nodes[0].steps[2].commands[0],
            "apt-get install -y nvidia-driver-535-open"
        );
        assert!(p.nodes[0].steps[2].guard);
        let e = plan(Mode::Wave, &nodes, &canaries, &[], &cfg, &recipes(), "r2").unwrap_err();
        assert!(e.contains("canaries first: c1"), "{e}");
        let journal = vec![Entry {
            ts: String::new(),
            who: String::new(),
            rollout: "r1".into(),
            node: "c1".into(),
            step: "unlock".into(),
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
        assert!(e.contains("GPU Operator"), "{e}");
    }

    #[test]
    fn lock_command_is_atomic_and_reentrant() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let run = |cmd: &str| {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .status()
                .unwrap()
                .code()
        };
        assert_eq!(run(&lock_command(&root, "r1", &[])), Some(0));
        assert_eq!(
            run(&lock_command(&root, "r1", &[])),
            Some(0),
            "the same rollout takes it again"
        );
        assert_eq!(
            run(&lock_command(&root, "r2", &[])),
            Some(3),
            "another rollout is refused"
        );
        assert_eq!(run(&unlock_command(&root)), Some(0));
        assert_eq!(run(&lock_command(&root, "r2", &[])), Some(0));
        // A marker of an abandoned rollout is taken over.
        assert_eq!(
            run(&lock_command(&root, "r3", &["r2".to_string()])),
            Some(0)
        );
        assert!(
            std::fs::read_to_string(dir.path().join(MARKER).join("owner"))
                .unwrap()
                .contains("r3")
        );
    }

    #[test]
    fn guarded_steps_do_not_run_twice_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let first = std::process::Command::new("sh")
            .arg("-c")
            .arg(guarded(&root, "sleep 2"))
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let second = std::process::Command::new("sh")
            .arg("-c")
            .arg(guarded(&root, "true"))
            .status()
            .unwrap();
        assert_eq!(second.code(), Some(STEP_BUSY as i32));
        let mut first = first;
        assert!(first.wait().unwrap().success());
        let third = std::process::Command::new("sh")
            .arg("-c")
            .arg(guarded(&root, "echo 'a b' | grep -q 'a b'"))
            .status()
            .unwrap();
        assert!(third.success());
    }
}
