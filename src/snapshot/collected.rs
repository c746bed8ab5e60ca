//! Snapshots collected elsewhere (`gpufleet snapshot --from`, `gpufleet tui --from`,
//! `policy check --against`, `policy generate --for`): a DaemonSet's JSON files, an `srun` over
//! every Slurm node writing JSON Lines, older snapshots (docs/domain.md, "Collected snapshots").
//!
//! A file is one `gpufleet snapshot --format json` document (schema 1 or 2) or JSON Lines
//! (`{"type":"node","data":{…}}` records; `summary` and other record types are skipped, and
//! several runs concatenated — one per node, as `srun` writes them — are fine). Several files
//! are merged by node name: the newest `scanned_at` wins (on equal times, the one read last).

use std::path::{Path, PathBuf};

use crate::model::report::NodeReport;

/// One node of a collected file, and where it was read (for errors and for people).
#[derive(Debug, Clone)]
pub struct Collected {
    pub report: NodeReport,
    /// The file it was read from.
    pub file: PathBuf,
    /// Its 1-based line: the JSON Lines record, or 1 for a JSON document.
    pub line: usize,
}

/// Reads and merges `files` (see the module docs); nodes come in the order they were first
/// seen.
///
/// Errors, as `file:line: message` (`file:line:column` where serde_json gives one): an
/// unreadable or empty file, text that is neither form, a schema other than 1 or 2, a record
/// that is not a node report, a `scanned_at` that is not an RFC 3339 time. serde's messages
/// quote what they could not read (`unknown variant …`): the caller escapes the error where it
/// shows it (`terminal_safe`, once).
pub fn load(files: &[PathBuf]) -> Result<Vec<Collected>, String> {
    let mut merged: Vec<Collected> = Vec::new();
    for f in files {
        let text = crate::limits::read_to_string(f, crate::limits::Kind::Snapshot)
            .map_err(|e| format!("{}: {e}", f.display()))?;
        for c in parse(&text, f)? {
            merge(&mut merged, c)?;
        }
    }
    Ok(merged)
}

/// [`load`]'s reports alone.
pub fn load_reports(files: &[PathBuf]) -> Result<Vec<NodeReport>, String> {
    Ok(load(files)?.into_iter().map(|c| c.report).collect())
}

/// Adds `c` to `merged`: a new node is appended; a node already there is replaced when `c` is
/// as new or newer.
fn merge(merged: &mut Vec<Collected>, c: Collected) -> Result<(), String> {
    let Some(old) = merged.iter_mut().find(|m| m.report.name == c.report.name) else {
        merged.push(c);
        return Ok(());
    };
    if time(&c)? >= time(old)? {
        *old = c;
    }
    Ok(())
}

fn time(c: &Collected) -> Result<jiff::Timestamp, String> {
    c.report.scanned_at.parse::<jiff::Timestamp>().map_err(|e| {
        format!(
            "{}:{}: node `{}`: scanned_at {:?} is not an RFC 3339 time ({e}); cannot tell which report is newer",
            c.file.display(),
            c.line,
            c.report.name.escape_debug(),
            c.report.scanned_at
        )
    })
}

/// The nodes of one file's text, in file order (a node may appear more than once); `file`
/// names it in errors and in the result.
pub fn parse(text: &str, file: &Path) -> Result<Vec<Collected>, String> {
    #[derive(serde::Deserialize)]
    struct Line {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        data: Option<serde_json::Value>,
    }
    let shown = file.display();
    if text.trim().is_empty() {
        return Err(format!(
            "{shown}: empty file: not a gpufleet snapshot (JSON or JSON Lines)"
        ));
    }
    // JSON Lines: a first line that is a whole object with a `type`.
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let jsonl =
        serde_json::from_str::<serde_json::Value>(first).is_ok_and(|v| v.get("type").is_some());
    if !jsonl {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            format!(
                "{shown}:{}:{}: not a gpufleet snapshot (JSON or JSON Lines): {e}",
                e.line(),
                e.column()
            )
        })?;
        match v.get("schema_version").and_then(|s| s.as_u64()) {
            Some(1 | 2) => {}
            Some(n) => {
                return Err(format!(
                    "{shown}: schema_version {n}: this gpufleet reads snapshots of schema 1 and 2"
                ));
            }
            None => {
                return Err(format!(
                    "{shown}: not a gpufleet snapshot (no schema_version; `gpufleet snapshot --format json` writes one)"
                ));
            }
        }
        let nodes = v
            .get("nodes")
            .cloned()
            .ok_or_else(|| format!("{shown}: no `nodes` array"))?;
        let nodes: Vec<NodeReport> =
            serde_json::from_value(nodes).map_err(|e| format!("{shown}: nodes: {e}"))?;
        return Ok(nodes
            .into_iter()
            .map(|report| Collected {
                report,
                file: file.to_path_buf(),
                line: 1,
            })
            .collect());
    }
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(l).map_err(|e| {
            format!(
                "{shown}:{}:{}: not a gpufleet JSON Lines record: {e}",
                i + 1,
                e.column()
            )
        })?;
        if line.kind != "node" {
            continue;
        }
        let data = line
            .data
            .ok_or_else(|| format!("{shown}:{}: a node record without `data`", i + 1))?;
        let report = serde_json::from_value(data)
            .map_err(|e| format!("{shown}:{}: not a node report: {e}", i + 1))?;
        out.push(Collected {
            report,
            file: file.to_path_buf(),
            line: i + 1,
        });
    }
    if out.is_empty() {
        return Err(format!(
            "{shown}: no node records (JSON Lines with no {{\"type\":\"node\"}} line)"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
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
        let got = load(&[a.clone(), b.clone()]).unwrap();
        let names: Vec<_> = got.iter().map(|c| c.report.name.as_str()).collect();
        assert_eq!(names, ["gpu1", "gpu2", "gpu3"]);
        assert_eq!(got[0].report.status, NodeStatus::Migrate);
        assert_eq!((got[0].file.clone(), got[0].line), (a.clone(), 1));
        assert_eq!(got[1].report.status, NodeStatus::Ready);
        assert_eq!(got[1].file, b);
        // Order of the files does not change who wins.
        let got = load(&[b, a]).unwrap();
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
        let got = load(&[a]).unwrap();
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
            ("{\"schema_version\": 3, \"nodes\": []}", "schema_version 3"),
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
        let twice = jsonl(&[
            report("n", "2026-01-02T00:00:00Z", NodeStatus::Ready),
            report("n", "yesterday", NodeStatus::Ready),
        ]);
        std::fs::write(&f, twice).unwrap();
        let e = load(std::slice::from_ref(&f)).unwrap_err();
        assert!(
            e.contains("bad.jsonl:3: node `n`: scanned_at \"yesterday\""),
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
}
