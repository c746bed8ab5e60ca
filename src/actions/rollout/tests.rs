//! Unit tests of the rollout module (planning, gates, resume, ids, the local lock).

use std::collections::{BTreeMap, HashSet};

use super::*;
use crate::actions::journal::{Entry, Phase};
use crate::config::RecipeStep;
use crate::config::{Gate, Recipe, UpgradeConfig};
use crate::inventory::DrainSpec;
use crate::inventory::{DrainBackend, Node};
use crate::model::Code;
use crate::model::NodeStatus;
use crate::model::report::NodeReport;

pub(super) fn node(name: &str, canary: bool) -> Node {
    Node {
        canary,
        recipe: Some("r".into()),
        drain: Some(DrainSpec {
            backend: DrainBackend::Slurm,
            ..Default::default()
        }),
        ..Node::for_test(name, "h")
    }
}

fn canary(name: &str, status: NodeStatus) -> CanaryNow {
    CanaryNow {
        name: name.into(),
        status: Some(status),
        locked_by: None,
    }
}

/// A journal entry of node `node`'s step `step` in rollout `rollout`.
fn entry(rollout: &str, node: &str, step: &str, phase: Phase) -> Entry {
    Entry {
        ts: String::new(),
        who: String::new(),
        rollout: rollout.into(),
        node: node.into(),
        step: step.into(),
        seq: None,
        phase,
        command: String::new(),
        outcome: String::new(),
    }
}

pub(super) fn report(name: &str, status: NodeStatus) -> NodeReport {
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
        flavor: crate::model::Flavor::Proprietary,
        version: Some("535.183.01".into()),
        arch: None,
        userspace_version: None,
        managed_by: Some(crate::model::report::ManagedBy::Host),
        branch: Some(535),
    });
    r
}

pub(super) fn recipes() -> BTreeMap<String, Recipe> {
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
                    kill_after: None,
                },
                RecipeStep {
                    name: "reboot".into(),
                    run: "systemctl reboot".into(),
                    reboot: true,
                    kill_after: None,
                },
            ],
            driver_version: None,
            nccl_test: None,
        },
    );
    m
}

#[test]
fn canaries_first_then_waves_of_max_unavailable() {
    let cfg = UpgradeConfig {
        max_unavailable: 2.into(),
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
    let canaries = vec![canary("c1", NodeStatus::Migrate)];
    let p = plan(Mode::Canary, &nodes, &canaries, &[], &cfg, &recipes(), "r1").unwrap();
    assert_eq!(
        p.nodes.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(),
        ["c1"]
    );
    let steps: Vec<String> = p.nodes[0].steps.iter().map(|s| s.label()).collect();
    assert_eq!(
        steps,
        [
            "lock",
            "drain",
            "step:install",
            "boot-id:reboot",
            "step:reboot",
            "wait-ssh:reboot",
            "reprobe",
            "gates",
            "uncordon",
            "unlock"
        ]
    );
    assert!(
        matches!(&p.nodes[0].steps[2], Step::Recipe { run, sudo: true, reboot: false, .. } if run == "apt-get install -y nvidia-driver-535-open"),
        "{:?}",
        p.nodes[0].steps[2]
    );
    // The plan goes into the journal whole and comes back the same.
    let json = serde_json::to_string(&p).unwrap();
    assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), p);
    assert!(json.contains(r#""kind":"recipe""#), "{json}");
    // Drained once its drain started, as the phases say; given back once its uncordon is done.
    let at = |phases: &[(usize, Phase)]| {
        let progress: Progress = phases
            .iter()
            .map(|(s, ph)| (("c1".to_string(), *s), *ph))
            .collect();
        drained_state(&p.nodes[0], &progress)
    };
    assert_eq!(at(&[]), Drained::No);
    assert_eq!(at(&[(0, Phase::Skipped)]), Drained::No);
    assert_eq!(at(&[(0, Phase::Failed)]), Drained::No);
    assert_eq!(at(&[(0, Phase::Done), (1, Phase::Failed)]), Drained::Maybe);
    assert_eq!(at(&[(0, Phase::Done), (1, Phase::Done)]), Drained::Yes);
    assert_eq!(
        at(&[(1, Phase::Done), (8, Phase::Done), (9, Phase::Failed)]),
        Drained::GivenBack
    );
    assert_eq!(drained_note(Drained::No), "");
    assert_eq!(drained_note(Drained::Yes), " and stays drained");
    let e = plan(Mode::Wave, &nodes, &canaries, &[], &cfg, &recipes(), "r2").unwrap_err();
    assert!(e.contains("canaries first: c1"), "{e}");
    // The journal calling the canary upgraded does not open the waves while it probes migrate
    // (regressed, re-imaged); ready now, with its gates passed here, it does.
    let journal: Vec<Entry> = ["lock", "gates", "unlock"]
        .iter()
        .map(|s| entry("r1", "c1", s, Phase::Done))
        .collect();
    let e = plan(
        Mode::Wave,
        &nodes,
        &canaries,
        &journal,
        &cfg,
        &recipes(),
        "r2",
    )
    .unwrap_err();
    assert!(e.contains("canaries first: c1 (migrate)"), "{e}");
    let canaries = vec![canary("c1", NodeStatus::Ready)];
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
    // Said in words, never as Rust values.
    assert!(
        failed.contains(
            &"open-module: the proprietary kernel module is loaded, not the open one".to_string()
        ),
        "{failed:?}"
    );
    r.peermem = Some(crate::model::report::PeermemJson {
        loaded: Some(true),
        configured: Some(true),
        registered: None,
    });
    assert_eq!(
        check_gates(&r, &[Gate::NoPeermem]),
        ["no-peermem: nvidia-peermem is loaded and configured at boot"]
    );
    assert!(!format!("{:?}", check_gates(&r, &Gate::ALL)).contains("Some("));
    r.driver.as_mut().unwrap().flavor = crate::model::Flavor::Open;
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
                nvidia_modules: Some(vec!["/lib/modules/6.8.0-1/updates/dkms/nvidia.ko".into()]),
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
    r.reasons.push(crate::model::Reason::new(
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
    r.reasons
        .push(crate::model::Reason::new(Code::NoRdmaDevice, "x", vec![]));
    assert!(check_gates(&r, &[Gate::DmabufKernel]).is_empty());
}

#[test]
fn gpu_operator_nodes_are_skipped_by_host_recipes() {
    let mut op = report("op", NodeStatus::Migrate);
    op.driver.as_mut().unwrap().managed_by = Some(crate::model::report::ManagedBy::GpuOperator);
    let nodes = vec![
        (node("op", false), op.clone()),
        (node("host", false), report("host", NodeStatus::Migrate)),
    ];
    let cfg = UpgradeConfig {
        max_unavailable: 5.into(),
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
    assert!(
        e.contains("nothing to upgrade: op: the driver is managed by the GPU Operator"),
        "{e}"
    );
    // Marked with an eligible node, it is skipped with the reason, as the CLI does.
    let p = plan_selected(&nodes, &[], &[], &cfg, &recipes(), "r-3").unwrap();
    assert_eq!(p.nodes.len(), 1);
    assert_eq!(p.nodes[0].node, "host");
    assert_eq!(p.skipped[0].0, "op");
}

#[test]
fn rollout_ids_are_unique_within_a_second() {
    let ids: HashSet<String> = (0..200).map(|_| new_id()).collect();
    assert!(ids.len() >= 199, "{}", ids.len());
    let id = ids.iter().next().unwrap();
    // r-20261201T221503Z-3f9a2c
    assert_eq!(id.len(), 25, "{id}");
    assert!(id.starts_with("r-") && id.as_bytes()[10] == b'T' && &id[17..19] == "Z-");
}

#[test]
fn resume_knows_each_steps_last_phase_by_its_number() {
    let p = plan(
        Mode::Canary,
        &[(node("c1", true), report("c1", NodeStatus::Migrate))],
        &[],
        &[],
        &UpgradeConfig::default(),
        &recipes(),
        "r1",
    )
    .unwrap();
    let e = |step: &str, seq: Option<usize>, phase: Phase| Entry {
        ts: String::new(),
        who: String::new(),
        rollout: "r1".into(),
        node: if step == "rollout" { "" } else { "c1" }.into(),
        step: step.into(),
        seq,
        phase,
        command: String::new(),
        outcome: if step == "rollout" && phase == Phase::Start {
            serde_json::to_string(&p).unwrap()
        } else {
            String::new()
        },
    };
    let mut j = vec![
        e("rollout", None, Phase::Start),
        e("lock", Some(0), Phase::Start),
        e("lock", Some(0), Phase::Done),
        // An entry of an older journal, without a number: matched by its label.
        e("drain", None, Phase::Done),
        e("step:install", Some(2), Phase::Start),
        e("step:install", Some(2), Phase::Failed),
        e("step:reboot", Some(3), Phase::Start),
    ];
    let (back, progress) = unfinished(&j).unwrap();
    assert_eq!(back, p);
    let at = |s: usize| progress.get(&("c1".to_string(), s)).copied();
    assert_eq!(at(0), Some(Phase::Done));
    assert_eq!(at(1), Some(Phase::Done));
    assert_eq!(at(2), Some(Phase::Failed));
    assert_eq!(at(3), Some(Phase::Start));
    assert_eq!(at(4), None);
    // A failed rollout stays resumable; a done one is not.
    j.push(e("rollout", None, Phase::Failed));
    assert!(unfinished(&j).is_some());
    assert_eq!(unreadable_unfinished(&j), None);
    j.push(e("rollout", None, Phase::Done));
    assert!(unfinished(&j).is_none());

    // An unfinished rollout whose plan another version wrote is never taken for finished.
    let mut old = j[0].clone();
    old.rollout = "r-older".into();
    old.outcome = r#"{"rollout":"r-older","nodes":[{"node":"c1","steps":[{"id":"lock"}]}]}"#.into();
    j.push(old);
    assert!(unfinished(&j).is_none());
    assert_eq!(unreadable_unfinished(&j).as_deref(), Some("r-older"));
    assert!(unreadable_message("r-older").contains("--abandon"));
}

#[test]
fn the_local_lock_says_who_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut held = lock_local(dir.path()).unwrap();
    held.note("r-1");
    match lock_local(dir.path()) {
        Err(LocalLockError::Held { holder, .. }) => {
            assert!(holder.starts_with("rollout r-1, operator "), "{holder}");
            assert!(
                holder.contains(&format!("pid {}", std::process::id())),
                "{holder}"
            );
        }
        other => panic!("{:?}", other.err()),
    }
    drop(held);
    assert!(lock_local(dir.path()).is_ok());
}

#[test]
fn a_node_without_a_drain_setting_is_refused_and_none_must_be_said() {
    let cfg = UpgradeConfig::default();
    let canaries = vec![canary("c1", NodeStatus::Migrate)];
    let unset = Node {
        drain: None,
        ..node("c1", true)
    };
    let err = plan(
        Mode::Canary,
        &[(unset, report("c1", NodeStatus::Migrate))],
        &canaries,
        &[],
        &cfg,
        &recipes(),
        "r1",
    )
    .unwrap_err();
    assert!(
        err.contains("c1: the inventory sets no `drain`") && err.contains("backend = \"none\""),
        "{err}"
    );
    let none = Node {
        drain: Some(DrainSpec {
            backend: DrainBackend::None,
            ..Default::default()
        }),
        ..node("c1", true)
    };
    let p = plan(
        Mode::Canary,
        &[(none, report("c1", NodeStatus::Migrate))],
        &canaries,
        &[],
        &cfg,
        &recipes(),
        "r1",
    )
    .unwrap();
    let steps: Vec<String> = p.nodes[0].steps.iter().map(|s| s.label()).collect();
    assert!(
        !steps.iter().any(|s| s == "drain" || s == "uncordon"),
        "{steps:?}"
    );
    let text = plan_lines(&p, false).join("\n");
    assert!(text.contains("jobs are NOT drained"), "{text}");
}

#[test]
fn drained_by_follows_drains_and_uncordons_per_node() {
    let e = |rollout: &str, node: &str, step: &str, phase: Phase| Entry {
        ts: String::new(),
        who: String::new(),
        rollout: rollout.into(),
        node: node.into(),
        step: step.into(),
        seq: Some(0),
        phase,
        command: String::new(),
        outcome: String::new(),
    };
    let journal = [
        e("r1", "a", "drain", Phase::Start),
        e("r1", "a", "drain", Phase::Done),
        e("r1", "b", "drain", Phase::Start),
        e("r1", "b", "drain", Phase::Done),
        e("r1", "b", "uncordon", Phase::Start),
        e("r1", "b", "uncordon", Phase::Done),
        // A drain that only started may have drained the node.
        e("r2", "c", "drain", Phase::Start),
        // An uncordon that failed gives nothing back.
        e("r2", "a", "uncordon", Phase::Failed),
    ];
    let d = drained_by(&journal);
    assert_eq!(
        d.into_iter().collect::<Vec<_>>(),
        [("a".into(), "r1".into()), ("c".into(), "r2".into())]
    );
}

#[test]
fn every_node_that_cannot_be_planned_is_named_at_once() {
    let cfg = UpgradeConfig {
        max_unavailable: 1.into(),
        ..UpgradeConfig::default()
    };
    let no_recipe = Node {
        recipe: None,
        ..node("a", false)
    };
    let unknown = Node {
        recipe: Some("gone".into()),
        ..node("b", false)
    };
    let no_drain = Node {
        drain: None,
        ..node("c", false)
    };
    let mut no_version = report("d", NodeStatus::Migrate);
    if let Some(d) = no_version.driver.as_mut() {
        d.version = None;
    }
    let nodes = vec![
        (node("ok", false), report("ok", NodeStatus::Migrate)),
        (no_recipe, report("a", NodeStatus::Migrate)),
        (unknown, report("b", NodeStatus::Migrate)),
        // Past max_unavailable: in a later wave, yet checked now.
        (no_drain, report("c", NodeStatus::Migrate)),
        (node("d", false), no_version),
        // Not migrate: skipped, not a problem.
        (
            Node {
                recipe: None,
                ..node("e", false)
            },
            report("e", NodeStatus::Ready),
        ),
    ];
    let err = plan(Mode::Wave, &nodes, &[], &[], &cfg, &recipes(), "r1").unwrap_err();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[0], "4 nodes cannot be planned; fix them all, then run again:",
        "{err}"
    );
    assert_eq!(lines.len(), 5, "{err}");
    assert_eq!(lines[1], "  a: no `recipe` for this node in the inventory");
    assert_eq!(
        lines[2],
        "  b: recipe `gone` is not in the config's [recipes]"
    );
    assert!(
        lines[3].starts_with("  c: the inventory sets no `drain`"),
        "{err}"
    );
    assert_eq!(
        lines[4],
        "  d: the recipe uses {branch} but the driver version is unknown"
    );
    // The TUI's marked nodes: the same, for the nodes of its one wave.
    let cfg = UpgradeConfig {
        max_unavailable: 5.into(),
        ..cfg
    };
    let err = plan_selected(&nodes[..3], &[], &[], &cfg, &recipes(), "r1").unwrap_err();
    assert!(
        err.starts_with("2 nodes cannot be planned")
            && err.contains("\n  a: no `recipe`")
            && err.contains("\n  b: recipe `gone`"),
        "{err}"
    );
    // One node: said so.
    let err = plan_selected(&nodes[1..2], &[], &[], &cfg, &recipes(), "r1").unwrap_err();
    assert!(
        err.starts_with("1 node cannot be planned; fix it, then run again:\n  a: "),
        "{err}"
    );
}

/// Names that would reach a command line as options or shell are refused in the plan, every
/// node at once, each with the rule it breaks; nothing is planned (docs/domain.md, "Names on
/// the write side").
#[test]
fn hostile_names_are_refused_in_the_plan() {
    let cfg = UpgradeConfig::default();
    let mut recipes = recipes();
    recipes.insert(
        "named".into(),
        Recipe {
            sudo: false,
            steps: vec![RecipeStep {
                name: "tag".into(),
                run: "tag-node {node} {root}".into(),
                reboot: false,
                kill_after: None,
            }],
            driver_version: None,
            nccl_test: None,
        },
    );
    let with = |name: &str, f: &dyn Fn(&mut Node)| {
        let mut n = node(name, true);
        f(&mut n);
        (n, report(name, NodeStatus::Migrate))
    };
    let k8s = |scheduler: &'static str| {
        move |n: &mut Node| {
            n.drain = Some(DrainSpec {
                backend: DrainBackend::Kubernetes,
                node_name: Some(scheduler.into()),
                ..Default::default()
            })
        }
    };
    let nodes = vec![
        with("h1", &|n| n.host = "-oProxyCommand=touch x".into()),
        with("h2", &|n| n.host = "gpu1;reboot".into()),
        with("u1", &|n| n.user = "-l".into()),
        with("r1", &|n| n.root = "-rf".into()),
        with("k1", &k8s("--selector=nvidia.com/gpu.present=true")),
        with("k2", &k8s("GPU01")),
        with("s1", &|n| {
            n.drain.as_mut().unwrap().node_name = Some("gpu[1-9]".into())
        }),
        with("s2", &|n| {
            n.drain.as_mut().unwrap().node_name = Some("a,b".into())
        }),
        with("-l", &|n| n.recipe = Some("named".into())),
        with("$(touch x)", &|n| n.recipe = Some("named".into())),
        // Fine: an alias with `_`, an IPv6 literal, a name in a recipe without `{node}`.
        with("ok1", &|n| n.host = "gpu_01".into()),
        with("ok2", &|n| n.host = "fe80::1%eth0".into()),
        with("-ok3", &|_| {}),
    ];
    let e = plan(Mode::Canary, &nodes, &[], &[], &cfg, &recipes, "r-1").unwrap_err();
    assert!(e.starts_with("11 nodes cannot be planned"), "{e}");
    for want in [
        "h1: SSH host \"-oProxyCommand=touch x\" is not a host OpenSSH accepts",
        "h2: SSH host \"gpu1;reboot\" is not a host OpenSSH accepts",
        "u1: SSH user \"-l\" is not a user OpenSSH accepts",
        "r1: root \"-rf\" is not an absolute path",
        "k1: scheduler name \"--selector=nvidia.com/gpu.present=true\" for the kubernetes drain backend is not a Kubernetes node name",
        "k2: scheduler name \"GPU01\" for the kubernetes drain backend",
        "s1: scheduler name \"gpu[1-9]\" for the slurm drain backend is not one Slurm node name (`,` `[` `]` make it a hostlist",
        "s2: scheduler name \"a,b\" for the slurm drain backend",
        "-l: scheduler name \"-l\" for the slurm drain backend is not one Slurm node name (it starts with `-`); node name \"-l\" (the recipe's {node}) is not a plain name",
        "$(touch x): scheduler name \"$(touch x)\" for the slurm drain backend",
    ] {
        assert!(e.contains(want), "{want:?} not in:\n{e}");
    }
    for fine in ["ok1", "ok2"] {
        assert!(!e.contains(&format!("\n  {fine}:")), "{e}");
    }
    // `-ok3` is refused for its Slurm name only, not for a recipe without `{node}`.
    assert!(e.contains("-ok3: scheduler name"), "{e}");
    assert!(!e.contains("\"-ok3\" (the recipe's"), "{e}");
    // A newline in a name cannot forge a line of the refusal.
    let nl = vec![with("gpu1\ngpu2", &|n| n.recipe = Some("named".into()))];
    let e = plan(Mode::Canary, &nl, &[], &[], &cfg, &recipes, "r-1").unwrap_err();
    assert_eq!(e.lines().count(), 2, "{e}");
    assert!(e.contains("\"gpu1\\ngpu2\""), "{e}");
}
