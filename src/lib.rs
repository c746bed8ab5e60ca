//! gpufleet: inspect fleets of GPU nodes for the move from the proprietary NVIDIA module +
//! nvidia-peermem to open kernel modules + DMA-BUF (docs/domain.md), and move them there.
//!
//! - [`model`]: pure code: probe output → sections → facts → assessment (status, reasons,
//!   evidence) → report; no I/O.
//! - [`probe`]: the probe script (`probe.sh`) and running it: locally, over SSH (russh), and
//!   fleet scans with bounded concurrency.
//! - [`inventory`]: the fleet (TOML, Ansible INI/YAML, Slurm, Kubernetes, host lists), node
//!   selection, ranges, ~/.ssh/config.
//! - [`config`]: the config file (`config.toml`), paths, recipes and gates.
//! - [`limits`]: the size caps on files read whole, and the one reader that keeps them.
//! - [`diag`]: line/column, suggestions and TOML error messages (a leaf).
//! - [`glob`]: shell-style `*`/`?` patterns in polynomial time (known_hosts, node selectors; a
//!   leaf).
//! - [`nccl`]: `gpufleet nccl`: a job's NCCL_DEBUG=INFO log → how GPUDirect RDMA ran, per host.
//! - [`diff`]: what changed between two snapshots (`gpufleet diff`, the TUI's `--compare`).
//! - [`view`]: the one view of a report: facts read once, cells (text and tone) for the
//!   matrix, the table and the detail pane, machine values for CSV, Prometheus and diff.
//! - [`snapshot`]: headless output formats (table, JSON, JSON Lines, CSV, Prometheus), atomic
//!   `--output`, collected snapshots (`--from`) and exit codes.
//! - [`actions`]: the only code that changes nodes: drain backends, rollouts, the journal, the
//!   write permit.
//! - [`app`]: the TUI's state machine and keymap (no terminal I/O).
//! - [`ui`]: drawing the TUI, themes.
//! - [`runtime`]: owns the terminal, input and tasks for the TUI.
//! - [`fleet`]: the use cases — a scan (one decision of what it reads, one stream of reports)
//!   and a rollout (prepare → plan → execute → report) — for the CLI and the TUI alike.
//! - [`cli`]: arguments → settings → a subcommand → exit code.
//! - [`policy`]: the Kubernetes side: ClusterPolicy, NVIDIADriver, MachineConfig checks against
//!   the committed schemas (schemas/), against a snapshot, and the ClusterPolicy patch.
//! - [`sim`]: `gpufleet sim`, a simulated fleet over SSH on this machine (no command runs).
//! - [`yaml`]: YAML as kubectl reads it, with lines (a leaf: policy and Ansible inventories).
//! - [`advice`]: what each status and reason code means and what to do (`gpufleet reasons`,
//!   docs/reasons.md).
//! - [`rt`]: the tokio runtime of the commands, and SIGINT/SIGTERM/SIGHUP as one future.

/// `gpufleet --version`: the package version and, when built from a git checkout, the commit
/// (`0.1.0 (git 28aa306c1d2e)`; build.rs reads `git rev-parse`, and a tarball build says the
/// version alone).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), env!("GPUFLEET_GIT_SUFFIX"));

pub mod actions;
pub mod advice;
pub mod app;
pub mod cli;
pub mod config;
pub mod diag;
pub mod diff;
pub mod duration;
pub mod fleet;
pub mod glob;
pub mod inventory;
pub mod limits;
pub mod model;
pub mod nccl;
pub mod policy;
pub mod probe;
pub mod rt;
pub mod runtime;
#[cfg(feature = "sim")]
pub mod sim;
pub mod snapshot;
pub mod ui;
pub mod view;
pub mod yaml;
