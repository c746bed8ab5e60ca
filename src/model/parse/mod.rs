//! Probe output → raw files and commands: the section framing (sections.rs), what one file or
//! command of it says (`read`: its text, absent, or why it failed), and one parser per source
//! format (each a pure function on text or bytes, unit-tested on verbatim samples and fuzzed in
//! fuzz/).

pub mod boot;
pub mod driver;
pub mod kconfig;
pub mod klog;
pub mod lock;
pub mod modconf;
pub mod modules;
pub mod nvrm;
pub mod os;
pub mod params;
pub mod sections;
pub mod secureboot;
pub mod smi;
pub mod smiq;
pub mod sysfs;
pub mod xidcat;

use sections::{Kind, ProbeOutput, Section, Status};

/// A section's text, or why there is none. Text is decoded lossily: a byte that is not UTF-8
/// (a Latin-1 comment) becomes U+FFFD and never hides the lines around it.
pub(crate) enum Read<'a> {
    Text(std::borrow::Cow<'a, str>),
    Absent,
    Failed(String),
}

/// Why a section that was not read whole says nothing: `name: permission denied`, …
pub(crate) fn why_not(name: &str, s: &Section) -> String {
    match &s.status {
        Status::Ok | Status::Absent => String::new(),
        Status::Denied => format!("{name}: permission denied"),
        // ELOOP: the probe followed 40 symlinks under the root prefix without an end.
        Status::Error(40) => format!("{name}: too many levels of symbolic links (a loop)"),
        Status::Error(rc) => format!("{name}: read failed (exit {rc})"),
        Status::Rc(rc) => format!("{name}: exit {rc}"),
        Status::Timeout => format!("{name}: time limit reached"),
        Status::MissingTool(t) => format!("{name}: {t} is not installed on the node"),
        Status::Incomplete => format!("{name}: cut off by the node deadline or output cap"),
        Status::NotRegular => format!("{name}: a FIFO, socket or device, not a file (not read)"),
        Status::Masked => format!("{name}: masked (a symlink to /dev/null)"),
        Status::Same => format!("{name}: the same folder as one read before"),
        Status::Cut(cap) => format!("{name}: longer than the {cap}-byte cap (not trusted)"),
        Status::NotLink => format!("{name}: not a symlink"),
        Status::NoTmp => {
            format!("{name}: not run (no writable temporary folder on the node for its output)")
        }
        Status::Unrecognized(x) => format!("{name}: unrecognized status {x:?}"),
    }
}

/// The section `kind name`: its text when it was read whole, `Absent` when the probe said
/// absent, else `Failed` with why (denied, cut, the probe stopped before it, a missing mount
/// under the root prefix).
pub(crate) fn read<'a>(out: &'a ProbeOutput, kind: Kind, name: &str) -> Read<'a> {
    // A root prefix without proc/ or sys/ is a missing mount: nothing under it is "absent".
    let top = name.trim_start_matches('/').split('/').next().unwrap_or("");
    if out.meta_all("root-missing").any(|d| d == top) {
        return Read::Failed(format!(
            "{name}: the root prefix has no {top}/ (a missing mount, not a node without it)"
        ));
    }
    match out.get(kind, name) {
        None if out.complete => Read::Failed(format!("{name}: not in the probe output")),
        None => Read::Failed(match out.output_cap {
            Some(cap) => format!("{name}: never arrived (cut by gpufleet's {cap}-byte output cap)"),
            None => format!("{name}: the probe stopped before reading it"),
        }),
        Some(s) => match s.status {
            Status::Ok => Read::Text(String::from_utf8_lossy(&s.body)),
            Status::Absent => Read::Absent,
            Status::Incomplete if out.output_cap.is_some() => Read::Failed(format!(
                "{name}: cut off by gpufleet's {}-byte output cap",
                out.output_cap.unwrap_or_default()
            )),
            _ => Read::Failed(why_not(name, s)),
        },
    }
}

/// The first line of `text`, without its line end.
pub(crate) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim_end()
}
