//! gpufleet: inspect fleets of GPU nodes for the move from the proprietary NVIDIA module +
//! nvidia-peermem to open kernel modules + DMA-BUF.
//!
//! - [`model`]: pure code: probe output → facts → assessment → report.
//! - [`probe`]: the probe script and running it (local mode).
//! - [`snapshot`]: headless output formats and exit codes.
//! - [`config`]: the config file (`config.toml`).
//! - [`sim`]: `gpufleet sim`, a simulated fleet over SSH on this machine.

pub mod actions;
pub mod app;
pub mod cli;
pub mod config;
pub mod inventory;
pub mod model;
pub mod probe;
pub mod runtime;
pub mod sim;
pub mod snapshot;
pub mod ui;
