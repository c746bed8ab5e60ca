//! `gpufleet policy generate`: the GPU Operator change that moves a fleet to open kernel modules
//! + DMA-BUF, ready to apply as it is (docs/domain.md, "Policy generate").
//!
//! The fleet (snapshot reports) is split into driver pools by GPU architecture; each pool gets a
//! module type (open from Turing on, proprietary before), a driver version checked against its
//! GPUs (data/driver-branches.toml: per-architecture last branch, per-GPU minimum, dated operator
//! defaults), the module parameters every node of it configures alike *and* has in effect, and
//! a canary-first upgrade policy. The output is in the cluster's mode: a ClusterPolicy merge
//! patch ([`Mode::ClusterPolicy`]), or one NVIDIADriver per pool plus
//! `driver.useNvidiaDriverCRD: true` ([`Mode::NvidiaDriver`]). No MachineConfig: host files do
//! not reach the operator's driver container.
//!
//! [`generate`] is the library entry point (also used by `gpufleet upgrade --via gpu-operator`);
//! it never runs anything. The CLI glue is `src/cli/policy.rs`.

mod pools;
pub mod render;

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::model::report::NodeReport;
use crate::policy::ModuleType;
use crate::policy::schemas::{self, OperatorRelease};

pub use pools::{GpuFacts, OPEN_FIRST, Range, gpus_of, misfit, range_of, same_value};

/// The skip label of the GPU Operator's upgrade controller: a node carrying it is not upgraded
/// (NVIDIA/k8s-operator-libs `pkg/upgrade/consts.go`, `UpgradeSkipNodeLabelKeyFmt`).
pub const SKIP_LABEL: &str = "nvidia.com/gpu-driver-upgrade.skip";
/// The label [`generate`] routes a node to its pool's NVIDIADriver with (default).
pub const POOL_LABEL: &str = "gpufleet/driver-pool";
/// The label on every object [`generate`] writes for `kubectl apply -l`.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "gpufleet");

/// What the output is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// A ClusterPolicy merge patch (one driver configuration for every node).
    #[default]
    ClusterPolicy,
    /// One NVIDIADriver per pool and `driver.useNvidiaDriverCRD: true` in the ClusterPolicy.
    NvidiaDriver,
}

/// Whose object names: the Helm chart's or OpenShift's (the OperatorHub bundle's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Platform {
    /// ClusterPolicy `cluster-policy`, namespace `gpu-operator`.
    #[default]
    Helm,
    /// ClusterPolicy `gpu-cluster-policy`, namespace `nvidia-gpu-operator`.
    OpenShift,
}

impl Platform {
    pub fn cluster_policy(self) -> &'static str {
        match self {
            Platform::Helm => "cluster-policy",
            Platform::OpenShift => "gpu-cluster-policy",
        }
    }

    pub fn namespace(self) -> &'static str {
        match self {
            Platform::Helm => "gpu-operator",
            Platform::OpenShift => "nvidia-gpu-operator",
        }
    }
}

/// How to generate.
#[derive(Clone)]
pub struct Options {
    pub mode: Mode,
    pub platform: Platform,
    /// The GPU Operator release whose CRDs the output is for (`--operator-version`).
    pub release: &'static OperatorRelease,
    /// `--driver-version`: checked against every pool; `None` proposes one per pool.
    pub driver_version: Option<String>,
    /// Canary nodes (`--canary`); none named: the first node (by name) of each pool.
    pub canaries: Vec<String>,
    /// The pool label key ([`POOL_LABEL`]).
    pub pool_label: String,
    /// The ClusterPolicy's name and the operator's namespace, when not the platform's.
    pub cluster_policy: Option<String>,
    pub namespace: Option<String>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("mode", &self.mode)
            .field("platform", &self.platform)
            .field("release", &self.release.tag)
            .field("driver_version", &self.driver_version)
            .field("canaries", &self.canaries)
            .field("pool_label", &self.pool_label)
            .field("cluster_policy", &self.cluster_policy)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::default(),
            platform: Platform::default(),
            release: schemas::newest(),
            driver_version: None,
            canaries: Vec::new(),
            pool_label: POOL_LABEL.into(),
            cluster_policy: None,
            namespace: None,
        }
    }
}

/// One driver pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// `volta`, `hopper`, `ampere-hopper`; `fleet` in ClusterPolicy mode.
    pub name: String,
    pub architectures: Vec<String>,
    /// Node names, sorted.
    pub nodes: Vec<String>,
    pub module_type: ModuleType,
    /// The driver version; `None` when none fits (the pool is blocked, said in the notes).
    pub driver_version: Option<String>,
    /// Where the version comes from (`--driver-version`, or the data row's source).
    pub version_source: String,
    /// `NVreg_` keys (without the prefix) and values for the pool's nvidia.conf.
    pub params: Vec<(String, String)>,
    /// `driver.rdma.enabled`: true only for a proprietary pool whose every node loads
    /// nvidia-peermem (DMA-BUF needs the open module).
    pub rdma: bool,
    pub canaries: Vec<String>,
    /// The NVIDIADriver's `nodeSelector` (NVIDIADriver mode).
    pub selector: Option<(String, String)>,
}

/// How an [`Object`] is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Apply {
    /// `kubectl patch RESOURCE NAME --type merge -p JSON` (an RFC 7386 merge patch).
    MergePatch { resource: String, name: String },
    /// `kubectl apply -f` (a whole object).
    Apply,
}

/// One object of the output.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub apply: Apply,
    /// The object (or patch) as the API server reads it.
    pub value: Value,
    /// Comment lines written above it (without `# `).
    pub comment: Vec<String>,
}

/// When a label command runs in the canary-first order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Before the objects are applied: pool labels, and the skip label on every non-canary
    /// (without it the upgrade controller would start on every node).
    BeforeApply,
    /// Once every canary's `nvidia.com/gpu-driver-upgrade-state` is `upgrade-done` and it
    /// passes its checks: the skip label comes off the rest.
    AfterCanaries,
}

/// One `kubectl label node` call. Node names, keys and values are validated (DNS-1123, label
/// syntax) before one is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelCommand {
    pub step: Step,
    pub node: String,
    pub key: String,
    /// `None` removes the label (`key-`).
    pub value: Option<String>,
}

impl LabelCommand {
    /// `label node --overwrite -- NODE key=value` (or `key-`), for `kubectl` (or `oc`).
    pub fn args(&self) -> Vec<String> {
        let change = match &self.value {
            Some(v) => format!("{}={v}", self.key),
            None => format!("{}-", self.key),
        };
        vec![
            "label".into(),
            "node".into(),
            "--overwrite".into(),
            "--".into(),
            self.node.clone(),
            change,
        ]
    }

    /// The command line as printed (every word is label- or DNS-safe: nothing to quote).
    pub fn line(&self, kubectl: &str) -> String {
        format!("{kubectl} {}", self.args().join(" "))
    }
}

/// The generated change.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    pub mode: Mode,
    /// The ClusterPolicy's name and the operator namespace used.
    pub cluster_policy: String,
    pub namespace: String,
    /// In apply order: the ConfigMaps and NVIDIADrivers (`Apply`), then the ClusterPolicy
    /// patch (`MergePatch`).
    pub objects: Vec<Object>,
    /// In order: [`Step::BeforeApply`] ones, then [`Step::AfterCanaries`].
    pub label_commands: Vec<LabelCommand>,
    pub pools: Vec<Pool>,
    /// What people must know (stderr).
    pub notes: Vec<String>,
    /// Nodes the change would leave without a usable driver, with why (exit code 1).
    pub blocked: Vec<(String, String)>,
    /// Everything as one YAML stream with the commands in comments.
    pub yaml: String,
}

/// The canary-first upgrade policy: automatic upgrades on, one node at a time, drained first
/// (no forced deletion of unmanaged pods).
pub fn upgrade_policy() -> Value {
    json!({
        "autoUpgrade": true,
        "maxParallelUpgrades": 1,
        "maxUnavailable": 1,
        "drain": {"enable": true, "force": false, "deleteEmptyDir": false, "timeoutSeconds": 300},
        "podDeletion": {"force": false, "deleteEmptyDir": false, "timeoutSeconds": 300},
    })
}

/// Whether `release`'s NVIDIADriver CRD has `spec.upgradePolicy` (from v26.7.0; before it the
/// upgrade controller reads the ClusterPolicy's `driver.upgradePolicy` for NVIDIADriver pods too:
/// NVIDIA/gpu-operator `controllers/upgrade_controller.go`).
fn nvidiadriver_has_upgrade_policy(release: &'static OperatorRelease) -> bool {
    schemas::crds_of(release)
        .ok()
        .and_then(|crds| crds.iter().find(|(c, _)| c.kind == "NVIDIADriver"))
        .and_then(|(c, _)| c.versions.first())
        .is_some_and(|(_, s)| {
            s.pointer("/properties/spec/properties/upgradePolicy")
                .is_some()
        })
}

/// A pool being built: its name, architectures and member nodes with their GPUs.
type Group<'a> = (
    String,
    Vec<String>,
    Vec<(&'a NodeReport, Vec<pools::GpuFacts>)>,
);

/// The change for `nodes` (a snapshot's reports; a node is named as Kubernetes names it).
pub fn generate(nodes: &[NodeReport], opts: &Options) -> Generated {
    let mut notes = Vec::new();
    let mut blocked: Vec<(String, String)> = Vec::new();
    let cluster_policy = opts
        .cluster_policy
        .clone()
        .unwrap_or_else(|| opts.platform.cluster_policy().into());
    let namespace = opts
        .namespace
        .clone()
        .unwrap_or_else(|| opts.platform.namespace().into());
    // Nodes that can be pooled, with their GPUs.
    let mut members: Vec<(&NodeReport, Vec<pools::GpuFacts>)> = Vec::new();
    for n in nodes {
        if !render::is_dns1123_subdomain(&n.name) {
            blocked.push((
                n.name.clone(),
                "not a Kubernetes node name (DNS-1123 subdomain): no label command is made for it"
                    .into(),
            ));
            continue;
        }
        match pools::gpus_of(n) {
            Err(why) => blocked.push((n.name.clone(), format!("not pooled: {why}"))),
            Ok(g) if g.is_empty() => notes.push(format!(
                "{}: no NVIDIA GPU: in no driver pool, no label",
                n.name
            )),
            Ok(g) => members.push((n, g)),
        }
    }
    // Pools: by architecture (NVIDIADriver mode), or the whole fleet (ClusterPolicy mode: one
    // driver configuration, open modules, so pre-Turing nodes cannot be in it).
    let mut groups: Vec<Group> = Vec::new();
    for (n, g) in members {
        let archs: Vec<String> = g
            .iter()
            .map(|x| x.architecture.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let name = match opts.mode {
            Mode::NvidiaDriver => pools::pool_name(&archs),
            Mode::ClusterPolicy if pools::module_type_for(&g) == ModuleType::Proprietary => {
                blocked.push((n.name.clone(), format!(
                    "pre-Turing GPUs ({}): open modules cannot drive them, and one ClusterPolicy has one kernelModuleType; use --nvidiadriver (a proprietary NVIDIADriver for their pool)",
                    archs.join(", ")
                )));
                continue;
            }
            Mode::ClusterPolicy => "fleet".into(),
        };
        match groups.iter_mut().find(|(p, _, _)| *p == name) {
            Some((_, a, m)) => {
                for x in archs {
                    if !a.contains(&x) {
                        a.push(x);
                    }
                }
                m.push((n, g));
            }
            None => groups.push((name, archs, vec![(n, g)])),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    for c in &opts.canaries {
        if !groups
            .iter()
            .any(|(_, _, m)| m.iter().any(|(n, _)| n.name == *c))
        {
            notes.push(format!(
                "--canary {c}: not a node of any pool: not used as a canary"
            ));
        }
    }
    let mut pool_list = Vec::new();
    for (name, mut archs, mut m) in groups {
        archs.sort();
        m.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let all_gpus: Vec<pools::GpuFacts> = m.iter().flat_map(|(_, g)| g.clone()).collect();
        let module_type = pools::module_type_for(&all_gpus);
        let range = pools::range_of(&all_gpus, module_type);
        let node_names: Vec<String> = m.iter().map(|(n, _)| n.name.clone()).collect();
        let (version, version_source) = match &opts.driver_version {
            Some(v) => match pools::misfit(v, &range) {
                None => (Some(v.clone()), "--driver-version".to_string()),
                Some(why) => {
                    for n in &node_names {
                        blocked.push((n.clone(), format!("pool {name}: {why}")));
                    }
                    (None, String::new())
                }
            },
            None => match pools::propose(&range, opts.release.minor) {
                Ok(r) => (
                    Some(r.version.clone()),
                    format!(
                        "the GPU Operator {} default of {} (data/driver-branches.toml; {})",
                        r.operator, r.date, r.source
                    ),
                ),
                Err(why) => {
                    for n in &node_names {
                        blocked.push((n.clone(), format!("pool {name}: {why}")));
                    }
                    (None, String::new())
                }
            },
        };
        let refs: Vec<&NodeReport> = m.iter().map(|(n, _)| *n).collect();
        let (params, param_notes) = pools::pool_params(&refs);
        notes.extend(param_notes.into_iter().map(|w| format!("pool {name}: {w}")));
        let peermem: Vec<&str> = refs
            .iter()
            .filter(|n| {
                n.peermem
                    .as_ref()
                    .is_some_and(|p| p.loaded == Some(true) || p.configured == Some(true))
            })
            .map(|n| n.name.as_str())
            .collect();
        let rdma = module_type == ModuleType::Proprietary && peermem.len() == refs.len();
        if rdma {
            notes.push(format!(
                "pool {name}: every node loads nvidia-peermem and the proprietary module has no DMA-BUF: driver.rdma.enabled stays true (the legacy nvidia-peermem)"
            ));
        } else if !peermem.is_empty() {
            notes.push(format!(
                "pool {name}: {} load nvidia-peermem today; driver.rdma.enabled: false leaves it out ({})",
                peermem.join(", "),
                if module_type == ModuleType::Open {
                    "DMA-BUF replaces it under the open module"
                } else {
                    "not every node of this proprietary pool loads it: GPUDirect RDMA goes away on those that do"
                }
            ));
        }
        let mut canaries: Vec<String> = node_names
            .iter()
            .filter(|n| opts.canaries.contains(n))
            .cloned()
            .collect();
        if canaries.is_empty()
            && let Some(first) = node_names.first()
        {
            canaries.push(first.clone());
        }
        let selector =
            (opts.mode == Mode::NvidiaDriver).then(|| (opts.pool_label.clone(), name.clone()));
        pool_list.push(Pool {
            name,
            architectures: archs,
            nodes: node_names,
            module_type,
            driver_version: version,
            version_source,
            params,
            rdma,
            canaries,
            selector,
        });
    }
    let (objects, label_commands) =
        build(&pool_list, opts, &cluster_policy, &namespace, &mut notes);
    let mut g = Generated {
        mode: opts.mode,
        cluster_policy,
        namespace,
        objects,
        label_commands,
        pools: pool_list,
        notes,
        blocked,
        yaml: String::new(),
    };
    g.yaml = text(&g, opts);
    g
}

fn config_map_name(pool: &Pool, mode: Mode) -> String {
    match mode {
        Mode::ClusterPolicy => "gpufleet-kernel-module-params".into(),
        Mode::NvidiaDriver => format!("gpufleet-{}-params", pool.name),
    }
}

/// The objects and label commands of the pools.
fn build(
    pools: &[Pool],
    opts: &Options,
    cluster_policy: &str,
    namespace: &str,
    notes: &mut Vec<String>,
) -> (Vec<Object>, Vec<LabelCommand>) {
    let mut objects = Vec::new();
    let mut labels = Vec::new();
    let managed = json!({ MANAGED_BY.0: MANAGED_BY.1 });
    let usable: Vec<&Pool> = pools
        .iter()
        .filter(|p| p.driver_version.is_some())
        .collect();
    let conf = |p: &Pool| -> Option<Value> {
        (!p.params.is_empty()).then(|| {
            let text: String = p
                .params
                .iter()
                .map(|(k, v)| format!("NVreg_{k}={v}\n"))
                .collect();
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": config_map_name(p, opts.mode), "namespace": namespace, "labels": managed},
                "data": {"nvidia.conf": text},
            })
        })
    };
    let label_ok = render::is_label_key(&opts.pool_label);
    if opts.mode == Mode::NvidiaDriver && !label_ok {
        notes.push(format!(
            "--pool-label {:?} is not a Kubernetes label key: no pool labels or NVIDIADrivers written",
            opts.pool_label
        ));
    }
    for p in &usable {
        let cm = conf(p);
        if let Some(cm) = &cm {
            objects.push(Object {
                apply: Apply::Apply,
                value: cm.clone(),
                comment: vec![format!(
                    "Module parameters every node of pool {} configures alike and has in effect (nvidia.conf, one per line).",
                    p.name
                )],
            });
        }
        if opts.mode == Mode::ClusterPolicy || !label_ok {
            continue;
        }
        let mut spec = json!({
            "driverType": "gpu",
            "repository": "nvcr.io/nvidia",
            "image": "driver",
            "version": p.driver_version,
            "kernelModuleType": p.module_type.as_str(),
            "nodeSelector": { opts.pool_label.as_str(): p.name },
            "rdma": {"enabled": p.rdma},
        });
        if nvidiadriver_has_upgrade_policy(opts.release) {
            spec["default"] = json!(false);
            spec["upgradePolicy"] = upgrade_policy();
        }
        if cm.is_some() {
            spec["kernelModuleConfig"] = json!({"name": config_map_name(p, opts.mode)});
        }
        objects.push(Object {
            apply: Apply::Apply,
            value: json!({
                "apiVersion": "nvidia.com/v1alpha1",
                "kind": "NVIDIADriver",
                "metadata": {"name": format!("gpufleet-{}", p.name), "labels": managed},
                "spec": spec,
            }),
            comment: vec![format!(
                "Pool {} ({}; {} node(s)): {} modules, driver {} ({}).",
                p.name,
                p.architectures.join(", "),
                p.nodes.len(),
                p.module_type.as_str(),
                p.driver_version.as_deref().unwrap_or("?"),
                p.version_source
            )],
        });
        for n in &p.nodes {
            labels.push(LabelCommand {
                step: Step::BeforeApply,
                node: n.clone(),
                key: opts.pool_label.clone(),
                value: Some(p.name.clone()),
            });
        }
    }
    // The ClusterPolicy patch.
    let mut driver = serde_json::Map::new();
    match opts.mode {
        Mode::ClusterPolicy => {
            if let Some(p) = usable.first() {
                driver.insert("kernelModuleType".into(), json!(p.module_type.as_str()));
                driver.insert("version".into(), json!(p.driver_version));
                driver.insert("rdma".into(), json!({"enabled": p.rdma}));
                if !p.params.is_empty() {
                    driver.insert(
                        "kernelModuleConfig".into(),
                        json!({"name": config_map_name(p, opts.mode)}),
                    );
                }
                driver.insert("upgradePolicy".into(), upgrade_policy());
            }
        }
        Mode::NvidiaDriver if label_ok && !usable.is_empty() => {
            driver.insert("useNvidiaDriverCRD".into(), json!(true));
            // Before v26.7.0 the upgrade controller reads this one for NVIDIADriver pods too;
            // from v26.7.0 a migration from ClusterPolicy driver management needs it on.
            driver.insert("upgradePolicy".into(), upgrade_policy());
        }
        Mode::NvidiaDriver => {}
    }
    if !driver.is_empty() {
        objects.push(Object {
            apply: Apply::MergePatch {
                resource: "clusterpolicies.nvidia.com".into(),
                name: cluster_policy.to_string(),
            },
            value: json!({
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": cluster_policy},
                "spec": {"driver": Value::Object(driver)},
            }),
            comment: vec![
                "ClusterPolicy merge patch (not for kubectl apply: it is partial).".into(),
            ],
        });
    }
    // Canary first: the skip label on every other node before anything is applied.
    for p in &usable {
        for n in p.nodes.iter().filter(|n| !p.canaries.contains(n)) {
            labels.push(LabelCommand {
                step: Step::BeforeApply,
                node: n.clone(),
                key: SKIP_LABEL.into(),
                value: Some("true".into()),
            });
        }
    }
    for p in &usable {
        for n in p.nodes.iter().filter(|n| !p.canaries.contains(n)) {
            labels.push(LabelCommand {
                step: Step::AfterCanaries,
                node: n.clone(),
                key: SKIP_LABEL.into(),
                value: None,
            });
        }
    }
    (objects, labels)
}

/// The YAML stream: the steps in comments, then each object.
fn text(g: &Generated, opts: &Options) -> String {
    let mut y = String::new();
    let nodes: usize = g.pools.iter().map(|p| p.nodes.len()).sum();
    y.push_str(&format!(
        "# gpufleet policy generate: {} for {nodes} node(s) in {} pool(s), GPU Operator {} CRDs; open kernel modules + DMA-BUF where the GPUs allow.\n",
        match g.mode {
            Mode::ClusterPolicy => "ClusterPolicy merge patch",
            Mode::NvidiaDriver => "NVIDIADriver per pool",
        },
        g.pools.len(),
        opts.release.tag
    ));
    for p in &g.pools {
        y.push_str(&format!(
            "#   pool {}: {} ({}), {} modules, driver {}, canary {}\n",
            p.name,
            p.nodes.join(", "),
            p.architectures.join(", "),
            p.module_type.as_str(),
            p.driver_version.as_deref().unwrap_or("none fits (blocked)"),
            p.canaries.join(", ")
        ));
    }
    y.push_str(&format!(
        "# Steps, in this order (save this output as FILE):\n# 1. Labels first: {}the skip label on every node but the canaries (else the\n#    upgrade controller starts on every node at once):\n",
        if g.mode == Mode::NvidiaDriver { "the pool labels, and " } else { "" }
    ));
    for l in g
        .label_commands
        .iter()
        .filter(|l| l.step == Step::BeforeApply)
    {
        y.push_str(&format!("#   {}\n", l.line("kubectl")));
    }
    let applies = g.objects.iter().any(|o| o.apply == Apply::Apply);
    if applies {
        y.push_str(&format!(
            "# 2. kubectl apply -f FILE -l {}={}\n",
            MANAGED_BY.0, MANAGED_BY.1
        ));
    }
    for o in &g.objects {
        if let Apply::MergePatch { resource, name } = &o.apply {
            let patch = json!({"spec": o.value["spec"]});
            y.push_str(&format!(
                "# {}. kubectl patch {resource} {name} --type merge -p '{}'\n",
                if applies { 3 } else { 2 },
                patch
            ));
        }
    }
    y.push_str("#    driver.useOpenKernelModules is ignored since GPU Operator v25.3.0; if yours sets it, remove it:\n");
    y.push_str(&format!(
        "#    kubectl patch clusterpolicies.nvidia.com {} --type json -p '[{{\"op\":\"remove\",\"path\":\"/spec/driver/useOpenKernelModules\"}}]'\n",
        g.cluster_policy
    ));
    y.push_str("# Then wait until each canary's nvidia.com/gpu-driver-upgrade-state is upgrade-done (upgrade-failed: stop)\n# and it passes your checks (gpufleet scan), then let the rest upgrade, one node at a time:\n");
    for l in g
        .label_commands
        .iter()
        .filter(|l| l.step == Step::AfterCanaries)
    {
        y.push_str(&format!("#   {}\n", l.line("kubectl")));
    }
    y.push_str("# No MachineConfig is needed: host modprobe.d files do not reach the GPU Operator's driver container.\n");
    for (i, o) in g.objects.iter().enumerate() {
        if i > 0 {
            y.push_str("---\n");
        }
        for c in &o.comment {
            y.push_str(&format!("# {c}\n"));
        }
        y.push_str(&render::yaml(&o.value));
    }
    y
}

/// What the cluster's objects say about the output ([`detect`]); each `Some` says why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// The cluster already uses NVIDIADriver objects.
    pub nvidiadriver: Option<String>,
    /// OpenShift: a MachineConfigPool read from the cluster, or a ClusterPolicy named
    /// `gpu-cluster-policy`.
    pub openshift: Option<String>,
    /// The name of the one ClusterPolicy given or read.
    pub cluster_policy: Option<String>,
}

/// The mode, platform and ClusterPolicy name `docs` (files given, `kubectl get`) imply.
pub fn detect(docs: &[crate::policy::Doc]) -> Seen {
    use crate::policy::Origin;
    let mut s = Seen::default();
    let cps: Vec<&crate::policy::Doc> = docs
        .iter()
        .filter(|d| (d.api_version(), d.kind()) == ("nvidia.com/v1", "ClusterPolicy"))
        .collect();
    if let Some(d) = docs
        .iter()
        .find(|d| (d.api_version(), d.kind()) == ("nvidia.com/v1alpha1", "NVIDIADriver"))
    {
        s.nvidiadriver = Some(format!("{} exists: one NVIDIADriver per pool", d.label()));
    } else if let Some(d) = cps.iter().find(|d| {
        d.node
            .at("spec.driver.useNvidiaDriverCRD")
            .and_then(crate::yaml::Node::as_bool)
            == Some(true)
    }) {
        s.nvidiadriver = Some(format!(
            "{} sets driver.useNvidiaDriverCRD: true: one NVIDIADriver per pool",
            d.label()
        ));
    }
    if let Some(d) = docs.iter().find(|d| {
        d.origin == Origin::Kubectl && d.api_version() == "machineconfiguration.openshift.io/v1"
    }) {
        s.openshift = Some(format!("the cluster has {} (OpenShift)", d.kind()));
    } else if let Some(d) = cps
        .iter()
        .find(|d| d.name() == Platform::OpenShift.cluster_policy())
    {
        s.openshift = Some(format!("{} is OpenShift's name", d.label()));
    }
    if let [one] = cps.as_slice()
        && render::is_object_name(one.name())
    {
        s.cluster_policy = Some(one.name().to_string());
    }
    s
}
