//! `group_vars/` and `host_vars/` beside an Ansible inventory, as ansible-core 2.19's
//! `host_group_vars` plugin reads them (the oracle of tests/oracle_ansible.rs): for a group or
//! host `NAME`, the file `NAME`, `NAME.yml`, `NAME.yaml` or `NAME.json`, or every file under a
//! folder `NAME/` (recursively, in sorted order; only names without an extension or ending in
//! `.yml`, `.yaml`, `.json`, hidden files left out),
//! each a YAML (or JSON) map of variables. Later files win. Their variables rank above the
//! inventory file's own (docs: Ansible "Variable precedence": inventory group vars < group_vars/all
//! < group_vars/* < inventory host vars < host_vars/*). Beside a playbook they are read only by
//! `--playbook-dir`, which gpufleet does not have.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

use super::{VAULT, Var, used, yaml_var};
use crate::inventory::InventoryError;

/// The most files one group's or host's folder may hold (a mistaken folder fails fast).
const MAX_FILES: usize = 1000;

/// The files that hold `name`'s variables under `dir` (`…/group_vars` or `…/host_vars`), in
/// the order they are read.
fn files(dir: &Path, name: &str) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    if name.contains('/') || name == "." || name == ".." {
        return Ok(out);
    }
    let folder = dir.join(name);
    if folder.is_dir() {
        walk(&folder, &mut out, 0)?;
        return Ok(out);
    }
    for ext in ["", ".yml", ".yaml", ".json"] {
        let f = dir.join(format!("{name}{ext}"));
        if f.is_file() {
            out.push(f);
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) -> Result<(), String> {
    if depth > 16 {
        return Err(format!("{}: folders nested deeper than 16", dir.display()));
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        let base = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if base.starts_with('.') || base.ends_with('~') {
            continue;
        }
        if p.is_dir() {
            walk(&p, out, depth + 1)?;
        } else if p.is_file()
            && p.extension()
                .is_none_or(|e| matches!(e.to_str(), Some("yml" | "yaml" | "json")))
        {
            out.push(p);
            if out.len() > MAX_FILES {
                return Err(format!("{}: more than {MAX_FILES} files", dir.display()));
            }
        }
    }
    Ok(())
}

/// `name`'s variables from `base/<kind>/` (`kind`: `group_vars` or `host_vars`), later files
/// over earlier ones. Errors, `file:line:column: message`: a file that is not YAML, not a map,
/// over the inventory cap; a variable gpufleet uses that is a list or map, vault-encrypted, or
/// (for a port) not 1-65535.
pub(super) fn load(
    base: &Path,
    kind: &str,
    name: &str,
) -> Result<BTreeMap<String, Var>, InventoryError> {
    let dir = base.join(kind);
    let mut vars = BTreeMap::new();
    if !dir.is_dir() {
        return Ok(vars);
    }
    for f in files(&dir, name).map_err(InventoryError)? {
        let file = f.display().to_string();
        let text = crate::limits::read_to_string(&f, crate::limits::Kind::Inventory)
            .map_err(|e| InventoryError(format!("{file}: {e}")))?;
        let at = |n: &MarkedYaml, msg: String| {
            InventoryError(format!(
                "{file}:{}:{}: {msg}",
                n.span.start.line(),
                n.span.start.col() + 1
            ))
        };
        let docs = MarkedYaml::load_from_str(&text).map_err(|e| {
            InventoryError(format!(
                "{file}:{}:{}: {}",
                e.marker().line(),
                e.marker().col() + 1,
                e.info()
            ))
        })?;
        let Some(doc) = docs.first() else { continue };
        let map = match &doc.data {
            YamlData::Mapping(map) => map,
            YamlData::Value(Scalar::Null) => continue,
            _ => return Err(at(doc, format!("{kind}/{name}: a map of variables"))),
        };
        let owner = format!("{kind}/{name}");
        let lines: Vec<&str> = text.lines().collect();
        for (k, v) in map.iter() {
            let Some((key, (value, line))) = yaml_var(&owner, k, v, &at, &lines)? else {
                continue;
            };
            // Checked here, where the file is known (the inventory's own checks name its file).
            if used(&key) && value.starts_with(VAULT) {
                return Err(at(
                    k,
                    format!(
                        "{owner}: {key} is vault-encrypted; vault-encrypted values are not supported: decrypt it (`ansible-vault decrypt`) or set it in ~/.ssh/config"
                    ),
                ));
            }
            if super::PORT_VARS.contains(&key.as_str())
                && !value.parse::<u16>().is_ok_and(|p| p > 0)
            {
                return Err(at(
                    k,
                    format!("{owner}: {key} `{value}` is not a port (1-65535)"),
                ));
            }
            if key == "gpufleet_canary"
                && !matches!(
                    value.to_ascii_lowercase().as_str(),
                    "true" | "yes" | "1" | "on" | "false" | "no" | "0" | "off"
                )
            {
                return Err(at(
                    k,
                    format!("{owner}: gpufleet_canary `{value}` is not true or false"),
                ));
            }
            vars.insert(key, (value, line));
        }
    }
    Ok(vars)
}
