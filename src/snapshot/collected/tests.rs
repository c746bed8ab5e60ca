use super::*;
use crate::model::NodeStatus;

fn report(name: &str, at: &str, status: NodeStatus) -> NodeReport {
    let mut r = NodeReport::unreachable(
        name.to_string(),
        crate::model::Code::ProbeOutputInvalid,
        "x".into(),
        Vec::new(),
        at.to_string(),
        1,
    );
    r.status = status;
    r
}

fn collected(files: &[PathBuf]) -> Vec<Collected> {
    load(files).unwrap().into_collected().collect()
}

fn jsonl(nodes: &[NodeReport]) -> String {
    let mut s = String::new();
    for n in nodes {
        s.push_str(&serde_json::json!({"type": "node", "data": n}).to_string());
        s.push('\n');
        s.push_str("{\"type\":\"summary\",\"data\":{\"nodes\":1}}\n");
    }
    s
}

#[test]
fn concatenated_runs_and_documents_merge_by_name_newest_wins() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("srun.jsonl");
    std::fs::write(
        &a,
        jsonl(&[
            report("gpu1", "2026-01-02T00:00:00Z", NodeStatus::Migrate),
            report("gpu2", "2026-01-02T00:00:00Z", NodeStatus::Migrate),
            // gpu1 again, older: loses.
            report("gpu1", "2026-01-01T00:00:00Z", NodeStatus::Blocked),
        ]),
    )
    .unwrap();
    let b = dir.path().join("daemonset.json");
    let doc = crate::model::report::Snapshot::new(
        "2026-01-03T00:00:00Z".into(),
        vec![
            report("gpu2", "2026-01-03T00:00:00Z", NodeStatus::Ready),
            report("gpu3", "2026-01-01T00:00:00Z", NodeStatus::NoDriver),
        ],
    );
    std::fs::write(&b, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let got = collected(&[a.clone(), b.clone()]);
    let names: Vec<_> = got.iter().map(|c| c.report.name.as_str()).collect();
    assert_eq!(names, ["gpu1", "gpu2", "gpu3"]);
    assert_eq!(got[0].report.status, NodeStatus::Migrate);
    assert_eq!((&*got[0].file, got[0].line), (a.as_path(), 1));
    assert_eq!(got[1].report.status, NodeStatus::Ready);
    assert_eq!(&*got[1].file, b.as_path());
    // Order of the files does not change who wins.
    let got = collected(&[b, a]);
    assert_eq!(got[0].report.name, "gpu2");
    assert_eq!(got[0].report.status, NodeStatus::Ready);
}

#[test]
fn time_zones_compare_as_instants() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    // 01:30+02:00 is 23:30Z the day before: older than 00:00Z.
    std::fs::write(
        &a,
        jsonl(&[
            report("n", "2026-01-02T00:00:00Z", NodeStatus::Ready),
            report("n", "2026-01-02T01:30:00+02:00", NodeStatus::Migrate),
        ]),
    )
    .unwrap();
    let got = collected(&[a]);
    assert_eq!(got[0].report.status, NodeStatus::Ready);
}

#[test]
fn hostile_files_get_file_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.jsonl");
    let good = jsonl(&[report("n", "2026-01-02T00:00:00Z", NodeStatus::Ready)]);
    let cases: &[(&str, &str)] = &[
        ("", "empty file"),
        ("   \n", "empty file"),
        ("{\"schema_version\": 4, \"nodes\": []}", "schema_version 4"),
        ("{\"nodes\": []}", "no schema_version"),
        ("[1,2", ":1:"),
        ("{\"type\":\"summary\",\"data\":{}}\n", "no node records"),
        ("{\"type\":\"node\"}\n", ":1: a node record without `data`"),
        (
            "{\"type\":\"node\",\"data\":{\"name\":1}}\n",
            ":1: not a node report",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(&f, text).unwrap();
        let e = load(std::slice::from_ref(&f)).unwrap_err();
        assert!(e.contains(want), "{text:?}: {e}");
        assert!(e.starts_with(&f.display().to_string()), "{e}");
    }
    std::fs::write(&f, format!("{good}\u{1b}[2J not json\n")).unwrap();
    let e = load(std::slice::from_ref(&f)).unwrap_err();
    assert!(e.contains("bad.jsonl:3:"), "{e}");
    std::fs::write(
        &f,
        "{\"type\":\"node\",\"data\":{\"name\":\"n\",\"status\":\"\\u001b[2J\"}}\n",
    )
    .unwrap();
    // Quoted raw: `snapshot --from`, `policy` and the TUI escape it where they show it, once.
    let e = load(std::slice::from_ref(&f)).unwrap_err();
    assert!(
        e.contains("not a node report") && e.contains("`\u{1b}[2J`"),
        "{e}"
    );
    let e = load(&[dir.path().join("missing.json")]).unwrap_err();
    assert!(e.contains("missing.json"), "{e}");
}

#[test]
fn schema_1_documents_are_read() {
    let doc = crate::model::report::Snapshot::new(
        "2026-01-03T00:00:00Z".into(),
        vec![report("a", "2026-01-03T00:00:00Z", NodeStatus::Ready)],
    );
    let mut v = serde_json::to_value(&doc).unwrap();
    v["schema_version"] = 1.into();
    for n in v["nodes"].as_array_mut().unwrap() {
        let o = n.as_object_mut().unwrap();
        for k in [
            "boot",
            "firmware",
            "module_params",
            "rdma",
            "secure_boot",
            "kernel_log",
            "rollout",
            "evidence",
        ] {
            o.remove(k);
        }
    }
    let got = parse(&v.to_string(), Path::new("old.json")).unwrap();
    assert_eq!(got[0].report.name, "a");
}

/// Reports of the fleet's real scans, and a forged `gpu-a` from another node's file.
fn forged(dir: &Path, at: &str) -> (PathBuf, PathBuf) {
    let real = dir.join("daemonset-gpu-a.jsonl");
    std::fs::write(
        &real,
        jsonl(&[
            report("gpu-a", "2026-01-02T00:00:00Z", NodeStatus::Attention),
            report("gpu-b", "2026-01-02T00:00:00Z", NodeStatus::Ready),
        ]),
    )
    .unwrap();
    let evil = dir.join("daemonset-gpu-b.jsonl");
    std::fs::write(&evil, jsonl(&[report("gpu-a", at, NodeStatus::Ready)])).unwrap();
    (real, evil)
}

#[test]
fn a_report_from_the_future_or_of_no_time_never_takes_over_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let now: jiff::Timestamp = "2026-01-02T00:05:00Z".parse().unwrap();
    let opts = Options {
        now,
        clock_skew: DEFAULT_CLOCK_SKEW,
    };
    for at in [
        "9999-01-01T00:00:00Z",
        // Valid RFC 3339 that jiff cannot represent: it used to abort the whole merge.
        "9999-12-31T23:59:59Z",
        "yesterday",
    ] {
        let (real, evil) = forged(dir.path(), at);
        for files in [[real.clone(), evil.clone()], [evil.clone(), real.clone()]] {
            let loaded = load_with(&files, &opts).unwrap();
            let w = loaded.warnings();
            let got: Vec<Collected> = loaded.into_collected().collect();
            let a = got.iter().find(|c| c.report.name == "gpu-a").unwrap();
            assert_eq!(a.report.status, NodeStatus::Attention, "{at}: {w:?}");
            assert_eq!(&*a.file, real.as_path());
            assert_eq!(got.len(), 2);
            let finding = if at == "9999-01-01T00:00:00Z" {
                "later than now plus the 600 s clock-skew allowance"
            } else {
                "is not a time gpufleet can compare"
            };
            let shown = evil.display().to_string();
            assert!(
                w.iter().any(
                    |l| l.starts_with(&format!("{shown}:1: node `gpu-a`: scanned_at"))
                        && l.contains(finding)
                ),
                "{at}: {w:?}"
            );
            // Two sources claim gpu-a, with different reports: both are named.
            assert!(
                w.iter().any(|l| l.contains("hold different reports")
                    && l.contains(&shown)
                    && l.contains(&real.display().to_string())),
                "{w:?}"
            );
        }
        // Alone, the report is shown (it is all there is), with its finding.
        let loaded = load_with(std::slice::from_ref(&evil), &opts).unwrap();
        assert_eq!(loaded.warnings().len(), 1);
        let got: Vec<Collected> = loaded.into_collected().collect();
        assert_eq!(got[0].report.status, NodeStatus::Ready);
    }
}

#[test]
fn the_clock_skew_allowance_is_settable_and_equal_copies_are_no_finding() {
    let dir = tempfile::tempdir().unwrap();
    let now: jiff::Timestamp = "2026-01-02T00:00:00Z".parse().unwrap();
    // Five minutes ahead: within the default allowance, wins as the newest.
    let (real, evil) = forged(dir.path(), "2026-01-02T00:05:00Z");
    let loaded = load_with(
        &[real.clone(), evil.clone()],
        &Options {
            now,
            clock_skew: DEFAULT_CLOCK_SKEW,
        },
    )
    .unwrap();
    assert!(loaded.warnings().iter().all(|w| !w.contains("clock-skew")));
    let got: Vec<Collected> = loaded.into_collected().collect();
    assert_eq!(got[0].report.status, NodeStatus::Ready);
    // With no allowance it is a finding and loses.
    let loaded = load_with(
        &[real.clone(), evil],
        &Options {
            now,
            clock_skew: Duration::ZERO,
        },
    )
    .unwrap();
    assert!(
        loaded
            .warnings()
            .iter()
            .any(|w| w.contains("later than now plus the 0 s clock-skew allowance")),
        "{:?}",
        loaded.warnings()
    );
    let got: Vec<Collected> = loaded.into_collected().collect();
    assert_eq!(got[0].report.status, NodeStatus::Attention);
    // The same file read twice (a copy): no finding.
    let copy = dir.path().join("copy.jsonl");
    std::fs::copy(&real, &copy).unwrap();
    let loaded = load_with(
        &[real, copy],
        &Options {
            now,
            clock_skew: DEFAULT_CLOCK_SKEW,
        },
    )
    .unwrap();
    assert_eq!(loaded.warnings(), Vec::<String>::new());
}

#[test]
fn clock_skew_takes_seconds_or_units_up_to_a_day() {
    for (s, secs) in [
        ("600", 600),
        ("0", 0),
        ("10m", 600),
        ("90s", 90),
        ("1h 30m", 5400),
        ("24h", 86_400),
    ] {
        assert_eq!(parse_clock_skew(s), Ok(Duration::from_secs(secs)), "{s}");
    }
    for s in ["", "-1", "-5m", "1.5s", "86401", "25h", "10 parsecs", "2d"] {
        assert!(parse_clock_skew(s).is_err(), "{s}");
    }
}

#[test]
fn names_come_in_the_order_of_the_reports() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    std::fs::write(
        &a,
        jsonl(&[
            report("b", "2026-01-02T00:00:00Z", NodeStatus::Ready),
            report("a", "2026-01-02T00:00:00Z", NodeStatus::Ready),
            report("b", "2026-01-03T00:00:00Z", NodeStatus::Migrate),
        ]),
    )
    .unwrap();
    let loaded = load(&[a]).unwrap();
    let names: Vec<String> = loaded.names().map(str::to_string).collect();
    let got: Vec<String> = loaded.into_collected().map(|c| c.report.name).collect();
    assert_eq!(names, ["b", "a"]);
    assert_eq!(names, got);
}
