//! Module signature enforcement: `secureboot::efivar_bool` (raw efivarfs bytes),
//! `secureboot::lockdown_mode`, `secureboot::cmdline_sig_enforce`, `secureboot::signed`.
#![no_main]

use gpufleet::model::parse::secureboot::{self, SIGNATURE_TRAILER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A boolean EFI variable is exactly 4 attribute bytes and one data byte, 0 or 1.
    let e = secureboot::efivar_bool(data);
    assert_eq!(
        e.is_some(),
        data.len() == 5 && data[4] <= 1,
        "{data:?} → {e:?}"
    );
    if let Some(b) = e {
        assert_eq!(b, data[4] == 1);
    }

    let text = String::from_utf8_lossy(data);

    // The lockdown mode is a lower-case word that stands in brackets in the input.
    if let Some(m) = secureboot::lockdown_mode(&text) {
        assert!(
            !m.is_empty() && m.bytes().all(|c| c.is_ascii_lowercase()),
            "{m:?}"
        );
        assert!(text.contains(&format!("[{m}]")));
    }

    // sig_enforce is enable-only: a later `=0` never turns it off, a `=1` always turns it on.
    let enforce = secureboot::cmdline_sig_enforce(&text);
    if enforce {
        assert!(text.contains("module.sig_enforce="));
    }
    assert_eq!(
        secureboot::cmdline_sig_enforce(&format!("{text} module.sig_enforce=0")),
        enforce
    );
    assert!(secureboot::cmdline_sig_enforce(&format!(
        "{text}\tmodule.sig_enforce=1"
    )));

    // Signed means: the bytes end with the trailer; the probe's 28-byte tail says the same.
    let s = secureboot::signed(data);
    assert_eq!(s, data.ends_with(SIGNATURE_TRAILER));
    let tail = &data[data.len().saturating_sub(SIGNATURE_TRAILER.len())..];
    assert_eq!(secureboot::signed(tail), s);
    assert!(secureboot::signed(&[data, SIGNATURE_TRAILER].concat()));
});
