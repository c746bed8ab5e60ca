//! `gpufleet policy check|generate`: arguments and output. The logic is in `crate::policy`.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::model::text::{json_string, terminal_safe};
use crate::policy::{self, Finding, Severity};

const POLICY_HELP: &str = "\
Checks GPU Operator ClusterPolicy / NVIDIADriver objects, OpenShift MachineConfigs (with their
MachineConfigPools) and kernel-module ConfigMaps for the move to open kernel modules + DMA-BUF,
against the CRD and Ignition (2.2, 3.0-3.5) schemas compiled into gpufleet (schemas/README.md),
and optionally against a fleet snapshot.

Exit codes: 0 no finding is a warning or an error, 1 some finding is, 2 unreadable input
(a file, kubectl failing, a snapshot) or usage errors.

Examples:
  gpufleet policy check clusterpolicy.yaml machineconfig.yaml
  gpufleet policy check --kubectl                   the cluster's objects, through kubectl
  gpufleet policy check --kubectl --kubectl-bin oc --against fleet.json
  gpufleet policy generate --for fleet.json > patch.yaml
  gpufleet policy generate --for fleet.json --nvidiadriver --operator-version 26.7 > change.yaml
  gpufleet policy generate --for fleet.json --kubectl --canary gpu-node-01 > change.yaml";

#[derive(Debug, Args)]
#[command(after_help = POLICY_HELP)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Check ClusterPolicy, NVIDIADriver, MachineConfig and ConfigMap objects: file:line,
    /// severity, code, message and source per finding
    #[command(after_help = POLICY_HELP)]
    Check(CheckArgs),
    /// Write the change that moves a snapshot's fleet to open modules + DMA-BUF, ready to apply:
    /// a ClusterPolicy merge patch or one NVIDIADriver per node pool, a checked driver version,
    /// module-parameter ConfigMaps, a canary-first upgradePolicy and the `kubectl label`
    /// commands in order. Exit 1 when some node would be left without a usable driver (named on
    /// stderr)
    Generate(GenerateArgs),
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// `gpufleet snapshot --format json` (or jsonl) files of the fleet; repeatable. Node names
    /// are taken as the Kubernetes node names
    #[arg(long = "for", value_name = "SNAPSHOT", required = true)]
    pub snapshots: Vec<PathBuf>,

    /// The cluster's current GPU Operator objects (YAML or JSON files): an NVIDIADriver, or a
    /// ClusterPolicy with `driver.useNvidiaDriverCRD: true`, selects --nvidiadriver; a single
    /// ClusterPolicy gives the name to patch
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Read the cluster's objects (as `policy check --kubectl`) to detect its mode (ClusterPolicy
    /// or NVIDIADriver), OpenShift (a MachineConfigPool resource, or a ClusterPolicy named
    /// gpu-cluster-policy), the ClusterPolicy's name and the operator release
    #[arg(long)]
    pub kubectl: bool,

    /// The kubectl to run: `kubectl`, `oc`, or a path
    #[arg(
        long,
        value_name = "BIN",
        default_value = "kubectl",
        requires = "kubectl"
    )]
    pub kubectl_bin: String,

    /// kubeconfig context for --kubectl [default: the current one]
    #[arg(long, value_name = "NAME", requires = "kubectl")]
    pub context: Option<String>,

    /// One NVIDIADriver per node pool (by GPU architecture) plus `driver.useNvidiaDriverCRD:
    /// true`, instead of a ClusterPolicy patch [default: when the cluster already uses them]
    #[arg(long)]
    pub nvidiadriver: bool,

    /// OpenShift's object names: ClusterPolicy gpu-cluster-policy, namespace
    /// nvidia-gpu-operator [default: detected with --kubectl, else Helm's cluster-policy,
    /// gpu-operator]
    #[arg(long)]
    pub openshift: bool,

    /// The driver version for every pool, checked against each pool's GPUs [default: per pool,
    /// the newest dated GPU Operator default driver (data/driver-branches.toml) that fits its
    /// GPUs, up to the chosen operator release]
    #[arg(long, value_name = "VERSION")]
    pub driver_version: Option<String>,

    /// The GPU Operator release the output is for (25.3, 25.10, 26.3, 26.7) [default: with
    /// --kubectl the cluster's, else the newest]
    #[arg(long, value_name = "VERSION")]
    pub operator_version: Option<String>,

    /// A canary node (upgraded first; every other node keeps the skip label until the canaries
    /// pass); repeatable [default: the first node of each pool, by name]
    #[arg(long, value_name = "NODE")]
    pub canary: Vec<String>,

    /// The node label that routes a node to its pool's NVIDIADriver
    #[arg(long, value_name = "KEY", default_value = policy::generate::POOL_LABEL)]
    pub pool_label: String,

    /// The ClusterPolicy to patch [default: the platform's, or the one given/read]
    #[arg(long, value_name = "NAME")]
    pub cluster_policy: Option<String>,

    /// The GPU Operator's namespace, for the ConfigMaps [default: the platform's]
    #[arg(long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,

    /// How far after now a report's scanned_at may be before it is a merge finding and never
    /// preferred (clock skew), as seconds (600) or with units (10m) [default: 10m]
    #[arg(long, value_name = "DURATION", value_parser = crate::snapshot::collected::parse_clock_skew)]
    pub clock_skew: Option<std::time::Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum PolicyFormat {
    /// `file:line: severity[code]: message`, then the source
    #[default]
    Text,
    /// One JSON document: {"findings": [...], "summary": {...}}
    Json,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).multiple(true).args(["files", "kubectl"])))]
pub struct CheckArgs {
    /// YAML or JSON files (several documents each; `List` objects are read item by item;
    /// 16 MiB at most each)
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Also read the cluster's ClusterPolicies, NVIDIADrivers, GPUClusters, MachineConfigs (those writing
    /// modprobe.d / modules-load.d files), MachineConfigPools and the module-parameter
    /// ConfigMaps, and each node's GPU Operator upgrade state and skip labels, with
    /// `kubectl get … -o json` (your kubeconfig and context)
    #[arg(long)]
    pub kubectl: bool,

    /// The kubectl to run: `kubectl`, `oc`, or a path
    #[arg(
        long,
        value_name = "BIN",
        default_value = "kubectl",
        requires = "kubectl"
    )]
    pub kubectl_bin: String,

    /// kubeconfig context for --kubectl [default: the current one]
    #[arg(long, value_name = "NAME", requires = "kubectl")]
    pub context: Option<String>,

    /// Also compare the policy with a fleet: a `gpufleet snapshot --format json` (or jsonl)
    /// file; repeatable (a node in several files: the newest scanned_at wins)
    #[arg(long, value_name = "SNAPSHOT")]
    pub against: Vec<PathBuf>,

    /// How far after now a report's scanned_at may be before it is a merge finding of --against's files and never
    /// preferred (clock skew), as seconds (600) or with units (10m) [default: 10m]
    #[arg(long, value_name = "DURATION", requires = "against", value_parser = crate::snapshot::collected::parse_clock_skew)]
    pub clock_skew: Option<std::time::Duration>,

    /// Check against the CRDs of this GPU Operator release (25.3, 25.10, 26.3, 26.7; a patch
    /// such as v26.3.0 picks its minor's committed release) [default: with --kubectl the
    /// cluster's (its operator Deployment's version label or image tag), else the newest]
    #[arg(long, value_name = "VERSION")]
    pub operator_version: Option<String>,

    /// Output format
    #[arg(long, value_enum, default_value_t)]
    pub format: PolicyFormat,
}

/// The nodes of several snapshot files, one per name (the newest `scanned_at` wins), as
/// every collected-file scan reads them ([`crate::fleet::scan::Files`]).
/// `clock_skew`: `--clock-skew`, else [`crate::snapshot::collected::DEFAULT_CLOCK_SKEW`].
pub fn load_nodes(
    files: &[PathBuf],
    clock_skew: Option<std::time::Duration>,
) -> Result<Vec<crate::model::NodeReport>, String> {
    let files = crate::fleet::scan::Files::read(
        files.to_vec(),
        clock_skew.unwrap_or(crate::snapshot::collected::DEFAULT_CLOCK_SKEW),
    )?;
    crate::snapshot::collected::say_findings(&files.findings);
    Ok(files
        .reports()?
        .0
        .into_collected()
        .map(|c| c.report)
        .collect())
}

pub fn run(args: &PolicyArgs) -> anyhow::Result<u8> {
    match &args.command {
        PolicyCommand::Check(a) => check(a),
        PolicyCommand::Generate(a) => generate(a),
    }
}

fn generate(a: &GenerateArgs) -> anyhow::Result<u8> {
    let fail = |e: &str| {
        eprintln!("gpufleet: {}", terminal_safe(e));
        Ok(2)
    };
    let mut release = match a.operator_version.as_deref().map(policy::schemas::release) {
        None => policy::schemas::newest(),
        Some(Ok(r)) => r,
        Some(Err(e)) => return fail(&e),
    };
    let nodes = match load_nodes(&a.snapshots, a.clock_skew) {
        Ok(n) => n,
        Err(e) => return fail(&e),
    };
    let mut docs = Vec::new();
    for f in &a.files {
        match policy::load_file(f) {
            Ok(d) => docs.extend(d),
            Err(e) => return fail(&e.to_string()),
        }
    }
    let mut said = Vec::new();
    if a.kubectl {
        let k = policy::kubectl::Kubectl {
            bin: a.kubectl_bin.clone(),
            context: a.context.clone(),
        };
        match policy::kubectl::read_cluster(&k) {
            Ok((d, _)) => docs.extend(d),
            Err(e) => return fail(&e.to_string()),
        }
        let (seen, note) = policy::kubectl::operator_version(&k);
        said.push(note.message);
        if a.operator_version.is_none()
            && let Some(Ok(r)) = seen.as_deref().map(policy::schemas::release)
        {
            release = r;
        }
    }
    let seen = policy::generate::detect(&docs);
    let mode = if a.nvidiadriver || seen.nvidiadriver.is_some() {
        policy::generate::Mode::NvidiaDriver
    } else {
        policy::generate::Mode::ClusterPolicy
    };
    if let (false, Some(why)) = (a.nvidiadriver, &seen.nvidiadriver) {
        said.push(format!("NVIDIADriver objects: {why}"));
    }
    let platform = if a.openshift || seen.openshift.is_some() {
        policy::generate::Platform::OpenShift
    } else {
        policy::generate::Platform::Helm
    };
    if let (false, Some(why)) = (a.openshift, &seen.openshift) {
        said.push(format!("OpenShift names: {why}"));
    }
    let opts = policy::generate::Options {
        mode,
        platform,
        release,
        driver_version: a.driver_version.clone(),
        canaries: a.canary.clone(),
        pool_label: a.pool_label.clone(),
        cluster_policy: a.cluster_policy.clone().or(seen.cluster_policy),
        namespace: a.namespace.clone(),
    };
    let g = policy::generate::generate(&nodes, &opts);
    let mut out = std::io::stdout().lock();
    for line in g.yaml.lines() {
        writeln!(out, "{}", terminal_safe(line))?;
    }
    for n in said.iter().chain(&g.notes) {
        eprintln!("gpufleet: {}", terminal_safe(n));
    }
    for (n, why) in &g.blocked {
        eprintln!(
            "gpufleet: blocked: {}: {}",
            terminal_safe(n),
            terminal_safe(why)
        );
    }
    Ok(u8::from(!g.blocked.is_empty()))
}

fn check(a: &CheckArgs) -> anyhow::Result<u8> {
    let mut release = match a.operator_version.as_deref().map(policy::schemas::release) {
        None => policy::schemas::newest(),
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            eprintln!("gpufleet: {}", terminal_safe(&e));
            return Ok(2);
        }
    };
    if let Some(v) = &a.operator_version
        && v.trim_start_matches('v') != release.tag.trim_start_matches('v')
        && v.matches('.').count() == 2
    {
        eprintln!(
            "gpufleet: checking against the CRDs of GPU Operator {} (the committed {} release), not {}: fields added in between are taken as present",
            release.tag,
            release.minor,
            terminal_safe(v)
        );
    }
    let mut docs = Vec::new();
    for f in &a.files {
        match policy::load_file(f) {
            Ok(d) => docs.extend(d),
            Err(e) => {
                eprintln!("gpufleet: {}", terminal_safe(&e.to_string()));
                return Ok(2);
            }
        }
    }
    let mut notes = Vec::new();
    let mut cluster_nodes = Vec::new();
    if a.kubectl {
        let k = policy::kubectl::Kubectl {
            bin: a.kubectl_bin.clone(),
            context: a.context.clone(),
        };
        match policy::kubectl::read_cluster(&k).and_then(|(d, mut n)| {
            let nodes = policy::kubectl::read_nodes(&k)?;
            n.extend(policy::kubectl::upgrade_label_notes(&nodes));
            Ok((d, n, nodes))
        }) {
            Ok((d, n, nodes)) => {
                docs.extend(d);
                notes = n;
                cluster_nodes = nodes;
                // The cluster's release decides the CRDs unless --operator-version does.
                let (seen, mut note) = policy::kubectl::operator_version(&k);
                match (
                    seen.as_deref().map(policy::schemas::release),
                    &a.operator_version,
                ) {
                    (Some(Ok(r)), None) => release = r,
                    (Some(Err(e)), None) => {
                        note.message = format!("{}; {e}: checked against the newest", note.message)
                    }
                    (_, Some(v)) => {
                        note.message = format!("{}; --operator-version {v} decides", note.message)
                    }
                    (None, None) => {}
                }
                notes.push(note);
            }
            Err(e) => {
                eprintln!("gpufleet: {}", terminal_safe(&e.to_string()));
                return Ok(2);
            }
        }
    }
    let nodes = match load_nodes(&a.against, a.clock_skew) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("gpufleet: {}", terminal_safe(&e));
            return Ok(2);
        }
    };
    let mut findings = notes;
    findings.extend(policy::check_for(&docs, release).map_err(anyhow::Error::msg)?);
    findings.extend(policy::node_overlaps(&docs, &cluster_nodes));
    findings.extend(policy::against::compare_with_labels(
        &docs,
        &nodes,
        &cluster_nodes,
    ));
    print_findings(&findings, a.format)?;
    Ok(policy::exit_code(&findings))
}

fn location(f: &Finding) -> String {
    match (f.line, f.end_line) {
        (Some(l), Some(e)) => format!("{}:{l}-{e}", f.file),
        (Some(l), None) => format!("{}:{l}", f.file),
        _ if f.path.is_empty() => format!("{}: {}", f.file, f.object),
        _ => format!("{}: {} {}", f.file, f.object, f.path),
    }
}

/// Prints findings as text or JSON (escaped: file contents never reach the terminal raw).
pub fn print_findings(findings: &[Finding], format: PolicyFormat) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    match format {
        PolicyFormat::Json => {
            let doc = serde_json::json!({
                "findings": findings,
                "summary": {
                    "error": count(Severity::Error),
                    "warning": count(Severity::Warning),
                    "info": count(Severity::Info),
                },
            });
            writeln!(out, "{}", json_string(&doc, true)?)?;
        }
        PolicyFormat::Text => {
            for f in findings {
                let node = f
                    .node
                    .as_ref()
                    .map(|n| format!(" node {n}:"))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{}: {}[{}]:{} {}\n    source: {}",
                    terminal_safe(&location(f)),
                    f.severity.as_str(),
                    f.code,
                    terminal_safe(&node),
                    terminal_safe(&f.message),
                    f.source
                )?;
            }
            writeln!(
                out,
                "{} error(s), {} warning(s), {} info",
                count(Severity::Error),
                count(Severity::Warning),
                count(Severity::Info)
            )?;
        }
    }
    Ok(())
}
