//! Kernel log: `klog::messages` (kept dmesg lines → messages), `klog::xid`, `klog::xid_counts`,
//! `klog::find`, `klog::fallen_bus`.
#![no_main]

use gpufleet::model::parse::klog::{self, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let log = String::from_utf8_lossy(data);
    let msgs = klog::messages(&log);

    // Every message's lines come from the input: together, in order, they are exactly its
    // non-blank lines; only the first message may open with a whitespace (continuation) line.
    let kept: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let got: Vec<&str> = msgs
        .iter()
        .flat_map(|m| m.lines.iter().map(String::as_str))
        .collect();
    assert_eq!(got, kept);
    for (i, m) in msgs.iter().enumerate() {
        assert!(!m.lines.is_empty());
        assert!(i == 0 || !m.lines[0].starts_with(char::is_whitespace));
        assert!(
            m.lines[1..]
                .iter()
                .all(|l| l.starts_with(char::is_whitespace))
        );
        // User space's words are cut off the text rules match.
        assert!(!m.text.contains("pid="), "{:?}", m.text);
        assert!(!m.text.contains("(pid "), "{:?}", m.text);
        if m.lines.len() == 1 {
            assert!(m.lines[0].contains(m.text.as_str()));
        }
    }

    // Xids: anchored at the message start, a lower-case bus id, and the code parses back.
    let mut with_xid = 0u32;
    for m in &msgs {
        if let Some(x) = klog::xid(m) {
            with_xid += 1;
            assert!(m.text.starts_with("NVRM: Xid (PCI:"));
            assert!(!x.bus.is_empty() && x.bus.len() <= 16);
            assert_eq!(x.bus, x.bus.to_ascii_lowercase());
            let after = &m.text["NVRM: Xid (PCI:".len()..];
            let (bus, rest) = after.split_once("): ").unwrap();
            // A MIG-attributed line names the GPU instance after the bus (`0000:01:00 GPU-I:05`).
            let bus = match bus.split_once(' ') {
                Some((b, inst)) if inst.starts_with("GPU-I:") => b,
                _ => bus,
            };
            assert_eq!(bus.to_ascii_lowercase(), x.bus);
            let code: u32 = rest.split_once(',').unwrap().0.trim().parse().unwrap();
            assert_eq!(code, x.code);
            let line = format!(
                "[ 1.0] NVRM: Xid (PCI:{}): {}, pid=1, name=x\n",
                x.bus, x.code
            );
            assert_eq!(klog::xid(&klog::messages(&line)[0]).as_ref(), Some(&x));
            assert_eq!(klog::fallen_bus(m), Some(x.bus.clone()));
        }
    }
    let counts = klog::xid_counts(&msgs);
    assert_eq!(counts.values().sum::<u32>(), with_xid);
    for (code, n) in &counts {
        let k = msgs
            .iter()
            .filter(|m| klog::xid(m).is_some_and(|x| x.code == *code))
            .count();
        assert_eq!(k as u32, *n);
    }
    if data.len() >= 4 {
        let code = u32::from_le_bytes(data[..4].try_into().unwrap());
        let line = format!("[1.0] NVRM: Xid (PCI:0000:9B:00): {code}, GPU has fallen off the bus.");
        let m = klog::messages(&line);
        let x = klog::xid(&m[0]).expect("a well-formed Xid line");
        assert_eq!((x.bus.as_str(), x.code), ("0000:9b:00", code));
    }

    // find: the messages whose text holds the needle (the input's first line), in order.
    let needle = log.lines().next().unwrap_or("");
    let found = klog::find(&msgs, needle);
    assert_eq!(
        found.len(),
        msgs.iter().filter(|m| m.text.contains(needle)).count()
    );
    assert!(found.iter().all(|m| m.text.contains(needle)));
    assert_eq!(klog::find(&msgs, "").len(), msgs.len());

    // fallen_bus: a short, lower-case word of the message's text.
    for m in msgs.iter().chain(std::iter::once(&Message {
        lines: Vec::new(),
        text: log.to_string(),
    })) {
        if let Some(b) = klog::fallen_bus(m) {
            assert!(!b.is_empty() && b.len() <= 16, "{b:?}");
            assert!(!b.contains(char::is_whitespace));
            assert_eq!(b, b.to_ascii_lowercase());
            assert!(
                m.text.to_ascii_lowercase().contains(&b),
                "{b:?} not in {:?}",
                m.text
            );
        }
    }
});
