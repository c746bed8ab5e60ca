//! `--output FILE`: written atomically, so a reader (node_exporter's textfile collector, a cron
//! job, a dashboard) never sees half a file: a temporary file in the same folder (named
//! `.NAME.XXXXXX.tmp`, which the textfile collector's `*.prom` pattern skips), written, fsynced,
//! renamed over FILE, then the folder fsynced. Not committed (an error, Ctrl-C): the temporary
//! file is removed and FILE is left as it was.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A file being written that replaces `path` only on [`AtomicFile::commit`].
pub struct AtomicFile {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl AtomicFile {
    /// Starts writing `path`. The new file gets the mode of the file it replaces, else 0644
    /// (world-readable, as node_exporter's user must read it). Errors (with the path): the
    /// folder does not exist or is not writable, or `path` is a folder.
    pub fn create(path: &Path) -> io::Result<AtomicFile> {
        let with_path = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        if path.is_dir() {
            return Err(with_path(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a folder",
            )));
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            return Err(with_path(io::Error::new(
                io::ErrorKind::NotFound,
                format!("the folder {} does not exist", dir.display()),
            )));
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "output".into());
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(with_path)?;
        let mode = std::fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o644);
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(with_path)?;
        Ok(AtomicFile {
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// Flushes, fsyncs, renames over the target, and fsyncs the folder.
    pub fn commit(mut self) -> io::Result<()> {
        let path = self.path.clone();
        let with_path = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        self.tmp.flush().map_err(with_path)?;
        self.tmp.as_file().sync_all().map_err(with_path)?;
        self.tmp
            .persist(&self.path)
            .map_err(|e| with_path(e.error))?;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(with_path)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tmp.flush()
    }
}

/// A writer that drops ANSI escape sequences (the table's colours) on the way to `W`: the table
/// written to a file is plain text.
pub struct StripAnsi<W: Write> {
    inner: W,
    state: anstream::adapter::StripBytes,
}

impl<W: Write> StripAnsi<W> {
    pub fn new(inner: W) -> Self {
        StripAnsi {
            inner,
            state: anstream::adapter::StripBytes::new(),
        }
    }
}

impl<W: Write> Write for StripAnsi<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for chunk in self.state.strip_next(buf) {
            self.inner.write_all(chunk)?;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_on_commit_and_keeps_the_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("gpufleet.prom");
        std::fs::write(&p, "old\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old\n", "not yet");
        let names = |d: &Path| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let during = names(d.path());
        assert_eq!(during.len(), 2);
        assert!(during[0].starts_with(".gpufleet.prom.") && during[0].ends_with(".tmp"));
        f.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(names(d.path()), ["gpufleet.prom"]);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // Dropped without commit: the old file stays, the temporary one goes.
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(names(d.path()), ["gpufleet.prom"]);
        // A new file is world-readable; a missing folder or a folder as target is an error.
        let q = d.path().join("fresh.json");
        AtomicFile::create(&q).unwrap().commit().unwrap();
        assert_eq!(
            std::fs::metadata(&q).unwrap().permissions().mode() & 0o777,
            0o644
        );
        let e = AtomicFile::create(&d.path().join("nope/x")).err().unwrap();
        assert!(e.to_string().contains("nope/x"), "{e}");
        assert!(AtomicFile::create(d.path()).is_err());
    }

    #[test]
    fn strip_ansi_keeps_the_text() {
        let mut out = Vec::new();
        let mut w = StripAnsi::new(&mut out);
        w.write_all(b"\x1b[1mNODE\x1b[0m  \x1b[32mready").unwrap();
        w.write_all(b"\x1b[0m\n").unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "NODE  ready\n");
    }
}
