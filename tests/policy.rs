//! `gpufleet policy`: the guide fixtures (tests/fixtures/policy, synced from ../shared; their
//! README lists the findings a correct check reports), real objects from the GPU Operator
//! repository (tests/fixtures/k8s/README.md), and hostile files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(rel: &str) -> PathBuf {
    manifest().join("tests/fixtures").join(rel)
}

fn gpufleet(args: &[&str], files: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .args(files)
        .env_remove("GPUFLEET_CONFIG")
        .output()
        .expect("run gpufleet")
}

/// `policy check --format json` on files: (exit code, findings).
fn check_json(files: &[&Path]) -> (i32, Vec<Value>) {
    let out = gpufleet(&["policy", "check", "--format", "json"], files);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let findings = doc["findings"].as_array().expect("findings").clone();
    (out.status.code().expect("exit code"), findings)
}

/// (file name, line, end line, severity, code) of every warning and error.
fn serious(findings: &[Value]) -> Vec<(String, u64, Option<u64>, String, String)> {
    findings
        .iter()
        .filter(|f| f["severity"] != "info")
        .map(|f| {
            (
                Path::new(f["file"].as_str().expect("file"))
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned(),
                f["line"].as_u64().expect("line"),
                f["end_line"].as_u64(),
                f["severity"].as_str().expect("severity").to_string(),
                f["code"].as_str().expect("code").to_string(),
            )
        })
        .collect()
}

fn s(
    file: &str,
    line: u64,
    end: Option<u64>,
    sev: &str,
    code: &str,
) -> (String, u64, Option<u64>, String, String) {
    (file.into(), line, end, sev.into(), code.into())
}

#[test]
fn guide_clusterpolicy_gives_exactly_the_readme_findings() {
    let (code, findings) = check_json(&[&fixture("policy/guide-clusterpolicy.yaml")]);
    assert_eq!(code, 1, "{findings:#?}");
    let f = "guide-clusterpolicy.yaml";
    assert_eq!(
        serious(&findings),
        vec![
            s(f, 11, None, "warning", "use-open-kernel-modules-ignored"),
            s(
                f,
                12,
                None,
                "warning",
                "kernel-module-type-auto-unsupported"
            ),
        ]
    );
    // Line 12 says which module type this driver gets under each setting.
    let v = findings
        .iter()
        .find(|f| f["code"] == "kernel-module-type-auto-unsupported")
        .expect("version finding");
    let msg = v["message"].as_str().expect("message");
    for part in [
        "auto: the proprietary module",
        "open: the open module",
        "proprietary: the proprietary module",
        "570.86.15",
    ] {
        assert!(msg.contains(part), "{part:?} missing in {msg}");
    }
    // The absent driver.rdma: an info that DMA-BUF needs neither it nor MOFED.
    let rdma = findings
        .iter()
        .find(|f| f["code"] == "rdma-not-needed-for-dmabuf")
        .expect("rdma info");
    assert_eq!(
        (rdma["severity"].as_str(), rdma["line"].as_u64()),
        (Some("info"), Some(8))
    );
    for f in &findings {
        assert!(
            f["source"].as_str().is_some_and(|s| !s.is_empty()),
            "no source: {f}"
        );
    }
}

#[test]
fn guide_machineconfig_gives_exactly_the_readme_findings() {
    let (code, findings) = check_json(&[&fixture("policy/guide-machineconfig.yaml")]);
    assert_eq!(code, 1, "{findings:#?}");
    let f = "guide-machineconfig.yaml";
    assert_eq!(
        serious(&findings),
        vec![
            s(f, 6, None, "warning", "machineconfig-pool-not-given"),
            s(
                f,
                13,
                Some(25),
                "warning",
                "machineconfig-not-for-operator-driver"
            ),
            s(f, 16, Some(18), "error", "butane-inline"),
            s(
                f,
                18,
                None,
                "warning",
                "open-rm-enable-unsupported-gpus-ignored"
            ),
            s(f, 19, Some(25), "warning", "modules-load-file-empty"),
            s(f, 22, Some(25), "error", "butane-inline"),
        ]
    );
}

#[test]
fn text_output_names_file_line_severity_code_and_source() {
    let out = gpufleet(
        &["policy", "check"],
        &[&fixture("policy/guide-clusterpolicy.yaml")],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text.contains("guide-clusterpolicy.yaml:11: warning[use-open-kernel-modules-ignored]:"),
        "{text}"
    );
    assert!(
        text.contains("    source: NVIDIA/gpu-operator: api/nvidia/v1/clusterpolicy_types.go"),
        "{text}"
    );
    assert!(text.contains("0 error(s), 2 warning(s)"), "{text}");
}

#[test]
fn real_gpu_operator_samples_check_clean() {
    // Each alone; together the ClusterPolicy leaves the NVIDIADriver Disabled
    // (tests/policy_rules.rs).
    for f in [
        "k8s/gpu-operator-sample-clusterpolicy.yaml",
        "k8s/gpu-operator-sample-nvidiadriver.yaml",
    ] {
        let (code, findings) = check_json(&[&fixture(f)]);
        assert_eq!(serious(&findings), vec![]);
        assert_eq!(code, 0);
    }
}

fn temp_file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write");
    p
}

#[test]
fn each_rule_fires_on_a_file_that_breaks_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cp = temp_file(
        &dir,
        "cp.yaml",
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: cluster-policy\nspec:\n  driver:\n    kernelModuleType: open\n    version: \"510.108.03\"\n    rdma:\n      enabled: true\n    usePrecompiled: \"yes\"\n    kernelModuleTyp: open\n",
    );
    let nd = temp_file(
        &dir,
        "nd.yaml",
        "apiVersion: nvidia.com/v1alpha1\nkind: NVIDIADriver\nmetadata:\n  name: d\nspec:\n  driverType: gpu\n  image: driver\n  kernelModuleType: closed\n",
    );
    // A MachineConfig as the API returns it: contents as data URLs; a decimal mode; no role.
    let mc = temp_file(
        &dir,
        "mc.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-peermem\nspec:\n  config:\n    ignition:\n      version: 2.2.0\n    storage:\n      files:\n        - path: /etc/modules-load.d/peermem.conf\n          mode: 644\n          contents:\n            source: data:,nvidia-peermem%0A\n        - path: /etc/modules-load.d/dmabuf.conf\n          mode: 420\n          contents:\n            source: data:text/plain;charset=utf-8;base64,ZG1hX2J1Zgo=\n",
    );
    let cm = temp_file(
        &dir,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kernel-module-params\n  namespace: gpu-operator\ndata:\n  nvidia.conf: |\n    options nvidia NVreg_EnableGpuFirmwareLogs=2\n",
    );
    let (code, findings) = check_json(&[&cp, &nd, &mc, &cm]);
    assert_eq!(code, 1);
    let got: Vec<(String, u64, String)> = serious(&findings)
        .into_iter()
        .map(|(f, l, _, _, c)| (f, l, c))
        .collect();
    let want = [
        ("cp.yaml", 8, "driver-branch-lacks-open"),
        ("cp.yaml", 10, "rdma-enabled-legacy-peermem"),
        ("cp.yaml", 11, "schema-type"),
        ("cp.yaml", 12, "schema-unknown-field"),
        ("nd.yaml", 8, "schema-enum"),
        ("mc.yaml", 3, "machineconfig-role-missing"),
        ("mc.yaml", 14, "machineconfig-loads-peermem"),
        ("mc.yaml", 18, "dma-buf-not-a-module"),
        ("cm.yaml", 8, "module-config-syntax"),
    ];
    for (f, l, c) in want {
        assert!(
            got.contains(&(f.to_string(), l, c.to_string())),
            "{f}:{l} {c} missing in {got:#?}"
        );
    }
    // Ignition 2.2.0 is read (the MCO converts it): an info, no error.
    assert!(
        findings
            .iter()
            .any(|f| f["code"] == "ignition-spec-2-converted")
    );
    assert!(
        !got.iter()
            .any(|(_, _, c)| c.starts_with("ignition-version"))
    );
    // With a 3.4.0 config, the data URLs are decoded and the mode is judged.
    let mc34 = std::fs::read_to_string(&mc)
        .expect("read")
        .replace("version: 2.2.0", "version: 3.4.0")
        .replace(
            "  name: 99-peermem\n",
            "  name: 99-peermem\n  labels:\n    machineconfiguration.openshift.io/role: worker\n",
        );
    let mc34 = temp_file(&dir, "mc34.yaml", &mc34);
    let (_, findings) = check_json(&[&mc34]);
    let got: Vec<(u64, String)> = serious(&findings)
        .into_iter()
        .map(|(_, l, _, _, c)| (l, c))
        .collect();
    for want in [
        (14, "file-mode-decimal"),
        (16, "machineconfig-loads-peermem"),
        (20, "dma-buf-not-a-module"),
        (13, "machineconfig-not-for-operator-driver"),
    ] {
        assert!(
            got.contains(&(want.0, want.1.to_string())),
            "{want:?} missing in {got:#?}"
        );
    }
}

#[test]
fn a_pool_that_selects_the_role_silences_the_pool_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pool = temp_file(
        &dir,
        "mcp.yaml",
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: gpu-worker\nspec:\n  machineConfigSelector:\n    matchExpressions:\n      - key: machineconfiguration.openshift.io/role\n        operator: In\n        values: [worker, gpu-worker]\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/gpu-worker: \"\"\n",
    );
    let (_, findings) = check_json(&[&fixture("policy/guide-machineconfig.yaml"), &pool]);
    assert!(
        !findings
            .iter()
            .any(|f| f["code"] == "machineconfig-pool-not-given"),
        "{findings:#?}"
    );
}

#[test]
fn hostile_files_get_a_clear_error_and_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = temp_file(
        &dir,
        "broken.yaml",
        "kind: ClusterPolicy\nspec: [1, 2\nx: 1\n",
    );
    let out = gpufleet(&["policy", "check"], &[&broken]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.yaml:"), "{err}");

    let missing = dir.path().join("absent.yaml");
    let out = gpufleet(&["policy", "check"], &[&missing]);
    assert_eq!(out.status.code(), Some(2));

    let binary = dir.path().join("bin.yaml");
    std::fs::write(&binary, b"kind: \xff\xfe\n").expect("write");
    let out = gpufleet(&["policy", "check"], &[&binary]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not UTF-8"));

    // A file is read through a 16 MiB cap: /dev/zero and a sparse 10 GiB file fail at once.
    let huge = dir.path().join("huge.yaml");
    std::fs::File::create(&huge)
        .expect("create")
        .set_len(10 << 30)
        .expect("sparse");
    for f in [Path::new("/dev/zero"), huge.as_path()] {
        let out = gpufleet(&["policy", "check"], &[f]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "{}: larger than 16 MiB (the limit for a policy file)",
                f.display()
            )),
            "{err}"
        );
    }

    // Escape sequences in values never reach the terminal raw.
    let esc = temp_file(
        &dir,
        "esc.yaml",
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: x\nspec:\n  driver:\n    useOpenKernelModules: \"\\e[31mred\\u202e\"\n",
    );
    let out = gpufleet(&["policy", "check"], &[&esc]);
    assert!(!out.stdout.contains(&0x1b), "raw ESC in output");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\\x1b[31mred\\u{202e}"), "{text}");

    let not_object = temp_file(&dir, "list.yaml", "- a\n- b\n");
    let (code, findings) = check_json(&[&not_object]);
    assert_eq!(code, 1);
    assert_eq!(findings[0]["code"], "not-a-kubernetes-object");
}

/// Writes a kubectl stand-in into `dir`: a script that prints fixed JSON of real objects for
/// each `get` (it tests gpufleet's reading of kubectl output, not kubectl), records its argv,
/// and answers as the API server does for a resource type the cluster lacks.
fn kubectl_stand_in(dir: &Path, fail_with: Option<&str>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    // The GPU Operator's sample ClusterPolicy, as `kubectl get -o json` prints a list of it.
    let cp_yaml = std::fs::read_to_string(fixture("k8s/gpu-operator-sample-clusterpolicy.yaml"))
        .expect("sample")
        .replace("  driver:\n", "  driver:\n    useOpenKernelModules: true\n")
        .replacen(
            "    # kernel module configuration for NVIDIA driver\n    kernelModuleConfig:\n      name: \"\"",
            "    kernelModuleConfig:\n      name: kernel-module-params",
            1,
        );
    let cp = gpufleet::yaml::parse_stream(&cp_yaml).expect("yaml")[0].to_json();
    let list =
        |items: Vec<Value>| serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(dir.join("cp.json"), list(vec![cp]).to_string()).expect("write");
    let mc = |name: &str, path: &str, source: &str| {
        serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"config": {"ignition": {"version": "3.4.0"},
                "storage": {"files": [{"path": path, "mode": 420, "overwrite": true, "contents": {"source": source}}]}}}})
    };
    let mcs = list(vec![
        mc(
            "rendered-worker-5f1c",
            "/etc/modprobe.d/nvidia.conf",
            "data:,options%20nvidia%20NVreg_EnableGpuFirmwareLogs%3D2%0A",
        ),
        mc("00-worker", "/etc/kubernetes/kubelet.conf", "data:,"),
        mc(
            "99-worker-nvidia",
            "/etc/modprobe.d/nvidia.conf",
            "data:,options%20nvidia%20NVreg_OpenRmEnableUnsupportedGpus%3D1%0Asoftdep%20nvidia%20post%3A%20nvidia-peermem%0A",
        ),
    ]);
    std::fs::write(dir.join("mc.json"), mcs.to_string()).expect("write");
    std::fs::write(dir.join("mcp.json"), list(vec![]).to_string()).expect("write");
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kernel-module-params", "namespace": "gpu-operator"},
        "data": {"nvidia.conf": "NVreg_EnableGpuFirmwareLogs=2\n"}});
    std::fs::write(dir.join("cm.json"), list(vec![cm]).to_string()).expect("write");
    let node = |name: &str, labels: Value| {
        serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels}})
    };
    let nodes = list(vec![
        node(
            "gpu-a",
            serde_json::json!({"nvidia.com/gpu.present": "true",
                "nvidia.com/gpu-driver-upgrade-state": "drain-required"}),
        ),
        node(
            "gpu-b",
            serde_json::json!({"nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
                "nvidia.com/gpu-driver-upgrade.skip": "true"}),
        ),
        node("cpu-c", serde_json::json!({"kubernetes.io/os": "linux"})),
    ]);
    std::fs::write(dir.join("nodes.json"), nodes.to_string()).expect("write");
    // The operator's Deployment as the Helm chart labels it (appVersion v25.10.0).
    let deploy = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "gpu-operator", "namespace": "gpu-operator",
            "labels": {"app.kubernetes.io/component": "gpu-operator", "app.kubernetes.io/version": "v25.10.0"}},
        "spec": {"template": {"spec": {"containers": [{"name": "gpu-operator", "image": "nvcr.io/nvidia/gpu-operator:v25.10.0"}]}}}});
    std::fs::write(dir.join("deploy.json"), list(vec![deploy]).to_string()).expect("write");
    let fail = fail_with
        .map(|m| format!("echo '{m}' >&2; exit 1\n"))
        .unwrap_or_default();
    let script = format!(
        "#!/bin/sh\n# kubectl stand-in: fixed JSON, tests gpufleet's reading, not kubectl.\necho \"$*\" >> '{d}/calls'\n{fail}case \"$2\" in\n  clusterpolicies.nvidia.com) cat '{d}/cp.json' ;;\n  nvidiadrivers.nvidia.com) echo 'error: the server doesn'\"'\"'t have a resource type \"nvidiadrivers\"' >&2; exit 1 ;;\n  gpuclusters.nvidia.com) echo 'error: the server doesn'\"'\"'t have a resource type \"gpuclusters\"' >&2; exit 1 ;;\n  machineconfigs.*) cat '{d}/mc.json' ;;\n  machineconfigpools.*) cat '{d}/mcp.json' ;;\n  configmaps) cat '{d}/cm.json' ;;\n  nodes) cat '{d}/nodes.json' ;;\n  deployments) cat '{d}/deploy.json' ;;\n  *) echo \"unexpected: $*\" >&2; exit 1 ;;\nesac\n",
        d = dir.display()
    );
    let bin = dir.join("kubectl");
    std::fs::write(&bin, script).expect("write");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    bin
}

#[test]
fn kubectl_objects_are_read_and_checked_with_a_stand_in_kubectl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = kubectl_stand_in(dir.path(), None);
    let out = gpufleet(
        &[
            "policy",
            "check",
            "--format",
            "json",
            "--kubectl",
            "--context",
            "prod",
            "--kubectl-bin",
        ],
        &[&bin],
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    let findings = doc["findings"].as_array().expect("findings");
    assert_eq!(out.status.code(), Some(1), "{findings:#?}");
    let has = |code: &str, object: &str| {
        findings.iter().any(|f| {
            f["code"] == code
                && f["object"].as_str().unwrap_or("").starts_with(object)
                && f["file"] == "kubectl"
        })
    };
    assert!(
        has(
            "use-open-kernel-modules-ignored",
            "ClusterPolicy/gpu-cluster-policy"
        ),
        "{findings:#?}"
    );
    assert!(has(
        "open-rm-enable-unsupported-gpus-ignored",
        "MachineConfig/99-worker-nvidia"
    ));
    assert!(has(
        "machineconfig-loads-peermem",
        "MachineConfig/99-worker-nvidia"
    ));
    assert!(has("kubectl-resource-absent", ""));
    assert!(has("kubectl-machineconfigs-skipped", ""));
    // The rendered- MachineConfig is the operator's merge: not checked twice.
    assert!(
        !findings
            .iter()
            .any(|f| f["object"] == "MachineConfig/rendered-worker-5f1c")
    );
    // The ConfigMap the ClusterPolicy names was read, so its parameters were looked at.
    assert!(
        !findings
            .iter()
            .any(|f| f["code"] == "module-config-not-given")
    );
    // Each node's GPU Operator upgrade labels, per node; none for a node without them.
    let node_says = |node: &str| -> Vec<String> {
        findings
            .iter()
            .filter(|f| f["code"] == "gpu-operator-upgrade-state" && f["node"] == node)
            .map(|f| f["message"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let a = node_says("gpu-a");
    assert!(
        a.len() == 1
            && a[0].contains("state: drain-required; skip label: not set")
            && a[0].contains("drain refuses"),
        "{a:?}"
    );
    let b = node_says("gpu-b");
    assert!(
        b.len() == 1
            && b[0].contains("state: upgrade-done; skip label: true")
            && b[0].contains("leaves this node's driver alone"),
        "{b:?}"
    );
    assert!(node_says("cpu-c").is_empty());
    let calls = std::fs::read_to_string(dir.path().join("calls")).expect("calls");
    assert!(
        calls.contains("get nodes -o json --request-timeout=30s --context=prod"),
        "{calls}"
    );
    assert!(
        calls.contains(
            "get clusterpolicies.nvidia.com -o json --request-timeout=30s --context=prod"
        ),
        "{calls}"
    );
    assert!(
        calls.contains("get gpuclusters.nvidia.com -o json"),
        "{calls}"
    );
    assert!(calls.contains("get configmaps --all-namespaces --field-selector=metadata.name=kernel-module-params -o json"), "{calls}");
    // The operator's release, read from its Deployment, chose the CRDs: v25.10 lacks a field
    // of the (v26.7.0) sample.
    assert!(
        calls.contains(
            "get deployments --all-namespaces -l app.kubernetes.io/component=gpu-operator -o json"
        ),
        "{calls}"
    );
    let version = findings
        .iter()
        .find(|f| f["code"] == "gpu-operator-version")
        .expect("version note");
    assert!(
        version["message"]
            .as_str()
            .unwrap_or("")
            .contains("is v25.10.0 (Deployment/gpu-operator in the cluster, its app.kubernetes.io/version label)"),
        "{version}"
    );
    assert!(
        findings
            .iter()
            .any(|f| f["code"] == "field-not-in-operator-version"
                && f["path"] == "spec.vgpuManager.kernelModuleConfig"
                && f["message"].as_str().unwrap_or("").contains("v25.10.1"))
    );
}

#[test]
fn a_failing_kubectl_is_an_error_never_an_empty_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = kubectl_stand_in(
        dir.path(),
        Some(
            "The connection to the server 10.0.0.1:6443 was refused - did you specify the right host or port?",
        ),
    );
    let out = gpufleet(&["policy", "check", "--kubectl", "--kubectl-bin"], &[&bin]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("was refused") && err.contains("clusterpolicies.nvidia.com"),
        "{err}"
    );

    let out = gpufleet(
        &["policy", "check", "--kubectl", "--kubectl-bin"],
        &[&dir.path().join("no-such-kubectl")],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run"));
}

/// A real snapshot of a fixture node (`gpufleet snapshot --root`, as tests/fixture_nodes.rs
/// takes them), written to `dir`.
fn snapshot_of(dir: &Path, fixture_dir: &str) -> PathBuf {
    let node = fixture(fixture_dir);
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
    let p = dir.join(format!("{}.json", fixture_dir.replace('/', "_")));
    std::fs::write(&p, &out.stdout).expect("write");
    p
}

#[test]
fn against_a_snapshot_shows_where_policy_and_nodes_disagree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = temp_file(
        &dir,
        "policy.yaml",
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: cluster-policy\nspec:\n  driver:\n    kernelModuleType: open\n---\napiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-nvidia-tuning\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: 3.4.0\n    storage:\n      files:\n        - path: /etc/modprobe.d/nvidia-tuning.conf\n          mode: 420\n          contents:\n            source: data:,options%20nvidia%20NVreg_EnableResizableBar%3D1\n",
    );
    let v100 = snapshot_of(dir.path(), "nodes/v100-proprietary-535-k5.4-peermem");
    let a100 = snapshot_of(dir.path(), "nodes/a100-proprietary-535-k5.15-peermem");
    let drift = snapshot_of(dir.path(), "nodes-v2/h100nvl-open-575-param-drift");
    let out = gpufleet(
        &["policy", "check", "--format", "json", "--against"],
        &[
            &v100,
            Path::new("--against"),
            &a100,
            Path::new("--against"),
            &drift,
            &policy,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    let got: Vec<(String, u64, String)> = doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["node"].is_string() && f["severity"] != "info")
        .map(|f| {
            (
                f["node"].as_str().expect("node").to_string(),
                f["line"].as_u64().expect("line"),
                f["code"].as_str().expect("code").to_string(),
            )
        })
        .collect();
    let want = |n: &str, l: u64, c: &str| (n.to_string(), l, c.to_string());
    assert_eq!(
        got,
        vec![
            want(
                "v100-proprietary-535-k5.4-peermem",
                7,
                "node-pre-turing-under-open"
            ),
            want(
                "v100-proprietary-535-k5.4-peermem",
                7,
                "node-module-differs-from-policy"
            ),
            want(
                "v100-proprietary-535-k5.4-peermem",
                6,
                "node-peermem-under-policy"
            ),
            want(
                "a100-proprietary-535-k5.15-peermem",
                7,
                "node-module-differs-from-policy"
            ),
            want(
                "a100-proprietary-535-k5.15-peermem",
                6,
                "node-peermem-under-policy"
            ),
            want("inf-h100nvl-21", 24, "module-param-not-applied"),
        ]
    );
    // A snapshot that is not one: exit 2, never an empty fleet.
    let bad = temp_file(&dir, "bad.json", "{\"nodes\": \"none\"}");
    let out = gpufleet(&["policy", "check", "--against"], &[&bad, &policy]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.json"));
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

#[test]
fn generate_writes_a_patch_that_checks_clean_and_validates_on_a_real_clusterpolicy() {
    use gpufleet::policy::{schema, schemas};
    use gpufleet::yaml;
    let dir = tempfile::tempdir().expect("tempdir");
    let a100 = snapshot_of(dir.path(), "nodes/a100-proprietary-535-k5.15-peermem");
    let drift = snapshot_of(dir.path(), "nodes-v2/h100nvl-open-575-param-drift");
    let out = gpufleet(
        &["policy", "generate", "--for"],
        &[&a100, Path::new("--for"), &drift],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let patch = temp_file(&dir, "patch.yaml", &text);
    // policy check: no warning or error on it.
    let (code, findings) = check_json(&[&patch]);
    assert_eq!(serious(&findings), vec![]);
    assert_eq!(code, 0);
    let docs = yaml::parse_stream(&text).expect("yaml");
    let cp = docs[0].to_json();
    assert_eq!(cp["spec"]["driver"]["kernelModuleType"], "open");
    assert_eq!(cp["spec"]["driver"]["rdma"]["enabled"], false);
    assert!(cp["spec"]["driver"].get("useOpenKernelModules").is_none());
    // The drift node's host parameters stay out: the A100 does not set them, and one is not in
    // effect on the drift node (each said per node); the ignored opt-in is said too.
    assert_eq!(docs.len(), 1, "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("NVreg_DynamicPowerManagement left out: a100-proprietary-535-k5.15-peermem: not configured"), "{err}");
    assert!(err.contains("NVreg_EnableResizableBar left out"), "{err}");
    assert!(err.contains("OpenRmEnableUnsupportedGpus=1"), "{err}");
    // Merged onto the GPU Operator's own sample, the result validates with every required field.
    let sample = std::fs::read_to_string(fixture("k8s/gpu-operator-sample-clusterpolicy.yaml"))
        .expect("sample");
    let mut full = yaml::parse_stream(&sample).expect("sample yaml")[0].to_json();
    merge_patch(&mut full, &cp);
    let crds = schemas::crds().expect("crds");
    let (crd, _) = crds
        .iter()
        .find(|(c, _)| c.kind == "ClusterPolicy")
        .expect("crd");
    let s = &crd.versions[0].1;
    let issues = schema::validate(
        s,
        s,
        &yaml::Node::from_json(&full),
        schema::Dialect::Crd,
        "",
    );
    assert_eq!(issues, vec![]);
    // The same check fails on a broken patch (the validation can fail).
    full["spec"]["driver"]["kernelModuleType"] = Value::from("closed");
    full["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("toolkit");
    let issues = schema::validate(
        s,
        s,
        &yaml::Node::from_json(&full),
        schema::Dialect::Crd,
        "",
    );
    assert_eq!(issues.len(), 2, "{issues:#?}");
}

#[test]
fn generate_without_parameters_writes_no_configmap_and_names_pre_turing_nodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a100 = snapshot_of(dir.path(), "nodes/a100-proprietary-535-k5.15-peermem");
    let out = gpufleet(&["policy", "generate", "--for"], &[&a100]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("kind: ConfigMap"), "{text}");
    assert!(!text.contains("kernelModuleConfig:"), "{text}");
    assert!(text.contains("No MachineConfig is needed"), "{text}");

    let v100 = snapshot_of(dir.path(), "nodes/v100-proprietary-535-k5.4-peermem");
    let out = gpufleet(&["policy", "generate", "--for"], &[&v100]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("v100-proprietary-535-k5.4-peermem") && err.contains("pre-Turing"),
        "{err}"
    );
}
