//! One column registry for the TUI's matrix, the snapshot table and the CSV: each column's id,
//! title, CSV name and position, cell text, width hints and sort key, in one place. The TUI and
//! the table show [`Column::display`] cells (people's words: `yes`, `?` for unknown, `-` for an
//! unreachable node); the CSV shows [`Column::csv_value`] (machine values: `true`, empty for
//! unknown; its column order is the documented schema, docs/domain.md "Snapshot JSON").

use std::cmp::Ordering;

use crate::model::report::NextBootDriver;
use crate::model::{Code, NodeReport, NodeStatus};

/// A column of the matrix, the table or the CSV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Column {
    Node,
    Status,
    Kernel,
    Flavor,
    Driver,
    Gpus,
    MinCc,
    DmaBuf,
    /// nvidia-peermem, loaded and configured in one cell (TUI and table).
    Peermem,
    PeermemLoaded,
    PeermemConfigured,
    /// Whether the kernel the next reboot starts has an nvidia.ko.
    NextBoot,
    Reasons,
    RdmaDevices,
    /// gpufleet's rollout state of the node: drained by a rollout of the journal, node lock held.
    Rollout,
    /// The node lock's rollout (CSV: `free`, the rollout id, empty when unknown).
    RolloutLock,
    /// The rollout that drained the node and has not given it back (CSV).
    DrainedBy,
    /// The GPU Operator's upgrade of the node, from the inventory's node labels (a Kubernetes
    /// inventory): the `nvidia.com/gpu-driver-upgrade-state` value, and `skip` when
    /// `nvidia.com/gpu-driver-upgrade.skip=true` (docs/domain.md, "GPU Operator upgrade
    /// labels"). The matrix only: it is not a fact of the report.
    OperatorUpgrade,
}

/// How a cell reads, whatever its words: the matrix colours a cell by its tone (a theme role),
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

/// How rows sort by a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// The cell text.
    Text,
    /// As versions (`sort -V`): 6.10 after 6.9.
    Version,
    /// Worst status first.
    Status,
    /// The lowest compute capability, as a number.
    ComputeCapability,
    /// The number of GPUs, then the text.
    GpuCount,
    /// The row's cell text (a column from the inventory, not from the report).
    Cell,
}

/// What the registry knows of a column.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub column: Column,
    /// Title in the matrix and the table; `None`: the CSV only.
    pub title: Option<&'static str>,
    /// Shown in the snapshot table (the table lists reasons below each node instead).
    pub in_table: bool,
    /// CSV header name and position; `None`: not in the CSV.
    pub csv: Option<(u8, &'static str)>,
    /// TUI width hints, in cells: the narrowest and widest it is drawn.
    pub min: u16,
    pub max: u16,
    /// The order in which columns join the matrix while they fit (0 first): what the move
    /// turns on first — node, status (and the rollout's own columns when they have a value),
    /// module, driver, nvidia-peermem, DMA-BUF —, then the kernel, the next boot, the compute
    /// capability, the GPUs; `u8::MAX`: the column that takes what is left (reasons).
    pub priority: u8,
    pub sort: SortKey,
    /// The matrix hides the column while every visible row's cell is empty.
    pub optional: bool,
}

const fn spec(column: Column, title: &'static str, csv: Option<(u8, &'static str)>) -> Spec {
    Spec {
        column,
        title: Some(title),
        in_table: true,
        csv,
        min: 4,
        max: 40,
        priority: 0,
        sort: SortKey::Text,
        optional: false,
    }
}

const fn csv_only(column: Column, pos: u8, name: &'static str) -> Spec {
    Spec {
        title: None,
        in_table: false,
        ..spec(column, "", Some((pos, name)))
    }
}

/// Every column, in display order.
pub const COLUMNS: [Spec; 18] = [
    Spec {
        max: 40,
        ..spec(Column::Node, "NODE", Some((0, "name")))
    },
    Spec {
        min: 9,
        max: 11,
        priority: 1,
        sort: SortKey::Status,
        ..spec(Column::Status, "STATUS", Some((1, "status")))
    },
    Spec {
        min: 7,
        max: 16,
        priority: 1,
        optional: true,
        ..spec(Column::Rollout, "ROLLOUT", None)
    },
    Spec {
        min: 6,
        max: 24,
        priority: 1,
        optional: true,
        in_table: false,
        sort: SortKey::Cell,
        ..spec(Column::OperatorUpgrade, "GPU-OPERATOR", None)
    },
    Spec {
        min: 6,
        max: 20,
        priority: 6,
        sort: SortKey::Version,
        ..spec(Column::Kernel, "KERNEL", Some((2, "kernel")))
    },
    Spec {
        min: 6,
        max: 11,
        priority: 2,
        ..spec(Column::Flavor, "MODULE", Some((3, "flavor")))
    },
    Spec {
        min: 6,
        max: 11,
        priority: 3,
        sort: SortKey::Version,
        ..spec(Column::Driver, "DRIVER", Some((4, "driver")))
    },
    Spec {
        min: 4,
        max: 28,
        priority: 9,
        sort: SortKey::GpuCount,
        ..spec(Column::Gpus, "GPUS", Some((5, "gpus")))
    },
    Spec {
        min: 6,
        max: 6,
        priority: 8,
        sort: SortKey::ComputeCapability,
        ..spec(Column::MinCc, "MIN CC", Some((6, "min_compute_capability")))
    },
    Spec {
        min: 7,
        max: 7,
        priority: 5,
        ..spec(Column::DmaBuf, "DMA-BUF", Some((7, "dma_buf")))
    },
    Spec {
        min: 7,
        max: 11,
        priority: 4,
        ..spec(Column::Peermem, "PEERMEM", None)
    },
    csv_only(Column::PeermemLoaded, 8, "peermem_loaded"),
    csv_only(Column::PeermemConfigured, 9, "peermem_configured"),
    Spec {
        min: 9,
        max: 9,
        priority: 7,
        ..spec(
            Column::NextBoot,
            "NEXT BOOT",
            Some((11, "next_boot_driver")),
        )
    },
    Spec {
        min: 12,
        max: 400,
        priority: u8::MAX,
        in_table: false,
        ..spec(Column::Reasons, "REASONS", Some((10, "reasons")))
    },
    csv_only(Column::RdmaDevices, 12, "rdma_devices"),
    csv_only(Column::RolloutLock, 13, "rollout_lock"),
    csv_only(Column::DrainedBy, 14, "drained_by"),
];

/// The [`Column::OperatorUpgrade`] cell of a node with these inventory labels: the upgrade
/// state (empty when unset or empty), `skip` when the skip label is `true`; raw label text
/// (the caller escapes it).
pub fn operator_upgrade_cell(labels: &std::collections::BTreeMap<String, String>) -> String {
    use crate::model::facts::gpu_operator::{UPGRADE_SKIP_LABEL, UPGRADE_STATE_LABEL};
    let state = labels
        .get(UPGRADE_STATE_LABEL)
        .map(|s| s.trim())
        .filter(|s| !s.is_empty());
    let skip = labels.get(UPGRADE_SKIP_LABEL).map(String::as_str) == Some("true");
    match (state, skip) {
        (Some(s), true) => format!("{s}, skip"),
        (Some(s), false) => s.to_string(),
        (None, true) => "skip".into(),
        (None, false) => String::new(),
    }
}

impl Column {
    /// This column's entry in [`COLUMNS`].
    pub fn spec(self) -> &'static Spec {
        // Every Column has exactly one entry (a unit test checks it).
        COLUMNS
            .iter()
            .find(|s| s.column == self)
            .unwrap_or(&COLUMNS[0])
    }

    /// The title in the matrix and the table (`""` for a CSV-only column).
    pub fn title(self) -> &'static str {
        self.spec().title.unwrap_or("")
    }

    /// The columns of the TUI's matrix, in order.
    pub fn matrix() -> impl Iterator<Item = Column> {
        COLUMNS
            .iter()
            .filter(|s| s.title.is_some())
            .map(|s| s.column)
    }

    /// The columns of the snapshot table, in order.
    pub fn table() -> impl Iterator<Item = Column> {
        COLUMNS
            .iter()
            .filter(|s| s.title.is_some() && s.in_table)
            .map(|s| s.column)
    }

    /// The CSV's columns and header names, in the documented order.
    pub fn csv() -> Vec<(Column, &'static str)> {
        let mut v: Vec<(u8, Column, &'static str)> = COLUMNS
            .iter()
            .filter_map(|s| s.csv.map(|(pos, name)| (pos, s.column, name)))
            .collect();
        v.sort_by_key(|(pos, ..)| *pos);
        v.into_iter().map(|(_, c, n)| (c, n)).collect()
    }

    /// The cell people read (raw node text: callers escape it for their output).
    pub fn display(self, n: &NodeReport) -> String {
        let unreachable = n.status == NodeStatus::Unreachable;
        let dash = |s: Option<String>| {
            s.unwrap_or_else(|| if unreachable { "-".into() } else { "?".into() })
        };
        let driver = n.driver.as_ref();
        let yes_no = |b: Option<bool>| {
            match b {
                Some(true) => "yes",
                Some(false) => "no",
                None => "?",
            }
            .to_string()
        };
        match self {
            Column::Node => n.name.clone(),
            Column::Status => n.status.to_string(),
            Column::Kernel => dash(n.kernel.as_ref().and_then(|k| k.release.clone())),
            Column::Flavor => dash(driver.map(|d| d.flavor.as_str().to_string())),
            Column::Driver => driver.map_or_else(
                || dash(None),
                |d| d.version.clone().unwrap_or_else(|| "-".into()),
            ),
            Column::Gpus => dash(
                n.gpu_summary()
                    .map(|s| if s.is_empty() { "none".into() } else { s }),
            ),
            Column::MinCc => n.min_compute_capability().unwrap_or_else(|| "-".into()),
            Column::DmaBuf if unreachable => "-".into(),
            Column::DmaBuf => yes_no(n.dma_buf.as_ref().and_then(|d| d.kernel_support)),
            Column::Peermem => match &n.peermem {
                None => "-".into(),
                Some(p) => match (p.loaded, p.configured) {
                    (Some(true), Some(true)) => "loaded+boot".into(),
                    (Some(true), _) => "loaded".into(),
                    (_, Some(true)) => "at boot".into(),
                    (Some(false), Some(false)) => "no".into(),
                    _ => "?".into(),
                },
            },
            Column::PeermemLoaded => yes_no(n.peermem.as_ref().and_then(|p| p.loaded)),
            Column::PeermemConfigured => yes_no(n.peermem.as_ref().and_then(|p| p.configured)),
            Column::NextBoot if unreachable => "-".into(),
            Column::NextBoot => match n.next_boot_driver() {
                Some(NextBootDriver::Ok) => "ok",
                Some(NextBootDriver::Missing) => "no driver",
                Some(NextBootDriver::NotApplicable) => "n/a",
                None => "?",
            }
            .into(),
            // The matrix leaves out fact-unknown (the detail pane says which and why).
            Column::Reasons => n
                .reasons
                .iter()
                .filter(|x| x.code != Code::FactUnknown)
                .map(|x| x.code.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            Column::RdmaDevices => n
                .rdma
                .as_ref()
                .and_then(|r| r.devices.as_ref())
                .map_or_else(|| "?".into(), |d| d.len().to_string()),
            // Markers only, empty otherwise (the matrix shows the column only when some node has
            // one; an unknown lock is said in the detail pane, and `null` in the JSON).
            Column::Rollout => {
                let r = n.rollout.clone().unwrap_or_default();
                match (r.drained_by.is_some(), r.locked == Some(true)) {
                    (true, true) => "drained, locked".into(),
                    (true, false) => "drained".into(),
                    (false, true) => "locked".into(),
                    (false, false) => String::new(),
                }
            }
            Column::RolloutLock | Column::DrainedBy => self.csv_value(n),
            Column::OperatorUpgrade => String::new(),
        }
    }

    /// The tone of [`Column::display`]'s cell for `n`, from the report's facts.
    pub fn tone(self, n: &NodeReport) -> Tone {
        let unreachable = n.status == NodeStatus::Unreachable;
        // Unknown where the cell says `?`: a missing fact of a node that answered.
        let known = |k: bool| {
            if k || unreachable {
                Tone::Plain
            } else {
                Tone::Unknown
            }
        };
        let driver = n.driver.as_ref();
        let peermem = n.peermem.as_ref();
        let bit = |b: Option<bool>| {
            if b.is_some() {
                Tone::Plain
            } else {
                Tone::Unknown
            }
        };
        match self {
            Column::Status => Tone::Status(n.status),
            Column::Reasons => Tone::Dim,
            Column::Kernel => known(n.kernel.as_ref().is_some_and(|k| k.release.is_some())),
            Column::Flavor => match driver {
                Some(d) if d.flavor == crate::model::Flavor::Proprietary => Tone::Warn,
                d => known(d.is_some()),
            },
            Column::Driver => known(driver.is_some()),
            Column::Gpus => known(n.gpu_summary().is_some()),
            Column::DmaBuf if unreachable => Tone::Plain,
            // No DMA-BUF blocks only where GPUDirect RDMA applies.
            Column::DmaBuf => match n.dma_buf.as_ref().and_then(|d| d.kernel_support) {
                Some(false) if !n.reasons.iter().any(|r| r.code == Code::NoRdmaDevice) => {
                    Tone::Crit
                }
                b => bit(b),
            },
            Column::Peermem => match peermem.map(|p| (p.loaded, p.configured)) {
                None | Some((Some(false), Some(false))) => Tone::Plain,
                Some((Some(true), _) | (_, Some(true))) => Tone::Warn,
                Some(_) => Tone::Unknown,
            },
            Column::PeermemLoaded => bit(peermem.and_then(|p| p.loaded)),
            Column::PeermemConfigured => bit(peermem.and_then(|p| p.configured)),
            Column::NextBoot if unreachable => Tone::Plain,
            Column::NextBoot => match n.next_boot_driver() {
                Some(NextBootDriver::Missing) => Tone::Crit,
                d => bit(d.map(|_| true)),
            },
            Column::RdmaDevices => bit(n
                .rdma
                .as_ref()
                .and_then(|r| r.devices.as_ref())
                .map(|_| true)),
            Column::Node
            | Column::MinCc
            | Column::Rollout
            | Column::RolloutLock
            | Column::DrainedBy
            | Column::OperatorUpgrade => Tone::Plain,
        }
    }

    /// The CSV value: unknown is empty, booleans are `true`/`false`, reasons are every code
    /// joined by `;`, next boot is `ok`/`missing`/`n/a` (raw node text: the CSV writer escapes
    /// and neutralizes it).
    pub fn csv_value(self, n: &NodeReport) -> String {
        let opt_bool = |b: Option<bool>| b.map_or(String::new(), |b| b.to_string());
        let driver = n.driver.as_ref();
        match self {
            Column::Node => n.name.clone(),
            Column::Status => n.status.to_string(),
            Column::Kernel => n
                .kernel
                .as_ref()
                .and_then(|k| k.release.clone())
                .unwrap_or_default(),
            Column::Flavor => driver
                .map(|d| d.flavor.as_str().to_string())
                .unwrap_or_default(),
            Column::Driver => driver.and_then(|d| d.version.clone()).unwrap_or_default(),
            // `none` when known to have no GPU (empty is unknown).
            Column::Gpus => n
                .gpu_summary()
                .map(|s| if s.is_empty() { "none".into() } else { s })
                .unwrap_or_default(),
            Column::MinCc => n.min_compute_capability().unwrap_or_default(),
            Column::DmaBuf => opt_bool(n.dma_buf.as_ref().and_then(|d| d.kernel_support)),
            Column::PeermemLoaded => opt_bool(n.peermem.as_ref().and_then(|p| p.loaded)),
            Column::PeermemConfigured => opt_bool(n.peermem.as_ref().and_then(|p| p.configured)),
            Column::Peermem => self.display(n),
            Column::NextBoot => n
                .next_boot_driver()
                .map_or(String::new(), |d| d.as_str().to_string()),
            Column::Reasons => n
                .reasons
                .iter()
                .map(|r| r.code.as_str())
                .collect::<Vec<_>>()
                .join(";"),
            Column::RdmaDevices => n
                .rdma
                .as_ref()
                .and_then(|r| r.devices.as_ref())
                .map_or(String::new(), |d| d.len().to_string()),
            Column::Rollout => self.display(n),
            Column::RolloutLock => match n.rollout.as_ref() {
                Some(r) => match (r.locked, &r.lock) {
                    (Some(false), _) => "free".into(),
                    (Some(true), Some(o)) if !o.rollout.is_empty() => o.rollout.clone(),
                    (Some(true), _) => "held".into(),
                    (None, _) => String::new(),
                },
                None => String::new(),
            },
            Column::DrainedBy => n
                .rollout
                .as_ref()
                .and_then(|r| r.drained_by.clone())
                .unwrap_or_default(),
            Column::OperatorUpgrade => String::new(),
        }
    }

    /// Compares two nodes by this column (unknown last, then the cell text).
    pub fn compare(self, a: &NodeReport, b: &NodeReport) -> Ordering {
        fn opt<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Ordering {
            match (a, b) {
                (Some(a), Some(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
        }
        let text = || self.display(a).cmp(&self.display(b));
        match self.spec().sort {
            SortKey::Text => text(),
            SortKey::Version => crate::model::version_cmp(&self.display(a), &self.display(b)),
            SortKey::Status => a.status.cmp(&b.status),
            SortKey::ComputeCapability => {
                let cc = |n: &NodeReport| {
                    n.min_compute_capability()
                        .and_then(|s| s.parse::<crate::model::MajorMinor>().ok())
                };
                opt(cc(a), cc(b))
            }
            SortKey::GpuCount => {
                let count = |n: &NodeReport| n.gpus.as_ref().map(Vec::len);
                opt(count(a), count(b)).then_with(text)
            }
            // The row sorts these (App::sort_key_cmp): the report does not hold them.
            SortKey::Cell => Ordering::Equal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture's report, from its committed JSON output (tests/golden/).
    fn golden(json: &str) -> NodeReport {
        let doc: serde_json::Value = serde_json::from_str(json).unwrap();
        serde_json::from_value(doc["nodes"][0].clone()).unwrap()
    }

    /// Tones follow the report's facts, not the cell's words: the same words can carry
    /// different tones, and a fact's state picks the tone.
    #[test]
    fn tones_come_from_the_facts() {
        let a100 = golden(include_str!(
            "../tests/golden/nodes/a100-proprietary-535-k5.15-peermem.json"
        ));
        assert_eq!(Column::Flavor.tone(&a100), Tone::Warn);
        assert_eq!(Column::Peermem.tone(&a100), Tone::Warn);
        assert_eq!(Column::DmaBuf.tone(&a100), Tone::Plain);
        assert_eq!(
            Column::Status.tone(&a100),
            Tone::Status(NodeStatus::Migrate)
        );
        assert_eq!(Column::Reasons.tone(&a100), Tone::Dim);
        let a10 = golden(include_str!(
            "../tests/golden/nodes-v2/a10-open-560-next-boot-without-driver.json"
        ));
        assert_eq!(Column::NextBoot.tone(&a10), Tone::Crit);
        assert_eq!(Column::Flavor.tone(&a10), Tone::Plain);
        // No DMA-BUF support: critical where GPUDirect RDMA applies, plain where it does not
        // (the same "no" in both cells).
        let mut h200 = golden(include_str!(
            "../tests/golden/nodes/h200-open-580-k6.18-real.json"
        ));
        h200.dma_buf.as_mut().unwrap().kernel_support = Some(false);
        assert_eq!(Column::DmaBuf.display(&h200), "no");
        assert_eq!(Column::DmaBuf.tone(&h200), Tone::Plain, "no RDMA device");
        h200.reasons.retain(|r| r.code != Code::NoRdmaDevice);
        assert_eq!(Column::DmaBuf.display(&h200), "no");
        assert_eq!(Column::DmaBuf.tone(&h200), Tone::Crit);
        // Unknown facts are Unknown where the node answered, plain where it was unreachable.
        h200.dma_buf.as_mut().unwrap().kernel_support = None;
        h200.kernel = None;
        assert_eq!(Column::DmaBuf.tone(&h200), Tone::Unknown);
        assert_eq!(Column::Kernel.tone(&h200), Tone::Unknown);
        h200.status = NodeStatus::Unreachable;
        assert_eq!(Column::DmaBuf.tone(&h200), Tone::Plain);
        assert_eq!(Column::Kernel.tone(&h200), Tone::Plain);
        // Every cell that says `?` is Unknown, whatever the column.
        for n in [&a100, &a10, &h200] {
            for c in Column::matrix() {
                if c.display(n) == "?" {
                    assert_eq!(c.tone(n), Tone::Unknown, "{c:?} of {}", n.name);
                }
            }
        }
    }

    #[test]
    fn every_column_has_one_entry_and_the_csv_keeps_its_documented_order() {
        let all = [
            Column::Node,
            Column::Status,
            Column::Kernel,
            Column::Flavor,
            Column::Driver,
            Column::Gpus,
            Column::MinCc,
            Column::DmaBuf,
            Column::Peermem,
            Column::PeermemLoaded,
            Column::PeermemConfigured,
            Column::NextBoot,
            Column::Reasons,
            Column::RdmaDevices,
            Column::Rollout,
            Column::RolloutLock,
            Column::DrainedBy,
            Column::OperatorUpgrade,
        ];
        for c in all {
            assert_eq!(COLUMNS.iter().filter(|s| s.column == c).count(), 1, "{c:?}");
        }
        let names: Vec<&str> = Column::csv().into_iter().map(|(_, n)| n).collect();
        assert_eq!(
            names,
            [
                "name",
                "status",
                "kernel",
                "flavor",
                "driver",
                "gpus",
                "min_compute_capability",
                "dma_buf",
                "peermem_loaded",
                "peermem_configured",
                "reasons",
                "next_boot_driver",
                "rdma_devices",
                "rollout_lock",
                "drained_by"
            ]
        );
        assert_eq!(Column::table().count(), 11);
        assert_eq!(Column::matrix().count(), 13);
    }
}
