//! Kernel build configuration lines (`/boot/config-<release>`, or `/proc/config.gz` decompressed):
//! `CONFIG_X=y|m|"..."` and `# CONFIG_X is not set`. The probe sends only the lines it needs.

use std::collections::BTreeMap;
use std::io::Read;

/// Options found, with their raw lines. An option that is `is not set` maps to `n`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelConfig {
    pub options: BTreeMap<String, (String, String)>,
}

impl KernelConfig {
    /// The value of `name` (`y`, `m`, `n`), or `None` when the config does not mention it.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.options.get(name).map(|(v, _)| v.as_str())
    }

    /// The raw line for `name`.
    pub fn line(&self, name: &str) -> Option<&str> {
        self.options.get(name).map(|(_, l)| l.as_str())
    }
}

/// Parses config lines; other lines are ignored.
pub fn parse(text: &str) -> KernelConfig {
    let mut c = KernelConfig::default();
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t
            .strip_prefix("# ")
            .and_then(|r| r.strip_suffix(" is not set"))
            .filter(|n| n.starts_with("CONFIG_"))
        {
            c.options
                .insert(name.to_string(), ("n".to_string(), line.to_string()));
        } else if let Some((name, value)) =
            t.split_once('=').filter(|(n, _)| n.starts_with("CONFIG_"))
        {
            c.options
                .insert(name.to_string(), (value.to_string(), line.to_string()));
        }
    }
    c
}

/// Decodes `od -An -v -tx1` output (hex bytes separated by whitespace) back into bytes.
pub fn decode_od_hex(text: &str) -> Result<Vec<u8>, String> {
    text.split_ascii_whitespace()
        .map(|w| u8::from_str_radix(w, 16).map_err(|_| format!("not a hex byte: {w:?}")))
        .collect()
}

/// Longest config line kept while streaming (a kernel's are under 200 bytes; longer ones, such
/// as a huge `CONFIG_…="…"` string, are dropped: no option gpufleet reads is one).
const MAX_LINE: usize = 4096;

/// Gunzips `/proc/config.gz` bytes and parses them as they come out ([`parse`], line by line):
/// the decompressed text is never held whole (64 KiB and one line at a time, not `limit`
/// bytes), and at most `limit` bytes of it are read.
///
/// Errors: not gzip, or more than `limit` bytes decompressed (then nothing is trusted).
pub fn gunzip_parse(bytes: &[u8], limit: u64) -> Result<KernelConfig, String> {
    let mut z = flate2::read::GzDecoder::new(bytes).take(limit.saturating_add(1));
    let mut c = KernelConfig::default();
    let mut chunk = vec![0u8; 64 << 10];
    let mut line: Vec<u8> = Vec::new();
    let mut long = false;
    let mut total = 0u64;
    let keep = |line: &[u8], c: &mut KernelConfig| {
        let text = String::from_utf8_lossy(line);
        for (k, v) in parse(&text).options {
            c.options.insert(k, v);
        }
    };
    loop {
        let n = z
            .read(&mut chunk)
            .map_err(|e| format!("/proc/config.gz: {e}"))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        for part in chunk[..n].split_inclusive(|&b| b == b'\n') {
            if !long {
                line.extend_from_slice(part);
                if line.len() > MAX_LINE {
                    long = true;
                    line.clear();
                }
            }
            if part.ends_with(b"\n") {
                if !long {
                    keep(&line, &mut c);
                }
                line.clear();
                long = false;
            }
        }
    }
    if total > limit {
        return Err(format!(
            "/proc/config.gz decompresses to more than {limit} bytes (cut at the cap: not trusted)"
        ));
    }
    if !long {
        keep(&line, &mut c);
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_module_and_unset() {
        let c = parse(
            "CONFIG_DMA_SHARED_BUFFER=y\nCONFIG_INFINIBAND=m\n# CONFIG_INFINIBAND_USER_MEM is not set\nnoise\n",
        );
        assert_eq!(c.value("CONFIG_DMA_SHARED_BUFFER"), Some("y"));
        assert_eq!(c.value("CONFIG_INFINIBAND"), Some("m"));
        assert_eq!(c.value("CONFIG_INFINIBAND_USER_MEM"), Some("n"));
        assert_eq!(c.value("CONFIG_PCI_P2PDMA"), None);
    }

    #[test]
    fn od_hex_round_trip_through_gzip() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"CONFIG_DMA_SHARED_BUFFER=y\n").unwrap();
        let gz = enc.finish().unwrap();
        let od: String = gz.iter().map(|b| format!(" {b:02x}")).collect();
        let bytes = decode_od_hex(&od).unwrap();
        let c = gunzip_parse(&bytes, 1 << 20).unwrap();
        assert_eq!(c.value("CONFIG_DMA_SHARED_BUFFER"), Some("y"));
        assert_eq!(c.options.len(), 1);
        assert!(decode_od_hex(" zz").is_err());
    }

    #[test]
    fn streamed_gunzip_parses_as_the_whole_text_does() {
        use std::io::Write;
        let mut text = String::new();
        for i in 0..50_000 {
            text.push_str(&format!("CONFIG_OPT_{i}=y\n# CONFIG_OFF_{i} is not set\n"));
        }
        text.push_str(&format!("CONFIG_HUGE=\"{}\"\n", "x".repeat(10_000)));
        text.push_str("CONFIG_DMA_SHARED_BUFFER=y");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(text.as_bytes()).unwrap();
        let gz = enc.finish().unwrap();
        let got = gunzip_parse(&gz, 16 << 20).unwrap();
        let mut want = parse(&text);
        want.options.remove("CONFIG_HUGE");
        assert_eq!(got, want);
        assert_eq!(got.value("CONFIG_DMA_SHARED_BUFFER"), Some("y"));
        assert_eq!(got.value("CONFIG_OFF_49999"), Some("n"));
        let e = gunzip_parse(&gz, 1000).unwrap_err();
        assert!(e.contains("more than 1000 bytes"), "{e}");
        assert!(gunzip_parse(b"not gzip", 10).is_err());
    }
}
