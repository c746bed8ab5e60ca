//! Pure code: parsing probe output into facts, assessing them, and the report types.
//! Nothing here does I/O; everything is unit-tested on verbatim samples.

pub mod facts;
pub mod parse;
pub mod report;
pub mod rules;
pub mod text;

// The paths before the model was laid out by subject (removed in the next commit).
pub use facts::{gpu_operator, gpudb};
pub use parse::{
    boot, driver, kconfig, klog, lock, modconf, modules, os, params, sections, secureboot, smi,
    sysfs,
};
pub use rules as assess;

pub use assess::{Assessment, Code, NodeStatus, Severity, Thresholds, assess};
pub use facts::{Facts, collect};
pub use report::{NodeReport, Snapshot};
pub use sections::ProbeOutput;
