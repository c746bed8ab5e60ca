//! The GPU Operator controllers' own refusals, as findings before the objects are applied
//! (docs/domain.md, "Policy check"): what its NVIDIADriver and ClusterPolicy controllers set
//! `ReconcileFailed` / `ConflictingNodeSelector` for, the `upgradePolicy` values its upgrade
//! controller cannot compute with, and the settings that let it upgrade every node at once.
//! Each rule names the controller source file it follows.

use super::*;

/// The sources of these rules.
pub mod src {
    pub const NVD_CONTROLLER: &str = "NVIDIA/gpu-operator: controllers/nvidiadriver_controller.go (Reconcile: ReconcileFailed, \"GPUDirect Storage driver (nvidia-fs) and/or GDRCopy driver is not supported along with pre-compiled NVIDIA drivers\")";
    pub const NVD_GDS_OPEN: &str = "NVIDIA/gpu-operator: controllers/nvidiadriver_controller.go (Reconcile: ReconcileFailed, \"GPUDirect Storage driver '…' is only supported with NVIDIA OpenRM drivers\"); api/nvidia/v1alpha1/nvidiadriver_types.go (IsOpenKernelModulesRequired: gds.version at or above internal/consts MinimumGDSVersionForOpenRM v2.17.5, or a sha256 digest; IsOpenKernelModulesEnabled: kernelModuleType == open)";
    pub const CP_PRECOMPILED: &str = "NVIDIA/gpu-operator: controllers/object_controls.go (transformGDSContainer / transformGDRCopyContainer: \"… is not supported along with pre-compiled NVIDIA drivers\", the driver DaemonSet is not deployed)";
    pub const NODE_SELECTOR: &str = "NVIDIA/gpu-operator: internal/validator/validator.go (Validate: \"multiple NVIDIADrivers match the same node\", ConflictingNodeSelector in controllers/nvidiadriver_controller.go; default drivers are left out); api/nvidia/v1alpha1/nvidiadriver_types.go (GetNodeSelector: no nodeSelector selects nvidia.com/gpu.present=true)";
    pub const NODE_SELECTOR_RULES: &str = "NVIDIA/gpu-operator: api/nvidia/v1alpha1/nvidiadriver_types.go (ValidateNodeSelector: a default NVIDIADriver cannot use nodeSelector; nvidia.com/gpu-operator.driver.owner is reserved); internal/validator/validator.go (ErrMultipleDefaultNVIDIADrivers, ReconcileFailed)";
    pub const NVD_DISABLED: &str = "NVIDIA/gpu-operator: controllers/nvidiadriver_controller.go (Reconcile: state Disabled, \"useNvidiaDriverCRD is not enabled in ClusterPolicy\")";
    pub const MAX_UNAVAILABLE: &str = "NVIDIA/gpu-operator: controllers/upgrade_controller.go (intstr.GetScaledValueFromIntOrPercent on upgradePolicy.maxUnavailable; an error returns from the reconcile); kubernetes/apimachinery: pkg/util/intstr/intstr.go (an integer, or a string of an integer followed by %: \"invalid type: string is not a percentage\")";
    pub const ALL_AT_ONCE: &str = "NVIDIA/k8s-operator-libs: pkg/upgrade/common_manager.go (GetUpgradesAvailable: maxParallelUpgrades 0 = every node waiting, capped only by maxUnavailable); NVIDIA/gpu-operator: controllers/upgrade_controller.go";
    pub const FORCE: &str = "NVIDIA/k8s-operator-libs: api/upgrade/v1alpha1/upgrade_spec.go (podDeletion.force, drain.force), pkg/upgrade/pod_manager.go and drain_manager.go (passed to the drain helper as Force: pods no controller manages are deleted too)";
}

/// The label the operator sets on nodes it routes to an NVIDIADriver (reserved in selectors).
const OWNER_LABEL: &str = "nvidia.com/gpu-operator.driver.owner";
/// What an NVIDIADriver without `nodeSelector` selects.
const GPU_PRESENT: (&str, &str) = ("nvidia.com/gpu.present", "true");

fn is_nvidiadriver(doc: &Doc) -> bool {
    (doc.api_version(), doc.kind()) == ("nvidia.com/v1alpha1", "NVIDIADriver")
}

fn is_clusterpolicy(doc: &Doc) -> bool {
    (doc.api_version(), doc.kind()) == ("nvidia.com/v1", "ClusterPolicy")
}

/// `key: true` under `node`, with the key's line.
fn true_at(node: Option<&Node>, key: &str) -> Option<usize> {
    let (k, v) = node?.entry(key)?;
    (v.as_bool() == Some(true)).then_some(k.line)
}

/// The rules of one ClusterPolicy (whose driver settings take effect) or NVIDIADriver.
/// `crds` are the chosen release's: an `upgradePolicy` its CRD lacks is pruned by the API server
/// (said as `field-not-in-operator-version`) and not judged here.
pub(super) fn doc_rules(doc: &Doc, crds: &[(schemas::Crd, &'static str)], out: &mut Vec<Finding>) {
    let (driver, spec_of_components, up_path, cp) = if is_clusterpolicy(doc) {
        (
            doc.node.at("spec.driver"),
            doc.node.get("spec"),
            "spec.driver.upgradePolicy",
            true,
        )
    } else if is_nvidiadriver(doc) {
        (
            doc.node.get("spec"),
            doc.node.get("spec"),
            "spec.upgradePolicy",
            false,
        )
    } else {
        return;
    };
    let Some(driver) = driver else { return };
    let gds = spec_of_components.and_then(|s| s.get("gds"));
    let gdrcopy = spec_of_components.and_then(|s| s.get("gdrcopy"));
    let comp_prefix = "spec";
    // Precompiled drivers with GDS or GDRCopy.
    if let Some(line) = true_at(Some(driver), "usePrecompiled") {
        let with: Vec<(&str, usize)> = [("gds", gds), ("gdrcopy", gdrcopy)]
            .into_iter()
            .filter_map(|(n, c)| true_at(c, "enabled").map(|l| (n, l)))
            .collect();
        if !with.is_empty() {
            let names: Vec<String> = with
                .iter()
                .map(|(n, l)| format!("`{comp_prefix}.{n}.enabled: true` (line {l})"))
                .collect();
            let (what, source) = if cp {
                (
                    "the ClusterPolicy controller fails to build the driver DaemonSet, so no driver is deployed",
                    src::CP_PRECOMPILED,
                )
            } else {
                (
                    "the NVIDIADriver controller refuses it (ReconcileFailed) and deploys nothing",
                    src::NVD_CONTROLLER,
                )
            };
            let path = if cp {
                "spec.driver.usePrecompiled"
            } else {
                "spec.usePrecompiled"
            };
            out.push(doc.at_lines(
                line,
                line,
                path,
                Severity::Error,
                "precompiled-with-gds-gdrcopy",
                format!(
                    "`usePrecompiled: true` with {}: GPUDirect Storage (nvidia-fs) and GDRCopy are not supported with precompiled drivers; {what}. Turn usePrecompiled off, or GDS / GDRCopy off",
                    names.join(" and ")
                ),
                source,
            ));
        }
    }
    // GDS 2.17.5 and later need the open kernel modules (NVIDIADriver controller).
    if !cp && true_at(gds, "enabled").is_some() {
        let version = gds.and_then(|g| g.entry("version"));
        let v = version.and_then(|(_, v)| v.raw.clone()).unwrap_or_default();
        let module_type = driver
            .get("kernelModuleType")
            .and_then(Node::as_str)
            .unwrap_or("auto");
        if gds_requires_open(&v) && module_type != "open" {
            let line = version.map_or(driver.line, |(k, _)| k.line);
            out.push(doc.at_lines(
                line,
                line,
                "spec.gds.version",
                Severity::Error,
                "gds-needs-open-modules",
                format!(
                    "GPUDirect Storage `{v}` (2.17.5 or later, or an image digest) needs the open kernel modules, and `kernelModuleType` is {module_type}{}: the NVIDIADriver controller refuses it (ReconcileFailed) and deploys nothing. Set `spec.kernelModuleType: open`",
                    if driver.get("kernelModuleType").is_none() {
                        " (the default)"
                    } else {
                        ""
                    }
                ),
                src::NVD_GDS_OPEN,
            ));
        }
    }
    let pointer = if cp {
        "/properties/spec/properties/driver/properties/upgradePolicy"
    } else {
        "/properties/spec/properties/upgradePolicy"
    };
    let served = crds
        .iter()
        .find(|(c, _)| c.kind == doc.kind())
        .and_then(|(c, _)| c.versions.iter().find(|(v, _)| v == doc.api_version()))
        .is_some_and(|(_, s)| s.pointer(pointer).is_some());
    if served {
        upgrade_rules(doc, driver.get("upgradePolicy"), up_path, cp, out);
    }
}

/// Whether a GDS version needs the open modules: `sha256…` (a digest), or at least v2.17.5 as
/// golang.org/x/mod/semver compares (a `v` is added; an invalid version is below every valid
/// one; a pre-release is below its release).
pub(super) fn gds_requires_open(v: &str) -> bool {
    if v.starts_with("sha256") {
        return true;
    }
    let v = v.strip_prefix('v').unwrap_or(v);
    let (core, pre) = match v.find(['-', '+']) {
        Some(i) if v[i..].starts_with('-') => (&v[..i], true),
        Some(i) => (&v[..i], false),
        None => (v, false),
    };
    let parts: Vec<&str> = core.split('.').collect();
    let nums: Option<Vec<u64>> = parts
        .iter()
        .map(|p| {
            (!p.is_empty()
                && p.chars().all(|c| c.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0')))
            .then(|| p.parse().ok())
            .flatten()
        })
        .collect();
    let Some(mut nums) = nums.filter(|n| (1..=3).contains(&n.len())) else {
        return false; // not semver: below v2.17.5
    };
    // x/mod/semver allows the vMAJOR and vMAJOR.MINOR shorthands only without a suffix.
    if nums.len() < 3 && v.len() != core.len() {
        return false;
    }
    nums.resize(3, 0);
    match nums.as_slice().cmp(&[2, 17, 5][..]) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => !pre,
        std::cmp::Ordering::Less => false,
    }
}

/// A `maxUnavailable` as the upgrade controller reads it: `Ok((value, is_percent))`, or the
/// error `intstr.GetScaledValueFromIntOrPercent` returns.
pub(super) fn int_or_percent(n: &Node) -> Result<(i64, bool), String> {
    match &n.value {
        Value::Int(i) => Ok((*i, false)),
        Value::Str(s) => match s.strip_suffix('%') {
            None => Err("invalid type: string is not a percentage".into()),
            Some(num) => num
                .parse::<i64>()
                .map(|v| (v, true))
                .map_err(|_| format!("invalid value {s:?}: not an integer before the %")),
        },
        _ => Err("invalid type: neither int nor percentage".into()),
    }
}

fn upgrade_rules(doc: &Doc, up: Option<&Node>, path: &str, cp: bool, out: &mut Vec<Finding>) {
    // Absent: a ClusterPolicy's upgrade controller is off; an NVIDIADriver gets the defaults
    // (autoUpgrade on, one node at a time, 25%).
    let Some(up) = up else { return };
    // The CRD defaults autoUpgrade to false in a ClusterPolicy, true in an NVIDIADriver.
    let auto = up.get("autoUpgrade").and_then(Node::as_bool).unwrap_or(!cp);
    let when = if auto {
        "autoUpgrade is on"
    } else {
        "autoUpgrade is off now; this applies once it is turned on"
    };
    let mu = up.entry("maxUnavailable");
    let mut percent = None;
    if let Some((k, v)) = mu {
        match int_or_percent(v) {
            Ok((value, true)) => percent = Some(value),
            Ok(_) => {}
            // Another type: the schema check says so.
            Err(_) if !matches!(v.value, Value::Str(_)) => {}
            Err(e) => out.push(doc.at_lines(
                k.line,
                k.line,
                &format!("{path}.maxUnavailable"),
                if auto { Severity::Error } else { Severity::Warning },
                "upgrade-max-unavailable-unparsable",
                format!(
                    "`maxUnavailable: {}` passes the CRD (int-or-string) but the upgrade controller cannot compute with it ({e}): every reconcile of the driver upgrade fails there and no node is upgraded ({when}). Write an integer (2) or a percentage (\"25%\")",
                    v.display()
                ),
                src::MAX_UNAVAILABLE,
            )),
        }
    }
    if !auto {
        return;
    }
    if let (Some((pk, pv)), Some((mk, _))) = (up.entry("maxParallelUpgrades"), mu)
        && matches!(pv.value, Value::Int(0))
        && percent.is_some_and(|p| p >= 100)
    {
        out.push(doc.at_lines(
            pk.line,
            mk.line.max(pk.line),
            &format!("{path}.maxParallelUpgrades"),
            Severity::Warning,
            "upgrade-all-at-once",
            format!(
                "`maxParallelUpgrades: 0` (no limit) with `maxUnavailable: {}`: the upgrade controller starts the driver upgrade on every node that needs it at once, so every GPU node loses its driver together; for a canary-first rollout use maxParallelUpgrades 1 and a skip label (`nvidia.com/gpu-driver-upgrade.skip=true`) on the nodes that wait",
                mu.map(|(_, v)| v.display()).unwrap_or_default()
            ),
            src::ALL_AT_ONCE,
        ));
    }
    let drain_on = true_at(up.get("drain"), "enable").is_some();
    for (section, key_path) in [
        ("podDeletion", "podDeletion.force"),
        ("drain", "drain.force"),
    ] {
        if section == "drain" && !drain_on {
            continue;
        }
        if let Some(line) = true_at(up.get(section), "force") {
            let what = if section == "podDeletion" {
                format!(
                    "the pods using GPUs are deleted before the driver restarts{}, including pods no controller (ReplicaSet, Job, StatefulSet…) manages, which are not recreated",
                    if drain_on {
                        ""
                    } else {
                        " (drain is off, so they are not evicted first)"
                    }
                )
            } else {
                "the drain deletes every pod on the node, including pods no controller manages, which are not recreated".to_string()
            };
            out.push(doc.at_lines(
                line,
                line,
                &format!("{path}.{key_path}"),
                Severity::Warning,
                "upgrade-forced-pod-deletion",
                format!("`{key_path}: true`: {what}"),
                src::FORCE,
            ));
        }
    }
}

/// One NVIDIADriver's selector: the labels it needs (`None`: it selects every node, `{}`).
struct Selector<'a> {
    doc: &'a Doc,
    labels: Option<Vec<(String, String)>>,
    line: usize,
}

fn selector_text(labels: &Option<Vec<(String, String)>>) -> String {
    match labels {
        None => "every node (`nodeSelector: {}`)".into(),
        Some(l) => l
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// The NVIDIADrivers of `docs` as they will be once the files are applied. NVIDIADriver is
/// cluster-scoped: one object per name. A file's version of an object the cluster has
/// (`--kubectl`) replaces it when applied, so the cluster's copy is left out; of several files
/// naming it, the last is applied.
fn applied_drivers(docs: &[Doc]) -> Vec<&Doc> {
    let all: Vec<&Doc> = docs.iter().filter(|d| is_nvidiadriver(d)).collect();
    all.iter()
        .enumerate()
        .filter(|(i, d)| {
            !all.iter().enumerate().any(|(j, o)| {
                j != *i
                    && o.name() == d.name()
                    && match (&d.origin, &o.origin) {
                        (Origin::Kubectl, Origin::File(_)) => true,
                        (Origin::File(_), Origin::Kubectl) => false,
                        _ => j > *i,
                    }
            })
        })
        .map(|(_, d)| *d)
        .collect()
}

/// With the cluster's nodes (`--kubectl`): each node that two or more non-default NVIDIADrivers
/// select by its actual labels, as the controller's validator lists them
/// (`nvidiadriver-nodes-claimed-twice`, error, on the later driver, up to 5 nodes named).
pub fn node_overlaps(docs: &[Doc], nodes: &[Doc]) -> Vec<Finding> {
    let drivers: Vec<&Doc> = applied_drivers(docs)
        .into_iter()
        .filter(|d| d.node.at("spec.default").and_then(Node::as_bool) != Some(true))
        .collect();
    let selects = |d: &Doc, n: &Doc| -> bool {
        let labels = n.node.at("metadata.labels");
        let has = |k: &str, v: &str| {
            labels
                .and_then(|l| l.get(k))
                .and_then(Node::as_str)
                .is_some_and(|x| x == v)
        };
        match d.node.at("spec.nodeSelector") {
            None => has(GPU_PRESENT.0, GPU_PRESENT.1),
            Some(Node {
                value: Value::Map(m),
                ..
            }) => m
                .iter()
                .all(|(k, v)| v.as_str().is_some_and(|v| has(&k.name, v))),
            Some(_) => false,
        }
    };
    let mut out = Vec::new();
    for (i, a) in drivers.iter().enumerate() {
        for b in &drivers[i + 1..] {
            // Said on a file's object rather than the cluster's (which has no line).
            let (a, b) = if matches!(b.origin, Origin::Kubectl) {
                (b, a)
            } else {
                (a, b)
            };
            let both: Vec<&str> = nodes
                .iter()
                .filter(|n| selects(a, n) && selects(b, n))
                .map(|n| n.name())
                .collect();
            if both.is_empty() {
                continue;
            }
            let shown: Vec<&str> = both.iter().take(5).copied().collect();
            let more = if both.len() > 5 {
                format!(" and {} more", both.len() - 5)
            } else {
                String::new()
            };
            let line = b
                .node
                .at("spec")
                .and_then(|s| s.entry("nodeSelector"))
                .map_or_else(
                    || b.node.entry("spec").map_or(b.node.line, |(k, _)| k.line),
                    |(k, _)| k.line,
                );
            out.push(b.at_lines(
                line,
                line,
                "spec.nodeSelector",
                Severity::Error,
                "nvidiadriver-nodes-claimed-twice",
                format!(
                    "NVIDIADriver `{}` and `{}` both select {} of the cluster's nodes ({}{more}): the controller refuses both (ConflictingNodeSelector, \"multiple NVIDIADrivers match the same node\")",
                    b.name(),
                    a.name(),
                    both.len(),
                    shown.join(", ")
                ),
                src::NODE_SELECTOR,
            ));
        }
    }
    out
}

/// The rules across documents: NVIDIADrivers whose selectors can select the same node, more than
/// one default NVIDIADriver, selectors the controller refuses, and NVIDIADrivers that a given
/// ClusterPolicy leaves Disabled.
pub(super) fn cross_doc_rules(docs: &[Doc]) -> Vec<Finding> {
    let mut out = Vec::new();
    let drivers = applied_drivers(docs);
    if drivers.is_empty() {
        return out;
    }
    // Disabled by a ClusterPolicy that does not delegate the driver.
    for cp in docs.iter().filter(|d| is_clusterpolicy(d)) {
        let delegates = cp
            .node
            .at("spec.driver.useNvidiaDriverCRD")
            .and_then(Node::as_bool)
            == Some(true);
        if delegates {
            continue;
        }
        let at = cp
            .line(cp.node.line)
            .map(|l| format!(" ({}:{l})", cp.file()))
            .unwrap_or_default();
        for d in &drivers {
            out.push(d.at_lines(
                d.node.entry("spec").map_or(d.node.line, |(k, _)| k.line),
                0,
                "spec",
                Severity::Warning,
                "nvidiadriver-disabled",
                format!(
                    "ClusterPolicy `{}`{at} does not set `driver.useNvidiaDriverCRD: true`: the NVIDIADriver controller sets this object's state to Disabled and deploys nothing",
                    cp.name()
                ),
                src::NVD_DISABLED,
            ));
        }
    }
    // Defaults and refused selectors.
    let is_default = |d: &Doc| d.node.at("spec.default").and_then(Node::as_bool) == Some(true);
    let defaults: Vec<&&Doc> = drivers.iter().filter(|d| is_default(d)).collect();
    if defaults.len() > 1 {
        let names: Vec<&str> = defaults.iter().map(|d| d.name()).collect();
        for d in &defaults {
            let line = d
                .node
                .at("spec")
                .and_then(|s| s.entry("default"))
                .map_or(d.node.line, |(k, _)| k.line);
            out.push(d.at_lines(
                line,
                line,
                "spec.default",
                Severity::Error,
                "nvidiadriver-multiple-defaults",
                format!(
                    "more than one default NVIDIADriver ({}): the controller refuses every NVIDIADriver (ReconcileFailed, \"multiple default NVIDIADrivers found\")",
                    names.join(", ")
                ),
                src::NODE_SELECTOR_RULES,
            ));
        }
    }
    let mut selectors = Vec::new();
    for d in &drivers {
        let entry = d.node.at("spec").and_then(|s| s.entry("nodeSelector"));
        let line = entry.map_or_else(
            || d.node.entry("spec").map_or(d.node.line, |(k, _)| k.line),
            |(k, _)| k.line,
        );
        let labels: Option<Vec<(String, String)>> = match entry {
            None => Some(vec![(GPU_PRESENT.0.into(), GPU_PRESENT.1.into())]),
            Some((
                _,
                Node {
                    value: Value::Map(m),
                    ..
                },
            )) if m.is_empty() => None,
            Some((
                _,
                Node {
                    value: Value::Map(m),
                    ..
                },
            )) => Some(
                m.iter()
                    .map(|(k, v)| (k.name.clone(), v.display()))
                    .collect(),
            ),
            Some(_) => continue, // not a map: the schema check says so
        };
        let has_selector =
            entry.is_some_and(|(_, v)| !matches!(&v.value, Value::Map(m) if m.is_empty()));
        if is_default(d) && has_selector {
            out.push(d.at_lines(
                line,
                line,
                "spec.nodeSelector",
                Severity::Error,
                "nvidiadriver-node-selector-refused",
                "a default NVIDIADriver cannot use nodeSelector (it serves the GPU nodes no other NVIDIADriver selects): the controller refuses it".into(),
                src::NODE_SELECTOR_RULES,
            ));
        }
        if labels.iter().flatten().any(|(k, _)| k == OWNER_LABEL) {
            out.push(d.at_lines(
                line,
                line,
                "spec.nodeSelector",
                Severity::Error,
                "nvidiadriver-node-selector-refused",
                format!("`{OWNER_LABEL}` is the operator's own routing label and cannot be used in nodeSelector: the controller refuses it"),
                src::NODE_SELECTOR_RULES,
            ));
        }
        if !is_default(d) {
            selectors.push(Selector {
                doc: d,
                labels,
                line,
            });
        }
    }
    // Overlaps: a node with the labels of both selectors matches both.
    for (i, a) in selectors.iter().enumerate() {
        for b in &selectors[i + 1..] {
            let (a, b) = if matches!(b.doc.origin, Origin::Kubectl) {
                (b, a)
            } else {
                (a, b)
            };
            let la = a.labels.as_deref().unwrap_or(&[]);
            let lb = b.labels.as_deref().unwrap_or(&[]);
            let clash = la
                .iter()
                .any(|(k, v)| lb.iter().any(|(k2, v2)| k == k2 && v != v2));
            if clash {
                continue;
            }
            let subset =
                |x: &[(String, String)], y: &[(String, String)]| x.iter().all(|p| y.contains(p));
            // One selector's labels within the other's: every node the narrower one selects is
            // selected by both.
            let certain = subset(la, lb) || subset(lb, la);
            let where_a = a
                .doc
                .line(a.line)
                .map(|l| format!("{}:{l}", a.doc.file()))
                .unwrap_or_else(|| a.doc.file());
            out.push(b.doc.at_lines(
                b.line,
                b.line,
                "spec.nodeSelector",
                if certain { Severity::Error } else { Severity::Warning },
                "nvidiadriver-selectors-overlap",
                format!(
                    "NVIDIADriver `{}` ({}) and `{}` ({where_a}, {}) {}: the controller allows one NVIDIADriver per node and refuses both (ConflictingNodeSelector, \"multiple NVIDIADrivers match the same node\"). Give them selectors with a label of different values (a pool label)",
                    b.doc.name(),
                    selector_text(&b.labels),
                    a.doc.name(),
                    selector_text(&a.labels),
                    if certain {
                        "select the same nodes"
                    } else {
                        "can select the same nodes (any node with both label sets)"
                    }
                ),
                src::NODE_SELECTOR,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gds_versions_compare_as_the_controller_compares_them() {
        for (v, want) in [
            ("2.17.5", true),
            ("v2.17.5", true),
            ("2.20.5", true),
            ("3", true),
            ("2.17.4", false),
            ("2.17.5-rc1", false),
            ("2.17.5+build", true),
            ("2.16", false),
            ("sha256:abc", true),
            ("latest", false),
            ("", false),
            ("02.17.5", false),
        ] {
            assert_eq!(gds_requires_open(v), want, "{v}");
        }
    }

    #[test]
    fn int_or_percent_as_intstr_reads_it() {
        let n = |y: &str| {
            crate::yaml::parse_stream(&format!("v: {y}\n")).expect("yaml")[0]
                .get("v")
                .expect("v")
                .clone()
        };
        assert_eq!(int_or_percent(&n("2")), Ok((2, false)));
        assert_eq!(int_or_percent(&n("25%")), Ok((25, true)));
        assert_eq!(int_or_percent(&n("\"+5%\"")), Ok((5, true)));
        assert!(int_or_percent(&n("\"25 percent\"")).is_err());
        assert!(int_or_percent(&n("\"25\"")).is_err());
        assert!(int_or_percent(&n("\"2.5%\"")).is_err());
    }
}
