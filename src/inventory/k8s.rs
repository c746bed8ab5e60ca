//! Kubernetes as an inventory (`-i k8s:`, `k8s:SELECTOR`): runs the user's `kubectl get nodes -o
//! json` (with `-l SELECTOR`; kubectl's own kubeconfig and context apply) and takes each node's
//! name, its `InternalIP` (else `ExternalIP`, else `Hostname` address, else the name) as the
//! host, its labels (`nvidia.com/gpu.product` from NVIDIA's GPU feature discovery among them),
//! and its roles (`node-role.kubernetes.io/ROLE` labels) as groups. Every node drains through
//! kubectl under its own name (`drain = { backend = "kubernetes" }`). No API server runs in the
//! tests: they use a recording kubectl stand-in printing a real node list (tests/inventories.rs).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::source::{NodeSpec, TOOL_TIMEOUT, run_tool};
use super::{DrainBackend, DrainSpec, InventoryError, Origin};

#[derive(Debug, Deserialize)]
struct List {
    #[serde(default)]
    kind: String,
    /// Each item read on its own: one odd node is that node's warning, not the list's error.
    #[serde(default)]
    items: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Item {
    metadata: Meta,
    #[serde(default)]
    status: Option<Status>,
}

#[derive(Debug, Deserialize)]
struct Meta {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct Status {
    #[serde(default)]
    addresses: Vec<Address>,
}

#[derive(Debug, Deserialize)]
struct Address {
    #[serde(rename = "type")]
    kind: String,
    address: String,
}

const ROLE: &str = "node-role.kubernetes.io/";

/// Runs `kubectl get nodes -o json [-l selector]` and reads its nodes, with a warning for each
/// item that is not a node ([`parse`]). Errors: kubectl fails or is missing, its output is not a
/// node list, or it lists no node that can be read.
pub fn load(selector: Option<&str>) -> Result<(Vec<NodeSpec>, Vec<String>), InventoryError> {
    let mut argv = vec!["kubectl", "get", "nodes", "-o", "json"];
    if let Some(s) = selector {
        argv.extend(["-l", s]);
    }
    let shown = argv.join(" ");
    let text = run_tool(&argv, TOOL_TIMEOUT)
        .map_err(|e| InventoryError(format!("-i k8s:{}: {e}", selector.unwrap_or(""))))?;
    let (nodes, warnings) = parse(&text, &shown)?;
    if nodes.is_empty() {
        return Err(InventoryError(match warnings.first() {
            Some(w) => format!("`{shown}` lists no node that can be read; the first: {w}"),
            None => format!("`{shown}` lists no node"),
        }));
    }
    Ok((nodes, warnings))
}

/// Nodes from `kubectl get nodes -o json` output (a `List`/`NodeList`, or one `Node`); `source`
/// names it in origins (`SOURCE: items[3]`) and errors (`SOURCE:line:column: …`). An item that
/// is not a node (no `metadata.name`, a field of the wrong type) is left out with a warning
/// (`SOURCE: items[3]: not a kubectl node: …`), the other nodes kept.
pub fn parse(text: &str, source: &str) -> Result<(Vec<NodeSpec>, Vec<String>), InventoryError> {
    let mut warnings = Vec::new();
    let list: List = serde_json::from_str(text).map_err(|e| {
        InventoryError(format!(
            "{source}:{}:{}: not a kubectl node list: {e}",
            e.line(),
            e.column()
        ))
    })?;
    let items: Vec<(String, Item)> = if list.kind == "Node" {
        let item: Item = serde_json::from_str(text).map_err(|e| {
            InventoryError(format!(
                "{source}:{}:{}: not a kubectl node: {e}",
                e.line(),
                e.column()
            ))
        })?;
        vec![("the node".to_string(), item)]
    } else {
        list.items
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| match Item::deserialize(&v) {
                Ok(it) => Some((format!("items[{i}]"), it)),
                Err(e) => {
                    let name = v["metadata"]["name"]
                        .as_str()
                        .map(|n| format!(" (`{n}`)"))
                        .unwrap_or_default();
                    warnings.push(format!(
                        "{source}: items[{i}]{name}: not a kubectl node: {e}; that node is left out"
                    ));
                    None
                }
            })
            .collect()
    };
    let nodes = items
        .into_iter()
        .map(|(at, it)| {
            let addrs = it.status.map(|s| s.addresses).unwrap_or_default();
            let addr = |k: &str| {
                addrs
                    .iter()
                    .find(|a| a.kind == k && !a.address.is_empty())
                    .map(|a| a.address.clone())
            };
            let host = addr("InternalIP")
                .or_else(|| addr("ExternalIP"))
                .or_else(|| addr("Hostname"));
            let groups = it
                .metadata
                .labels
                .keys()
                .filter_map(|k| k.strip_prefix(ROLE))
                .filter(|r| !r.is_empty())
                .map(str::to_string)
                .collect();
            let name = it.metadata.name;
            NodeSpec {
                host,
                labels: it.metadata.labels,
                groups,
                drain: Some(DrainSpec {
                    backend: DrainBackend::Kubernetes,
                    node_name: Some(name.clone()),
                    ..Default::default()
                }),
                origin: Some(Origin {
                    source: source.to_string(),
                    line: None,
                    item: Some(format!("{at} ({name})")),
                }),
                name,
                ..Default::default()
            }
        })
        .collect();
    Ok((nodes, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_list_addresses_labels_roles() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[
          {"metadata":{"name":"gpu-a","labels":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3","node-role.kubernetes.io/gpu":""}},
           "status":{"addresses":[{"type":"Hostname","address":"gpu-a"},{"type":"InternalIP","address":"10.1.0.5"}]}},
          {"metadata":{"name":"cp"},"status":{"addresses":[]}}]}"#;
        let (n, w) = parse(text, "kubectl get nodes -o json").unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(n[0].host.as_deref(), Some("10.1.0.5"));
        assert_eq!(
            n[0].labels["nvidia.com/gpu.product"],
            "NVIDIA-H100-80GB-HBM3"
        );
        assert_eq!(n[0].groups, ["gpu"]);
        assert_eq!(n[1].host, None);
        assert_eq!(
            n[1].origin.as_ref().unwrap().to_string(),
            "kubectl get nodes -o json: items[1] (cp)"
        );
        let e = parse("{\"items\": 3}", "k").unwrap_err().0;
        assert!(e.starts_with("k:1:"), "{e}");
    }

    /// Items that are not nodes (no name, labels of the wrong type) are each a warning, the
    /// other nodes kept (before: the whole list refused as "not a kubectl node list").
    #[test]
    fn an_odd_item_is_left_out_with_a_warning() {
        let text = r#"{"kind":"List","items":[
          {"metadata":{"name":"gpu-a"}},
          {"metadata":{"labels":{}}},
          {"metadata":{"name":"gpu-b","labels":{"x":7}}},
          {"metadata":{"name":"gpu-c"}}]}"#;
        let (n, w) = parse(text, "k").unwrap();
        let names: Vec<&str> = n.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["gpu-a", "gpu-c"]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("k: items[1]: not a kubectl node: missing field `name`"),
            "{w:?}"
        );
        assert!(
            w[1].starts_with("k: items[2] (`gpu-b`): not a kubectl node"),
            "{w:?}"
        );
        assert!(w[1].ends_with("that node is left out"), "{w:?}");
        // The name is kept in the node's origin as before.
        assert_eq!(
            n[1].origin.as_ref().unwrap().to_string(),
            "k: items[3] (gpu-c)"
        );
    }
}
