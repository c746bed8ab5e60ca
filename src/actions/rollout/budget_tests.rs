//! Unit tests of the unavailability budget and of planning around scheduler states.

use super::tests::{node, recipes, report};
use super::*;
use crate::actions::scheduler::{State, Taken};
use crate::config::{MaxUnavailable, UpgradeConfig};
use crate::model::NodeStatus;
use crate::model::parse::lock::LockOwner;
use crate::model::report::RolloutJson;

fn taken(what: &str, rollout: Option<&str>) -> State {
    State::Taken(Taken {
        what: what.into(),
        reason: Some("bad DIMM".into()),
        by: Some("root".into()),
        since: None,
        rollout: rollout.map(str::to_string),
        cordoned: false,
    })
}

#[test]
fn max_unavailable_counts_and_percentages() {
    assert_eq!(
        "4".parse::<MaxUnavailable>().unwrap(),
        MaxUnavailable::Count(4)
    );
    assert_eq!(
        "25%".parse::<MaxUnavailable>().unwrap(),
        MaxUnavailable::Percent(25)
    );
    for bad in ["0", "0%", "101%", "-1", "x", "2.5%", ""] {
        assert!(bad.parse::<MaxUnavailable>().is_err(), "{bad}");
    }
    assert_eq!(MaxUnavailable::Percent(25).of(16), 4);
    assert_eq!(MaxUnavailable::Percent(25).of(7), 1);
    assert_eq!(MaxUnavailable::Percent(10).of(3), 1, "at least 1");
    assert_eq!(MaxUnavailable::Percent(100).of(5), 5);
    assert_eq!(MaxUnavailable::Count(3).of(1), 3);
    #[derive(serde::Deserialize)]
    struct U {
        upgrade: UpgradeConfig,
    }
    let u: U = toml::from_str("[upgrade]\nmax_unavailable = \"25%\"").unwrap();
    assert_eq!(u.upgrade.max_unavailable, MaxUnavailable::Percent(25));
    let u: U = toml::from_str("[upgrade]\nmax_unavailable = 3").unwrap();
    assert_eq!(u.upgrade.max_unavailable, MaxUnavailable::Count(3));
    assert!(toml::from_str::<U>("[upgrade]\nmax_unavailable = 0").is_err());
    assert!(toml::from_str::<U>("[upgrade]\nmax_unavailable = \"150%\"").is_err());
}

#[test]
fn drained_down_locked_and_unknown_nodes_count_against_the_budget() {
    let cfg = UpgradeConfig {
        max_unavailable: MaxUnavailable::Percent(50),
        ..Default::default()
    };
    let mut nodes: Vec<_> = (0..8)
        .map(|i| {
            (
                node(&format!("gpu{i}"), false),
                report(&format!("gpu{i}"), NodeStatus::Migrate),
            )
        })
        .collect();
    nodes[5].1.rollout = Some(RolloutJson {
        locked: Some(true),
        lock: Some(LockOwner {
            rollout: "r-other".into(),
            operator: Some("ops@b pid 9".into()),
            since: None,
        }),
        drained_by: None,
    });
    let mut around = Around::default();
    around.states.insert("gpu0".into(), Ok(State::InService));
    around
        .states
        .insert("gpu1".into(), Ok(taken("drained (Slurm IDLE+DRAIN)", None)));
    around.states.insert(
        "gpu2".into(),
        Ok(taken("drained (Slurm IDLE+DRAIN)", Some("r-old"))),
    );
    around
        .states
        .insert("gpu3".into(), Err("sinfo: timed out".into()));
    // Locked and drained by that rollout: counted once, under the rollout.
    around.states.insert(
        "gpu5".into(),
        Ok(taken("drained (Slurm IDLE+DRAIN)", Some("r-other"))),
    );
    let b = Budget::of(&nodes, &around, &cfg);
    assert_eq!((b.limit, b.used(), b.left()), (4, 4, 0));
    assert_eq!(
        b.line(),
        "budget 4 (max_unavailable 50% of 8 selected nodes): 1 used by a drained or down node (gpu1), 1 by a node whose scheduler state could not be read (gpu3), 1 by rollout r-old (gpu2), 1 by rollout r-other (gpu5); none left for this rollout: no node in service is drained until some are back"
    );
    let p = plan_in(
        Mode::Wave,
        &nodes,
        &[],
        &[],
        &cfg,
        &recipes(),
        "r-1",
        &around,
    )
    .unwrap();
    // The locked node is planned (its lock step names the holder) without taking budget; no
    // node in service is.
    let planned: Vec<&str> = p.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(planned, ["gpu5"]);
    let why = |n: &str| {
        p.skipped
            .iter()
            .find(|(s, _)| s == n)
            .map(|(_, w)| w.clone())
            .unwrap()
    };
    assert!(
        why("gpu0").starts_with("in a later wave (max_unavailable): budget 4"),
        "{}",
        why("gpu0")
    );
    assert!(why("gpu1").starts_with("out of service before this rollout: drained (Slurm IDLE+DRAIN): Reason \"bad DIMM\" set by root"), "{}", why("gpu1"));
    assert!(
        why("gpu3").starts_with("its scheduler state cannot be read (sinfo: timed out)"),
        "{}",
        why("gpu3")
    );
    assert!(p.budget.is_some());
    assert!(plan_lines(&p, true)[1].starts_with("  budget 4 "));
    // --include-drained: the drained nodes are planned without taking budget, never given back.
    let cfg = UpgradeConfig {
        include_drained: true,
        max_unavailable: MaxUnavailable::Count(5),
        ..cfg
    };
    let p = plan_in(
        Mode::Wave,
        &nodes,
        &[],
        &[],
        &cfg,
        &recipes(),
        "r-1",
        &around,
    )
    .unwrap();
    let planned: Vec<&str> = p.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(
        planned,
        ["gpu0", "gpu1", "gpu2", "gpu5"],
        "1 left: gpu0; gpu4 waits"
    );
    let g1 = &p.nodes[1];
    let Some(Step::Drain {
        commands,
        pre,
        recheck,
        ..
    }) = g1.steps.iter().find(|s| matches!(s, Step::Drain { .. }))
    else {
        panic!()
    };
    assert!(
        commands.is_empty() && pre.is_some() && recheck.is_none(),
        "{g1:?}"
    );
    let Some(Step::Uncordon { back: Some(b), .. }) =
        g1.steps.iter().find(|s| matches!(s, Step::Uncordon { .. }))
    else {
        panic!()
    };
    assert!(b.kept.is_some());
    // A node in service: read again before its drain, and read before it is resumed.
    let g0 = &p.nodes[0];
    assert!(g0.steps.iter().any(|s| matches!(
        s,
        Step::Drain {
            recheck: Some(_),
            pre: None,
            ..
        }
    )));
    assert!(g0.steps.iter().any(|s| matches!(
        s,
        Step::Uncordon {
            back: Some(crate::actions::scheduler::GiveBack {
                kept: None,
                read: Some(_),
                ..
            }),
            ..
        }
    )));
}
