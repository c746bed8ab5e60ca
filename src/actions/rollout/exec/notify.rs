//! Telling others: progress events as JSON Lines (`gpufleet upgrade --events FILE`: one object
//! a line, `time`, `rollout`, `node`, `step`, `state`, `detail`, for CI and notifications), and
//! the `[upgrade] on_failure` / `on_success` hooks, run here with the node and the rollout in
//! their environment only (never in the command's text), journaled as `hook:on_failure` /
//! `hook:on_success`.

use std::io::Write;

use super::*;

/// One progress event (`gpufleet upgrade --events FILE` writes each as a JSON object on a
/// line; the TUI shows them in its ROLLOUT column). Fields in the order the line has them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    /// What happened, for people (a step's outcome, an excerpt of its output, a failure's
    /// reason; node output in it: escape it where it is shown); absent when empty; at most
    /// 2,000 characters.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The node; absent for the rollout's own events (its start and end, waves).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// The rollout's id (`r-…`; empty for `--until-done`'s last event).
    pub rollout: String,
    /// The journal phase as a word (`start`, `done`, `failed`, `skipped`, `abandoned`) or a
    /// wave's state (`done`, `soak`, `healthy`, …).
    pub state: String,
    /// The step's label (`lock`, `drain`, `boot-id:NAME`, `step:NAME`, `wait-ssh:NAME`,
    /// `reprobe`, `gates`, `uncordon`, `unlock`, `kill:NAME`, `hook:…`, `rollout`, `wave`).
    pub step: String,
    /// When, RFC 3339 UTC.
    pub time: String,
}

/// Where progress events go: a file opened for appending (`--events FILE`; each event one
/// `write` of one line), or a function of the caller (the TUI's channel). Cloned handles go
/// to the same place.
#[derive(Clone)]
pub struct EventSink {
    to: Arc<To>,
}

enum To {
    File(Mutex<std::fs::File>),
    Call(Box<dyn Fn(&Event) + Send + Sync>),
}

/// How long a hook may run before it is killed.
pub const HOOK_TIMEOUT_S: u64 = 60;

impl EventSink {
    /// Opens (creates, appends to) `path`.
    ///
    /// Errors: the file cannot be opened, with its path.
    pub fn open(path: &std::path::Path) -> Result<EventSink, String> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(EventSink {
            to: Arc::new(To::File(Mutex::new(file))),
        })
    }

    /// Events handed to `f`, in the order they happen (it runs in the executor's tasks: it
    /// must not block).
    pub fn call(f: impl Fn(&Event) + Send + Sync + 'static) -> EventSink {
        EventSink {
            to: Arc::new(To::Call(Box::new(f))),
        }
    }

    /// Sends one [`Event`] (`node` and `detail` may be empty; `detail` is cut at 2,000
    /// characters). Errors are ignored: events are for others; the journal is the record.
    pub fn emit(&self, rollout: &str, node: &str, step: &str, state: &str, detail: &str) {
        let ev = Event {
            detail: detail.chars().take(2000).collect(),
            node: node.into(),
            rollout: rollout.into(),
            state: state.into(),
            step: step.into(),
            time: now_rfc3339(),
        };
        match &*self.to {
            To::Call(f) => f(&ev),
            To::File(file) => {
                let Ok(mut line) = serde_json::to_string(&ev) else {
                    return;
                };
                line.push('\n');
                let _ = file
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .write_all(line.as_bytes());
            }
        }
    }
}

/// A phase as an event's `state`.
pub(super) fn state_word(p: Phase) -> &'static str {
    match p {
        Phase::Start => "start",
        Phase::Done => "done",
        Phase::Failed => "failed",
        Phase::Skipped => "skipped",
        Phase::Abandoned => "abandoned",
    }
}

impl Executor {
    /// Sends every journal entry from now on to `sink` as an event too.
    pub fn set_events(&self, sink: EventSink) {
        *self.events.lock().unwrap_or_else(|p| p.into_inner()) = Some(sink);
    }

    /// Runs the hook for `o` (`on_failure` for a failed node, `on_success` for an upgraded one;
    /// none for a skipped one), journaled; its failure is logged and journaled, never the
    /// node's.
    pub(super) async fn hook(&self, rollout: &str, o: &NodeOutcome) {
        let (which, cmd) = match (&o.failure, &o.skipped) {
            (Some(_), _) => ("on_failure", self.hooks.0.as_deref()),
            (None, None) => ("on_success", self.hooks.1.as_deref()),
            (None, Some(_)) => return,
        };
        let Some(cmd) = cmd else { return };
        let label = format!("hook:{which}");
        let (step, reason) = o
            .failure
            .as_ref()
            .map_or((String::new(), String::new()), |f| {
                (f.step.clone(), f.why.clone())
            });
        let state = if o.failure.is_some() {
            "failed"
        } else {
            "upgraded"
        };
        if self
            .write(rollout, &o.node, None, &label, Phase::Start, cmd, "")
            .is_err()
        {
            return;
        }
        let mut c = tokio::process::Command::new("sh");
        c.arg("-c")
            .arg(cmd)
            .env("GPUFLEET_ROLLOUT", rollout)
            .env("GPUFLEET_NODE", &o.node)
            .env("GPUFLEET_STATE", state)
            .env("GPUFLEET_STEP", &step)
            .env("GPUFLEET_REASON", &reason)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let r = tokio::time::timeout(Duration::from_secs(HOOK_TIMEOUT_S), c.output()).await;
        let (phase, said) = match r {
            Err(_) => (
                Phase::Failed,
                format!("did not finish within {HOOK_TIMEOUT_S} s (killed)"),
            ),
            Ok(Err(e)) => (Phase::Failed, e.to_string()),
            Ok(Ok(out)) => {
                let mut b = out.stdout;
                b.extend_from_slice(&out.stderr);
                let text = excerpt(&b);
                if out.status.success() {
                    (Phase::Done, format!("exit status 0: {text}"))
                } else {
                    (
                        Phase::Failed,
                        format!(
                            "exit status {}: {text}",
                            out.status
                                .code()
                                .map_or("by a signal".into(), |c| c.to_string())
                        ),
                    )
                }
            }
        };
        let _ = self.write(rollout, &o.node, None, &label, phase, cmd, &said);
        if phase == Phase::Failed {
            (self.log)(&format!("{}: {label} FAILED: {said}", o.node));
        }
    }
}
