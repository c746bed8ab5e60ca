//! Standard output for the commands' own lines ([`outln!`](crate::outln)), which never panics:
//! a reader that went away (`gpufleet rollouts | head -1`, a closed pipe) ends the writing
//! quietly, and the command finishes with its own exit status — for `upgrade`, after its work
//! and its journal, whatever became of its stdout. (`println!` panics on a closed stdout: exit
//! 101 with a backtrace, the summary and status of a finished rollout lost.)

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to stdout failed: nothing more is written.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes one line to stdout; after a failed write (EPIPE: the reader is gone) nothing more.
pub fn line(args: std::fmt::Arguments<'_>) {
    put(|out| writeln!(out, "{args}"));
}

/// Writes `text` as it is (no line end added); as [`line`].
pub fn text(text: &str) {
    put(|out| out.write_all(text.as_bytes()));
}

/// Runs `write` on stdout and flushes, unless a write failed before; a failure closes it.
fn put(write: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<()>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if write(&mut out).and_then(|()| out.flush()).is_err() {
        CLOSED.store(true, Ordering::Relaxed);
    }
}

/// `println!` for the commands' output through [`line`]: never panics on a closed stdout.
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::cli::out::line(format_args!($($t)*))
    };
}
