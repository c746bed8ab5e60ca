//! One view of a report: the only code that reads a [`NodeReport`]'s facts for people and
//! machines. Each fact is read once here as a [`Fact`] (known, unknown, or nothing to read);
//! each output turns it into its form: a [`Cell`] (text and [`Tone`]) for the matrix, the
//! table and the detail pane, a machine value for the CSV, Prometheus and `gpufleet diff`
//! ([`machine`]). The TUI styles a cell by its tone, never by its text, so rewording a cell
//! keeps its colour (docs/architecture.md, "Layers").
//!
//! - [`columns`]: the column registry of the matrix, the table and the CSV.
//! - [`detail`]: the detail pane's fact lines.

pub mod columns;
pub mod detail;

use crate::model::report::{NextBootDriver, NodeReport, RolloutMarks};
use crate::model::{Code, Flavor, NodeStatus};

/// How a cell reads, whatever its words: the TUI colours a cell by its tone (a theme role),
/// never by its text, so rewording a cell keeps its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Nothing to point out.
    Plain,
    /// The status cell: the status's own colour.
    Status(NodeStatus),
    /// In the way of the move: the proprietary module, nvidia-peermem loaded or configured.
    Warn,
    /// Blocks the move or the next reboot: no DMA-BUF kernel support where GPUDirect RDMA
    /// applies, a next boot without the driver.
    Crit,
    /// Unknown: the report has `null` there (the cell says `?`).
    Unknown,
    /// Secondary: the reason codes (the detail pane has their words).
    Dim,
}

/// What a view shows of one value: its text (raw node text: each output escapes it for
/// itself) and its tone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    pub tone: Tone,
}

impl Cell {
    /// A cell of `text` in `tone`.
    pub fn new(text: impl Into<String>, tone: Tone) -> Cell {
        Cell {
            text: text.into(),
            tone,
        }
    }

    /// A cell with nothing to point out.
    pub fn plain(text: impl Into<String>) -> Cell {
        Cell::new(text, Tone::Plain)
    }

    /// `?`: a fact the report has as `null` on a node that answered.
    pub fn unknown() -> Cell {
        Cell::new("?", Tone::Unknown)
    }

    /// `-`: nothing to read (the node was not reached, or the fact does not apply).
    pub fn none() -> Cell {
        Cell::plain("-")
    }
}

/// One fact of a report as a view reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fact<T> {
    /// The report has the value.
    Known(T),
    /// `null` on a node that answered: the read failed or the probe did not get there (the
    /// node's `fact-unknown` reason says why, where the subject records one).
    Unknown,
    /// Nothing to read: the node was not reached (its facts are all `null`), or the fact does
    /// not apply (a driver version with no driver loaded).
    NotApplicable,
}

impl<T> Fact<T> {
    /// `v` of `n`: known when present, else unknown on a node that answered and not
    /// applicable on one that was not reached.
    pub fn of(n: &NodeReport, v: Option<T>) -> Fact<T> {
        match v {
            Some(v) => Fact::Known(v),
            None if reached(n) => Fact::Unknown,
            None => Fact::NotApplicable,
        }
    }

    /// The value when known.
    pub fn known(self) -> Option<T> {
        match self {
            Fact::Known(v) => Some(v),
            _ => None,
        }
    }

    /// The known value through `f`; the other states as they are.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Fact<U> {
        match self {
            Fact::Known(v) => Fact::Known(f(v)),
            Fact::Unknown => Fact::Unknown,
            Fact::NotApplicable => Fact::NotApplicable,
        }
    }

    /// The cell of this fact: `show`'s cell when known, `?` (Unknown) or `-` (Plain).
    pub fn cell(self, show: impl FnOnce(T) -> Cell) -> Cell {
        match self {
            Fact::Known(v) => show(v),
            Fact::Unknown => Cell::unknown(),
            Fact::NotApplicable => Cell::none(),
        }
    }
}

/// The node answered: its report has facts (`null` among them is unknown).
pub fn reached(n: &NodeReport) -> bool {
    n.status != NodeStatus::Unreachable
}

/// The running kernel's release (`kernel.release`).
pub fn kernel(n: &NodeReport) -> Fact<&str> {
    Fact::of(n, n.kernel.as_ref().and_then(|k| k.release.as_deref()))
}

/// The loaded module's flavour (`driver.flavor`).
pub fn flavor(n: &NodeReport) -> Fact<Flavor> {
    Fact::of(n, n.driver.as_ref().map(|d| d.flavor))
}

/// The loaded module's version (`driver.version`); not applicable when the driver object
/// says no version (no module loaded).
pub fn driver_version(n: &NodeReport) -> Fact<&str> {
    match &n.driver {
        None => Fact::of(n, None),
        Some(d) => d
            .version
            .as_deref()
            .map_or(Fact::NotApplicable, Fact::Known),
    }
}

/// The GPUs in words ([`NodeReport::gpu_summary`]): `none` when known to have none.
pub fn gpus(n: &NodeReport) -> Fact<String> {
    Fact::of(
        n,
        n.gpu_summary()
            .map(|s| if s.is_empty() { "none".into() } else { s }),
    )
}

/// The kernel's DMA-BUF support (`dma_buf.kernel_support`).
pub fn dma_buf(n: &NodeReport) -> Fact<bool> {
    Fact::of(n, n.dma_buf.as_ref().and_then(|d| d.kernel_support))
}

/// nvidia-peermem is loaded (`peermem.loaded`).
pub fn peermem_loaded(n: &NodeReport) -> Fact<bool> {
    Fact::of(n, n.peermem.as_ref().and_then(|p| p.loaded))
}

/// nvidia-peermem is set to load at boot (`peermem.configured`).
pub fn peermem_configured(n: &NodeReport) -> Fact<bool> {
    Fact::of(n, n.peermem.as_ref().and_then(|p| p.configured))
}

/// nvidia-peermem registered with the RDMA stack (`peermem.registered`).
pub fn peermem_registered(n: &NodeReport) -> Fact<bool> {
    Fact::of(n, n.peermem.as_ref().and_then(|p| p.registered))
}

/// The kernel the next reboot starts (`boot.boot_kernel`).
pub fn boot_kernel(n: &NodeReport) -> Fact<&str> {
    Fact::of(n, n.boot.as_ref().and_then(|b| b.boot_kernel.as_deref()))
}

/// Whether the next boot has the driver ([`NodeReport::next_boot_driver`]).
pub fn next_boot(n: &NodeReport) -> Fact<NextBootDriver> {
    Fact::of(n, n.next_boot_driver())
}

/// The RDMA devices' count (`rdma.devices`).
pub fn rdma_devices(n: &NodeReport) -> Fact<usize> {
    Fact::of(
        n,
        n.rdma
            .as_ref()
            .and_then(|r| r.devices.as_ref())
            .map(Vec::len),
    )
}

/// GPUDirect RDMA applies to the node: it was not given `no-rdma-device`.
pub fn rdma_applies(n: &NodeReport) -> bool {
    !n.reasons.iter().any(|r| r.code == Code::NoRdmaDevice)
}

/// People's words of a boolean fact: `yes`, `no`.
pub fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// People's words of the next boot's driver: `ok`, `no driver`, `n/a`.
pub fn next_boot_words(d: NextBootDriver) -> &'static str {
    match d {
        NextBootDriver::Ok => "ok",
        NextBootDriver::Missing => "no driver",
        NextBootDriver::NotApplicable => "n/a",
    }
}

/// The next boot's cell: `no driver` is Crit.
pub fn next_boot_cell(d: NextBootDriver) -> Cell {
    let tone = match d {
        NextBootDriver::Missing => Tone::Crit,
        NextBootDriver::Ok | NextBootDriver::NotApplicable => Tone::Plain,
    };
    Cell::new(next_boot_words(d), tone)
}

/// The ROLLOUT cell's words: `drained, locked`, `drained`, `locked`, or empty.
pub fn rollout_words(m: RolloutMarks) -> &'static str {
    match (m.drained, m.locked) {
        (true, true) => "drained, locked",
        (true, false) => "drained",
        (false, true) => "locked",
        (false, false) => "",
    }
}

/// Machine values of the facts (the CSV, Prometheus labels, `gpufleet diff`): the JSON's own
/// words (`true`, `open`, `n/a`), `None` when not known.
pub mod machine {
    use super::*;

    /// `driver.flavor`: `open`, `proprietary`, `none`, `unknown`.
    pub fn flavor(n: &NodeReport) -> Option<&'static str> {
        super::flavor(n).known().map(Flavor::as_str)
    }

    /// `true`, `false`.
    pub fn boolean(f: Fact<bool>) -> Option<String> {
        f.known().map(|b| b.to_string())
    }

    /// `next_boot_driver`: `ok`, `missing`, `n/a`.
    pub fn next_boot(n: &NodeReport) -> Option<&'static str> {
        super::next_boot(n).known().map(NextBootDriver::as_str)
    }
}

#[cfg(test)]
mod tests;
