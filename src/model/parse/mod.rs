//! Probe output → raw files and commands: the section framing, and one parser per source.

pub mod boot;
pub mod driver;
pub mod kconfig;
pub mod klog;
pub mod lock;
pub mod modconf;
pub mod modules;
pub mod os;
pub mod params;
pub mod sections;
pub mod secureboot;
pub mod smi;
pub mod sysfs;
