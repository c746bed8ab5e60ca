//! Kernel config: `kconfig::parse`, `kconfig::decode_od_hex`, `kconfig::gunzip` (small limit).
#![no_main]

use gpufleet::model::parse::kconfig;
use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    // The raw bytes as a (possibly bogus) /proc/config.gz.
    if let Ok(text) = kconfig::gunzip(data, LIMIT) {
        assert!(text.len() as u64 <= LIMIT);
        let _ = kconfig::parse(&text);
    }
    let text = String::from_utf8_lossy(data);
    let c = kconfig::parse(&text);
    for (name, (_, line)) in &c.options {
        assert!(name.starts_with("CONFIG_"));
        assert!(text.lines().any(|l| l == line));
    }
    if let Ok(bytes) = kconfig::decode_od_hex(&text) {
        assert_eq!(bytes.len(), text.split_ascii_whitespace().count());
        if let Ok(t) = kconfig::gunzip(&bytes, LIMIT) {
            assert!(t.len() as u64 <= LIMIT);
        }
    }
});
