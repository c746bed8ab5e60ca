//! A probe's raw output kept per node for the detail pane, packed.

use crate::probe::RawRun;

/// A probe's raw output as the detail pane shows it, kept per node for as long as the TUI runs:
/// deflate-compressed (fast level; the H200's 9.5 KB pack to 3.6 KB) and split into its
/// sections only when shown. Kept parsed, it took ≈ 35 KB of heap a node (335 MiB at 10,000;
/// bench/README.md). Made by the scan's task ([`RawOutput::of`]), not the TUI's loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawOutput {
    pub(super) packed: Vec<u8>,
    boundary: String,
    /// The output's size in bytes, uncompressed.
    pub bytes: usize,
}

impl RawOutput {
    /// Packs `run`'s output with its boundary.
    pub fn of(run: &RawRun) -> RawOutput {
        use std::io::Write;
        let mut z = flate2::write::DeflateEncoder::new(
            Vec::with_capacity(run.output.len() / 4),
            flate2::Compression::fast(),
        );
        // Writing to a Vec cannot fail; should it, the packed form is empty and the pane says
        // the output is unreadable (below), which never claims the output was empty.
        let packed = match z.write_all(&run.output).and_then(|()| z.finish()) {
            Ok(mut v) => {
                v.shrink_to_fit();
                v
            }
            Err(_) => Vec::new(),
        };
        RawOutput {
            packed,
            boundary: run.boundary.clone(),
            bytes: run.output.len(),
        }
    }

    /// The output split at its boundary, unpacked now (for the one node the pane shows).
    ///
    /// Errors: the packed bytes do not inflate to the output's size (never for bytes packed by
    /// [`RawOutput::of`]; said as such rather than shown as an empty output).
    pub fn sections(&self) -> Result<crate::model::parse::sections::ProbeOutput, String> {
        use std::io::Read;
        let mut out = Vec::with_capacity(self.bytes);
        flate2::read::DeflateDecoder::new(&self.packed[..])
            .take(self.bytes as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| e.to_string())?;
        if out.len() != self.bytes {
            return Err(format!(
                "{} bytes unpacked, {} expected",
                out.len(),
                self.bytes
            ));
        }
        Ok(crate::model::parse::sections::parse(&out, &self.boundary))
    }
}
