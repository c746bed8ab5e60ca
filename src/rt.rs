//! The async runtime of gpufleet's commands: how it is built, and how a run is stopped from
//! outside.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The most worker threads a runtime gets by default: a shared login node is not taken over.
pub const DEFAULT_MAX_WORKERS: usize = 8;

/// The worker threads asked for (`--workers`, `[ssh] workers`); 0: the default.
static WORKERS: AtomicUsize = AtomicUsize::new(0);

/// Sets the worker threads of the runtimes [`build`] makes from now on (`None`: the default,
/// [`default_workers`]).
pub fn set_workers(n: Option<usize>) {
    WORKERS.store(n.unwrap_or(0), Ordering::Relaxed);
}

/// The default worker threads: the CPUs this process may use (`available_parallelism`: the
/// affinity mask and the cgroup's CPU quota, as a container sees them), at most
/// [`DEFAULT_MAX_WORKERS`]; 1 when that cannot be read.
pub fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(DEFAULT_MAX_WORKERS)
}

/// The worker threads [`build`] gives a runtime: the ones set, else [`default_workers`].
pub fn workers() -> usize {
    match WORKERS.load(Ordering::Relaxed) {
        0 => default_workers(),
        n => n,
    }
}

/// The tokio runtime every command, the TUI and the simulator run on: [`workers`] worker
/// threads (a scan's CPU — key exchange, parsing, assessment — is spread over them; SSH
/// sessions are cheap tasks), timers and I/O enabled.
///
/// Errors: the runtime cannot be built (threads or the I/O driver cannot be created).
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers())
        .enable_all()
        .build()
}

/// Completes on SIGINT, SIGTERM or SIGHUP (whichever comes first); never completes when the
/// handlers cannot be installed. Used by `snapshot`'s scan, the local probe and `gpufleet sim`
/// (the TUI handles its own: Ctrl-C is a key there, see `runtime`).
pub async fn stop_requested() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}

/// File descriptors kept for everything but node connections (the terminal, files, the
/// runtime's own, the journal).
const FD_RESERVE: u64 = 64;

/// Raises this process's soft limit of open files (RLIMIT_NOFILE) to its hard limit, so a scan
/// can hold one connection per node of a large concurrency. Returns the soft limit now in force
/// (`None` when it cannot be read). Called by [`build`]'s users at start; harmless to repeat.
pub fn raise_open_files() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return Some(hard);
    }
    Some(soft)
}

/// The concurrency a scan can hold open at once within `open_files` (the soft limit): `asked`,
/// or lower with a message saying why (one connection per node in flight, [`FD_RESERVE`] kept).
pub fn fit_concurrency(asked: usize, open_files: Option<u64>) -> (usize, Option<String>) {
    let Some(limit) = open_files else {
        return (asked, None);
    };
    let room = usize::try_from(limit.saturating_sub(FD_RESERVE))
        .unwrap_or(usize::MAX)
        .max(1);
    if asked <= room {
        return (asked, None);
    }
    (
        room,
        Some(format!(
            "gpufleet: concurrency lowered from {asked} to {room}: this process may open {limit} files \
             (RLIMIT_NOFILE, hard limit; raise it with `ulimit -Hn` as root), {FD_RESERVE} kept for \
             other uses, one per node being probed"
        )),
    )
}

/// [`raise_open_files`], then [`fit_concurrency`] for `asked`; the message, if any, goes to
/// stderr. Returns the concurrency to use.
pub fn concurrency_for(asked: usize) -> usize {
    let (c, msg) = fit_concurrency(asked.max(1), raise_open_files());
    if let Some(m) = msg {
        eprintln!("{m}");
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime gets the worker threads set, and the default when none is.
    #[test]
    fn the_runtime_has_the_workers_asked_for() {
        set_workers(Some(3));
        assert_eq!(build().unwrap().metrics().num_workers(), 3);
        set_workers(None);
        assert_eq!(build().unwrap().metrics().num_workers(), default_workers());
        assert!((1..=DEFAULT_MAX_WORKERS).contains(&default_workers()));
    }

    #[test]
    fn concurrency_fits_the_open_files_limit() {
        assert_eq!(fit_concurrency(64, None), (64, None));
        assert_eq!(fit_concurrency(64, Some(20_000)), (64, None));
        let (c, msg) = fit_concurrency(1000, Some(1024));
        assert_eq!(c, 960);
        assert!(msg.unwrap().contains("lowered from 1000 to 960"));
        assert_eq!(fit_concurrency(10, Some(10)).0, 1);
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        use nix::sys::resource::{Resource, getrlimit};
        let now = raise_open_files().unwrap();
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!((now, soft), (hard, hard));
    }
}
