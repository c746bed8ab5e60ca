//! NVIDIA module parameters: `params::parse_in_effect` (/proc/driver/nvidia/params),
//! `params::parse_options` (modprobe.d `options nvidia NVreg_K=V`), `params::same_value`.
#![no_main]

use gpufleet::model::parse::params;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);

    // In effect: keys are words, values trimmed, both from one input line; printed back as
    // `Key: value` lines the map parses to itself.
    let p = params::parse_in_effect(&text);
    for (k, v) in &p {
        assert!(!k.is_empty());
        assert!(
            k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "key {k:?}"
        );
        assert_eq!(v.trim(), v);
        assert!(
            text.lines()
                .any(|l| l.contains(k.as_str()) && l.contains(v.as_str()))
        );
    }
    let printed: String = p.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
    assert_eq!(params::parse_in_effect(&printed), p);

    // Configured: each setting names its (trimmed, uncommented) input line, which holds the word
    // `NVreg_<key>=`; printed back on one `options nvidia` line they parse to the same settings.
    let o = params::parse_options(&text);
    for c in &o {
        assert!(!c.key.is_empty());
        assert!(c.line.starts_with("options") && !c.line.starts_with('#'));
        assert!(
            text.lines().any(|l| l.trim() == c.line),
            "line {:?}",
            c.line
        );
        let word = format!("NVreg_{}=", c.key);
        assert!(c.line.split_whitespace().any(|w| w.starts_with(&word)));
        assert!(params::same_value(&c.value, &c.value));
    }
    if !o.is_empty() {
        let line: String = std::iter::once("options nvidia".to_string())
            .chain(o.iter().map(|c| format!("NVreg_{}={}", c.key, c.value)))
            .collect::<Vec<_>>()
            .join(" ");
        let back = params::parse_options(&line);
        let kv = |v: &[params::Configured]| -> Vec<(String, String)> {
            v.iter().map(|c| (c.key.clone(), c.value.clone())).collect()
        };
        assert_eq!(kv(&back), kv(&o));
    }

    // same_value: reflexive and symmetric on two halves of the input; a number equals its hex.
    let (a, b) = text.split_once('\n').unwrap_or((&text, ""));
    assert!(params::same_value(a, a));
    assert_eq!(params::same_value(a, b), params::same_value(b, a));
    if data.len() >= 8 {
        let n = u64::from_le_bytes(data[..8].try_into().unwrap());
        assert!(params::same_value(&n.to_string(), &format!("0x{n:x}")));
        assert!(params::same_value(&format!("\"{n}\""), &format!("0X{n:X}")));
        assert!(!params::same_value(
            &n.to_string(),
            &n.wrapping_add(1).to_string()
        ));
    }
});
