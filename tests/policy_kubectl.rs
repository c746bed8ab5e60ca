//! `gpufleet policy check --kubectl` with the cluster's state: the GPU Operator release read from
//! its Deployment, and NVIDIADrivers that select the same real nodes. kubectl is a stand-in
//! script printing fixed JSON (it tests gpufleet's reading of kubectl output, not kubectl); the
//! main stand-in is in tests/policy.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// `policy check --format json ARGS`: (exit code, findings).
fn check(args: &[&Path]) -> (i32, Vec<Value>) {
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["policy", "check", "--format", "json"])
        .args(args)
        .env_remove("GPUFLEET_CONFIG")
        .output()
        .expect("run gpufleet");
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let findings = doc["findings"].as_array().expect("findings").clone();
    (out.status.code().expect("exit code"), findings)
}

fn list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// A kubectl stand-in in `dir`: `get nvidiadrivers.nvidia.com` prints `drivers`, `get nodes`
/// prints `nodes`, `get deployments` fails as the API server does for a user who may not list
/// them, every other `get` prints an empty list.
fn stand_in(dir: &Path, drivers: Vec<Value>, nodes: Vec<Value>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(dir.join("nd.json"), list(drivers).to_string()).expect("write");
    std::fs::write(dir.join("nodes.json"), list(nodes).to_string()).expect("write");
    let script = format!(
        "#!/bin/sh\ncase \"$2\" in\n  nvidiadrivers.nvidia.com) cat '{d}/nd.json' ;;\n  nodes) cat '{d}/nodes.json' ;;\n  deployments) echo 'Error from server (Forbidden): deployments.apps is forbidden: User \"dev\" cannot list resource \"deployments\" in API group \"apps\" at the cluster scope' >&2; exit 1 ;;\n  *) echo '{{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": []}}' ;;\nesac\n",
        d = dir.display()
    );
    let bin = dir.join("kubectl");
    std::fs::write(&bin, script).expect("write");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    bin
}

fn driver(name: &str, selector: Option<Value>, extra: Value) -> Value {
    let mut spec = json!({"driverType": "gpu", "image": "driver", "kernelModuleType": "open"});
    if let Some(s) = selector {
        spec["nodeSelector"] = s;
    }
    for (k, v) in extra.as_object().expect("object") {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
        "metadata": {"name": name}, "spec": spec})
}

fn node(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
}

fn kubectl_args(bin: &Path) -> Vec<&Path> {
    vec![Path::new("--kubectl"), Path::new("--kubectl-bin"), bin]
}

#[test]
fn an_unreadable_operator_deployment_is_said_and_the_newest_crds_are_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    // spec.upgradePolicy came with v26.7.0.
    let d = driver("d", None, json!({"upgradePolicy": {"autoUpgrade": false}}));
    let bin = stand_in(dir.path(), vec![d], vec![]);
    let (code, findings) = check(&kubectl_args(&bin));
    assert_eq!(code, 0, "{findings:#?}");
    let note = findings
        .iter()
        .find(|f| f["code"] == "gpu-operator-version")
        .expect("version note");
    let msg = note["message"].as_str().expect("message");
    assert!(
        msg.contains("could not be read") && msg.contains("Forbidden"),
        "{msg}"
    );
    let dropped = |findings: &[Value]| {
        findings
            .iter()
            .any(|f| f["code"] == "field-not-in-operator-version")
    };
    assert!(!dropped(&findings));
    // --operator-version still decides when given.
    let mut args = kubectl_args(&bin);
    args.extend([Path::new("--operator-version"), Path::new("26.3")]);
    let (_, findings) = check(&args);
    assert!(dropped(&findings), "{findings:#?}");
}

#[test]
fn nvidiadrivers_claiming_the_same_cluster_nodes_are_named_with_the_nodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The cluster: pool-a selects pool=a; gpu-1 and gpu-2 are in pool a, gpu-3 in pool b.
    let a = driver("pool-a", Some(json!({"pool": "a"})), json!({}));
    let nodes = vec![
        node(
            "gpu-1",
            json!({"pool": "a", "nvidia.com/gpu.present": "true"}),
        ),
        node(
            "gpu-2",
            json!({"pool": "a", "nvidia.com/gpu.present": "true"}),
        ),
        node(
            "gpu-3",
            json!({"pool": "b", "nvidia.com/gpu.present": "true"}),
        ),
    ];
    let bin = stand_in(dir.path(), vec![a], nodes);
    // A file adds pool-a-copy, also selecting pool=a: gpu-1 and gpu-2 are claimed twice.
    let copy = fixture("policy-rules/nvidiadriver-pool-a-copy.yaml");
    let mut args = kubectl_args(&bin);
    args.push(&copy);
    let (code, findings) = check(&args);
    assert_eq!(code, 1);
    let claimed: Vec<&Value> = findings
        .iter()
        .filter(|f| f["code"] == "nvidiadriver-nodes-claimed-twice")
        .collect();
    assert_eq!(claimed.len(), 1, "{findings:#?}");
    assert_eq!(
        (claimed[0]["severity"].as_str(), claimed[0]["line"].as_u64()),
        (Some("error"), Some(11))
    );
    let msg = claimed[0]["message"].as_str().expect("message");
    assert!(
        msg.contains("both select 2 of the cluster's nodes (gpu-1, gpu-2)"),
        "{msg}"
    );
    // The file's pool-b matches no node pool-a has: nothing claimed twice.
    let b = fixture("policy-rules/nvidiadriver-pool-b.yaml");
    let mut args = kubectl_args(&bin);
    args.push(&b);
    let (_, findings) = check(&args);
    assert!(
        !findings.iter().any(|f| f["code"]
            .as_str()
            .unwrap_or("")
            .starts_with("nvidiadriver-")),
        "{findings:#?}"
    );
    // A file that redefines pool-a itself (same name) replaces the cluster's copy: no conflict
    // of the object with its old self.
    let redefined = dir.path().join("pool-a.yaml");
    std::fs::write(
        &redefined,
        std::fs::read_to_string(fixture("policy-rules/nvidiadriver-pool-a.yaml"))
            .expect("fixture")
            .replacen("    pool: a\n", "    pool: b\n", 1),
    )
    .expect("write");
    let mut args = kubectl_args(&bin);
    args.push(&redefined);
    let (code, findings) = check(&args);
    assert_eq!(code, 0, "{findings:#?}");
}
