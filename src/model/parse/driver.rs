//! `/proc/driver/nvidia/version`: module flavour, driver version and arch.
//!
//! Formats (NVIDIA/open-gpu-kernel-modules `utils.mk` and real samples; docs/domain.md, facts table):
//! open = `NVRM version: NVIDIA UNIX Open Kernel Module for <arch>  <ver>  <BuildType>  (<user>@<host>)  <date>`,
//! proprietary = `NVRM version: NVIDIA UNIX <arch> Kernel Module  <ver>  <date>`. Versions may have two
//! parts (`555.58`), dates may be localized or missing, the build host may be empty (`(nixbld@)`),
//! and Jetson boards print an L4T release (`35.3.1`) instead of a dGPU branch.

use serde::{Deserialize, Serialize};

/// The kernel module flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum Flavor {
    /// NVIDIA open kernel module (`Open Kernel Module for <arch>`; licence Dual MIT/GPL).
    Open,
    /// Proprietary module (`NVIDIA UNIX <arch> Kernel Module`; licence NVIDIA, taint `P`).
    Proprietary,
    /// No nvidia module loaded.
    None,
    /// A module is there but neither its banner nor its taint letters say which flavour.
    Unknown,
}

impl Flavor {
    pub fn as_str(self) -> &'static str {
        match self {
            Flavor::Open => "open",
            Flavor::Proprietary => "proprietary",
            Flavor::None => "none",
            Flavor::Unknown => "unknown",
        }
    }
}

/// What the version banner says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Banner {
    pub flavor: Flavor,
    /// Target arch of the build (`x86_64`, `aarch64`, `ppc64le`).
    pub arch: String,
    /// Driver version of the loaded module, 2 or 3 dot-separated numbers.
    pub version: Option<String>,
    /// The raw line the banner came from.
    pub line: String,
}

fn is_version(tok: &str) -> bool {
    let parts: Vec<&str> = tok.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Parses the first line of `text` that names a "Kernel Module"; `None` when no line does.
pub fn parse_banner(text: &str) -> Option<Banner> {
    text.lines().find_map(parse_line)
}

fn parse_line(line: &str) -> Option<Banner> {
    let (flavor, arch, after) = if let Some(i) = line.find("Open Kernel Module for ") {
        let after = &line[i + "Open Kernel Module for ".len()..];
        let arch = after.split_whitespace().next()?;
        let rest = &after[after.find(arch)? + arch.len()..];
        (Flavor::Open, arch, rest)
    } else {
        let i = line.find("NVIDIA UNIX ")?;
        let after = &line[i + "NVIDIA UNIX ".len()..];
        let mut words = after.split_whitespace();
        let arch = words.next()?;
        let next = words.next()?;
        if next != "Kernel" || words.next() != Some("Module") {
            return None;
        }
        let rest = &after[after.find("Module")? + "Module".len()..];
        (Flavor::Proprietary, arch, rest)
    };
    let version = after
        .split_whitespace()
        .find(|t| is_version(t))
        .map(str::to_string);
    Some(Banner {
        flavor,
        arch: arch.to_string(),
        version,
        line: line.to_string(),
    })
}

/// `/sys/module/nvidia/version`: a bare version and a newline; `None` if it is not a version.
pub fn parse_sys_version(text: &str) -> Option<String> {
    let v = text.trim();
    is_version(v).then(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Banner {
        parse_banner(s).unwrap_or_else(|| panic!("no banner in {s:?}"))
    }

    #[test]
    fn verbatim_samples_from_gpu_stack_md() {
        let cases = [
            (
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (dvs-builder@U16-A24-9-2)  Thu Oct 10 12:15:00 UTC 2024\nGCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n",
                Flavor::Open,
                "x86_64",
                Some("565.57.01"),
            ),
            (
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  525.60.11  Release Build  (archlinux-builder@localhost)  \nGCC version:  gcc version 12.2.0 (GCC) \n",
                Flavor::Open,
                "x86_64",
                Some("525.60.11"),
            ),
            (
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.58  Release Build  (portage@localhost)  Сб 29 июн 2024 14:36:22 MSK",
                Flavor::Open,
                "x86_64",
                Some("555.58"),
            ),
            (
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  515.43.04  Release Build  (roo",
                Flavor::Open,
                "x86_64",
                Some("515.43.04"),
            ),
            (
                "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  35.3.1  Release Build  (buildbrain@mobile-u64-6289-d7000)  Sun Mar 19 08:09:33 PDT 2023\nGCC version:  gcc version 9.3.0 (Buildroot 2020.08) ",
                Flavor::Open,
                "aarch64",
                Some("35.3.1"),
            ),
            (
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.173.02  Tue Jun 23 08:38:17 UTC 2026\nGCC version:  gcc version 14.2.0 (Ubuntu 14.2.0-4ubuntu2~24.04.1)",
                Flavor::Proprietary,
                "x86_64",
                Some("580.173.02"),
            ),
            (
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  Thu Oct 26 15:16:01 PDT 2017\nGCC version:  gcc version 7.2.0 (Ubuntu 7.2.0-8ubuntu3) ",
                Flavor::Proprietary,
                "x86_64",
                Some("384.98"),
            ),
            (
                "[    8.919669] NVRM: loading NVIDIA UNIX aarch64 Kernel Module  460.73.01  Thu Apr  1 21:51:06 UTC 2021",
                Flavor::Proprietary,
                "aarch64",
                Some("460.73.01"),
            ),
            (
                "kernel: NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.90.05  Release Build  (dvs-builder@U16-I1-N08-05-1)",
                Flavor::Open,
                "x86_64",
                Some("550.90.05"),
            ),
            // The real H200: no build host after the user.
            (
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n",
                Flavor::Open,
                "x86_64",
                Some("580.159.04"),
            ),
        ];
        for (text, flavor, arch, version) in cases {
            let got = b(text);
            assert_eq!(got.flavor, flavor, "{text}");
            assert_eq!(got.arch, arch, "{text}");
            assert_eq!(got.version.as_deref(), version, "{text}");
        }
    }

    #[test]
    fn gcc_line_alone_or_garbage_is_not_a_banner() {
        assert_eq!(parse_banner("GCC version:  gcc version 9.3.0\n"), None);
        assert_eq!(parse_banner(""), None);
        assert_eq!(parse_banner("NVIDIA UNIX"), None);
        assert_eq!(parse_banner("NVIDIA UNIX x86_64 Kernel"), None);
        assert_eq!(parse_banner("Open Kernel Module for "), None);
        let no_ver = b("NVRM version: NVIDIA UNIX x86_64 Kernel Module  ");
        assert_eq!(no_ver.version, None);
    }

    #[test]
    fn sys_module_version() {
        assert_eq!(
            parse_sys_version("570.86.15\n").as_deref(),
            Some("570.86.15")
        );
        assert_eq!(parse_sys_version("550.54\n").as_deref(), Some("550.54"));
        assert_eq!(parse_sys_version("garbage"), None);
        assert_eq!(parse_sys_version("1..2"), None);
    }
}
