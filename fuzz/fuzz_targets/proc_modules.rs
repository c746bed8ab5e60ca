//! `modules::parse` (/proc/modules) on arbitrary text.
#![no_main]

use gpufleet::model::parse::modules;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (good, bad) = modules::parse(&text);
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(good.len() + bad.len(), lines);
    for m in &good {
        assert!(!m.name.is_empty() && !m.name.contains(char::is_whitespace));
        assert!(m.taint.bytes().all(|b| b.is_ascii_uppercase()));
        assert!(m.used_by.iter().all(|u| !u.is_empty() && !u.contains(',')));
    }
});
