//! The migration rules of `policy check`, per object kind: ClusterPolicy / NVIDIADriver driver
//! settings, module-parameter ConfigMaps, MachineConfigs (files, modes, pools), after the
//! structure check against the committed schemas (docs/domain.md, "Policy check").

use super::*;

/// Checks every document: structure against the committed schemas, then the migration rules.
/// `Err` only when a built-in schema is unreadable (a broken build).
pub fn check(docs: &[Doc]) -> Result<Vec<Finding>, String> {
    let mut out = Vec::new();
    let crds = schemas::crds()?;
    let pools: Vec<&Doc> = docs
        .iter()
        .filter(|d| d.kind() == "MachineConfigPool")
        .collect();
    let config_maps: Vec<&Doc> = docs.iter().filter(|d| d.kind() == "ConfigMap").collect();
    for (i, doc) in docs.iter().enumerate() {
        let start = out.len();
        check_doc(doc, i, crds, &pools, &config_maps, &mut out)?;
        out[start..].sort_by_key(|f| f.line);
    }
    Ok(out)
}

pub(super) fn check_doc(
    doc: &Doc,
    i: usize,
    crds: &[(schemas::Crd, &'static str)],
    pools: &[&Doc],
    config_maps: &[&Doc],
    out: &mut Vec<Finding>,
) -> Result<(), String> {
    {
        let kind = doc.kind().to_string();
        if !matches!(doc.node.value, Value::Map(_)) || kind.is_empty() {
            out.push(doc.at(
                &doc.node,
                "",
                Severity::Error,
                "not-a-kubernetes-object",
                "this document is not a Kubernetes object (no `kind`)".into(),
                src::KUBE,
            ));
            return Ok(());
        }
        let mut skip_paths: Vec<String> = Vec::new();
        if kind == "MachineConfig" && doc.api_version() == "machineconfiguration.openshift.io/v1" {
            for f in files_of(doc) {
                if f.inline.is_some() {
                    skip_paths.push(format!(
                        "spec.config.storage.files[{}].contents.inline",
                        f.index
                    ));
                }
            }
        }
        match crds.iter().find(|(c, _)| c.kind == kind) {
            Some((crd, source)) => {
                match crd.versions.iter().find(|(v, _)| v == doc.api_version()) {
                    Some((_, schema)) => {
                        let issues =
                            schema::validate(schema, schema, &doc.node, schema::Dialect::Crd, "");
                        schema_findings(doc, issues, source, &skip_paths, out);
                    }
                    None => {
                        let known: Vec<&str> =
                            crd.versions.iter().map(|(v, _)| v.as_str()).collect();
                        let at = doc.node.get("apiVersion").unwrap_or(&doc.node);
                        out.push(doc.at(
                            at,
                            "apiVersion",
                            Severity::Error,
                            "api-version-unknown",
                            format!(
                                "{kind} has apiVersion `{}`; the schema knows {}",
                                doc.api_version(),
                                known.join(", ")
                            ),
                            source,
                        ));
                        return Ok(());
                    }
                }
            }
            None if kind == "ConfigMap" => {}
            None => {
                out.push(doc.at(
                    &doc.node,
                    "",
                    Severity::Info,
                    "kind-not-checked",
                    format!("{kind} is not a kind this check reads; not checked"),
                    src::KUBE,
                ));
                return Ok(());
            }
        }
        if let Some(p) = driver_policy(doc, i) {
            driver_rules(doc, &p, config_maps, out);
        }
        match kind.as_str() {
            "MachineConfig" => machine_config_rules(doc, pools, &skip_paths, out)?,
            "ConfigMap" => config_map_rules(doc, out),
            _ => {}
        }
    }
    Ok(())
}

pub(super) fn schema_findings(
    doc: &Doc,
    issues: Vec<schema::Issue>,
    source: &'static str,
    skip: &[String],
    out: &mut Vec<Finding>,
) {
    for is in issues {
        if skip.contains(&is.path) {
            continue;
        }
        let (severity, code, message) = match is.kind {
            schema::IssueKind::UnknownField => (
                Severity::Warning,
                "schema-unknown-field",
                format!(
                    "{}: the API server drops it and `kubectl apply --validate=strict` refuses it",
                    is.message
                ),
            ),
            schema::IssueKind::Required => (
                Severity::Info,
                "schema-required",
                format!(
                    "{}: as a new object the API server refuses it without them; as a patch to the existing object (kubectl patch/apply) it is fine",
                    is.message
                ),
            ),
            schema::IssueKind::Type => (Severity::Error, "schema-type", is.message),
            schema::IssueKind::Enum => (Severity::Error, "schema-enum", is.message),
            schema::IssueKind::Minimum => (Severity::Error, "schema-minimum", is.message),
        };
        out.push(doc.at_lines(is.line, is.line, &is.path, severity, code, message, source));
    }
}

/// auto works with driver containers 570.86.15 and 570.124.06 or later (v25.3.0 notes).
pub(super) fn auto_supported(v: &[u64]) -> bool {
    let at_least = |w: &[u64]| v >= w;
    v == [570, 86, 15] || at_least(&[570, 124, 6])
}

pub(super) fn driver_rules(
    doc: &Doc,
    p: &DriverPolicy,
    config_maps: &[&Doc],
    out: &mut Vec<Finding>,
) {
    let sp = p.section_path;
    let deprecated = p.section.entry("useOpenKernelModules");
    if let Some((k, v)) = deprecated {
        let now = match &p.module_type_node {
            Some(_) => format!("`kernelModuleType: {}` decides", p.module_type.as_str()),
            None => "`kernelModuleType` is unset, so `auto` (the default) decides".into(),
        };
        out.push(doc.at_lines(
            k.line,
            v.end_line,
            &format!("{sp}.useOpenKernelModules"),
            Severity::Warning,
            "use-open-kernel-modules-ignored",
            format!(
                "`useOpenKernelModules: {}` is ignored since GPU Operator v25.3.0 (deprecated, no longer honoured); {now}. Set `{sp}.kernelModuleType: open` and drop this field",
                v.display()
            ),
            src::CP_TYPES,
        ));
    }
    if let Some(version) = &p.version {
        let vnode = p.section.get("version").unwrap_or(&p.section);
        let vpath = format!("{sp}.version");
        match version_parts(version) {
            None => out.push(doc.at(
                vnode,
                &vpath,
                Severity::Info,
                "driver-version-unparsed",
                format!(
                    "driver version `{version}` is not a release number: its branch, and so the module type it gets, is not checked"
                ),
                src::RELNOTES_25_3,
            )),
            Some(v) => {
                let branch = v[0];
                if p.module_type == ModuleType::Open && v < vec![515, 43, 4] {
                    out.push(doc.at(
                        vnode,
                        &vpath,
                        Severity::Error,
                        "driver-branch-lacks-open",
                        format!(
                            "driver {version} (branch {branch}) has no open kernel modules (they start with 515.43.04) but kernelModuleType is open"
                        ),
                        src::OPEN_FIRST,
                    ));
                } else if p.module_type == ModuleType::Auto && !auto_supported(&v) {
                    let open = if v >= vec![515, 43, 4] {
                        "open: the open module (this branch has it)"
                    } else {
                        "open: none (open modules start with 515.43.04)"
                    };
                    out.push(doc.at(
                        vnode,
                        &vpath,
                        Severity::Warning,
                        "kernel-module-type-auto-unsupported",
                        format!(
                            "kernelModuleType is auto{} and driver {version} (branch {branch}) predates auto, which needs the 570.86.15 or 570.124.06+ driver containers. What this driver gets under each setting — auto: the proprietary module (a driver container before auto installs the open one only when the operator sets OPEN_KERNEL_MODULES_ENABLED=true, which it does for `open` alone); {open}; proprietary: the proprietary module",
                            if p.module_type_node.is_none() { " (the default)" } else { "" }
                        ),
                        src::RELNOTES_25_3,
                    ));
                }
            }
        }
    }
    match p.section.entry("rdma") {
        Some((_, r)) if p.rdma_enabled => {
            let at = r.get("enabled").unwrap_or(r);
            out.push(doc.at(
                at,
                &format!("{sp}.rdma.enabled"),
                Severity::Warning,
                "rdma-enabled-legacy-peermem",
                "`rdma.enabled: true` deploys the legacy nvidia-peermem module; DMA-BUF GPUDirect RDMA needs neither it nor MOFED (open module, Linux 5.12+): set it to false for DMA-BUF".into(),
                src::RDMA,
            ));
        }
        rdma => out.push(doc.at_lines(
            p.section_line,
            p.section_line,
            sp,
            Severity::Info,
            "rdma-not-needed-for-dmabuf",
            format!(
                "`rdma.enabled` is {}: good for DMA-BUF, which needs neither nvidia-peermem (what rdma.enabled deploys) nor MOFED",
                if rdma.is_some_and(|(_, r)| r.get("enabled").is_some()) { "false" } else { "unset (off)" }
            ),
            src::RDMA,
        )),
    }
    if let Some(name) = &p.module_config {
        let given = config_maps.iter().any(|c| c.name() == name);
        if !given {
            let at = p
                .section
                .at("kernelModuleConfig.name")
                .unwrap_or(&p.section);
            out.push(doc.at(
                at,
                &format!("{sp}.kernelModuleConfig.name"),
                Severity::Info,
                "module-config-not-given",
                format!(
                    "module parameters come from ConfigMap `{name}` (nvidia.conf: one `NVreg_Key=value` per line) in the operator's namespace; it was not given, so its parameters are not checked"
                ),
                src::PARAMS,
            ));
        }
    }
}

pub(super) fn config_map_rules(doc: &Doc, out: &mut Vec<Finding>) {
    let Some(conf) = doc.node.at("data").and_then(|d| d.get("nvidia.conf")) else {
        return;
    };
    let Some(text) = conf.as_str() else { return };
    let first = (conf.style == Style::Literal).then_some(conf.line + 1);
    for (i, line) in text.lines().enumerate() {
        let l = first.map_or(conf.line, |f| f + i);
        let body = line.split('#').next().unwrap_or("").trim();
        if body.starts_with("options ") || body.starts_with("install ") {
            out.push(doc.at_lines(
                l,
                l,
                "data.nvidia.conf",
                Severity::Error,
                "module-config-syntax",
                format!(
                    "`{body}`: nvidia.conf holds parameters only (`NVreg_Key=value`); the driver container passes every word to modprobe, so `options nvidia` breaks the load"
                ),
                src::PARAMS,
            ));
        }
        if body.contains("NVreg_OpenRmEnableUnsupportedGpus") {
            out.push(doc.at_lines(
                l,
                l,
                "data.nvidia.conf",
                Severity::Warning,
                "open-rm-enable-unsupported-gpus-ignored",
                "NVreg_OpenRmEnableUnsupportedGpus is ignored since driver 545.23.06 (the opt-in is no longer required; data-center GPUs never needed it): it does not choose open modules".into(),
                src::OPT_IN,
            ));
        }
    }
}

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
    // Ignition version and config schema.
    let config = doc.node.at("spec.config");
    let version_node = config.and_then(|c| c.at("ignition.version"));
    let version = version_node.and_then(Node::as_str);
    match (config, version) {
        (None, _) => {}
        (Some(c), None) => out.push(doc.at(
            version_node.unwrap_or(c),
            "spec.config.ignition.version",
            Severity::Error,
            "ignition-version-missing",
            "spec.config has no `ignition.version` (a string such as \"3.4.0\"): the Machine Config Operator cannot read the config".into(),
            src::IGNITION,
        )),
        (Some(c), Some(v)) => {
            let parts = version_parts(v);
            let major3 = parts.as_ref().is_some_and(|p| p.len() == 3 && p[0] == 3);
            if !major3 {
                out.push(doc.at(
                    version_node.unwrap_or(c),
                    "spec.config.ignition.version",
                    Severity::Error,
                    "ignition-version-unsupported",
                    format!(
                        "ignition.version `{v}`: the Machine Config Operator reads Ignition spec 3 configs (3.x.0); this check knows the 3.4.0 schema"
                    ),
                    src::IGNITION,
                ));
            } else {
                if v != "3.4.0" {
                    out.push(doc.at(
                        version_node.unwrap_or(c),
                        "spec.config.ignition.version",
                        Severity::Info,
                        "ignition-version-not-3.4.0",
                        format!("ignition.version {v}: checked against the 3.4.0 schema"),
                        src::IGNITION,
                    ));
                }
                let ign = schemas::ignition()?;
                let issues =
                    schema::validate(ign, ign, c, schema::Dialect::JsonSchema, "spec.config");
                schema_findings(doc, issues, schemas::IGNITION_SOURCE, skip, out);
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
                    "`contents.inline` is Butane syntax, not Ignition: an Ignition 3.4.0 file's contents are `contents.source` (a `data:` URL, e.g. `data:,options%20nvidia…`); as written {} gets no contents from it. Write the MachineConfig with Butane, or give `contents.source`",
                    f.path
                ),
                src::IGNITION,
            ));
        }
        if let Some(m) = f.entry.get("mode") {
            file_mode_rules(doc, m, &format!("{fpath}.mode"), out);
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
        let line_of = |i: usize| f.first_line.map_or(f.entry.line, |l| l + i);
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
    } else if octal_literal {
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
                "mode {raw} is decimal {mode} = 0o{mode:o}, not 0{raw}: Ignition modes are decimal integers (0{raw} is {meant})"
            ),
            src::IGNITION,
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
