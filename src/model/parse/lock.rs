//! gpufleet's node lock, as the probe reads it: `<root>/var/lib/gpufleet/rollout.lock/owner`,
//! written by a rollout's lock step (src/actions/node_side.rs). Its first line is the rollout
//! id, the second the operator (`user@host pid N`), the third `since <RFC 3339 time>`.

use serde::{Deserialize, Serialize};

/// Who holds a node lock, from its `owner` file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LockOwner {
    /// The rollout (empty when the lock folder has no owner file yet, or an empty one).
    pub rollout: String,
    /// `user@host pid N`, when the file says.
    pub operator: Option<String>,
    /// When it was taken (RFC 3339), when the file says.
    pub since: Option<String>,
}

/// Reads an `owner` file's text. Never fails: missing lines are `None` (or an empty rollout).
pub fn parse_owner(text: &str) -> LockOwner {
    let mut lines = text.lines();
    let rollout = lines.next().unwrap_or("").trim().to_string();
    let operator = lines
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty());
    let since = lines
        .next()
        .and_then(|l| l.trim().strip_prefix("since "))
        .map(str::to_string);
    LockOwner {
        rollout,
        operator,
        since,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_file_lines() {
        let o = parse_owner("r-1\nops@a pid 7\nsince 2026-12-01T00:00:00Z\n");
        assert_eq!(o.rollout, "r-1");
        assert_eq!(o.operator.as_deref(), Some("ops@a pid 7"));
        assert_eq!(o.since.as_deref(), Some("2026-12-01T00:00:00Z"));
        assert_eq!(parse_owner(""), LockOwner::default());
    }
}
