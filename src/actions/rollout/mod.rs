//! Rollouts: canaries first, then waves no larger than max-unavailable. Per node: lock →
//! drain → recipe steps → (reboot → wait for SSH) → re-probe → gates → uncordon → unlock.
//!
//! The plan is typed ([`Step`]) and carries every command it runs: the plan the operator
//! confirms is the plan the executor runs and the journal keeps (whole, in the rollout's
//! start entry); nothing is derived again from the inventory (only how to reach a node is
//! read from it). Every step is journaled before it runs; a failed step or gate stops that
//! node and leaves it drained; a node task that panics is that node's failure; `--resume`
//! continues a rollout from its journal without repeating completed steps, and attaches to a
//! recipe step still running on the node (recipe steps run detached: [`node_side`]).
//!
//! Split along the pure/I-O line: `plan` (the typed plan, planning: pure), `history` (the
//! journal's view of rollouts: pure), `live` (the node as probed now over the journal: what is
//! planned, whether the canaries open the waves; pure), `gates` (pure), `exec` (the executor: the only part that
//! runs commands, here and on nodes, and writes the journal), `local` (the state folder's
//! lock), `locks` (reading and breaking node locks from here). The use case that strings them
//! together (probe, plan, confirm, execute, report) is [`crate::fleet::rollout`].

mod budget;
#[cfg(test)]
mod budget_tests;
mod exec;
mod gates;
mod history;
#[cfg(test)]
mod history_tests;
mod live;
mod local;
mod locks;
mod plan;
#[cfg(test)]
mod tests;
mod waves;
pub mod wire;

pub use budget::*;
pub use exec::*;
pub use gates::*;
pub use history::*;
pub use live::*;
pub use local::*;
pub use locks::*;
pub use plan::*;
pub use waves::*;
