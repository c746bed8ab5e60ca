//! `nvidia-smi --query-gpu=... --format=csv,nounits` output and nvidia-smi failures.
//!
//! The CSV has a header of the requested field names joined by `, ` and one row per GPU
//! (NVIDIA's nvidia-smi documentation). Failure strings are classified as in docs/domain.md's Rules.

/// One GPU row, by field name; values `[N/A]` or `[Not Supported]` become `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmiGpu {
    pub index: Option<u32>,
    pub name: Option<String>,
    pub uuid: Option<String>,
    /// As nvidia-smi prints it (`00000000:18:00.0`); see [`crate::model::parse::sysfs::normalize_bus_id`].
    pub bus_id: Option<String>,
    /// `pci.device_id` (`0x20B210DE`: device id in the high 16 bits, vendor in the low 16).
    pub pci_device_id: Option<u16>,
    pub driver_version: Option<String>,
    /// `compute_cap`, "major.minor".
    pub compute_cap: Option<String>,
    /// The raw CSV line.
    pub line: String,
}

/// Why nvidia-smi did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmiFailure {
    /// `Failed to initialize NVML: Driver/library version mismatch`, with the NVML version line
    /// (`NVML library version: 550.127`) when printed.
    Mismatch { nvml_version: Option<String> },
    /// `No devices were found`.
    NoDevices,
    /// `NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver...`.
    CannotCommunicate,
    /// Any other failure, with its first non-empty line.
    Other(String),
}

/// Classifies nvidia-smi's combined output after a non-zero exit.
pub fn classify_failure(text: &str) -> SmiFailure {
    if text.contains("Driver/library version mismatch") {
        let nvml_version = text.lines().find_map(|l| {
            l.trim()
                .strip_prefix("NVML library version:")
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        });
        SmiFailure::Mismatch { nvml_version }
    } else if text.contains("No devices were found") {
        SmiFailure::NoDevices
    } else if text.contains("couldn't communicate with the NVIDIA driver") {
        SmiFailure::CannotCommunicate
    } else {
        let first = text.lines().map(str::trim).find(|l| !l.is_empty());
        SmiFailure::Other(first.unwrap_or("no output").to_string())
    }
}

fn value(v: &str) -> Option<String> {
    let v = v.trim();
    (!v.is_empty() && !v.starts_with('[')).then(|| v.to_string())
}

/// Parses `pci.device_id` (`0x233510DE`) into the 16-bit PCI device id (`0x2335`).
pub fn parse_pci_device_id(v: &str) -> Option<u16> {
    let hex = v
        .trim()
        .strip_prefix("0x")
        .or(v.trim().strip_prefix("0X"))?;
    let n = u32::from_str_radix(hex, 16).ok()?;
    (n & 0xffff == 0x10de).then_some((n >> 16) as u16)
}

/// Parses the CSV (header first). Errors name the first problem found.
pub fn parse_query(text: &str) -> Result<Vec<SmiGpu>, String> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .flexible(false)
        .from_reader(text.as_bytes());
    let header: Vec<String> = rdr
        .headers()
        .map_err(|e| format!("nvidia-smi CSV header: {e}"))?
        .iter()
        .map(str::to_string)
        .collect();
    if !header.iter().any(|h| h == "name" || h == "index") {
        return Err(format!(
            "nvidia-smi CSV header has neither index nor name: {:?}",
            header.join(", ")
        ));
    }
    let mut gpus = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| format!("nvidia-smi CSV row: {e}"))?;
        let mut g = SmiGpu {
            line: rec.iter().collect::<Vec<_>>().join(", "),
            ..SmiGpu::default()
        };
        for (h, v) in header.iter().zip(rec.iter()) {
            match h.as_str() {
                "index" => g.index = value(v).and_then(|v| v.parse().ok()),
                "name" => g.name = value(v),
                "uuid" => g.uuid = value(v),
                "pci.bus_id" => g.bus_id = value(v),
                "pci.device_id" => g.pci_device_id = value(v).and_then(|v| parse_pci_device_id(&v)),
                "driver_version" => g.driver_version = value(v),
                "compute_cap" => g.compute_cap = value(v),
                _ => {}
            }
        }
        gpus.push(g);
    }
    Ok(gpus)
}

/// The field nvidia-smi rejected (`Field "compute_cap" is not a valid field to query.`).
pub fn rejected_field(text: &str) -> Option<&str> {
    let i = text.find("Field \"")?;
    let rest = &text[i + 7..];
    let end = rest.find('"')?;
    rest[end..]
        .contains("is not a valid field")
        .then(|| &rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_h200_query() {
        let text = "index, name, uuid, pci.bus_id, pci.device_id, driver_version, compute_cap\n0, NVIDIA H200, GPU-5f0c2a1e-7d3b-4c8e-9a61-2b4d6e8f0a13, 00000000:00:06.0, 0x233510DE, 580.159.04, 9.0\n";
        let g = parse_query(text).unwrap();
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].index, Some(0));
        assert_eq!(g[0].name.as_deref(), Some("NVIDIA H200"));
        assert_eq!(g[0].pci_device_id, Some(0x2335));
        assert_eq!(g[0].compute_cap.as_deref(), Some("9.0"));
        assert_eq!(g[0].bus_id.as_deref(), Some("00000000:00:06.0"));
    }

    #[test]
    fn triton_sample_without_some_fields_and_na_values() {
        let text = "compute_cap, compute_mode, driver_version, name, index\n7.0, Default, 570.86.15, NVIDIA TITAN V, 0\n8.9, Default, [N/A], NVIDIA RTX 5880 Ada Generation, 1\n";
        let g = parse_query(text).unwrap();
        assert_eq!(g[1].compute_cap.as_deref(), Some("8.9"));
        assert_eq!(g[1].driver_version, None);
        assert_eq!(g[1].uuid, None);
    }

    #[test]
    fn failures_are_classified() {
        assert_eq!(
            classify_failure(
                "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.127\n"
            ),
            SmiFailure::Mismatch {
                nvml_version: Some("550.127".into())
            }
        );
        assert_eq!(
            classify_failure("No devices were found\n"),
            SmiFailure::NoDevices
        );
        assert_eq!(
            classify_failure(
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"
            ),
            SmiFailure::CannotCommunicate
        );
        assert_eq!(
            classify_failure("\n boom \n"),
            SmiFailure::Other("boom".into())
        );
    }

    #[test]
    fn rejected_field_name() {
        assert_eq!(
            rejected_field("Field \"compute_cap\" is not a valid field to query.\n\n"),
            Some("compute_cap")
        );
        assert_eq!(rejected_field("Field \"x"), None);
        assert_eq!(rejected_field("nothing"), None);
    }

    #[test]
    fn device_id_requires_nvidia_vendor() {
        assert_eq!(parse_pci_device_id("0x20B210DE"), Some(0x20b2));
        assert_eq!(parse_pci_device_id("0x12341002"), None);
        assert_eq!(parse_pci_device_id("zz"), None);
        assert!(parse_query("").is_err());
        assert!(parse_query("a, b\n1\n").is_err());
    }
}
