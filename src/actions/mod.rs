//! The only code that changes nodes: drain backends, canary/wave rollouts, the journal, and
//! the write permit every such function requires.

pub mod drain;
pub mod journal;
pub mod names;
pub mod node_side;
pub mod permit;
pub mod rollout;
pub mod scheduler;
