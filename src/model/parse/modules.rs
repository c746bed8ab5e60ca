//! `/proc/modules`: loaded kernel modules with state and taint letters.
//!
//! Line format (torvalds/linux `kernel/module/procfs.c`):
//! `name size refcount used_by|- Live|Loading|Unloading 0x<addr> [(<taint>)]`. On kernels without
//! module unloading (CONFIG_MODULE_UNLOAD=n, like the real H200) refcount and used-by are both `-`;
//! the used-by list ends with a comma; the address is zero for unprivileged readers. procfs's own
//! parser rejects the `-` refcount and drops taint, hence this one.

use serde::{Deserialize, Serialize};

/// Module state, the fifth field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum ModuleState {
    Live,
    Loading,
    Unloading,
}

/// One line of /proc/modules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Reference count; `None` when the kernel prints `-` (no module unloading).
    pub refcount: Option<u64>,
    /// Modules that use this one (trailing comma removed); empty for `-`.
    pub used_by: Vec<String>,
    pub state: ModuleState,
    /// Taint letters without parentheses (`POE`, `OE`, `O`), empty when the module taints nothing.
    pub taint: String,
    /// The raw line.
    pub line: String,
}

/// A line that is not in the format above, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub line: String,
    pub why: &'static str,
}

fn parse_line(line: &str) -> Result<Module, &'static str> {
    let mut f = line.split_whitespace();
    let name = f.next().ok_or("empty line")?;
    let size = f
        .next()
        .ok_or("no size")?
        .parse::<u64>()
        .map_err(|_| "size is not a number")?;
    let refcount = match f.next().ok_or("no refcount")? {
        "-" => None,
        n => Some(n.parse::<u64>().map_err(|_| "refcount is not a number")?),
    };
    let used_by = match f.next().ok_or("no used-by list")? {
        "-" => Vec::new(),
        list => list
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    };
    let state = match f.next().ok_or("no state")? {
        "Live" => ModuleState::Live,
        "Loading" => ModuleState::Loading,
        "Unloading" => ModuleState::Unloading,
        _ => return Err("state is not Live, Loading or Unloading"),
    };
    let addr = f.next().ok_or("no address")?;
    if !addr.starts_with("0x") {
        return Err("address does not start with 0x");
    }
    let taint = match f.next() {
        None => String::new(),
        Some(t) => {
            let inner = t
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .ok_or("taint is not in parentheses")?;
            if !inner.bytes().all(|b| b.is_ascii_uppercase()) {
                return Err("taint letters are not A-Z");
            }
            inner.to_string()
        }
    };
    if f.next().is_some() {
        return Err("extra fields");
    }
    Ok(Module {
        name: name.to_string(),
        size,
        refcount,
        used_by,
        state,
        taint,
        line: line.to_string(),
    })
}

/// Parses every non-empty line; lines that do not fit the format are returned separately.
pub fn parse(text: &str) -> (Vec<Module>, Vec<BadLine>) {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match parse_line(line) {
            Ok(m) => good.push(m),
            Err(why) => bad.push(BadLine {
                line: line.to_string(),
                why,
            }),
        }
    }
    (good, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taint_variants_and_used_by() {
        let text = "nvidia 36966400 1393 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n\
nvidia_uvm 2232320 0 - Live 0x0000000000000000 (PO)\n\
nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\n\
nvidia 14299136 - - Live 0xffffffffc0400000 (O)\n\
drm_ttm_helper 12288 1 nvidia_drm, Live 0x0000000000000000\n";
        let (m, bad) = parse(text);
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(m[0].used_by, vec!["nvidia_uvm", "nvidia_modeset"]);
        assert_eq!(m[0].taint, "POE");
        assert_eq!(m[0].refcount, Some(1393));
        assert_eq!(m[1].taint, "PO");
        assert_eq!(m[2].taint, "OE");
        // The real H200: '-' refcount and used-by (no module unloading), real address.
        assert_eq!(m[3].refcount, None);
        assert!(m[3].used_by.is_empty());
        assert_eq!(m[3].taint, "O");
        assert_eq!(m[4].taint, "");
    }

    #[test]
    fn loading_and_unloading_states() {
        // Written from the format of kernel/module/procfs.c.
        let text = "nvidia_peermem 16384 0 - Loading 0x0000000000000000 (OE)\n\
nvidia_drm 151552 0 - Unloading 0x0000000000000000 (PO)\n";
        let (m, bad) = parse(text);
        assert!(bad.is_empty());
        assert_eq!(m[0].state, ModuleState::Loading);
        assert_eq!(m[1].state, ModuleState::Unloading);
    }

    #[test]
    fn malformed_lines_are_reported_not_fatal() {
        let text = "nvidia abc 0 - Live 0x0\nnvidia 1 0 - Zombie 0x0\nnvidia 1 0 - Live 0x0 POE\nok 1 0 - Live 0x0\nshort\n";
        let (m, bad) = parse(text);
        assert_eq!(m.len(), 1);
        assert_eq!(bad.len(), 4);
        assert_eq!(bad[0].why, "size is not a number");
    }
}
