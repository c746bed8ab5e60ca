//! The migration rules of `policy check`, per object kind: ClusterPolicy / NVIDIADriver driver
//! settings, module-parameter ConfigMaps, MachineConfigs (files, modes, pools), after the
//! structure check against the committed schemas (docs/domain.md, "Policy check").

use super::*;

/// Checks every document: structure against the committed schemas of the newest GPU Operator
/// release, then the migration rules. `Err` only when a built-in schema is unreadable (a broken
/// build).
pub fn check(docs: &[Doc]) -> Result<Vec<Finding>, String> {
    check_for(docs, schemas::newest())
}

/// [`check`] against the CRDs of GPU Operator release `rel` (`--operator-version`): a field the
/// newest release has and `rel` lacks is `field-not-in-operator-version`, a kind `rel` does not
/// serve `kind-not-in-operator-version`.
pub fn check_for(
    docs: &[Doc],
    rel: &'static schemas::OperatorRelease,
) -> Result<Vec<Finding>, String> {
    let mut out = Vec::new();
    let crds = schemas::crds_of(rel)?;
    let pools: Vec<&Doc> = docs
        .iter()
        .filter(|d| d.kind() == "MachineConfigPool")
        .collect();
    let config_maps: Vec<&Doc> = docs.iter().filter(|d| d.kind() == "ConfigMap").collect();
    let mut cross = super::operator::cross_doc_rules(docs);
    for (i, doc) in docs.iter().enumerate() {
        let start = out.len();
        check_doc(doc, i, (crds, rel), &pools, &config_maps, &mut out)?;
        // The findings across documents are said on the document they point at.
        let label = doc.label();
        let file = doc.file();
        let (here, rest): (Vec<Finding>, Vec<Finding>) = cross
            .into_iter()
            .partition(|f| f.object == label && f.file == file);
        out.extend(here);
        cross = rest;
        out[start..].sort_by_key(|f| f.line);
    }
    out.extend(cross);
    Ok(out)
}

pub(super) fn check_doc(
    doc: &Doc,
    i: usize,
    (crds, rel): (
        &[(schemas::Crd, &'static str)],
        &'static schemas::OperatorRelease,
    ),
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
                        let issues = version_issues(doc, issues, rel, source, out)?;
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
            None if schemas::crds()?.iter().any(|(c, _)| c.kind == kind)
                && doc.api_version().starts_with("nvidia.com/") =>
            {
                out.push(doc.at(
                    doc.node.get("kind").unwrap_or(&doc.node),
                    "kind",
                    Severity::Error,
                    "kind-not-in-operator-version",
                    format!(
                        "GPU Operator {} has no {kind} CRD (it comes with {}): its API server refuses this object (no such resource type)",
                        rel.tag,
                        schemas::RELEASES
                            .iter()
                            .find(|r| schemas::crds_of(r).is_ok_and(|c| c.iter().any(|(c, _)| c.kind == kind)))
                            .map_or("a later release", |r| r.tag)
                    ),
                    schemas::newest_source(&kind),
                ));
                return Ok(());
            }
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
        if let Some((line, path, why)) = driver_moot(doc) {
            out.push(doc.at_lines(
                line,
                line,
                path,
                Severity::Info,
                "driver-settings-moot",
                why,
                src::DRIVER_STATE,
            ));
        }
        if let Some(p) = driver_policy(doc, i) {
            driver_rules(doc, &p, config_maps, out);
            super::operator::doc_rules(doc, crds, out);
        }
        match kind.as_str() {
            "MachineConfig" => {
                super::machineconfig::machine_config_rules(doc, pools, &skip_paths, out)?
            }
            "ConfigMap" => config_map_rules(doc, out),
            _ => {}
        }
    }
    Ok(())
}

/// The unknown fields of `issues` (found with `rel`'s CRD) that a later committed release
/// defines become `field-not-in-operator-version` findings (the first release that has the
/// field named); the other issues are returned.
fn version_issues(
    doc: &Doc,
    issues: Vec<schema::Issue>,
    rel: &'static schemas::OperatorRelease,
    source: &'static str,
    out: &mut Vec<Finding>,
) -> Result<Vec<schema::Issue>, String> {
    if rel.tag == schemas::newest().tag
        || !issues
            .iter()
            .any(|i| i.kind == schema::IssueKind::UnknownField)
    {
        return Ok(issues);
    }
    // Per later release: the paths its CRD does not know.
    let mut unknown_in: Vec<(&'static str, Vec<String>)> = Vec::new();
    let later = schemas::RELEASES
        .iter()
        .skip_while(|r| r.tag != rel.tag)
        .skip(1);
    for r in later {
        let crds = schemas::crds_of(r)?;
        let schema = crds
            .iter()
            .find(|(c, _)| c.kind == doc.kind())
            .and_then(|(c, _)| c.versions.iter().find(|(v, _)| v == doc.api_version()));
        let Some((_, schema)) = schema else { continue };
        let paths = schema::validate(schema, schema, &doc.node, schema::Dialect::Crd, "")
            .into_iter()
            .filter(|i| i.kind == schema::IssueKind::UnknownField)
            .map(|i| i.path)
            .collect();
        unknown_in.push((r.tag, paths));
    }
    let mut rest = Vec::new();
    for is in issues {
        let added = (is.kind == schema::IssueKind::UnknownField)
            .then(|| {
                unknown_in
                    .iter()
                    .find(|(_, paths)| !paths.contains(&is.path))
                    .map(|(tag, _)| *tag)
            })
            .flatten();
        match added {
            Some(tag) => out.push(doc.at_lines(
                is.line,
                is.line,
                &is.path,
                Severity::Warning,
                "field-not-in-operator-version",
                format!(
                    "`{}` is not in the {} CRD of GPU Operator {} (it comes with {tag}): the API server of {} drops it without a word, so the operator never sees it",
                    is.path,
                    doc.kind(),
                    rel.tag,
                    rel.tag
                ),
                source,
            )),
            None => rest.push(is),
        }
    }
    Ok(rest)
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
        let ignition = is.path.starts_with("spec.config") && doc.kind() == "MachineConfig";
        let (severity, code, message) = match is.kind {
            schema::IssueKind::UnknownField if ignition => (
                Severity::Warning,
                "schema-unknown-field",
                format!(
                    "{}: Ignition does not read it (an \"unused key\" warning in its report)",
                    is.message
                ),
            ),
            schema::IssueKind::Required if ignition => (
                Severity::Error,
                "ignition-required",
                format!(
                    "{}: Ignition refuses a config without them, so the Machine Config Operator cannot render it",
                    is.message
                ),
            ),
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
                    let has_open = v >= vec![515, 43, 4];
                    let open = if has_open {
                        "open: the open module (this branch has it)"
                    } else {
                        "open: none (open modules start with 515.43.04), so proprietary is the only outcome and auto changes nothing"
                    };
                    out.push(doc.at(
                        vnode,
                        &vpath,
                        if has_open { Severity::Warning } else { Severity::Info },
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
        Some((_, r)) if p.rdma_enabled && p.module_type == ModuleType::Proprietary => {
            // DMA-BUF needs the open module: under `proprietary`, nvidia-peermem is the only
            // GPUDirect RDMA there is (pre-Turing pools).
            let at = r.get("enabled").unwrap_or(r);
            out.push(doc.at(
                at,
                &format!("{sp}.rdma.enabled"),
                Severity::Info,
                "rdma-enabled-legacy-peermem",
                "`rdma.enabled: true` deploys the legacy nvidia-peermem module: with `kernelModuleType: proprietary` it is the only GPUDirect RDMA (DMA-BUF needs the open module, Turing or later)".into(),
                src::RDMA,
            ));
        }
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
            rdma.map_or(p.section_line, |(k, r)| {
                r.entry("enabled").map_or(k.line, |(ek, _)| ek.line)
            }),
            0,
            &if rdma.is_some_and(|(_, r)| r.get("enabled").is_some()) {
                format!("{sp}.rdma.enabled")
            } else {
                sp.to_string()
            },
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
            let words: Vec<&str> = body
                .split_whitespace()
                .filter(|w| !w.contains('='))
                .collect();
            out.push(doc.at_lines(
                l,
                l,
                "data.nvidia.conf",
                Severity::Warning,
                "module-config-syntax",
                format!(
                    "`{body}`: nvidia.conf holds parameters only (`NVreg_Key=value`, one a line), not modprobe.d syntax; the driver container hands these words to modprobe as module parameters, and the kernel ignores the unknown ones ({}) with a warning in the kernel log (`nvidia: unknown parameter '…' ignored`). The module still loads and the `NVreg_` parameters on the line apply; drop the other words",
                    words.iter().map(|w| format!("`{w}`")).collect::<Vec<_>>().join(", ")
                ),
                src::MODULE_PARAM_UNKNOWN,
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
