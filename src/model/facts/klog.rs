//! The kernel log: the NVIDIA, module-loader and lockdown lines of `dmesg` the probe keeps
//! (its `cmd dmesg` section), joined into messages ([`crate::model::parse::klog`]).

use super::*;
use crate::model::parse::klog;

/// `kernel_log` in the JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelLogFacts {
    /// The kept kernel log messages (`None`: dmesg denied, missing or failed).
    pub messages: Proved<Vec<klog::Message>>,
    /// dmesg printed more than the probe's cap: the messages it would have given are unknown,
    /// and a verdict cannot rest on a log that may hide a fallen-off GPU.
    pub cut: bool,
}

/// The `cmd dmesg` section: its messages, or why there are none (with dmesg's first line).
pub(super) fn collect(out: &ProbeOutput, f: &mut Facts) {
    f.kernel_log.messages = match read(out, Kind::Cmd, "dmesg") {
        Read::Text(t) => Proved::known(klog::messages(&t), Vec::new()),
        Read::Absent => Proved::unknown("dmesg: no answer"),
        Read::Failed(why) => Proved::unknown(match out.get(Kind::Cmd, "dmesg") {
            Some(s) if !s.body.is_empty() => {
                format!("{why}: {}", first_line(&String::from_utf8_lossy(&s.body)))
            }
            _ => why,
        }),
    };
    f.kernel_log.cut = out
        .get(Kind::Cmd, "dmesg")
        .is_some_and(|s| matches!(s.status, Status::Cut(_)));
}
