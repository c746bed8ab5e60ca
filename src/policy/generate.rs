//! `gpufleet policy generate --for SNAPSHOT.json`: the ClusterPolicy patch that moves a fleet to
//! open kernel modules + DMA-BUF under the GPU Operator (docs/domain.md, "Policy generate"):
//! `driver.kernelModuleType: open`, no `useOpenKernelModules`, `driver.rdma.enabled: false`, and
//! — only when the nodes carry module parameters that still mean something — a
//! `driver.kernelModuleConfig` ConfigMap with `nvidia.conf`. No MachineConfig: host files do not
//! reach the operator's driver container.

use std::collections::BTreeMap;

use crate::model::report::NodeReport;

/// Names in the output.
#[derive(Debug, Clone)]
pub struct Names {
    /// The ClusterPolicy to patch (the Helm chart's is `cluster-policy`).
    pub cluster_policy: String,
    /// The ConfigMap for module parameters, and its namespace (the operator's).
    pub config_map: String,
    pub namespace: String,
}

/// The generated YAML and what people must know about it (stderr). `blocked`: nodes the patch
/// would leave without a usable driver (exit code 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    pub yaml: String,
    pub notes: Vec<String>,
    pub blocked: Vec<String>,
}

/// Keys that never go into nvidia.conf: ignored since 545.23.06, or meaningless under the open
/// module (it always uses GSP firmware: NVIDIA/open-gpu-kernel-modules#820).
const DROPPED: [(&str, &str); 2] = [
    (
        "OpenRmEnableUnsupportedGpus",
        "ignored since driver 545.23.06",
    ),
    (
        "EnableGpuFirmware",
        "the open module always uses GSP firmware",
    ),
];

fn safe_key(k: &str) -> bool {
    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn safe_value(v: &str) -> bool {
    v.chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.,;:=/+-\"".contains(c))
}

/// The patch (and ConfigMap) for `nodes`.
pub fn generate(nodes: &[NodeReport], names: &Names) -> Generated {
    let mut notes = Vec::new();
    let mut blocked = Vec::new();
    // Parameters configured on the nodes' hosts, by key: value → nodes.
    let mut params: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for n in nodes {
        let min_cc = n
            .gpus
            .iter()
            .flatten()
            .filter_map(|g| g.compute_capability.as_deref()?.parse::<f64>().ok())
            .min_by(f64::total_cmp);
        if min_cc.is_some_and(|c| c < 7.5) {
            blocked.push(n.name.clone());
        }
        if let Some(v) = n.driver.as_ref().and_then(|d| d.version.as_deref())
            && super::version_parts(v).is_some_and(|p| p < vec![515, 43, 4])
        {
            notes.push(format!(
                "{}: driver {v} has no open modules; set driver.version to a branch that has them (515.43.04 or later)",
                n.name
            ));
        }
        for p in n
            .module_params
            .as_ref()
            .and_then(|m| m.configured.as_ref())
            .into_iter()
            .flatten()
        {
            if let Some((_, why)) = DROPPED.iter().find(|(k, _)| *k == p.key) {
                notes.push(format!(
                    "{}: NVreg_{}={} ({}) left out: {why}",
                    n.name, p.key, p.value, p.source
                ));
                continue;
            }
            if !safe_key(&p.key) || !safe_value(&p.value) {
                notes.push(format!(
                    "{}: an option from {} left out: its key or value has characters nvidia.conf cannot carry safely",
                    n.name, p.source
                ));
                continue;
            }
            params
                .entry(p.key.clone())
                .or_default()
                .entry(p.value.clone())
                .or_default()
                .push(n.name.clone());
        }
    }
    let mut lines = Vec::new();
    for (key, values) in &params {
        if values.len() > 1 {
            let said: Vec<String> = values
                .iter()
                .map(|(v, ns)| format!("{v} on {}", ns.join(", ")))
                .collect();
            notes.push(format!(
                "NVreg_{key} differs between nodes ({}): left out; one ConfigMap serves every node of a ClusterPolicy (use NVIDIADriver objects per node pool to tell them apart)",
                said.join("; ")
            ));
        } else if let Some(v) = values.keys().next() {
            lines.push(format!("NVreg_{key}={v}"));
        }
    }
    let q = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let mut y = String::new();
    y.push_str(&format!(
        "# gpufleet policy generate: ClusterPolicy patch for {} node(s): open kernel modules + DMA-BUF.\n",
        nodes.len()
    ));
    y.push_str(&format!(
        "# Apply (save the ClusterPolicy document alone): kubectl patch clusterpolicies.nvidia.com {} --type merge --patch-file FILE\n",
        names.cluster_policy
    ));
    y.push_str("# driver.useOpenKernelModules is ignored since GPU Operator v25.3.0; if yours sets it, remove it:\n");
    y.push_str(&format!(
        "#   kubectl patch clusterpolicies.nvidia.com {} --type json -p '[{{\"op\":\"remove\",\"path\":\"/spec/driver/useOpenKernelModules\"}}]'\n",
        names.cluster_policy
    ));
    y.push_str("# driver.rdma.enabled: false: DMA-BUF GPUDirect RDMA needs neither nvidia-peermem nor MOFED.\n");
    y.push_str("# No MachineConfig is needed: host modprobe.d files do not reach the GPU Operator's driver container;\n");
    y.push_str("# module parameters go in the driver.kernelModuleConfig ConfigMap.\n");
    y.push_str("apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n");
    y.push_str(&format!("  name: {}\n", q(&names.cluster_policy)));
    y.push_str("spec:\n  driver:\n    kernelModuleType: open\n    rdma:\n      enabled: false\n");
    if !lines.is_empty() {
        y.push_str(&format!(
            "    kernelModuleConfig:\n      name: {}\n",
            q(&names.config_map)
        ));
        y.push_str("---\n# The module parameters the nodes' hosts set today (kubectl apply -f), one per line.\n");
        y.push_str("apiVersion: v1\nkind: ConfigMap\nmetadata:\n");
        y.push_str(&format!(
            "  name: {}\n  namespace: {}\n",
            q(&names.config_map),
            q(&names.namespace)
        ));
        y.push_str("data:\n  nvidia.conf: |\n");
        for l in &lines {
            y.push_str(&format!("    {l}\n"));
        }
    } else {
        notes.push("no module parameter is needed: no ConfigMap".into());
    }
    if !blocked.is_empty() {
        notes.push(format!(
            "{} have pre-Turing GPUs (compute capability below 7.5): open modules cannot drive them; keep them on the proprietary module with an NVIDIADriver object for their pool, or out of this policy",
            blocked.join(", ")
        ));
    }
    Generated {
        yaml: y,
        notes,
        blocked,
    }
}
