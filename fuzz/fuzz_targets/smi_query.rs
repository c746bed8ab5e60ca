//! nvidia-smi output: `smi::parse_query`, `smi::classify_failure`, `smi::rejected_field`.
#![no_main]

use gpufleet::model::parse::smi;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(gpus) = smi::parse_query(&text) {
        // One row per CSV record after the header (records end at \n, \r or \r\n).
        assert!(gpus.len() < text.split(['\r', '\n']).count());
    }
    let _ = smi::classify_failure(&text);
    if let Some(field) = smi::rejected_field(&text) {
        assert!(!field.contains('"'));
        assert!(text.contains(&format!("Field \"{field}\"")));
    }
    let _ = smi::parse_pci_device_id(&text);
});
