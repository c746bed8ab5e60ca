//! What changed between two snapshots (`gpufleet diff OLD.json NEW.json`, and the TUI's
//! `--compare`): per node, the status, kernel, module flavor, driver, GPUs, nvidia-peermem
//! (loaded, configured, registered), next boot (kernel and driver), and the reason codes added and
//! removed; nodes added and removed (docs/domain.md "Diff"). Reads snapshot JSON of schema 1 and
//! 2, and JSON Lines. No I/O beyond [`read`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::model::NodeStatus;
use crate::model::report::{NodeReport, READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION};
use crate::view::columns::Column;

/// A compared value of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    Status,
    Kernel,
    Flavor,
    Driver,
    Gpus,
    PeermemLoaded,
    PeermemConfigured,
    PeermemRegistered,
    NextBootKernel,
    NextBootDriver,
}

impl Field {
    pub const ALL: [Field; 10] = [
        Field::Status,
        Field::Kernel,
        Field::Flavor,
        Field::Driver,
        Field::Gpus,
        Field::PeermemLoaded,
        Field::PeermemConfigured,
        Field::PeermemRegistered,
        Field::NextBootKernel,
        Field::NextBootDriver,
    ];

    /// Its name in the text and JSON output (`next_boot_kernel`).
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Status => "status",
            Field::Kernel => "kernel",
            Field::Flavor => "flavor",
            Field::Driver => "driver",
            Field::Gpus => "gpus",
            Field::PeermemLoaded => "peermem_loaded",
            Field::PeermemConfigured => "peermem_configured",
            Field::PeermemRegistered => "peermem_registered",
            Field::NextBootKernel => "next_boot_kernel",
            Field::NextBootDriver => "next_boot_driver",
        }
    }

    /// The matrix column whose cell shows this value (for the TUI's changed-cell marks);
    /// `None` when no column shows it.
    pub fn column(self) -> Option<Column> {
        Some(match self {
            Field::Status => Column::Status,
            Field::Kernel => Column::Kernel,
            Field::Flavor => Column::Flavor,
            Field::Driver => Column::Driver,
            Field::Gpus => Column::Gpus,
            Field::PeermemLoaded | Field::PeermemConfigured | Field::PeermemRegistered => {
                Column::Peermem
            }
            Field::NextBootKernel | Field::NextBootDriver => Column::NextBoot,
        })
    }

    /// The value of this field in `n` (its machine value, [`crate::view::machine`]); `None`
    /// when unknown.
    pub fn value(self, n: &NodeReport) -> Option<String> {
        use crate::view::{self, machine};
        let text = |f: view::Fact<&str>| f.known().map(str::to_string);
        match self {
            Field::Status => Some(n.status.as_str().to_string()),
            Field::Kernel => text(view::kernel(n)),
            Field::Flavor => machine::flavor(n).map(str::to_string),
            Field::Driver => text(view::driver_version(n)),
            Field::Gpus => n.gpu_summary(),
            Field::PeermemLoaded => machine::boolean(view::peermem_loaded(n)),
            Field::PeermemConfigured => machine::boolean(view::peermem_configured(n)),
            Field::PeermemRegistered => machine::boolean(view::peermem_registered(n)),
            Field::NextBootKernel => text(view::boot_kernel(n)),
            Field::NextBootDriver => machine::next_boot(n).map(str::to_string),
        }
    }
}

/// One value that differs; `None` is unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub field: Field,
    pub old: Option<String>,
    pub new: Option<String>,
}

/// What changed on a node present in both snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeDiff {
    pub node: String,
    /// In [`Field::ALL`] order. When either side is unreachable only the status is compared
    /// (an unreachable node's facts are unknown, not changed).
    pub changes: Vec<Change>,
    /// Reason codes in the new snapshot and not the old, sorted.
    pub reasons_added: Vec<String>,
    pub reasons_removed: Vec<String>,
}

impl NodeDiff {
    /// The matrix columns with a changed cell ([`Column::Reasons`] when reasons changed).
    pub fn columns(&self) -> BTreeSet<ColumnKey> {
        let mut out: BTreeSet<ColumnKey> = self
            .changes
            .iter()
            .filter_map(|c| c.field.column())
            .map(ColumnKey)
            .collect();
        if !self.reasons_added.is_empty() || !self.reasons_removed.is_empty() {
            out.insert(ColumnKey(Column::Reasons));
        }
        out
    }
}

/// A [`Column`] that sorts (by its registry order), for sets of changed columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnKey(pub Column);

impl PartialOrd for ColumnKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ColumnKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0 as u8).cmp(&(other.0 as u8))
    }
}

/// A node only one snapshot has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Only {
    pub node: String,
    pub status: NodeStatus,
}

/// The difference of two snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    /// Nodes with a change, in the new snapshot's order.
    pub changed: Vec<NodeDiff>,
    pub added: Vec<Only>,
    pub removed: Vec<Only>,
    /// Nodes in both with nothing changed.
    pub unchanged: usize,
}

impl Diff {
    /// Nothing changed, added or removed.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }

    /// The change of node `name`, if any (for the TUI).
    pub fn node(&self, name: &str) -> Option<&NodeDiff> {
        self.changed.iter().find(|d| d.node == name)
    }
}

/// Compares `old` with `new` by node name. Names are unique within a snapshot ([`read`] checks
/// it; with twins here, the first of each name counts).
pub fn compare(old: &[NodeReport], new: &[NodeReport]) -> Diff {
    let mut olds: BTreeMap<&str, &NodeReport> = BTreeMap::new();
    for n in old {
        olds.entry(n.name.as_str()).or_insert(n);
    }
    let news: BTreeSet<&str> = new.iter().map(|n| n.name.as_str()).collect();
    let mut diff = Diff::default();
    let mut seen = BTreeSet::new();
    for n in new {
        if !seen.insert(n.name.as_str()) {
            continue;
        }
        let Some(o) = olds.get(n.name.as_str()) else {
            diff.added.push(Only {
                node: n.name.clone(),
                status: n.status,
            });
            continue;
        };
        let facts = o.status != NodeStatus::Unreachable && n.status != NodeStatus::Unreachable;
        let changes: Vec<Change> = Field::ALL
            .iter()
            .filter(|f| facts || **f == Field::Status)
            .filter_map(|f| {
                let (a, b) = (f.value(o), f.value(n));
                (a != b).then_some(Change {
                    field: *f,
                    old: a,
                    new: b,
                })
            })
            .collect();
        let codes = |r: &NodeReport| -> BTreeSet<String> {
            r.reasons
                .iter()
                .map(|r| r.code.as_str().to_string())
                .collect()
        };
        let (oc, nc) = (codes(o), codes(n));
        let d = NodeDiff {
            node: n.name.clone(),
            changes,
            reasons_added: nc.difference(&oc).cloned().collect(),
            reasons_removed: oc.difference(&nc).cloned().collect(),
        };
        if d.changes.is_empty() && d.reasons_added.is_empty() && d.reasons_removed.is_empty() {
            diff.unchanged += 1;
        } else {
            diff.changed.push(d);
        }
    }
    for n in old {
        if !news.contains(n.name.as_str()) && !diff.removed.iter().any(|r| r.node == n.name) {
            diff.removed.push(Only {
                node: n.name.clone(),
                status: n.status,
            });
        }
    }
    diff
}

#[derive(Deserialize)]
struct Doc {
    schema_version: u32,
    nodes: Vec<NodeReport>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: serde_json::Value,
}

/// Reads a snapshot: `--format json` (schema 1 or 2) or `--format jsonl`. Errors (as
/// `file:line:column: message` where serde_json gives one): unreadable, not JSON, not a
/// snapshot, a newer schema, a node name twice.
pub fn read(path: &Path) -> Result<Vec<NodeReport>, String> {
    let file = path.display().to_string();
    let text = crate::limits::read_to_string(path, crate::limits::Kind::Snapshot)
        .map_err(|e| format!("{file}: {e}"))?;
    parse(&text, &file)
}

/// [`read`] on text already read; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Vec<NodeReport>, String> {
    let at = |e: serde_json::Error| {
        format!(
            "{file}:{}:{}: not a gpufleet snapshot (JSON or JSON Lines from `gpufleet snapshot`): {e}",
            e.line(),
            e.column()
        )
    };
    // JSON Lines: a first line that is a whole object with a `type` (older gpufleet wrote
    // `data` before `type`).
    let first_line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let jsonl = serde_json::from_str::<serde_json::Value>(first_line)
        .is_ok_and(|v| v.get("type").is_some());
    let nodes = if jsonl {
        let mut nodes = Vec::new();
        for (i, l) in text.lines().enumerate() {
            if l.trim().is_empty() {
                continue;
            }
            let line: Line = serde_json::from_str(l)
                .map_err(|e| format!("{file}:{}: not a gpufleet JSON Lines record: {e}", i + 1))?;
            if line.kind == "node" {
                nodes.push(
                    serde_json::from_value(line.data)
                        .map_err(|e| format!("{file}:{}: not a node report: {e}", i + 1))?,
                );
            }
        }
        nodes
    } else {
        let v: serde_json::Value = serde_json::from_str(text).map_err(at)?;
        match v.get("schema_version").and_then(|s| s.as_u64()) {
            Some(n) if READABLE_SCHEMA_VERSIONS.contains(&n) => {}
            Some(n) => {
                return Err(format!(
                    "{file}: schema_version {n}: this gpufleet reads snapshots of schema 1 to {SCHEMA_VERSION}"
                ));
            }
            None => {
                return Err(format!(
                    "{file}: not a gpufleet snapshot (no schema_version; `gpufleet snapshot --format json` writes one)"
                ));
            }
        }
        let doc: Doc = serde_json::from_value(v).map_err(|e| format!("{file}: {e}"))?;
        let _ = doc.schema_version;
        doc.nodes
    };
    let mut seen = BTreeSet::new();
    for n in &nodes {
        if !seen.insert(n.name.as_str()) {
            return Err(format!("{file}: node `{}` appears twice", n.name));
        }
    }
    Ok(nodes)
}

/// The diff for people: one line per changed, added and removed node, then the counts. Node
/// text is passed through `safe` (the terminal escaping of the caller).
pub fn render_text(d: &Diff, safe: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let v = |x: &Option<String>| x.as_deref().map_or("unknown".to_string(), safe);
    for n in &d.changed {
        let mut parts: Vec<String> = n
            .changes
            .iter()
            .map(|c| format!("{} {} → {}", c.field.as_str(), v(&c.old), v(&c.new)))
            .collect();
        let mut reasons: Vec<String> = n.reasons_added.iter().map(|r| format!("+{r}")).collect();
        reasons.extend(n.reasons_removed.iter().map(|r| format!("-{r}")));
        if !reasons.is_empty() {
            parts.push(format!("reasons {}", reasons.join(" ")));
        }
        out.push_str(&format!(
            "changed  {}  {}\n",
            safe(&n.node),
            parts.join("; ")
        ));
    }
    for a in &d.added {
        out.push_str(&format!("added    {}  ({})\n", safe(&a.node), a.status));
    }
    for r in &d.removed {
        out.push_str(&format!("removed  {}  (was {})\n", safe(&r.node), r.status));
    }
    out.push_str(&format!(
        "{} changed, {} added, {} removed, {} unchanged\n",
        d.changed.len(),
        d.added.len(),
        d.removed.len(),
        d.unchanged
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Code;
    use crate::model::Flavor;
    use crate::model::report::{DriverJson, KernelJson, PeermemJson};

    fn node(
        name: &str,
        status: NodeStatus,
        flavor: Flavor,
        peermem: bool,
        codes: &[Code],
    ) -> NodeReport {
        let mut n = NodeReport::unreachable(
            name.into(),
            Code::SshTimeout,
            String::new(),
            vec![],
            String::new(),
            0,
        );
        n.status = status;
        n.reasons = codes
            .iter()
            .map(|c| crate::model::Reason::new(*c, String::new(), vec![]))
            .collect();
        if status != NodeStatus::Unreachable {
            n.kernel = Some(KernelJson {
                release: Some("6.8.0-49-generic".into()),
            });
            n.driver = Some(DriverJson {
                flavor,
                version: Some(
                    if flavor == Flavor::Open {
                        "580.65.06"
                    } else {
                        "535.183.01"
                    }
                    .into(),
                ),
                arch: None,
                userspace_version: None,
                managed_by: None,
                branch: None,
            });
            n.peermem = Some(PeermemJson {
                loaded: Some(peermem),
                configured: Some(peermem),
                registered: None,
            });
        }
        n
    }

    #[test]
    fn changes_added_removed_and_unreachable() {
        let old = vec![
            node(
                "a",
                NodeStatus::Migrate,
                Flavor::Proprietary,
                true,
                &[Code::PeermemLoaded],
            ),
            node("b", NodeStatus::Ready, Flavor::Open, false, &[]),
            node("c", NodeStatus::Migrate, Flavor::Proprietary, true, &[]),
            node("gone", NodeStatus::Ready, Flavor::Open, false, &[]),
        ];
        let new = vec![
            node("a", NodeStatus::Ready, Flavor::Open, false, &[]),
            node("b", NodeStatus::Ready, Flavor::Open, false, &[]),
            node(
                "c",
                NodeStatus::Unreachable,
                Flavor::Open,
                false,
                &[Code::SshTimeout],
            ),
            node("new", NodeStatus::Ready, Flavor::Open, false, &[]),
        ];
        let d = compare(&old, &new);
        assert_eq!(d.unchanged, 1);
        let a = d.node("a").unwrap();
        let fields: Vec<Field> = a.changes.iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            [
                Field::Status,
                Field::Flavor,
                Field::Driver,
                Field::PeermemLoaded,
                Field::PeermemConfigured
            ]
        );
        assert_eq!(a.changes[0].old.as_deref(), Some("migrate"));
        assert_eq!(a.reasons_removed, ["peermem-loaded"]);
        let cols: Vec<Column> = a.columns().into_iter().map(|k| k.0).collect();
        assert_eq!(
            cols,
            [
                Column::Status,
                Column::Flavor,
                Column::Driver,
                Column::Peermem,
                Column::Reasons
            ]
        );
        // An unreachable node: its status changed, its facts are unknown rather than changed.
        let c = d.node("c").unwrap();
        assert_eq!(c.changes.len(), 1);
        assert_eq!(c.reasons_added, ["ssh-timeout"]);
        assert_eq!(d.added[0].node, "new");
        assert_eq!(d.removed[0].node, "gone");
        assert!(!d.is_empty());
        assert!(compare(&old, &old).is_empty());
        let t = render_text(&d, &|s| s.to_string());
        assert!(
            t.contains("changed  a  status migrate → ready; flavor proprietary → open;"),
            "{t}"
        );
        assert!(t.contains("reasons -peermem-loaded"), "{t}");
        assert!(
            t.ends_with("2 changed, 1 added, 1 removed, 1 unchanged\n"),
            "{t}"
        );
    }

    #[test]
    fn reads_json_schema_1_to_3_and_jsonl_and_refuses_others() {
        let n = node("a", NodeStatus::Ready, Flavor::Open, false, &[]);
        let doc = crate::model::report::Snapshot::new("t".into(), vec![n.clone()]);
        let json = serde_json::to_string_pretty(&doc).unwrap();
        assert_eq!(parse(&json, "f").unwrap(), vec![n.clone()]);
        assert!(json.contains("\"schema_version\": 3"), "{json}");
        for v in [1, 2] {
            let older = json.replace("\"schema_version\": 3", &format!("\"schema_version\": {v}"));
            assert_eq!(parse(&older, "f").unwrap().len(), 1);
        }
        // serde_json's map sorts keys: `data` first, as older gpufleet wrote it.
        let jsonl = format!(
            "{}\n{{\"type\":\"summary\",\"data\":{{}}}}\n",
            serde_json::json!({"type": "node", "data": n})
        );
        assert!(jsonl.starts_with("{\"data\""));
        assert_eq!(parse(&jsonl, "f").unwrap(), vec![n.clone()]);
        let e = parse(
            &json.replace("\"schema_version\": 3", "\"schema_version\": 4"),
            "f",
        )
        .unwrap_err();
        assert!(
            e.contains("schema_version 4") && e.contains("schema 1 to 3"),
            "{e}"
        );
        assert!(
            parse("{\"a\": 1}", "f")
                .unwrap_err()
                .contains("not a gpufleet snapshot")
        );
        assert!(parse("{\n  oops", "f").unwrap_err().starts_with("f:2:"));
        let twice = crate::model::report::Snapshot::new("t".into(), vec![n.clone(), n]);
        let e = parse(&serde_json::to_string(&twice).unwrap(), "f").unwrap_err();
        assert!(e.contains("appears twice"), "{e}");
    }
}
