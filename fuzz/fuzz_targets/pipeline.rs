//! The whole pure pipeline: raw probe output (boundary `gpufleet-RAW`, as in
//! docs/examples/h200-probe-raw.txt) → sections → facts → assessment → NodeReport → JSON.
#![no_main]

use gpufleet::model::report::NodeReport;
use gpufleet::model::parse::sections;
use gpufleet::model::{Thresholds, assess, collect, text};
use libfuzzer_sys::fuzz_target;

const BOUNDARY: &str = "gpufleet-RAW";

fuzz_target!(|data: &[u8]| {
    let out = sections::parse(data, BOUNDARY);
    let facts = collect(&out);
    let a = assess(&facts, &Thresholds::default());
    assert_eq!(a.open_capable.len(), facts.gpus.len());
    let report = NodeReport::from_facts(
        "fuzz".to_string(),
        &facts,
        &a,
        "2026-01-01T00:00:00Z".to_string(),
        0,
    );
    let _ = report.gpu_summary();
    let _ = report.min_compute_capability();
    let json = serde_json::to_string(&report).expect("a NodeReport always serializes");
    let safe = text::json_string(&report, false).expect("a NodeReport always serializes");
    let back: serde_json::Value = serde_json::from_str(&safe).expect("json_string writes JSON");
    // The escaped document means the same as serde_json's own.
    let plain: serde_json::Value = serde_json::from_str(&json).expect("serde_json writes JSON");
    assert_eq!(back, plain);
    assert_eq!(back["status"], a.status.as_str());
});
