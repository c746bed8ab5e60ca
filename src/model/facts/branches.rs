//! The last NVIDIA driver branch of each GPU architecture, compiled in from
//! `data/driver-branches.toml` (NVIDIA's Unix Graphics Feature Deprecation Schedule: 580 for
//! Maxwell, Pascal and Volta, 470 for Kepler; the file quotes it). Read by
//! `driver-branch-drops-gpu` (docs/domain.md "Schema 3", "New rules and reason codes") and by
//! the rollout plan's `driver_version` check.

use std::sync::LazyLock;

use serde::Deserialize;

const BRANCHES_TOML: &str = include_str!("../../../data/driver-branches.toml");

/// One `[[architecture]]` row.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LastBranch {
    /// As the `architecture` column of data/nvidia-gpus.tsv names it (`Pascal`).
    pub name: String,
    /// The last driver branch (the version's first field) that supports it.
    pub last_branch: u32,
    /// The schedule's sentence, word for word.
    #[serde(default)]
    pub quote: Option<String>,
    /// What the schedule says, when not word for word.
    #[serde(default)]
    pub note: Option<String>,
}

/// One `[[gpu]]` row: the lowest driver a GPU is supported with.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuMinimum {
    /// The product, as the source names it (`NVIDIA HGX B200`).
    pub name: String,
    /// PCI device ids of data/nvidia-gpus.tsv (hex).
    pub device_ids: Vec<String>,
    /// The lowest driver version (`570.133.20`).
    pub min_version: String,
    /// The public document and the sentence that says so.
    pub source: String,
    pub quote: String,
}

/// One `[[release]]` row: the driver container a GPU Operator release names as its default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverRelease {
    /// `595.91.07`.
    pub version: String,
    /// The GPU Operator release (`26.7`, MAJOR.MINOR).
    pub operator: String,
    /// The day the release notes gained the row (YYYY-MM-DD).
    pub date: String,
    pub source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    #[cfg_attr(not(test), allow(dead_code))]
    schema: u32,
    source: String,
    architecture: Vec<LastBranch>,
    #[serde(default)]
    gpu: Vec<GpuMinimum>,
    #[serde(default)]
    release: Vec<DriverRelease>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    // The file is the project's own, checked by the tests below: a broken one is a build defect
    // that those tests catch, so an empty table here (no GPU dropped) is never reached in a
    // tested build.
    toml::from_str(BRANCHES_TOML).unwrap_or(Table {
        schema: 0,
        source: String::new(),
        architecture: Vec::new(),
        gpu: Vec::new(),
        release: Vec::new(),
    })
});

/// The minimum driver of the GPU with PCI device id `id`, if the table names one.
pub fn gpu_minimum(id: u16) -> Option<&'static GpuMinimum> {
    TABLE.gpu.iter().find(|g| {
        g.device_ids
            .iter()
            .any(|d| u16::from_str_radix(d, 16).ok() == Some(id))
    })
}

/// The dated driver releases, in the file's order (oldest first).
pub fn releases() -> &'static [DriverRelease] {
    &TABLE.release
}

/// The last branch that supports `architecture`; `None`: every branch released so far does.
pub fn last_branch(architecture: &str) -> Option<&'static LastBranch> {
    TABLE
        .architecture
        .iter()
        .find(|a| a.name.eq_ignore_ascii_case(architecture))
}

/// Where the table comes from (its `source` URL).
pub fn source() -> &'static str {
    &TABLE.source
}

/// A driver version's branch: its first numeric field (`580` of `580.95.05`, `595` of
/// `595.71.03`); `None` when it does not start with a number.
pub fn branch_of(version: &str) -> Option<u32> {
    let first = version.trim().split(['.', '-']).next()?;
    (!first.is_empty() && first.len() <= 6 && first.bytes().all(|b| b.is_ascii_digit()))
        .then(|| first.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file parses, and every name is an architecture of data/nvidia-gpus.tsv
    /// (data/driver-branches.toml's header asks for this check).
    #[test]
    fn the_table_parses_and_names_known_architectures() {
        let t: Table = toml::from_str(BRANCHES_TOML).unwrap();
        assert_eq!(t.schema, 1);
        assert!(t.source.starts_with("https://forums.developer.nvidia.com/"));
        let archs: std::collections::HashSet<&str> = include_str!("../../../data/nvidia-gpus.tsv")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .skip(1)
            .filter_map(|l| l.split('\t').nth(3))
            .collect();
        for a in &t.architecture {
            assert!(archs.contains(a.name.as_str()), "{}", a.name);
            assert!(a.last_branch >= 100, "{}", a.name);
            assert!(a.quote.is_some() || a.note.is_some(), "{}", a.name);
        }
        assert_eq!(last_branch("Pascal").map(|b| b.last_branch), Some(580));
        assert_eq!(last_branch("Kepler").map(|b| b.last_branch), Some(470));
        assert_eq!(last_branch("Turing"), None);
        assert_eq!(last_branch("Hopper"), None);
        // Per-GPU minimums name GPUs of nvidia-gpus.tsv; releases are dated, oldest first.
        let ids: std::collections::HashSet<&str> = include_str!("../../../data/nvidia-gpus.tsv")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .skip(1)
            .filter_map(|l| l.split('\t').next())
            .collect();
        for g in &t.gpu {
            assert!(!g.device_ids.is_empty(), "{}", g.name);
            for d in &g.device_ids {
                assert!(ids.contains(d.as_str()), "{}: {d}", g.name);
            }
            assert!(branch_of(&g.min_version).is_some(), "{}", g.name);
            assert!(!g.source.is_empty() && !g.quote.is_empty(), "{}", g.name);
        }
        assert_eq!(
            gpu_minimum(0x2901).map(|g| g.min_version.as_str()),
            Some("570.133.20")
        );
        assert!(!t.release.is_empty());
        for w in t.release.windows(2) {
            assert!(w[0].date < w[1].date, "{} {}", w[0].version, w[1].version);
        }
        for r in &t.release {
            assert!(branch_of(&r.version).is_some(), "{}", r.version);
            assert!(
                r.date.len() == 10 && r.date.as_bytes()[4] == b'-' && r.date.as_bytes()[7] == b'-',
                "{}",
                r.date
            );
        }
    }

    #[test]
    fn branches_of_versions() {
        assert_eq!(branch_of("580.95.05"), Some(580));
        assert_eq!(branch_of("595.71.03"), Some(595));
        assert_eq!(branch_of("470"), Some(470));
        assert_eq!(branch_of("r535"), None);
        assert_eq!(branch_of(""), None);
        assert_eq!(branch_of("99999999999.1"), None);
    }
}
