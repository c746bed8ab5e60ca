//! Schema-3 driver messages of the kernel log (any bytes as kept dmesg lines):
//! `nvrm::init_failed`, `nvrm::legacy_branch`, `nvrm::ignoring_driver`, `nvrm::already_bound`.
#![no_main]

use gpufleet::model::parse::{klog, nvrm};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for m in klog::messages(&text) {
        if let Some(x) = nvrm::init_failed(&m) {
            assert!(m.text.contains(&format!("RmInitAdapter failed! ({})", x.code)));
            assert_eq!(x.bus, x.bus.to_ascii_lowercase());
        }
        if let Some(b) = nvrm::legacy_branch(&m) {
            assert!(m.text.contains(&format!("NVIDIA {b}")));
        }
        if let Some(v) = nvrm::ignoring_driver(&m) {
            assert!(m.text.contains(&format!("The {v} NVIDIA driver will ignore")));
        }
        if let Some((bus, driver)) = nvrm::already_bound(&m) {
            assert!(!bus.is_empty() && !driver.is_empty());
        }
    }
});
