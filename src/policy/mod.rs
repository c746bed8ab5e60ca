//! `gpufleet policy`: the Kubernetes side of the migration (docs/domain.md, "Policy check").
//!
//! Reads GPU Operator ClusterPolicy and NVIDIADriver objects, OpenShift MachineConfigs (and
//! their pools) and kernel-module ConfigMaps — from YAML files or `kubectl get -o json` — checks
//! their structure against the committed schemas ([`schemas`]) and the migration rules below,
//! compares them with a fleet snapshot ([`against`]), and writes the ClusterPolicy patch that
//! moves a fleet to open modules + DMA-BUF ([`generate`]). No clap here; the CLI glue is
//! `src/cli/policy.rs`.
//!
//! Every [`Finding`] has a location (file and line, or the kubectl object), a severity, a stable
//! code (the table in docs/domain.md), a message and the public source of the rule.

pub mod against;
pub mod generate;
pub mod kubectl;
pub mod schema;
pub mod schemas;
pub mod yaml;

use std::path::Path;

use serde::Serialize;

use yaml::{Node, Style, Value};

/// How bad a finding is. Exit code 1 when any is `Warning` or `Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One finding. `file` is the path given, or `kubectl` for objects read from the cluster;
/// `line`/`end_line` are 1-based lines in that file (`None` for kubectl objects and for
/// findings about a whole fleet); `object` is `Kind/name`; `path` the JSON path of the field
/// (empty for the whole object); `node` the fleet node a comparison is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub file: String,
    pub line: Option<usize>,
    pub end_line: Option<usize>,
    pub object: String,
    pub path: String,
    pub severity: Severity,
    pub code: &'static str,
    pub message: String,
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// Public sources of the rules (docs/domain.md, "Sources").
pub mod src {
    pub const CP_TYPES: &str = "NVIDIA/gpu-operator: api/nvidia/v1/clusterpolicy_types.go (useOpenKernelModules: \"Deprecated: This field is no longer honored\"; kernelModuleType auto|open|proprietary, default auto)";
    pub const RELNOTES_25_3: &str = "NVIDIA/cloud-native-docs: gpu-operator/release-notes.rst, v25.3.0 (auto only with the 570.86.15 and 570.124.06 or later driver containers); NVIDIA/gpu-driver-container: ubuntu22.04/nvidia-driver (_resolve_kernel_type; commit 1220e91)";
    pub const OPEN_FIRST: &str =
        "NVIDIA/open-gpu-kernel-modules: first release 515.43.04 (README, \"Compatible GPUs\")";
    pub const RDMA: &str = "NVIDIA/cloud-native-docs: gpu-operator/gpu-operator-rdma.rst (DMA-BUF: open module, MLNX_OFED optional; driver.rdma.enabled deploys the legacy nvidia-peermem)";
    pub const PARAMS: &str = "NVIDIA/cloud-native-docs: gpu-operator/custom-driver-params.rst (driver.kernelModuleConfig ConfigMap, nvidia.conf: one NVreg_ parameter per line); NVIDIA/gpu-driver-container: ubuntu22.04/nvidia-driver (_get_module_params)";
    pub const OPT_IN: &str = "NVIDIA/open-gpu-kernel-modules: commit b5bf85a8e, 545.23.06 (OpenRmEnableUnsupportedGpus \"left here, though ignored, for backwards compatibility\")";
    pub const DMABUF_BUILTIN: &str = "torvalds/linux: drivers/dma-buf/Kconfig (DMA_SHARED_BUFFER is a bool: built in, never a loadable module); modules-load.d(5)";
    pub const PEERMEM: &str = "NVIDIA/cloud-native-docs: gpu-operator/gpu-operator-rdma.rst (NVIDIA recommends DMA-BUF over the nvidia-peermem module)";
    pub const IGNITION: &str = "coreos/ignition: config/v3_4/schema/ignition.json and docs/configuration-v3_4.md (file contents: source, a data URL; mode: decimal integer, 0644 is 420); Butane docs (contents.inline is Butane syntax)";
    pub const MCO: &str = "OpenShift Machine Config Operator docs: a MachineConfig applies to the MachineConfigPools whose machineConfigSelector matches its machineconfiguration.openshift.io/role label";
    pub const MC_NOT_FOR_OPERATOR: &str = "NVIDIA/cloud-native-docs: gpu-operator/custom-driver-params.rst; NVIDIA/gpu-driver-container: ubuntu22.04/nvidia-driver (MODPROBE_CONFIG_DIR inside the driver container)";
    pub const KUBE: &str =
        "Kubernetes API conventions: apiVersion and kind name the object's schema";
    pub const UPGRADE_LABELS: &str = "NVIDIA/k8s-operator-libs: pkg/upgrade/consts.go (nvidia.com/gpu-driver-upgrade-state values; skip label nvidia.com/gpu-driver-upgrade.skip=true); GPU Operator release notes (a node cordoned during the Operator's upgrade is uncordoned by it)";
}

/// Where a document came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file, as the user named it.
    File(String),
    /// `kubectl get … -o json`.
    Kubectl,
}

/// One object to check.
#[derive(Debug, Clone)]
pub struct Doc {
    pub origin: Origin,
    pub node: Node,
}

impl Doc {
    pub fn kind(&self) -> &str {
        self.node.get("kind").and_then(Node::as_str).unwrap_or("")
    }

    pub fn api_version(&self) -> &str {
        self.node
            .get("apiVersion")
            .and_then(Node::as_str)
            .unwrap_or("")
    }

    pub fn name(&self) -> &str {
        self.node
            .at("metadata.name")
            .and_then(Node::as_str)
            .unwrap_or("")
    }

    /// `Kind/name`.
    pub fn label(&self) -> String {
        format!("{}/{}", self.kind(), self.name())
    }

    fn file(&self) -> String {
        match &self.origin {
            Origin::File(f) => f.clone(),
            Origin::Kubectl => "kubectl".into(),
        }
    }

    fn line(&self, line: usize) -> Option<usize> {
        match self.origin {
            Origin::File(_) if line > 0 => Some(line),
            _ => None,
        }
    }

    /// A finding at `node`'s lines.
    fn at(
        &self,
        node: &Node,
        path: &str,
        severity: Severity,
        code: &'static str,
        message: String,
        source: &'static str,
    ) -> Finding {
        self.at_lines(
            node.line,
            node.end_line,
            path,
            severity,
            code,
            message,
            source,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn at_lines(
        &self,
        line: usize,
        end_line: usize,
        path: &str,
        severity: Severity,
        code: &'static str,
        message: String,
        source: &'static str,
    ) -> Finding {
        let line = self.line(line);
        Finding {
            file: self.file(),
            end_line: line.and_then(|l| self.line(end_line).filter(|e| *e > l)),
            line,
            object: self.label(),
            path: path.to_string(),
            severity,
            code,
            message,
            source,
            node: None,
        }
    }
}

/// A file that could not be read or parsed (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}:{1}")]
    Yaml(String, yaml::YamlError),
    #[error("{0}: {1}")]
    Invalid(String, String),
}

/// The objects of one YAML (or JSON) file: every document, a `List`'s items each on its own.
pub fn load_file(path: &Path) -> Result<Vec<Doc>, LoadError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| LoadError::Io(shown.clone(), e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        LoadError::Invalid(
            shown.clone(),
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })?;
    docs_from_text(&text, Origin::File(shown.clone())).map_err(|e| LoadError::Yaml(shown, e))
}

/// The objects of a YAML stream (a `…List` object's `items` each on its own).
pub fn docs_from_text(text: &str, origin: Origin) -> Result<Vec<Doc>, yaml::YamlError> {
    let mut out = Vec::new();
    for node in yaml::parse_stream(text)? {
        let is_list = node
            .get("kind")
            .and_then(Node::as_str)
            .is_some_and(|k| k.ends_with("List"))
            && node.get("items").is_some();
        if is_list {
            for item in node.get("items").map(Node::as_seq).unwrap_or_default() {
                out.push(Doc {
                    origin: origin.clone(),
                    node: item.clone(),
                });
            }
        } else {
            out.push(Doc {
                origin: origin.clone(),
                node,
            });
        }
    }
    Ok(out)
}

/// Exit code of a check: 0 when no finding is a warning or an error, else 1.
pub fn exit_code(findings: &[Finding]) -> u8 {
    u8::from(findings.iter().any(|f| f.severity >= Severity::Warning))
}

/// A driver version as numbers (`560.35.03` → [560, 35, 3]); `None` when not of that form.
pub fn version_parts(v: &str) -> Option<Vec<u64>> {
    let parts: Option<Vec<u64>> = v.split('.').map(|p| p.parse().ok()).collect();
    parts.filter(|p| !p.is_empty() && p.len() <= 4)
}

/// The module type the GPU Operator asks a driver container for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleType {
    Auto,
    Open,
    Proprietary,
}

impl ModuleType {
    pub fn parse(s: &str) -> Option<ModuleType> {
        match s {
            "auto" => Some(ModuleType::Auto),
            "open" => Some(ModuleType::Open),
            "proprietary" => Some(ModuleType::Proprietary),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ModuleType::Auto => "auto",
            ModuleType::Open => "open",
            ModuleType::Proprietary => "proprietary",
        }
    }
}

/// What a ClusterPolicy or NVIDIADriver asks of the driver (the `driver` section of a
/// ClusterPolicy, the `spec` of an NVIDIADriver).
#[derive(Debug, Clone)]
pub struct DriverPolicy {
    pub doc: usize,
    /// `driver.kernelModuleType` (default `auto`) and the node that set it, if any.
    pub module_type: ModuleType,
    pub module_type_node: Option<Node>,
    pub version: Option<String>,
    /// `driver.rdma.enabled` (absent = false).
    pub rdma_enabled: bool,
    /// `driver.kernelModuleConfig.name`.
    pub module_config: Option<String>,
    /// The section's own node (`spec.driver` or `spec`) and its JSON path.
    pub section: Node,
    /// Line of the section's key (`driver:` or `spec:`).
    pub section_line: usize,
    pub section_path: &'static str,
}

/// The driver policy of a ClusterPolicy or NVIDIADriver document, if it is one.
pub fn driver_policy(doc: &Doc, index: usize) -> Option<DriverPolicy> {
    let ((key, section), section_path) = match (doc.api_version(), doc.kind()) {
        ("nvidia.com/v1", "ClusterPolicy") => {
            (doc.node.get("spec")?.entry("driver")?, "spec.driver")
        }
        ("nvidia.com/v1alpha1", "NVIDIADriver") => (doc.node.entry("spec")?, "spec"),
        _ => return None,
    };
    let mt_node = section.get("kernelModuleType");
    let module_type = mt_node
        .and_then(Node::as_str)
        .and_then(ModuleType::parse)
        .unwrap_or(ModuleType::Auto);
    Some(DriverPolicy {
        doc: index,
        module_type,
        module_type_node: mt_node.cloned(),
        version: section
            .get("version")
            .and_then(|v| v.raw.clone())
            .filter(|v| !v.is_empty()),
        rdma_enabled: section.at("rdma.enabled").and_then(Node::as_bool) == Some(true),
        module_config: section
            .at("kernelModuleConfig.name")
            .and_then(Node::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        section: section.clone(),
        section_line: key.line,
        section_path,
    })
}

/// An `NVreg_` module option found in a MachineConfig file or a ConfigMap's nvidia.conf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleOption {
    pub doc: usize,
    /// The key without `NVreg_`.
    pub key: String,
    pub value: String,
    pub line: usize,
    /// Where it is written: the file path on the node, or `ConfigMap/name nvidia.conf`.
    pub place: String,
}

/// A text a MachineConfig writes: its path, its contents and the line of content line 0 in the
/// YAML file (`None` when the lines cannot be mapped: data URLs, folded blocks).
struct FileText {
    path: String,
    text: Option<String>,
    first_line: Option<usize>,
    /// The `storage.files[i]` entry.
    entry: Node,
    index: usize,
    inline: Option<(yaml::Key, Node)>,
}

fn files_of(doc: &Doc) -> Vec<FileText> {
    let Some(files) = doc.node.at("spec.config.storage.files") else {
        return vec![];
    };
    files
        .as_seq()
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let path = entry
                .get("path")
                .and_then(Node::as_str)
                .unwrap_or("")
                .to_string();
            let contents = entry.get("contents");
            let inline = contents
                .and_then(|c| c.entry("inline"))
                .map(|(k, v)| (k.clone(), v.clone()));
            let (text, first_line) = if let Some((_, v)) = &inline {
                let first = match v.style {
                    Style::Literal => Some(v.line + 1),
                    Style::Plain | Style::Quoted if !v.display().contains('\n') => Some(v.line),
                    _ => None,
                };
                (v.as_str().map(str::to_string), first)
            } else if let Some(src) = contents.and_then(|c| c.get("source")) {
                let decoded = src.as_str().and_then(decode_data_url);
                let line = decoded
                    .as_ref()
                    .and_then(|t| (!t.trim_end_matches('\n').contains('\n')).then_some(src.line));
                (decoded, line)
            } else {
                (None, None)
            };
            FileText {
                path,
                text,
                first_line,
                entry: entry.clone(),
                index,
                inline,
            }
        })
        .collect()
}

/// The text of a `data:` URL (RFC 2397, percent-encoded or base64), if it is one and UTF-8.
pub fn decode_data_url(url: &str) -> Option<String> {
    let u = data_url::DataUrl::process(url).ok()?;
    let (body, _) = u.decode_to_vec().ok()?;
    String::from_utf8(body).ok()
}

fn is_peermem(word: &str) -> bool {
    matches!(word, "nvidia-peermem" | "nvidia_peermem")
}

/// The `NVreg_` options of the `options nvidia` lines of a modprobe.d text, with their line
/// index (0-based).
fn modprobe_options(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        if words.next() != Some("options") || words.next() != Some("nvidia") {
            continue;
        }
        for w in words {
            if let Some((k, v)) = w.split_once('=')
                && let Some(key) = k.strip_prefix("NVreg_")
            {
                out.push((i, key.to_string(), v.to_string()));
            }
        }
    }
    out
}

/// The module options every MachineConfig and kernel-module ConfigMap of `docs` sets.
pub fn module_options(docs: &[Doc]) -> Vec<ModuleOption> {
    let mut out = Vec::new();
    for (d, doc) in docs.iter().enumerate() {
        match (doc.api_version(), doc.kind()) {
            ("machineconfiguration.openshift.io/v1", "MachineConfig") => {
                for f in files_of(doc) {
                    if !f.path.contains("/modprobe.d/") {
                        continue;
                    }
                    let Some(text) = &f.text else { continue };
                    for (i, key, value) in modprobe_options(text) {
                        out.push(ModuleOption {
                            doc: d,
                            key,
                            value,
                            line: f.first_line.map_or(f.entry.line, |l| l + i),
                            place: f.path.clone(),
                        });
                    }
                }
            }
            ("v1", "ConfigMap") => {
                let Some(data) = doc.node.get("data") else {
                    continue;
                };
                let Some(conf) = data.get("nvidia.conf") else {
                    continue;
                };
                let Some(text) = conf.as_str() else { continue };
                let first = (conf.style == Style::Literal).then_some(conf.line + 1);
                for (i, line) in text.lines().enumerate() {
                    for w in line.split('#').next().unwrap_or("").split_whitespace() {
                        if let Some((k, v)) = w.split_once('=')
                            && let Some(key) = k.strip_prefix("NVreg_")
                        {
                            out.push(ModuleOption {
                                doc: d,
                                key: key.to_string(),
                                value: v.to_string(),
                                line: first.map_or(conf.line, |l| l + i),
                                place: format!("{} nvidia.conf", doc.label()),
                            });
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

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

fn check_doc(
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

fn schema_findings(
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
fn auto_supported(v: &[u64]) -> bool {
    let at_least = |w: &[u64]| v >= w;
    v == [570, 86, 15] || at_least(&[570, 124, 6])
}

fn driver_rules(doc: &Doc, p: &DriverPolicy, config_maps: &[&Doc], out: &mut Vec<Finding>) {
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

fn config_map_rules(doc: &Doc, out: &mut Vec<Finding>) {
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

fn machine_config_rules(
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

fn file_mode_rules(doc: &Doc, m: &Node, path: &str, out: &mut Vec<Finding>) {
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
fn pool_selects(pool: &Node, role: &str) -> bool {
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
