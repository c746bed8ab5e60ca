//! The GPU Operator: whether its driver container manages the node's driver (the fact), and its
//! node labels, as its upgrade controller reads and writes them (docs/domain.md, "GPU Operator
//! upgrade labels"): shared by the matrix's column, the policy check of live nodes, and the
//! Kubernetes drain backend.

use super::*;

/// The GPU Operator's per-node upgrade state label: empty or absent when no upgrade is under
/// way; `upgrade-done` once finished.
pub const UPGRADE_STATE_LABEL: &str = "nvidia.com/gpu-driver-upgrade-state";
/// The label that tells the GPU Operator to leave a node's driver alone (`true`).
pub const UPGRADE_SKIP_LABEL: &str = "nvidia.com/gpu-driver-upgrade.skip";

/// `<root>/run/nvidia/driver` exists (the `dir /run/nvidia/driver` section): the GPU Operator's
/// driver container, whose root that is, manages the driver (docs/domain.md, facts table
/// "driver managed by the GPU Operator").
pub(super) fn collect(out: &ProbeOutput, f: &mut Facts) {
    f.gpu_operator = exists(out, Kind::Dir, "/run/nvidia/driver");
}
