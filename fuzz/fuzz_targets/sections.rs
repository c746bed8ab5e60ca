//! `sections::parse` on arbitrary bytes with a fixed boundary: never panics, and the sections
//! it returns are consistent with the input.
#![no_main]

use gpufleet::model::parse::sections::{self, Kind, Status};
use libfuzzer_sys::fuzz_target;

const BOUNDARY: &str = "gpufleet-fuzz";

fuzz_target!(|data: &[u8]| {
    let out = sections::parse(data, BOUNDARY);

    // Bodies, headers and stray lines are disjoint parts of the input.
    let body_total: usize = out.sections.iter().map(|s| s.body.len()).sum();
    assert!(body_total + out.stray_bytes <= data.len());

    // Every body is a sub-slice of the input, and they appear in output order.
    let mut cursor = 0;
    for s in &out.sections {
        assert!(s.body.len() <= data.len());
        assert!(!s.name.contains('\n'), "name spans lines: {:?}", s.name);
        let at = memchr::memmem::find(&data[cursor..], &s.body)
            .unwrap_or_else(|| panic!("body of {:?} is not in the input after {cursor}", s.name));
        cursor += at + s.body.len();
        let _ = s.text();
    }

    // `complete` means exactly: a `meta done` section that ended ok.
    let done = out
        .sections
        .iter()
        .any(|s| s.kind == Kind::Meta && s.name == "done" && s.status == Status::Ok);
    assert_eq!(out.complete, done);

    // The accessors never panic either.
    let _ = out.meta("protocol");
    let _ = out.has_tool("gzip");
    let _ = out.with_prefix(Kind::File, "/etc").count();

    // An empty boundary frames nothing.
    let none = sections::parse(data, "");
    assert!(none.sections.is_empty());
    assert_eq!(none.stray_bytes, data.len());
});
