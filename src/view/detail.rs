//! The detail pane's facts: every fact of a report, grouped as the JSON is, each a [`Cell`]
//! with the JSON path of its evidence. The assessment's own values: nothing is recomputed
//! here, so the pane never contradicts the status. Raw node text (the pane escapes it); the
//! pane lays the lines out and styles each cell by its tone.

use super::{Cell, Fact, Tone};
use crate::model::NodeStatus;
use crate::model::report::NodeReport;

/// One line of the facts part of the detail pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A section's title (the pane puts a blank line before it).
    Section(&'static str),
    /// A fact: its name, its cell, gpufleet's own words after it (not node text: the pane
    /// does not escape them), and the JSON path whose evidence follows it.
    Fact {
        name: &'static str,
        value: Cell,
        note: Option<String>,
        evidence: &'static str,
    },
    /// One GPU (`gpu N`): its name, bus id and compute capability (`?` when unknown), each
    /// node text.
    Gpu {
        index: u32,
        name: String,
        bus_id: String,
        compute_capability: String,
    },
    /// The evidence of a JSON path on its own (the GPUs', after their list).
    Evidence(&'static str),
    /// An installed kernel and the NVIDIA module files under it.
    Kernel { release: String, modules: Cell },
    /// A configured `NVreg_` parameter (the key without `NVreg_`): `value → in effect`, and
    /// the modprobe.d file it came from.
    Param {
        key: String,
        value: Cell,
        source: String,
    },
}

/// A fact's cell: its words when known, `?` (Unknown) when not.
fn words<T>(f: Option<T>, show: impl FnOnce(T) -> String) -> Cell {
    match f {
        Some(v) => Cell::plain(show(v)),
        None => Cell::unknown(),
    }
}

fn yes_no(b: Option<bool>) -> Cell {
    words(b, |b| super::yes_no(b).to_string())
}

fn text(s: Option<&str>) -> Cell {
    words(s, str::to_string)
}

/// The facts of `r` (none for an unreachable node: its facts are all `null`).
pub fn fact_lines(r: &NodeReport) -> Vec<Line> {
    let mut out = Vec::new();
    if r.status == NodeStatus::Unreachable {
        return out;
    }
    let fact = |out: &mut Vec<Line>, name, value, evidence| {
        out.push(Line::Fact {
            name,
            value,
            note: None,
            evidence,
        })
    };
    out.push(Line::Section("facts and evidence"));
    fact(
        &mut out,
        "kernel",
        text(super::kernel(r).known()),
        "kernel.release",
    );
    fact(
        &mut out,
        "os",
        text(r.os.as_ref().and_then(|o| o.pretty_name.as_deref())),
        "os.pretty_name",
    );
    let module = words(r.driver.as_ref(), |d| {
        format!(
            "{} {} {}",
            d.flavor.as_str(),
            d.version.clone().unwrap_or_default(),
            d.arch.clone().unwrap_or_default(),
        )
    });
    out.push(Line::Fact {
        name: "module",
        value: module,
        note: r
            .managed_by()
            .map(|m| format!(" · managed by {}", m.as_str())),
        evidence: "driver.flavor",
    });
    let loaded = super::peermem_loaded(r).known();
    fact(&mut out, "peermem loaded", yes_no(loaded), "peermem.loaded");
    fact(
        &mut out,
        "peermem at boot",
        yes_no(super::peermem_configured(r).known()),
        "peermem.configured",
    );
    if loaded == Some(true) {
        fact(
            &mut out,
            "peermem registered",
            yes_no(super::peermem_registered(r).known()),
            "peermem.registered",
        );
    }
    fact(
        &mut out,
        "DMA-BUF kernel",
        yes_no(super::dma_buf(r).known()),
        "dma_buf.kernel_support",
    );
    // The number as the kernel gives it, and its flags in words.
    fact(
        &mut out,
        "taint",
        words(r.taint.as_ref().and_then(|x| x.value), |v| {
            format!("{v} ({})", crate::model::report::taint_words(v))
        }),
        "taint.value",
    );
    for g in r.gpus.iter().flatten() {
        let q = |s: &Option<String>| s.clone().unwrap_or_else(|| "?".into());
        out.push(Line::Gpu {
            index: g.index,
            name: q(&g.name),
            bus_id: q(&g.bus_id),
            compute_capability: q(&g.compute_capability),
        });
    }
    out.push(Line::Evidence("gpus"));
    if let Some(b) = &r.boot {
        out.push(Line::Section("next boot"));
        fact(
            &mut out,
            "running",
            text(b.running.as_deref()),
            "kernel.release",
        );
        fact(
            &mut out,
            "boot kernel",
            text(b.boot_kernel.as_deref()),
            "boot.boot_kernel",
        );
        let next = match super::next_boot(r) {
            Fact::Known(d) => Cell::plain(super::next_boot_words(d)),
            _ => Cell::unknown(),
        };
        fact(&mut out, "nvidia.ko next boot", next, "boot.kernels");
        fact(
            &mut out,
            "reboot pending",
            yes_no(b.reboot_pending),
            "boot.reboot_pending",
        );
        for k in b.kernels.iter().flatten() {
            let modules = match &k.nvidia_modules {
                Some(m) if m.is_empty() => "no NVIDIA module".to_string(),
                Some(m) => m
                    .iter()
                    .map(|p| p.rsplit('/').next().unwrap_or(p))
                    .collect::<Vec<_>>()
                    .join(" "),
                None => "?".into(),
            };
            out.push(Line::Kernel {
                release: k.release.clone(),
                modules: Cell::plain(modules),
            });
        }
    }
    if let Some(fw) = &r.firmware
        && fw.gsp_files_present.is_some()
    {
        out.push(Line::Section("firmware"));
        fact(
            &mut out,
            "GSP firmware",
            yes_no(fw.gsp_files_present),
            "firmware.gsp_files_present",
        );
    }
    if let Some(mp) = &r.module_params {
        let configured = mp.configured.as_deref().unwrap_or_default();
        if !configured.is_empty() {
            out.push(Line::Section("module parameters (configured → in effect)"));
            for c in configured {
                let now = mp
                    .in_effect
                    .as_ref()
                    .map(|p| p.get(&c.key).map_or("not a parameter", String::as_str))
                    .unwrap_or("?");
                out.push(Line::Param {
                    key: c.key.clone(),
                    value: Cell::plain(format!("{} → {now}", c.value)),
                    source: c.source.clone(),
                });
            }
        }
    }
    if let Some(rd) = &r.rdma {
        out.push(Line::Section("RDMA"));
        let devices = words(rd.devices.as_ref(), |d| {
            if d.is_empty() {
                "none".into()
            } else {
                d.join(" ")
            }
        });
        fact(&mut out, "devices", devices, "rdma.devices");
        // `null`: the host has no libibverbs (JSON contract), not an unknown.
        let verbs = rd
            .libibverbs_dmabuf
            .map_or(Cell::plain("no host library"), |b| yes_no(Some(b)));
        fact(&mut out, "verbs DMA-BUF", verbs, "rdma.libibverbs_dmabuf");
    }
    if let Some(sb) = &r.secure_boot {
        out.push(Line::Section("module signatures"));
        fact(
            &mut out,
            "Secure Boot",
            yes_no(sb.enabled),
            "secure_boot.enabled",
        );
        fact(
            &mut out,
            "lockdown",
            text(sb.lockdown.as_deref()),
            "secure_boot.lockdown",
        );
        fact(
            &mut out,
            "signatures enforced",
            yes_no(sb.signature_enforced),
            "secure_boot.signature_enforced",
        );
        fact(
            &mut out,
            "nvidia.ko signed",
            yes_no(sb.nvidia_ko_signed),
            "secure_boot.nvidia_ko_signed",
        );
    }
    if let Some(kl) = &r.kernel_log {
        out.push(Line::Section("kernel log"));
        let xids = match &kl.xid_counts {
            None => Cell::new("? (not readable)", Tone::Unknown),
            Some(x) if x.is_empty() => Cell::plain("none"),
            Some(x) => Cell::plain(
                x.iter()
                    .map(|(c, n)| format!("{c} ({n}x)"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        };
        fact(&mut out, "Xid events", xids, "kernel_log");
    }
    out
}
