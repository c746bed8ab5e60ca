//! Steps you can stop: a recipe step's opt-in `kill_after` and `gpufleet upgrade --cancel` kill
//! its process group on the node ([`node_side::kill_command`]), journaled as `kill:<step>`
//! (the command, then what the node said) before the step itself is journaled `failed`. The
//! node stays drained and locked: `--resume` runs the step again (its killed attempt moved
//! aside), `--abandon` gives the rollout up. `step_timeout` never kills: past it gpufleet stops
//! waiting and the step goes on there.

use super::*;

/// What `--cancel` did on one node of the unfinished rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancelled {
    pub node: String,
    /// The step's label (`step:NAME`), where one was running.
    pub step: Option<String>,
    /// What was done, for people (node output in it: escape it where it is shown).
    pub said: String,
}

impl Executor {
    /// Kills the step whose files are `files` on `node`, journaled as `kill:<name>` (`why`:
    /// `kill_after` or `cancel`). `Ok` with what the node said (`gpufleet-kill killed PID
    /// (TERM)`, `… ended RC`, `… gone …`, `… none`); `Err` when the node could not be asked.
    pub(super) async fn kill_step(
        &self,
        rollout: &str,
        node: &Node,
        name: &str,
        files: &StepFiles,
        sudo: bool,
        why: &str,
    ) -> Result<String, String> {
        let cmd = wire::kill(files, why, sudo);
        let label = format!("kill:{name}");
        self.write(rollout, &node.name, None, &label, Phase::Start, &cmd, why)?;
        let r = node_write(
            &self.permit,
            &self.scan,
            node,
            &cmd,
            Duration::from_secs(60 + node_side::KILL_GRACE_S),
        )
        .await;
        let (phase, said) = match r {
            Ok(o) if o.exit_status == Some(0) => (
                Phase::Done,
                String::from_utf8_lossy(&o.output)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim()
                    .trim_start_matches("gpufleet-kill ")
                    .to_string(),
            ),
            Ok(o) => (
                Phase::Failed,
                format!("{}: {}", exit_words(&o), excerpt(&o.output)),
            ),
            Err(u) => (Phase::Failed, u.message),
        };
        let _ = self.write(rollout, &node.name, None, &label, phase, &cmd, &said);
        (self.log)(&format!("{}: step:{name} {why}: {said}", node.name));
        if phase == Phase::Done {
            Ok(said)
        } else {
            Err(said)
        }
    }

    /// `gpufleet upgrade --cancel`: for each node of `plan` whose recipe step started and did
    /// not end (`progress`; or failed last: one that outlived `step_timeout` goes on there),
    /// kills it on the node and journals the step `failed` ("cancelled
    /// by the operator"); the node stays drained and locked. `nodes`: how to reach them. A node
    /// at another step has nothing on the node to stop: it is said so.
    pub async fn cancel(&self, plan: &Plan, nodes: &[Node]) -> Vec<Cancelled> {
        let mut out = Vec::new();
        for np in &plan.nodes {
            // The node's last step journaled: one that started and did not end, or a recipe
            // step that failed (past step_timeout it goes on there; a kill of an ended one
            // says so and stops nothing).
            let at = (0..np.steps.len())
                .rev()
                .find(|s| self.progress.contains_key(&(np.node.clone(), *s)))
                .filter(|s| match self.progress.get(&(np.node.clone(), *s)) {
                    Some(Phase::Start) => true,
                    Some(Phase::Failed) => matches!(np.steps[*s], Step::Recipe { .. }),
                    _ => false,
                });
            let Some(seq) = at else {
                out.push(Cancelled {
                    node: np.node.clone(),
                    step: None,
                    said: "no step running".into(),
                });
                continue;
            };
            let step = &np.steps[seq];
            let label = step.label();
            let Step::Recipe {
                name, sudo, root, ..
            } = step
            else {
                out.push(Cancelled {
                    node: np.node.clone(),
                    step: Some(label.clone()),
                    said: format!(
                        "{label} runs in gpufleet, not on the node: nothing to stop there (stop the rollout's gpufleet process, if it runs)"
                    ),
                });
                continue;
            };
            let Some(node) = nodes.iter().find(|n| n.name == np.node) else {
                out.push(Cancelled {
                    node: np.node.clone(),
                    step: Some(label),
                    said: "not in the inventory any more: gpufleet cannot reach it".into(),
                });
                continue;
            };
            let files = StepFiles::new(root, &plan.rollout, seq, name);
            let said = match self
                .kill_step(&plan.rollout, node, name, &files, *sudo, "cancel")
                .await
            {
                // It ended on its own meanwhile, or never started: nothing was stopped, and
                // the journal does not say it was (`--resume` takes its status, or starts it).
                Ok(said) if !(said.starts_with("killed") || said.starts_with("gone")) => {
                    format!("nothing to stop: {said}")
                }
                Ok(said) => {
                    let why = format!(
                        "cancelled by the operator (gpufleet upgrade --cancel): {said}; the node stays drained and locked: `gpufleet upgrade --resume` runs the step again, `--abandon` gives the rollout up"
                    );
                    let _ = self.write(
                        &plan.rollout,
                        &np.node,
                        Some(seq),
                        &label,
                        Phase::Failed,
                        "",
                        &why,
                    );
                    said
                }
                Err(e) => format!("could not be stopped: {e}"),
            };
            out.push(Cancelled {
                node: np.node.clone(),
                step: Some(label),
                said,
            });
        }
        out
    }
}
