//! /etc/os-release: `os::pretty_name`.
#![no_main]

use gpufleet::model::parse::os;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(name) = os::pretty_name(&text) {
        assert!(name.len() <= 2 * text.len() + 1);
    }
});
