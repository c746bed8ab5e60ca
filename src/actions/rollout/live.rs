//! The live node over the journal (pure): whether a node is to be upgraded, and whether a
//! canary opens the waves, are decided from the node as probed now, plus the journal's record of
//! its last upgrade here (its gates passed, so after its verified reboot: a node's steps run in
//! order) — never from the journal alone (docs/domain.md, "The live node over the journal").

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::actions::journal::{Entry, Phase};
use crate::model::NodeStatus;
use crate::model::report::NodeReport;

/// A node's last upgrade in this state folder's journal: the last rollout that took its node
/// lock (its `lock` step done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastUpgrade {
    pub rollout: String,
    /// Its gates passed on the node. Its steps run in order, one after the other is done, so
    /// the gates passed after its reboot was proven (`wait-ssh`), where the recipe reboots.
    pub gates_passed: bool,
    /// Its `unlock` is done: the journal calls the node upgraded.
    pub finished: bool,
}

/// Each node's [`LastUpgrade`] in `journal`.
pub fn last_upgrades(journal: &[Entry]) -> HashMap<String, LastUpgrade> {
    let mut out: HashMap<String, LastUpgrade> = HashMap::new();
    for e in journal
        .iter()
        .filter(|e| !e.node.is_empty() && e.phase == Phase::Done)
    {
        let same = out.get(&e.node).is_some_and(|u| u.rollout == e.rollout);
        match e.step.as_str() {
            "lock" if !same => {
                out.insert(
                    e.node.clone(),
                    LastUpgrade {
                        rollout: e.rollout.clone(),
                        gates_passed: false,
                        finished: false,
                    },
                );
            }
            "gates" if same => {
                if let Some(u) = out.get_mut(&e.node) {
                    u.gates_passed = true;
                }
            }
            "unlock" if same => {
                if let Some(u) = out.get_mut(&e.node) {
                    u.finished = true;
                }
            }
            _ => {}
        }
    }
    out
}

/// Why a node is planned though the journal says otherwise, for the plan shown (and the lock
/// step, which takes the node only while it is as it was planned).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Again {
    /// In words: `planned again: …`.
    pub why: String,
    /// Its status when it was planned: `migrate`, or `ready` for a node whose upgrade was
    /// never proven.
    pub status: NodeStatus,
}

/// Whether a probed node is planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Planned; with why when the journal says otherwise (a node it calls upgraded that probes
    /// `migrate` again; a `ready` node whose upgrade was never proven).
    Plan(Option<Again>),
    /// Left out, with why.
    Skip(String),
}

/// Whether `report`'s node is upgraded, from its status now and `last` (its last upgrade in the
/// journal): a `migrate` node is, whatever the journal says (re-imaged, rolled back: said so);
/// a `ready` node whose last rollout here took its lock and stopped before its gates passed
/// (halted before its reboot, then abandoned) is too, so that its gates run after a proven
/// reboot; any other node is skipped with its status (and the rollout that upgraded it).
pub fn verdict(report: &NodeReport, last: Option<&LastUpgrade>) -> Verdict {
    match (report.status, last) {
        (NodeStatus::Migrate, Some(u)) if u.gates_passed => Verdict::Plan(Some(Again {
            why: format!(
                "planned again: rollout {} upgraded it (its gates passed), but it probes migrate now (re-imaged or rolled back?)",
                u.rollout
            ),
            status: NodeStatus::Migrate,
        })),
        (NodeStatus::Migrate, _) => Verdict::Plan(None),
        (NodeStatus::Ready, Some(u)) if !u.gates_passed => Verdict::Plan(Some(Again {
            why: format!(
                "planned again: it probes ready, but rollout {} stopped on it before its gates passed, so its upgrade was never proven (a reboot, then the gates)",
                u.rollout
            ),
            status: NodeStatus::Ready,
        })),
        (st, last) => Verdict::Skip(format!(
            "status {st}: {}{}",
            st.meaning(),
            match last {
                Some(u) if u.finished => format!("; upgraded by rollout {}", u.rollout),
                _ => String::new(),
            }
        )),
    }
}

/// A canary as probed now, for the waves' gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryNow {
    pub name: String,
    /// `None`: not scanned.
    pub status: Option<NodeStatus>,
    /// The rollout whose node lock it holds now, as the probe read it (any state folder's).
    pub locked_by: Option<String>,
}

impl CanaryNow {
    /// The canary as `report` says (its status, and its node lock as the probe read it).
    pub fn of(name: &str, report: Option<&NodeReport>) -> CanaryNow {
        CanaryNow {
            name: name.to_string(),
            status: report.map(|r| r.status),
            locked_by: report
                .and_then(|r| r.rollout.as_ref()?.lock.as_ref())
                .map(|l| match l.rollout.as_str() {
                    "" => "(unknown: its lock has no owner file)".to_string(),
                    r => r.to_string(),
                }),
        }
    }
}

/// Every canary of the inventory must be done before any other node: `ready` now, not locked by
/// a rollout (its upgrade, in whichever state folder, did not finish), and, when this journal
/// took its lock last in rollout R, R's gates passed on it (after its proven reboot). A canary
/// this journal never upgraded counts when it is `ready` (upgraded from another state folder, or
/// never on the legacy stack). A canary that failed, is unreachable, probes `migrate` again, or
/// whose gates never ran blocks the waves.
pub fn canaries_done(
    canaries: &[CanaryNow],
    last: &HashMap<String, LastUpgrade>,
) -> Result<(), String> {
    let pending: Vec<String> = canaries
        .iter()
        .filter_map(|c| {
            let n = &c.name;
            match (c.status, &c.locked_by, last.get(n)) {
                (None, _, _) => Some(format!("{n} (not scanned)")),
                (Some(st), _, _) if st != NodeStatus::Ready => Some(format!("{n} ({st})")),
                (_, _, Some(u)) if !u.gates_passed => Some(format!(
                    "{n} (ready, but rollout {} stopped on it before its gates passed)",
                    u.rollout
                )),
                (_, Some(r), _) => Some(format!(
                    "{n} (ready, but locked by rollout {r}: its upgrade did not finish)"
                )),
                _ => None,
            }
        })
        .collect();
    if pending.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "canaries first: {} not upgraded and proven yet; run `gpufleet upgrade --canary`",
            pending.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Code;

    fn report(status: NodeStatus) -> NodeReport {
        let mut r = NodeReport::unreachable(
            "n".into(),
            Code::SshTimeout,
            String::new(),
            vec![],
            String::new(),
            0,
        );
        r.status = status;
        r
    }

    fn e(rollout: &str, step: &str, phase: Phase) -> Entry {
        Entry {
            ts: String::new(),
            who: String::new(),
            rollout: rollout.into(),
            node: "n".into(),
            step: step.into(),
            seq: None,
            phase,
            command: String::new(),
            outcome: String::new(),
        }
    }

    #[test]
    fn the_last_upgrade_is_the_last_rollout_that_took_the_lock() {
        use Phase::*;
        let j = [
            e("r1", "lock", Done),
            e("r1", "gates", Done),
            e("r1", "unlock", Done),
            // r2 found the node locked: it never took the lock, so it is not the last upgrade.
            e("r2", "lock", Skipped),
            e("r3", "lock", Done),
            e("r3", "step:switch", Done),
            e("r3", "step:check", Failed),
        ];
        let all = last_upgrades(&j);
        let u = &all["n"];
        assert_eq!(
            (u.rollout.as_str(), u.gates_passed, u.finished),
            ("r3", false, false)
        );
        let u = &last_upgrades(&j[..4])["n"];
        assert_eq!(
            (u.rollout.as_str(), u.gates_passed, u.finished),
            ("r1", true, true)
        );
        assert!(last_upgrades(&j[3..4]).is_empty());
    }

    #[test]
    fn the_node_as_probed_now_decides() {
        let proven = LastUpgrade {
            rollout: "r1".into(),
            gates_passed: true,
            finished: true,
        };
        let halted = LastUpgrade {
            rollout: "r2".into(),
            gates_passed: false,
            finished: false,
        };
        // Re-imaged: the journal calls it upgraded, it probes migrate: planned again, said so.
        match verdict(&report(NodeStatus::Migrate), Some(&proven)) {
            Verdict::Plan(Some(Again { why, status })) => assert!(
                why.contains("rollout r1 upgraded it")
                    && why.contains("probes migrate now")
                    && status == NodeStatus::Migrate,
                "{why}"
            ),
            v => panic!("{v:?}"),
        }
        assert_eq!(
            verdict(&report(NodeStatus::Migrate), None),
            Verdict::Plan(None)
        );
        assert_eq!(
            verdict(&report(NodeStatus::Ready), Some(&proven)),
            Verdict::Skip(format!(
                "status ready: {}; upgraded by rollout r1",
                NodeStatus::Ready.meaning()
            ))
        );
        assert!(matches!(
            verdict(&report(NodeStatus::Ready), None),
            Verdict::Skip(_)
        ));
        // Ready, but halted before its gates: its upgrade is proven by planning it again.
        match verdict(&report(NodeStatus::Ready), Some(&halted)) {
            Verdict::Plan(Some(Again { why, status })) => assert!(
                why.contains("before its gates passed") && status == NodeStatus::Ready,
                "{why}"
            ),
            v => panic!("{v:?}"),
        }
        assert!(matches!(
            verdict(&report(NodeStatus::Blocked), Some(&halted)),
            Verdict::Skip(_)
        ));
    }

    #[test]
    fn a_canary_opens_the_waves_only_ready_now_unlocked_and_gated() {
        let c = |status, locked_by: Option<&str>| CanaryNow {
            name: "c".into(),
            status,
            locked_by: locked_by.map(str::to_string),
        };
        let last = |gates_passed| {
            HashMap::from([(
                "c".to_string(),
                LastUpgrade {
                    rollout: "r1".into(),
                    gates_passed,
                    finished: gates_passed,
                },
            )])
        };
        let ready = Some(NodeStatus::Ready);
        assert_eq!(canaries_done(&[c(ready, None)], &last(true)), Ok(()));
        // Ready and never upgraded from this state folder: ready is enough.
        assert_eq!(canaries_done(&[c(ready, None)], &HashMap::new()), Ok(()));
        for (canary, last, want) in [
            (
                c(Some(NodeStatus::Migrate), None),
                last(true),
                "c (migrate)",
            ),
            (c(None, None), last(true), "c (not scanned)"),
            (
                c(ready, None),
                last(false),
                "c (ready, but rollout r1 stopped on it before its gates passed)",
            ),
            (
                c(ready, Some("r-9")),
                last(true),
                "c (ready, but locked by rollout r-9: its upgrade did not finish)",
            ),
        ] {
            let e = canaries_done(&[canary], &last).unwrap_err();
            assert!(e.contains(want), "{want:?} in {e}");
        }
    }
}
