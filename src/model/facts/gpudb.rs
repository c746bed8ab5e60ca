//! GPU tables compiled into the binary from `data/` (copies of the team's shared data, see
//! `data/README.md`): NVIDIA PCI device id → name, architecture, compute capability
//! (`data/nvidia-gpus.tsv`, from Debian's pci.ids and NVIDIA's CUDA GPU list), and the PCI device
//! ids the open kernel modules support (`data/open-gpu-supported.tsv`, from the
//! open-gpu-kernel-modules README at 595.45.04).

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

const GPUS_TSV: &str = include_str!("../../../data/nvidia-gpus.tsv");
const OPEN_TSV: &str = include_str!("../../../data/open-gpu-supported.tsv");

/// One row of nvidia-gpus.tsv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuModel {
    pub device_id: u16,
    pub name: String,
    pub architecture: String,
    /// "major.minor", or `None` where the table leaves it empty (unknown).
    pub compute_capability: Option<String>,
}

struct Db {
    by_id: HashMap<u16, GpuModel>,
    by_name: HashMap<String, u16>,
    open_ids: HashSet<u16>,
}

fn reader(text: &str) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .comment(Some(b'#'))
        .flexible(true)
        .from_reader(text.as_bytes())
}

fn name_key(name: &str) -> String {
    name.trim()
        .trim_start_matches("NVIDIA ")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

static DB: LazyLock<Db> = LazyLock::new(|| {
    let mut by_id = HashMap::new();
    let mut by_name = HashMap::new();
    for rec in reader(GPUS_TSV).records().flatten() {
        let Some(id) = rec.get(0).and_then(|s| u16::from_str_radix(s, 16).ok()) else {
            continue;
        };
        let name = rec.get(1).unwrap_or_default().to_string();
        let cc = rec.get(4).filter(|s| !s.is_empty()).map(str::to_string);
        by_name.entry(name_key(&name)).or_insert(id);
        by_id.insert(
            id,
            GpuModel {
                device_id: id,
                name,
                architecture: rec.get(3).unwrap_or_default().to_string(),
                compute_capability: cc,
            },
        );
    }
    let mut open_ids = HashSet::new();
    for rec in reader(OPEN_TSV).records().flatten() {
        if let Some(id) = rec.get(1).and_then(|s| u16::from_str_radix(s, 16).ok()) {
            open_ids.insert(id);
            if let Some(name) = rec.get(0) {
                by_name.entry(name_key(name)).or_insert(id);
            }
        }
    }
    Db {
        by_id,
        by_name,
        open_ids,
    }
});

/// The table row for PCI device id `id`.
pub fn by_device_id(id: u16) -> Option<&'static GpuModel> {
    DB.by_id.get(&id)
}

/// The PCI device id of a product name as nvidia-smi or the driver prints it
/// (`NVIDIA A100-SXM4-80GB`, `Tesla V100-SXM2-32GB`); compared ignoring case and punctuation.
pub fn device_id_by_name(name: &str) -> Option<u16> {
    DB.by_name.get(&name_key(name)).copied()
}

/// Whether the open kernel modules list `id` as supported (whatever its subsystem ids).
pub fn open_supported(id: u16) -> bool {
    DB.open_ids.contains(&id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_rows() {
        let h200 = by_device_id(0x2335).unwrap();
        assert_eq!(h200.name, "NVIDIA H200");
        assert_eq!(h200.compute_capability.as_deref(), Some("9.0"));
        assert_eq!(
            by_device_id(0x1db5).unwrap().compute_capability.as_deref(),
            Some("7.0")
        );
        assert!(open_supported(0x2335));
        assert!(!open_supported(0x1db5));
        assert_eq!(device_id_by_name("Tesla V100-SXM2-32GB"), Some(0x1db5));
        assert_eq!(device_id_by_name("NVIDIA A100-SXM4-80GB"), Some(0x20b2));
        assert_eq!(device_id_by_name("no such gpu"), None);
    }

    /// Every data row of both files is loaded (the header and `#` comments are not rows).
    #[test]
    fn every_row_loads() {
        let ids = |text: &str, col: usize| -> HashSet<String> {
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .skip(1)
                .filter_map(|l| l.split('\t').nth(col).map(str::to_string))
                .collect()
        };
        assert_eq!(DB.by_id.len(), ids(GPUS_TSV, 0).len());
        assert_eq!(DB.open_ids.len(), ids(OPEN_TSV, 1).len());
        assert!(DB.open_ids.len() > 250);
    }
}
