//! Kernel config: `kconfig::parse`, `kconfig::decode_od_hex`, `kconfig::gunzip_parse` (small limit).
#![no_main]

use gpufleet::model::parse::kconfig;
use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    // The raw bytes as a (possibly bogus) /proc/config.gz.
    if let Ok(c) = kconfig::gunzip_parse(data, LIMIT) {
        assert!(c.options.keys().all(|name| name.starts_with("CONFIG_")));
    }
    let text = String::from_utf8_lossy(data);
    let c = kconfig::parse(&text);
    for (name, (_, line)) in &c.options {
        assert!(name.starts_with("CONFIG_"));
        assert!(text.lines().any(|l| l == line));
    }
    if let Ok(bytes) = kconfig::decode_od_hex(&text) {
        assert_eq!(bytes.len(), text.split_ascii_whitespace().count());
        let _ = kconfig::gunzip_parse(&bytes, LIMIT);
    }
});
