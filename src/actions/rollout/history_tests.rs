//! Unit tests of what the journal says of a node's drain: still down after its upgrade, out of
//! service before (`--include-drained`), and what `--abandon` says of each.

use super::tests::{node, recipes, report};
use super::*;
use crate::actions::journal::{Entry, Phase};
use crate::actions::scheduler::Taken;
use crate::config::UpgradeConfig;
use crate::model::NodeStatus;

/// `c1`'s plan; out of service before (a Slurm drain of an admin's) when `pre`.
fn plan_of(pre: bool) -> Plan {
    let taken = Taken {
        what: "drained (Slurm IDLE+DRAIN)".into(),
        reason: Some("bad DIMM".into()),
        by: Some("root".into()),
        since: None,
        rollout: None,
        cordoned: false,
    };
    let np = node_plan_in(
        &node("c1", true),
        &report("c1", NodeStatus::Migrate),
        &recipes()["r"],
        &UpgradeConfig::default(),
        "r1",
        &[],
        pre.then_some(&taken),
        true,
    )
    .unwrap();
    Plan {
        rollout: "r1".into(),
        mode: Mode::Canary,
        nodes: vec![np],
        skipped: Vec::new(),
        budget: None,
    }
}

/// A journal: the plan's start, then `c1`'s `steps` (label, phase, outcome), numbered as planned.
fn journal(p: &Plan, steps: &[(&str, Phase, &str)]) -> Vec<Entry> {
    let e = |node: &str, step: &str, seq, phase, outcome: String| Entry {
        ts: String::new(),
        who: String::new(),
        rollout: "r1".into(),
        node: node.into(),
        step: step.into(),
        seq,
        phase,
        command: String::new(),
        outcome,
    };
    let mut j = vec![e(
        "",
        "rollout",
        None,
        Phase::Start,
        serde_json::to_string(p).unwrap(),
    )];
    let labels: Vec<String> = p.nodes[0].steps.iter().map(Step::label).collect();
    for (label, phase, outcome) in steps {
        let seq = labels.iter().position(|l| l == label).unwrap();
        j.push(e("c1", label, Some(seq), *phase, outcome.to_string()));
    }
    j
}

fn through_gates(
    then: &[(&'static str, Phase, &'static str)],
) -> Vec<(&'static str, Phase, &'static str)> {
    let mut v: Vec<_> = [
        "lock",
        "drain",
        "step:install",
        "boot-id:reboot",
        "step:reboot",
        "wait-ssh:reboot",
        "reprobe",
        "gates",
    ]
    .into_iter()
    .map(|l| (l, Phase::Done, ""))
    .collect();
    v.extend_from_slice(then);
    v
}

#[test]
fn a_node_still_down_after_its_upgrade_is_said_so_never_stays_drained_and_a_retry_clears_it() {
    let p = plan_of(false);
    let still = "still down (State=DOWN+DRAIN, Reason \"PSU failure\"): gpufleet's drain flag removed (UNDRAIN)";
    let j = journal(
        &p,
        &through_gates(&[
            ("uncordon", Phase::Start, ""),
            ("uncordon", Phase::Failed, still),
        ]),
    );
    let (_, progress) = unfinished(&j).unwrap();
    assert!(progress.still_down("c1"));
    assert_eq!(drained_state(&p.nodes[0], &progress), Drained::StillDown);
    let left = left_behind(&p, &progress).join("\n");
    assert!(
        left.contains("c1 is still down: upgraded, its gates passed"),
        "{left}"
    );
    assert!(
        !left.contains("stays drained") && !left.contains("give it back"),
        "{left}"
    );
    // Any other failure of the give-back: the node stays drained, as before.
    let j = journal(
        &p,
        &through_gates(&[("uncordon", Phase::Failed, "`scontrol` exited 1: denied")]),
    );
    let (_, progress) = unfinished(&j).unwrap();
    assert_eq!(drained_state(&p.nodes[0], &progress), Drained::Yes);
    // A resume retries the give-back: its start clears "still down"; done gives it back.
    let mut progress = unfinished(&journal(
        &p,
        &through_gates(&[("uncordon", Phase::Failed, still)]),
    ))
    .unwrap()
    .1;
    progress.record("c1", 8, "uncordon", Phase::Start, "");
    assert!(!progress.still_down("c1"));
    progress.record(
        "c1",
        8,
        "uncordon",
        Phase::Done,
        "resumed (State=IDLE+DRAIN)",
    );
    assert_eq!(drained_state(&p.nodes[0], &progress), Drained::GivenBack);
    // The report: "still down", never "done" nor "stays drained".
    let o = NodeOutcome {
        node: "c1".into(),
        failure: Some(Failure {
            seq: Some(8),
            step: "uncordon".into(),
            why: still.into(),
        }),
        skipped: None,
        drained: Drained::StillDown,
        kept: None,
    };
    let (phase, summary) = summarize(&p, &[o]);
    assert_eq!(phase, Phase::Failed);
    assert_eq!(
        summary,
        format!(
            "rollout r1: 0 node(s) upgraded, 1 still down: c1 upgraded, its gates passed, but {still}"
        )
    );
}

#[test]
fn abandon_offers_to_give_back_only_what_this_rollout_drained() {
    // Out of service before (--include-drained): never "give it back", whatever its phases.
    let p = plan_of(true);
    for steps in [
        vec![("lock", Phase::Done, ""), ("drain", Phase::Done, "")],
        vec![("lock", Phase::Done, ""), ("drain", Phase::Failed, "")],
        through_gates(&[(
            "uncordon",
            Phase::Done,
            "down after reboot, admin drain kept",
        )]),
    ] {
        let (_, progress) = unfinished(&journal(&p, &steps)).unwrap();
        assert_eq!(drained_state(&p.nodes[0], &progress), Drained::Kept);
        let left = left_behind(&p, &progress).join("\n");
        assert!(
            left.contains("c1 was out of service before this rollout (drained (Slurm IDLE+DRAIN): Reason \"bad DIMM\" set by root): gpufleet did not drain it"),
            "{left}"
        );
        assert!(
            !left.contains("give it back") && !left.contains("stays drained"),
            "{left}"
        );
    }
    // Its drain not reached: nothing said of a drain.
    let (_, progress) = unfinished(&journal(&p, &[("lock", Phase::Done, "")])).unwrap();
    assert_eq!(drained_state(&p.nodes[0], &progress), Drained::No);
    // Drained by this rollout: the hint gives it back, with the exact commands.
    let p = plan_of(false);
    let (_, progress) = unfinished(&journal(
        &p,
        &[("lock", Phase::Done, ""), ("drain", Phase::Done, "")],
    ))
    .unwrap();
    let left = left_behind(&p, &progress).join("\n");
    assert!(
        left.contains("c1 stays drained; give it back with: read first: scontrol -o show node c1"),
        "{left}"
    );
    // An upgraded node gpufleet did not drain: said with its give-back's words.
    let o = NodeOutcome {
        node: "c1".into(),
        failure: None,
        skipped: None,
        drained: Drained::Kept,
        kept: Some("down after reboot, admin drain kept (State=DOWN+DRAIN)".into()),
    };
    let (phase, summary) = summarize(&plan_of(true), &[o]);
    assert_eq!(phase, Phase::Done);
    assert_eq!(
        summary,
        "rollout r1: 1 node(s) upgraded (1 out of service before, left so: c1: down after reboot, admin drain kept (State=DOWN+DRAIN))"
    );
}
