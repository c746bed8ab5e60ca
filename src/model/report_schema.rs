//! The JSON Schema of the snapshot document (docs/report.schema.json, draft 2020-12), generated
//! from the report's types (report.rs, schema3.rs and the enums they use) by schemars, with their
//! doc comments as descriptions. Test-only: the types derive `JsonSchema` under `cfg(test)`, so
//! the product does not link schemars.
//!
//! `report_schema_is_committed` fails when the committed file differs from the generated one;
//! regenerate it with `GPUFLEET_BLESS=1 cargo test --lib report_schema` and read the diff.
//! tests/fixture_nodes.rs validates every golden output against the committed file.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::report::Snapshot;
use super::rules::{Code, NodeStatus};

/// A reason code is its kebab-case name (`Code::as_str`), one of [`Code::ALL`].
impl JsonSchema for Code {
    fn schema_name() -> Cow<'static, str> {
        "Code".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let codes: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        json_schema!({
            "description": "A reason code (docs/domain.md \"Reason codes\", docs/reasons.md).",
            "type": "string",
            "enum": codes,
        })
    }
}

/// `summary`: a count for every status ([`NodeStatus::ALL`]), each present.
pub(crate) fn summary(_: &mut SchemaGenerator) -> Schema {
    let statuses: Vec<&str> = NodeStatus::ALL.iter().map(|s| s.as_str()).collect();
    let props: serde_json::Map<String, serde_json::Value> = statuses
        .iter()
        .map(|s| {
            (
                s.to_string(),
                serde_json::json!({"type": "integer", "minimum": 0}),
            )
        })
        .collect();
    json_schema!({
        "type": "object",
        "properties": props,
        "required": statuses,
        "additionalProperties": false,
    })
}

/// The schema as committed: pretty JSON with a final line end.
pub(crate) fn generated() -> String {
    let mut schema = schemars::schema_for!(Snapshot);
    schema.insert(
        "title".into(),
        format!(
            "gpufleet snapshot, schema_version {}",
            super::report::SCHEMA_VERSION
        )
        .into(),
    );
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const COMMITTED: &str = "docs/report.schema.json";

    #[test]
    fn report_schema_is_committed() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(COMMITTED);
        let text = generated();
        if std::env::var_os("GPUFLEET_BLESS").is_some() {
            std::fs::write(&path, &text).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{COMMITTED} differs from the schema generated from the report's types: \
             regenerate it with `GPUFLEET_BLESS=1 cargo test --lib report_schema` and read the diff"
        );
    }

    #[test]
    fn report_schema_names_every_code_and_the_schema_3_fields() {
        let v: serde_json::Value = serde_json::from_str(&generated()).unwrap();
        let version = &v["properties"]["schema_version"];
        assert_eq!(version["maximum"], super::super::report::SCHEMA_VERSION);
        assert_eq!(
            version["minimum"].as_u64(),
            Some(*super::super::report::READABLE_SCHEMA_VERSIONS.start())
        );
        let defs = &v["$defs"];
        let codes = defs["Code"]["enum"].as_array().unwrap();
        assert_eq!(codes.len(), Code::ALL.len());
        assert!(codes.iter().any(|c| c == "xid-action-required"));
        let node = &defs["NodeReport"]["properties"];
        for key in ["pci_devices", "blacklists", "fabric", "evidence"] {
            assert!(node.get(key).is_some(), "NodeReport.{key}");
        }
        assert!(defs["DriverJson"]["properties"].get("branch").is_some());
        assert!(defs["FirmwareJson"]["properties"].get("gsp_dirs").is_some());
        let sb = &defs["SecureBootJson"]["properties"];
        assert!(sb.get("machine_keyring").is_some() && sb.get("nvidia_ko_signer").is_some());
        // Fields an older document lacks (`#[serde(default)]`) are not required.
        let req = defs["NodeReport"]["required"].as_array().unwrap();
        assert!(req.iter().any(|r| r == "reasons"));
        assert!(!req.iter().any(|r| r == "pci_devices"));
    }
}
