//! The controller on synthetic latencies and errors; the gate on a real runtime.

use super::*;

const MS: Duration = Duration::from_millis(1);

/// Feeds `n` handshakes of `d` each, the window saturated; returns the changes.
fn feed(c: &mut Controller, n: usize, d: Duration) -> Vec<(Why, usize)> {
    let mut out = Vec::new();
    for _ in 0..n {
        c.saturated();
        out.extend(c.observe(Outcome::Handshake(d)));
    }
    out
}

#[test]
fn a_flat_fleet_widens_by_a_quarter_a_window_up_to_the_ceiling() {
    let mut c = Controller::new(256, 1000);
    // The first window (128 handshakes) sets the fastest median and widens.
    let ch = feed(&mut c, 128, 50 * MS);
    assert_eq!(ch, vec![(Why::Flat, 320)]);
    let ch = feed(&mut c, 2000, 52 * MS);
    assert_eq!(c.limit(), 1000, "{ch:?}");
    assert!(ch.iter().all(|(w, _)| *w == Why::Flat), "{ch:?}");
    assert_eq!(ch.last(), Some(&(Why::Flat, 1000)));
    assert_eq!(c.stats.widest, 1000);
}

#[test]
fn no_widening_when_the_limit_was_never_reached() {
    let mut c = Controller::new(256, 1000);
    for _ in 0..1000 {
        assert_eq!(c.observe(Outcome::Handshake(50 * MS)), None);
    }
    assert_eq!(c.limit(), 256);
}

#[test]
fn slower_handshakes_undo_widening_but_never_go_below_the_start() {
    let mut c = Controller::new(64, 1000);
    feed(&mut c, 300, 10 * MS);
    let wide = c.limit();
    assert!(wide > 64, "{wide}");
    // Handshakes 4× slower: every window narrows by a quarter, down to the start.
    let ch = feed(&mut c, 2000, 40 * MS);
    assert!(
        !ch.is_empty() && ch.iter().all(|(w, _)| *w == Why::Slower),
        "{ch:?}"
    );
    assert_eq!(c.limit(), 64);
    assert!(c.stats.narrowed_slower > 0);
    // Within 1.5× + 5 ms of the fastest is flat: 14 ms after 10 ms widens again.
    let ch = feed(&mut c, 32, 14 * MS);
    assert_eq!(ch, vec![(Why::Flat, 80)]);
}

#[test]
fn refusals_narrow_a_widened_scan_and_a_dead_node_now_and_then_does_not() {
    let mut c = Controller::new(32, 1000);
    feed(&mut c, 200, 10 * MS);
    let wide = c.limit();
    // 1 connection in 25 refused (4 %): below the 5 % share, still widening.
    let mut ch = Vec::new();
    for i in 0..200 {
        c.saturated();
        let o = if i % 25 == 0 {
            Outcome::Refused
        } else {
            Outcome::Handshake(10 * MS)
        };
        ch.extend(c.observe(o));
    }
    assert!(ch.iter().all(|(w, _)| *w == Why::Flat), "{ch:?}");
    assert!(c.limit() > wide);
    // 1 in 5 refused: narrows a quarter a window, to the start and not below.
    for i in 0..3000 {
        c.saturated();
        let o = if i % 5 == 0 {
            Outcome::Refused
        } else {
            Outcome::Handshake(10 * MS)
        };
        c.observe(o);
    }
    assert_eq!(c.limit(), 32);
    assert!(c.stats.narrowed_refused > 0);
    // Authentication or host-key failures say nothing about load.
    for _ in 0..200 {
        c.saturated();
        c.observe(Outcome::Other);
    }
    assert_eq!(c.limit(), 32);
}

#[test]
fn out_of_files_narrows_below_the_start_at_once() {
    let mut c = Controller::new(256, 4096);
    assert_eq!(c.files_exhausted(200), Some(150));
    assert_eq!(c.limit(), 150);
    // Already at three quarters of those in flight: no further drop.
    assert_eq!(c.files_exhausted(200), None);
    assert_eq!(c.files_exhausted(1), Some(1));
    assert_eq!(c.files_exhausted(1), None);
    assert_eq!(c.stats.narrowed_files, 2);
    assert_eq!(c.stats.narrowest, 1);
}

#[test]
fn an_explicit_concurrency_is_the_cap_and_the_open_files_room_bounds_both() {
    let lim = |p: &Arc<Pace>| p.stats().0;
    // Explicit 64: starts there, can never pass it.
    let p = Pace::new(64, true, 10_000);
    assert_eq!(lim(&p), 64);
    assert_eq!(p.lock().ctrl.ceiling, 64);
    // Explicit 2000: starts at the default and may widen to 2000.
    let p = Pace::new(2000, true, 10_000);
    assert_eq!((lim(&p), p.lock().ctrl.ceiling), (DEFAULT_START, 2000));
    // The default: up to DEFAULT_CEILING, or the open-files room when smaller.
    let p = Pace::new(DEFAULT_START, false, 10_000);
    assert_eq!(p.lock().ctrl.ceiling, DEFAULT_CEILING);
    let p = Pace::new(DEFAULT_START, false, 100);
    assert_eq!((lim(&p), p.lock().ctrl.ceiling), (100, 100));
    assert_eq!(p.summary(), None);
}

/// The gate holds at most its limit in flight and lets the next one in when a permit is dropped.
#[test]
fn the_gate_admits_up_to_its_limit() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let p = Pace::new(2, true, 100);
        let a = p.acquire().await;
        let _b = p.acquire().await;
        let third = p.acquire();
        let mut third = std::pin::pin!(third);
        // Not ready while two are held.
        assert!(futures_poll_once(third.as_mut()).await.is_none());
        drop(a);
        let _c = third.await;
        assert_eq!(p.lock().in_flight, 2);
        // Narrowed by file pressure with 2 in flight: 1 may be in flight now.
        p.files_exhausted();
        assert_eq!(p.stats().0, 1);
        assert!(p.summary().unwrap().contains("narrowest 1"));
    });
}

/// Polls `f` once: its output if it was ready.
async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[test]
fn after_running_out_of_files_refusals_do_not_raise_and_widening_stops_at_what_was_open() {
    let mut c = Controller::new(256, 4096);
    assert_eq!(c.files_exhausted(100), Some(75));
    // Refusals narrow toward the start, which is above: the limit stays.
    for _ in 0..200 {
        c.saturated();
        c.observe(Outcome::Refused);
    }
    assert_eq!(c.limit(), 75);
    // Flat windows widen again, up to the 99 that held a descriptor (of the 100 in flight, one
    // failed), not to the start.
    feed(&mut c, 1000, 10 * MS);
    assert_eq!(c.limit(), 99);
}
