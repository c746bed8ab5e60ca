//! The driver and its modules: the loaded NVIDIA module (/proc/driver/nvidia/version, else
//! /sys/module/nvidia/version and the taint letters of /proc/modules), the module list
//! (/proc/modules, /sys/module) and the module's parameters in effect
//! (/proc/driver/nvidia/params) beside those configured (modprobe.d, read in [`super::boot`]).

use super::*;
use crate::model::parse::driver::{self, Flavor};

/// The loaded NVIDIA module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverFacts {
    pub flavor: Flavor,
    /// Version of the loaded kernel module.
    pub version: Option<String>,
    pub arch: Option<String>,
    pub evidence: Vec<Evidence>,
}

/// NVIDIA module parameters (`module_params` in the JSON).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModuleParams {
    /// /proc/driver/nvidia/params (`None` without a loaded module or when unreadable).
    pub in_effect: Proved<BTreeMap<String, String>>,
    /// `options nvidia NVreg_K=V` of the boot configuration, in reading order, with their file.
    pub configured: Vec<(params::Configured, String)>,
}

pub(super) fn module_list(out: &ProbeOutput, f: &mut Facts) {
    match read(out, Kind::File, "/proc/modules") {
        Read::Text(t) => {
            let (good, bad) = modules::parse(&t);
            // A line that is not understood could be any module (nvidia_peermem too): the list
            // is then not known whole, so nothing is concluded from what it lacks.
            // nvidia_peermem on a line that was understood, or first on one that was not,
            // is loaded whatever else the file holds.
            let named = good
                .iter()
                .find(|m| modconf::is_peermem(&m.name))
                .map(|m| m.line.clone())
                .or_else(|| {
                    bad.iter()
                        .find(|b| {
                            b.line
                                .split_whitespace()
                                .next()
                                .is_some_and(modconf::is_peermem)
                        })
                        .map(|b| b.line.clone())
                });
            if let Some(line) = named {
                f.peermem.named = Some(line);
            }
            match bad.first() {
                Some(b) => f.unknown(
                    "modules",
                    format!(
                        "/proc/modules: {} line(s) not understood, first: {:?} ({})",
                        bad.len(),
                        b.line,
                        b.why
                    ),
                ),
                None => f.modules = Some(good),
            }
        }
        // A kernel without loadable modules has no /proc/modules: nothing is loaded.
        Read::Absent => f.modules = Some(Vec::new()),
        Read::Failed(why) => f.unknown("modules", why),
    }
}

pub(super) fn module<'a>(f: &'a Facts, name: &str) -> Option<&'a Module> {
    f.modules.as_ref()?.iter().find(|m| m.name == name)
}

pub(super) fn sys_module_listing(out: &ProbeOutput) -> Option<Vec<String>> {
    match read(out, Kind::Dir, "/sys/module") {
        Read::Text(t) => Some(t.lines().map(|l| l.trim().to_string()).collect()),
        _ => None,
    }
}

pub(super) fn loaded(out: &ProbeOutput, f: &mut Facts) {
    const VERSION: &str = "/proc/driver/nvidia/version";
    let sys_version = match read(out, Kind::File, "/sys/module/nvidia/version") {
        Read::Text(t) => driver::parse_sys_version(&t).map(|v| (v, t.trim().to_string())),
        _ => None,
    };
    let banner_read = read(out, Kind::File, VERSION);
    if let Read::Text(ref t) = banner_read
        && let Some(b) = driver::parse_banner(t)
    {
        let mut evidence = vec![Evidence::new(VERSION, b.line.clone())];
        let version = b.version.clone().or_else(|| {
            let (v, line) = sys_version.clone()?;
            evidence.push(Evidence::new("/sys/module/nvidia/version", line));
            Some(v)
        });
        f.driver = Some(DriverFacts {
            flavor: b.flavor,
            version,
            arch: Some(b.arch),
            evidence,
        });
        return;
    }
    let nvidia_mod = module(f, "nvidia").cloned();
    let banner_absent = matches!(banner_read, Read::Absent);
    if banner_absent && nvidia_mod.is_none() && sys_version.is_none() && f.modules.is_some() {
        f.driver = Some(DriverFacts {
            flavor: Flavor::None,
            version: None,
            arch: None,
            evidence: vec![Evidence::new(VERSION, "(absent: no nvidia module loaded)")],
        });
        return;
    }
    // Fallback: the taint letters of the nvidia line in /proc/modules ("P" only on proprietary).
    if let Some(m) = nvidia_mod.filter(|m| !m.taint.is_empty()) {
        let flavor = if m.taint.contains('P') {
            Flavor::Proprietary
        } else {
            Flavor::Open
        };
        let mut evidence = vec![Evidence::new("/proc/modules", m.line.clone())];
        if let Some((_, line)) = &sys_version {
            evidence.push(Evidence::new("/sys/module/nvidia/version", line.clone()));
        }
        f.driver = Some(DriverFacts {
            flavor,
            version: sys_version.map(|(v, _)| v),
            arch: None,
            evidence,
        });
        return;
    }
    let why = match banner_read {
        Read::Text(t) => format!(
            "{VERSION} does not name a kernel module: {:?}",
            first_line(&t)
        ),
        Read::Absent if f.modules.is_none() => {
            format!("{VERSION} is absent and /proc/modules could not be read")
        }
        Read::Absent => format!("{VERSION} is absent but an nvidia module is loaded"),
        Read::Failed(why) => why,
    };
    f.unknown("driver.flavor", why);
    f.driver = Some(DriverFacts {
        flavor: Flavor::Unknown,
        version: sys_version.map(|(v, _)| v),
        arch: None,
        evidence: Vec::new(),
    });
}

/// The facts of this subject without an unknown entry of their own: the parameters in effect.
pub(super) fn collect(out: &ProbeOutput, f: &mut Facts) {
    params_in_effect(out, f);
}

/// /proc/driver/nvidia/params: absent without a loaded module (then `None`, no unknown).
fn params_in_effect(out: &ProbeOutput, f: &mut Facts) {
    f.module_params.in_effect = match read(out, Kind::File, "/proc/driver/nvidia/params") {
        Read::Text(t) => Proved::known(
            params::parse_in_effect(&t),
            vec![Evidence::new("/proc/driver/nvidia/params", "(read)")],
        ),
        Read::Absent => Proved::default(),
        Read::Failed(why) => Proved::unknown(why),
    };
}
