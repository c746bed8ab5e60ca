//! Policy against the fleet (`policy check --against SNAPSHOT.json`): where the ClusterPolicy,
//! NVIDIADriver, MachineConfig and module-parameter ConfigMap disagree with what the nodes run
//! (docs/domain.md, "Policy check", "Against a snapshot"). Only facts the snapshot has are
//! compared: a node whose driver or parameters are unknown (`null`) gets an info saying so, never
//! a conclusion.

use crate::model::Flavor;
use crate::model::report::NodeReport;

use super::{Doc, DriverPolicy, Finding, ModuleType, Severity, src};

#[allow(clippy::too_many_arguments)]
fn finding(
    doc: &Doc,
    line: usize,
    path: &str,
    node: &str,
    severity: Severity,
    code: &'static str,
    message: String,
    source: &'static str,
) -> Finding {
    let mut f = doc.at_lines(line, line, path, severity, code, message, source);
    f.node = Some(node.to_string());
    f
}

/// The GPU with the lowest compute capability: (name, "major.minor", value).
fn min_cc(n: &NodeReport) -> Option<(String, String, f64)> {
    n.gpus
        .as_ref()?
        .iter()
        .filter_map(|g| {
            let text = g.compute_capability.clone()?;
            let cc: f64 = text.parse().ok()?;
            Some((g.name.clone().unwrap_or_else(|| "GPU".into()), text, cc))
        })
        .min_by(|a, b| a.2.total_cmp(&b.2))
}

/// Integers compare as numbers (decimal or 0x hex); anything else as text without quotes.
fn same_value(a: &str, b: &str) -> bool {
    let num = |s: &str| {
        let s = s.trim().trim_matches('"');
        match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(h) => i64::from_str_radix(h, 16).ok(),
            None => s.parse::<i64>().ok(),
        }
    };
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.trim().trim_matches('"') == b.trim().trim_matches('"'),
    }
}

fn ignored_key(key: &str, n: &NodeReport) -> bool {
    let v = n
        .driver
        .as_ref()
        .and_then(|d| d.version.as_deref())
        .and_then(super::version_parts);
    key == "OpenRmEnableUnsupportedGpus" && v.is_some_and(|v| v >= vec![545, 23, 6])
}

fn driver_rules(doc: &Doc, p: &DriverPolicy, n: &NodeReport, out: &mut Vec<Finding>) {
    let name = &n.name;
    let (mt_line, mt_path) = match &p.module_type_node {
        Some(m) => (m.line, format!("{}.kernelModuleType", p.section_path)),
        None => (p.section_line, p.section_path.to_string()),
    };
    let flavor = n.driver.as_ref().map(|d| d.flavor);
    if p.module_type == ModuleType::Open
        && let Some((gpu, text, cc)) = min_cc(n)
        && cc < 7.5
    {
        out.push(finding(doc, mt_line, &mt_path, name, Severity::Error, "node-pre-turing-under-open",
            format!("policy asks for open kernel modules, but {gpu} has compute capability {text}: open modules need Turing (7.5) or later"),
            src::OPEN_FIRST));
    }
    let expected = match p.module_type {
        ModuleType::Open => Some(Flavor::Open),
        ModuleType::Proprietary => Some(Flavor::Proprietary),
        ModuleType::Auto => None,
    };
    if let (Some(want), Some(have)) = (expected, flavor)
        && matches!(have, Flavor::Open | Flavor::Proprietary)
        && want != have
    {
        out.push(finding(
            doc,
            mt_line,
            &mt_path,
            name,
            Severity::Warning,
            "node-module-differs-from-policy",
            format!(
                "policy says kernelModuleType {}, the node runs the {} module{}",
                p.module_type.as_str(),
                have.as_str(),
                n.driver
                    .as_ref()
                    .and_then(|d| d.version.as_ref())
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default()
            ),
            src::CP_TYPES,
        ));
    }
    // The policy's driver version against the node's GPUs (data/driver-branches.toml).
    if let Some(v) = &p.version
        && super::version_parts(v).is_some()
        && let Ok(gpus) = super::generate::gpus_of(n)
        && !gpus.is_empty()
    {
        let mt = match p.module_type {
            ModuleType::Auto => ModuleType::Proprietary,
            m => m,
        };
        if let Some(why) = super::generate::misfit(v, &super::generate::range_of(&gpus, mt)) {
            let (line, path) = p
                .section
                .entry("version")
                .map_or((p.section_line, p.section_path.to_string()), |(k, _)| {
                    (k.line, format!("{}.version", p.section_path))
                });
            out.push(finding(
                doc,
                line,
                &path,
                name,
                Severity::Error,
                "node-driver-version-unsupported",
                format!("the node's GPUs do not run this driver: {why}"),
                src::BRANCHES,
            ));
        }
    }
    let peermem = n.peermem.as_ref();
    if !p.rdma_enabled {
        if peermem.and_then(|p| p.loaded) == Some(true) {
            out.push(finding(doc, p.section_line, p.section_path, name, Severity::Warning, "node-peermem-under-policy",
                "nvidia_peermem is loaded on the node while the policy leaves driver.rdma.enabled off (DMA-BUF needs no nvidia-peermem)".into(),
                src::RDMA));
        } else if peermem.and_then(|p| p.configured) == Some(true) {
            out.push(finding(doc, p.section_line, p.section_path, name, Severity::Warning, "node-peermem-under-policy",
                "nvidia-peermem is configured to load at boot on the node while the policy leaves driver.rdma.enabled off".into(),
                src::RDMA));
        }
    }
}

/// Whether an NVIDIADriver selects a node: `Some(true/false)` when known, `None` when the
/// node's labels are unknown (`nodeSelector` absent selects `nvidia.com/gpu.present=true`, GPU
/// nodes; `{}` every node; `default: true` the GPU nodes no other selects).
fn selects(doc: &Doc, labels: Option<&crate::yaml::Node>) -> Option<bool> {
    use crate::yaml::{Node, Value};
    if (doc.api_version(), doc.kind()) != ("nvidia.com/v1alpha1", "NVIDIADriver") {
        return Some(true);
    }
    if doc.node.at("spec.default").and_then(Node::as_bool) == Some(true) {
        return None;
    }
    match doc.node.at("spec.nodeSelector") {
        None => Some(true),
        Some(Node {
            value: Value::Map(m),
            ..
        }) if m.is_empty() => Some(true),
        Some(Node {
            value: Value::Map(m),
            ..
        }) => {
            let labels = labels?;
            Some(m.iter().all(|(k, v)| {
                labels
                    .get(&k.name)
                    .and_then(Node::as_str)
                    .is_some_and(|x| Some(x) == v.as_str())
            }))
        }
        Some(_) => Some(false),
    }
}

fn option_findings(doc: &Doc, o: &super::ModuleOption, n: &NodeReport, out: &mut Vec<Finding>) {
    if ignored_key(&o.key, n) {
        return;
    }
    let in_effect = n.module_params.as_ref().and_then(|m| m.in_effect.as_ref());
    let Some(map) = in_effect else {
        out.push(finding(doc, o.line, "", &n.name, Severity::Info, "module-param-unknown",
            format!("NVreg_{} ({}): the node's parameters in effect (/proc/driver/nvidia/params) are unknown: not compared", o.key, o.place),
            src::PARAMS));
        return;
    };
    let operator = n.managed_by() == Some(crate::model::report::ManagedBy::GpuOperator);
    let why = if operator && !o.place.starts_with("ConfigMap/") {
        " — the node's driver is the GPU Operator's, whose container does not read host modprobe.d files"
    } else if o.place.starts_with("ConfigMap/") {
        " — the driver pod reads the ConfigMap when it starts: restart it, or check that the ClusterPolicy names this ConfigMap"
    } else {
        " — reload the module or reboot; the MachineConfig rollout may not have finished (`oc get mcp`)"
    };
    match map.get(&o.key) {
        Some(v) if !same_value(v, &o.value) => out.push(finding(doc, o.line, "", &n.name, Severity::Warning, "module-param-not-applied",
            format!("NVreg_{}={} ({}) is not in effect: /proc/driver/nvidia/params has {}: {v}{why}", o.key, o.value, o.place, o.key),
            src::PARAMS)),
        Some(_) => {}
        None => out.push(finding(doc, o.line, "", &n.name, Severity::Info, "module-param-unknown-to-driver",
            format!("NVreg_{} ({}): the loaded module does not list this key in /proc/driver/nvidia/params", o.key, o.place),
            src::PARAMS)),
    }
}

/// Compares every driver policy and module option of `docs` with every node of `nodes`
/// ([`compare_with_labels`] without the cluster's nodes).
pub fn compare(docs: &[Doc], nodes: &[NodeReport]) -> Vec<Finding> {
    compare_with_labels(docs, nodes, &[])
}

/// Compares the driver policies and module options of `docs` with the nodes they apply to.
/// A ClusterPolicy applies to every node; an NVIDIADriver to the nodes its `nodeSelector`
/// selects, by the labels of `cluster_nodes` (`kubectl get nodes`, matched by name). Where a
/// node's labels are unknown, the NVIDIADrivers that may select it are each compared: if one
/// fits the node (no warning or error), its findings stand with one info saying the selection
/// is not known (`node-selection-unknown`); if none fits, the findings of all of them. A
/// ConfigMap named by a policy's `kernelModuleConfig` is compared with the nodes of that
/// policy; other ConfigMaps and MachineConfigs with every node.
pub fn compare_with_labels(
    docs: &[Doc],
    nodes: &[NodeReport],
    cluster_nodes: &[Doc],
) -> Vec<Finding> {
    let mut out = Vec::new();
    let policies: Vec<DriverPolicy> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| super::driver_policy(d, i))
        .collect();
    let options = super::module_options(docs);
    let referenced = |o: &super::ModuleOption| -> bool {
        let d = &docs[o.doc];
        d.kind() == "ConfigMap"
            && policies
                .iter()
                .any(|p| p.module_config.as_deref() == Some(d.name()))
    };
    for n in nodes {
        let flavor = n.driver.as_ref().map(|d| d.flavor);
        if matches!(flavor, None | Some(Flavor::Unknown)) {
            if let Some(d) = docs.first() {
                let mut f = finding(
                    d,
                    0,
                    "",
                    &n.name,
                    Severity::Info,
                    "node-facts-unknown",
                    format!(
                        "node {}: its module flavour is unknown in the snapshot (status {}): not compared",
                        n.name,
                        n.status.as_str()
                    ),
                    src::KUBE,
                );
                f.file = "snapshot".into();
                f.object = String::new();
                out.push(f);
            }
            continue;
        }
        if flavor == Some(Flavor::None) {
            continue; // no NVIDIA module loaded: nothing runs that a policy configures
        }
        let labels = cluster_nodes
            .iter()
            .find(|c| c.kind() == "Node" && c.name() == n.name)
            .map(|c| c.node.at("metadata.labels"));
        let labels_known = labels.is_some();
        let labels = labels.flatten();
        // The findings of one policy for this node: its driver rules and its ConfigMap's options.
        let of_policy = |p: &DriverPolicy| -> Vec<Finding> {
            let mut f = Vec::new();
            driver_rules(&docs[p.doc], p, n, &mut f);
            for o in options.iter().filter(|o| {
                docs[o.doc].kind() == "ConfigMap"
                    && p.module_config.as_deref() == Some(docs[o.doc].name())
            }) {
                option_findings(&docs[o.doc], o, n, &mut f);
            }
            f
        };
        let is_nvd = |d: &Doc| d.kind() == "NVIDIADriver";
        let selected_elsewhere = policies.iter().any(|q| {
            is_nvd(&docs[q.doc])
                && docs[q.doc]
                    .node
                    .at("spec.default")
                    .and_then(crate::yaml::Node::as_bool)
                    != Some(true)
                && selects(&docs[q.doc], labels) == Some(true)
        });
        let mut maybe = Vec::new();
        for p in &policies {
            match selects(&docs[p.doc], labels) {
                Some(true) => out.extend(of_policy(p)),
                Some(false) => {}
                // A default NVIDIADriver, with the node's labels known: it serves the node when
                // no other selects it.
                None if labels_known => {
                    if !selected_elsewhere {
                        out.extend(of_policy(p));
                    }
                }
                None => maybe.push(p),
            }
        }
        if !maybe.is_empty() {
            let results: Vec<(&DriverPolicy, Vec<Finding>)> =
                maybe.iter().map(|p| (*p, of_policy(p))).collect();
            let fits = results
                .iter()
                .find(|(_, f)| f.iter().all(|x| x.severity < Severity::Warning));
            match fits {
                Some((p, f)) => {
                    let doc = &docs[p.doc];
                    let misfits: Vec<String> = results
                        .iter()
                        .filter(|(_, f)| f.iter().any(|x| x.severity >= Severity::Warning))
                        .map(|(q, _)| docs[q.doc].label())
                        .collect();
                    out.push(finding(doc, p.section_line, p.section_path, &n.name, Severity::Info, "node-selection-unknown",
                        format!("its labels are unknown (no --kubectl), so which NVIDIADriver selects it is not known; {} fits it and is the one compared{}", doc.label(),
                            if misfits.is_empty() { String::new() } else { format!("; {} would not fit it (label the node for the one that does)", misfits.join(", ")) }),
                        src::KUBE));
                    out.extend(f.iter().cloned());
                }
                None => {
                    for (_, f) in results {
                        out.extend(f);
                    }
                }
            }
        }
        for o in options.iter().filter(|o| !referenced(o)) {
            option_findings(&docs[o.doc], o, n, &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_compare_as_numbers_or_text() {
        assert!(same_value("0x10", "16"));
        assert!(same_value("\"/var/tmp\"", "/var/tmp"));
        assert!(!same_value("1", "0"));
    }
}
