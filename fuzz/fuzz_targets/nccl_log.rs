//! NCCL logs (`gpufleet nccl`): `nccl::parse::line` on each line, and `nccl::Logs::read` on the
//! whole input, checking that every string read is a piece of its line, and that the verdicts
//! and exit code are consistent whatever the bytes.
#![no_main]

use gpufleet::nccl::{self, Mechanism, Peermem, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for l in text.lines() {
        let Some(p) = parse::line(l) else { continue };
        if let Some(h) = p.host {
            assert!(!h.is_empty() && l.contains(h), "{l:?}");
            assert!(!h.contains(char::is_whitespace), "{h:?}");
        }
        match p.event {
            parse::Event::Version(v) => {
                assert!(l.contains(v) && v.starts_with(|c: char| c.is_ascii_digit()))
            }
            parse::Event::Using { net, devs } => {
                assert!(l.contains(net));
                for (_, n) in devs {
                    assert!(!n.is_empty() && l.contains(n));
                }
            }
            parse::Event::Gdr { name: Some(n), .. } => assert!(!n.is_empty() && l.contains(n)),
            parse::Event::Channel { net, .. } => assert!(!net.is_empty() && l.contains(net)),
            parse::Event::Env { name, value } => {
                assert!(name.starts_with("NCCL_") && l.contains(name) && l.contains(value));
            }
            _ => {}
        }
    }

    let mut logs = nccl::Logs::default();
    if logs.read("fuzz.log", data).is_err() {
        return;
    }
    for pm in [
        Peermem::NoSnapshot,
        Peermem::Report {
            loaded: Some(false),
            source: "s".into(),
        },
    ] {
        let r = logs.report(&|_| pm.clone());
        let s = &r.summary;
        assert_eq!(
            s.dma_buf + s.nvidia_peermem + s.no_gdr + s.unknown,
            r.hosts.len()
        );
        let code = r.exit_code();
        assert!(matches!(code, 0 | 1 | 3));
        assert_eq!(
            code == 0,
            !r.hosts.is_empty() && r.hosts.iter().all(|h| h.gdr == Mechanism::DmaBuf)
        );
        for h in &r.hosts {
            // A host is the worst of its HCAs that carried channels.
            let used = h
                .hcas
                .iter()
                .filter(|c| c.gdrdma_channels + c.other_channels > 0);
            if let Some(w) = used.map(|c| c.gdr).max() {
                assert_eq!(h.gdr, w, "{h:?}");
            }
            assert!(h.evidence.len() <= 8 && h.hcas.len() <= nccl::verdict::MAX_HCAS);
        }
    }
});
