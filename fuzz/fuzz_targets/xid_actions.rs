//! Xid recovery actions: `xidcat::assess` on kept dmesg lines (per GPU and code, the action of the
//! Xid catalog table, Xid 154 by name, Xid 94/95's RST:/D-RST:), `klog::xid_hints`,
//! `klog::recovery_action`, `xidcat::action_of_name` (docs/domain.md "Xid recovery actions").
#![no_main]

use gpufleet::model::parse::klog;
use gpufleet::model::parse::xidcat::{self, Action};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let log = String::from_utf8_lossy(data);
    let msgs = klog::messages(&log);
    let entries = xidcat::assess(&msgs);
    assert!(entries.len() <= 256);
    let total: u32 = entries.iter().map(|e| e.count).sum();
    let xids = msgs
        .iter()
        .filter(|m| klog::xid(m).is_some_and(|x| x.code != 79))
        .count();
    assert!(total as usize <= xids);
    for e in &entries {
        // Xid 79 is gpu-fallen-off-bus's; every entry names a GPU and a code seen in the log.
        assert_ne!(e.code, 79);
        assert!(e.count >= 1);
        assert!(
            msgs.iter()
                .any(|m| klog::xid(m).is_some_and(|x| x.bus == e.bus && x.code == e.code))
        );
        assert!(!e.first_lines.is_empty());
        if let Some(a) = &e.action {
            assert_ne!(*a, Action::None);
            assert!(!e.why.is_empty());
        }
        // Codes the table leaves to xid-events never get an action.
        if xidcat::row(e.code).is_none() {
            assert!(e.action.is_none(), "{e:?}");
        }
    }
    for m in &msgs {
        let h = klog::xid_hints(m);
        if h.rst.is_some() {
            assert!(m.lines.join(" ").contains("RST: "));
        }
        if let Some(name) = klog::recovery_action(m) {
            assert_eq!(klog::xid(m).map(|x| x.code), Some(154));
            assert!(m.text.contains(name.as_str()));
            let a = xidcat::action_of_name(&name);
            assert!(a.rank() <= 5);
        }
    }
    // Names: matched by words, case-insensitively; the strongest word wins.
    let name = log.lines().next().unwrap_or("");
    let a = xidcat::action_of_name(name);
    let lower = name.to_ascii_lowercase();
    if lower.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == "reboot") {
        assert_eq!(a, Action::NodeReboot);
    }
});
