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

/// Every entry of the journal at `path` (missing file: none), and how many lines were not
/// entries (a torn line from a crash, a line damaged by hand): those are skipped, so one bad
/// line never locks the operator out of resuming.
pub fn read(path: &Path) -> std::io::Result<(Vec<Entry>, usize)> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    let mut skipped = 0;
    for l in BufReader::new(f).split(b'\n') {
        let l = l?;
        if l.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(&l) {
            Ok(e) => out.push(e),
            Err(_) => skipped += 1,
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
        assert_eq!((e.len(), skipped), (2, 1));
        // The next run (after the crash that tore it) starts a line of its own.
        drop(j);
        let mut j = Journal::open(&dir.path().join("state")).unwrap();
        j.append(&entry("uncordon", Phase::Start)).unwrap();
        let (e, skipped) = read(&path).unwrap();
        assert_eq!((e.len(), skipped), (3, 1));
        assert_eq!(e[2].step, "uncordon");
        // A damaged line in the middle is skipped, not fatal.
        std::fs::write(&path, "garbage\n{}\n").unwrap();
        assert_eq!(read(&path).unwrap(), (vec![], 2));
    }
}
