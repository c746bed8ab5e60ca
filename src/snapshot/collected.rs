//! Snapshots collected elsewhere (`gpufleet snapshot --from`, `gpufleet tui --from`,
//! `policy check --against`, `policy generate --for`): a DaemonSet's JSON files, an `srun` over
//! every Slurm node writing JSON Lines, older snapshots (docs/domain.md, "Collected snapshots").
//!
//! A file is one `gpufleet snapshot --format json` document (schema 1 or 2) or JSON Lines
//! (`{"type":"node","data":{…}}` records; `summary` and other record types are skipped, and
//! several runs concatenated — one per node, as `srun` writes them — are fine). Several files
//! are merged by node name, in one pass with a map by name (O(n)): the newest `scanned_at`
//! wins (on equal times, the one read last), except that a report whose `scanned_at` is later
//! than now plus the clock-skew allowance, or is no time at all, is never preferred over one
//! of a real time. A collected file is only as trustworthy as the node that wrote it (its
//! mtime too): such reports, and a node whose reports differ between two files, are merge
//! findings ([`Loaded::warnings`]), not errors.
//!
//! Memory: the files' text, and per node its name and where its winning report lies in that
//! text (about 60 bytes: the map by name is a table of entry numbers, 4 bytes a slot, hashed
//! by the name the entry holds); reports are parsed again one at a time as they are taken
//! ([`Loaded::into_collected`]), so a caller that streams them holds one at a time
//! (`snapshot --from` at 1,000,000 nodes: 1.7× the input, bench/README.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::model::report::{NodeReport, READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION};

/// The clock-skew allowance by default: a report may say it was scanned up to 10 minutes after
/// this machine's now (`[collected] clock_skew`, docs/domain.md "Collected snapshots").
pub const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(600);

/// The largest clock-skew allowance (a day), as for `[collected] clock_skew`.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(86_400);

/// Parses a clock-skew allowance as `--clock-skew` takes it: whole seconds (`600`) or a
/// duration with units (`10m`, `1h 30m`, `90s`; [`crate::duration::parse_secs`]), 0 to a day.
///
/// Errors: neither form (a negative or fractional duration among them), more than a day; in
/// words.
pub fn parse_clock_skew(s: &str) -> Result<Duration, String> {
    let d = Duration::from_secs(crate::duration::parse_secs(s)?);
    if d > MAX_CLOCK_SKEW {
        return Err(format!(
            "{s:?}: at most a day ({} s)",
            MAX_CLOCK_SKEW.as_secs()
        ));
    }
    Ok(d)
}

/// At most this many findings are kept word for word; the rest are counted.
pub const MAX_WARNINGS: usize = 1000;

/// One node of a collected file, and where it was read (for errors and for people).
#[derive(Debug, Clone)]
pub struct Collected {
    pub report: NodeReport,
    /// The file it was read from.
    pub file: Arc<Path>,
    /// Its 1-based line: the JSON Lines record, or 1 for a JSON document.
    pub line: usize,
}

/// How reports are merged: the time they are checked against, and the allowance.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// This machine's now.
    pub now: jiff::Timestamp,
    /// How far after `now` a `scanned_at` may be before it is a finding (clock skew).
    pub clock_skew: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            now: jiff::Timestamp::now(),
            clock_skew: DEFAULT_CLOCK_SKEW,
        }
    }
}

/// How a report's `scanned_at` ranks: a real time beats a future one, which beats none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// Not an RFC 3339 time, or one jiff cannot represent (`9999-12-31T23:59:59Z`).
    NoTime,
    /// Later than now plus the allowance.
    Future,
    Real,
}

/// Where the winning report of one node lies.
#[derive(Debug, Clone)]
struct Entry {
    file: u32,
    line: u32,
    /// Byte range of the report's JSON in its file's text.
    start: usize,
    len: u32,
    class: Class,
    time: jiff::Timestamp,
}

/// The merged nodes of several files, in the order they were first seen.
#[derive(Debug)]
pub struct Loaded {
    files: Vec<Arc<Path>>,
    texts: Vec<String>,
    entries: Vec<Entry>,
    /// Each entry's node name (moved out of the merge's map once every file is read).
    names: Vec<Box<str>>,
    warnings: Vec<String>,
    more_warnings: usize,
}

impl Loaded {
    /// How many nodes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none (never, from [`load_with`]: an empty file is an error).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The node names, in the order of [`Loaded::into_collected`].
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }

    /// The node names, in the order of [`Loaded::into_collected`], taken out ([`Loaded::names`]
    /// is empty after).
    pub fn take_names(&mut self) -> Vec<Box<str>> {
        std::mem::take(&mut self.names)
    }

    /// The merge findings, as `file:line: node `NAME`: …` (raw node text: escape it where it
    /// is shown), at most [`MAX_WARNINGS`], then one line saying how many more.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.warnings.clone();
        if self.more_warnings > 0 {
            w.push(format!(
                "… and {} more merge findings like these",
                self.more_warnings
            ));
        }
        w
    }

    /// The nodes, each parsed as it is taken (every one was parsed once already while merging,
    /// so this does not fail on text `load_with` accepted; a failure would be skipped).
    pub fn into_collected(self) -> impl Iterator<Item = Collected> {
        let Loaded {
            files,
            texts,
            entries,
            ..
        } = self;
        entries.into_iter().filter_map(move |e| {
            let text = texts
                .get(e.file as usize)?
                .get(e.start..e.start + e.len as usize)?;
            Some(Collected {
                report: serde_json::from_str(text).ok()?,
                file: files.get(e.file as usize)?.clone(),
                line: e.line as usize,
            })
        })
    }

    fn warn(&mut self, w: String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(w);
        } else {
            self.more_warnings += 1;
        }
    }
}

/// [`load_with`] at this machine's now with the default allowance.
pub fn load(files: &[PathBuf]) -> Result<Loaded, String> {
    load_with(files, &Options::default())
}

/// Reads and merges `files` (see the module docs); nodes come in the order they were first
/// seen.
///
/// Errors, as `file:line: message` (`file:line:column` where serde_json gives one): an
/// unreadable or empty file, text that is neither form, a schema other than 1 or 2, a record
/// that is not a node report. serde's messages quote what they could not read (`unknown
/// variant …`): the caller escapes the error where it shows it (`terminal_safe`, once). A
/// `scanned_at` that is no time, or one in the future, is a finding of that report
/// ([`Loaded::warnings`]), never an error of the merge.
pub fn load_with(files: &[PathBuf], opts: &Options) -> Result<Loaded, String> {
    let mut loaded = Loaded {
        files: Vec::with_capacity(files.len()),
        texts: Vec::with_capacity(files.len()),
        entries: Vec::new(),
        names: Vec::new(),
        warnings: Vec::new(),
        more_warnings: 0,
    };
    let limit = opts
        .now
        .checked_add(
            jiff::SignedDuration::try_from(opts.clock_skew).unwrap_or(jiff::SignedDuration::MAX),
        )
        .unwrap_or(jiff::Timestamp::MAX);
    // Every file is read first (their text is kept to the end anyway), so that the map and
    // the list are sized once for every file's nodes (each report has one `"scanned_at"`; at
    // most one per 64 bytes, whatever a file says): growing either by doubling, or reserving
    // again per file, holds the old and the new tables at once (0.3x the input at 1,000,000
    // nodes).
    let mut hint = 0usize;
    for f in files {
        let text = crate::limits::read_to_string(f, crate::limits::Kind::Snapshot)
            .map_err(|e| format!("{}: {e}", f.display()))?;
        hint = hint.saturating_add(text.matches("\"scanned_at\"").count().min(text.len() / 64));
        loaded.files.push(Arc::from(f.as_path()));
        loaded.texts.push(text);
    }
    let mut by_name = ByName {
        table: hashbrown::HashTable::with_capacity(hint),
        state: std::hash::RandomState::new(),
    };
    loaded.entries.reserve_exact(hint);
    loaded.names.reserve_exact(hint);
    let texts = std::mem::take(&mut loaded.texts);
    for (fi, (f, text)) in files.iter().zip(&texts).enumerate() {
        let fi = u32::try_from(fi).map_err(|_| "too many files".to_string())?;
        // Each record is merged as it is read: nothing per record is kept but its entry.
        parse_ranges(text, f, &mut |r| {
            merge(
                &mut loaded,
                &texts,
                &mut by_name,
                text,
                f,
                fi,
                limit,
                opts,
                r,
            )
        })?;
    }
    loaded.texts = texts;
    Ok(loaded)
}

/// The merge's map by name: entry numbers, hashed by the name they hold in [`Loaded::names`]
/// (4 bytes a slot: a `HashMap<Box<str>, u32>` holds 24, and a copy of every name).
struct ByName {
    table: hashbrown::HashTable<u32>,
    /// Keyed at random per process: node names are node text.
    state: std::hash::RandomState,
}

/// Merges record `r` of file number `fi` (`f`, its `text`; every file's text in `texts`) into
/// `loaded` (see the module docs).
#[allow(clippy::too_many_arguments)]
fn merge(
    loaded: &mut Loaded,
    texts: &[String],
    by_name: &mut ByName,
    text: &str,
    f: &Path,
    fi: u32,
    limit: jiff::Timestamp,
    opts: &Options,
    r: Range,
) -> Result<(), String> {
    let (class, time) = match r.scanned_at.parse::<jiff::Timestamp>() {
        Err(e) => {
            loaded.warn(format!(
                "{}:{}: node `{}`: scanned_at {:?} is not a time gpufleet can compare ({e}); the report is shown only if the node has no other",
                f.display(),
                r.line,
                r.name.escape_debug(),
                r.scanned_at
            ));
            (Class::NoTime, jiff::Timestamp::MIN)
        }
        Ok(t) if t > limit => {
            loaded.warn(format!(
                "{}:{}: node `{}`: scanned_at {} is later than now plus the {} s clock-skew allowance: not preferred over a report of a real time (a collected file is only as trustworthy as the node that wrote it)",
                f.display(),
                r.line,
                r.name.escape_debug(),
                r.scanned_at,
                opts.clock_skew.as_secs()
            ));
            (Class::Future, t)
        }
        Ok(t) => (Class::Real, t),
    };
    let e = Entry {
        file: fi,
        line: u32::try_from(r.line).unwrap_or(u32::MAX),
        start: r.start,
        len: u32::try_from(r.len).map_err(|_| "a report over 4 GiB".to_string())?,
        class,
        time,
    };
    use std::hash::BuildHasher;
    let hash = by_name.state.hash_one(r.name.as_str());
    let names = &loaded.names;
    let found = by_name
        .table
        .find(hash, |&i| {
            names.get(i as usize).is_some_and(|n| **n == *r.name)
        })
        .copied();
    match found {
        None => {
            let at = u32::try_from(loaded.entries.len())
                .map_err(|_| "more than 4294967295 nodes".to_string())?;
            let ByName { table, state } = by_name;
            table.insert_unique(hash, at, |&i| {
                state.hash_one(names.get(i as usize).map_or("", |n| &**n))
            });
            loaded.names.push(r.name.into_boxed_str());
            loaded.entries.push(e);
        }
        Some(at) => {
            let Some(old) = loaded.entries.get(at as usize).cloned() else {
                return Ok(());
            };
            if old.file != fi {
                let a = texts
                    .get(old.file as usize)
                    .and_then(|t| t.get(old.start..old.start + old.len as usize));
                if a != text.get(e.start..e.start + e.len as usize) {
                    let other = loaded
                        .files
                        .get(old.file as usize)
                        .map(|p| p.display().to_string())
                        .unwrap_or_default();
                    loaded.warn(format!(
                        "node `{}`: {other}:{} and {}:{} hold different reports (two sources claim the node; the newest real scanned_at is shown)",
                        r.name.escape_debug(),
                        old.line,
                        f.display(),
                        e.line
                    ));
                }
            }
            if (e.class, e.time) >= (old.class, old.time)
                && let Some(slot) = loaded.entries.get_mut(at as usize)
            {
                *slot = e;
            }
        }
    }

    Ok(())
}

/// Says a merge's findings on stderr, escaped, one a line, as `gpufleet: merge: …` (for the
/// commands; the TUI shows them in its status line).
pub fn say_findings(findings: &[String]) {
    for w in findings {
        eprintln!("gpufleet: merge: {}", crate::model::text::terminal_safe(w));
    }
}

/// [`load_with`]'s reports and findings (for a caller that shows findings its own way: the
/// TUI's status line).
pub fn load_reports_with(
    files: &[PathBuf],
    opts: &Options,
) -> Result<(Vec<NodeReport>, Vec<String>), String> {
    let loaded = load_with(files, opts)?;
    let warnings = loaded.warnings();
    Ok((
        loaded.into_collected().map(|c| c.report).collect(),
        warnings,
    ))
}

/// One node record of a file: its name and time, and where its JSON lies in the text.
struct Range {
    name: String,
    scanned_at: String,
    line: usize,
    start: usize,
    len: usize,
}

/// The byte offset of `inner` (a slice of `outer`) in `outer`.
fn offset(outer: &str, inner: &str) -> usize {
    (inner.as_ptr() as usize).saturating_sub(outer.as_ptr() as usize)
}

/// Checks `raw` is a node report (every field, as [`NodeReport`] reads it) and gives its
/// name and time.
fn check_report(raw: &RawValue) -> Result<(String, String), serde_json::Error> {
    let r: NodeReport = serde_json::from_str(raw.get())?;
    Ok((r.name, r.scanned_at))
}

/// Gives `each` the node records of one file's text, in file order (a node may appear more
/// than once); `file` names it in errors.
fn parse_ranges(
    text: &str,
    file: &Path,
    each: &mut dyn FnMut(Range) -> Result<(), String>,
) -> Result<(), String> {
    #[derive(Deserialize)]
    struct Line<'a> {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default, borrow)]
        data: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Version {
        #[serde(default)]
        schema_version: Option<serde_json::Value>,
    }
    #[derive(Deserialize)]
    struct Doc<'a> {
        #[serde(default, borrow)]
        nodes: Option<Vec<&'a RawValue>>,
    }
    let shown = file.display();
    if text.trim().is_empty() {
        return Err(format!(
            "{shown}: empty file: not a gpufleet snapshot (JSON or JSON Lines)"
        ));
    }
    // JSON Lines: a first line that is a whole object with a `type`.
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let jsonl = serde_json::from_str::<Line>(first).is_ok();
    if !jsonl {
        let v: Version = serde_json::from_str(text).map_err(|e| {
            format!(
                "{shown}:{}:{}: not a gpufleet snapshot (JSON or JSON Lines): {e}",
                e.line(),
                e.column()
            )
        })?;
        match v.schema_version.as_ref().map(|s| s.as_u64()) {
            Some(Some(n)) if READABLE_SCHEMA_VERSIONS.contains(&n) => {}
            Some(Some(n)) => {
                return Err(format!(
                    "{shown}: schema_version {n}: this gpufleet reads snapshots of schema 1 to {SCHEMA_VERSION}"
                ));
            }
            _ => {
                return Err(format!(
                    "{shown}: not a gpufleet snapshot (no schema_version; `gpufleet snapshot --format json` writes one)"
                ));
            }
        }
        let doc: Doc = serde_json::from_str(text).map_err(|e| format!("{shown}: nodes: {e}"))?;
        let nodes = doc
            .nodes
            .ok_or_else(|| format!("{shown}: no `nodes` array"))?;
        for raw in nodes {
            let (name, scanned_at) =
                check_report(raw).map_err(|e| format!("{shown}: nodes: {e}"))?;
            each(Range {
                name,
                scanned_at,
                line: 1,
                start: offset(text, raw.get()),
                len: raw.get().len(),
            })?;
        }
        return Ok(());
    }
    let mut any = false;
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(l).map_err(|e| {
            format!(
                "{shown}:{}:{}: not a gpufleet JSON Lines record: {e}",
                i + 1,
                e.column()
            )
        })?;
        if line.kind != "node" {
            continue;
        }
        let raw = line
            .data
            .filter(|d| d.get() != "null")
            .ok_or_else(|| format!("{shown}:{}: a node record without `data`", i + 1))?;
        let (name, scanned_at) =
            check_report(raw).map_err(|e| format!("{shown}:{}: not a node report: {e}", i + 1))?;
        any = true;
        each(Range {
            name,
            scanned_at,
            line: i + 1,
            start: offset(text, raw.get()),
            len: raw.get().len(),
        })?;
    }
    if !any {
        return Err(format!(
            "{shown}: no node records (JSON Lines with no {{\"type\":\"node\"}} line)"
        ));
    }
    Ok(())
}

/// The nodes of one file's text, in file order (a node may appear more than once); `file`
/// names it in errors and in the result.
pub fn parse(text: &str, file: &Path) -> Result<Vec<Collected>, String> {
    let path: Arc<Path> = Arc::from(file);
    let mut out = Vec::new();
    parse_ranges(text, file, &mut |r| {
        let raw = text.get(r.start..r.start + r.len).unwrap_or("");
        let report = serde_json::from_str(raw).map_err(|e| format!("{}: {e}", file.display()))?;
        out.push(Collected {
            report,
            file: path.clone(),
            line: r.line,
        });
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests;
