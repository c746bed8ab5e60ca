//! The async runtime of gpufleet's commands: how it is built, and how a run is stopped from
//! outside.

/// The tokio runtime every command and the TUI run on: 2 worker threads (the work is I/O bound;
/// SSH sessions are cheap tasks), timers and I/O enabled.
///
/// Errors: the runtime cannot be built (threads or the I/O driver cannot be created).
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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
