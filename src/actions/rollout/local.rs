//! The state folder's lock: one rollout at a time per state folder.

use std::path::{Path, PathBuf};

use super::operator;
use crate::probe::scan::now_rfc3339;

/// The local lock: one rollout at a time from a state folder, held while this lives. Its file
/// says who holds it (operator, pid, since, and the rollout once known).
pub struct LocalLock {
    file: std::fs::File,
    pub path: PathBuf,
    since: String,
}

/// The local lock was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalLockError {
    Io(String),
    /// Another process holds it; what its file says.
    Held {
        path: PathBuf,
        holder: String,
    },
}

impl std::fmt::Display for LocalLockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LocalLockError::Io(e) => f.write_str(e),
            LocalLockError::Held { path, holder } => write!(
                f,
                "another gpufleet rollout holds {} ({holder}); wait for it, or check `gpufleet journal`",
                path.display()
            ),
        }
    }
}

impl std::error::Error for LocalLockError {}

impl LocalLock {
    /// Writes who holds the lock, and `rollout` (`planning` before one is planned).
    pub fn note(&mut self, rollout: &str) {
        use std::io::{Seek, Write};
        let text = format!(
            "rollout {rollout}, operator {}, since {}\n",
            operator(),
            self.since
        );
        let _ = self.file.set_len(0);
        let _ = self.file.rewind();
        let _ = self.file.write_all(text.as_bytes());
        let _ = self.file.sync_data();
    }
}

/// Who holds the local lock of `state_dir` now (what its file says), without taking it;
/// `None` when nobody does.
pub fn local_holder(state_dir: &Path) -> Option<String> {
    let path = state_dir.join("rollout.lock");
    let file = std::fs::File::open(&path).ok()?;
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            None
        }
        Err(_) => Some(
            crate::model::text::terminal_safe(
                std::fs::read_to_string(&path).unwrap_or_default().trim(),
            )
            .into_owned(),
        ),
    }
}

/// Takes the local lock of `state_dir` without waiting: refused, with who holds it, while
/// another process holds it.
pub fn lock_local(state_dir: &Path) -> Result<LocalLock, LocalLockError> {
    std::fs::create_dir_all(state_dir)
        .map_err(|e| LocalLockError::Io(format!("{}: {e}", state_dir.display())))?;
    let path = state_dir.join("rollout.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| LocalLockError::Io(format!("{}: {e}", path.display())))?;
    if file.try_lock().is_err() {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let holder = match text.trim() {
            "" => "who holds it is not written down".to_string(),
            t => crate::model::text::terminal_safe(t).into_owned(),
        };
        return Err(LocalLockError::Held { path, holder });
    }
    let mut lock = LocalLock {
        file,
        path,
        since: now_rfc3339(),
    };
    lock.note("planning");
    Ok(lock)
}
