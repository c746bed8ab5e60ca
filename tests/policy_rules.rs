//! `gpufleet policy check`, rule by rule: the Ignition versions the Machine Config Operator
//! reads, driver settings a disabled driver makes moot, and the GPU Operator controllers' own
//! refusals. The documents are tests/fixtures/policy-rules (its README says what each is built
//! from and the findings a correct check reports); variants are written to a temporary folder.

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

fn rule(name: &str) -> PathBuf {
    fixture(&format!("policy-rules/{name}"))
}

fn gpufleet(args: &[&str], files: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .args(files)
        .env_remove("GPUFLEET_CONFIG")
        .output()
        .expect("run gpufleet")
}

/// `policy check --format json`: (exit code, findings).
fn check(files: &[&Path]) -> (i32, Vec<Value>) {
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

/// (file name, line, severity, code) of every finding, or of those not `info`.
fn rows(findings: &[Value], with_info: bool) -> Vec<(String, u64, String, String)> {
    findings
        .iter()
        .filter(|f| with_info || f["severity"] != "info")
        .map(|f| {
            (
                Path::new(f["file"].as_str().expect("file"))
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned(),
                f["line"].as_u64().unwrap_or(0),
                f["severity"].as_str().expect("severity").to_string(),
                f["code"].as_str().expect("code").to_string(),
            )
        })
        .collect()
}

fn row(file: &str, line: u64, sev: &str, code: &str) -> (String, u64, String, String) {
    (file.into(), line, sev.into(), code.into())
}

fn find<'a>(findings: &'a [Value], code: &str) -> &'a Value {
    findings
        .iter()
        .find(|f| f["code"] == code)
        .unwrap_or_else(|| panic!("{code} missing in {findings:#?}"))
}

fn temp(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write");
    p
}

/// A fixture with `from` replaced by `to` (which must occur), written to `dir`.
fn variant(dir: &tempfile::TempDir, name: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(rule(name)).expect("fixture");
    assert!(text.contains(from), "{from:?} not in {name}");
    temp(dir, &format!("v-{name}"), &text.replacen(from, to, 1))
}

fn machine_config(version: &str, file: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-worker-x\n  labels:\n    machineconfiguration.openshift.io/role: worker\nspec:\n  config:\n    ignition:\n      version: {version}\n    storage:\n      files:\n{file}"
    )
}

#[test]
fn ignition_2_2_and_3_0_to_3_5_are_read_as_the_machine_config_operator_reads_them() {
    // Spec 2.2.0: parsed and converted by the MCO, checked against its own schema.
    let (code, findings) = check(&[&rule("ign22-machineconfig.yaml")]);
    assert_eq!(code, 0, "{findings:#?}");
    assert_eq!(
        rows(&findings, true),
        vec![row(
            "ign22-machineconfig.yaml",
            12,
            "info",
            "ignition-spec-2-converted"
        )]
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = "        - path: /etc/modprobe.d/blacklist-nouveau.conf\n          mode: 420\n          overwrite: true\n          contents:\n            source: data:,blacklist%20nouveau%0A\n";
    for v in ["3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0"] {
        let p = temp(&dir, &format!("mc-{v}.yaml"), &machine_config(v, file));
        let (code, findings) = check(&[&p]);
        assert_eq!((code, rows(&findings, true)), (0, vec![]), "{v}");
    }
    // What the MCO refuses ("unknown version" / "invalid version"): an error at the line.
    for v in ["3.6.0", "3.4", "2.3.0", "3.5.0-experimental", "\"\""] {
        let p = temp(&dir, "mc-bad.yaml", &machine_config(v, file));
        let (code, findings) = check(&[&p]);
        assert_eq!(code, 1, "{v}");
        assert_eq!(
            rows(&findings, false),
            vec![row(
                "mc-bad.yaml",
                10,
                "error",
                "ignition-version-unsupported"
            )],
            "{v}"
        );
    }
    // The 2.2 and 3.x schemas build a file from `allOf` (node + file fields): a key neither
    // defines is found at its own line, a missing `path` is an error Ignition refuses.
    let typo = "        - filesystem: root\n          path: /etc/x.conf\n          contents:\n            sorce: data:,x\n";
    let p = temp(&dir, "mc-typo.yaml", &machine_config("2.2.0", typo));
    let (_, findings) = check(&[&p]);
    assert_eq!(
        rows(&findings, false),
        vec![row("mc-typo.yaml", 16, "warning", "schema-unknown-field")]
    );
    assert!(
        find(&findings, "schema-unknown-field")["message"]
            .as_str()
            .expect("message")
            .contains("did you mean `source`"),
        "{findings:#?}"
    );
    // Spec 2 entries name their filesystem, and the MCO's conversion knows only root.
    for (fs, want) in [("", 13), ("          filesystem: oem\n", 14)] {
        let entry = format!("        - path: /etc/x.conf\n{fs}          mode: 420\n");
        let p = temp(&dir, "mc-fs.yaml", &machine_config("2.2.0", &entry));
        let (code, findings) = check(&[&p]);
        assert_eq!(code, 1);
        assert_eq!(
            rows(&findings, false),
            vec![row(
                "mc-fs.yaml",
                want,
                "error",
                "ignition-spec-2-filesystem"
            )],
            "{fs:?}"
        );
    }
    // Modes with setuid / setgid / sticky bits: the MCO refuses them (0o4755 = 2541, 04755).
    for mode in ["2541", "04755"] {
        let entry = format!("        - path: /etc/x.conf\n          mode: {mode}\n");
        let p = temp(&dir, "mc-mode.yaml", &machine_config("3.4.0", &entry));
        let (_, findings) = check(&[&p]);
        assert_eq!(
            rows(&findings, false),
            vec![row("mc-mode.yaml", 14, "error", "file-mode-special-bits")],
            "{mode}"
        );
    }
    let no_path = "        - mode: 420\n          contents:\n            source: data:,x\n";
    let p = temp(&dir, "mc-nopath.yaml", &machine_config("3.5.0", no_path));
    let (code, findings) = check(&[&p]);
    assert_eq!(code, 1);
    assert_eq!(
        rows(&findings, false),
        vec![row("mc-nopath.yaml", 13, "error", "ignition-required")]
    );
}

/// A real snapshot of a fixture node (`gpufleet snapshot --root`), written to `dir`.
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
    let p = dir.join("snapshot.json");
    std::fs::write(&p, &out.stdout).expect("write");
    p
}

#[test]
fn a_disabled_driver_makes_every_driver_rule_moot_with_one_info() {
    let f = rule("clusterpolicy-driver-disabled.yaml");
    let (code, findings) = check(&[&f]);
    assert_eq!(code, 0, "{findings:#?}");
    // rdma.enabled true, useOpenKernelModules and a 470 version: none of them is a finding.
    assert_eq!(
        rows(&findings, true),
        vec![
            row(
                "clusterpolicy-driver-disabled.yaml",
                7,
                "info",
                "schema-required"
            ),
            row(
                "clusterpolicy-driver-disabled.yaml",
                9,
                "info",
                "driver-settings-moot"
            ),
        ]
    );
    // Nodes are not compared with settings that have no effect.
    let dir = tempfile::tempdir().expect("tempdir");
    let v100 = snapshot_of(dir.path(), "nodes/v100-proprietary-535-k5.4-peermem");
    let (code, findings) = check(&[Path::new("--against"), &v100, &f]);
    assert_eq!(code, 0, "{findings:#?}");
    assert!(
        findings.iter().all(|f| f["node"].is_null()),
        "{findings:#?}"
    );
    // The same file with the driver enabled: the rules fire (the test can fail).
    let on = variant(
        &dir,
        "clusterpolicy-driver-disabled.yaml",
        "enabled: false",
        "enabled: true",
    );
    let (code, findings) = check(&[&on]);
    assert_eq!(code, 1);
    let codes: Vec<String> = rows(&findings, false).into_iter().map(|r| r.3).collect();
    assert_eq!(
        codes,
        vec![
            "use-open-kernel-modules-ignored",
            "rdma-enabled-legacy-peermem"
        ]
    );
}

#[test]
fn use_nvidia_driver_crd_moves_the_driver_to_nvidiadriver_objects() {
    let cp = fixture("k8s/gpu-operator-sample-clusterpolicy.yaml");
    let nd = fixture("k8s/gpu-operator-sample-nvidiadriver.yaml");
    // The samples alone are clean; together, the ClusterPolicy (useNvidiaDriverCRD: false)
    // leaves the NVIDIADriver Disabled.
    for f in [&cp, &nd] {
        let (code, findings) = check(&[f]);
        assert_eq!((code, rows(&findings, false)), (0, vec![]), "{f:?}");
    }
    let (code, findings) = check(&[&cp, &nd]);
    assert_eq!(code, 1);
    assert_eq!(
        rows(&findings, false),
        vec![row(
            "gpu-operator-sample-nvidiadriver.yaml",
            5,
            "warning",
            "nvidiadriver-disabled"
        )]
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(&cp).expect("sample");
    let on = temp(
        &dir,
        "cp-crd.yaml",
        &text.replacen("useNvidiaDriverCRD: false", "useNvidiaDriverCRD: true", 1),
    );
    let (code, findings) = check(&[&on, &nd]);
    assert_eq!(code, 0, "{findings:#?}");
    let moot = find(&findings, "driver-settings-moot");
    assert_eq!(moot["line"], 67);
    assert!(
        moot["message"]
            .as_str()
            .expect("message")
            .contains("NVIDIADriver objects manage the driver")
    );
}

#[test]
fn a_470_driver_under_auto_is_info_not_a_warning() {
    let (code, findings) = check(&[&rule("clusterpolicy-470-auto.yaml")]);
    assert_eq!(code, 0, "{findings:#?}");
    let f = find(&findings, "kernel-module-type-auto-unsupported");
    assert_eq!(
        (f["severity"].as_str(), f["line"].as_u64()),
        (Some("info"), Some(8))
    );
    assert!(
        f["message"]
            .as_str()
            .expect("message")
            .contains("proprietary is the only outcome")
    );
    // A 560 driver (which has open modules) under auto stays a warning.
    let dir = tempfile::tempdir().expect("tempdir");
    let v560 = variant(
        &dir,
        "clusterpolicy-470-auto.yaml",
        "470.256.02",
        "560.35.03",
    );
    let (code, findings) = check(&[&v560]);
    assert_eq!(code, 1);
    assert_eq!(
        find(&findings, "kernel-module-type-auto-unsupported")["severity"],
        "warning"
    );
}

#[test]
fn an_options_line_in_nvidia_conf_is_a_warning_that_says_the_module_still_loads() {
    let (code, findings) = check(&[&rule("configmap-options-line.yaml")]);
    assert_eq!(code, 1);
    assert_eq!(
        rows(&findings, true),
        vec![row(
            "configmap-options-line.yaml",
            10,
            "warning",
            "module-config-syntax"
        )]
    );
    let msg = findings[0]["message"].as_str().expect("message");
    assert!(
        msg.contains("ignores the unknown ones (`options`, `nvidia`)")
            && msg.contains("still loads")
            && !msg.contains("breaks"),
        "{msg}"
    );
}

#[test]
fn precompiled_drivers_with_gds_or_gdrcopy_are_refused() {
    let (code, findings) = check(&[&rule("nvidiadriver-precompiled-gds.yaml")]);
    assert_eq!(code, 1);
    assert_eq!(
        rows(&findings, false),
        vec![row(
            "nvidiadriver-precompiled-gds.yaml",
            10,
            "error",
            "precompiled-with-gds-gdrcopy"
        )]
    );
    let f = &findings
        .iter()
        .find(|f| f["severity"] == "error")
        .expect("error");
    assert!(
        f["source"]
            .as_str()
            .expect("source")
            .contains("controllers/nvidiadriver_controller.go")
    );
    let (code, findings) = check(&[&rule("clusterpolicy-precompiled-gdrcopy.yaml")]);
    assert_eq!(code, 1);
    let f = find(&findings, "precompiled-with-gds-gdrcopy");
    assert_eq!(f["line"], 7);
    assert!(
        f["source"]
            .as_str()
            .expect("source")
            .contains("controllers/object_controls.go")
    );
    // Built from source (usePrecompiled false), the same GDS / GDRCopy settings are fine.
    let dir = tempfile::tempdir().expect("tempdir");
    let built = variant(
        &dir,
        "nvidiadriver-precompiled-gds.yaml",
        "usePrecompiled: true",
        "usePrecompiled: false",
    );
    let (code, findings) = check(&[&built]);
    assert_eq!((code, rows(&findings, false)), (0, vec![]));
}

#[test]
fn gds_2_17_5_and_later_without_open_modules_is_refused() {
    let (code, findings) = check(&[&rule("nvidiadriver-gds-proprietary.yaml")]);
    assert_eq!(code, 1);
    assert_eq!(
        rows(&findings, false),
        vec![row(
            "nvidiadriver-gds-proprietary.yaml",
            12,
            "error",
            "gds-needs-open-modules"
        )]
    );
    let dir = tempfile::tempdir().expect("tempdir");
    for (from, to, refused) in [
        (
            "kernelModuleType: proprietary",
            "kernelModuleType: open",
            false,
        ),
        ("\"2.20.5\"", "\"2.17.4\"", false),
        ("\"2.20.5\"", "\"2.17.5\"", true),
        // The CRD's default is auto, which the controller's check (== open) refuses too.
        ("  kernelModuleType: proprietary\n", "", true),
    ] {
        let p = variant(&dir, "nvidiadriver-gds-proprietary.yaml", from, to);
        let (_, findings) = check(&[&p]);
        let got = findings
            .iter()
            .any(|f| f["code"] == "gds-needs-open-modules");
        assert_eq!(got, refused, "{from} -> {to}: {findings:#?}");
    }
}

#[test]
fn nvidiadrivers_selecting_the_same_nodes_across_documents_are_refused() {
    let a = rule("nvidiadriver-pool-a.yaml");
    let copy = rule("nvidiadriver-pool-a-copy.yaml");
    let b = rule("nvidiadriver-pool-b.yaml");
    let (code, findings) = check(&[&a, &copy, &b]);
    assert_eq!(code, 1);
    assert_eq!(
        rows(&findings, false),
        vec![row(
            "nvidiadriver-pool-a-copy.yaml",
            11,
            "error",
            "nvidiadriver-selectors-overlap"
        )]
    );
    let msg = findings
        .iter()
        .find(|f| f["code"] == "nvidiadriver-selectors-overlap")
        .expect("overlap")["message"]
        .as_str()
        .expect("message");
    assert!(
        msg.contains("nvidiadriver-pool-a.yaml:10") && msg.contains("ConflictingNodeSelector"),
        "{msg}"
    );
    // The same object (one name) in two files: the later is applied, no conflict with itself.
    let dir0 = tempfile::tempdir().expect("tempdir");
    let same = variant(
        &dir0,
        "nvidiadriver-pool-a-copy.yaml",
        "name: pool-a-copy",
        "name: pool-a",
    );
    let (code, findings) = check(&[&a, &same]);
    assert_eq!((code, rows(&findings, false)), (0, vec![]));
    // Pools a and b: different values of one label, no node matches both.
    let (code, findings) = check(&[&a, &b]);
    assert_eq!((code, rows(&findings, false)), (0, vec![]));
    // No nodeSelector selects nvidia.com/gpu.present=true: a pool=b node may carry both.
    let dir = tempfile::tempdir().expect("tempdir");
    let all = temp(
        &dir,
        "all.yaml",
        &std::fs::read_to_string(&b)
            .expect("b")
            .replacen("name: pool-b", "name: all-gpus", 1)
            .replacen("  nodeSelector:\n    pool: b\n", "", 1),
    );
    let (_, findings) = check(&[&all, &b]);
    assert_eq!(
        rows(&findings, false),
        vec![row(
            "nvidiadriver-pool-b.yaml",
            10,
            "warning",
            "nvidiadriver-selectors-overlap"
        )]
    );
    // Two defaults; a default with a nodeSelector.
    let d1 = variant(
        &dir,
        "nvidiadriver-pool-a.yaml",
        "  driverType: gpu\n",
        "  default: true\n  driverType: gpu\n",
    );
    let d2 = temp(
        &dir,
        "d2.yaml",
        &std::fs::read_to_string(&b)
            .expect("b")
            .replacen(
                "  driverType: gpu\n",
                "  default: true\n  driverType: gpu\n",
                1,
            )
            .replacen("  nodeSelector:\n    pool: b\n", "", 1),
    );
    let (_, findings) = check(&[&d1, &d2]);
    let got = rows(&findings, false);
    for want in [
        row(
            "v-nvidiadriver-pool-a.yaml",
            6,
            "error",
            "nvidiadriver-multiple-defaults",
        ),
        row("d2.yaml", 6, "error", "nvidiadriver-multiple-defaults"),
        row(
            "v-nvidiadriver-pool-a.yaml",
            11,
            "error",
            "nvidiadriver-node-selector-refused",
        ),
    ] {
        assert!(got.contains(&want), "{want:?} missing in {got:#?}");
    }
}

#[test]
fn a_max_unavailable_the_upgrade_controller_cannot_parse_is_an_error() {
    let (code, findings) = check(&[&rule("nvidiadriver-upgrade-unparsable.yaml")]);
    assert_eq!(code, 1);
    assert_eq!(
        rows(&findings, false),
        vec![row(
            "nvidiadriver-upgrade-unparsable.yaml",
            15,
            "error",
            "upgrade-max-unavailable-unparsable"
        )]
    );
    let f = find(&findings, "upgrade-max-unavailable-unparsable");
    assert!(
        f["source"]
            .as_str()
            .expect("source")
            .contains("controllers/upgrade_controller.go")
    );
    let dir = tempfile::tempdir().expect("tempdir");
    for (to, want) in [
        ("\"25%\"", None),
        ("2", None),
        ("\"2\"", Some("error")),
        ("\"2.5%\"", Some("error")),
    ] {
        let p = variant(
            &dir,
            "nvidiadriver-upgrade-unparsable.yaml",
            "\"25 percent\"",
            to,
        );
        let (_, findings) = check(&[&p]);
        let got = findings
            .iter()
            .find(|f| f["code"] == "upgrade-max-unavailable-unparsable")
            .map(|f| f["severity"].as_str().expect("severity").to_string());
        assert_eq!(got.as_deref(), want, "{to}");
    }
    // With autoUpgrade off the value is not used yet: a warning.
    let off = variant(
        &dir,
        "nvidiadriver-upgrade-unparsable.yaml",
        "autoUpgrade: true",
        "autoUpgrade: false",
    );
    let (_, findings) = check(&[&off]);
    assert_eq!(
        find(&findings, "upgrade-max-unavailable-unparsable")["severity"],
        "warning"
    );
}

#[test]
fn an_all_at_once_rollout_with_forced_deletion_is_a_warning() {
    let (code, findings) = check(&[&rule("clusterpolicy-all-at-once.yaml")]);
    assert_eq!(code, 1);
    assert_eq!(
        rows(&findings, false),
        vec![
            row(
                "clusterpolicy-all-at-once.yaml",
                11,
                "warning",
                "upgrade-all-at-once"
            ),
            row(
                "clusterpolicy-all-at-once.yaml",
                16,
                "warning",
                "upgrade-forced-pod-deletion"
            ),
        ]
    );
    let dir = tempfile::tempdir().expect("tempdir");
    // One node at a time, no force: nothing to say.
    let calm = temp(
        &dir,
        "calm.yaml",
        &std::fs::read_to_string(rule("clusterpolicy-all-at-once.yaml"))
            .expect("fixture")
            .replacen("maxParallelUpgrades: 0", "maxParallelUpgrades: 1", 1)
            .replacen("force: true", "force: false", 1),
    );
    let (code, findings) = check(&[&calm]);
    assert_eq!((code, rows(&findings, false)), (0, vec![]));
    // The upgrade controller off (the ClusterPolicy default): the settings are not used.
    let off = variant(
        &dir,
        "clusterpolicy-all-at-once.yaml",
        "autoUpgrade: true",
        "autoUpgrade: false",
    );
    let (code, findings) = check(&[&off]);
    assert_eq!((code, rows(&findings, false)), (0, vec![]));
}

#[test]
fn gzip_and_base64_contents_are_decoded_within_a_bound() {
    let (_, findings) = check(&[&rule("machineconfig-gzip.yaml")]);
    let got = rows(&findings, true);
    for want in [
        row(
            "machineconfig-gzip.yaml",
            18,
            "warning",
            "open-rm-enable-unsupported-gpus-ignored",
        ),
        row(
            "machineconfig-gzip.yaml",
            18,
            "warning",
            "machineconfig-loads-peermem",
        ),
        row(
            "machineconfig-gzip.yaml",
            23,
            "info",
            "machineconfig-contents-not-read",
        ),
    ] {
        assert!(got.contains(&want), "{want:?} missing in {got:#?}");
    }
    // A gzip bomb: 64 MiB of zeros in 64 KiB stops at the 1 MiB bound, said, not read.
    use base64ct::Encoding;
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![0u8; 64 << 20]).expect("gzip");
    let bomb = gz.finish().expect("gzip");
    let b64 = base64ct::Base64::encode_string(&bomb);
    let file = format!(
        "        - path: /etc/modprobe.d/nvidia.conf\n          mode: 420\n          contents:\n            compression: gzip\n            source: data:;base64,{b64}\n"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let p = temp(&dir, "bomb.yaml", &machine_config("3.4.0", &file));
    let (_, findings) = check(&[&p]);
    let f = find(&findings, "machineconfig-contents-not-read");
    assert_eq!(f["line"], 17);
    assert!(
        f["message"]
            .as_str()
            .expect("message")
            .contains("larger than 1024 KiB"),
        "{f}"
    );
}

#[test]
fn gpucluster_is_checked_against_its_crd() {
    // The GPU Operator's own sample sets hostPaths.rootFS, which the GPUCluster CRD does not
    // have (api/nvidia/v1alpha1/gpucluster_types.go: "it has no RootFS"): the API server drops it.
    let (code, findings) = check(&[&fixture("k8s/gpu-operator-sample-gpucluster.yaml")]);
    assert_eq!(code, 1);
    assert_eq!(
        rows(&findings, true),
        vec![row(
            "gpu-operator-sample-gpucluster.yaml",
            71,
            "warning",
            "schema-unknown-field"
        )]
    );
    assert!(
        find(&findings, "schema-unknown-field")["source"]
            .as_str()
            .expect("source")
            .contains("nvidia.com_gpuclusters.yaml")
    );
}

#[test]
fn operator_version_says_which_fields_that_release_drops() {
    let dir = tempfile::tempdir().expect("tempdir");
    // spec.default and spec.upgradePolicy came with v26.7.0.
    let nd = temp(
        &dir,
        "nd.yaml",
        "apiVersion: nvidia.com/v1alpha1\nkind: NVIDIADriver\nmetadata:\n  name: canary\nspec:\n  driverType: gpu\n  image: driver\n  kernelModuleType: open\n  default: false\n  upgradePolicy:\n    autoUpgrade: true\n  bogus: 1\n",
    );
    let versioned = |v: &str, files: &[&Path]| {
        let mut args = vec!["--operator-version", v];
        args.extend(files.iter().map(|f| f.to_str().expect("utf-8 path")));
        let args: Vec<&Path> = args.iter().map(Path::new).collect();
        check(&args)
    };
    // An upgradePolicy the release prunes is not judged (maxParallelUpgrades 0 with 100%).
    let text = std::fs::read_to_string(&nd).expect("nd");
    std::fs::write(
        &nd,
        text.replacen(
            "autoUpgrade: true\n",
            "autoUpgrade: true\n    maxParallelUpgrades: 0\n    maxUnavailable: 100%\n",
            1,
        )
        .replacen("  bogus: 1\n", "", 1)
            + "  bogus: 1\n",
    )
    .expect("write");
    let (_, findings) = check(&[&nd]);
    assert!(findings.iter().any(|f| f["code"] == "upgrade-all-at-once"));
    for v in ["26.3", "v25.10.1", "v25.3"] {
        let (code, findings) = versioned(v, &[&nd]);
        assert_eq!(code, 1);
        assert_eq!(
            rows(&findings, false),
            vec![
                row("nd.yaml", 9, "warning", "field-not-in-operator-version"),
                row("nd.yaml", 10, "warning", "field-not-in-operator-version"),
                row("nd.yaml", 14, "warning", "schema-unknown-field"),
            ],
            "{v}"
        );
        let msg = find(&findings, "field-not-in-operator-version")["message"]
            .as_str()
            .expect("message");
        assert!(msg.contains("it comes with v26.7.0"), "{msg}");
    }
    // The newest release (the default) has both fields: only the typo is left.
    for args in [vec![], vec!["--operator-version", "26.7"]] {
        let mut a: Vec<&Path> = args.iter().map(Path::new).collect();
        a.push(&nd);
        let (_, findings) = check(&a);
        assert_eq!(
            rows(&findings, false),
            vec![
                row("nd.yaml", 12, "warning", "upgrade-all-at-once"),
                row("nd.yaml", 14, "warning", "schema-unknown-field")
            ]
        );
    }
    // GPUCluster exists from v26.7.0.
    let gc = fixture("k8s/gpu-operator-sample-gpucluster.yaml");
    let (_, findings) = versioned("26.3", &[&gc]);
    assert_eq!(
        rows(&findings, true),
        vec![row(
            "gpu-operator-sample-gpucluster.yaml",
            2,
            "error",
            "kind-not-in-operator-version"
        )]
    );
    // The guide's ClusterPolicy uses fields every committed release has: the same findings.
    let guide = fixture("policy/guide-clusterpolicy.yaml");
    let (_, newest) = check(&[&guide]);
    let (_, old) = versioned("25.3", &[&guide]);
    assert_eq!(rows(&old, true), rows(&newest, true));
    // A release gpufleet has no CRDs for: a usage error, exit 2, the known ones listed.
    let out = gpufleet(
        &["policy", "check", "--operator-version", "24.9"],
        &[&guide],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("25.3, 25.10, 26.3, 26.7"), "{err}");
}
