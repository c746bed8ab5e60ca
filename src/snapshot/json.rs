//! The JSON document sink: each report is written out as it arrives (its final text, laid out
//! for its place in the document) to a spool, and the document is copied from the spool in
//! inventory order at the end, so a scan holds the reports in flight, not every report: a
//! 10,000-node snapshot keeps ≈ 16 bytes a node in memory instead of ≈ 14 KB (bench/README.md).
//!
//! The output is byte for byte what `write_json(&Snapshot, pretty)` writes for the same
//! document (a unit test holds them equal), in the layout of docs/domain.md "Snapshot JSON".

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};

use super::{End, Sink};
use crate::model::report::{NodeReport, SCHEMA_VERSION};
use crate::model::text::{json_string, write_json};

/// Where the spooled reports are: an unlinked temporary file (in `$TMPDIR`), or memory when no
/// temporary file can be made (a read-only or full `$TMPDIR`).
enum Spool {
    File(io::BufWriter<File>),
    Memory(Vec<u8>),
}

impl Spool {
    fn append(&mut self, text: &[u8]) -> io::Result<()> {
        match self {
            Spool::File(f) => f.write_all(text),
            Spool::Memory(m) => {
                m.extend_from_slice(text);
                Ok(())
            }
        }
    }

    /// Ends the writing: the spool, readable.
    fn done(self) -> io::Result<Spooled> {
        Ok(match self {
            Spool::File(f) => {
                Spooled::File(f.into_inner().map_err(|e| e.into_error())?, Vec::new())
            }
            Spool::Memory(m) => Spooled::Memory(m),
        })
    }
}

/// A spool whose writing is done (the file with a read buffer).
enum Spooled {
    File(File, Vec<u8>),
    Memory(Vec<u8>),
}

impl Spooled {
    /// The `len` bytes at `at`.
    ///
    /// Errors: the file's read errors; a range past the end (`UnexpectedEof`).
    fn get(&mut self, at: u64, len: usize) -> io::Result<&[u8]> {
        match self {
            Spooled::File(f, buf) => {
                buf.resize(len, 0);
                f.seek(SeekFrom::Start(at))?;
                f.read_exact(buf)?;
                Ok(buf)
            }
            Spooled::Memory(m) => usize::try_from(at)
                .ok()
                .and_then(|at| m.get(at..at.checked_add(len)?))
                .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof)),
        }
    }
}

pub(super) struct JsonSink<'a> {
    out: Box<dyn Write + 'a>,
    spool: Spool,
    /// Bytes written to the spool so far.
    len: u64,
    /// Per place in the document: where its report's text is in the spool (offset, length).
    index: Vec<Option<(u64, usize)>>,
}

impl<'a> JsonSink<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        let spool = match tempfile::tempfile() {
            Ok(f) => Spool::File(io::BufWriter::with_capacity(1 << 16, f)),
            Err(_) => Spool::Memory(Vec::new()),
        };
        JsonSink {
            out,
            spool,
            len: 0,
            index: Vec::new(),
        }
    }
}

/// `value` as pretty JSON indented by `indent` spaces past its first line, as it appears
/// nested in the document (JSON strings hold no raw newline, so every newline is layout).
fn nested(value: &impl serde::Serialize, indent: usize) -> io::Result<Vec<u8>> {
    let mut flat = Vec::with_capacity(8 << 10);
    write_json(&mut flat, value, true)?;
    let lines = flat.iter().filter(|&&b| b == b'\n').count();
    let mut out = Vec::with_capacity(flat.len() + lines * indent);
    for &b in &flat {
        out.push(b);
        if b == b'\n' {
            out.extend(std::iter::repeat_n(b' ', indent));
        }
    }
    Ok(out)
}

impl Sink for JsonSink<'_> {
    fn node(&mut self, pos: usize, node: NodeReport) -> io::Result<()> {
        let text = nested(&node, 4)?;
        drop(node);
        self.spool.append(&text)?;
        if self.index.len() <= pos {
            self.index.resize(pos + 1, None);
        }
        self.index[pos] = Some((self.len, text.len()));
        self.len += text.len() as u64;
        Ok(())
    }

    fn finish(&mut self, end: &End) -> io::Result<()> {
        let mut out = io::BufWriter::with_capacity(1 << 16, &mut self.out);
        write!(
            out,
            "{{\n  \"schema_version\": {SCHEMA_VERSION},\n  \"generated_at\": {},\n  \"tool_version\": {},\n  \"nodes\": [",
            json_string(&end.generated_at, false)?,
            json_string(env!("CARGO_PKG_VERSION"), false)?,
        )?;
        let mut spooled = std::mem::replace(&mut self.spool, Spool::Memory(Vec::new())).done()?;
        let mut first = true;
        for &(at, len) in self.index.iter().flatten() {
            out.write_all(if first { b"\n    " } else { b",\n    " })?;
            first = false;
            out.write_all(spooled.get(at, len)?)?;
        }
        out.write_all(if first { b"]" } else { b"\n  ]" })?;
        out.write_all(b",\n  \"summary\": ")?;
        out.write_all(&nested(&end.summary, 2)?)?;
        if let Some(w) = &end.merge_warnings {
            out.write_all(b",\n  \"merge_warnings\": ")?;
            out.write_all(&nested(w, 2)?)?;
        }
        out.write_all(b"\n}\n")?;
        out.flush()?;
        drop(out);
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeStatus;
    use crate::model::report::Snapshot;

    /// The streamed document is exactly the whole document serialized at once, whatever order
    /// the reports arrive in, with hostile text escaped the same way.
    #[test]
    fn the_spooled_document_is_the_serialized_document() {
        let node = |name: &str, s: NodeStatus| {
            let mut n = NodeReport::unreachable(
                name.into(),
                crate::model::Code::SshTimeout,
                "m\u{85}\x1b[2J \"q\" \\ \u{202e}".into(),
                Vec::new(),
                "2026-12-02T00:00:00Z".into(),
                7,
            );
            n.status = s;
            n
        };
        for count in [0usize, 1, 3] {
            let nodes: Vec<NodeReport> = (0..count)
                .map(|i| node(&format!("gpu{i}\u{2028}"), NodeStatus::ALL[i]))
                .collect();
            let doc = Snapshot::new("2026-12-02T00:00:01Z".into(), nodes.clone());
            let mut want = Vec::new();
            write_json(&mut want, &doc, true).unwrap();
            want.push(b'\n');
            for memory in [false, true] {
                let mut got = Vec::new();
                {
                    let mut sink = JsonSink::new(Box::new(&mut got));
                    if memory {
                        sink.spool = Spool::Memory(Vec::new());
                    }
                    // Last first: places, not arrival, give the order.
                    for (pos, n) in nodes.iter().enumerate().rev() {
                        sink.node(pos, n.clone()).unwrap();
                    }
                    let statuses: Vec<NodeStatus> = nodes.iter().map(|n| n.status).collect();
                    sink.finish(&End::new(doc.generated_at.clone(), &statuses))
                        .unwrap();
                }
                assert_eq!(
                    String::from_utf8(got).unwrap(),
                    String::from_utf8(want.clone()).unwrap(),
                    "{count} node(s), memory spool {memory}"
                );
            }
        }
    }
}
