//! The node lock, read and broken from here (`gpufleet locks`, `gpufleet unlock`).

use std::time::Duration;

use super::exec::{excerpt, exit_words, node_read, node_write};
use crate::actions::node_side;
use crate::actions::permit::WritePermit;
use crate::inventory::Node;
use crate::probe::scan::Scan;

/// Reads `node`'s node lock (read-only: no permit): `None` when free.
pub async fn read_lock(scan: &Scan, node: &Node) -> Result<Option<node_side::LockOwner>, String> {
    let o = node_read(
        scan,
        node,
        &node_side::read_lock_command(&node.root),
        Duration::from_secs(30),
    )
    .await
    .map_err(|u| u.message)?;
    node_side::parse_lock(&String::from_utf8_lossy(&o.output))
        .ok_or_else(|| format!("{}: {}", exit_words(&o), excerpt(&o.output)))
}

/// Breaks `node`'s lock if rollout `rollout` holds it (and only then). Needs the write permit.
pub async fn break_lock(
    permit: &WritePermit,
    scan: &Scan,
    node: &Node,
    rollout: &str,
    sudo: bool,
) -> Result<String, String> {
    let cmd = node_side::unlock_command(&node.root, rollout);
    let o = node_write(permit, scan, node, &cmd, sudo, Duration::from_secs(60))
        .await
        .map_err(|u| u.message)?;
    if o.exit_status == Some(0) {
        Ok(format!("the lock of rollout {rollout} is broken"))
    } else {
        Err(format!("{}: {}", exit_words(&o), excerpt(&o.output)))
    }
}
