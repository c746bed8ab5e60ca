//! Pure code: parsing probe output into facts, assessing them, and the report types.
//! Nothing here does I/O; everything is unit-tested on verbatim samples.

pub mod assess;
pub mod boot;
pub mod diagnose;
pub mod driver;
pub mod facts;
pub mod gpu_operator;
pub mod gpudb;
pub mod kconfig;
pub mod klog;
pub mod lock;
pub mod modconf;
pub mod modules;
pub mod os;
pub mod params;
pub mod report;
pub mod sections;
pub mod secureboot;
pub mod smi;
pub mod sysfs;
pub mod text;

pub use assess::{Assessment, Code, NodeStatus, Severity, Thresholds, assess};
pub use facts::{Facts, collect};
pub use report::{NodeReport, Snapshot};
pub use sections::ProbeOutput;
