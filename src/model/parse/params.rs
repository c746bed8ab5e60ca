//! NVIDIA module parameters: those in effect (/proc/driver/nvidia/params, `Key: value` lines as
//! nv-procfs.c prints them) and those configured (`options nvidia NVreg_<Key>=<value>` lines of
//! modprobe.d(5)). Pure: no I/O. docs/domain.md, "module parameters in effect", "module options
//! configured" and "Configuration drift".

use std::collections::BTreeMap;

use super::modconf;

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
/// several), read as modprobe reads it: `\` continuations joined, `#` comments, words split on
/// spaces and tabs ([`modconf::logical_lines`]; docs/domain.md "modprobe.d exactly as modprobe
/// reads it"). Module `nvidia` only (`nvidia-drm`, `nvidia_uvm` are other modules).
pub fn parse_options(text: &str) -> Vec<Configured> {
    let mut out = Vec::new();
    for line in modconf::logical_lines(text) {
        let words = modconf::words(&line);
        let [first, module, rest @ ..] = words.as_slice() else {
            continue;
        };
        if *first != "options" || !modconf::same_module(module, "nvidia") {
            continue;
        }
        let t = line.trim();
        for w in rest {
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

    /// CachyOS/CachyOS-PKGBUILDS#1678: cachyos-settings' /usr/lib/modprobe.d/nvidia.conf, verbatim.
    #[test]
    fn continued_options_line_as_modprobe_reads_it() {
        let text = "options nvidia \\\n    NVreg_UsePageAttributeTable=1 \\\n    NVreg_InitializeSystemMemoryAllocations=0 \\\n    NVreg_DynamicPowerManagement=0x02\n";
        let o = parse_options(text);
        let keys: Vec<&str> = o.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "UsePageAttributeTable",
                "InitializeSystemMemoryAllocations",
                "DynamicPowerManagement"
            ]
        );
        assert_eq!(o[2].value, "0x02");
        assert!(
            o[0].line
                .starts_with("options nvidia     NVreg_UsePageAttributeTable=1")
        );
        // A comment continued by `\\` swallows the next line; `#` later in a line is not one.
        assert!(parse_options("# options nvidia \\\nNVreg_A=1\n").is_empty());
        assert_eq!(
            parse_options("\toptions\tnvidia NVreg_A=1 NVreg_B=2\n").len(),
            2
        );
        // The file ends after a `\\`: that line ends there.
        assert_eq!(parse_options("options nvidia NVreg_A=1 \\").len(), 1);
        // Not the nvidia module; a no-break space is not a word break.
        assert!(parse_options("options nvidia_drm NVreg_A=1\n").is_empty());
        assert!(parse_options("options\u{a0}nvidia NVreg_A=1\n").is_empty());
    }

    #[test]
    fn values_compare_as_numbers_or_text() {
        assert!(same_value("0x02", "2"));
        assert!(!same_value("1", "0"));
        assert!(same_value("\"abc\"", "abc"));
        assert!(!same_value("abc", "abd"));
    }
}
