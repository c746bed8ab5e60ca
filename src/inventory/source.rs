//! Where the nodes come from: `-i FILE` (a gpufleet TOML inventory, an Ansible INI or YAML
//! inventory, or a plain host list, told apart by [`detect`] or forced with
//! `--inventory-format`), `-i -` (a host list on stdin), `-i slurm:[PARTITION|NODELIST]`
//! (`sinfo` and `scontrol show nodes`) and `-i k8s:[SELECTOR]` (`kubectl get nodes -o json`).
//! Every loader gives today's [`Node`]s, each with its [`Origin`] (docs/architecture.md,
//! "Inventories").

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{DrainSpec, Inventory, InventoryError, Node, Origin, local_user};

/// The kinds of inventory `--inventory-format` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InventoryFormat {
    /// gpufleet's own TOML (`config/inventory.example.toml`).
    Toml,
    /// Ansible's INI inventory (`[group]`, `[group:vars]`, `[group:children]`).
    AnsibleIni,
    /// Ansible's YAML inventory (`all: {hosts, vars, children}`).
    AnsibleYaml,
    /// Slurm: `sinfo` + `scontrol show nodes` (the source `slurm:`).
    Slurm,
    /// Kubernetes: `kubectl get nodes -o json` (the source `k8s:`).
    K8s,
    /// One `[user@]host[:port]` per line, `#` comments.
    Hosts,
}

impl InventoryFormat {
    /// The names `--inventory-format` takes, in the order of [`InventoryFormat::ALL`].
    pub const NAMES: [&'static str; 6] = [
        "toml",
        "ansible-ini",
        "ansible-yaml",
        "slurm",
        "k8s",
        "hosts",
    ];
    pub const ALL: [InventoryFormat; 6] = [
        InventoryFormat::Toml,
        InventoryFormat::AnsibleIni,
        InventoryFormat::AnsibleYaml,
        InventoryFormat::Slurm,
        InventoryFormat::K8s,
        InventoryFormat::Hosts,
    ];

    pub fn as_str(self) -> &'static str {
        let i = Self::ALL.iter().position(|f| *f == self).unwrap_or(0);
        Self::NAMES[i]
    }
}

impl std::str::FromStr for InventoryFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| {
                let hint = crate::diag::closest(s, Self::NAMES)
                    .map(|c| format!("; did you mean `{c}`?"))
                    .unwrap_or_default();
                format!(
                    "unknown inventory format `{s}` (one of {}){hint}",
                    Self::NAMES.join(", ")
                )
            })
    }
}

/// What `-i` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file (its kind detected, or forced).
    File(PathBuf),
    /// `-`: a host list on stdin.
    Stdin,
    /// `slurm:` or `slurm:ARG`: a partition, or a Slurm node list (`gpu[1-4]`).
    Slurm(Option<String>),
    /// `k8s:` or `k8s:SELECTOR`: a label selector for `kubectl get nodes -l`.
    K8s(Option<String>),
}

impl Source {
    /// Reads `-i`'s value: `-`, `slurm:…`, `k8s:…` (also `kubernetes:…`), else a file path
    /// (`./slurm:x` names a file of that name).
    pub fn parse(arg: &Path) -> Source {
        let s = arg.to_string_lossy();
        let rest = |p: &str| {
            let r = s.strip_prefix(p)?;
            Some(Some(r.to_string()).filter(|r| !r.is_empty()))
        };
        if s == "-" {
            Source::Stdin
        } else if let Some(r) = rest("slurm:") {
            Source::Slurm(r)
        } else if let Some(r) = rest("k8s:").or_else(|| rest("kubernetes:")) {
            Source::K8s(r)
        } else {
            Source::File(arg.to_path_buf())
        }
    }
}

/// A node as a loader found it, before `~/.ssh/config` and the defaults fill what it leaves
/// unset ([`resolve`]).
#[derive(Debug, Clone, Default)]
pub struct NodeSpec {
    pub name: String,
    /// Address or DNS name; the name when `None`.
    pub host: Option<String>,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub identity_file: Option<PathBuf>,
    pub root: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub groups: Vec<String>,
    pub canary: bool,
    pub drain: Option<DrainSpec>,
    pub origin: Option<Origin>,
    /// ssh command-line options (Ansible's `ansible_ssh_common_args` and
    /// `ansible_ssh_extra_args`), read before `~/.ssh/config` as ssh reads them.
    pub ssh_args: Option<super::ssh_config::CommandLine>,
}

/// The nodes of `specs`, with `~/.ssh/config` filling what a node leaves unset, as for the TOML
/// inventory (its `HostName` for the host, then `Port`, `User`, `IdentityFile`,
/// `CertificateFile`), then port 22, the local user and root prefix `/`. Errors: an empty name
/// or host, a name given twice, port 0, a host with whitespace or control characters; each
/// names the node's origin.
pub fn resolve(
    specs: Vec<NodeSpec>,
    ssh: Option<&crate::inventory::ssh_config::ClientConfig>,
    warn: &mut super::ssh_config::Warnings,
) -> Result<Vec<Node>, InventoryError> {
    let mut seen: BTreeMap<String, Option<Origin>> = BTreeMap::new();
    let mut nodes = Vec::with_capacity(specs.len());
    for s in specs {
        nodes.push(resolve_one(s, &mut seen, ssh, warn)?);
    }
    Ok(nodes)
}

/// [`resolve`] for a node list another program printed (`scontrol`, `kubectl`): one odd node
/// (an empty name, a name with whitespace or control characters, one listed twice, a bad host)
/// is left out with a warning naming it and why, and the other nodes are kept — a cluster's
/// list is not the operator's file to fix. The warnings come back beside the nodes.
pub fn resolve_listed(
    specs: Vec<NodeSpec>,
    ssh: Option<&crate::inventory::ssh_config::ClientConfig>,
    warn: &mut super::ssh_config::Warnings,
) -> (Vec<Node>, Vec<String>) {
    let mut seen: BTreeMap<String, Option<Origin>> = BTreeMap::new();
    let mut nodes = Vec::with_capacity(specs.len());
    let mut skipped = Vec::new();
    for s in specs {
        let odd = s.name.chars().any(|c| c.is_whitespace() || c.is_control());
        let result = if odd {
            Err(InventoryError(format!(
                "{}node name `{}` has whitespace or control characters",
                s.origin
                    .as_ref()
                    .map(|o| format!("{o}: "))
                    .unwrap_or_default(),
                // Raw: whoever shows the warning escapes it once (docs/domain.md, trust model).
                s.name
            )))
        } else {
            resolve_one(s, &mut seen, ssh, warn)
        };
        match result {
            Ok(n) => nodes.push(n),
            Err(e) => skipped.push(format!("{}; that node is left out", e.0)),
        }
    }
    (nodes, skipped)
}

/// One node of [`resolve`]; `seen` holds the names before it (and their origins).
fn resolve_one(
    s: NodeSpec,
    seen: &mut BTreeMap<String, Option<Origin>>,
    ssh: Option<&crate::inventory::ssh_config::ClientConfig>,
    warn: &mut super::ssh_config::Warnings,
) -> Result<Node, InventoryError> {
    let at = |msg: String| {
        InventoryError(match &s.origin {
            Some(o) => format!("{o}: {msg}"),
            None => msg,
        })
    };
    if s.name.trim().is_empty() {
        return Err(at("node name is empty".into()));
    }
    if let Some(prev) = seen.get(&s.name) {
        let first = prev
            .as_ref()
            .map(|o| format!(" (first at {o})"))
            .unwrap_or_default();
        return Err(at(format!("node `{}` is listed twice{first}", s.name)));
    }
    seen.insert(s.name.clone(), s.origin.clone());
    let host = s.host.clone().unwrap_or_else(|| s.name.clone());
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(at(format!(
            "host {:?} of node `{}` is not a host name or address",
            host, s.name
        )));
    }
    if s.port == Some(0) {
        return Err(at(format!("node `{}`: port 0 is not a port", s.name)));
    }
    let cmdline = s.ssh_args.clone().unwrap_or_default();
    let empty;
    let ssh_for_node = match ssh {
        Some(c) => Some(c),
        // The options alone, as `ssh -F none OPTIONS HOST` reads them.
        None if !cmdline.is_empty() => {
            empty = super::ssh_config::ClientConfig::empty();
            Some(&empty)
        }
        None => None,
    };
    let cfg = match ssh_for_node {
        Some(c) => Some(
            super::ssh_config::query_with(c, &cmdline, &host, s.user.as_deref(), s.port, warn)
                .map_err(|e| at(format!("node `{}`: {e}", s.name)))?,
        ),
        None => None,
    };
    let cfg = cfg.as_ref();
    let original = host.clone();
    // Without a config ssh still lowercases the host it connects to, an address excepted
    // (`ssh -G -F none GPU01` says `hostname gpu01`).
    let host = cfg
        .and_then(|c| c.host_name.clone())
        .unwrap_or_else(|| super::ssh_config::connect_name(&host));
    let port = s.port.or_else(|| cfg.and_then(|c| c.port)).unwrap_or(22);
    let user = s
        .user
        .clone()
        .or_else(|| cfg.and_then(|c| c.user.clone()))
        .unwrap_or_else(local_user);
    let mut route = super::ssh_config::route(
        ssh,
        &cfg.cloned().unwrap_or_default(),
        &original,
        &host,
        port,
        &user,
        None,
        warn,
    )
    .map_err(|e| at(format!("node `{}`: {e}", s.name)))?;
    // The inventory's keys (its key variable, then the command-line options' own, each
    // once) replace ~/.ssh/config's keys.
    let mut own_keys: Vec<std::path::PathBuf> = s.identity_file.iter().cloned().collect();
    for k in cfg
        .map(|c| &c.identity_files[..cmdline.identity_files().min(c.identity_files.len())])
        .unwrap_or_default()
    {
        if !own_keys.contains(k) {
            own_keys.push(k.clone());
        }
    }
    let identity_file = if own_keys.is_empty() {
        cfg.and_then(|c| c.identity_files.first().cloned())
    } else {
        route.more_identity_files = own_keys.split_off(1);
        own_keys.pop()
    };
    Ok(Node {
        host,
        port,
        user,
        identity_file,
        certificate_file: cfg.and_then(|c| c.certificate_file.clone()),
        root: s.root.clone().unwrap_or_else(|| "/".to_string()),
        labels: s.labels,
        groups: s.groups,
        canary: s.canary,
        recipe: None,
        drain: s.drain,
        origin: s.origin,
        route,
        name: s.name,
    })
}

/// Tells the kind of an inventory file from its name and text: `.toml` is gpufleet's TOML,
/// `.yml`/`.yaml` Ansible YAML, `.ini`/`.cfg` Ansible INI; otherwise the text decides (a
/// `---` or `NAME:` first line: YAML; text that parses as TOML: TOML; a `[group]` header or a
/// `k=v`: Ansible INI; bare `[user@]host[:port]` lines: a host list). `None`: it cannot tell
/// (the caller asks for `--inventory-format`); a file with nothing but comments is TOML (an
/// empty gpufleet inventory).
pub fn detect(path: &Path, text: &str) -> Option<InventoryFormat> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("toml") => return Some(InventoryFormat::Toml),
        Some("yml" | "yaml") => return Some(InventoryFormat::AnsibleYaml),
        Some("ini" | "cfg") => return Some(InventoryFormat::AnsibleIni),
        _ => {}
    }
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
        .collect();
    let Some(first) = lines.first() else {
        return Some(InventoryFormat::Toml);
    };
    if *first == "---" || (first.ends_with(':') && !first.starts_with('[')) {
        return Some(InventoryFormat::AnsibleYaml);
    }
    // An Ansible INI file never parses as TOML (`[g:vars]`, `host k=v` lines are not TOML).
    if toml::from_str::<serde::de::IgnoredAny>(text).is_ok() {
        return Some(InventoryFormat::Toml);
    }
    if lines.iter().any(|l| l.starts_with('[') && l.ends_with(']'))
        || lines.iter().any(|l| l.contains('='))
    {
        return Some(InventoryFormat::AnsibleIni);
    }
    if lines.iter().all(|l| {
        l.split('#')
            .next()
            .is_some_and(|t| t.split_whitespace().count() == 1)
    }) {
        return Some(InventoryFormat::Hosts);
    }
    None
}

/// Loads the inventory `-i` names. `format` forces the kind (`--inventory-format`); `stdin` is
/// read for `-i -`; `ssh` fills what nodes leave unset. Errors are `file:line: message` where
/// the source has lines.
pub fn load(
    arg: &Path,
    format: Option<InventoryFormat>,
    ssh: Option<&crate::inventory::ssh_config::ClientConfig>,
    stdin: &mut dyn Read,
) -> Result<Inventory, InventoryError> {
    let source = Source::parse(arg);
    let (inv_path, specs, warnings) = match (&source, format) {
        (Source::Slurm(a), None | Some(InventoryFormat::Slurm)) => {
            let (specs, w) = super::slurm::load(a.as_deref())?;
            (arg.to_path_buf(), specs, w)
        }
        (Source::K8s(a), None | Some(InventoryFormat::K8s)) => {
            let (specs, w) = super::k8s::load(a.as_deref())?;
            (arg.to_path_buf(), specs, w)
        }
        (Source::Slurm(_) | Source::K8s(_), Some(f)) => {
            return Err(InventoryError(format!(
                "-i {}: a command source; --inventory-format {} applies to files and stdin",
                arg.display(),
                f.as_str()
            )));
        }
        (Source::Stdin, f) => {
            let text = crate::limits::read_text_from(stdin, crate::limits::Kind::Inventory)
                .map_err(|e| InventoryError(format!("<stdin>: {e}")))?;
            let name = Path::new("<stdin>");
            return from_text(name, &text, f.unwrap_or(InventoryFormat::Hosts), ssh);
        }
        (Source::File(p), f) => {
            let text = crate::limits::read_to_string(p, crate::limits::Kind::Inventory)
                .map_err(|e| InventoryError(format!("{}: {e}", p.display())))?;
            let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
            let kind = match f {
                Some(f) => f,
                None => detect(p, text).ok_or_else(|| {
                    InventoryError(format!(
                        "{}: cannot tell which kind of inventory this is; say it with --inventory-format {}",
                        p.display(),
                        InventoryFormat::NAMES.join("|")
                    ))
                })?,
            };
            return from_text(p, text, kind, ssh);
        }
    };
    let mut warn = super::ssh_config::Warnings::default();
    let (nodes, skipped) = resolve_listed(specs, ssh, &mut warn);
    listed_some(&nodes, &skipped, &arg.display().to_string())?;
    let mut warnings = warnings;
    warnings.extend(skipped);
    warnings.extend(warn.into_vec());
    Ok(Inventory {
        path: inv_path,
        nodes,
        known_hosts: None,
        read_only: false,
        warnings,
    })
}

/// Parses inventory `text` of kind `kind` read from `path` (a file, or `<stdin>`); a UTF-8 byte
/// order mark before it is skipped (Windows editors write one).
pub fn from_text(
    path: &Path,
    text: &str,
    kind: InventoryFormat,
    ssh: Option<&crate::inventory::ssh_config::ClientConfig>,
) -> Result<Inventory, InventoryError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (specs, warnings) = match kind {
        InventoryFormat::Toml => return Inventory::parse_with(text, path, ssh),
        InventoryFormat::AnsibleIni => super::ansible::parse_ini(text, path)?,
        InventoryFormat::AnsibleYaml => super::ansible::parse_yaml(text, path)?,
        InventoryFormat::Hosts => (super::hosts::parse(text, path)?, Vec::new()),
        InventoryFormat::Slurm => {
            super::slurm::parse_nodes(text, &path.display().to_string(), None)?
        }
        InventoryFormat::K8s => super::k8s::parse(text, &path.display().to_string())?,
    };
    let listed = matches!(kind, InventoryFormat::Slurm | InventoryFormat::K8s);
    let mut warn = super::ssh_config::Warnings::default();
    let (nodes, mut warnings) = if listed {
        let (nodes, skipped) = resolve_listed(specs, ssh, &mut warn);
        listed_some(&nodes, &skipped, &path.display().to_string())?;
        let mut w = warnings;
        w.extend(skipped);
        (nodes, w)
    } else {
        (resolve(specs, ssh, &mut warn)?, warnings)
    };
    warnings.extend(warn.into_vec());
    Ok(Inventory {
        path: path.to_path_buf(),
        nodes,
        known_hosts: None,
        read_only: false,
        warnings,
    })
}

/// A node list of which every node was left out is the inventory's error (the first reason
/// given), not an empty fleet.
fn listed_some(nodes: &[Node], skipped: &[String], source: &str) -> Result<(), InventoryError> {
    match skipped.first() {
        Some(first) if nodes.is_empty() => Err(InventoryError(format!(
            "{source}: every node listed was left out ({} of them); the first: {first}",
            skipped.len()
        ))),
        _ => Ok(()),
    }
}

/// How long a listing command (`sinfo`, `scontrol`, `kubectl`) may run.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `argv` (no shell) with stdin closed, and returns its stdout. Errors: it cannot start
/// (named, with a hint that it must be on PATH), it runs past `timeout` (killed), or it exits
/// non-zero (its stderr's last lines in the message, raw: the caller escapes it).
pub fn run_tool(argv: &[&str], timeout: Duration) -> Result<String, String> {
    let shown = argv.join(" ");
    let (prog, args) = argv.split_first().ok_or("no command")?;
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{shown}`: cannot run {prog} ({e}); is it installed and on PATH?"))?;
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut s);
        }
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.take(64 * 1024).read_to_end(&mut s);
        }
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{shown}` did not finish in {} s; stopped",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("`{shown}`: {e}")),
        }
    };
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if !status.success() {
        let stderr = String::from_utf8_lossy(&stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "`{shown}` failed ({status}){}",
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {}", tail.join(" / "))
            }
        ));
    }
    String::from_utf8(stdout).map_err(|_| format!("`{shown}` printed text that is not UTF-8"))
}

/// The groups in `groups` with duplicates dropped, first occurrence kept.
pub(crate) fn dedup(groups: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    groups
        .into_iter()
        .filter(|g| seen.insert(g.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_and_formats_parse() {
        assert_eq!(Source::parse(Path::new("-")), Source::Stdin);
        assert_eq!(Source::parse(Path::new("slurm:")), Source::Slurm(None));
        assert_eq!(
            Source::parse(Path::new("slurm:gpu")),
            Source::Slurm(Some("gpu".into()))
        );
        assert_eq!(
            Source::parse(Path::new("k8s:nvidia.com/gpu.present=true")),
            Source::K8s(Some("nvidia.com/gpu.present=true".into()))
        );
        assert_eq!(
            Source::parse(Path::new("./slurm:x")),
            Source::File("./slurm:x".into())
        );
        for (i, n) in InventoryFormat::NAMES.iter().enumerate() {
            assert_eq!(
                n.parse::<InventoryFormat>().unwrap(),
                InventoryFormat::ALL[i]
            );
            assert_eq!(InventoryFormat::ALL[i].as_str(), *n);
        }
        let e = "ansible-yml".parse::<InventoryFormat>().unwrap_err();
        assert!(e.contains("did you mean `ansible-yaml`?"), "{e}");
    }

    #[test]
    fn detection_by_name_then_text() {
        let d = |p: &str, t: &str| detect(Path::new(p), t);
        assert_eq!(d("x.toml", "whatever"), Some(InventoryFormat::Toml));
        assert_eq!(d("hosts.yml", ""), Some(InventoryFormat::AnsibleYaml));
        assert_eq!(d("inv", "---\nall:\n"), Some(InventoryFormat::AnsibleYaml));
        assert_eq!(
            d("inv", "# c\nall:\n  hosts:\n"),
            Some(InventoryFormat::AnsibleYaml)
        );
        assert_eq!(
            d(
                "inv",
                "[defaults]\nuser = \"ops\"\n[[nodes]]\nname = \"a\"\n"
            ),
            Some(InventoryFormat::Toml)
        );
        assert_eq!(
            d(
                "hosts",
                "[gpu]\ngpu01 ansible_host=10.0.0.1\n[gpu:vars]\nansible_user=ops\n"
            ),
            Some(InventoryFormat::AnsibleIni)
        );
        assert_eq!(
            d("hosts", "gpu01\nops@gpu02:2222 # rack 2\n[::1]:22\n"),
            Some(InventoryFormat::Hosts)
        );
        assert_eq!(
            d("inv", "[defaults]\nport = 22\n"),
            Some(InventoryFormat::Toml)
        );
        assert_eq!(
            d("hosts", "[gpu]\ngpu01\n"),
            Some(InventoryFormat::AnsibleIni)
        );
        assert_eq!(d("hosts", "gpu01 gpu02 gpu03\n"), None);
        assert_eq!(d("empty", "# nothing\n"), Some(InventoryFormat::Toml));
    }

    #[test]
    fn resolve_fills_defaults_and_refuses_twins_and_bad_hosts() {
        let o = |l| {
            Some(Origin {
                source: "inv".into(),
                line: Some(l),
                item: None,
            })
        };
        let spec = |name: &str, line| NodeSpec {
            name: name.into(),
            origin: o(line),
            ..Default::default()
        };
        let n = resolve(vec![spec("a", 1)], None, &mut Default::default()).unwrap();
        assert_eq!(
            (n[0].host.as_str(), n[0].port, n[0].root.as_str()),
            ("a", 22, "/")
        );
        assert_eq!(n[0].origin.as_ref().unwrap().to_string(), "inv:1");
        let e = resolve(
            vec![spec("a", 1), spec("a", 7)],
            None,
            &mut Default::default(),
        )
        .unwrap_err()
        .0;
        assert_eq!(e, "inv:7: node `a` is listed twice (first at inv:1)");
        let bad = NodeSpec {
            host: Some("a b".into()),
            ..spec("x", 3)
        };
        assert!(
            resolve(vec![bad], None, &mut Default::default())
                .unwrap_err()
                .0
                .starts_with("inv:3: host \"a b\"")
        );
    }

    #[test]
    fn run_tool_reports_missing_failing_and_hung_tools() {
        let e = run_tool(&["/nonexistent/kubectl", "get"], TOOL_TIMEOUT).unwrap_err();
        assert!(e.contains("cannot run /nonexistent/kubectl"), "{e}");
        let e = run_tool(&["sh", "-c", "echo nope >&2; exit 3"], TOOL_TIMEOUT).unwrap_err();
        assert!(e.contains("failed") && e.contains("nope"), "{e}");
        let e = run_tool(&["sleep", "5"], Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("did not finish"), "{e}");
        assert_eq!(run_tool(&["echo", "hi"], TOOL_TIMEOUT).unwrap(), "hi\n");
    }
}
