//! The executor: the only part of rollouts that runs commands (here, and on nodes over SSH)
//! and writes the journal.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::actions::drain::{self, Local};
use crate::actions::journal::{Entry, Journal, Phase, who};
use crate::actions::node_side::{self, StepFiles, StepState};
use crate::actions::permit::WritePermit;
use crate::config::UpgradeConfig;
use crate::inventory::Node;
use crate::model::report::NodeReport;
use crate::model::{Code, NodeStatus};
use crate::probe::scan::{Scan, now_rfc3339};
use crate::probe::ssh;

mod node;
use node::Stop;
pub use node::{stopped_words, summarize};
mod kill;
mod reboot;
pub use kill::Cancelled;
mod notify;
pub use notify::{Event, EventSink, HOOK_TIMEOUT_S};

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
    /// Each node's boot identity read before a reboot step (node, step name); on resume, read
    /// back from the journal.
    boots: Mutex<HashMap<(String, String), node_side::BootIdentity>>,
    /// Each node step's last phase: `progress`, then every entry this run writes (what the
    /// report says of a node's drain comes from it: [`drained_state`]).
    phases: Mutex<Progress>,
    /// Where every journal entry also goes as a progress event (`--events FILE`).
    events: Mutex<Option<EventSink>>,
    /// `[upgrade] on_failure` and `on_success`.
    hooks: (Option<String>, Option<String>),
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
    /// `None` on success (or when skipped); else where it stopped and why.
    pub failure: Option<Failure>,
    /// Skipped, nothing done, with why: another rollout holds the node's lock (its rollout,
    /// operator `user@host pid N` and since when, as its lock says), or the node changed since
    /// the plan (it is `ready` now). Not a failure: the rest of the wave goes on.
    pub skipped: Option<String>,
    /// What this rollout left of its drain on the node (from the journal's phases).
    pub drained: Drained,
    /// A node gpufleet did not drain ([`Drained::Kept`]): what its give-back said (`down after
    /// reboot, admin drain kept (…)`, `not resumed: gpufleet did not drain it …`), when it ran
    /// in this run.
    pub kept: Option<String>,
}

pub(super) fn excerpt(b: &[u8]) -> String {
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
    tail
}

/// `user@host pid N`: who runs this process.
pub fn operator() -> String {
    format!("{} pid {}", who(), std::process::id())
}

async fn exec(
    session: &ssh::Session,
    command: &str,
    timeout: Duration,
) -> Result<ssh::ExecOutput, ssh::Unreachable> {
    session
        .exec(
            command,
            b"",
            tokio::time::Instant::now() + timeout,
            1 << 20,
            true,
        )
        .await
}

/// Runs a write-side `command` on `node` over a fresh SSH connection, exactly as given (the
/// strings of [`super::wire`], sudo wrapping included). Needs the write permit.
pub async fn node_write(
    _permit: &WritePermit,
    scan: &Scan,
    node: &Node,
    command: &str,
    timeout: Duration,
) -> Result<ssh::ExecOutput, ssh::Unreachable> {
    let session = ssh::connect(&node.endpoint(), &scan.ssh, scan.keys.clone()).await?;
    let out = exec(&session, command, timeout).await;
    session.close().await;
    out
}

/// Starts (or attaches to) a recipe step on the node ([`wire::launch`]): a write.
/// Needs the write permit.
pub async fn launch_step(
    _permit: &WritePermit,
    session: &ssh::Session,
    launch: &str,
) -> Result<ssh::ExecOutput, ssh::Unreachable> {
    exec(session, launch, Duration::from_secs(60)).await
}

/// A read-only command on `node` (no permit: it changes nothing).
pub(super) async fn node_read(
    scan: &Scan,
    node: &Node,
    command: &str,
    timeout: Duration,
) -> Result<ssh::ExecOutput, ssh::Unreachable> {
    let session = ssh::connect(&node.endpoint(), &scan.ssh, scan.keys.clone()).await?;
    let out = exec(&session, command, timeout).await;
    session.close().await;
    out
}

pub(super) fn exit_words(o: &ssh::ExecOutput) -> String {
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
        let progress_copy = progress.clone();
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
            boots: Mutex::new(HashMap::new()),
            phases: Mutex::new(progress_copy),
            events: Mutex::new(None),
            hooks: (cfg.on_failure.clone(), cfg.on_success.clone()),
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
        if let Some(seq) = seq.filter(|_| !node.is_empty()) {
            self.phases
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .record(node, seq, step, phase, outcome);
        }
        if let Some(ev) = self
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            ev.emit(rollout, node, step, notify::state_word(phase), outcome);
        }
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
        plan: &Plan,
        node: &str,
        seq: Option<usize>,
        step: &str,
        why: String,
    ) -> NodeOutcome {
        let _ = self.write(&plan.rollout, node, seq, step, Phase::Failed, "", &why);
        self.failures.fetch_add(1, Ordering::SeqCst);
        (self.log)(&format!("{node}: {step} FAILED: {why}"));
        let drained = plan
            .nodes
            .iter()
            .find(|n| n.node == node)
            .map_or(Drained::No, |np| self.drained(np));
        NodeOutcome {
            node: node.to_string(),
            failure: Some(Failure {
                seq,
                step: step.to_string(),
                why,
            }),
            skipped: None,
            drained,
            kept: None,
        }
    }

    /// Runs every node of `plan` at once (`nodes`: how to reach them, from the inventory),
    /// writes the rollout's end, and returns each node's outcome and a one-line summary. A
    /// node task that panics or is cancelled is that node's failure; the rollout is `done`
    /// only when every node of the plan finished or was skipped (another rollout holds it),
    /// `skipped` when each node was ([`summarize`]).
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
                    plan,
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
        for o in &outcomes {
            self.hook(&plan.rollout, o).await;
        }
        while let Some(r) = set.join_next_with_id().await {
            match r {
                Ok((_, o)) => {
                    self.hook(&plan.rollout, &o).await;
                    outcomes.push(o)
                }
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
                    let o = self.node_failed(plan, &node, seq, &label, why);
                    self.hook(&plan.rollout, &o).await;
                    outcomes.push(o);
                }
            }
        }
        let (phase, summary) = summarize(plan, &outcomes);
        let _ = self.write(&plan.rollout, "", None, "rollout", phase, "", &summary);
        (outcomes, summary)
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
    /// the node, within `timeout_s` (past it the step goes on there: `--resume` waits for it).
    /// With `kill_after` its process group is killed once it ran that long, as the node says
    /// (journaled `kill:<name>`), and the step fails. A reboot step succeeds when the node goes
    /// away.
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
        kill_after: Option<u64>,
    ) -> Result<String, String> {
        let files = StepFiles::new(root, rollout, seq, name);
        let retry = self.progress.get(&(node.name.clone(), seq)) == Some(&Phase::Failed);
        let start = Instant::now();
        let timeout = Duration::from_secs(timeout_s);
        let session = ssh::connect(&node.endpoint(), &self.scan.ssh, self.scan.keys.clone())
            .await
            .map_err(|u| u.message)?;
        let launch = wire::launch(&files, run, timeout_s, retry, sudo);
        let attached = match launch_step(&self.permit, &session, &launch).await {
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
        let poll = wire::poll(&files, sudo);
        loop {
            tokio::time::sleep(pause).await;
            pause = Duration::from_secs(1);
            let s = match session.take() {
                Some(s) => Ok(s),
                None => {
                    ssh::connect(&node.endpoint(), &self.scan.ssh, self.scan.keys.clone()).await
                }
            };
            let polled = match s {
                Ok(s) => {
                    let r = exec(&s, &poll, Duration::from_secs(30)).await;
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
                Ok(StepState::Running(age))
                    if kill_after
                        .is_some_and(|k| age.unwrap_or(start.elapsed().as_secs()) >= k) =>
                {
                    if let Some(s) = session.take() {
                        s.close().await;
                    }
                    let k = kill_after.unwrap_or_default();
                    let said = self
                        .kill_step(rollout, node, name, &files, sudo, "kill_after")
                        .await?;
                    return Err(format!(
                        "killed at its kill_after of {k} s ({said}); `gpufleet upgrade --resume` runs it again"
                    ));
                }
                Ok(StepState::Running(_)) if over => {
                    if let Some(s) = session.take() {
                        s.close().await;
                    }
                    return Err(format!(
                        "still running on the node after {timeout_s} s; it goes on there: `gpufleet upgrade --resume` waits for it again"
                    ));
                }
                Ok(StepState::Running(_)) => {}
                Ok(StepState::Done(rc, out)) if node_side::killed_status(&rc).is_some() => {
                    if let Some(s) = session.take() {
                        s.close().await;
                    }
                    let why = match node_side::killed_status(&rc) {
                        Some("cancel") => "cancelled by the operator (gpufleet upgrade --cancel)",
                        Some("kill_after") => "killed at its kill_after",
                        _ => "killed on the node",
                    };
                    return Err(format!(
                        "{why}: the step was killed on the node{recorded}: {}; `gpufleet upgrade --resume` runs it again",
                        excerpt(out.as_bytes())
                    ));
                }
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
                Ok(StepState::Busy(holder)) => {
                    return Err(format!(
                        "another step held the node's step lock ({}; held by {}) for {timeout_s} s: this step did not run; `gpufleet upgrade --resume` starts it once the lock is free",
                        files.lock,
                        if holder.is_empty() {
                            "an unknown holder"
                        } else {
                            holder.as_str()
                        }
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

    /// The `nccl-dmabuf` gate: the test run on the canary over SSH ([`NcclTest::wire`]), its
    /// output judged with the fresh re-probe `r` ([`nccl_verdict`]).
    async fn nccl_test(&self, node: &Node, t: &NcclTest, r: &NodeReport) -> Result<String, String> {
        let session = ssh::connect(&node.endpoint(), &self.scan.ssh, self.scan.keys.clone())
            .await
            .map_err(|u| format!("the test could not be started: {}", u.message))?;
        let o = session
            .exec(
                &t.wire(),
                b"",
                tokio::time::Instant::now() + Duration::from_secs(t.timeout_s),
                NCCL_OUTPUT_CAP,
                true,
            )
            .await;
        session.close().await;
        let o = o.map_err(|u| format!("the test did not run: {}", u.message))?;
        let exit = match (o.end, o.exit_status) {
            (crate::probe::RunEnd::CapExceeded, _) => Some(format!(
                "printed more than {} MiB (reading stopped; NCCL_DEBUG_SUBSYS=INIT,NET shortens the log)",
                NCCL_OUTPUT_CAP >> 20
            )),
            (crate::probe::RunEnd::Deadline, _) => {
                Some(format!("ran past {} s (step_timeout)", t.timeout_s))
            }
            (_, Some(0)) => None,
            _ => Some(exit_words(&o)),
        };
        nccl_verdict(&o.output, exit, node, r)
    }

    /// Releases `rollout`'s lock on `node` (only that rollout's).
    async fn unlock(
        &self,
        rollout: &str,
        node: &Node,
        root: &str,
        sudo: bool,
    ) -> Result<String, String> {
        let cmd = wire::unlock(root, rollout, sudo);
        let o = node_write(
            &self.permit,
            &self.scan,
            node,
            &cmd,
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

    /// Runs step `seq` of `np` (a lock refused for another rollout is an `Err` here:
    /// [`Executor::run_node`] runs the lock through [`Executor::lock`], where it is a skip).
    async fn run_step(
        &self,
        rollout: &str,
        seq: usize,
        node: &Node,
        np: &NodePlan,
        report: &mut Option<NodeReport>,
    ) -> Result<String, String> {
        let Some(step) = np.steps.get(seq) else {
            return Err(format!("internal error: no step {seq} in the node's plan"));
        };
        match step {
            Step::Lock {
                root,
                sudo,
                takeover,
            } => self
                .lock(rollout, node, np, root, *sudo, takeover)
                .await
                .map_err(Stop::into_why),
            Step::Unlock { root, sudo } => self.unlock(rollout, node, root, *sudo).await,
            Step::Drain {
                guard,
                commands,
                until,
                check,
                timeout_s,
                pre,
                recheck,
            } => {
                let timeout = Duration::from_secs(*timeout_s);
                // Read again unless an earlier run of this rollout started this drain.
                let started = self.progress.contains_key(&(node.name.clone(), seq));
                if let Some(r) = recheck.as_ref().filter(|_| !started) {
                    crate::actions::scheduler::still_in_service(r, rollout).await?;
                }
                if let Some(g) = guard {
                    let out = drain::run(&self.permit, g, Duration::from_secs(60)).await?;
                    drain::operator_guard(&out)?;
                }
                let mut said = self.here(commands, timeout).await?;
                if let Some(p) = pre {
                    said.insert(
                        0,
                        format!("not drained by gpufleet (out of service before: {p})"),
                    );
                }
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
                back,
            } => {
                crate::actions::scheduler::give_back(
                    &self.permit,
                    commands,
                    back.as_ref(),
                    Duration::from_secs(*timeout_s),
                )
                .await
            }
            Step::Recipe {
                name,
                run,
                reboot,
                sudo,
                root,
                timeout_s,
                kill_after_s,
            } => {
                self.recipe_step(
                    rollout,
                    seq,
                    node,
                    name,
                    run,
                    *reboot,
                    *sudo,
                    root,
                    *timeout_s,
                    *kill_after_s,
                )
                .await
            }
            Step::BootId { before, root } => self.read_boot(node, before, root).await,
            Step::WaitSsh {
                after,
                timeout_s,
                root,
            } => {
                self.wait_reboot(rollout, node, after, root, *timeout_s)
                    .await
            }
            Step::Reprobe => {
                let (r, _) = self.scan.probe_node(node).await;
                let s = format!("status {}", r.status);
                let bad = r.status == NodeStatus::Unreachable;
                *report = Some(r);
                if bad { Err(s) } else { Ok(s) }
            }
            Step::Gates { gates, nccl } => {
                let r = match report.take() {
                    Some(r) => r,
                    None => self.scan.probe_node(node).await.0,
                };
                let mut failed = check_gates(&r, gates);
                let names: Vec<&str> = gates.iter().map(|g| g.name()).collect();
                match nccl {
                    None => {}
                    Some(_) if !failed.is_empty() => {
                        failed.push("nccl-dmabuf: not run, the gates above failed".into())
                    }
                    Some(t) => match self.nccl_test(node, t, &r).await {
                        Ok(why) if failed.is_empty() => {
                            return Ok(format!("passed: {}; {why}", names.join(", ")));
                        }
                        Ok(_) => {}
                        Err(why) => failed.push(format!("nccl-dmabuf: {why}")),
                    },
                }
                if failed.is_empty() {
                    Ok(format!("passed: {}", names.join(", ")))
                } else {
                    Err(failed.join("; "))
                }
            }
        }
    }
}
