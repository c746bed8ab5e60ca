//! The scheduler's view of each scanned node, joined to its report here, in the use-case layer
//! (docs/domain.md, "The scheduler's view"): the node's state read with the rollout's reader
//! ([`crate::actions::scheduler`], read-only: `scontrol -o show node NAME`, `kubectl get node
//! -o jsonpath=… -- NAME`) while the node is probed, and a node out of service gets an info
//! reason naming that state — `scheduler-down` or `scheduler-drained` — with the scheduler's
//! own words as evidence. The status stays what the probe found (an unreachable node stays
//! `unreachable`): the reason says that the scheduler gives the node no work, so no node the
//! scheduler took out is shown as silently healthy. A read that fails is a `fact-unknown`.
//!
//! Only the Slurm and Kubernetes backends are read: a `command` backend's `status` is an
//! operator's shell command, run by a rollout only.

use std::sync::Arc;
use std::time::Duration;

use crate::actions::drain::{self, LocalOutput};
use crate::actions::scheduler::{self, Parser, State, Taken};
use crate::inventory::{DrainBackend, Node};
use crate::model::facts::Evidence;
use crate::model::report::NodeReport;
use crate::model::{Code, Reason};

/// How long one read may take during a scan (a rollout allows [`scheduler::READ_TIMEOUT`]).
pub const SCAN_READ_TIMEOUT: Duration = Duration::from_secs(20);

/// How many reads run at once across a scan (slurmctld and the API server serve every one).
pub const AT_ONCE: usize = 16;

/// The most evidence lines one reason keeps (a node with many taints).
const MAX_LINES: usize = 16;

/// Reads scheduler states during a scan: the taints that take a Kubernetes node out of
/// service besides the condition taints (`[upgrade] unavailable_taints`), and the bound on
/// reads at once.
pub struct Schedulers {
    taints: Vec<String>,
    at_once: Arc<tokio::sync::Semaphore>,
}

impl Schedulers {
    /// `taints`: `[upgrade] unavailable_taints`.
    pub fn new(taints: Vec<String>) -> Schedulers {
        Schedulers {
            taints,
            at_once: Arc::new(tokio::sync::Semaphore::new(AT_ONCE)),
        }
    }

    /// The reason `node`'s scheduler gives, if any: `None` when its backend is not read
    /// (none, command, no drain setting) or the node is in service; a `scheduler-*` reason
    /// when it is out of service; a `fact-unknown` when the state cannot be read (the tool
    /// failed, timed out, printed more than 1 MiB or what the reader does not understand, or
    /// the node's scheduler name is one gpufleet never hands to a tool).
    pub async fn reason(&self, node: &Node) -> Option<Reason> {
        let spec = node.drain.as_ref()?;
        if !matches!(spec.backend, DrainBackend::Slurm | DrainBackend::Kubernetes) {
            return None;
        }
        if let Err(e) = drain::check_name(spec, node) {
            return Some(unknown(format!("not read: {e}")));
        }
        let read = scheduler::state_read(spec, node, &self.taints)?;
        let out = {
            let _p = self.at_once.acquire().await.ok()?;
            drain::read_only(&read.command, SCAN_READ_TIMEOUT).await
        };
        let out = match out {
            Ok(o) => o,
            Err(e) => return Some(unknown(e)),
        };
        match scheduler::parse(&read.parser, &out) {
            Ok(State::Taken(t)) => Some(taken(&read.parser, &read.command.to_string(), &out, &t)),
            Ok(State::InService) | Ok(State::NotRead { .. }) => None,
            Err(e) => Some(unknown(format!("`{}`: {e}", read.command))),
        }
    }
}

fn unknown(why: String) -> Reason {
    Reason::new(
        Code::FactUnknown,
        format!("scheduler state unknown: {why}"),
        Vec::new(),
    )
}

/// The reason for a node its scheduler took out of service (pure): which code, the words, and
/// the scheduler's own lines as evidence (`source`: the command).
pub fn taken(parser: &Parser, command: &str, out: &LocalOutput, t: &Taken) -> Reason {
    let line = |l: String| Evidence {
        source: command.to_string(),
        line: l,
    };
    let (down, tool, evidence) = match parser {
        Parser::Slurm => match scheduler::slurm_node(&out.output) {
            Ok(n) => {
                let power = n.flags.iter().any(|f| {
                    let f = f.to_ascii_uppercase();
                    f.starts_with("POWER") || f == "INVALID_REG"
                });
                let down = n.down()
                    || n.not_responding
                    || power
                    || !matches!(n.base.as_str(), "IDLE" | "ALLOCATED" | "MIXED");
                let mut l = format!("State={}", n.state);
                if let Some(r) = slurm_reason_field(&out.output) {
                    l.push(' ');
                    l.push_str(r);
                }
                (down, "Slurm", vec![line(l)])
            }
            Err(_) => (false, "Slurm", Vec::new()),
        },
        Parser::Kubernetes { .. } => {
            let lines: Vec<&str> = out
                .output
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect();
            let down = lines.iter().skip(1).any(|l| {
                let mut f = l.split('\t');
                let (key, effect) = (f.next().unwrap_or("").trim(), f.next().unwrap_or("").trim());
                matches!(
                    key,
                    "node.kubernetes.io/not-ready" | "node.kubernetes.io/unreachable"
                ) && matches!(effect, "NoSchedule" | "NoExecute")
            });
            let evidence = lines
                .iter()
                .take(MAX_LINES)
                .map(|l| line(l.to_string()))
                .collect();
            (down, "Kubernetes", evidence)
        }
        Parser::ExitStatus => (false, "its status command", Vec::new()),
    };
    let code = if down {
        Code::SchedulerDown
    } else {
        Code::SchedulerDrained
    };
    Reason::new(
        code,
        format!(
            "out of service in {tool}: {}; probed all the same",
            t.words()
        ),
        evidence,
    )
}

/// The `Reason=…` field of a `scontrol -o show node` line as printed (its `[user@time]`
/// included), up to the fields Slurm prints after it; `None` when absent or `(null)`.
fn slurm_reason_field(text: &str) -> Option<&str> {
    let line = text.lines().find(|l| !l.trim().is_empty())?;
    let at = line.find(" State=")?;
    let start = at + line[at..].find(" Reason=")? + 1;
    let mut end = line.len();
    for next in [" Comment=", " Extra="] {
        if let Some(e) = line[start..].find(next) {
            end = end.min(start + e);
        }
    }
    let field = line[start..end].trim_end();
    (field != "Reason=(null)" && field != "Reason=").then_some(field)
}

/// Adds `reason` to `report`'s reasons after those of a higher severity (the list is sorted
/// by severity only: docs/domain.md, "The rule table").
pub fn join(report: &mut NodeReport, reason: Reason) {
    let at = report
        .reasons
        .iter()
        .position(|r| r.severity > reason.severity)
        .unwrap_or(report.reasons.len());
    report.reasons.insert(at, reason);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(text: &str) -> LocalOutput {
        LocalOutput {
            success: true,
            code: Some(0),
            output: text.into(),
        }
    }

    const LINE: &str = "NodeName=gpu2 Arch=x86_64 CoresPerSocket=1 NodeAddr=198.18.20.3 Partitions=gpu State=STATE ThreadsPerCore=1 Weight=1 BootTime=2026-12-03T10:00:00";

    fn slurm(state: &str, rest: &str) -> Reason {
        let text = format!("{}{rest}", LINE.replace("STATE", state));
        let State::Taken(t) = scheduler::parse(&Parser::Slurm, &out(&text)).unwrap() else {
            panic!("{state}: in service")
        };
        taken(
            &Parser::Slurm,
            "scontrol -o show node gpu2",
            &out(&text),
            &t,
        )
    }

    #[test]
    fn slurm_states_name_down_or_drained_with_the_reason_as_printed() {
        let r = slurm(
            "IDLE+DRAIN",
            " Reason=bad dimm [root@2026-12-03T17:00:00] Comment=rma",
        );
        assert_eq!(r.code, Code::SchedulerDrained);
        assert_eq!(r.evidence.len(), 1);
        assert_eq!(
            r.evidence[0].line,
            "State=IDLE+DRAIN Reason=bad dimm [root@2026-12-03T17:00:00]"
        );
        assert_eq!(r.evidence[0].source, "scontrol -o show node gpu2");
        assert_eq!(
            r.message,
            "out of service in Slurm: drained (Slurm IDLE+DRAIN): Reason \"bad dimm\" set by root at 2026-12-03T17:00:00; probed all the same"
        );
        for (state, code) in [
            ("DOWN", Code::SchedulerDown),
            ("DOWN*+DRAIN", Code::SchedulerDown),
            ("IDLE*", Code::SchedulerDown),
            ("IDLE+POWERED_DOWN", Code::SchedulerDown),
            ("IDLE+POWERING_DOWN", Code::SchedulerDown),
            ("FUTURE", Code::SchedulerDown),
            ("ALLOCATED+DRAIN", Code::SchedulerDrained),
            ("IDLE+MAINT", Code::SchedulerDrained),
            ("IDLE+RESERVED", Code::SchedulerDrained),
            ("IDLE+FAIL", Code::SchedulerDrained),
        ] {
            let r = slurm(state, "");
            assert_eq!(r.code, code, "{state}");
            assert_eq!(r.evidence[0].line, format!("State={state}"));
        }
    }

    #[test]
    fn kubernetes_cordoned_is_drained_not_ready_is_down() {
        let k = |text: &str| {
            let p = Parser::Kubernetes { taints: vec![] };
            let State::Taken(t) = scheduler::parse(&p, &out(text)).unwrap() else {
                panic!("{text}: in service")
            };
            taken(&p, "kubectl get node", &out(text), &t)
        };
        let r = k("unschedulable=true\nnode.kubernetes.io/unschedulable\tNoSchedule\t\n");
        assert_eq!(r.code, Code::SchedulerDrained);
        assert_eq!(r.evidence[0].line, "unschedulable=true");
        assert!(r.message.contains("cordoned"), "{}", r.message);
        let r = k("unschedulable=\nnode.kubernetes.io/not-ready\tNoExecute\t\n");
        assert_eq!(r.code, Code::SchedulerDown);
        // Not-ready with a mere preference is not out of service at all.
        let p = Parser::Kubernetes { taints: vec![] };
        assert_eq!(
            scheduler::parse(
                &p,
                &out("unschedulable=\nnode.kubernetes.io/not-ready\tPreferNoSchedule\t\n")
            )
            .unwrap(),
            State::InService
        );
    }

    #[test]
    fn joined_after_the_reasons_of_a_higher_severity() {
        let mut r: NodeReport = serde_json::from_value(serde_json::json!({
            "name": "n", "status": "ready", "scanned_at": "2026-01-01T00:00:00Z",
            "duration_ms": 1, "reasons": [
                {"code": "proprietary-module", "severity": "warn", "message": "", "evidence": []},
                {"code": "no-rdma-device", "severity": "info", "message": "", "evidence": []}
            ]
        }))
        .unwrap();
        join(
            &mut r,
            Reason::new(Code::SchedulerDrained, "drained", Vec::new()),
        );
        let codes: Vec<&str> = r.reasons.iter().map(|r| r.code.as_str()).collect();
        assert_eq!(
            codes,
            ["proprietary-module", "no-rdma-device", "scheduler-drained"]
        );
    }
}
