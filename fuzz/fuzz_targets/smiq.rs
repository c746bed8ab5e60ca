//! `nvidia-smi -q` and `nvidia-smi mig -lgi`: `smiq::parse_q` (GPU blocks, `Key : value` by
//! path), `smiq::parse_lgi` (the GPU instance table), and the words `mode`, `fabric_state`,
//! `yes_no` (docs/domain.md "Schema 3").
#![no_main]

use gpufleet::model::parse::smiq;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let gpus = smiq::parse_q(&text);
    assert!(gpus.len() <= smiq::MAX_GPUS);
    for g in &gpus {
        // A block opens on a `GPU <bus>` line of the input, with a normalized bus id.
        assert!(g.header.starts_with("GPU "));
        assert!(text.lines().any(|l| l.trim_end_matches('\r') == g.header));
        assert_eq!(g.bus_id.len(), 12, "{:?}", g.bus_id);
        assert_eq!(g.bus_id, g.bus_id.to_ascii_lowercase());
        assert!(g.fields.len() <= smiq::MAX_FIELDS);
        for (path, f) in &g.fields {
            // Each field comes from one indented line of the input holding its key and value.
            assert!(!path.is_empty());
            assert!(f.line.starts_with(' '));
            assert!(text.contains(f.line.as_str()));
            let key = path.rsplit('/').next().unwrap_or(path);
            assert!(f.line.contains(key.trim()), "{path:?} {:?}", f.line);
            assert!(f.line.contains(f.value.as_str()));
            let _ = (smiq::mode(&f.value), smiq::fabric_state(&f.value), smiq::yes_no(&f.value));
        }
    }
    // The words parse back from what they print.
    for w in ["Completed", "In Progress", "Not Started", "N/A"] {
        assert_eq!(smiq::fabric_state(w).map(|s| s.as_str()), Some(w));
    }
    match smiq::parse_lgi(&text) {
        Ok(rows) => {
            assert!(rows.len() <= 4096);
            for r in &rows {
                assert!(r.profile.starts_with("MIG "));
                assert!(r.placement.contains(':'));
                assert!(text.contains(r.line.as_str()));
            }
            if rows.is_empty() {
                assert!(
                    text.trim().starts_with("No GPU instances found")
                        || text.contains("GPU instances:")
                );
            }
        }
        Err(why) => assert!(!why.is_empty()),
    }
});
