//! The MachineConfig rules of `policy check`: the role label and its pool, the Ignition version
//! (read as the Machine Config Operator reads it) and its config schema, and the module files a
//! MachineConfig writes (docs/domain.md, "Policy check").

use super::rules::schema_findings;
use super::*;

pub(super) fn machine_config_rules(
    doc: &Doc,
    pools: &[&Doc],
    skip: &[String],
    out: &mut Vec<Finding>,
) -> Result<(), String> {
    // Role label and pool.
    let labels = doc.node.at("metadata.labels");
    let role_entry = labels.and_then(|l| l.entry("machineconfiguration.openshift.io/role"));
    match role_entry.and_then(|(k, v)| v.as_str().map(|s| (k, s))) {
        None => out.push(doc.at_lines(
            doc.node.entry("metadata").map_or(doc.node.line, |(k, _)| k.line),
            0,
            "metadata.labels",
            Severity::Error,
            "machineconfig-role-missing",
            "no `machineconfiguration.openshift.io/role` label: no MachineConfigPool selects this MachineConfig, so it applies to no node".into(),
            src::MCO,
        )),
        Some((k, role)) => {
            let selected = pools.iter().any(|p| pool_selects(&p.node, role));
            if !selected && !matches!(role, "master" | "worker") {
                let msg = if pools.is_empty() {
                    format!(
                        "role `{role}` only takes effect with a MachineConfigPool that selects it (`oc get mcp {role}`); none was given"
                    )
                } else {
                    format!(
                        "role `{role}`: none of the MachineConfigPools given selects it, so it applies to no node"
                    )
                };
                out.push(doc.at_lines(
                    k.line,
                    k.line,
                    "metadata.labels.machineconfiguration.openshift.io/role",
                    Severity::Warning,
                    "machineconfig-pool-not-given",
                    msg,
                    src::MCO,
                ));
            }
        }
    }
    // Ignition version and config schema, as the Machine Config Operator reads them.
    let config = doc.node.at("spec.config");
    let version_entry = config
        .and_then(|c| c.get("ignition"))
        .and_then(|i| i.entry("version"));
    let version = version_entry.and_then(|(_, v)| v.as_str());
    let mut spec = None;
    match (config, version_entry, version) {
        (None, _, _) => {}
        (Some(c), None, _) => out.push(doc.at(
            c.get("ignition").unwrap_or(c),
            "spec.config.ignition.version",
            Severity::Error,
            "ignition-version-missing",
            "spec.config has no `ignition.version` (a string such as \"3.4.0\"): the Machine Config Operator cannot read the config".into(),
            src::MCO_IGNITION,
        )),
        (Some(c), Some((k, vn)), v) => {
            let v = v.unwrap_or("");
            let shown = vn.display();
            let at = |sev, code, message: String| {
                doc.at_lines(k.line, vn.end_line, "spec.config.ignition.version", sev, code, message, src::MCO_IGNITION)
            };
            let known: Vec<&str> = schemas::ignition_versions().collect();
            match v {
                "2.0.0" | "2.1.0" | "2.2.0" => {
                    let checked = if v == "2.2.0" {
                        "checked against the 2.2.0 schema"
                    } else {
                        "its structure is not checked (no committed schema before 2.2.0)"
                    };
                    out.push(at(
                        Severity::Info,
                        "ignition-spec-2-converted",
                        format!(
                            "ignition.version {v} is Ignition spec 2: the Machine Config Operator parses it (up to 2.2.0) and converts it to spec 3; {checked}"
                        ),
                    ));
                    if v == "2.2.0" {
                        spec = Some("2.2.0");
                    }
                    spec2_filesystems(doc, c, out);
                }
                v if known.contains(&v) => spec = Some(v),
                _ => out.push(at(
                    Severity::Error,
                    "ignition-version-unsupported",
                    format!(
                        "ignition.version `{shown}`: the Machine Config Operator reads Ignition spec 3.0.0 to 3.5.0, and spec 2 up to 2.2.0 (converted to 3); it refuses this config (\"unknown version\")"
                    ),
                )),
            }
            if let Some(v) = spec {
                let ign = schemas::ignition(v)?
                    .ok_or_else(|| format!("built-in Ignition schema {v} missing"))?;
                let issues =
                    schema::validate(ign, ign, c, schema::Dialect::JsonSchema, "spec.config");
                schema_findings(doc, issues, schemas::ignition_source(v), skip, out);
            }
        }
    }
    // Files.
    let files = files_of(doc);
    let mut gpu_files: Vec<&FileText> = Vec::new();
    for f in &files {
        let fpath = format!("spec.config.storage.files[{}]", f.index);
        if let Some((k, v)) = &f.inline {
            out.push(doc.at_lines(
                k.line,
                v.end_line,
                &format!("{fpath}.contents.inline"),
                Severity::Error,
                "butane-inline",
                format!(
                    "`contents.inline` is Butane syntax, not Ignition: an Ignition file's contents are `contents.source` (a `data:` URL, e.g. `data:,options%20nvidia…`); as written {} gets no contents from it. Write the MachineConfig with Butane, or give `contents.source`",
                    f.path
                ),
                src::IGNITION,
            ));
        }
        if let Some(m) = f.entry.get("mode") {
            file_mode_rules(doc, m, &format!("{fpath}.mode"), out);
        }
        if let Some((src_node, why)) = &f.undecoded {
            out.push(doc.at(
                src_node,
                &format!("{fpath}.contents.source"),
                Severity::Info,
                "machineconfig-contents-not-read",
                format!("{}: {why}", f.path),
                src::IGNITION,
            ));
        }
        let modprobe = f.path.contains("/modprobe.d/");
        let modules_load = f.path.contains("/modules-load.d/");
        if !(modprobe || modules_load) {
            continue;
        }
        let text = f.text.as_deref().unwrap_or("");
        let gpu_related = text.contains("nvidia")
            || f.path.contains("nvidia")
            || f.path.contains("dma-buf")
            || f.path.contains("dma_buf")
            || text.contains("dma_buf")
            || text.contains("DMA-BUF");
        if gpu_related {
            gpu_files.push(f);
        }
        let Some(text) = &f.text else { continue };
        let line_of = |i: usize| f.first_line.map_or(f.fallback_line, |l| l + i);
        if modprobe {
            for (i, raw) in text.lines().enumerate() {
                let body = raw.split('#').next().unwrap_or("");
                let words: Vec<&str> = body.split_whitespace().collect();
                if words.first() == Some(&"options")
                    && words.get(1) == Some(&"nvidia")
                    && words
                        .iter()
                        .any(|w| w.starts_with("NVreg_OpenRmEnableUnsupportedGpus="))
                {
                    out.push(doc.at_lines(
                        line_of(i),
                        line_of(i),
                        &format!("{fpath}.contents"),
                        Severity::Warning,
                        "open-rm-enable-unsupported-gpus-ignored",
                        format!(
                            "`{}`: NVreg_OpenRmEnableUnsupportedGpus is ignored since driver 545.23.06 (the opt-in is no longer required; data-center GPUs never needed it); harmless, and not the way to choose open modules",
                            body.trim()
                        ),
                        src::OPT_IN,
                    ));
                }
                let loads_peermem = match words.first() {
                    Some(&"install") => words.iter().skip(2).any(|w| is_peermem(w)),
                    Some(&"softdep") => words.iter().skip(2).any(|w| is_peermem(w)),
                    _ => false,
                };
                if loads_peermem {
                    out.push(doc.at_lines(
                        line_of(i),
                        line_of(i),
                        &format!("{fpath}.contents"),
                        Severity::Warning,
                        "machineconfig-loads-peermem",
                        format!(
                            "`{}` loads the legacy nvidia-peermem; DMA-BUF GPUDirect RDMA does not use it",
                            body.trim()
                        ),
                        src::PEERMEM,
                    ));
                }
            }
        }
        if modules_load {
            let mut any = false;
            for (i, raw) in text.lines().enumerate() {
                let name = raw.trim();
                if name.is_empty() || name.starts_with('#') || name.starts_with(';') {
                    continue;
                }
                any = true;
                if is_peermem(name) {
                    out.push(doc.at_lines(
                        line_of(i),
                        line_of(i),
                        &format!("{fpath}.contents"),
                        Severity::Warning,
                        "machineconfig-loads-peermem",
                        format!(
                            "{} loads nvidia-peermem at boot: the legacy module DMA-BUF GPUDirect RDMA does not use",
                            f.path
                        ),
                        src::PEERMEM,
                    ));
                } else if matches!(name, "dma_buf" | "dma-buf" | "dmabuf") {
                    out.push(doc.at_lines(
                        line_of(i),
                        line_of(i),
                        &format!("{fpath}.contents"),
                        Severity::Warning,
                        "dma-buf-not-a-module",
                        format!(
                            "`{name}`: DMA-BUF is not a loadable module (CONFIG_DMA_SHARED_BUFFER is built in); systemd-modules-load fails on this line"
                        ),
                        src::DMABUF_BUILTIN,
                    ));
                }
            }
            if !any {
                out.push(doc.at_lines(
                    f.entry.line,
                    f.entry.end_line,
                    &fpath,
                    Severity::Warning,
                    "modules-load-file-empty",
                    format!(
                        "{} holds only comments: it loads nothing. DMA-BUF is not a loadable module (CONFIG_DMA_SHARED_BUFFER is built in), so the file is not needed",
                        f.path
                    ),
                    src::DMABUF_BUILTIN,
                ));
            }
        }
    }
    if let (Some(first), Some(last)) = (gpu_files.first(), gpu_files.last()) {
        let paths: Vec<&str> = gpu_files.iter().map(|f| f.path.as_str()).collect();
        out.push(doc.at_lines(
            first.entry.line,
            last.entry.end_line,
            "spec.config.storage.files",
            Severity::Warning,
            "machineconfig-not-for-operator-driver",
            format!(
                "{} are host files: they do not reach the GPU Operator's driver container, where the nvidia modules are loaded with the options of the `driver.kernelModuleConfig` ConfigMap. For open kernel modules + DMA-BUF under the GPU Operator no MachineConfig is needed (`driver.kernelModuleType: open`, `driver.rdma.enabled: false`)",
                paths.join(", ")
            ),
            src::MC_NOT_FOR_OPERATOR,
        ));
    }
    Ok(())
}

pub(super) fn file_mode_rules(doc: &Doc, m: &Node, path: &str, out: &mut Vec<Finding>) {
    let Value::Int(mode) = m.value else {
        return; // a type issue, reported by the schema check
    };
    let raw = m.raw.as_deref().unwrap_or("");
    let octal_literal =
        raw.len() > 1 && raw.starts_with('0') && raw.chars().all(|c| c.is_ascii_digit());
    if !(0..=0o7777).contains(&mode) {
        let hint = if raw.chars().all(|c| ('0'..='7').contains(&c)) {
            i64::from_str_radix(raw, 8)
                .ok()
                .map(|d| format!(" (for 0{raw} write {d})"))
                .unwrap_or_default()
        } else {
            String::new()
        };
        out.push(doc.at(
            m,
            path,
            Severity::Error,
            "file-mode-invalid",
            format!(
                "mode {raw} is not a permission mode (at most 07777 = 4095): Ignition modes are decimal integers{hint}"
            ),
            src::IGNITION,
        ));
    } else if octal_literal && mode <= 0o777 {
        out.push(doc.at(
            m,
            path,
            Severity::Info,
            "file-mode-octal-literal",
            format!(
                "mode {raw}: kubectl and oc read a leading 0 as octal (YAML 1.1), so this is {mode} = 0o{mode:o} as meant; YAML 1.2 tools read {} — writing {mode} is unambiguous",
                raw.trim_start_matches('0')
            ),
            src::IGNITION,
        ));
    } else if raw.len() == 3 && raw.chars().all(|c| ('0'..='7').contains(&c)) && mode > 0o777 {
        // e.g. 644 (decimal) = 0o1204: sticky bit, owner write only.
        let meant = i64::from_str_radix(raw, 8).unwrap_or(0);
        out.push(doc.at(
            m,
            path,
            Severity::Error,
            "file-mode-decimal",
            format!(
                "mode {raw} is decimal {mode} = 0o{mode:o}, not 0{raw}: Ignition modes are decimal integers (0{raw} is {meant}); the Machine Config Operator refuses a mode above 0777"
            ),
            src::IGNITION,
        ));
    } else if mode > 0o777 {
        out.push(doc.at(
            m,
            path,
            Severity::Error,
            "file-mode-special-bits",
            format!(
                "mode {raw} = 0o{mode:o} sets setuid, setgid or sticky bits: the Machine Config Operator refuses a file mode above 0777 (\"invalid mode … cannot exceed 0777\")"
            ),
            "openshift/machine-config-operator: pkg/controller/common/helpers.go (ValidateIgnition: validateIgn2FileModes / validateIgn3FileModes, Red Hat bugzilla 2038240)",
        ));
    }
}

/// Whether a MachineConfigPool's `machineConfigSelector` selects MachineConfigs with `role`.
pub(super) fn pool_selects(pool: &Node, role: &str) -> bool {
    let Some(sel) = pool.at("spec.machineConfigSelector") else {
        return false;
    };
    const KEY: &str = "machineconfiguration.openshift.io/role";
    let by_label = sel
        .get("matchLabels")
        .and_then(|m| m.get(KEY))
        .and_then(Node::as_str)
        == Some(role);
    let by_expr = sel.get("matchExpressions").is_some_and(|e| {
        e.as_seq().iter().any(|x| {
            x.get("key").and_then(Node::as_str) == Some(KEY)
                && x.get("operator").and_then(Node::as_str) == Some("In")
                && x.get("values")
                    .is_some_and(|v| v.as_seq().iter().any(|s| s.as_str() == Some(role)))
        })
    });
    by_label || by_expr
}

/// Spec 2 names each file's, directory's and link's filesystem: Ignition's validation refuses an
/// entry without one ("no filesystem specified", config/v2_2/types/node.go), and the MCO's
/// conversion to spec 3 maps only `root` (ign-converter v23tov30 with `{"root": "/"}` in
/// openshift/machine-config-operator `pkg/controller/common/ignition_converter.go`).
fn spec2_filesystems(doc: &Doc, config: &Node, out: &mut Vec<Finding>) {
    for kind in ["files", "directories", "links"] {
        let Some(entries) = config.at(&format!("storage.{kind}")) else {
            continue;
        };
        for (i, e) in entries.as_seq().iter().enumerate() {
            let path = format!("spec.config.storage.{kind}[{i}].filesystem");
            let what = e.get("path").and_then(Node::as_str).unwrap_or("?");
            let (line, message) = match e.entry("filesystem") {
                None => (
                    e.line,
                    format!(
                        "{what}: an Ignition spec 2 entry needs `filesystem: root`; Ignition refuses it without (\"no filesystem specified\"), so the Machine Config Operator cannot read the config"
                    ),
                ),
                Some((k, v)) if v.as_str() != Some("root") => (
                    k.line,
                    format!(
                        "{what}: `filesystem: {}` — the Machine Config Operator converts spec 2 to spec 3 knowing only `root`, and the conversion fails on any other",
                        v.display()
                    ),
                ),
                Some(_) => continue,
            };
            out.push(doc.at_lines(
                line,
                line,
                &path,
                Severity::Error,
                "ignition-spec-2-filesystem",
                message,
                "coreos/ignition: config/v2_2/types/node.go (ValidateFilesystem, spec2x line); openshift/machine-config-operator: pkg/controller/common/ignition_converter.go (v23tov30.Translate with only root mapped)",
            ));
        }
    }
}
