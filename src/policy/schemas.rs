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

/// A GPU Operator release whose CRDs are committed (schemas/README.md). The newest is the
/// top-level `schemas/nvidia.com_*.yaml`; older ones are under `schemas/gpu-operator/TAG/`.
pub struct OperatorRelease {
    /// The tag, `v26.3.3`: the newest patch release of its minor that is committed.
    pub tag: &'static str,
    /// `26.3`.
    pub minor: &'static str,
    clusterpolicy: (&'static str, &'static str),
    nvidiadriver: (&'static str, &'static str),
    /// GPUCluster exists from v26.7.0.
    gpucluster: Option<(&'static str, &'static str)>,
}

/// The committed releases, oldest first; the last is the default.
pub const RELEASES: [OperatorRelease; 4] = [
    OperatorRelease {
        tag: "v25.3.4",
        minor: "25.3",
        clusterpolicy: (
            include_str!("../../schemas/gpu-operator/v25.3.4/nvidia.com_clusterpolicies.yaml"),
            "NVIDIA/gpu-operator v25.3.4: config/crd/bases/nvidia.com_clusterpolicies.yaml (schemas/gpu-operator/v25.3.4/)",
        ),
        nvidiadriver: (
            include_str!("../../schemas/gpu-operator/v25.3.4/nvidia.com_nvidiadrivers.yaml"),
            "NVIDIA/gpu-operator v25.3.4: config/crd/bases/nvidia.com_nvidiadrivers.yaml (schemas/gpu-operator/v25.3.4/)",
        ),
        gpucluster: None,
    },
    OperatorRelease {
        tag: "v25.10.1",
        minor: "25.10",
        clusterpolicy: (
            include_str!("../../schemas/gpu-operator/v25.10.1/nvidia.com_clusterpolicies.yaml"),
            "NVIDIA/gpu-operator v25.10.1: config/crd/bases/nvidia.com_clusterpolicies.yaml (schemas/gpu-operator/v25.10.1/)",
        ),
        nvidiadriver: (
            include_str!("../../schemas/gpu-operator/v25.10.1/nvidia.com_nvidiadrivers.yaml"),
            "NVIDIA/gpu-operator v25.10.1: config/crd/bases/nvidia.com_nvidiadrivers.yaml (schemas/gpu-operator/v25.10.1/)",
        ),
        gpucluster: None,
    },
    OperatorRelease {
        tag: "v26.3.3",
        minor: "26.3",
        clusterpolicy: (
            include_str!("../../schemas/gpu-operator/v26.3.3/nvidia.com_clusterpolicies.yaml"),
            "NVIDIA/gpu-operator v26.3.3: config/crd/bases/nvidia.com_clusterpolicies.yaml (schemas/gpu-operator/v26.3.3/)",
        ),
        nvidiadriver: (
            include_str!("../../schemas/gpu-operator/v26.3.3/nvidia.com_nvidiadrivers.yaml"),
            "NVIDIA/gpu-operator v26.3.3: config/crd/bases/nvidia.com_nvidiadrivers.yaml (schemas/gpu-operator/v26.3.3/)",
        ),
        gpucluster: None,
    },
    OperatorRelease {
        tag: "v26.7.0",
        minor: "26.7",
        clusterpolicy: (CLUSTERPOLICY_CRD, CLUSTERPOLICY_SOURCE),
        nvidiadriver: (NVIDIADRIVER_CRD, NVIDIADRIVER_SOURCE),
        gpucluster: Some((GPUCLUSTER_CRD, GPUCLUSTER_SOURCE)),
    },
];

/// The newest committed release (what `policy check` uses unless told otherwise).
pub fn newest() -> &'static OperatorRelease {
    &RELEASES[RELEASES.len() - 1]
}

/// The release a user names: `26.3`, `v26.3`, `v26.3.0`, `26.3.3` (a patch picks its minor's
/// committed release). `Err` lists the ones there are.
pub fn release(v: &str) -> Result<&'static OperatorRelease, String> {
    let t = v.trim().trim_start_matches('v');
    let mut parts = t.split('.');
    let minor = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(a), Some(b), patch, None)
            if [a, b]
                .iter()
                .chain(patch.iter())
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())) =>
        {
            format!("{a}.{b}")
        }
        _ => String::new(),
    };
    RELEASES.iter().find(|r| r.minor == minor).ok_or_else(|| {
        let known: Vec<&str> = RELEASES.iter().map(|r| r.minor).collect();
        format!(
            "GPU Operator version {v:?}: the committed CRDs are those of {} (MAJOR.MINOR, optionally .PATCH)",
            known.join(", ")
        )
    })
}

/// The CRDs of `rel`, parsed once: ClusterPolicy, NVIDIADriver, MachineConfig,
/// MachineConfigPool and (from v26.7.0) GPUCluster. An error here is a broken build, said as
/// such.
pub fn crds_of(rel: &'static OperatorRelease) -> Result<&'static [(Crd, &'static str)], String> {
    type Parsed = Result<Vec<(Crd, &'static str)>, String>;
    static CRDS: [OnceLock<Parsed>; RELEASES.len()] = [const { OnceLock::new() }; RELEASES.len()];
    let i = RELEASES
        .iter()
        .position(|r| r.tag == rel.tag)
        .ok_or("unknown operator release")?;
    CRDS[i]
        .get_or_init(|| {
            let mut v = vec![
                (crd(rel.clusterpolicy.0)?, rel.clusterpolicy.1),
                (crd(rel.nvidiadriver.0)?, rel.nvidiadriver.1),
                (crd(MACHINECONFIG_CRD)?, MACHINECONFIG_SOURCE),
                (crd(MACHINECONFIGPOOL_CRD)?, MACHINECONFIGPOOL_SOURCE),
            ];
            if let Some((text, source)) = rel.gpucluster {
                v.push((crd(text)?, source));
            }
            Ok(v)
        })
        .as_ref()
        .map(Vec::as_slice)
        .map_err(|e| format!("built-in CRD schema of {} unreadable: {e}", rel.tag))
}

/// The source of the newest release's CRD of `kind` (for a kind an older release lacks).
pub fn newest_source(kind: &str) -> &'static str {
    match kind {
        "GPUCluster" => GPUCLUSTER_SOURCE,
        "NVIDIADriver" => NVIDIADRIVER_SOURCE,
        _ => CLUSTERPOLICY_SOURCE,
    }
}

/// The CRDs of the newest committed release.
pub fn crds() -> Result<&'static [(Crd, &'static str)], String> {
    crds_of(newest())
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
        // Every release parses; GPUCluster only from v26.7.0.
        for r in &RELEASES {
            let kinds: Vec<String> = crds_of(r)
                .expect("crds")
                .iter()
                .map(|(c, _)| c.kind.clone())
                .collect();
            assert_eq!(
                kinds.contains(&"GPUCluster".to_string()),
                r.tag == "v26.7.0"
            );
        }
    }

    #[test]
    fn operator_versions_name_a_committed_release() {
        for (v, tag) in [
            ("26.3", "v26.3.3"),
            ("v26.3", "v26.3.3"),
            ("v26.3.0", "v26.3.3"),
            ("25.10.1", "v25.10.1"),
            ("v25.3", "v25.3.4"),
            ("26.7", "v26.7.0"),
        ] {
            assert_eq!(release(v).map(|r| r.tag), Ok(tag), "{v}");
        }
        for v in ["24.9", "26", "v26.3.x", "", "26.3.3.1", "26..3"] {
            assert!(release(v).is_err(), "{v}");
        }
    }
}
