//! Reading the cluster's objects through the user's `kubectl` (or `oc`): `get … -o json`, with
//! the user's kubeconfig and context. A failed call is an error (exit 2), never an empty
//! cluster; the one answer taken as absence is the API server's own "the server doesn't have a
//! resource type" (the CRD is not installed: a cluster without the GPU Operator, or not
//! OpenShift), which is said as an info finding.

use std::process::{Command, Stdio};

use super::{Doc, Finding, Origin, Severity};

/// The kubectl to run.
#[derive(Debug, Clone)]
pub struct Kubectl {
    /// `kubectl` or `oc`, or a path.
    pub bin: String,
    /// `--context`, when given.
    pub context: Option<String>,
}

/// kubectl could not be run, failed, or printed something that is not the objects.
#[derive(Debug, thiserror::Error)]
pub enum KubectlError {
    #[error("cannot run {0}: {1}")]
    Spawn(String, std::io::Error),
    #[error("`{argv}` failed ({status}): {stderr}")]
    Failed {
        argv: String,
        status: String,
        stderr: String,
    },
    #[error("`{0}` printed no JSON objects: {1}")]
    Parse(String, String),
}

/// The resources read, in order.
pub const RESOURCES: [&str; 5] = [
    "clusterpolicies.nvidia.com",
    "nvidiadrivers.nvidia.com",
    "gpuclusters.nvidia.com",
    "machineconfigs.machineconfiguration.openshift.io",
    "machineconfigpools.machineconfiguration.openshift.io",
];

impl Kubectl {
    fn argv(&self, args: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = vec!["get".into()];
        v.extend(args.iter().map(|s| s.to_string()));
        v.extend(["-o".into(), "json".into(), "--request-timeout=30s".into()]);
        if let Some(c) = &self.context {
            v.push(format!("--context={c}"));
        }
        v
    }

    /// `kubectl get ARGS -o json`: the objects, or `None` when the server has no such resource
    /// type.
    pub fn get(&self, args: &[&str]) -> Result<Option<Vec<Doc>>, KubectlError> {
        let argv = self.argv(args);
        let shown = format!("{} {}", self.bin, argv.join(" "));
        let out = Command::new(&self.bin)
            .args(&argv)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| KubectlError::Spawn(self.bin.clone(), e))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if stderr.contains("the server doesn't have a resource type") {
                return Ok(None);
            }
            return Err(KubectlError::Failed {
                argv: shown,
                status: out.status.to_string(),
                stderr,
            });
        }
        let text = String::from_utf8(out.stdout)
            .map_err(|_| KubectlError::Parse(shown.clone(), "not UTF-8".into()))?;
        let docs = super::docs_from_text(&text, Origin::Kubectl)
            .map_err(|e| KubectlError::Parse(shown.clone(), e.to_string()))?;
        Ok(Some(docs))
    }
}

/// Whether a MachineConfig from the cluster is one to check: not a `rendered-` one (the
/// operator's merge of a pool's configs) and one that writes a modprobe.d or modules-load.d file.
fn worth_checking(doc: &Doc) -> bool {
    if doc.name().starts_with("rendered-") {
        return false;
    }
    doc.node.at("spec.config.storage.files").is_some_and(|f| {
        f.as_seq().iter().any(|e| {
            e.get("path")
                .and_then(crate::yaml::Node::as_str)
                .is_some_and(|p| p.contains("/modprobe.d/") || p.contains("/modules-load.d/"))
        })
    })
}

fn note(code: &'static str, message: String) -> Finding {
    Finding {
        file: "kubectl".into(),
        line: None,
        end_line: None,
        object: String::new(),
        path: String::new(),
        severity: Severity::Info,
        code,
        message,
        source: super::src::KUBE,
        node: None,
    }
}

/// The cluster's ClusterPolicies, NVIDIADrivers, GPUClusters, MachineConfigs that write module files, the
/// MachineConfigPools, and the ConfigMaps the driver policies name in `kernelModuleConfig`;
/// with info findings for what the cluster does not have.
pub fn read_cluster(k: &Kubectl) -> Result<(Vec<Doc>, Vec<Finding>), KubectlError> {
    let mut docs = Vec::new();
    let mut notes = Vec::new();
    for r in RESOURCES {
        match k.get(&[r])? {
            None => notes.push(note(
                "kubectl-resource-absent",
                format!("the cluster has no {r} resource type (its CRD is not installed)"),
            )),
            Some(found) if r.starts_with("machineconfigs.") => {
                let total = found.len();
                let kept: Vec<Doc> = found.into_iter().filter(worth_checking).collect();
                if total > kept.len() {
                    notes.push(note(
                        "kubectl-machineconfigs-skipped",
                        format!(
                            "{} of {total} MachineConfigs write no modprobe.d or modules-load.d file (or are rendered-): not checked",
                            total - kept.len()
                        ),
                    ));
                }
                docs.extend(kept);
            }
            Some(found) => docs.extend(found),
        }
    }
    let names: Vec<String> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| super::driver_policy(d, i)?.module_config)
        .collect();
    for name in names {
        let selector = format!("--field-selector=metadata.name={name}");
        if let Some(found) = k.get(&["configmaps", "--all-namespaces", &selector])? {
            if found.is_empty() {
                let mut f = note(
                    "module-config-absent",
                    format!(
                        "no ConfigMap named `{name}` in any namespace, though a driver policy names it in driver.kernelModuleConfig: the driver pods cannot mount it"
                    ),
                );
                f.severity = Severity::Warning;
                f.source = super::src::PARAMS;
                notes.push(f);
            }
            docs.extend(found);
        }
    }
    Ok((docs, notes))
}

/// Each node's GPU Operator upgrade labels (`kubectl get nodes -o json`): an info finding per
/// node that has the upgrade state label ([`crate::model::facts::gpu_operator::UPGRADE_STATE_LABEL`]) or the
/// skip label, saying both (a node with neither gets none: the Operator is not upgrading it, or
/// its automatic upgrades are off). gpufleet's kubernetes drain refuses such nodes
/// ([`crate::actions::drain::operator_guard`]).
///
/// Errors: kubectl fails or prints no objects.
pub fn node_upgrade_labels(k: &Kubectl) -> Result<Vec<Finding>, KubectlError> {
    Ok(upgrade_label_notes(&read_nodes(k)?))
}

/// The cluster's nodes (`kubectl get nodes -o json`). Errors: kubectl fails or prints no
/// objects.
pub fn read_nodes(k: &Kubectl) -> Result<Vec<Doc>, KubectlError> {
    Ok(k.get(&["nodes"])?.unwrap_or_default())
}

/// [`node_upgrade_labels`] of nodes already read.
pub fn upgrade_label_notes(nodes: &[Doc]) -> Vec<Finding> {
    use crate::model::facts::gpu_operator::{UPGRADE_SKIP_LABEL, UPGRADE_STATE_LABEL};
    let mut out = Vec::new();
    for n in nodes {
        let labels = n.node.at("metadata.labels");
        let label = |key: &str| {
            labels
                .and_then(|l| l.get(key))
                .and_then(crate::yaml::Node::as_str)
                .map(str::to_string)
        };
        let (state, skip) = (label(UPGRADE_STATE_LABEL), label(UPGRADE_SKIP_LABEL));
        if state.is_none() && skip.is_none() {
            continue;
        }
        let name = n.name().to_string();
        let upgrading = state
            .as_deref()
            .is_some_and(|s| !s.is_empty() && s != "upgrade-done");
        let skipped = skip.as_deref() == Some("true");
        let mut message = format!(
            "GPU Operator upgrade state: {}; skip label: {}",
            state.as_deref().filter(|s| !s.is_empty()).unwrap_or("none"),
            skip.as_deref().unwrap_or("not set")
        );
        if upgrading {
            message.push_str(
                " (the Operator is upgrading this node: gpufleet's kubernetes drain refuses it)",
            );
        } else if skipped {
            message.push_str(" (the Operator leaves this node's driver alone: gpufleet's kubernetes drain refuses it)");
        }
        let mut f = note("gpu-operator-upgrade-state", message);
        f.object = format!("Node/{name}");
        f.source = super::src::UPGRADE_LABELS;
        f.node = Some(name);
        out.push(f);
    }
    out
}

/// The GPU Operator release the cluster runs, read from its Deployment (`kubectl get
/// deployments --all-namespaces -l app.kubernetes.io/component=gpu-operator`, the selector both
/// the Helm chart and the OLM bundle set): its `app.kubernetes.io/version` label (Helm: the
/// chart's appVersion), else its `olm.owner` label (`gpu-operator-certified.v26.7.0`), else the
/// tag of its `gpu-operator` container's image. Returns the version (`v26.7.0`) when one
/// Deployment says one, and an info finding saying what was read. A failed read (no permission
/// to list Deployments, say) is said in that finding, not an error: the check then uses the
/// newest committed CRDs.
pub fn operator_version(k: &Kubectl) -> (Option<String>, Finding) {
    let src = "NVIDIA/gpu-operator: deployments/gpu-operator/templates/operator.yaml and _helpers.tpl (labels app.kubernetes.io/component: gpu-operator, app.kubernetes.io/version: the chart's appVersion); bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml";
    let mut f = note("gpu-operator-version", String::new());
    f.source = src;
    let found = match k.get(&[
        "deployments",
        "--all-namespaces",
        "-l",
        "app.kubernetes.io/component=gpu-operator",
    ]) {
        Ok(d) => d.unwrap_or_default(),
        Err(e) => {
            f.message = format!(
                "the GPU Operator's version could not be read ({e}): checked against the newest committed CRDs"
            );
            return (None, f);
        }
    };
    let versions: Vec<(String, String, String)> = found
        .iter()
        .filter_map(|d| {
            let label = |key: &str| {
                d.node
                    .at("metadata.labels")
                    .and_then(|l| l.get(key))
                    .and_then(crate::yaml::Node::as_str)
                    .map(str::to_string)
            };
            let image = d
                .node
                .at("spec.template.spec.containers")
                .map(crate::yaml::Node::as_seq)
                .unwrap_or_default()
                .iter()
                .find(|c| c.get("name").and_then(crate::yaml::Node::as_str) == Some("gpu-operator"))
                .and_then(|c| c.get("image"))
                .and_then(crate::yaml::Node::as_str)
                .and_then(|i| i.rsplit_once(':'))
                .map(|(_, tag)| tag.to_string())
                .filter(|t| t.starts_with('v') && !t.contains('/'));
            let (v, how) = if let Some(v) = label("app.kubernetes.io/version") {
                (v, "its app.kubernetes.io/version label")
            } else if let Some(v) =
                label("olm.owner").and_then(|o| o.rsplit_once(".v").map(|(_, v)| format!("v{v}")))
            {
                (v, "its olm.owner label")
            } else {
                (image?, "its image tag")
            };
            Some((v, how.to_string(), d.label()))
        })
        .collect();
    match versions.as_slice() {
        [(v, how, obj)] => {
            f.message = format!("the GPU Operator is {v} ({obj} in the cluster, {how})");
            (Some(v.clone()), f)
        }
        [] => {
            f.message = format!(
                "no GPU Operator Deployment with a version (label app.kubernetes.io/component=gpu-operator; {} found): checked against the newest committed CRDs",
                found.len()
            );
            (None, f)
        }
        many => {
            let all: Vec<String> = many.iter().map(|(v, _, o)| format!("{o} {v}")).collect();
            f.message = format!(
                "several GPU Operator Deployments ({}): checked against the newest committed CRDs; give --operator-version",
                all.join(", ")
            );
            (None, f)
        }
    }
}
