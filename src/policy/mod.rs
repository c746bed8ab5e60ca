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

mod machineconfig;
mod operator;
mod rules;
pub use operator::node_overlaps;
pub use rules::{check, check_for};

use std::path::Path;

use serde::Serialize;

use crate::yaml::{self, Node, Style, Value};

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
    pub const IGNITION: &str = "coreos/ignition: config/v3_x/schema/ignition.json and docs/configuration-v3_x.md (file contents: source, a data URL; mode: decimal integer, 0644 is 420); Butane docs (contents.inline is Butane syntax)";
    pub const MCO_IGNITION: &str = "openshift/machine-config-operator: pkg/controller/common/helpers.go (IgnParseWrapper: 3.0.0 to 3.5.0 by ParseCompatibleVersion of config/v3_5, else spec 2 up to 2.2.0 by config/v2_2 Parse; ParseAndConvertConfig converts spec 2 to 3)";
    pub const DRIVER_STATE: &str = "NVIDIA/gpu-operator: controllers/state_manager.go (state-driver runs only when driver.enabled, default true; skipped, its DaemonSets removed, when driver.useNvidiaDriverCRD is true); api/nvidia/v1/clusterpolicy_types.go (DriverSpec.IsEnabled, UseNvidiaDriverCRDType)";
    pub const MODULE_PARAM_UNKNOWN: &str = "torvalds/linux: kernel/module/main.c (unknown_module_param_cb: \"unknown parameter '%s' ignored\", a warning); NVIDIA/gpu-driver-container: ubuntu22.04/nvidia-driver (_get_module_params)";
    pub const MCO: &str = "OpenShift Machine Config Operator docs: a MachineConfig applies to the MachineConfigPools whose machineConfigSelector matches its machineconfiguration.openshift.io/role label";
    pub const MC_NOT_FOR_OPERATOR: &str = "NVIDIA/cloud-native-docs: gpu-operator/custom-driver-params.rst; NVIDIA/gpu-driver-container: ubuntu22.04/nvidia-driver (MODPROBE_CONFIG_DIR inside the driver container)";
    pub const KUBE: &str =
        "Kubernetes API conventions: apiVersion and kind name the object's schema";
    pub const BRANCHES: &str = "data/driver-branches.toml: NVIDIA Unix Graphics Feature Deprecation Schedule (last branch per architecture); NVIDIA/cloud-native-docs gpu-operator/platform-support.rst (minimum driver per GPU)";
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
    let bytes = crate::limits::read(path, crate::limits::Kind::Policy)
        .map_err(|e| LoadError::Io(shown.clone(), e))?;
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

/// Why a ClusterPolicy's driver settings have no effect, if they have none: `driver.enabled:
/// false` (the operator deploys no driver) or `driver.useNvidiaDriverCRD: true` (NVIDIADriver
/// objects manage the driver and the ClusterPolicy's driver state is skipped). The line is the
/// deciding field's; the text says why (src::DRIVER_STATE).
pub fn driver_moot(doc: &Doc) -> Option<(usize, &'static str, String)> {
    if (doc.api_version(), doc.kind()) != ("nvidia.com/v1", "ClusterPolicy") {
        return None;
    }
    let driver = doc.node.at("spec.driver")?;
    if let Some((k, v)) = driver.entry("enabled")
        && v.as_bool() == Some(false)
    {
        return Some((
            k.line,
            "spec.driver.enabled",
            "`driver.enabled: false`: the GPU Operator deploys no driver (its driver state is off), so no other `driver` setting has an effect; they are not checked, and nodes are not compared with them".into(),
        ));
    }
    if let Some((k, v)) = driver.entry("useNvidiaDriverCRD")
        && v.as_bool() == Some(true)
    {
        return Some((
            k.line,
            "spec.driver.useNvidiaDriverCRD",
            "`driver.useNvidiaDriverCRD: true`: NVIDIADriver objects manage the driver and the ClusterPolicy's driver state is skipped, so its other `driver` settings have no effect; they are not checked, and nodes are not compared with them".into(),
        ));
    }
    None
}

/// The driver policy of a ClusterPolicy or NVIDIADriver document, if it is one and its settings
/// take effect ([`driver_moot`]).
pub fn driver_policy(doc: &Doc, index: usize) -> Option<DriverPolicy> {
    if driver_moot(doc).is_some() {
        return None;
    }
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
    /// The line a finding about a content line points at when `first_line` is `None`: the
    /// `source` (or `inline`) field's, else the entry's.
    fallback_line: usize,
    /// Why `text` is `None` although the file has a `contents.source` (not a data URL, not
    /// UTF-8, too large, an unknown compression).
    undecoded: Option<(Node, String)>,
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
            let mut undecoded = None;
            let fallback_line = contents
                .and_then(|c| c.entry("source").or_else(|| c.entry("inline")))
                .map_or(entry.line, |(k, _)| k.line);
            let (text, first_line) = if let Some((_, v)) = &inline {
                let first = match v.style {
                    Style::Literal => Some(v.line + 1),
                    Style::Plain | Style::Quoted if !v.display().contains('\n') => Some(v.line),
                    _ => None,
                };
                (v.as_str().map(str::to_string), first)
            } else if let Some(src) = contents.and_then(|c| c.get("source")) {
                let compression = contents
                    .and_then(|c| c.get("compression"))
                    .and_then(Node::as_str);
                match src.as_str().map(|s| decode_contents(s, compression)) {
                    Some(Ok(t)) => {
                        let line = (!t.trim_end_matches('\n').contains('\n')).then_some(src.line);
                        (Some(t), line)
                    }
                    Some(Err(why)) => {
                        undecoded = Some((src.clone(), why));
                        (None, None)
                    }
                    None => (None, None), // not a string: the schema check says so
                }
            } else {
                (None, None)
            };
            FileText {
                path,
                text,
                first_line,
                fallback_line,
                undecoded,
                entry: entry.clone(),
                index,
                inline,
            }
        })
        .collect()
}

/// The most bytes of one file's contents decoded (after gunzip): module configuration files are
/// a few lines; anything larger is not read further (a gzip bomb stops here).
pub const CONTENTS_LIMIT: usize = 1 << 20;

/// The text of an Ignition file's contents: `source` a `data:` URL (RFC 2397, percent-encoded
/// or base64), `compression` absent, empty or `gzip` (Ignition's two values; the Machine Config
/// Operator decodes them the same way, `DecodeIgnitionFileContents` in
/// openshift/machine-config-operator `pkg/controller/common/helpers.go`). `Err` says why it was
/// not decoded: not a data URL (fetched at boot), bad base64 or gzip, an unknown compression,
/// over [`CONTENTS_LIMIT`] bytes, not UTF-8.
pub fn decode_contents(source: &str, compression: Option<&str>) -> Result<String, String> {
    use std::io::Read;
    let u = data_url::DataUrl::process(source).map_err(|_| {
        "not a `data:` URL (a remote source is fetched on the node): contents not checked"
            .to_string()
    })?;
    let (body, _) = u
        .decode_to_vec()
        .map_err(|_| "the data URL's base64 does not decode: contents not checked".to_string())?;
    let bytes = match compression.unwrap_or("") {
        "" => body,
        "gzip" => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(body.as_slice())
                .take(CONTENTS_LIMIT as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| {
                    format!("`compression: gzip` but the contents do not gunzip ({e}): not checked")
                })?;
            out
        }
        other => {
            return Err(format!(
                "`compression: {other}` is not one Ignition knows (\"\" or gzip): contents not checked"
            ));
        }
    };
    if bytes.len() > CONTENTS_LIMIT {
        return Err(format!(
            "contents larger than {} KiB decoded: not checked",
            CONTENTS_LIMIT >> 10
        ));
    }
    String::from_utf8(bytes).map_err(|_| "contents are not UTF-8 text: not checked".to_string())
}

/// The text of a `data:` URL (RFC 2397, percent-encoded or base64), if it is one and UTF-8.
pub fn decode_data_url(url: &str) -> Option<String> {
    decode_contents(url, None).ok()
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
                            line: f.first_line.map_or(f.fallback_line, |l| l + i),
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
