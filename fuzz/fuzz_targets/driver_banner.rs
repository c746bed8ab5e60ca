//! `driver::parse_banner` and `driver::parse_sys_version` on arbitrary text.
#![no_main]

use gpufleet::model::parse::driver;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(b) = driver::parse_banner(&text) {
        assert!(
            text.lines().any(|l| l == b.line),
            "banner line not in input"
        );
        assert!(!b.arch.is_empty() && !b.arch.contains(char::is_whitespace));
        if let Some(v) = &b.version {
            assert_eq!(driver::parse_sys_version(v).as_deref(), Some(v.as_str()));
        }
    }
    if let Some(v) = driver::parse_sys_version(&text) {
        assert_eq!(v, text.trim());
    }
});
