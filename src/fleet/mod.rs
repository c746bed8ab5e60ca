//! The use cases: what gpufleet does, between the commands that ask for it (`cli`, the TUI's
//! `runtime`) and the parts that do it (`probe`, `snapshot`, `actions`).
//!
//! - [`scan`]: one decision of what a scan reads (this machine, an inventory's nodes over SSH,
//!   collected files) and one stream of reports, with the journal's drain marks joined.
//! - [`scheduler`]: each node's scheduler state (Slurm, Kubernetes), joined to its report as a
//!   `scheduler-down` / `scheduler-drained` reason.
//! - [`rollout`]: open the state folder → prepare (probe, then plan) → execute → report.
//!
//! The rule of this layer: it decides and orchestrates, and never prints, prompts or draws;
//! `cli` parses, prints and prompts; `runtime` runs the terminal and the event loop; neither
//! orchestrates.

pub mod rollout;
pub mod scan;
pub mod scheduler;
