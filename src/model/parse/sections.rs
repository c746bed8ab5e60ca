//! Splits the probe's output into sections.
//!
//! Wire format (written by `src/probe/probe.sh`, protocol 1): every section is
//! `BOUNDARY <kind> <name>\n<body>\nBOUNDARY end <status>\n`, where BOUNDARY is the random token
//! gpufleet generated for this run (so a file's contents cannot fake a section). The body is
//! exact: the script adds one newline before the end line and this parser removes it.

/// What a section holds, from the second word of its header line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Probe metadata: protocol, uid, which tools exist, and the final `done` marker.
    Meta,
    /// The bytes of one file.
    File,
    /// `ls -1` of one folder.
    Dir,
    /// The lines of one file that match a pattern the probe fixes per file.
    Grep,
    /// `od -An -v -tx1` of a binary file (when gzip is missing on the node).
    Hex,
    /// A command's combined stdout and stderr.
    Cmd,
    /// The target of a symlink, not followed.
    Link,
    /// NVIDIA module files under a folder (a bounded `find`), one path per line.
    Find,
    /// How many lines of a (binary) file hold a fixed string (`grep -c -F`).
    Count,
    /// A file's last bytes (`tail -c`).
    Tail,
    /// A kind this version of gpufleet does not know.
    Other,
}

/// How a section ended, from its `end` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Read completely.
    Ok,
    /// The file or folder does not exist on the node (an answer, not an unknown).
    Absent,
    /// It exists but the probe's user may not read it.
    Denied,
    /// The read failed with this exit status (`error N`).
    Error(i32),
    /// A command exited with this non-zero status (`rc N`).
    Rc(i32),
    /// A command ran past its time limit.
    Timeout,
    /// A tool the read needs is not installed on the node.
    MissingTool(String),
    /// No end line arrived: the node's deadline or the output cap cut the section off.
    Incomplete,
    /// A FIFO, socket or device where a file was expected: never opened (it could hang).
    NotRegular,
    /// A boot-configuration file that is a symlink to /dev/null: it masks same-named files.
    Masked,
    /// A folder that resolves to one already read (its body names that one); read once.
    Same,
    /// Output cut at a cap of this many bytes (a decompressed kernel config, a command that
    /// printed more than its cap): not trusted.
    Cut(u64),
    /// A command not run: no private temporary folder could be made for its output (the probe
    /// never keeps a command's output in memory).
    NoTmp,
    /// A link was asked for and a file or folder is there instead.
    NotLink,
    /// An end line this version does not understand.
    Unrecognized(String),
}

/// One framed part of the probe output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub kind: Kind,
    /// The path on the node (for files, folders, greps) or the command line (for commands).
    pub name: String,
    pub status: Status,
    /// Raw bytes, possibly not UTF-8.
    pub body: Vec<u8>,
}

impl Section {
    /// The body as UTF-8 text, or a message saying why it is not.
    pub fn text(&self) -> Result<&str, String> {
        std::str::from_utf8(&self.body).map_err(|e| {
            format!(
                "{} is not valid UTF-8 (byte {})",
                self.name,
                e.valid_up_to()
            )
        })
    }
}

/// The parsed output of one probe run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeOutput {
    pub sections: Vec<Section>,
    /// The trailer section (`meta complete`, status ok) arrived: the script ran to its end.
    pub complete: bool,
    /// Bytes outside any section (stray output); kept for the detail view, never parsed as facts.
    pub stray_bytes: usize,
    /// `Some(cap)` when gpufleet stopped reading at its output cap of `cap` bytes (set by
    /// src/probe/mod.rs, not by [`parse`]): the last section was cut there and the ones after
    /// it never arrived, so their facts are unknown by the cap, not by the node.
    pub output_cap: Option<usize>,
    /// Position of the first section of each (kind, name): lookups stay O(1) however many
    /// sections a (hostile) node prints.
    index: std::collections::HashMap<(Kind, String), usize>,
}

impl ProbeOutput {
    /// The first section of `kind` named `name`.
    pub fn get(&self, kind: Kind, name: &str) -> Option<&Section> {
        let i = *self.index.get(&(kind, name.to_string()))?;
        self.sections.get(i)
    }

    /// Sections of `kind` whose name starts with `prefix`, in output order.
    pub fn with_prefix<'a>(
        &'a self,
        kind: Kind,
        prefix: &'a str,
    ) -> impl Iterator<Item = &'a Section> + 'a {
        self.sections
            .iter()
            .filter(move |s| s.kind == kind && s.name.starts_with(prefix))
    }

    /// The `meta probe` section's `key value` lines.
    pub fn meta(&self, key: &str) -> Option<String> {
        self.meta_all(key).next()
    }

    /// Every value of `key` among the `meta probe` section's `key value` lines.
    pub fn meta_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = String> + 'a {
        self.get(Kind::Meta, "probe")
            .and_then(|s| s.text().ok())
            .into_iter()
            .flat_map(str::lines)
            .filter_map(move |l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.to_string())
            })
    }

    /// Whether the probe reported tool `name` as installed (`None` when it did not say).
    pub fn has_tool(&self, name: &str) -> Option<bool> {
        let s = self.get(Kind::Meta, "probe")?;
        let text = s.text().ok()?;
        let want = format!("tool {name} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&want))
            .map(|v| v == "yes")
    }
}

impl Kind {
    /// The word the probe writes for this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Meta => "meta",
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Grep => "grep",
            Kind::Hex => "hex",
            Kind::Cmd => "cmd",
            Kind::Link => "link",
            Kind::Find => "find",
            Kind::Count => "count",
            Kind::Tail => "tail",
            Kind::Other => "other",
        }
    }
}

fn parse_kind(word: &str) -> Kind {
    match word {
        "meta" => Kind::Meta,
        "file" => Kind::File,
        "dir" => Kind::Dir,
        "grep" => Kind::Grep,
        "hex" => Kind::Hex,
        "cmd" => Kind::Cmd,
        "link" => Kind::Link,
        "find" => Kind::Find,
        "count" => Kind::Count,
        "tail" => Kind::Tail,
        _ => Kind::Other,
    }
}

fn parse_status(s: &str) -> Status {
    let (word, rest) = s.split_once(' ').unwrap_or((s, ""));
    let num = || rest.trim().parse::<i32>().ok();
    match word {
        "ok" => Status::Ok,
        "absent" => Status::Absent,
        "denied" => Status::Denied,
        "timeout" => Status::Timeout,
        "error" => num().map_or_else(|| Status::Unrecognized(s.to_string()), Status::Error),
        "rc" => num().map_or_else(|| Status::Unrecognized(s.to_string()), Status::Rc),
        "missing-tool" => Status::MissingTool(rest.trim().to_string()),
        "not-regular" => Status::NotRegular,
        "masked" => Status::Masked,
        "same" => Status::Same,
        "not-link" => Status::NotLink,
        "no-tmp" => Status::NoTmp,
        "cut" => rest
            .trim()
            .parse::<u64>()
            .map_or_else(|_| Status::Unrecognized(s.to_string()), Status::Cut),
        _ => Status::Unrecognized(s.to_string()),
    }
}

/// Splits `output` into sections framed by `boundary`.
///
/// Never fails: a section without an end line is kept as [`Status::Incomplete`]; bytes outside
/// sections are counted in `stray_bytes`. An empty boundary yields no sections.
pub fn parse(output: &[u8], boundary: &str) -> ProbeOutput {
    let mut out = ProbeOutput::default();
    if boundary.is_empty() {
        out.stray_bytes = output.len();
        return out;
    }
    let marker = boundary.as_bytes();
    // Open section: (kind, name, body start offset).
    let mut open: Option<(Kind, String, usize)> = None;
    let mut pos = 0;
    while pos < output.len() {
        let line_end = output[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(output.len(), |i| pos + i);
        let line = &output[pos..line_end];
        let next = (line_end + 1).min(output.len());
        let framed =
            line.len() > marker.len() && line.starts_with(marker) && line[marker.len()] == b' ';
        if !framed {
            if open.is_none() {
                out.stray_bytes += next - pos;
            }
            pos = next;
            continue;
        }
        let rest = String::from_utf8_lossy(&line[marker.len() + 1..]).into_owned();
        if let Some(status) = rest.strip_prefix("end ").or((rest == "end").then_some("")) {
            if let Some((kind, name, start)) = open.take() {
                // The script printed one '\n' before the end line; it is not part of the body.
                let body_end = pos.saturating_sub(1).max(start);
                out.sections.push(Section {
                    kind,
                    name,
                    status: parse_status(status),
                    body: output[start..body_end].to_vec(),
                });
            } else {
                out.stray_bytes += next - pos;
            }
        } else {
            if let Some((kind, name, start)) = open.take() {
                out.sections.push(Section {
                    kind,
                    name,
                    status: Status::Incomplete,
                    body: output[start..pos].to_vec(),
                });
            }
            let (word, name) = rest.split_once(' ').unwrap_or((rest.as_str(), ""));
            open = Some((parse_kind(word), name.to_string(), next));
        }
        pos = next;
    }
    if let Some((kind, name, start)) = open {
        out.sections.push(Section {
            kind,
            name,
            status: Status::Incomplete,
            body: output[start.min(output.len())..].to_vec(),
        });
    }
    out.complete = out
        .sections
        .iter()
        .any(|s| s.kind == Kind::Meta && s.name == "complete" && s.status == Status::Ok);
    for (i, s) in out.sections.iter().enumerate() {
        out.index.entry((s.kind, s.name.clone())).or_insert(i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: &str = "gpufleet-0123456789abcdef";

    #[test]
    fn body_is_exact_with_and_without_trailing_newline() {
        let raw = format!(
            "{B} file /a\nline\n\n{B} end ok\n{B} file /b\nno newline\n{B} end ok\n{B} meta complete\n\n{B} end ok\n"
        );
        let p = parse(raw.as_bytes(), B);
        assert_eq!(p.sections[0].body, b"line\n");
        assert_eq!(p.sections[1].body, b"no newline");
        assert!(p.complete);
        assert_eq!(p.stray_bytes, 0);
    }

    #[test]
    fn statuses_parse() {
        let raw = format!(
            "{B} file /x\n\n{B} end absent\n{B} file /y\n\n{B} end error 5\n{B} cmd nvidia-smi -q\nout\n{B} end rc 18\n{B} cmd z\n\n{B} end missing-tool nvidia-smi\n{B} cmd t\n\n{B} end timeout\n"
        );
        let p = parse(raw.as_bytes(), B);
        let st: Vec<_> = p.sections.iter().map(|s| s.status.clone()).collect();
        assert_eq!(
            st,
            vec![
                Status::Absent,
                Status::Error(5),
                Status::Rc(18),
                Status::MissingTool("nvidia-smi".into()),
                Status::Timeout
            ]
        );
        assert_eq!(p.sections[2].name, "nvidia-smi -q");
        assert!(!p.complete);
    }

    #[test]
    fn truncated_section_is_incomplete_and_keeps_its_bytes() {
        let raw = format!("{B} file /a\n1\n\n{B} end ok\n{B} cmd nvidia-smi\npartial");
        let p = parse(raw.as_bytes(), B);
        assert_eq!(p.sections.len(), 2);
        assert_eq!(p.sections[1].status, Status::Incomplete);
        assert_eq!(p.sections[1].body, b"partial");
    }

    #[test]
    fn a_file_cannot_fake_a_section_without_the_boundary() {
        let raw = format!("{B} file /etc/motd\ngpufleet-other end ok\nfake\n\n{B} end ok\n");
        let p = parse(raw.as_bytes(), B);
        assert_eq!(p.sections.len(), 1);
        assert_eq!(p.sections[0].body, b"gpufleet-other end ok\nfake\n");
    }

    #[test]
    fn stray_bytes_and_invalid_utf8_do_not_break_parsing() {
        let mut raw = b"login banner\n".to_vec();
        raw.extend_from_slice(format!("{B} file /a\n").as_bytes());
        raw.extend_from_slice(&[0xff, 0xfe, b'\n']);
        raw.extend_from_slice(format!("\n{B} end ok\n").as_bytes());
        let p = parse(&raw, B);
        assert_eq!(p.stray_bytes, 13);
        assert!(p.sections[0].text().is_err());
    }

    #[test]
    fn header_without_newline_at_eof() {
        let p = parse(format!("{B} file /a").as_bytes(), B);
        assert_eq!(p.sections[0].status, Status::Incomplete);
        assert!(p.sections[0].body.is_empty());
        assert!(parse(b"", B).sections.is_empty());
        assert_eq!(parse(b"x", "").stray_bytes, 1);
    }
}
