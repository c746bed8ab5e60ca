//! The rollout journal: append-only JSON Lines in the state folder (`journal.jsonl`), one entry
//! per step phase, each written and fsynced **before** the side effect it announces. It tells
//! who did what, when, on which node, with which command and outcome; `--resume` reads it to
//! continue an interrupted rollout without repeating completed steps.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A step's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// About to run (written before the side effect).
    Start,
    Done,
    Failed,
    /// Nothing was done: another rollout holds the node (its node lock), or the node changed
    /// since the plan (a node step); every node was so (the rollout's end).
    Skipped,
    /// The operator gave the rollout up (`gpufleet upgrade --abandon`).
    Abandoned,
}

/// One journal line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// RFC 3339 UTC.
    pub ts: String,
    /// `user@host` of the operator.
    pub who: String,
    /// The rollout's id (`r-20261130T101500Z-3f9a2c`).
    pub rollout: String,
    /// The node, or `""` for rollout-level entries.
    pub node: String,
    /// `rollout`, `lock`, `drain`, `step:<name>`, `wait-ssh:<name>`, `reprobe`, `gates`,
    /// `uncordon`, `unlock` (the step's label, for people).
    pub step: String,
    /// The step's place in its node's plan (0 = the first), which `--resume` matches; absent
    /// on rollout-level entries and in journals older than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<usize>,
    pub phase: Phase,
    /// The exact command, where there is one.
    #[serde(default)]
    pub command: String,
    /// What happened (exit status and output excerpt, gate results, the nodes of the plan).
    #[serde(default)]
    pub outcome: String,
}

/// The journal file, opened for appending.
pub struct Journal {
    file: File,
    pub path: PathBuf,
    /// The file ends mid-line (a torn last line from a crash): the next entry starts with a
    /// newline. Read once at open, then known: appending costs O(1) in the journal's size.
    torn: bool,
}

/// `user@host` for journal entries.
pub fn who() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{}@{host}", crate::inventory::local_user())
}

impl Journal {
    /// Opens (creating it and its folder) the journal in `state_dir`.
    pub fn open(state_dir: &Path) -> std::io::Result<Journal> {
        std::fs::create_dir_all(state_dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", state_dir.display())))?;
        let path = state_dir.join("journal.jsonl");
        let new = !path.exists();
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        if new {
            // The new file's name survives a crash too.
            File::open(state_dir)?.sync_all()?;
        }
        let torn = last_byte(&mut file)?.is_some_and(|b| b != b'\n');
        Ok(Journal { file, path, torn })
    }

    /// Appends `entry` and fsyncs it: when this returns, the entry survives a crash. A torn
    /// last line (a crash while writing) is closed first, so this entry starts a line of its own.
    /// One write and one fsync: the cost does not grow with the journal.
    pub fn append(&mut self, entry: &Entry) -> std::io::Result<()> {
        let mut line = serde_json::to_string(entry)?;
        line.push('\n');
        if self.torn {
            line.insert(0, '\n');
        }
        self.file.write_all(line.as_bytes())?;
        self.torn = false;
        self.file.sync_data()
    }
}

/// The last byte of `file`, if any (its position is left at the end: it appends anyway).
fn last_byte(file: &mut File) -> std::io::Result<Option<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    if file.metadata()?.len() == 0 {
        return Ok(None);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut b = [0u8];
    file.read_exact(&mut b)?;
    Ok(Some(b[0]))
}

/// The lines of a journal that are not entries (a torn line from a crash, a line damaged or
/// planted by hand, NUL bytes a file system left after a crash): how many, and the first
/// [`Skipped::SHOWN`] of them by line number (1-based) with their first bytes, lossily decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    pub count: usize,
    pub first: Vec<(usize, String)>,
}

impl Skipped {
    /// Lines named in a warning; the rest are counted.
    pub const SHOWN: usize = 5;
    /// Bytes of a line shown in a warning.
    const SHOWN_BYTES: usize = 60;

    /// The warning for the journal at `path`, naming the file and each line (its text escaped
    /// for the terminal): `gpufleet: warning: journal /s/journal.jsonl: line 3 is not a journal
    /// entry (skipped): "garbage"`; `None` when no line was skipped.
    pub fn warning(&self, path: &Path) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let lines: Vec<String> = self
            .first
            .iter()
            .map(|(n, text)| {
                format!(
                    "line {n} \"{}\"",
                    crate::model::text::terminal_safe(text).replace('"', "\\\"")
                )
            })
            .collect();
        let more = self.count - self.first.len();
        Some(format!(
            "gpufleet: warning: journal {}: {} line(s) that are not journal entries were skipped (a crash while writing, or the file was edited): {}{}",
            crate::model::text::terminal_safe(&path.display().to_string()),
            self.count,
            lines.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ))
    }

    fn push(&mut self, line_no: usize, line: &[u8]) {
        self.count += 1;
        if self.first.len() < Self::SHOWN {
            let shown = &line[..line.len().min(Self::SHOWN_BYTES)];
            let mut text = String::from_utf8_lossy(shown).into_owned();
            if line.len() > Self::SHOWN_BYTES {
                text.push('…');
            }
            self.first.push((line_no, text));
        }
    }
}

/// Every entry of the journal at `path` (missing file: none), and the lines that were not
/// entries ([`Skipped`]): those are skipped, so one bad line never locks the operator out of
/// resuming, and said by every command that reads the journal for the operator
/// ([`Skipped::warning`]), so tampering is never unnoticed.
pub fn read(path: &Path) -> std::io::Result<(Vec<Entry>, Skipped)> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Vec::new(), Skipped::default()));
        }
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    let mut skipped = Skipped::default();
    for (i, l) in BufReader::new(f).split(b'\n').enumerate() {
        let l = l?;
        if l.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(&l) {
            Ok(e) => out.push(e),
            Err(_) => skipped.push(i + 1, &l),
        }
    }
    Ok((out, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(step: &str, phase: Phase) -> Entry {
        Entry {
            ts: "2026-11-30T10:00:00Z".into(),
            who: "ops@laptop".into(),
            rollout: "r1".into(),
            node: "gpu01".into(),
            step: step.into(),
            seq: None,
            phase,
            command: String::new(),
            outcome: String::new(),
        }
    }

    #[test]
    fn appends_survive_and_a_torn_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(&dir.path().join("state")).unwrap();
        j.append(&entry("drain", Phase::Start)).unwrap();
        j.append(&entry("drain", Phase::Done)).unwrap();
        let path = dir.path().join("state/journal.jsonl");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"ts\":\"2026")
            .unwrap();
        let (e, skipped) = read(&path).unwrap();
        assert_eq!((e.len(), skipped.count), (2, 1));
        // The next run (after the crash that tore it) starts a line of its own.
        drop(j);
        let mut j = Journal::open(&dir.path().join("state")).unwrap();
        j.append(&entry("uncordon", Phase::Start)).unwrap();
        let (e, skipped) = read(&path).unwrap();
        assert_eq!((e.len(), skipped.count), (3, 1));
        assert_eq!(e[2].step, "uncordon");
        // A damaged line in the middle is skipped, not fatal.
        std::fs::write(&path, "garbage\n{}\n").unwrap();
        let (e, skipped) = read(&path).unwrap();
        assert_eq!((e.len(), skipped.count), (0, 2));
    }

    /// Garbage, NUL bytes and an escape sequence among real entries: each entry is kept, each
    /// other line is counted and named in the warning with its line number, escaped (before:
    /// `gpufleet rollouts` said nothing, `upgrade` and `journal` only a count).
    #[test]
    fn garbage_and_nul_lines_are_named_in_the_warning_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(&dir.path().join("state")).unwrap();
        j.append(&entry("drain", Phase::Start)).unwrap();
        let path = dir.path().join("state/journal.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"\0\0\0\0\ngarbage \x1b[2J\n\n").unwrap();
        drop(f);
        j.append(&entry("drain", Phase::Done)).unwrap();
        let (e, skipped) = read(&path).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(skipped.count, 2);
        assert_eq!(
            skipped.first,
            [
                (2, "\0\0\0\0".to_string()),
                (3, "garbage \x1b[2J".to_string())
            ]
        );
        let w = skipped.warning(&path).unwrap();
        assert!(w.contains(&path.display().to_string()), "{w}");
        assert!(
            w.contains(r#"line 2 "\x00\x00\x00\x00", line 3 "garbage \x1b[2J""#),
            "{w}"
        );
        assert!(!w.contains('\x1b') && !w.contains('\0'), "{w}");
        // Many bad lines: the first five named, the rest counted.
        std::fs::write(&path, "x\n".repeat(8)).unwrap();
        let w = read(&path).unwrap().1.warning(&path).unwrap();
        assert!(
            w.contains("8 line(s)") && w.contains("line 5 \"x\" and 3 more"),
            "{w}"
        );
        assert_eq!(Skipped::default().warning(&path), None);
    }
}
