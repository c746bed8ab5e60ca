//! The GPU Operator's node labels, as its upgrade controller reads and writes them
//! (docs/domain.md, "GPU Operator upgrade labels"): shared by the matrix's column, the policy
//! check of live nodes, and the Kubernetes drain backend.

/// The GPU Operator's per-node upgrade state label: empty or absent when no upgrade is under
/// way; `upgrade-done` once finished.
pub const UPGRADE_STATE_LABEL: &str = "nvidia.com/gpu-driver-upgrade-state";
/// The label that tells the GPU Operator to leave a node's driver alone (`true`).
pub const UPGRADE_SKIP_LABEL: &str = "nvidia.com/gpu-driver-upgrade.skip";
