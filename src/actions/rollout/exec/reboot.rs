//! Proven reboots: the node's boot identity ([`node_side::boot_id_command`]) is read before a
//! reboot step (`boot-id:<step>`) and journaled; after it (`wait-ssh:<step>`) the node must
//! answer with another one within `reboot_timeout`. A reboot that returns at once and goes down
//! later (`systemctl reboot`, `shutdown -r`, `sh -c 'sleep 8; reboot' &`) is waited for: the old
//! identity is "not rebooted yet", never "back". The old identity at the timeout, no answer, or
//! an identity that cannot be read or compared stops the node there (drained), with both
//! identities in the journal (docs/domain.md, "Proven reboots").

use std::time::{Duration, Instant};

use super::*;
use crate::actions::node_side::BootIdentity;

/// How the `boot-id:<step>` outcome starts; the identity follows ([`BootIdentity`]'s form).
const BEFORE: &str = "boot identity before the reboot: ";

/// How often a rebooting node is asked for its boot identity.
const POLL: Duration = Duration::from_secs(1);

/// What the node said last while it was waited for.
enum Seen {
    /// No answer (refused, closed, timed out, cut off): it went away.
    Away(String),
    /// The identity from before: not rebooted (yet).
    Old,
    /// An identity that cannot be compared with the one from before.
    Other(BootIdentity),
    /// It answered, but no identity could be read.
    Unreadable(String),
}

impl Executor {
    /// `boot-id:<before>`: reads the node's boot identity before the reboot step `before` and
    /// keeps it; the outcome (journaled) names it. Errors: it cannot be read (then the reboot
    /// step does not run: its reboot could not be proven).
    pub(super) async fn read_boot(
        &self,
        node: &Node,
        before: &str,
        root: &str,
    ) -> Result<String, String> {
        let cmd = wire::boot_id(root);
        let cant = |why: String| {
            format!(
                "cannot read the node's boot identity ({why}): its reboot could not be proven, so step:{before} was not run"
            )
        };
        let o = node_read(&self.scan, node, &cmd, Duration::from_secs(60))
            .await
            .map_err(|u| cant(u.message))?;
        if o.exit_status != Some(0) {
            return Err(cant(format!("{}: {}", exit_words(&o), excerpt(&o.output))));
        }
        let id = node_side::parse_boot_id(&String::from_utf8_lossy(&o.output))
            .map_err(|e| cant(excerpt(e.as_bytes())))?;
        self.boots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((node.name.clone(), before.to_string()), id.clone());
        Ok(format!("{BEFORE}{id}"))
    }

    /// The identity `read_boot` read before the reboot step `after`: kept by this run, or (on
    /// resume) the journal's last `boot-id:<after>` done entry of this rollout and node.
    fn boot_before(&self, rollout: &str, node: &str, after: &str) -> Option<BootIdentity> {
        let kept = self
            .boots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(node.to_string(), after.to_string()))
            .cloned();
        if kept.is_some() {
            return kept;
        }
        let path = self
            .journal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .path
            .clone();
        let (entries, _) = crate::actions::journal::read(&path).ok()?;
        let label = format!("boot-id:{after}");
        entries
            .iter()
            .rev()
            .find(|e| {
                e.rollout == rollout && e.node == node && e.step == label && e.phase == Phase::Done
            })
            .and_then(|e| BootIdentity::parse(e.outcome.strip_prefix(BEFORE)?))
    }

    /// `wait-ssh:<after>`: waits until the node answers with a boot identity other than the one
    /// from before the reboot step `after`, asking every second, within `timeout_s`. The outcome
    /// names both identities and when the node went away; the error says what the node said last
    /// (the old identity: it did not reboot; nothing: it never came back; an identity that
    /// cannot be read or compared: the reboot is not proven).
    pub(super) async fn wait_reboot(
        &self,
        rollout: &str,
        node: &Node,
        after: &str,
        root: &str,
        timeout_s: u64,
    ) -> Result<String, String> {
        let Some(before) = self.boot_before(rollout, &node.name, after) else {
            return Err(format!(
                "the boot identity from before step:{after} is not in the journal (a plan of an older gpufleet): the reboot cannot be proven; check the node, then `gpufleet upgrade --abandon` this rollout and uncordon the node yourself"
            ));
        };
        let root = if root.is_empty() { &node.root } else { root };
        let cmd = wire::boot_id(root);
        let start = Instant::now();
        let limit = Duration::from_secs(timeout_s);
        let mut away: Option<u64> = None;
        loop {
            let seen = match node_read(&self.scan, node, &cmd, Duration::from_secs(10)).await {
                // A node that answers with another host key is not the node that rebooted.
                Err(u) if matches!(u.code, Code::HostKeyMismatch | Code::HostKeyUnknown) => {
                    return Err(format!("{} (boot identity before: {before})", u.message));
                }
                Err(u) => Seen::Away(u.message),
                Ok(o) if o.exit_status.is_none() => Seen::Away(exit_words(&o)),
                Ok(o) => match node_side::parse_boot_id(&String::from_utf8_lossy(&o.output)) {
                    Ok(now) => match before.is_new(&now) {
                        Some(true) => {
                            let went = away.map_or_else(
                                || "its boot identity changed".to_string(),
                                |s| format!("it went away after {s} s"),
                            );
                            return Ok(format!(
                                "rebooted: boot identity before {before}, now {now}; {went}, back with the new one after {} s",
                                start.elapsed().as_secs()
                            ));
                        }
                        Some(false) => Seen::Old,
                        None => Seen::Other(now),
                    },
                    Err(e) => Seen::Unreadable(excerpt(e.as_bytes())),
                },
            };
            if matches!(seen, Seen::Away(_)) && away.is_none() {
                away = Some(start.elapsed().as_secs());
            }
            if start.elapsed() >= limit {
                let went = away.map_or_else(
                    || "it never went away".to_string(),
                    |s| format!("it went away after {s} s"),
                );
                return Err(match seen {
                    Seen::Old => format!(
                        "not rebooted: after {timeout_s} s the node still answers with its boot identity from before step:{after} ({before}; {went}); the gates did not run"
                    ),
                    Seen::Away(why) => format!(
                        "the node did not come back within {timeout_s} s ({went}; last: {why}); boot identity before: {before}"
                    ),
                    Seen::Other(now) => format!(
                        "the reboot is not proven: the node answers with {now}, which cannot be compared with {before} from before step:{after} ({went})"
                    ),
                    Seen::Unreadable(why) => format!(
                        "the reboot is not proven: the node answers, but its boot identity cannot be read ({why}; {went}); boot identity before: {before}"
                    ),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
