use std::collections::BTreeMap;

use super::columns::{COLUMNS, Column};
use super::detail::{Line, fact_lines};
use super::*;
use crate::model::report::NextBootDriver;

/// Every fixture's report, from its committed JSON output (tests/golden/), by file name.
fn goldens() -> BTreeMap<String, NodeReport> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut out = BTreeMap::new();
    for dir in ["nodes", "nodes-v2"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            let doc: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let r: NodeReport = serde_json::from_value(doc["nodes"][0].clone()).unwrap();
            out.insert(p.file_name().unwrap().to_string_lossy().into_owned(), r);
        }
    }
    assert!(out.len() >= 16, "{} goldens", out.len());
    out
}

/// A node the scan could not reach: every fact `null`.
fn unreachable() -> NodeReport {
    NodeReport::unreachable(
        "gone".into(),
        Code::SshRefused,
        "connection refused".into(),
        Vec::new(),
        "2026-11-30T10:00:00Z".into(),
        3,
    )
}

/// A cell's tone is the state of its fact: `?` is Unknown and Unknown is `?`, in every column
/// of every fixture and in every fact of the detail pane; an unreachable node has nothing
/// Unknown (its facts are `-`). The tones the matrix colours by all occur, so the check
/// covers them.
#[test]
fn every_cell_of_every_fixture_has_the_tone_of_its_fact() {
    let mut seen: Vec<Tone> = Vec::new();
    let mut reports: Vec<(String, NodeReport)> = goldens().into_iter().collect();
    reports.push(("unreachable".into(), unreachable()));
    // No fixture has a fact unknown in the matrix: one whose reads failed.
    let mut failed = reports[0].1.clone();
    failed.kernel = None;
    failed.driver = None;
    failed.gpus = None;
    failed.dma_buf.as_mut().unwrap().kernel_support = None;
    failed.peermem.as_mut().unwrap().configured = None;
    failed.rdma = None;
    reports.push(("reads failed".into(), failed));
    for (file, n) in &reports {
        for spec in COLUMNS.iter() {
            let c = spec.column.cell(n);
            assert_eq!(
                c.text == "?",
                c.tone == Tone::Unknown,
                "{:?} of {file}: {c:?}",
                spec.column
            );
            if !seen.contains(&c.tone) {
                seen.push(c.tone);
            }
        }
        for line in fact_lines(n) {
            if let Line::Fact { name, value, .. } = line {
                assert_eq!(
                    value.text.starts_with('?'),
                    value.tone == Tone::Unknown,
                    "{name} of {file}: {value:?}"
                );
            }
        }
    }
    let u = unreachable();
    assert!(
        COLUMNS
            .iter()
            .all(|s| s.column.cell(&u).tone != Tone::Unknown)
    );
    assert!(fact_lines(&u).is_empty());
    for t in [
        Tone::Plain,
        Tone::Warn,
        Tone::Crit,
        Tone::Unknown,
        Tone::Dim,
    ] {
        assert!(seen.contains(&t), "no fixture has a {t:?} cell: {seen:?}");
    }
}

/// The tone follows the fact, not the words: the proprietary module is Warn, a next boot
/// without the driver Crit, whatever the cell says.
#[test]
fn tones_follow_the_facts_of_every_fixture() {
    for (file, n) in goldens() {
        let flavor = Column::Flavor.cell(&n);
        assert_eq!(
            flavor.tone == Tone::Warn,
            super::flavor(&n) == Fact::Known(Flavor::Proprietary),
            "{file}"
        );
        let next = Column::NextBoot.cell(&n);
        assert_eq!(
            next.tone == Tone::Crit,
            super::next_boot(&n) == Fact::Known(NextBootDriver::Missing),
            "{file}"
        );
        assert_eq!(Column::Status.cell(&n).tone, Tone::Status(n.status));
    }
}

/// The machine values are the JSON's own words, and the next boot's state serializes as them.
#[test]
fn machine_values_are_the_json_words() {
    for d in NextBootDriver::ALL {
        assert_eq!(
            serde_json::to_value(d).unwrap(),
            serde_json::Value::String(d.as_str().into())
        );
        let back: NextBootDriver =
            serde_json::from_value(serde_json::Value::String(d.as_str().into())).unwrap();
        assert_eq!(back, d);
    }
    for (file, n) in goldens() {
        let driver = n.driver.as_ref();
        assert_eq!(
            machine::flavor(&n),
            driver.map(|d| d.flavor.as_str()),
            "{file}"
        );
        assert_eq!(
            machine::next_boot(&n),
            n.next_boot_driver().map(NextBootDriver::as_str),
            "{file}"
        );
        let marks = n.rollout_marks();
        assert_eq!(
            rollout_words(marks).is_empty(),
            !marks.drained && !marks.locked
        );
    }
    let u = unreachable();
    assert_eq!(kernel(&u), Fact::NotApplicable);
    assert_eq!(machine::flavor(&u), None);
    assert_eq!(machine::next_boot(&u), None);
}
