//! Ansible inventories, INI and YAML (docs/architecture.md "Inventories"; Ansible's "How to
//! build your inventory"): hosts, groups, `children`, host and group `vars`, ranges
//! (`gpu[01:16]`, `node[a:f]`, `x[0:10:2]`), and the connection variables gpufleet honours:
//! `ansible_host`, `ansible_port`, `ansible_user`, `ansible_ssh_private_key_file` (and their
//! old `ansible_ssh_*` spellings), plus `gpufleet_root` (the root prefix) and `gpufleet_canary`.
//! Other variables become labels (scalars only). Variable precedence is Ansible's (ansible-core
//! 2.19, tests/oracle_ansible.rs): the inventory's group variables (`all`, then the host's
//! groups by depth, `ansible_group_priority`, name), `group_vars/all`, `group_vars/<group>` in
//! the same order, the inventory's host variables, `host_vars/<host>` ([`vars_files`], beside
//! the inventory). INI values are typed as Ansible's INI plugin types them ([`literal`]:
//! Python's `literal_eval`, so `True`/`False` booleans, `None` null, numbers as Python prints
//! them, quotes removed, lists and maps no label); `[2001:db8::1]:2203` is an IPv6 host with a port.
//! `ansible_ssh_args`, `ansible_ssh_common_args` and `ansible_ssh_extra_args` are read as ssh
//! reads the command line Ansible builds from them ([`ssh_args`]: `-J`, `-o ProxyJump=`, `-o
//! ProxyCommand=`, `-p`, `-l`, `-i`, `-o Port=`, …; other options warned once, naming the
//! host). Connection variables gpufleet does not honour (`ansible_connection` other than ssh,
//! passwords, …) give one warning each. A vault-encrypted value
//! (`!vault`, or `$ANSIBLE_VAULT;…` text) is never used as text: an error for a variable gpufleet
//! uses, a warning (and no label) for another. A connection variable that is a list or a map is
//! an error. A UTF-8 byte order mark before the first line is skipped.
//!
//! YAML is read with the `saphyr` crate (line numbers from its marked nodes). INI is read here:
//! Ansible's INI dialect (host lines of `host k=v …`, `[g:vars]`, `[g:children]`, `host:port`)
//! is not what INI crates such as `rust-ini` parse.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

use super::source::NodeSpec;
use super::{InventoryError, Origin, expand_home};
use crate::diag::closest;

mod literal;
mod pattern;
mod ssh_args;
mod vars_files;
mod yaml11;
pub use pattern::expand_range;
use pattern::host_pattern;

/// A variable's value and its 1-based line.
type Var = (String, usize);

#[derive(Debug, Default)]
struct Group {
    vars: BTreeMap<String, Var>,
    children: Vec<String>,
    hosts: Vec<String>,
}

#[derive(Debug)]
struct Host {
    line: usize,
    vars: BTreeMap<String, (String, usize)>,
}

/// An inventory as read, before precedence is applied.
#[derive(Debug, Default)]
struct Model {
    groups: BTreeMap<String, Group>,
    hosts: Vec<(String, Host)>,
    index: BTreeMap<String, usize>,
}

impl Model {
    fn group(&mut self, name: &str) -> &mut Group {
        self.groups.entry(name.to_string()).or_default()
    }

    fn host(&mut self, name: &str, line: usize) -> &mut Host {
        let i = match self.index.get(name) {
            Some(i) => *i,
            None => {
                self.hosts.push((
                    name.to_string(),
                    Host {
                        line,
                        vars: BTreeMap::new(),
                    },
                ));
                self.index.insert(name.to_string(), self.hosts.len() - 1);
                self.hosts.len() - 1
            }
        };
        &mut self.hosts[i].1
    }

    fn add_host(&mut self, group: &str, name: &str, line: usize) {
        self.host(name, line);
        let g = self.group(group);
        if !g.hosts.iter().any(|h| h == name) {
            g.hosts.push(name.to_string());
        }
    }

    fn add_child(&mut self, parent: &str, child: &str) {
        self.group(child);
        let g = self.group(parent);
        if !g.children.iter().any(|c| c == child) {
            g.children.push(child.to_string());
        }
    }
}

/// Connection variables, by what they set.
const HOST_VARS: [&str; 2] = ["ansible_host", "ansible_ssh_host"];
const PORT_VARS: [&str; 2] = ["ansible_port", "ansible_ssh_port"];
const USER_VARS: [&str; 2] = ["ansible_user", "ansible_ssh_user"];
const KEY_VARS: [&str; 2] = ["ansible_ssh_private_key_file", "ansible_private_key_file"];

/// Whether gpufleet uses variable `k` (a connection variable or `gpufleet_*`), not as a label.
fn used(k: &str) -> bool {
    HOST_VARS.contains(&k)
        || PORT_VARS.contains(&k)
        || USER_VARS.contains(&k)
        || KEY_VARS.contains(&k)
        || k == "gpufleet_root"
        || k == "gpufleet_canary"
        || ssh_args::VARS.contains(&k)
}

/// How an ansible-vault ciphertext starts; a YAML `!vault` value is read as one ([`var_value`]).
const VAULT: &str = "$ANSIBLE_VAULT;";

/// Turns the model into nodes, with warnings for connection settings gpufleet does not use.
fn finish(
    m: Model,
    file: &str,
    base: &Path,
) -> Result<(Vec<NodeSpec>, Vec<String>), InventoryError> {
    let mut m = m;
    // Every group without a parent is a child of `all`.
    let named: Vec<String> = m.groups.keys().filter(|g| *g != "all").cloned().collect();
    let has_parent: BTreeSet<String> = m
        .groups
        .values()
        .flat_map(|g| g.children.iter().cloned())
        .collect();
    for g in &named {
        if !has_parent.contains(g) {
            m.add_child("all", g);
        }
    }
    // Parents of each group, and depths from `all` (the longest path), refusing cycles.
    let mut parents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, g) in &m.groups {
        for c in &g.children {
            parents.entry(c.as_str()).or_default().push(name.as_str());
        }
    }
    fn depth<'a>(
        g: &'a str,
        parents: &BTreeMap<&'a str, Vec<&'a str>>,
        memo: &mut BTreeMap<&'a str, usize>,
        stack: &mut Vec<&'a str>,
    ) -> Result<usize, String> {
        if let Some(d) = memo.get(g) {
            return Ok(*d);
        }
        if stack.contains(&g) {
            return Err(format!(
                "groups are children of each other: {} → {g}",
                stack.join(" → ")
            ));
        }
        stack.push(g);
        let mut d = 0;
        for p in parents.get(g).into_iter().flatten() {
            d = d.max(depth(p, parents, memo, stack)? + 1);
        }
        stack.pop();
        memo.insert(g, d);
        Ok(d)
    }
    let mut memo = BTreeMap::new();
    for g in m.groups.keys() {
        depth(g, &parents, &mut memo, &mut Vec::new())
            .map_err(|e| InventoryError(format!("{file}: {e}")))?;
    }
    // Each host's groups: where it is listed, and their ancestors.
    let mut direct: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, g) in &m.groups {
        for h in &g.hosts {
            direct.entry(h.as_str()).or_default().push(name.as_str());
        }
    }
    // ansible_group_priority, set in the inventory itself (Ansible reads it there only).
    let mut priority: BTreeMap<&str, i64> = BTreeMap::new();
    for (name, g) in &m.groups {
        if let Some((p, line)) = g.vars.get("ansible_group_priority") {
            let p = p.parse::<i64>().map_err(|_| {
                InventoryError(format!(
                    "{file}:{line}: ansible_group_priority `{p}` of group `{name}` is not a whole number"
                ))
            })?;
            priority.insert(name.as_str(), p);
        }
    }
    let mut group_files: BTreeMap<&str, BTreeMap<String, Var>> = BTreeMap::new();
    for name in m.groups.keys() {
        let v = vars_files::load(base, "group_vars", name)?;
        if !v.is_empty() {
            group_files.insert(name.as_str(), v);
        }
    }
    let mut warned = BTreeSet::new();
    let mut warnings = Vec::new();
    let mut specs = Vec::new();
    for (name, host) in &m.hosts {
        let mut groups: BTreeSet<&str> = BTreeSet::new();
        let mut todo: Vec<&str> = direct.get(name.as_str()).cloned().unwrap_or_default();
        while let Some(g) = todo.pop() {
            if groups.insert(g) {
                todo.extend(parents.get(g).into_iter().flatten().copied());
            }
        }
        groups.remove("all");
        if groups.is_empty() {
            groups.insert("ungrouped");
        }
        let mut ordered: Vec<&str> = groups.iter().copied().collect();
        // Ansible's sort_groups: depth, then ansible_group_priority, then name.
        ordered.sort_by_key(|g| {
            (
                memo.get(g).copied().unwrap_or(1),
                priority.get(g).copied().unwrap_or(1),
                *g,
            )
        });
        // Ansible's precedence: the inventory's group vars (all, then the host's groups in
        // order), group_vars/all, group_vars/<group> in the same order, the inventory's host
        // vars, host_vars/<host>.
        let mut vars: BTreeMap<&str, &(String, usize)> = BTreeMap::new();
        let chain = || std::iter::once("all").chain(ordered.iter().copied());
        for g in chain() {
            if let Some(grp) = m.groups.get(g) {
                for (k, v) in &grp.vars {
                    vars.insert(k, v);
                }
            }
        }
        for g in chain() {
            for (k, v) in group_files.get(g).into_iter().flatten() {
                vars.insert(k, v);
            }
        }
        for (k, v) in &host.vars {
            vars.insert(k, v);
        }
        let own_files = vars_files::load(base, "host_vars", name)?;
        for (k, v) in &own_files {
            vars.insert(k, v);
        }
        vars.remove("ansible_group_priority");
        let origin = |line: usize| Origin {
            source: file.to_string(),
            line: Some(line),
            item: None,
        };
        if let Some((k, (_, line))) = vars
            .iter()
            .find(|(k, (v, _))| used(k) && v.starts_with(VAULT))
        {
            return Err(InventoryError(format!(
                "{file}:{line}: host `{name}`: {k} is vault-encrypted; vault-encrypted values are not supported: decrypt it (`ansible-vault decrypt`) or set it in ~/.ssh/config (HostName, Port, User, IdentityFile)"
            )));
        }
        let get = |keys: &[&str]| keys.iter().rev().find_map(|k| vars.get(k).copied());
        let port = match get(&PORT_VARS) {
            Some((p, line)) => Some(match p.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(InventoryError(format!(
                        "{file}:{line}: ansible_port `{p}` of host `{name}` is not a port (1-65535)"
                    )));
                }
            }),
            None => None,
        };
        let mut spec = NodeSpec {
            name: name.clone(),
            host: get(&HOST_VARS).map(|(v, _)| v.clone()),
            user: get(&USER_VARS).map(|(v, _)| v.clone()),
            identity_file: get(&KEY_VARS).map(|(v, _)| expand_home(v, base)),
            port,
            root: vars.get("gpufleet_root").map(|(v, _)| v.clone()),
            groups: ordered
                .iter()
                .filter(|g| **g != "ungrouped")
                .map(|g| g.to_string())
                .collect(),
            origin: Some(origin(host.line)),
            ..Default::default()
        };
        // `ansible_ssh_args` comes before Ansible's own `-o Port=`, `-o IdentityFile=`, `-o
        // User=` (ssh.py `_build_command`): they go on the command line after it, so its
        // values win as ssh takes the first.
        let first = vars.contains_key(ssh_args::FIRST);
        let own = if first {
            vec![
                ("Port", spec.port.take().map(|p| p.to_string())),
                (
                    "IdentityFile",
                    spec.identity_file.take().map(|k| k.display().to_string()),
                ),
                ("User", spec.user.take()),
            ]
        } else {
            Vec::new()
        };
        spec.ssh_args = ssh_args::read(
            &vars,
            file,
            name,
            host.line,
            &own,
            &mut warned,
            &mut warnings,
        )?;
        if let Some((c, line)) = vars.get("gpufleet_canary") {
            spec.canary = match c.to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" | "on" => true,
                "false" | "no" | "0" | "off" => false,
                _ => {
                    return Err(InventoryError(format!(
                        "{file}:{line}: gpufleet_canary `{c}` is not true or false"
                    )));
                }
            };
        }
        for (k, (v, line)) in &vars {
            if used(k) {
                continue;
            }
            let vault = v.starts_with(VAULT);
            if vault && !k.starts_with("ansible_") {
                if warned.insert(k.to_string()) {
                    warnings.push(format!(
                        "{file}:{line}: {k} is vault-encrypted; gpufleet does not decrypt it, so it is no label"
                    ));
                }
                continue;
            }
            let v = if vault {
                "(vault-encrypted)"
            } else {
                v.as_str()
            };
            let unsupported = match *k {
                "ansible_connection" => !matches!(v, "ssh" | "smart" | "paramiko"),
                k => {
                    k.starts_with("ansible_ssh_")
                        || matches!(k, "ansible_password" | "ansible_ssh_pass")
                }
            };
            if unsupported {
                if warned.insert(k.to_string()) {
                    warnings.push(format!(
                        "{file}:{line}: {k}={v} is not used: gpufleet connects over SSH with the host, port, user and key only"
                    ));
                }
                continue;
            }
            if !k.starts_with("ansible_") {
                spec.labels.insert(k.to_string(), v.to_string());
            }
        }
        specs.push(spec);
    }
    Ok((specs, warnings))
}

/// Parses an Ansible INI inventory. Errors are `file:line: message`.
pub fn parse_ini(text: &str, path: &Path) -> Result<(Vec<NodeSpec>, Vec<String>), InventoryError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let file = path.display().to_string();
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut m = Model::default();
    #[derive(Clone, Copy, PartialEq)]
    enum Kind {
        Hosts,
        Vars,
        Children,
    }
    let (mut group, mut kind) = ("ungrouped".to_string(), Kind::Hosts);
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let at = |msg: String| InventoryError(format!("{file}:{line}: {msg}"));
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(h) = l.strip_prefix('[')
            && !v6_host_line(l)
        {
            let h = h
                .strip_suffix(']')
                .ok_or_else(|| at(format!("{l:?}: a section header ends with `]`")))?;
            let (name, k) = match h.split_once(':') {
                None => (h, Kind::Hosts),
                Some((n, "vars")) => (n, Kind::Vars),
                Some((n, "children")) => (n, Kind::Children),
                Some((_, other)) => {
                    let hint = closest(other, ["vars", "children"])
                        .map(|s| format!("; did you mean `{s}`?"))
                        .unwrap_or_default();
                    return Err(at(format!(
                        "`[{h}]`: a section is [group], [group:vars] or [group:children]{hint}"
                    )));
                }
            };
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(at(format!("`[{h}]`: {name:?} is not a group name")));
            }
            group = name.to_string();
            kind = k;
            m.group(&group);
            continue;
        }
        match kind {
            Kind::Vars => {
                let (k, v) = l
                    .split_once('=')
                    .ok_or_else(|| at(format!("{l:?}: [{group}:vars] holds key=value lines")))?;
                let k = k.trim();
                if k.is_empty() {
                    return Err(at(format!("{l:?}: empty variable name")));
                }
                if let Some(v) = ini_value(k, v.trim()).map_err(at)? {
                    m.group(&group).vars.insert(k.to_string(), (v, line));
                }
            }
            Kind::Children => {
                if l.contains(char::is_whitespace) {
                    return Err(at(format!(
                        "{l:?}: [{group}:children] holds one group name per line"
                    )));
                }
                if l == group {
                    return Err(at(format!("group `{l}` cannot be its own child")));
                }
                m.add_child(&group, l);
            }
            Kind::Hosts => {
                let words =
                    shlex::split(l).ok_or_else(|| at(format!("{l:?}: a quote is not closed")))?;
                let words: Vec<String> = words
                    .into_iter()
                    .take_while(|w| !w.starts_with('#'))
                    .collect();
                let Some((pattern, vars)) = words.split_first() else {
                    continue;
                };
                let (names, port) = host_pattern(pattern).map_err(at)?;
                let mut hv = BTreeMap::new();
                if let Some(p) = port {
                    hv.insert("ansible_port".to_string(), (p.to_string(), line));
                }
                for w in vars {
                    let (k, v) = w.split_once('=').ok_or_else(|| {
                        at(format!(
                            "`{w}` after host {pattern:?}: variables are key=value"
                        ))
                    })?;
                    if let Some(v) = ini_value(k, v).map_err(at)? {
                        hv.insert(k.to_string(), (v, line));
                    }
                }
                for n in names {
                    m.add_host(&group, &n, line);
                    m.host(&n, line).vars.extend(hv.clone());
                }
            }
        }
    }
    finish(m, &file, &base)
}

/// Whether an INI line that starts with `[` is a host line for an IPv6 address
/// (`[2001:db8::1]:2203 …`) rather than a section header: Ansible's header is `[name]` or
/// `[name:word]` alone on its line, and a line ending in `]` is always read as one.
fn v6_host_line(l: &str) -> bool {
    if l.ends_with(']') {
        // `[2001:db8::2]` alone is a (bad) section header to Ansible too.
        return false;
    }
    let first = l.split_whitespace().next().unwrap_or("");
    first
        .strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .is_some_and(|(addr, _)| addr.parse::<std::net::Ipv6Addr>().is_ok())
}

/// An INI value of variable `k` as Ansible's INI plugin types it ([`literal`]): its text,
/// `None` for `None` or for a list/map of a variable gpufleet does not use (no label). A list
/// or map of a variable gpufleet uses is an error.
fn ini_value(k: &str, v: &str) -> Result<Option<String>, String> {
    match literal::literal(v) {
        literal::Lit::Text(s) => Ok(Some(s)),
        literal::Lit::Null => Ok(None),
        literal::Lit::Container if used(k) => Err(format!(
            "{k}={v}: a list or map (as Ansible reads it); {k} takes one value"
        )),
        literal::Lit::Container => Ok(None),
    }
}

/// A YAML scalar as text; `None` for null, a list or a map.
fn scalar(n: &MarkedYaml) -> Option<String> {
    match &n.data {
        YamlData::Value(Scalar::String(s)) => Some(s.to_string()),
        YamlData::Value(Scalar::Integer(i)) => Some(i.to_string()),
        YamlData::Value(Scalar::Boolean(b)) => Some(b.to_string()),
        YamlData::Value(Scalar::FloatingPoint(f)) => Some(f.to_string()),
        YamlData::Representation(s, _, _) => Some(s.to_string()),
        YamlData::Tagged(_, inner) => scalar(inner),
        _ => None,
    }
}

/// A variable's value as text: [`scalar`], or for a `!vault` value its ciphertext starting with
/// [`VAULT`]. `None` for null, a list or a map.
fn var_value(n: &MarkedYaml) -> Option<String> {
    if let YamlData::Tagged(tag, inner) = &n.data
        && tag.suffix == "vault"
    {
        let text = scalar(inner).unwrap_or_default();
        return Some(if text.starts_with(VAULT) {
            text
        } else {
            format!("{VAULT}{text}")
        });
    }
    scalar(n)
}

/// The source text of `n` (from `lines`, the document's lines) when it is a plain scalar on one
/// line; `None` for a quoted, block, tagged, anchored or aliased one, or one saphyr's span does
/// not match.
fn plain_text<'a>(n: &MarkedYaml, lines: &[&'a str]) -> Option<&'a str> {
    let YamlData::Value(v) = &n.data else {
        return None;
    };
    let (s, e) = (n.span.start, n.span.end);
    if s.line() != e.line() {
        return None;
    }
    let line = lines.get(s.line().checked_sub(1)?)?;
    let byte = |col: usize| {
        line.char_indices()
            .map(|(i, _)| i)
            .chain([line.len()])
            .nth(col)
    };
    let raw = line.get(byte(s.col())?..byte(e.col())?)?.trim_end();
    if raw.is_empty() || raw.starts_with(['\'', '"', '|', '>', '!', '&', '*']) {
        return None;
    }
    match v {
        Scalar::String(t) if t.as_ref() != raw => None,
        _ => Some(raw),
    }
}

/// Reads variable `vk: vv` of `owner` (`host `h`` or `group `g``): its text and line, `None`
/// for null or a list/map of a variable gpufleet does not use (no label). A list or map of a
/// variable gpufleet uses is an error.
fn yaml_var(
    owner: &str,
    vk: &MarkedYaml,
    vv: &MarkedYaml,
    at: &dyn Fn(&MarkedYaml, String) -> InventoryError,
    lines: &[&str],
) -> Result<Option<(String, Var)>, InventoryError> {
    let Some(key) = scalar(vk) else {
        return Ok(None);
    };
    if let Some(val) = var_value(vv) {
        // A plain scalar as Ansible's YAML 1.1 loader types it ([`yaml11`]).
        let val = match plain_text(vv, lines) {
            Some(raw) => match yaml11::resolve(raw) {
                yaml11::Plain::Value(t) => t,
                yaml11::Plain::Str => raw.to_string(),
            },
            None => val,
        };
        return Ok(Some((key, (val, vk.span.start.line()))));
    }
    let mut inner = vv;
    while let YamlData::Tagged(_, i) = &inner.data {
        inner = i;
    }
    let shape = match &inner.data {
        YamlData::Value(Scalar::Null) => return Ok(None),
        YamlData::Sequence(_) => "a list",
        YamlData::Mapping(_) => "a map",
        _ => "not a single value",
    };
    if used(&key) {
        return Err(at(
            vv,
            format!("{owner}: {key} is {shape}; it takes one value (`{key}: …`)"),
        ));
    }
    Ok(None)
}

/// Parses an Ansible YAML inventory (`all: {hosts: {h: {vars}}, vars: {}, children: {g: …}}`).
/// Errors are `file:line:column: message` (a YAML syntax error, an unknown key of a group with
/// the closest one, a value of the wrong shape).
pub fn parse_yaml(text: &str, path: &Path) -> Result<(Vec<NodeSpec>, Vec<String>), InventoryError> {
    let file = path.display().to_string();
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    // saphyr expands aliases with a node budget only: a big string aliased many times gets
    // past it. The policy reader's budget counts bytes too; its refusals stand here.
    if let Err(e) = crate::yaml::parse_stream(text)
        && e.message.contains("refused")
    {
        return Err(InventoryError(format!(
            "{file}:{}:{}: {}",
            e.line, e.col, e.message
        )));
    }
    let docs = MarkedYaml::load_from_str(text).map_err(|e| {
        InventoryError(format!(
            "{file}:{}:{}: {}",
            e.marker().line(),
            e.marker().col() + 1,
            e.info()
        ))
    })?;
    let at = |n: &MarkedYaml, msg: String| {
        InventoryError(format!(
            "{file}:{}:{}: {msg}",
            n.span.start.line(),
            n.span.start.col() + 1
        ))
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut m = Model::default();
    let Some(doc) = docs.first() else {
        return finish(m, &file, &base);
    };
    let YamlData::Mapping(top) = &doc.data else {
        if matches!(doc.data, YamlData::Value(Scalar::Null)) {
            return finish(m, &file, &base);
        }
        return Err(at(
            doc,
            "an Ansible YAML inventory is a map of groups (`all:`)".into(),
        ));
    };
    fn group<'a>(
        m: &mut Model,
        name: &str,
        node: &MarkedYaml<'a>,
        at: &dyn Fn(&MarkedYaml, String) -> InventoryError,
        lines: &[&str],
        depth: usize,
    ) -> Result<(), InventoryError> {
        if depth > 64 {
            return Err(at(node, "groups nested deeper than 64".into()));
        }
        m.group(name);
        let map = match &node.data {
            YamlData::Mapping(map) => map,
            YamlData::Value(Scalar::Null) => return Ok(()),
            _ => {
                return Err(at(
                    node,
                    format!("group `{name}`: expected hosts, vars or children"),
                ));
            }
        };
        for (k, v) in map.iter() {
            let key = scalar(k).unwrap_or_default();
            match key.as_str() {
                "hosts" => {
                    let YamlData::Mapping(hosts) = &v.data else {
                        if matches!(v.data, YamlData::Value(Scalar::Null)) {
                            continue;
                        }
                        return Err(at(
                            v,
                            format!("`{name}.hosts`: a map of host names (`gpu01:`)"),
                        ));
                    };
                    for (hk, hv) in hosts.iter() {
                        let pattern =
                            scalar(hk).ok_or_else(|| at(hk, "a host name is text".into()))?;
                        let line = hk.span.start.line();
                        let (names, port) = host_pattern(&pattern).map_err(|e| at(hk, e))?;
                        let mut vars = BTreeMap::new();
                        if let Some(p) = port {
                            vars.insert("ansible_port".to_string(), (p.to_string(), line));
                        }
                        match &hv.data {
                            YamlData::Mapping(hmap) => {
                                for (vk, vv) in hmap.iter() {
                                    let owner = format!("host `{pattern}`");
                                    if let Some((k, v)) = yaml_var(&owner, vk, vv, at, lines)? {
                                        vars.insert(k, v);
                                    }
                                }
                            }
                            YamlData::Value(Scalar::Null) => {}
                            _ => {
                                return Err(at(
                                    hv,
                                    format!(
                                        "host `{pattern}`: its variables are a map (`ansible_host: 10.0.0.1`)"
                                    ),
                                ));
                            }
                        }
                        for n in names {
                            m.add_host(name, &n, line);
                            m.host(&n, line).vars.extend(vars.clone());
                        }
                    }
                }
                "vars" => match &v.data {
                    YamlData::Mapping(vars) => {
                        for (vk, vv) in vars.iter() {
                            let owner = format!("group `{name}`");
                            if let Some((k, v)) = yaml_var(&owner, vk, vv, at, lines)? {
                                m.group(name).vars.insert(k, v);
                            }
                        }
                    }
                    YamlData::Value(Scalar::Null) => {}
                    _ => return Err(at(v, format!("`{name}.vars`: a map of variables"))),
                },
                "children" => match &v.data {
                    YamlData::Mapping(children) => {
                        for (ck, cv) in children.iter() {
                            let child =
                                scalar(ck).ok_or_else(|| at(ck, "a group name is text".into()))?;
                            if child == name {
                                return Err(at(
                                    ck,
                                    format!("group `{child}` cannot be its own child"),
                                ));
                            }
                            m.add_child(name, &child);
                            group(m, &child, cv, at, lines, depth + 1)?;
                        }
                    }
                    YamlData::Value(Scalar::Null) => {}
                    _ => return Err(at(v, format!("`{name}.children`: a map of groups"))),
                },
                other => {
                    let hint = closest(other, ["hosts", "vars", "children"])
                        .map(|s| format!("; did you mean `{s}`?"))
                        .unwrap_or_default();
                    return Err(at(
                        k,
                        format!(
                            "group `{name}`: unknown key `{other}` (hosts, vars, children){hint}"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
    for (k, v) in top.iter() {
        let name = scalar(k).ok_or_else(|| at(k, "a group name is text".into()))?;
        group(&mut m, &name, v, &at, &lines, 0)?;
    }
    finish(m, &file, &base)
}

#[cfg(test)]
mod tests;
