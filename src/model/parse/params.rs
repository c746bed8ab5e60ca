//! NVIDIA module parameters: those in effect (/proc/driver/nvidia/params, `Key: value` lines as
//! nv-procfs.c prints them) and those configured (`options nvidia NVreg_<Key>=<value>` lines of
//! modprobe.d(5)). Pure: no I/O. docs/domain.md, "module parameters in effect", "module options
//! configured" and "Configuration drift".

use std::collections::BTreeMap;

/// `/proc/driver/nvidia/params` as a map from key to its value text.
pub fn parse_in_effect(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let k = k.trim();
            (!k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                .then(|| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// One configured option: `options nvidia NVreg_<key>=<value>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    /// The key without `NVreg_` (as /proc/driver/nvidia/params names it).
    pub key: String,
    pub value: String,
    /// The line it came from.
    pub line: String,
}

/// The `options nvidia NVreg_K=V …` settings of one modprobe.d file, in order (a line may set
/// several). Module `nvidia` only (`nvidia-drm`, `nvidia_uvm` are other modules).
pub fn parse_options(text: &str) -> Vec<Configured> {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            continue;
        }
        let mut words = t.split_whitespace();
        if words.next() != Some("options") || words.next() != Some("nvidia") {
            continue;
        }
        for w in words {
            let Some((k, v)) = w.split_once('=') else {
                continue;
            };
            let Some(key) = k.strip_prefix("NVreg_") else {
                continue;
            };
            if key.is_empty() {
                continue;
            }
            out.push(Configured {
                key: key.to_string(),
                value: v.trim_matches('"').to_string(),
                line: t.to_string(),
            });
        }
    }
    out
}

/// An integer as modprobe and the driver read it: decimal or `0x` hex.
fn as_int(v: &str) -> Option<u64> {
    let v = v.trim().trim_matches('"');
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Whether a configured value equals the value in effect: integers compare as numbers (decimal
/// or 0x hex), anything else as strings (quotes dropped).
pub fn same_value(configured: &str, in_effect: &str) -> bool {
    match (as_int(configured), as_int(in_effect)) {
        (Some(a), Some(b)) => a == b,
        _ => configured.trim().trim_matches('"') == in_effect.trim().trim_matches('"'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_and_options() {
        let p = parse_in_effect(
            "ResmanDebugLevel: 4294967295\nDynamicPowerManagement: 2\nRegistryDwords: \"\"\nbad line\n",
        );
        assert_eq!(p["DynamicPowerManagement"], "2");
        assert_eq!(p["RegistryDwords"], "\"\"");
        assert_eq!(p.len(), 3);
        let o = parse_options(
            "# c\noptions nvidia NVreg_DynamicPowerManagement=0x02 NVreg_EnableResizableBar=1\noptions nvidia-drm modeset=1\n#options nvidia NVreg_X=1\noptions nvidia NVreg_RegistryDwords=\"A=1\"\n",
        );
        let keys: Vec<&str> = o.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "DynamicPowerManagement",
                "EnableResizableBar",
                "RegistryDwords"
            ]
        );
        assert_eq!(o[2].value, "A=1");
    }

    #[test]
    fn values_compare_as_numbers_or_text() {
        assert!(same_value("0x02", "2"));
        assert!(!same_value("1", "0"));
        assert!(same_value("\"abc\"", "abc"));
        assert!(!same_value("abc", "abd"));
    }
}
