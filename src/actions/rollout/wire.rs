//! What gpufleet sends to a node over SSH for each step, exactly: the node-side commands
//! ([`node_side`]) under `sudo -n sh -c '…'` where the recipe says `sudo = true`. The executor
//! sends these strings and `--dry-run` prints them ([`Step::wire`], [`exact_lines`]): one place
//! builds them, so what is shown is what runs.

use super::*;
use crate::actions::node_side::{self, StepFiles};

/// `command` as sent: unchanged, or `sudo -n sh -c '<command>'` (quoted once) when `sudo`.
pub fn sudo_wrap(command: &str, sudo: bool) -> String {
    if sudo {
        format!("sudo -n sh -c {}", quote(command))
    } else {
        command.to_string()
    }
}

/// The lock step ([`node_side::lock_command`]) as sent.
pub fn lock(root: &str, rollout: &str, operator: &str, takeover: &[String], sudo: bool) -> String {
    sudo_wrap(
        &node_side::lock_command(root, rollout, operator, takeover),
        sudo,
    )
}

/// The unlock step ([`node_side::unlock_command`]) as sent (also `gpufleet unlock`'s).
pub fn unlock(root: &str, rollout: &str, sudo: bool) -> String {
    sudo_wrap(&node_side::unlock_command(root, rollout), sudo)
}

/// The boot identity read ([`node_side::boot_id_command`]) as sent: as the login user, never
/// under sudo (it reads world-readable files).
pub fn boot_id(root: &str) -> String {
    node_side::boot_id_command(root)
}

/// A recipe step's launch ([`node_side::launch_command`]) as sent.
pub fn launch(files: &StepFiles, run: &str, wait_s: u64, retry: bool, sudo: bool) -> String {
    sudo_wrap(&node_side::launch_command(files, run, wait_s, retry), sudo)
}

/// A recipe step's poll ([`node_side::poll_command`]) as sent.
pub fn poll(files: &StepFiles, sudo: bool) -> String {
    sudo_wrap(&node_side::poll_command(files), sudo)
}

/// A recipe step's kill ([`node_side::kill_command`], grace [`node_side::KILL_GRACE_S`]) as
/// sent; `why`: `kill_after` or `cancel`.
pub fn kill(files: &StepFiles, why: &str, sudo: bool) -> String {
    sudo_wrap(
        &node_side::kill_command(files, why, node_side::KILL_GRACE_S),
        sudo,
    )
}

impl Step {
    /// What step `seq` sends to the node over SSH, exactly, each with when it is sent (`retry`:
    /// the journal says the step failed before, so a resume starts it again; `operator`:
    /// `user@host pid N`, written into the node lock). Empty for a step that runs here or in
    /// gpufleet only (drain, uncordon: their commands are [`Step::shown`]; the probe).
    pub fn wire(
        &self,
        rollout: &str,
        seq: usize,
        operator: &str,
        retry: bool,
    ) -> Vec<(String, String)> {
        match self {
            Step::Lock {
                root,
                sudo,
                takeover,
            } => vec![(
                "once".into(),
                lock(root, rollout, operator, takeover, *sudo),
            )],
            Step::Unlock { root, sudo } => vec![("once".into(), unlock(root, rollout, *sudo))],
            Step::BootId { root, .. } => vec![("once".into(), boot_id(root))],
            Step::WaitSsh { root, .. } => vec![(
                "every second until the node answers with a new boot identity".into(),
                boot_id(root),
            )],
            Step::Recipe {
                name,
                run,
                sudo,
                root,
                timeout_s,
                kill_after_s,
                ..
            } => {
                let files = StepFiles::new(root, rollout, seq, name);
                let mut v = vec![
                    (
                        format!(
                            "once, to start it detached{}",
                            if retry {
                                " (a retry: the failed attempt is moved aside)"
                            } else {
                                ""
                            }
                        ),
                        launch(&files, run, *timeout_s, retry, *sudo),
                    ),
                    ("every second until it ends".into(), poll(&files, *sudo)),
                ];
                if let Some(k) = kill_after_s {
                    v.push((
                        format!("after {k} s of running"),
                        kill(&files, "kill_after", *sudo),
                    ));
                }
                v
            }
            Step::Gates { nccl: Some(t), .. } => vec![(
                "once, when the gates above pass (the nccl-dmabuf test; its output is read back)"
                    .into(),
                t.wire(),
            )],
            Step::Drain { .. } | Step::Uncordon { .. } | Step::Reprobe | Step::Gates { .. } => {
                Vec::new()
            }
        }
    }
}

/// The lines that show one command exactly: each of its lines after `| ` (a command's lines are
/// joined with newlines again to read it back); a line with a character that must not reach a
/// terminal raw ([`crate::model::text::is_unsafe`]) is shown escaped after `|~` instead, so it
/// is never taken for the exact text.
pub fn exact_lines(command: &str, indent: &str) -> Vec<String> {
    command
        .split('\n')
        .map(|l| {
            if l.chars().any(crate::model::text::is_unsafe) {
                format!("{indent}|~{}", crate::model::text::terminal_safe(l))
            } else {
                format!("{indent}| {l}")
            }
        })
        .collect()
}

/// Reads [`exact_lines`] back out of printed `text`: each command shown exactly, in order (its
/// `| ` lines joined with newlines); a command with an escaped line is left out.
pub fn read_exact(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<(Vec<&str>, bool)> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("| ").or_else(|| (t == "|").then_some("")) {
            cur.get_or_insert_with(|| (Vec::new(), true)).0.push(rest);
        } else if t.starts_with("|~") {
            cur.get_or_insert_with(|| (Vec::new(), true)).1 = false;
        } else if let Some((lines, ok)) = cur.take()
            && ok
        {
            out.push(lines.join("\n"));
        }
    }
    if let Some((lines, true)) = cur {
        out.push(lines.join("\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{node, recipes, report};
    use super::*;
    use crate::actions::journal::Phase;
    use crate::config::UpgradeConfig;
    use crate::model::NodeStatus;

    /// The dry run of a `sudo = true` recipe shows each node command wrapped exactly as sent,
    /// and a resume's dry run shows a failed step's launch as a retry.
    #[test]
    fn the_dry_run_shows_the_sudo_wrapped_commands_the_executor_sends() {
        let cfg = UpgradeConfig::default();
        let n = node("gpu1", true);
        let p = node_plan(
            &n,
            &report("gpu1", NodeStatus::Migrate),
            &recipes()["r"],
            &cfg,
            "r-1",
            &[],
        )
        .unwrap();
        let plan = Plan {
            rollout: "r-1".into(),
            mode: Mode::Canary,
            nodes: vec![p.clone()],
            skipped: vec![],
            budget: None,
        };
        let text = plan_lines_with(&plan, true, &Progress::new()).join("\n");
        let shown = read_exact(&text);
        let op = operator();
        let files = StepFiles::new(&n.root, "r-1", 2, "install");
        let run = "apt-get install -y nvidia-driver-535-open";
        for want in [
            lock(&n.root, "r-1", &op, &[], true),
            launch(&files, run, cfg.step_timeout, false, true),
            poll(&files, true),
            boot_id(&n.root),
            unlock(&n.root, "r-1", true),
        ] {
            assert!(shown.contains(&want), "{want}\nnot in:\n{text}");
        }
        assert!(
            shown
                .iter()
                .filter(|c| **c != boot_id(&n.root))
                .all(|c| c.starts_with("sudo -n sh -c ")),
            "{shown:#?}"
        );
        assert!(!text.contains("|~"), "{text}");
        // Not a dry run: no command text.
        assert!(read_exact(&plan_lines(&plan, false).join("\n")).is_empty());
        // A resume of a failed step starts it again: the launch says so.
        let mut progress = Progress::new();
        progress.insert(("gpu1".into(), 2), Phase::Failed);
        let again = read_exact(&plan_lines_with(&plan, true, &progress).join("\n"));
        assert!(again.contains(&launch(&files, run, cfg.step_timeout, true, true)));
    }

    #[test]
    fn a_line_that_is_not_safe_to_print_is_escaped_and_never_read_back_as_exact() {
        let lines = exact_lines("echo a\necho \u{1b}[2J", "  ");
        assert_eq!(lines[0], "  | echo a");
        assert!(lines[1].starts_with("  |~echo "), "{lines:?}");
        assert!(read_exact(&lines.join("\n")).is_empty());
        let two = [
            exact_lines("a\n\nb", "  "),
            vec!["x:".into()],
            exact_lines("c", "  "),
        ]
        .concat()
        .join("\n");
        assert_eq!(read_exact(&two), ["a\n\nb", "c"]);
    }
}
