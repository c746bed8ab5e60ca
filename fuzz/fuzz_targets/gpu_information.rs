//! sysfs and /proc/driver/nvidia/gpus: `sysfs::parse_information`, `sysfs::normalize_bus_id`,
//! `sysfs::parse_hex`. The first line of the input is the bus id, the rest the file.
#![no_main]

use gpufleet::model::parse::sysfs;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (bus, file) = text.split_once('\n').unwrap_or((&text, ""));
    let g = sysfs::parse_information(bus, file);
    if let Some(m) = &g.model {
        assert!(
            g.model_line
                .as_deref()
                .is_some_and(|l| l.contains(m.as_str()))
        );
    }
    for s in [bus, &*text] {
        if let Some(n) = sysfs::normalize_bus_id(s) {
            assert_eq!(n.len(), "0000:00:00.0".len(), "{n:?}");
            assert_eq!(sysfs::normalize_bus_id(&n).as_deref(), Some(n.as_str()));
        }
    }
    let _ = sysfs::parse_hex(&text);
    let _ = sysfs::parse_hex(file);
});
