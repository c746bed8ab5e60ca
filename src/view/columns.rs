//! One column registry for the TUI's matrix, the snapshot table and the CSV: each column's id,
//! title, CSV name and position, cell text, width hints and sort key, in one place. The TUI and
//! the table show [`Column::display`] cells (people's words: `yes`, `?` for unknown, `-` for an
//! unreachable node); the CSV shows [`Column::csv_value`] (machine values: `true`, empty for
//! unknown; its column order is the documented schema, docs/domain.md "Snapshot JSON").

use std::cmp::Ordering;

use super::{self as view, Cell, Fact, Tone, machine};
use crate::model::{Code, Flavor, NodeReport};

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

    /// The cell people read, its text and tone ([`super::Cell`]; raw node text: callers
    /// escape it for their output). `?` (Unknown) is a fact the report has as `null` on a node
    /// that answered, `-` nothing to read.
    pub fn cell(self, n: &NodeReport) -> Cell {
        let unreachable = !view::reached(n);
        let yes_no = |f: Fact<bool>| f.cell(|b| Cell::plain(view::yes_no(b)));
        match self {
            Column::Node => Cell::plain(n.name.clone()),
            Column::Status => Cell::new(n.status.to_string(), Tone::Status(n.status)),
            Column::Kernel => view::kernel(n).cell(Cell::plain),
            Column::Flavor => view::flavor(n).cell(|f| {
                let tone = if f == Flavor::Proprietary {
                    Tone::Warn
                } else {
                    Tone::Plain
                };
                Cell::new(f.as_str(), tone)
            }),
            Column::Driver => view::driver_version(n).cell(Cell::plain),
            Column::Gpus => view::gpus(n).cell(Cell::plain),
            Column::MinCc => n
                .min_compute_capability()
                .map_or_else(Cell::none, Cell::plain),
            Column::DmaBuf if unreachable => Cell::none(),
            // No DMA-BUF blocks only where GPUDirect RDMA applies.
            Column::DmaBuf => view::dma_buf(n).cell(|b| {
                let tone = if !b && view::rdma_applies(n) {
                    Tone::Crit
                } else {
                    Tone::Plain
                };
                Cell::new(view::yes_no(b), tone)
            }),
            Column::Peermem => match &n.peermem {
                None => Cell::none(),
                Some(p) => match (p.loaded, p.configured) {
                    (Some(true), Some(true)) => Cell::new("loaded+boot", Tone::Warn),
                    (Some(true), _) => Cell::new("loaded", Tone::Warn),
                    (_, Some(true)) => Cell::new("at boot", Tone::Warn),
                    (Some(false), Some(false)) => Cell::plain("no"),
                    _ => Cell::unknown(),
                },
            },
            Column::PeermemLoaded => yes_no(view::peermem_loaded(n)),
            Column::PeermemConfigured => yes_no(view::peermem_configured(n)),
            Column::NextBoot => view::next_boot(n).cell(view::next_boot_cell),
            // The matrix leaves out fact-unknown (the detail pane says which and why).
            Column::Reasons => Cell::new(
                n.reasons
                    .iter()
                    .filter(|x| x.code != Code::FactUnknown)
                    .map(|x| x.code.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                Tone::Dim,
            ),
            Column::RdmaDevices => view::rdma_devices(n).cell(|d| Cell::plain(d.to_string())),
            // Markers only, empty otherwise (the matrix shows the column only when some node has
            // one; an unknown lock is said in the detail pane, and `null` in the JSON).
            Column::Rollout => Cell::plain(view::rollout_words(n.rollout_marks())),
            Column::RolloutLock | Column::DrainedBy => Cell::plain(self.csv_value(n)),
            Column::OperatorUpgrade => Cell::plain(""),
        }
    }

    /// The text of [`Column::cell`].
    pub fn display(self, n: &NodeReport) -> String {
        self.cell(n).text
    }

    /// The CSV value: unknown is empty, booleans are `true`/`false`, reasons are every code
    /// joined by `;`, next boot is `ok`/`missing`/`n/a` (raw node text: the CSV writer escapes
    /// and neutralizes it).
    pub fn csv_value(self, n: &NodeReport) -> String {
        let text = |f: Fact<&str>| f.known().unwrap_or_default().to_string();
        let opt_bool = |f: Fact<bool>| machine::boolean(f).unwrap_or_default();
        match self {
            Column::Node => n.name.clone(),
            Column::Status => n.status.to_string(),
            Column::Kernel => text(view::kernel(n)),
            Column::Flavor => machine::flavor(n).unwrap_or_default().to_string(),
            Column::Driver => text(view::driver_version(n)),
            // `none` when known to have no GPU (empty is unknown).
            Column::Gpus => view::gpus(n).known().unwrap_or_default(),
            Column::MinCc => n.min_compute_capability().unwrap_or_default(),
            Column::DmaBuf => opt_bool(view::dma_buf(n)),
            Column::PeermemLoaded => opt_bool(view::peermem_loaded(n)),
            Column::PeermemConfigured => opt_bool(view::peermem_configured(n)),
            Column::Peermem | Column::Rollout => self.display(n),
            Column::NextBoot => machine::next_boot(n).unwrap_or_default().to_string(),
            Column::Reasons => n
                .reasons
                .iter()
                .map(|r| r.code.as_str())
                .collect::<Vec<_>>()
                .join(";"),
            Column::RdmaDevices => view::rdma_devices(n)
                .known()
                .map_or(String::new(), |d| d.to_string()),
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
    use crate::model::NodeStatus;

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
            "../../tests/golden/nodes/a100-proprietary-535-k5.15-peermem.json"
        ));
        assert_eq!(Column::Flavor.cell(&a100).tone, Tone::Warn);
        assert_eq!(Column::Peermem.cell(&a100).tone, Tone::Warn);
        assert_eq!(Column::DmaBuf.cell(&a100).tone, Tone::Plain);
        assert_eq!(
            Column::Status.cell(&a100).tone,
            Tone::Status(NodeStatus::Migrate)
        );
        assert_eq!(Column::Reasons.cell(&a100).tone, Tone::Dim);
        let a10 = golden(include_str!(
            "../../tests/golden/nodes-v2/a10-open-560-next-boot-without-driver.json"
        ));
        assert_eq!(Column::NextBoot.cell(&a10).tone, Tone::Crit);
        assert_eq!(Column::Flavor.cell(&a10).tone, Tone::Plain);
        // No DMA-BUF support: critical where GPUDirect RDMA applies, plain where it does not
        // (the same "no" in both cells).
        let mut h200 = golden(include_str!(
            "../../tests/golden/nodes/h200-open-580-k6.18-real.json"
        ));
        h200.dma_buf.as_mut().unwrap().kernel_support = Some(false);
        assert_eq!(Column::DmaBuf.display(&h200), "no");
        assert_eq!(
            Column::DmaBuf.cell(&h200).tone,
            Tone::Plain,
            "no RDMA device"
        );
        h200.reasons.retain(|r| r.code != Code::NoRdmaDevice);
        assert_eq!(Column::DmaBuf.display(&h200), "no");
        assert_eq!(Column::DmaBuf.cell(&h200).tone, Tone::Crit);
        // Unknown facts are Unknown where the node answered, plain where it was unreachable.
        h200.dma_buf.as_mut().unwrap().kernel_support = None;
        h200.kernel = None;
        assert_eq!(Column::DmaBuf.cell(&h200).tone, Tone::Unknown);
        assert_eq!(Column::Kernel.cell(&h200).tone, Tone::Unknown);
        h200.status = NodeStatus::Unreachable;
        assert_eq!(Column::DmaBuf.cell(&h200).tone, Tone::Plain);
        assert_eq!(Column::Kernel.cell(&h200).tone, Tone::Plain);
        // Every cell that says `?` is Unknown, whatever the column.
        for n in [&a100, &a10, &h200] {
            for c in Column::matrix() {
                if c.display(n) == "?" {
                    assert_eq!(c.cell(n).tone, Tone::Unknown, "{c:?} of {}", n.name);
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
