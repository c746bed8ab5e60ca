//! Adaptive concurrency of a fleet scan (docs/operators.md, "Scale"): how many nodes are probed
//! at once. The scan starts at [`DEFAULT_START`] (or the cap, when lower), widens while the
//! connect + SSH handshake latency of completed handshakes stays flat, narrows when that latency
//! rises or connections are refused / time out, and narrows at once on file-descriptor pressure
//! (EMFILE/ENFILE, or open files near the soft limit). It never goes above its cap: an explicit
//! `--concurrency` / `[ssh] concurrency` (a fixed cap), else [`DEFAULT_CEILING`]; both within the
//! open-files limit ([`crate::rt::fit_concurrency`]).
//!
//! [`Controller`] is the decision (no clock, no I/O: unit-tested on synthetic latencies);
//! [`Pace`] is the gate the scan's loop takes a permit from, fed per completed handshake through
//! a task-local ([`observe`]) by `probe::ssh`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

/// Where a scan without an explicit `--concurrency` starts (the fixed default before the scan
/// adapted; `SshSettings::default`'s).
pub const DEFAULT_START: usize = 256;

/// How wide a scan without an explicit `--concurrency` may go (open files permitting).
pub const DEFAULT_CEILING: usize = 4096;

/// A window's median handshake may be this much above the fastest window's (×, plus
/// [`FLAT_SLACK`]) and still count as flat.
const FLAT_FACTOR: f64 = 1.5;
const FLAT_SLACK: Duration = Duration::from_millis(5);

/// A window with more than this share of refused / timed-out connections narrows.
const ERROR_SHARE: f64 = 0.05;

/// How one node's connection ended, as the controller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// TCP connect + SSH key exchange + authentication completed in this time.
    Handshake(Duration),
    /// The connection was refused, reset or timed out (`ssh-refused`, `ssh-timeout`): may be
    /// load (a listen queue full, sshd's MaxStartups), may be a dead node.
    Refused,
    /// Ended otherwise (host key, authentication, name resolution): says nothing about load.
    Other,
}

/// Why the limit changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A saturated window's median handshake stayed within [`FLAT_FACTOR`] of the fastest.
    Flat,
    /// A window's median handshake rose above it.
    Slower,
    /// More than [`ERROR_SHARE`] of a window's connections were refused or timed out.
    Refused,
    /// Out of file descriptors (EMFILE/ENFILE), or open files near the soft limit.
    Files,
}

/// The decision: the limit, moved once per window of completed connections (half the limit,
/// at least 32). Latency and refusals only undo widening (never below the start: a fleet with
/// dead or slow nodes is scanned at least as wide as without adapting); file-descriptor
/// pressure narrows below it, down to 1.
#[derive(Debug, Clone)]
pub struct Controller {
    limit: usize,
    start: usize,
    ceiling: usize,
    /// The fastest window median seen.
    fastest: Option<Duration>,
    window: Vec<Duration>,
    refused: usize,
    others: usize,
    /// Whether every permit was in use at some point of this window (only then does a wider
    /// limit have anything to gain).
    saturated: bool,
    pub stats: Stats,
}

/// What a scan's concurrency did, for the line at its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub start: usize,
    pub widest: usize,
    pub narrowest: usize,
    pub widened: u32,
    pub narrowed_slower: u32,
    pub narrowed_refused: u32,
    pub narrowed_files: u32,
    /// Connections retried after EMFILE/ENFILE (the node was not failed for it).
    pub fd_retries: u32,
}

impl Controller {
    /// A controller starting at `start` (at most `ceiling`, at least 1) that never passes
    /// `ceiling`.
    pub fn new(start: usize, ceiling: usize) -> Self {
        let ceiling = ceiling.max(1);
        let start = start.clamp(1, ceiling);
        Controller {
            limit: start,
            start,
            ceiling,
            fastest: None,
            window: Vec::new(),
            refused: 0,
            others: 0,
            saturated: false,
            stats: Stats {
                start,
                widest: start,
                narrowest: start,
                ..Stats::default()
            },
        }
    }

    /// Nodes that may be in flight now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Every permit is in use (the scan waits on the limit).
    pub fn saturated(&mut self) {
        self.saturated = true;
    }

    fn window_len(&self) -> usize {
        (self.limit / 2).max(32)
    }

    fn set(&mut self, limit: usize) {
        self.limit = limit;
        self.stats.widest = self.stats.widest.max(limit);
        self.stats.narrowest = self.stats.narrowest.min(limit);
    }

    /// A quarter less than `was`, not below the start (nor above `was`: a limit already
    /// below the start, for open files, stays).
    fn narrower(&self, was: usize) -> usize {
        (was * 3 / 4).max(self.start).min(was)
    }

    /// One connection ended; at a window's end, the limit may move. Returns the change.
    pub fn observe(&mut self, o: Outcome) -> Option<(Why, usize)> {
        match o {
            Outcome::Handshake(d) => self.window.push(d),
            Outcome::Refused => self.refused += 1,
            Outcome::Other => self.others += 1,
        }
        let seen = self.window.len() + self.refused + self.others;
        if seen < self.window_len() {
            return None;
        }
        let refused_share = self.refused as f64 / seen as f64;
        let median = (!self.window.is_empty()).then(|| {
            let mid = self.window.len() / 2;
            *self.window.select_nth_unstable(mid).1
        });
        let saturated = self.saturated;
        self.window.clear();
        (self.refused, self.others, self.saturated) = (0, 0, false);
        let was = self.limit;
        let why = if refused_share > ERROR_SHARE {
            self.set(self.narrower(was));
            self.stats.narrowed_refused += u32::from(self.limit < was);
            Why::Refused
        } else {
            let m = median?;
            let fastest = *self.fastest.get_or_insert(m);
            self.fastest = Some(fastest.min(m));
            if m > fastest.mul_f64(FLAT_FACTOR) + FLAT_SLACK {
                self.set(self.narrower(was));
                self.stats.narrowed_slower += u32::from(self.limit < was);
                Why::Slower
            } else if saturated {
                self.set(self.ceiling.min(was + (was / 4).max(1)));
                self.stats.widened += u32::from(self.limit > was);
                Why::Flat
            } else {
                return None;
            }
        };
        (self.limit != was).then_some((why, self.limit))
    }

    /// Out of file descriptors with `in_flight` connections open: the limit drops to three
    /// quarters of them (at least 1) at once, below the start if need be, and the ceiling to
    /// `in_flight` (widening may come back to it, not past it). Returns the new limit when it
    /// moved.
    pub fn files_exhausted(&mut self, in_flight: usize) -> Option<usize> {
        // What was open when it ran out is as wide as this process can go for now.
        // (`in_flight` counts the connection that failed.)
        self.ceiling = self.ceiling.min(in_flight.saturating_sub(1).max(1));
        let want = (in_flight * 3 / 4).max(1);
        if want >= self.limit {
            return None;
        }
        self.set(want);
        self.stats.narrowed_files += 1;
        Some(want)
    }
}

/// The gate of one scan: [`Pace::acquire`] waits until fewer than the controller's limit are in
/// flight; a [`Permit`] gives its place back when dropped.
pub struct Pace {
    inner: Mutex<Inner>,
    freed: Notify,
}

struct Inner {
    ctrl: Controller,
    in_flight: usize,
}

/// One node's place in the scan.
pub struct Permit(Arc<Pace>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.lock().in_flight -= 1;
        self.0.freed.notify_one();
    }
}

impl Pace {
    /// A gate for a scan asked for `asked` (the settings' concurrency), `fixed` when it was
    /// explicit (then `asked` is the cap; else [`DEFAULT_CEILING`] is), both within
    /// `open_files_room` (what [`crate::rt::concurrency_for`] allows).
    pub fn new(asked: usize, fixed: bool, open_files_room: usize) -> Arc<Self> {
        let cap = if fixed { asked } else { DEFAULT_CEILING };
        let cap = cap.min(open_files_room).max(1);
        let start = if fixed {
            asked.min(DEFAULT_START)
        } else {
            asked
        };
        Arc::new(Pace {
            inner: Mutex::new(Inner {
                ctrl: Controller::new(start, cap),
                in_flight: 0,
            }),
            freed: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a place under the limit (one caller at a time: the scan's loop).
    pub async fn acquire(self: &Arc<Self>) -> Permit {
        loop {
            {
                let mut g = self.lock();
                if g.in_flight < g.ctrl.limit() {
                    g.in_flight += 1;
                    if g.in_flight == g.ctrl.limit() {
                        g.ctrl.saturated();
                    }
                    return Permit(self.clone());
                }
                g.ctrl.saturated();
            }
            self.freed.notified().await;
        }
    }

    /// One connection ended (see [`Outcome`]).
    pub fn observe(&self, o: Outcome) {
        self.lock().ctrl.observe(o);
    }

    /// A connection could not be opened for want of file descriptors: narrows, and the caller
    /// retries once a place is given back (see [`wait_for_files`]).
    pub fn files_exhausted(&self) {
        let mut g = self.lock();
        let n = g.in_flight;
        g.ctrl.files_exhausted(n);
        g.ctrl.stats.fd_retries += 1;
    }

    /// The limit now and what it did so far.
    pub fn stats(&self) -> (usize, Stats) {
        let g = self.lock();
        (g.ctrl.limit(), g.ctrl.stats.clone())
    }

    /// One line for the scan's end when the concurrency moved from its start (`None` when it
    /// stayed there).
    pub fn summary(&self) -> Option<String> {
        let (now, s) = self.stats();
        if s.widest == s.start && s.narrowest == s.start && s.fd_retries == 0 {
            return None;
        }
        Some(format!(
            "concurrency adapted: started at {}, widest {}, narrowest {}, ended at {now} \
             ({} widened on flat handshakes; narrowed {} on slower handshakes, {} on refused or \
             timed-out connections, {} on open files; {} connections retried after EMFILE/ENFILE)",
            s.start,
            s.widest,
            s.narrowest,
            s.widened,
            s.narrowed_slower,
            s.narrowed_refused,
            s.narrowed_files,
            s.fd_retries
        ))
    }
}

tokio::task_local! {
    /// The scan's gate, for the node tasks it started ([`Pace::scope`]).
    static PACE: Arc<Pace>;
}

impl Pace {
    /// Runs `fut` with this gate as the current task's ([`observe`] and [`files_exhausted`]
    /// reach it).
    pub async fn scope<F: std::future::Future>(self: Arc<Self>, fut: F) -> F::Output {
        PACE.scope(self, fut).await
    }
}

/// The current task's gate, if it runs under a scan (to carry into a task it spawns).
pub fn current() -> Option<Arc<Pace>> {
    PACE.try_with(Arc::clone).ok()
}

/// Tells the current scan's gate, if any, how a connection ended.
pub fn observe(o: Outcome) {
    let _ = PACE.try_with(|p| p.observe(o));
}

/// Whether `e` is EMFILE or ENFILE (this process or the system is out of file descriptors).
pub fn is_out_of_files(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::EMFILE) | Some(nix::libc::ENFILE)
    )
}

/// Out of file descriptors under a scan: narrows its gate and waits `backoff` (doubled by the
/// caller on each retry, within its connect deadline) for connections to end. Returns `false` outside a scan (the
/// caller then fails as before).
pub async fn wait_for_files(backoff: Duration) -> bool {
    let Some(p) = current() else {
        return false;
    };
    p.files_exhausted();
    tokio::time::sleep(backoff).await;
    true
}

#[cfg(test)]
#[path = "pace_tests.rs"]
mod tests;
