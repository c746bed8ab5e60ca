//! Tests of the TUI's rollout display (src/app/rollout.rs).

use super::*;
use crate::actions::rollout::{Mode as RolloutMode, NodePlan};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn recipe(name: &str, reboot: bool) -> Step {
    Step::Recipe {
        name: name.into(),
        run: "true".into(),
        reboot,
        sudo: false,
        root: "/".into(),
        timeout_s: 60,
        kill_after_s: None,
    }
}

fn plan() -> Plan {
    Plan {
        rollout: "r-1".into(),
        mode: RolloutMode::Canary,
        nodes: ["gpu000", "gpu001"]
            .iter()
            .map(|n| NodePlan {
                node: n.to_string(),
                steps: vec![
                    recipe("switch", false),
                    recipe("reboot", true),
                    Step::Reprobe,
                    Step::Unlock {
                        root: "/".into(),
                        sudo: false,
                    },
                ],
                next_boot: None,
                note: None,
            })
            .collect(),
        skipped: vec![],
        budget: None,
    }
}

fn ev(rollout: &str, node: &str, step: &str, state: &str) -> Event {
    Event {
        detail: String::new(),
        node: node.into(),
        rollout: rollout.into(),
        state: state.into(),
        step: step.into(),
        time: String::new(),
    }
}

fn app() -> App {
    let rows = ["gpu000", "gpu001"].iter().map(|n| Row::new(*n)).collect();
    App::new(rows, Keymap::default(), false, "test".into())
}

fn typed(a: &mut App, s: &str) -> Vec<Effect> {
    for c in s.chars() {
        a.update(Msg::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )));
    }
    a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)))
}

/// Each event leaves the word the brief names: a reboot step and the wait after it are
/// `rebooting`, another step `step NAME`, the last step done `done`, a failure where.
#[test]
fn events_become_the_rollout_column_words() {
    let p = plan();
    let w = |step: &str, state: &str| live_word(&ev("r-1", "gpu000", step, state), Some(&p));
    assert_eq!(w("lock", "start").as_deref(), Some("locking"));
    assert_eq!(w("drain", "start").as_deref(), Some("draining"));
    assert_eq!(w("step:switch", "start").as_deref(), Some("step switch"));
    assert_eq!(w("step:switch", "done"), None);
    assert_eq!(w("boot-id:reboot", "start").as_deref(), Some("step reboot"));
    assert_eq!(w("step:reboot", "start").as_deref(), Some("rebooting"));
    assert_eq!(w("wait-ssh:reboot", "start").as_deref(), Some("rebooting"));
    assert_eq!(w("gates", "start").as_deref(), Some("gates"));
    assert_eq!(w("uncordon", "start").as_deref(), Some("uncordoning"));
    assert_eq!(w("unlock", "done").as_deref(), Some("done"));
    assert_eq!(
        w("step:switch", "failed").as_deref(),
        Some("failed: switch")
    );
    assert_eq!(
        w("kill:switch", "start").as_deref(),
        Some("stopping switch")
    );
    assert_eq!(w("hook:on_failure", "failed"), None);
}

/// The TUI's own rollout's events reach the ROLLOUT cell of their node; another
/// rollout's do not; the end replaces them with each node's outcome, and the status line
/// names the result pane's key, which opens the pane.
#[test]
fn progress_then_result_in_the_matrix_and_the_pane() {
    use crate::actions::rollout::{Drained, Failure, NodeOutcome};
    let mut a = app();
    a.update(Msg::UpgradePlanned(Ok((vec![], Box::new(plan())))));
    assert_eq!(
        a.confirm.as_ref().map(|c| c.kind),
        Some(ConfirmKind::Upgrade)
    );
    let e = typed(&mut a, "2");
    assert!(matches!(&e[..], [Effect::RunUpgrade { .. }]), "{e:?}");
    assert_eq!(cell(&a.rows[0], Column::Rollout), "queued");
    a.update(Msg::RolloutEvent(Box::new(ev(
        "r-1",
        "gpu000",
        "step:switch",
        "start",
    ))));
    a.update(Msg::RolloutEvent(Box::new(ev(
        "r-other", "gpu001", "drain", "start",
    ))));
    assert_eq!(cell(&a.rows[0], Column::Rollout), "step switch");
    // The executor's log line, its `…` said as `...` (the status line would escape it).
    a.update(Msg::UpgradeLog("gpu000: step:switch …".into()));
    assert_eq!(a.message.as_deref(), Some("gpu000: step:switch ..."));
    assert_eq!(cell(&a.rows[1], Column::Rollout), "queued");
    let report = Report {
        plan: plan(),
        outcomes: vec![
            NodeOutcome {
                node: "gpu000".into(),
                failure: None,
                skipped: None,
                drained: Drained::GivenBack,
                kept: None,
            },
            NodeOutcome {
                node: "gpu001".into(),
                failure: Some(Failure {
                    seq: Some(0),
                    step: "step:switch".into(),
                    why: "exit status 3: a long reason ".repeat(10),
                }),
                skipped: None,
                drained: Drained::Yes,
                kept: None,
            },
        ],
        summary: "rollout r-1: …".into(),
    };
    let result = RolloutResult::of_report(&report);
    assert_eq!(result.title, "rollout r-1 stopped: 1 upgraded, 1 failed");
    assert!(
        result.nodes[1]
            .outcome
            .starts_with("stopped at step:switch and stays drained: exit status 3")
    );
    let e = a.update(Msg::UpgradeDone {
        names: vec!["gpu000".into(), "gpu001".into()],
        summary: report.summary.clone(),
        result: Some(Box::new(result)),
    });
    assert!(matches!(&e[..], [Effect::Scan { .. }]), "{e:?}");
    assert_eq!(cell(&a.rows[0], Column::Rollout), "done");
    assert_eq!(cell(&a.rows[1], Column::Rollout), "failed: switch");
    assert_eq!(
        a.message.as_deref(),
        Some("rollout r-1 stopped: 1 upgraded, 1 failed (o: result)")
    );
    // The result line stays (other messages clear themselves after MESSAGE_TICKS).
    for _ in 0..=crate::app::MESSAGE_TICKS * 2 {
        a.update(Msg::Tick {
            since_scan_secs: None,
        });
    }
    assert_eq!(
        a.message.as_deref(),
        Some("rollout r-1 stopped: 1 upgraded, 1 failed (o: result)")
    );
    a.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('o'),
        KeyModifiers::NONE,
    )));
    assert_eq!(a.mode, Mode::Result);
    a.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    assert_eq!(a.mode, Mode::Matrix);
}

/// Resume, abandon and cancel ask the runtime for the unfinished rollout, then run behind
/// the typed count of its nodes, carrying its id; a wrong count changes nothing. A resume
/// or an abandon waits while this TUI's rollout runs; a cancel does not.
#[test]
fn resume_abandon_and_cancel_behind_the_typed_count() {
    let ctrl_r = Msg::Key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::CONTROL));
    for (k, kind) in [
        (ctrl_r.clone(), ConfirmKind::Resume),
        (
            Msg::Key(KeyEvent::new(KeyCode::Char('A'), KeyModifiers::NONE)),
            ConfirmKind::Abandon,
        ),
        (
            Msg::Key(KeyEvent::new(KeyCode::Char('C'), KeyModifiers::NONE)),
            ConfirmKind::Cancel,
        ),
    ] {
        let mut a = app();
        assert_eq!(a.update(k.clone()), vec![Effect::FindUnfinished { kind }]);
        let u = Unfinished {
            kind,
            plan: Box::new(plan()),
            lines: unfinished_lines(kind, &plan(), &Default::default()),
        };
        a.update(Msg::UnfinishedFound(Ok(u.clone())));
        assert_eq!(a.mode, Mode::Confirm);
        assert!(typed(&mut a, "3").is_empty());
        assert!(a.message.as_deref().unwrap().contains("not confirmed"));
        a.update(Msg::UnfinishedFound(Ok(u)));
        let e = typed(&mut a, "2");
        let id = "r-1".to_string();
        let want = match kind {
            ConfirmKind::Resume => Effect::Resume { rollout: id },
            ConfirmKind::Abandon => Effect::Abandon { rollout: id },
            _ => Effect::CancelRollout { rollout: id },
        };
        assert_eq!(e, vec![want]);
        assert_eq!(a.upgrading, kind == ConfirmKind::Resume);
        // While the resumed rollout runs here: only a cancel goes on.
        a.upgrading = true;
        let again = a.update(k);
        assert_eq!(!again.is_empty(), kind == ConfirmKind::Cancel, "{kind:?}");
    }
    // Read-only: none of them is bound, and each is refused if reached.
    let (km, _) = Keymap::new(&Default::default(), true);
    for act in [
        Action::ResumeRollout,
        Action::AbandonRollout,
        Action::CancelRollout,
    ] {
        assert!(!km.bound().any(|x| x == act));
        let mut ro = App::new(vec![Row::new("n")], km.clone(), true, String::new());
        assert!(ro.act(act).is_empty());
    }
    // A refused plan because a rollout did not finish names the keys.
    let mut a = app();
    a.update(Msg::UpgradePlanned(Err(PlanRefused {
        why: "rollout r-1 did not finish: …".into(),
        unfinished: true,
    })));
    assert!(
        a.message
            .as_deref()
            .unwrap()
            .contains("(here: ctrl-r resume, A abandon, C cancel its running step)"),
        "{:?}",
        a.message
    );
}

/// The cancel's confirmation names the step running on each node (started, not ended).
#[test]
fn the_cancel_confirmation_names_the_running_step() {
    let mut progress = Progress::new();
    progress.insert(("gpu000".into(), 0), Phase::Done);
    progress.insert(("gpu000".into(), 1), Phase::Start);
    let lines = unfinished_lines(ConfirmKind::Cancel, &plan(), &progress);
    assert_eq!(
        lines,
        [
            "gpu000: stops step:reboot (started, not ended)",
            "gpu001: no recipe step runs on it now (nothing to stop)"
        ]
    );
    let lines = unfinished_lines(ConfirmKind::Resume, &plan(), &progress);
    assert!(
        lines[0] == "done before (skipped on resume): gpu000 step:switch",
        "{lines:?}"
    );
}
