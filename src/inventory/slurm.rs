//! Slurm as an inventory (`-i slurm:`, `slurm:PARTITION`, `slurm:NODELIST`): `sinfo` lists the
//! node names (of a partition, or of a node list such as `gpu[1-4]`), `scontrol show nodes
//! --oneliner` gives each node's `NodeAddr` (the host to reach; else `NodeHostName`, else the
//! name), `Partitions` (groups), `ActiveFeatures` (labels `slurm.feature.NAME=true`), `Gres`
//! and `State` (labels `slurm.gres`, `slurm.state`). Every node drains through Slurm under its
//! own name (`drain = { backend = "slurm" }`). `SLURM_CONF` and the rest of Slurm's environment
//! apply as for the commands themselves. Tested against a real slurmctld (tests/inventories.rs).

use std::collections::{BTreeMap, BTreeSet};

use super::source::{NodeSpec, TOOL_TIMEOUT, run_tool};
use super::{DrainBackend, DrainSpec, InventoryError, Origin};

/// The command whose output [`parse_nodes`] reads.
pub const SCONTROL: [&str; 4] = ["scontrol", "show", "nodes", "--oneliner"];

/// Lists the nodes of the Slurm cluster (`arg`: a partition, or a node list; `None`: all).
/// Returns the nodes and warnings. Errors: a command fails or is missing, `arg` names neither a
/// partition nor a node, or nothing is listed.
pub fn load(arg: Option<&str>) -> Result<(Vec<NodeSpec>, Vec<String>), InventoryError> {
    let err = |e: String| InventoryError(format!("-i slurm:{}: {e}", arg.unwrap_or("")));
    let wanted: Option<BTreeSet<String>> = match arg {
        None => None,
        Some(a) => {
            let parts = run_tool(&["sinfo", "-a", "-h", "-o", "%R"], TOOL_TIMEOUT).map_err(err)?;
            let partitions: BTreeSet<&str> = parts.lines().map(str::trim).collect();
            // `-a` lists hidden partitions too (sinfo(1)), so a hidden partition's name is
            // known as one; sinfo refuses `-a` beside `-p` ("Conflicting options").
            let args: &[&str] = if partitions.contains(a) {
                &["sinfo", "-h", "-N", "-o", "%N", "-p", a]
            } else {
                &["sinfo", "-a", "-h", "-N", "-o", "%N", "-n", a]
            };
            let names = run_tool(args, TOOL_TIMEOUT).map_err(|e| {
                err(format!(
                    "{e} (not a partition: {})",
                    partitions.iter().copied().collect::<Vec<_>>().join(", ")
                ))
            })?;
            let set: BTreeSet<String> = names
                .lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect();
            if set.is_empty() {
                return Err(err(format!(
                    "no node; partitions: {}",
                    partitions.iter().copied().collect::<Vec<_>>().join(", ")
                )));
            }
            Some(set)
        }
    };
    let text = run_tool(&SCONTROL, TOOL_TIMEOUT).map_err(err)?;
    let (nodes, warnings) = parse_nodes(&text, &SCONTROL.join(" "), wanted.as_ref())?;
    if nodes.is_empty() {
        return Err(err("Slurm lists no node".into()));
    }
    Ok((nodes, warnings))
}

/// The `Key=value` fields of one `scontrol show nodes --oneliner` line. A value runs until the
/// next word that starts a `Key=` (an upper-case letter, letters, `=`), so values with spaces
/// (`OS=Linux 6.1.0 #1 SMP …`) stay whole. Slurm prints each key once, so a key seen again is
/// text of the value before it: a drain `Reason=` (free text; `--oneliner` turns its line breaks
/// into spaces) that says `State=IDLE NodeName=x` changes no field.
pub fn fields(line: &str) -> BTreeMap<&str, String> {
    let mut out: BTreeMap<&str, String> = BTreeMap::new();
    let mut key: Option<&str> = None;
    for word in line.split_whitespace() {
        let starts_key = word.split_once('=').is_some_and(|(k, _)| {
            k.starts_with(|c: char| c.is_ascii_uppercase())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !out.contains_key(k)
        });
        if starts_key && let Some((k, v)) = word.split_once('=') {
            out.insert(k, v.to_string());
            key = Some(k);
        } else if let Some(k) = key
            && let Some(v) = out.get_mut(k)
        {
            v.push(' ');
            v.push_str(word);
        }
    }
    out
}

/// Nodes from `scontrol show nodes --oneliner` output (`source` names it in origins and
/// errors), only those in `wanted` when given, and a warning for each line that is not a node
/// (no `NodeName=`): that line is left out, the other nodes kept. Errors: no line is a node
/// (the text is not `scontrol` output).
pub fn parse_nodes(
    text: &str,
    source: &str,
    wanted: Option<&BTreeSet<String>>,
) -> Result<(Vec<NodeSpec>, Vec<String>), InventoryError> {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let mut named = 0usize;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let f = fields(line);
        let Some(name) = f.get("NodeName").cloned() else {
            warnings.push(format!(
                "{source}:{}: no NodeName= (expected `scontrol show nodes --oneliner` output); that line is left out",
                i + 1
            ));
            continue;
        };
        named += 1;
        if wanted.is_some_and(|w| !w.contains(&name)) {
            continue;
        }
        let set = |k: &str| {
            f.get(k)
                .filter(|v| !v.is_empty() && !matches!(v.as_str(), "(null)" | "N/A" | "n/a"))
                .cloned()
        };
        let host = set("NodeAddr").or_else(|| set("NodeHostName"));
        let mut labels = BTreeMap::new();
        if let Some(s) = set("State") {
            labels.insert("slurm.state".to_string(), s);
        }
        if let Some(g) = set("Gres") {
            labels.insert("slurm.gres".to_string(), g);
        }
        for feat in set("ActiveFeatures").iter().flat_map(|v| v.split(',')) {
            if !feat.is_empty() {
                labels.insert(format!("slurm.feature.{feat}"), "true".to_string());
            }
        }
        let groups = set("Partitions")
            .map(|p| p.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        out.push(NodeSpec {
            host,
            labels,
            groups: super::source::dedup(groups),
            drain: Some(DrainSpec {
                backend: DrainBackend::Slurm,
                node_name: Some(name.clone()),
                ..Default::default()
            }),
            origin: Some(Origin {
                source: source.to_string(),
                line: Some(i + 1),
                item: None,
            }),
            name,
            ..Default::default()
        });
    }
    if named == 0
        && let Some(first) = warnings.first()
    {
        return Err(InventoryError(first.replace("; that line is left out", "")));
    }
    Ok((out, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Slurm 22.05's `scontrol show nodes --oneliner`, as printed by the test cluster.
    const OUT: &str = "NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.41 AvailableFeatures=h100,ib ActiveFeatures=h100,ib Gres=gpu:h100:8 NodeAddr=198.18.20.2 NodeHostName=gpu1 Version=22.05.8 OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01) RealMemory=100 AllocMem=0 FreeMem=N/A Sockets=1 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu,all BootTime=2026-01-01T00:00:00 CfgTRES=cpu=1,mem=100M,billing=1 AllocTRES= CapWatts=n/a Reason=kernel update [root@2026-01-01T00:00:00]
NodeName=gpu2 Arch=x86_64 AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=198.18.20.3 NodeHostName=gpu2 State=DOWN+DRAIN Partitions=gpu
";

    #[test]
    fn oneliner_fields_and_nodes() {
        let f = fields(OUT.lines().next().unwrap());
        assert_eq!(
            f["OS"],
            "Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"
        );
        assert_eq!(f["CfgTRES"], "cpu=1,mem=100M,billing=1");
        assert_eq!(f["AllocTRES"], "");
        assert_eq!(f["Reason"], "kernel update [root@2026-01-01T00:00:00]");
        // A reason that writes fields: its text, not fields.
        let f = fields("NodeName=gpu1 State=IDLE+DRAIN Reason=x State=IDLE NodeName=evil");
        assert_eq!(f["State"], "IDLE+DRAIN");
        assert_eq!(f["NodeName"], "gpu1");
        assert_eq!(f["Reason"], "x State=IDLE NodeName=evil");
        let (n, w) = parse_nodes(OUT, "scontrol show nodes --oneliner", None).unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].host.as_deref(), Some("198.18.20.2"));
        assert_eq!(n[0].groups, ["gpu", "all"]);
        assert_eq!(n[0].labels["slurm.gres"], "gpu:h100:8");
        assert_eq!(n[0].labels["slurm.feature.ib"], "true");
        assert_eq!(n[1].labels.get("slurm.gres"), None);
        assert_eq!(n[1].labels["slurm.state"], "DOWN+DRAIN");
        assert_eq!(
            n[1].drain.as_ref().unwrap().node_name.as_deref(),
            Some("gpu2")
        );
        assert_eq!(
            n[1].origin.as_ref().unwrap().to_string(),
            "scontrol show nodes --oneliner:2"
        );
        let only: BTreeSet<String> = ["gpu2".to_string()].into();
        assert_eq!(parse_nodes(OUT, "s", Some(&only)).unwrap().0.len(), 1);
        let e = parse_nodes("\nState=IDLE\n", "s", None).unwrap_err().0;
        assert!(e.starts_with("s:2: no NodeName="), "{e}");
    }

    /// One odd line among nodes is that line's warning, the other nodes kept (before: the whole
    /// inventory refused with `s:2: no NodeName=`).
    #[test]
    fn a_line_that_is_not_a_node_is_left_out_with_a_warning() {
        let text = format!(
            "{}\nState=IDLE \u{1b}[2J\n{}",
            OUT.lines().next().unwrap(),
            OUT.lines().nth(1).unwrap()
        );
        let (n, w) = parse_nodes(&text, "s", None).unwrap();
        let names: Vec<&str> = n.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["gpu1", "gpu2"]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("s:2: no NodeName=") && w[0].ends_with("left out"),
            "{w:?}"
        );
    }
}
