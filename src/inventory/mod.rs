//! The inventory: which nodes to scan and how to reach them (TOML; see
//! `config/inventory.example.toml`).
//!
//! Settings resolve per node as: the node's own value, else its groups' (a later group in the
//! node's `groups` list wins), else `[defaults]`, else built-in defaults (port 22, the local
//! user, root prefix `/`). Labels merge in the same order. Names and hosts may hold
//! ClusterShell-style ranges (`gpu[001-128]`); a host with a range must expand to as many
//! entries as the name. Errors name the file, line and column, and suggest the closest valid
//! key for a typo.

pub mod ansible;
pub mod hosts;
pub mod k8s;
pub mod range;
pub mod slurm;
pub mod source;
pub mod ssh_config;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::diag::{closest, line_col};

/// Settings shared by `[defaults]`, `[groups.NAME]` and `[[nodes]]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// SSH login user.
    pub user: Option<String>,
    /// SSH port.
    pub port: Option<u16>,
    /// Private key file (OpenSSH format); `~` and paths relative to the inventory work.
    pub identity_file: Option<String>,
    /// OpenSSH user certificate for the key (default: `<identity_file>-cert.pub` if present).
    pub certificate_file: Option<String>,
    /// Root prefix the probe reads under on the node (default `/`).
    pub root: Option<String>,
    /// Free-form labels, `key = "value"`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The upgrade recipe (a `[recipes.NAME]` of the config).
    pub recipe: Option<String>,
    /// How to drain the node before its upgrade.
    pub drain: Option<DrainSpec>,
    /// Jump hosts, first to last, as `ssh -J` takes them: `user@bastion:22,b2` (`none`: no
    /// jump host, even if ~/.ssh/config names one).
    pub jump: Option<String>,
}

/// The scheduler that drains a node, and how (the `drain` key of a group, `[defaults]` or node).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DrainSpec {
    /// `kubernetes` (kubectl cordon/drain/uncordon), `slurm` (scontrol update State=DRAIN /
    /// RESUME, read back with sinfo), `command` (your own commands), or `none`.
    pub backend: DrainBackend,
    /// The node's name in the scheduler when it differs; `{name}` is the inventory name.
    pub node_name: Option<String>,
    /// kubernetes: kubeconfig file and context (default: kubectl's own).
    pub kubeconfig: Option<String>,
    pub context: Option<String>,
    /// command: shell commands run here; `{node}` is the scheduler's node name. `status` exits 0
    /// once the node is drained (without it, `drain` finishing is enough).
    pub drain: Option<String>,
    pub status: Option<String>,
    pub uncordon: Option<String>,
}

/// Drain backends.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DrainBackend {
    Kubernetes,
    Slurm,
    Command,
    #[default]
    None,
}

/// A `[[nodes]]` entry: the [`Settings`] keys plus name, host, groups and canary. (Listed out
/// rather than flattened: serde cannot deny unknown keys through `flatten`.)
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Spanned<String>,
    host: Option<Spanned<String>>,
    #[serde(default)]
    groups: Vec<Spanned<String>>,
    #[serde(default)]
    canary: bool,
    user: Option<String>,
    port: Option<u16>,
    identity_file: Option<String>,
    certificate_file: Option<String>,
    root: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    recipe: Option<String>,
    drain: Option<DrainSpec>,
    jump: Option<String>,
}

/// Only the `[[nodes]]` of one part of an inventory ([`parse_raw`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNodes {
    nodes: Vec<RawNode>,
}

/// Inventories from this size on are parsed node by node ([`parse_raw`]).
const BY_NODE_FROM: usize = 256 * 1024;

/// Parses a gpufleet TOML inventory. The toml crate builds the whole document's tree first
/// (≈ 27 bytes per byte of text: 41 MB of memory for a 10,000-node, 1.5 MB inventory), so a
/// large inventory whose `[[nodes]]` tables each start a line and hold only node keys is
/// parsed as its head (everything before the first `[[nodes]]`) and then one `[[nodes]]` table
/// at a time, their spans moved to the whole text's offsets: the same result, a tree one node
/// large. Anything else — a multi-line string anywhere (a `[[nodes]]` line could be inside
/// one), another table after a `[[nodes]]`, nodes in the head, any part that does not parse —
/// is parsed whole, so errors are the toml crate's for the whole text.
///
/// Errors: the toml crate's (syntax, types, unknown keys).
fn parse_raw(text: &str) -> Result<RawInventory, toml::de::Error> {
    match by_node(text) {
        Some(raw) => Ok(raw),
        None => toml::from_str(text),
    }
}

/// Whether [`parse_raw`] parses `text` node by node (for the simulator's test that its large
/// inventories are).
#[cfg(test)]
pub(crate) fn parses_node_by_node(text: &str) -> bool {
    by_node(text).is_some()
}

/// [`parse_raw`]'s node-by-node path; `None` when it does not apply.
fn by_node(text: &str) -> Option<RawInventory> {
    if text.len() < BY_NODE_FROM || text.contains("\"\"\"") || text.contains("'''") {
        return None;
    }
    let mut starts = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line
            .split('#')
            .next()
            .is_some_and(|l| l.trim() == "[[nodes]]")
        {
            starts.push(at);
        }
        at += line.len();
    }
    let first = *starts.first()?;
    let mut raw: RawInventory = toml::from_str(&text[..first]).ok()?;
    if !raw.nodes.is_empty() {
        return None;
    }
    let moved = |s: &Spanned<String>, by: usize| {
        let span = s.span();
        Spanned::new(span.start + by..span.end + by, s.get_ref().clone())
    };
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        let part: RawNodes = toml::from_str(&text[start..end]).ok()?;
        for mut n in part.nodes {
            n.name = moved(&n.name, start);
            n.host = n.host.as_ref().map(|h| moved(h, start));
            n.groups = n.groups.iter().map(|g| moved(g, start)).collect();
            raw.nodes.push(n);
        }
    }
    Some(raw)
}

impl RawNode {
    fn settings(&self) -> Settings {
        Settings {
            user: self.user.clone(),
            port: self.port,
            identity_file: self.identity_file.clone(),
            certificate_file: self.certificate_file.clone(),
            root: self.root.clone(),
            labels: self.labels.clone(),
            recipe: self.recipe.clone(),
            drain: self.drain.clone(),
            jump: self.jump.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInventory {
    /// An inventory-level known_hosts file, relative to the inventory (read, and written by
    /// `accept-new`, in addition to ~/.ssh/known_hosts).
    known_hosts: Option<String>,
    /// Any source saying read-only makes write actions unreachable.
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    defaults: Settings,
    #[serde(default)]
    groups: BTreeMap<String, Settings>,
    #[serde(default)]
    nodes: Vec<RawNode>,
}

/// One node, every setting resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub identity_file: Option<PathBuf>,
    pub certificate_file: Option<PathBuf>,
    pub root: String,
    pub labels: BTreeMap<String, String>,
    pub groups: Vec<String>,
    pub canary: bool,
    pub recipe: Option<String>,
    /// The `drain` setting; `None` when no layer sets one (a rollout refuses such a node: an
    /// operator who wants no drain says `drain = { backend = "none" }`).
    pub drain: Option<DrainSpec>,
    /// Where the node was defined (`file:line`, or the command that listed it); `None` only
    /// for nodes made in code.
    pub origin: Option<Origin>,
    /// Jump hosts, `ProxyCommand` and the other SSH options from the inventory's `jump` and
    /// ~/.ssh/config (docs/ssh.md).
    pub route: ssh_config::Route,
}

/// Where a node came from: a file and its 1-based line, or a command's output and its line
/// (`scontrol show nodes --oneliner:3`), or a command and the item it printed
/// (`kubectl get nodes -o json: items[2]`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Origin {
    /// The file path, `<stdin>`, or the command line.
    pub source: String,
    /// 1-based line in `source`, when it has lines.
    pub line: Option<usize>,
    /// What in `source` when there is no line (`items[2]`).
    pub item: Option<String>,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.line, &self.item) {
            (Some(l), _) => write!(f, "{}:{l}", self.source),
            (None, Some(i)) => write!(f, "{}: {i}", self.source),
            (None, None) => f.write_str(&self.source),
        }
    }
}

#[cfg(test)]
impl Node {
    /// A node on port 22 as root with root prefix `/`, nothing else set (for unit tests).
    pub fn for_test(name: &str, host: &str) -> Node {
        Node {
            name: name.into(),
            host: host.into(),
            port: 22,
            user: "root".into(),
            identity_file: None,
            certificate_file: None,
            root: "/".into(),
            labels: BTreeMap::new(),
            groups: Vec::new(),
            canary: false,
            recipe: None,
            drain: None,
            origin: None,
            route: ssh_config::Route::default(),
        }
    }
}

/// A loaded inventory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inventory {
    /// The file, or the source as given (`slurm:`, `k8s:`, `-` for stdin).
    pub path: PathBuf,
    pub nodes: Vec<Node>,
    pub known_hosts: Option<PathBuf>,
    pub read_only: bool,
    /// What the source says that gpufleet does not use (an Ansible `ansible_ssh_common_args`,
    /// …), one line each, for the command to print once.
    pub warnings: Vec<String>,
}

/// An inventory error, formatted `file:line:column: message`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InventoryError(pub String);

pub(crate) fn expand_home(p: &str, base: &Path) -> PathBuf {
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(home) = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf())
    {
        return home.join(rest);
    }
    let path = PathBuf::from(p);
    if path.is_absolute() {
        path
    } else {
        base.join(path)
    }
}

/// The local user name, as ssh defaults to.
pub fn local_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "root".to_string())
}

impl Inventory {
    /// Reads and resolves the inventory at `path`.
    pub fn load(path: &Path) -> Result<Inventory, InventoryError> {
        let text = crate::limits::read_to_string(path, crate::limits::Kind::Inventory)
            .map_err(|e| InventoryError(format!("{}: {e}", path.display())))?;
        Inventory::parse(&text, path)
    }

    /// Reads the inventory at `path`, filling what it leaves unset (host name, user, port,
    /// identity file, certificate) from an OpenSSH client config (`~/.ssh/config` by default),
    /// as `ssh` would: the inventory's own values win.
    pub fn load_with_ssh_config(
        path: &Path,
        ssh: Option<&crate::inventory::ssh_config::ClientConfig>,
    ) -> Result<Inventory, InventoryError> {
        let text = crate::limits::read_to_string(path, crate::limits::Kind::Inventory)
            .map_err(|e| InventoryError(format!("{}: {e}", path.display())))?;
        Inventory::parse_with(&text, path, ssh)
    }

    /// Parses inventory text; `path` names it in messages and anchors relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<Inventory, InventoryError> {
        Inventory::parse_with(text, path, None)
    }

    /// [`Inventory::parse`] with an OpenSSH client config to fill unset values from.
    pub fn parse_with(
        text: &str,
        path: &Path,
        ssh: Option<&crate::inventory::ssh_config::ClientConfig>,
    ) -> Result<Inventory, InventoryError> {
        let at = |span: std::ops::Range<usize>, msg: String| {
            let (line, col) = line_col(text, span.start);
            InventoryError(format!("{}:{line}:{col}: {msg}", path.display()))
        };
        let raw: RawInventory = parse_raw(text).map_err(|e| {
            InventoryError(crate::diag::toml_error(
                &path.display().to_string(),
                text,
                &e,
            ))
        })?;
        let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mut nodes = Vec::new();
        let mut seen = BTreeSet::new();
        let mut warn = ssh_config::Warnings::default();
        let lines = crate::diag::LineIndex::new(text);
        for rn in &raw.nodes {
            if rn.name.get_ref().trim().is_empty() {
                return Err(at(rn.name.span(), "name is empty".into()));
            }
            let names = range::expand(rn.name.get_ref())
                .map_err(|e| at(rn.name.span(), format!("name: {e}")))?;
            if names.is_empty() {
                return Err(at(
                    rn.name.span(),
                    format!("name {:?} stands for no names", rn.name.get_ref()),
                ));
            }
            let hosts = match &rn.host {
                None => names.clone(),
                Some(h) if h.get_ref().contains(':') => {
                    // An IPv6 address ([::1] or ::1): taken literally, never a range.
                    let addr = h.get_ref().trim_start_matches('[').trim_end_matches(']');
                    vec![addr.to_string(); names.len()]
                }
                Some(h) if h.get_ref().trim().is_empty() => {
                    return Err(at(h.span(), "host is empty".into()));
                }
                Some(h) => {
                    let hs = range::expand(h.get_ref())
                        .map_err(|e| at(h.span(), format!("host: {e}")))?;
                    if hs.len() != 1 && hs.len() != names.len() {
                        return Err(at(
                            h.span(),
                            format!(
                                "host expands to {} entries but name {:?} to {}; they pair up one to one",
                                hs.len(),
                                rn.name.get_ref(),
                                names.len()
                            ),
                        ));
                    }
                    if hs.len() == 1 {
                        names.iter().map(|n| hs[0].replace("{name}", n)).collect()
                    } else {
                        hs
                    }
                }
            };
            let mut layers: Vec<&Settings> = vec![&raw.defaults];
            for g in &rn.groups {
                let settings = raw.groups.get(g.get_ref()).ok_or_else(|| {
                    let hint = closest(g.get_ref(), raw.groups.keys().map(String::as_str))
                        .map(|s| format!("; did you mean `{s}`?"))
                        .unwrap_or_default();
                    at(g.span(), format!("unknown group `{}`{hint}", g.get_ref()))
                })?;
                layers.push(settings);
            }
            let own = rn.settings();
            layers.push(&own);
            let pick = |f: fn(&Settings) -> Option<&String>| {
                layers.iter().rev().find_map(|s| f(s)).cloned()
            };
            let mut labels = BTreeMap::new();
            for l in &layers {
                labels.extend(l.labels.clone());
            }
            let port = layers.iter().rev().find_map(|s| s.port).unwrap_or(22);
            if port == 0 {
                return Err(at(
                    rn.name.span(),
                    format!("node `{}`: port 0 is not a port", rn.name.get_ref()),
                ));
            }
            let identity_file = pick(|s| s.identity_file.as_ref()).map(|p| expand_home(&p, &base));
            let certificate_file =
                pick(|s| s.certificate_file.as_ref()).map(|p| expand_home(&p, &base));
            for (name, host) in names.into_iter().zip(hosts) {
                if !seen.insert(name.clone()) {
                    return Err(at(rn.name.span(), format!("node `{name}` is listed twice")));
                }
                // ~/.ssh/config for this host, for what the inventory leaves unset.
                let own_user = pick(|s| s.user.as_ref());
                let explicit_port = layers.iter().rev().find_map(|s| s.port);
                let cfg = match ssh {
                    Some(c) => Some(
                        ssh_config::query(c, &host, own_user.as_deref(), explicit_port, &mut warn)
                            .map_err(|e| at(rn.name.span(), format!("node `{name}`: {e}")))?,
                    ),
                    None => None,
                };
                let cfg = cfg.as_ref();
                let original = host.clone();
                let host = cfg.and_then(|c| c.host_name.clone()).unwrap_or(host);
                let port = explicit_port
                    .or_else(|| cfg.and_then(|c| c.port))
                    .unwrap_or(port);
                let user = own_user
                    .or_else(|| cfg.and_then(|c| c.user.clone()))
                    .unwrap_or_else(local_user);
                let route = ssh_config::route(
                    ssh,
                    &cfg.cloned().unwrap_or_default(),
                    &original,
                    &host,
                    port,
                    &user,
                    pick(|s| s.jump.as_ref()).as_deref(),
                    &mut warn,
                )
                .map_err(|e| at(rn.name.span(), format!("node `{name}`: {e}")))?;
                let mut route = route;
                if identity_file.is_some() {
                    // The inventory's key replaces ~/.ssh/config's keys.
                    route.more_identity_files.clear();
                }
                nodes.push(Node {
                    host,
                    port,
                    user,
                    identity_file: identity_file
                        .clone()
                        .or_else(|| cfg.and_then(|c| c.identity_files.first().cloned())),
                    certificate_file: certificate_file
                        .clone()
                        .or_else(|| cfg.and_then(|c| c.certificate_file.clone())),
                    // `root = "/srv/captures/{name}"`: one root folder per node, as `host`.
                    root: pick(|s| s.root.as_ref())
                        .map_or_else(|| "/".to_string(), |r| r.replace("{name}", &name)),
                    labels: labels.clone(),
                    groups: rn.groups.iter().map(|g| g.get_ref().clone()).collect(),
                    canary: rn.canary,
                    recipe: pick(|s| s.recipe.as_ref()),
                    drain: layers.iter().rev().find_map(|s| s.drain.clone()),
                    origin: Some(Origin {
                        source: path.display().to_string(),
                        line: Some(lines.line(rn.name.span().start)),
                        item: None,
                    }),
                    route,
                    name,
                });
            }
        }
        Ok(Inventory {
            path: path.to_path_buf(),
            nodes,
            known_hosts: raw.known_hosts.map(|k| expand_home(&k, &base)),
            read_only: raw.read_only,
            warnings: warn.into_vec(),
        })
    }
}

/// Which nodes a command works on: `--node`, `--group`, `--label`. Node patterns and groups
/// are unions (`-n a -n b`, `-n 'a,b'`, `-g x -g y`); label values of one key are a union
/// (`-l rack=r1 -l rack=r2`) and different keys all apply (`-l rack=r2,gpu=h100`); `-l canary`
/// also selects the inventory's `canary = true` nodes; the three kinds intersect.
/// No selector selects every node.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Node names or patterns: ranges as in Slurm and ClusterShell (`gpu[001-008]`, brackets
    /// are always a numeric range, never a glob character class), `*` and `?` globs.
    pub nodes: Vec<String>,
    pub groups: Vec<String>,
    /// `key=value`, or `key` for any value; each value may hold several, comma-separated.
    pub labels: Vec<String>,
}

/// The error for a `-n` name `p` (from the operand `term`) that no inventory node matches.
fn no_such_node(inv: &Inventory, p: &str, term: &str) -> String {
    let hint = closest(p, inv.nodes.iter().map(|n| n.name.as_str()))
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default();
    // `sim-00[04]*` is `sim-0004*`: say so to whoever meant a character class.
    let read = if range::has_range(term) {
        format!(
            " (read from `{term}`: brackets are a node range as in ClusterShell and Slurm, not a \
             glob character class)"
        )
    } else {
        String::new()
    };
    format!("no node named `{p}`{read} in {}{hint}", inv.path.display())
}

/// Splits `a,b[1,3],c` on the commas outside brackets.
fn split_list(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0usize);
    for c in s.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// A node selector pattern against a name, case-sensitively, in polynomial time ([`crate::glob`]).
fn glob(pattern: &str, s: &str) -> bool {
    crate::glob::matches(pattern.as_bytes(), s.as_bytes(), false)
}

impl Selection {
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.groups.is_empty() && self.labels.is_empty()
    }

    /// The selected nodes, in inventory order. Errors when a selector matches nothing, naming it.
    pub fn apply<'a>(&self, inv: &'a Inventory) -> Result<Vec<&'a Node>, String> {
        // `-n` values are nodeset expressions (one code path with TOML names: range::parse),
        // each operand matched against the inventory, as nodeset matches wildcards against
        // its `all` nodes; several `-n` are a union.
        let by_name: BTreeSet<&str> = inv.nodes.iter().map(|n| n.name.as_str()).collect();
        let mut picked: Option<BTreeSet<String>> = None;
        for expr in &self.nodes {
            let terms = range::parse(expr).map_err(|e| format!("--node: {e}"))?;
            let names = range::combine(&terms, |t| {
                if t.is_group() {
                    return Err(format!("--node: {}", range::group_refusal(&t.text, expr)));
                }
                let mut hits = Vec::new();
                for p in &t.names {
                    let found: Vec<String> = if p.contains(['*', '?']) {
                        inv.nodes
                            .iter()
                            .filter(|n| glob(p, &n.name))
                            .map(|n| n.name.clone())
                            .collect()
                    } else if by_name.contains(p.as_str()) {
                        vec![p.clone()]
                    } else {
                        Vec::new()
                    };
                    if found.is_empty() {
                        return Err(no_such_node(inv, p, &t.text));
                    }
                    hits.extend(found);
                }
                Ok(hits)
            })
            .map_err(|e| {
                if e.starts_with("--node") || e.starts_with("no node") {
                    e
                } else {
                    format!("--node: {e}")
                }
            })?;
            picked.get_or_insert_with(BTreeSet::new).extend(names);
        }
        let mut requirements: Vec<(String, Option<String>)> = Vec::new();
        for l in self.labels.iter().flat_map(|l| split_list(l)) {
            let (k, v) = match l.split_once('=') {
                Some((k, v)) => (k.trim().to_string(), Some(v.trim().to_string())),
                None => (l.clone(), None),
            };
            if k.is_empty() {
                return Err(format!("--label `{l}`: expected key=value or key"));
            }
            requirements.push((k, v));
        }
        let node_ok = |n: &Node| picked.as_ref().is_none_or(|p| p.contains(&n.name));
        let group_ok =
            |n: &Node| self.groups.is_empty() || self.groups.iter().any(|g| n.groups.contains(g));
        // Values of one key are a union (`--label rack=r1 --label rack=r2`), keys intersect;
        // `--label canary` also selects the inventory's `canary = true` nodes.
        let mut by_key: BTreeMap<&str, Vec<Option<&str>>> = BTreeMap::new();
        for (k, v) in &requirements {
            by_key.entry(k.as_str()).or_default().push(v.as_deref());
        }
        let label_ok = |n: &Node| {
            by_key.iter().all(|(k, values)| {
                values.iter().any(|v| match v {
                    Some(v) => n.labels.get(*k).is_some_and(|x| x == v),
                    None => n.labels.contains_key(*k) || (*k == "canary" && n.canary),
                })
            })
        };
        for g in &self.groups {
            if !inv.nodes.iter().any(|n| n.groups.contains(g)) {
                return Err(format!("no node is in group `{g}`"));
            }
        }
        let chosen: Vec<&Node> = inv
            .nodes
            .iter()
            .filter(|n| node_ok(n) && group_ok(n) && label_ok(n))
            .collect();
        if chosen.is_empty() {
            return Err(if inv.nodes.is_empty() {
                format!("{} lists no nodes", inv.path.display())
            } else {
                format!("no node of {} matches the selection", inv.path.display())
            });
        }
        Ok(chosen)
    }
}

#[cfg(test)]
mod tests;
