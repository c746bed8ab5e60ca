//! Pure code, no I/O, in three layers and the report (docs/architecture.md, "The model"):
//! `parse/` turns probe output into sections and each source's text into values; `facts/`
//! builds the facts of one node from them, one file per subject; `rules/` assesses the facts
//! (one ordered rule table, the reason codes, the status); `report.rs` is the per-node report
//! and the snapshot document (the JSON contract of docs/domain.md; schema3.rs its schema-3
//! objects, report_evidence.rs its `evidence` map, report_schema.rs the test that generates
//! docs/report.schema.json from these types). `text.rs` escapes and
//! clips node text for people (a leaf everyone uses). Everything is unit-tested on verbatim
//! samples.

pub mod facts;
pub mod parse;
pub mod report;
mod report_evidence;
#[cfg(test)]
mod report_schema;
pub mod rules;
pub mod schema3;
pub mod text;

pub use facts::{Evidence, Facts, collect};
pub use parse::boot::version_cmp;
pub use parse::driver::Flavor;
pub use parse::sections::ProbeOutput;
pub use report::{NodeReport, Snapshot};
pub use rules::{Assessment, Code, MajorMinor, NodeStatus, Reason, Severity, Thresholds, assess};
