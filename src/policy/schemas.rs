//! The schemas committed under `schemas/` (schemas/README.md: repository, commit and path of
//! each), compiled in: nothing is downloaded at run time.

use std::sync::OnceLock;

use serde_json::Value as J;

const CLUSTERPOLICY_CRD: &str = include_str!("../../schemas/nvidia.com_clusterpolicies.yaml");
const NVIDIADRIVER_CRD: &str = include_str!("../../schemas/nvidia.com_nvidiadrivers.yaml");
const MACHINECONFIG_CRD: &str =
    include_str!("../../schemas/machineconfigs.machineconfiguration.openshift.io.yaml");
const MACHINECONFIGPOOL_CRD: &str =
    include_str!("../../schemas/machineconfigpools.machineconfiguration.openshift.io.yaml");
const GPUCLUSTER_CRD: &str = include_str!("../../schemas/nvidia.com_gpuclusters.yaml");

/// The Ignition config schemas the Machine Config Operator reads: spec 2.2 (which it parses and
/// converts to 3.x, `IgnParseWrapper` / `ParseAndConvertConfig` in
/// openshift/machine-config-operator `pkg/controller/common/helpers.go`) and 3.0 to 3.5 (its
/// `ParseCompatibleVersion` of config/v3_5).
const IGNITION: [(&str, &str); 7] = [
    ("2.2.0", include_str!("../../schemas/ignition-2.2.0.json")),
    ("3.0.0", include_str!("../../schemas/ignition-3.0.0.json")),
    ("3.1.0", include_str!("../../schemas/ignition-3.1.0.json")),
    ("3.2.0", include_str!("../../schemas/ignition-3.2.0.json")),
    ("3.3.0", include_str!("../../schemas/ignition-3.3.0.json")),
    ("3.4.0", include_str!("../../schemas/ignition-3.4.0.json")),
    ("3.5.0", include_str!("../../schemas/ignition-3.5.0.json")),
];

/// Where each schema comes from, for messages (`source` of structure findings).
pub const CLUSTERPOLICY_SOURCE: &str =
    "NVIDIA/gpu-operator: config/crd/bases/nvidia.com_clusterpolicies.yaml (schemas/)";
pub const NVIDIADRIVER_SOURCE: &str =
    "NVIDIA/gpu-operator: config/crd/bases/nvidia.com_nvidiadrivers.yaml (schemas/)";
pub const MACHINECONFIG_SOURCE: &str =
    "openshift/api: machineconfiguration/v1 machineconfigs CRD (schemas/)";
pub const MACHINECONFIGPOOL_SOURCE: &str =
    "openshift/api: machineconfiguration/v1 machineconfigpools CRD (schemas/)";
pub const GPUCLUSTER_SOURCE: &str =
    "NVIDIA/gpu-operator: config/crd/bases/nvidia.com_gpuclusters.yaml (schemas/)";

/// The source of the Ignition schema of `version` (a key of [`ignition`]).
pub fn ignition_source(version: &str) -> &'static str {
    match version {
        "2.2.0" => {
            "coreos/ignition: schema/ignition.json at tag v0.22.0, spec 2.2.0 (schemas/ignition-2.2.0.json)"
        }
        "3.0.0" => {
            "coreos/ignition: config/v3_0/schema/ignition.json (schemas/ignition-3.0.0.json)"
        }
        "3.1.0" => {
            "coreos/ignition: config/v3_1/schema/ignition.json (schemas/ignition-3.1.0.json)"
        }
        "3.2.0" => {
            "coreos/ignition: config/v3_2/schema/ignition.json (schemas/ignition-3.2.0.json)"
        }
        "3.3.0" => {
            "coreos/ignition: config/v3_3/schema/ignition.json (schemas/ignition-3.3.0.json)"
        }
        "3.4.0" => {
            "coreos/ignition: config/v3_4/schema/ignition.json (schemas/ignition-3.4.0.json)"
        }
        _ => "coreos/ignition: config/v3_5/schema/ignition.json (schemas/ignition-3.5.0.json)",
    }
}

/// A CRD's versions: (`group/version`, kind, openAPIV3Schema).
pub struct Crd {
    pub kind: String,
    pub versions: Vec<(String, J)>,
}

fn crd(text: &str) -> Result<Crd, String> {
    let docs = crate::yaml::parse_stream(text).map_err(|e| e.to_string())?;
    let doc = docs.first().ok_or("empty CRD")?.to_json();
    let group = doc
        .pointer("/spec/group")
        .and_then(J::as_str)
        .ok_or("CRD without spec.group")?;
    let kind = doc
        .pointer("/spec/names/kind")
        .and_then(J::as_str)
        .ok_or("CRD without spec.names.kind")?
        .to_string();
    let mut versions = Vec::new();
    for v in doc
        .pointer("/spec/versions")
        .and_then(J::as_array)
        .ok_or("CRD without versions")?
    {
        let name = v
            .get("name")
            .and_then(J::as_str)
            .ok_or("version without name")?;
        let schema = v
            .pointer("/schema/openAPIV3Schema")
            .cloned()
            .ok_or("version without openAPIV3Schema")?;
        versions.push((format!("{group}/{name}"), schema));
    }
    Ok(Crd { kind, versions })
}

/// The committed CRDs, parsed once: ClusterPolicy, NVIDIADriver, MachineConfig,
/// MachineConfigPool. An error here is a broken build, said as such.
pub fn crds() -> Result<&'static [(Crd, &'static str)], String> {
    static CRDS: OnceLock<Result<Vec<(Crd, &'static str)>, String>> = OnceLock::new();
    CRDS.get_or_init(|| {
        Ok(vec![
            (crd(CLUSTERPOLICY_CRD)?, CLUSTERPOLICY_SOURCE),
            (crd(NVIDIADRIVER_CRD)?, NVIDIADRIVER_SOURCE),
            (crd(MACHINECONFIG_CRD)?, MACHINECONFIG_SOURCE),
            (crd(MACHINECONFIGPOOL_CRD)?, MACHINECONFIGPOOL_SOURCE),
            (crd(GPUCLUSTER_CRD)?, GPUCLUSTER_SOURCE),
        ])
    })
    .as_ref()
    .map(Vec::as_slice)
    .map_err(|e| format!("built-in CRD schema unreadable: {e}"))
}

/// The Ignition config versions with a committed schema, oldest first.
pub fn ignition_versions() -> impl Iterator<Item = &'static str> {
    IGNITION.iter().map(|(v, _)| *v)
}

/// The Ignition config schema of `version` (`"3.4.0"`), `Ok(None)` when none is committed.
pub fn ignition(version: &str) -> Result<Option<&'static J>, String> {
    static IGN: OnceLock<Result<Vec<(&'static str, J)>, String>> = OnceLock::new();
    let all = IGN
        .get_or_init(|| {
            IGNITION
                .iter()
                .map(|(v, text)| {
                    serde_json::from_str(text)
                        .map(|j| (*v, j))
                        .map_err(|e| format!("{v}: {e}"))
                })
                .collect()
        })
        .as_ref()
        .map_err(|e| format!("built-in Ignition schema unreadable: {e}"))?;
    Ok(all.iter().find(|(v, _)| *v == version).map(|(_, j)| j))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_schemas_parse_with_their_versions() {
        let crds = crds().expect("crds");
        let names: Vec<(String, Vec<&str>)> = crds
            .iter()
            .map(|(c, _)| {
                (
                    c.kind.clone(),
                    c.versions.iter().map(|(v, _)| v.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("ClusterPolicy".into(), vec!["nvidia.com/v1"]),
                ("NVIDIADriver".into(), vec!["nvidia.com/v1alpha1"]),
                (
                    "MachineConfig".into(),
                    vec!["machineconfiguration.openshift.io/v1"]
                ),
                (
                    "MachineConfigPool".into(),
                    vec!["machineconfiguration.openshift.io/v1"]
                ),
                ("GPUCluster".into(), vec!["nvidia.com/v1alpha1"]),
            ]
        );
        for v in ignition_versions() {
            let ign = ignition(v).expect("ignition").expect(v);
            // Each file's own version string is the only one it names.
            assert!(ign.pointer("/definitions").is_some(), "{v}");
        }
        let v34 = ignition("3.4.0").expect("ignition").expect("3.4.0");
        assert!(
            v34.pointer("/definitions/resource/properties/source")
                .is_some()
        );
        assert!(ignition("3.6.0").expect("ignition").is_none());
    }
}
