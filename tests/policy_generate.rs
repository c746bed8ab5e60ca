//! `gpufleet policy generate` on fleets built from real fixture snapshots (`gpufleet snapshot
//! --root`, as tests/policy.rs takes them): the output validates against the committed CRDs
//! once merged onto the GPU Operator's samples, `policy check --against` the same fleet passes
//! it, driver versions are checked per pool, names follow the platform, the cluster's mode is
//! detected, and hostile node names never reach a command line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpufleet::policy::{schema, schemas};
use gpufleet::yaml;
use serde_json::Value;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn gpufleet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .env_remove("GPUFLEET_CONFIG")
        .output()
        .expect("run gpufleet")
}

/// A real snapshot of a fixture node, written to `dir`; `rename` gives the node another name.
fn snapshot_of(dir: &Path, fixture: &str, rename: Option<&str>) -> String {
    let node = manifest().join("tests").join(fixture);
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "--format", "json", "--root"])
        .arg(node.join("root"))
        .arg("--config")
        .arg(manifest().join("config/config.example.toml"))
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", node.join("bin").display()),
        )
        .output()
        .expect("snapshot");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    if let Some(name) = rename {
        doc["nodes"][0]["name"] = Value::from(name);
    }
    let p = dir.join(format!(
        "{}.json",
        rename.unwrap_or(fixture).replace(['/', ';', ' '], "_")
    ));
    std::fs::write(&p, doc.to_string()).expect("write");
    p.display().to_string()
}

/// The Done-when fleet: pre-Turing (V100, proprietary 535 with nvidia-peermem), Turing (T4),
/// Hopper (H100 NVL with drifted parameters, H200), Blackwell (B200 under the GPU Operator).
fn mixed_fleet(dir: &Path) -> Vec<String> {
    [
        "fixtures/nodes/v100-proprietary-535-k5.4-peermem",
        "fixtures-v3/t4-open-595-turing-healthy",
        "fixtures/nodes-v2/h100nvl-open-575-param-drift",
        "fixtures/nodes/h200-open-580-k6.18-real",
        "fixtures/nodes-v2/b200-open-580-gpu-operator",
    ]
    .iter()
    .flat_map(|f| ["--for".to_string(), snapshot_of(dir, f, None)])
    .collect()
}

fn run(args: &[String]) -> (i32, String, String) {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = gpufleet(&a);
    (
        out.status.code().expect("exit code"),
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn args(v: &[&str], rest: &[String]) -> Vec<String> {
    v.iter()
        .map(|s| s.to_string())
        .chain(rest.iter().cloned())
        .collect()
}

/// RFC 7386 JSON merge patch, as `kubectl patch --type merge` applies it.
fn merge_patch(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

fn sample(name: &str) -> Value {
    let text =
        std::fs::read_to_string(manifest().join("tests/fixtures/k8s").join(name)).expect("sample");
    yaml::parse_stream(&text).expect("sample yaml")[0].to_json()
}

/// Schema issues of `obj` against `kind`'s CRD of GPU Operator `version`.
fn validate(version: &str, kind: &str, obj: &Value) -> Vec<schema::Issue> {
    let rel = schemas::release(version).expect("release");
    let crds = schemas::crds_of(rel).expect("crds");
    let (crd, _) = crds.iter().find(|(c, _)| c.kind == kind).expect("crd");
    let s = &crd.versions[0].1;
    schema::validate(s, s, &yaml::Node::from_json(obj), schema::Dialect::Crd, "")
}

/// Each generated object merged onto the operator's sample of its kind (the NVIDIADrivers
/// are whole objects: merged onto the sample they replace its selector-free defaults) and
/// validated with `version`'s CRD.
fn validates_on_samples(version: &str, docs: &[Value]) {
    for d in docs {
        let (kind, base) = match d["kind"].as_str() {
            Some("ClusterPolicy") => ("ClusterPolicy", "gpu-operator-sample-clusterpolicy.yaml"),
            Some("NVIDIADriver") => ("NVIDIADriver", "gpu-operator-sample-nvidiadriver.yaml"),
            Some("ConfigMap") => continue,
            other => panic!("unexpected kind {other:?}"),
        };
        let mut full = sample(base);
        if kind == "NVIDIADriver" {
            // The sample's own upgradePolicy / default exist only from v26.7.0's CRD.
            if version != "26.7" {
                let spec = full["spec"].as_object_mut().expect("spec");
                spec.remove("upgradePolicy");
                spec.remove("default");
            }
        }
        merge_patch(&mut full, d);
        assert_eq!(
            validate(version, kind, &full),
            vec![],
            "{kind} on {version}"
        );
        // Alone, as the API server would create it (NVIDIADriver is a whole object).
        if kind == "NVIDIADriver" {
            assert_eq!(validate(version, kind, d), vec![], "{d:#}");
        }
    }
}

fn docs_of(text: &str) -> Vec<Value> {
    yaml::parse_stream(text)
        .expect("yaml")
        .iter()
        .map(yaml::Node::to_json)
        .collect()
}

/// `policy check --format json FILE --against …`: (exit code, warnings and errors).
fn check_against(dir: &Path, text: &str, fleet: &[String]) -> (i32, Vec<Value>, Vec<Value>) {
    let file = dir.join("generated.yaml");
    std::fs::write(&file, text).expect("write");
    let mut a = vec![
        "policy".to_string(),
        "check".into(),
        "--format".into(),
        "json".into(),
        file.display().to_string(),
    ];
    a.extend(fleet.iter().map(|s| s.replace("--for", "--against")));
    let (code, out, err) = run(&a);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let all = doc["findings"].as_array().expect("findings").clone();
    let serious = all
        .iter()
        .filter(|f| f["severity"] != "info")
        .cloned()
        .collect();
    (code, serious, all)
}

#[test]
fn mixed_fleet_gets_an_nvidiadriver_set_that_validates_and_checks_clean_against_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = mixed_fleet(dir.path());
    let (code, text, err) = run(&args(&["policy", "generate", "--nvidiadriver"], &fleet));
    assert_eq!(code, 0, "{err}");
    let docs = docs_of(&text);
    let drivers: Vec<(&str, &str, &str, &str, bool)> = docs
        .iter()
        .filter(|d| d["kind"] == "NVIDIADriver")
        .map(|d| {
            let s = &d["spec"];
            (
                d["metadata"]["name"].as_str().unwrap(),
                s["kernelModuleType"].as_str().unwrap(),
                s["version"].as_str().unwrap(),
                s["nodeSelector"]["gpufleet/driver-pool"].as_str().unwrap(),
                s["rdma"]["enabled"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        drivers,
        vec![
            (
                "gpufleet-blackwell",
                "open",
                "595.91.07",
                "blackwell",
                false
            ),
            ("gpufleet-hopper", "open", "595.91.07", "hopper", false),
            ("gpufleet-turing", "open", "595.91.07", "turing", false),
            // Pre-Turing: proprietary, at most 580; nvidia-peermem is its only GPUDirect RDMA.
            ("gpufleet-volta", "proprietary", "580.126.20", "volta", true),
        ]
    );
    // The drifted parameters are in no ConfigMap: one is set on one Hopper node only, the
    // other is not in effect there; the reason per node is said.
    assert!(!docs.iter().any(|d| d["kind"] == "ConfigMap"), "{text}");
    assert!(
        err.contains("NVreg_EnableResizableBar left out: inf-h100nvl-21: configured 1 (/etc/modprobe.d/nvidia-tuning.conf), but not in effect (/proc/driver/nvidia/params: 0); vm: not configured"),
        "{err}"
    );
    assert!(
        err.contains("NVreg_DynamicPowerManagement left out: vm: not configured (in effect: 3)"),
        "{err}"
    );
    // The ClusterPolicy switches driver management to the NVIDIADrivers.
    let cp = docs
        .iter()
        .find(|d| d["kind"] == "ClusterPolicy")
        .expect("cp");
    assert_eq!(cp["spec"]["driver"]["useNvidiaDriverCRD"], true);
    assert_eq!(cp["metadata"]["name"], "cluster-policy");
    for d in docs.iter().filter(|d| d["kind"] == "NVIDIADriver") {
        let up = &d["spec"]["upgradePolicy"];
        assert_eq!(up["autoUpgrade"], true);
        assert_eq!(up["maxParallelUpgrades"], 1);
        assert_eq!(up["drain"]["enable"], true);
    }
    validates_on_samples("26.7", &docs);
    // policy check on it, against the same fleet: no warning, no error.
    let (code, serious, all) = check_against(dir.path(), &text, &fleet);
    assert_eq!(serious, Vec::<Value>::new());
    assert_eq!(code, 0);
    // Each node was compared with its pool's NVIDIADriver (its labels being unknown).
    let v100 = all
        .iter()
        .find(|f| {
            f["code"] == "node-selection-unknown"
                && f["node"] == "v100-proprietary-535-k5.4-peermem"
        })
        .expect("selection info");
    assert!(
        v100["message"]
            .as_str()
            .unwrap()
            .contains("NVIDIADriver/gpufleet-volta fits"),
        "{v100}"
    );
    // Canary first, in the comments' order: pool labels and the skip label on every node but
    // the canaries before anything is applied; the skip labels come off after.
    let pos = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} not in\n{text}"));
    let skip_vm =
        pos("kubectl label node --overwrite -- vm nvidia.com/gpu-driver-upgrade.skip=true");
    let apply = pos("kubectl apply -f FILE -l app.kubernetes.io/managed-by=gpufleet");
    let patch = pos("kubectl patch clusterpolicies.nvidia.com cluster-policy --type merge -p");
    let unskip = pos("kubectl label node --overwrite -- vm nvidia.com/gpu-driver-upgrade.skip-");
    assert!(pos("-- vm gpufleet/driver-pool=hopper") < apply);
    assert!(skip_vm < apply && apply < patch && patch < unskip, "{text}");
    // The canaries (first of each pool) carry no skip label.
    assert!(!text.contains("-- inf-h100nvl-21 nvidia.com/gpu-driver-upgrade.skip=true"));

    // The same check fails on a broken set (it can fail): a pre-Turing pool asked for open.
    let broken = text.replacen("kernelModuleType: proprietary", "kernelModuleType: open", 1);
    let (code, serious, _) = check_against(dir.path(), &broken, &fleet);
    assert_eq!(code, 1);
    assert!(
        serious
            .iter()
            .any(|f| f["code"] == "node-pre-turing-under-open"),
        "{serious:#?}"
    );
    let mut bad = docs.clone();
    bad[0]["spec"]["kernelModuleType"] = Value::from("closed");
    let nvd = bad.iter().find(|d| d["kind"] == "NVIDIADriver").unwrap();
    assert_eq!(validate("26.7", "NVIDIADriver", nvd).len(), 1);
}

#[test]
fn an_older_operator_gets_the_upgrade_policy_in_the_clusterpolicy_and_older_drivers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = mixed_fleet(dir.path());
    let (code, text, err) = run(&args(
        &[
            "policy",
            "generate",
            "--nvidiadriver",
            "--operator-version",
            "26.3",
        ],
        &fleet,
    ));
    assert_eq!(code, 0, "{err}");
    let docs = docs_of(&text);
    for d in docs.iter().filter(|d| d["kind"] == "NVIDIADriver") {
        // v26.3's NVIDIADriver has no upgradePolicy (its API server would drop it); the
        // newest default up to 26.3 is 580.126.20.
        assert!(d["spec"].get("upgradePolicy").is_none(), "{d:#}");
        assert_eq!(d["spec"]["version"], "580.126.20");
    }
    let cp = docs.iter().find(|d| d["kind"] == "ClusterPolicy").unwrap();
    assert_eq!(cp["spec"]["driver"]["upgradePolicy"]["autoUpgrade"], true);
    validates_on_samples("26.3", &docs);
    let file = dir.path().join("g.yaml");
    std::fs::write(&file, &text).unwrap();
    let (code, out, _) = run(&[
        "policy".into(),
        "check".into(),
        "--operator-version".into(),
        "26.3".into(),
        file.display().to_string(),
    ]);
    assert!(!out.contains("field-not-in-operator-version"), "{out}");
    assert_eq!(code, 0, "{out}");
}

#[test]
fn clusterpolicy_mode_keeps_parameters_in_effect_and_blocks_pre_turing_nodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The drifted node alone: DynamicPowerManagement=0x02 is in effect (2), ResizableBar is not.
    let drift = snapshot_of(
        dir.path(),
        "fixtures/nodes-v2/h100nvl-open-575-param-drift",
        None,
    );
    let fleet = vec!["--for".to_string(), drift];
    let (code, text, err) = run(&args(&["policy", "generate"], &fleet));
    assert_eq!(code, 0, "{err}");
    let docs = docs_of(&text);
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("configmap");
    assert_eq!(
        cm["data"]["nvidia.conf"],
        "NVreg_DynamicPowerManagement=0x02\n"
    );
    assert_eq!(cm["metadata"]["namespace"], "gpu-operator");
    let cp = docs.iter().find(|d| d["kind"] == "ClusterPolicy").unwrap();
    assert_eq!(cp["spec"]["driver"]["kernelModuleType"], "open");
    assert_eq!(cp["spec"]["driver"]["rdma"]["enabled"], false);
    assert_eq!(cp["spec"]["driver"]["version"], "595.91.07");
    assert_eq!(
        cp["spec"]["driver"]["kernelModuleConfig"]["name"],
        cm["metadata"]["name"]
    );
    assert!(err.contains("NVreg_EnableResizableBar left out"), "{err}");
    validates_on_samples("26.7", &docs);
    let (code, serious, _) = check_against(dir.path(), &text, &fleet);
    assert_eq!((code, serious), (0, vec![]));
    // One ClusterPolicy cannot serve a V100 with open modules: exit 1, said.
    let fleet = mixed_fleet(dir.path());
    let (code, _, err) = run(&args(&["policy", "generate"], &fleet));
    assert_eq!(code, 1);
    assert!(
        err.contains("blocked: v100-proprietary-535-k5.4-peermem: pre-Turing GPUs (Volta)")
            && err.contains("--nvidiadriver"),
        "{err}"
    );
}

#[test]
fn a_driver_version_is_checked_against_each_pools_gpus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = mixed_fleet(dir.path());
    let (code, text, err) = run(&args(
        &[
            "policy",
            "generate",
            "--nvidiadriver",
            "--driver-version",
            "595.91.07",
        ],
        &fleet,
    ));
    assert_eq!(code, 1);
    assert!(
        err.contains("blocked: v100-proprietary-535-k5.4-peermem: pool volta: driver 595.91.07 is past the branch it allows")
            && err.contains("its last driver branch is 580"),
        "{err}"
    );
    // The blocked pool gets no NVIDIADriver, no labels; the others do.
    assert!(!text.contains("gpufleet-volta"), "{text}");
    assert!(text.contains("gpufleet-blackwell"), "{text}");
    let (code, _, err) = run(&args(
        &[
            "policy",
            "generate",
            "--nvidiadriver",
            "--driver-version",
            "565.57.01",
        ],
        &fleet,
    ));
    assert_eq!(code, 1);
    assert!(
        err.contains("blocked: k8s-b200-04: pool blackwell: driver 565.57.01 is below 570.133.20")
            && err.contains("HGX B200 requires a driver container version of 570.133.20 or later."),
        "{err}"
    );
    let (code, _, err) = run(&args(
        &["policy", "generate", "--driver-version", "latest"],
        &fleet,
    ));
    assert_eq!(code, 1);
    assert!(err.contains("is not a release number"), "{err}");
}

#[test]
fn openshift_names_and_the_nvidiadriver_mode_come_from_the_documents_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let drift = snapshot_of(
        dir.path(),
        "fixtures/nodes-v2/h100nvl-open-575-param-drift",
        None,
    );
    let cp = dir.path().join("cp.yaml");
    std::fs::write(
        &cp,
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: gpu-cluster-policy\nspec:\n  driver:\n    useNvidiaDriverCRD: true\n",
    )
    .unwrap();
    let (code, text, err) = run(&[
        "policy".into(),
        "generate".into(),
        "--for".into(),
        drift,
        cp.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let docs = docs_of(&text);
    assert!(docs.iter().any(|d| d["kind"] == "NVIDIADriver"), "{text}");
    let cm = docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    assert_eq!(cm["metadata"]["namespace"], "nvidia-gpu-operator");
    assert!(text.contains("kubectl patch clusterpolicies.nvidia.com gpu-cluster-policy"));
    assert!(
        err.contains("useNvidiaDriverCRD: true: one NVIDIADriver per pool"),
        "{err}"
    );
    assert!(err.contains("OpenShift's name"), "{err}");
}

#[test]
fn hostile_node_names_never_reach_a_label_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut fleet = Vec::new();
    for (f, name) in [
        ("fixtures-v3/t4-open-595-turing-healthy", "--overwrite"),
        ("fixtures-v3/t4-open-595-turing-healthy", "a;rm -rf ~"),
        ("fixtures-v3/t4-open-595-turing-healthy", "t4-good"),
    ] {
        fleet.push("--for".to_string());
        fleet.push(snapshot_of(dir.path(), f, Some(name)));
    }
    let (code, text, err) = run(&args(&["policy", "generate", "--nvidiadriver"], &fleet));
    assert_eq!(code, 1);
    assert!(
        err.contains("blocked: --overwrite: not a Kubernetes node name"),
        "{err}"
    );
    assert!(!text.contains("rm -rf"), "{text}");
    for line in text.lines().filter(|l| l.contains("kubectl label")) {
        assert!(line.contains(" -- t4-good "), "{line}");
    }
    assert!(
        text.contains("-- t4-good gpufleet/driver-pool=turing"),
        "{text}"
    );
    // A pool label key that is not one: refused, no NVIDIADriver written.
    let (_, text, err) = run(&args(
        &[
            "policy",
            "generate",
            "--nvidiadriver",
            "--pool-label",
            "bad key",
        ],
        &fleet,
    ));
    assert!(err.contains("is not a Kubernetes label key"), "{err}");
    assert!(!text.contains("kind: NVIDIADriver"), "{text}");
}

/// A kubectl stand-in for an OpenShift cluster on GPU Operator v26.3.3 with a default
/// NVIDIADriver: fixed JSON per `get` (it tests gpufleet's reading, not kubectl).
fn openshift_stand_in(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let list =
        |items: Vec<Value>| serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let w = |name: &str, v: Value| std::fs::write(dir.join(name), v.to_string()).unwrap();
    w(
        "cp.json",
        list(vec![
            serde_json::json!({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "gpu-cluster-policy"}, "spec": {"driver": {"enabled": true}}}),
        ]),
    );
    w(
        "nvd.json",
        list(vec![
            serde_json::json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
        "metadata": {"name": "default"}, "spec": {"default": true, "driverType": "gpu", "image": "driver"}}),
        ]),
    );
    w(
        "mcp.json",
        list(vec![
            serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool", "metadata": {"name": "worker"}, "spec": {}}),
        ]),
    );
    w("empty.json", list(vec![]));
    w(
        "deploy.json",
        list(vec![
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "gpu-operator", "namespace": "nvidia-gpu-operator",
            "labels": {"app.kubernetes.io/component": "gpu-operator", "app.kubernetes.io/version": "v26.3.3"}},
        "spec": {"template": {"spec": {"containers": [{"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v26.3.3"}]}}}}),
        ]),
    );
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> '{d}/calls'\ncase \"$2\" in\n  clusterpolicies.nvidia.com) cat '{d}/cp.json' ;;\n  nvidiadrivers.nvidia.com) cat '{d}/nvd.json' ;;\n  machineconfigpools.*) cat '{d}/mcp.json' ;;\n  deployments) cat '{d}/deploy.json' ;;\n  *) cat '{d}/empty.json' ;;\nesac\n",
        d = dir.display()
    );
    let bin = dir.join("kubectl");
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn kubectl_detects_the_mode_openshift_and_the_operator_release() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = openshift_stand_in(dir.path());
    let t4 = snapshot_of(
        dir.path(),
        "fixtures-v3/t4-open-595-turing-healthy",
        Some("t4-a"),
    );
    let (code, text, err) = run(&[
        "policy".into(),
        "generate".into(),
        "--for".into(),
        t4,
        "--kubectl".into(),
        "--kubectl-bin".into(),
        bin.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    let docs = docs_of(&text);
    let nvd = docs
        .iter()
        .find(|d| d["kind"] == "NVIDIADriver")
        .expect("nvd");
    // v26.3: no upgradePolicy on the NVIDIADriver, the 26.3 default driver.
    assert!(nvd["spec"].get("upgradePolicy").is_none());
    assert_eq!(nvd["spec"]["version"], "580.126.20");
    assert!(text.contains("GPU Operator v26.3.3 CRDs"), "{text}");
    assert!(text.contains("kubectl patch clusterpolicies.nvidia.com gpu-cluster-policy"));
    assert!(err.contains("NVIDIADriver/default exists"), "{err}");
    assert!(err.contains("MachineConfigPool (OpenShift)"), "{err}");
    // Reading only: every call was a get.
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    assert!(calls.lines().all(|l| l.starts_with("get ")), "{calls}");
}
