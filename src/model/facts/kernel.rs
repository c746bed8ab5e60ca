//! The kernel: its release (/proc/sys/kernel/osrelease, else /proc/version), its taint
//! (/proc/sys/kernel/tainted), and the inputs of its DMA-BUF support: `ib_umem_dmabuf_get` in
//! /proc/kallsyms and the build configuration (`/boot/config-<release>`, else /proc/config.gz).

use super::*;

/// What the probe read about the running kernel (docs/domain.md, facts table "kernel release",
/// "sticky proprietary taint", "DMA-BUF kernel support").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelFacts {
    /// /proc/sys/kernel/osrelease, else the third word of /proc/version.
    pub release: Option<String>,
    /// The line `release` came from.
    pub evidence: Option<Evidence>,
    /// /proc/sys/kernel/tainted: the taint bits (docs/domain.md; [`crate::model::report::taint_words`]).
    pub taint: Option<u64>,
    pub taint_evidence: Option<Evidence>,
    /// `ib_umem_dmabuf_get` in /proc/kallsyms: `Some(false)` when read and missing, `None` when
    /// /proc/kallsyms could not be read.
    pub kallsyms_dmabuf: Option<bool>,
    pub kallsyms_evidence: Option<Evidence>,
    /// The kernel config that was read, with its source path.
    pub config: Option<(String, KernelConfig)>,
}

/// A kernel release as `uname -r` prints it: letters, digits and `._+~-` (what the probe also
/// accepts to build `/boot/config-<release>`); anything else (a NUL, an invalid byte) is not one.
pub(super) fn is_release(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '~' | '-'))
}

pub(super) fn release(out: &ProbeOutput, f: &mut Facts) {
    match read(out, Kind::File, "/proc/sys/kernel/osrelease") {
        Read::Text(t) if is_release(t.trim()) => {
            f.kernel.release = Some(t.trim().to_string());
            f.kernel.evidence = Some(Evidence::new("/proc/sys/kernel/osrelease", t.trim()));
            return;
        }
        _ => {}
    }
    // Fallback: "Linux version <release> (...)".
    if let Read::Text(t) = read(out, Kind::File, "/proc/version") {
        let mut w = t.split_whitespace();
        if let (Some("Linux"), Some("version"), Some(rel)) = (w.next(), w.next(), w.next())
            && is_release(rel)
        {
            f.kernel.release = Some(rel.to_string());
            f.kernel.evidence = Some(Evidence::new("/proc/version", first_line(&t)));
            return;
        }
    }
    f.unknown(
        "kernel.release",
        "neither /proc/sys/kernel/osrelease nor /proc/version could be read",
    );
}

/// /proc/sys/kernel/tainted: a decimal number, else `taint.value` unknown (absent too: every
/// kernel has the file).
pub(super) fn taint(out: &ProbeOutput, f: &mut Facts) {
    match read(out, Kind::File, "/proc/sys/kernel/tainted") {
        Read::Text(t) => match t.trim().parse::<u64>() {
            Ok(v) => {
                f.kernel.taint = Some(v);
                f.kernel.taint_evidence = Some(Evidence::new("/proc/sys/kernel/tainted", t.trim()));
            }
            Err(_) => f.unknown(
                "taint.value",
                format!(
                    "/proc/sys/kernel/tainted is not a number: {:?}",
                    first_line(&t)
                ),
            ),
        },
        Read::Absent => f.unknown("taint.value", "/proc/sys/kernel/tainted is absent"),
        Read::Failed(why) => f.unknown("taint.value", why),
    }
}

pub(super) fn dma_buf_inputs(out: &ProbeOutput, f: &mut Facts) {
    if let Read::Text(t) = read(out, Kind::Grep, "/proc/kallsyms") {
        let hit = t
            .lines()
            .find(|l| l.split_whitespace().nth(2) == Some("ib_umem_dmabuf_get"));
        f.kernel.kallsyms_dmabuf = Some(hit.is_some());
        f.kernel.kallsyms_evidence = hit.map(|l| Evidence::new("/proc/kallsyms", l.trim_end()));
    }
    let mut tried = Vec::new();
    if let Some(rel) = &f.kernel.release {
        let name = format!("/boot/config-{rel}");
        match read(out, Kind::Grep, &name) {
            Read::Text(t) => {
                f.kernel.config = Some((name, kconfig::parse(&t)));
                return;
            }
            Read::Absent => {}
            Read::Failed(why) => tried.push(why),
        }
    }
    const GZ: &str = "/proc/config.gz";
    match read(out, Kind::Grep, GZ) {
        Read::Text(t) => {
            f.kernel.config = Some((GZ.to_string(), kconfig::parse(&t)));
            return;
        }
        Read::Absent => {}
        Read::Failed(why) => tried.push(why),
    }
    if let Some(s) = out.get(Kind::Hex, GZ) {
        let decoded = match read(out, Kind::Hex, GZ) {
            Read::Text(t) => {
                kconfig::decode_od_hex(&t).and_then(|bytes| kconfig::gunzip_parse(&bytes, 16 << 20))
            }
            _ => Err(why_not(GZ, s)),
        };
        match decoded {
            Ok(config) => {
                f.kernel.config = Some((GZ.to_string(), config));
                return;
            }
            Err(why) => tried.push(why),
        }
    }
    if !tried.is_empty() && f.kernel.kallsyms_dmabuf != Some(true) {
        f.unknown("kernel config", tried.join("; "));
    }
}
