//! The node lock, read and broken from here (`gpufleet locks`, `gpufleet unlock`).

use std::time::Duration;

use super::exec::{excerpt, exit_words, node_read, node_write};
use super::wire;
use crate::actions::node_side;
use crate::actions::permit::WritePermit;
use crate::inventory::Node;
use crate::probe::scan::Scan;

/// `Err` when `node`'s root prefix may not start a command's path
/// ([`crate::actions::names::root_prefix`]): nothing is run then.
fn checked_root(node: &Node) -> Result<(), String> {
    match crate::actions::names::root_prefix(&node.root) {
        None => Ok(()),
        Some(why) => Err(format!(
            "root {} is {why}: nothing was run",
            crate::actions::drain::shown(&node.root)
        )),
    }
}

/// Reads `node`'s node lock (read-only: no permit): `None` when free. Errors: the node does
/// not answer, or its root prefix is not an absolute path (nothing runs).
pub async fn read_lock(scan: &Scan, node: &Node) -> Result<Option<node_side::LockOwner>, String> {
    checked_root(node)?;
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
/// Errors as [`read_lock`].
pub async fn break_lock(
    permit: &WritePermit,
    scan: &Scan,
    node: &Node,
    rollout: &str,
    sudo: bool,
) -> Result<String, String> {
    checked_root(node)?;
    let cmd = wire::unlock(&node.root, rollout, sudo);
    let o = node_write(permit, scan, node, &cmd, Duration::from_secs(60))
        .await
        .map_err(|u| u.message)?;
    if o.exit_status == Some(0) {
        Ok(format!("the lock of rollout {rollout} is broken"))
    } else {
        Err(format!("{}: {}", exit_words(&o), excerpt(&o.output)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_root_is_never_put_into_a_command() {
        let mut n = Node::for_test("gpu01", "10.0.0.1");
        assert_eq!(checked_root(&n), Ok(()));
        n.root = "-rf".into();
        assert_eq!(
            checked_root(&n),
            Err("root \"-rf\" is not an absolute path: nothing was run".into())
        );
    }
}
