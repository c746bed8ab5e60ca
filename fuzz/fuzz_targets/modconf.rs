//! modules-load.d and modprobe.d files: `modconf::modules_load`, `modconf::modprobe`.
#![no_main]

use gpufleet::model::parse::modconf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for l in modconf::modules_load(&text) {
        assert!(text.lines().any(|x| x == l.line));
    }
    for l in modconf::modprobe(&text) {
        assert!(l.line.contains("peermem"));
    }
});
