//! modules-load.d and modprobe.d files: `modconf::modules_load`, `modconf::modprobe`, and the
//! schema-3 readers (`modconf::logical_lines`, `modconf::blacklists`,
//! `modconf::cmdline_blacklists`).
#![no_main]

use gpufleet::model::parse::modconf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for l in modconf::modules_load(&text) {
        assert!(text.lines().any(|x| x == l.line));
    }
    for l in modconf::modprobe(&text) {
        assert!(l.line.contains("peermem") || l.line.contains("peer_mem"));
    }
    // A logical line is never a comment nor blank, and never longer than the input.
    for l in modconf::logical_lines(&text) {
        assert!(!l.trim_start_matches([' ', '\t']).starts_with('#'));
        assert!(l.len() <= text.len());
    }
    for b in modconf::blacklists(&text) {
        assert!(b.line.starts_with("blacklist"));
        assert!(b.line.contains(b.module.as_str()));
    }
    for (m, p) in modconf::cmdline_blacklists(&text) {
        assert!(!m.is_empty() && !m.contains(','));
        assert!(text.contains(&format!("{p}=")));
    }
});
