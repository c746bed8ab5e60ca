//! TUI speed with 10,000 nodes in the model (issue "Interactive fleet matrix"): the time to draw
//! one frame (target ≤ 10 ms), the time from a key press to the redrawn frame while a scan
//! streams results in (target ≤ 50 ms), and the memory each node takes in the model.
//!
//!     cargo bench --bench tui

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpufleet::app::{App, Keymap, Msg, Row};
use gpufleet::model::{NodeReport, NodeStatus, Thresholds};
use gpufleet::probe::{RawRun, RunEnd};
use gpufleet::ui::{self, Theme};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Counts live heap bytes.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
}
#[global_allocator]
static ALLOC: Counting = Counting;

const NODES: usize = 10_000;

/// A real report (the H200's probe output) renamed, with a status spread over all statuses.
fn report(base: &NodeReport, i: usize) -> NodeReport {
    let mut r = base.clone();
    r.name = format!("gpu{i:05}.rack{:02}.dc1", i % 40);
    r.status = NodeStatus::ALL[i % NodeStatus::ALL.len()];
    r
}

fn median(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[v.len() * 99 / 100])
}

fn draw(term: &mut Terminal<TestBackend>, app: &mut App, theme: &Theme) {
    app.ensure_view();
    let mut drawn = ui::Drawn::default();
    term.draw(|f| drawn = ui::draw(f, app, theme)).unwrap();
    app.page = drawn.page;
    app.offset = drawn.offset;
}

fn main() {
    let raw = RawRun {
        boundary: "gpufleet-RAW".into(),
        output: include_bytes!("../docs/examples/h200-probe-raw.txt").to_vec(),
        end: RunEnd::Completed,
        duration: Duration::from_millis(100),
        exit: None,
    };
    let base = gpufleet::probe::report(
        Some("x".into()),
        &raw,
        &Thresholds::default(),
        "2026-11-30T10:00:00Z".into(),
    );
    let theme = Theme::default();

    // Memory per node: rows with their reports and cached cells.
    let before = LIVE.load(Ordering::Relaxed);
    let rows: Vec<Row> = (0..NODES)
        .map(|i| Row::new(report(&base, i).name))
        .collect();
    let mut app = App::new(rows, Keymap::default(), false, "bench".into());
    let names: Vec<String> = app.rows.iter().map(|r| r.name.clone()).collect();
    app.update(Msg::ScanStarted {
        generation: 1,
        names,
    });
    for i in 0..NODES {
        app.update(Msg::NodeDone {
            generation: 1,
            report: Box::new(report(&base, i)),
            raw: None,
        });
    }
    app.ensure_view();
    let per_node = (LIVE.load(Ordering::Relaxed) - before) / NODES;

    // One frame, 10,000 nodes in the model.
    let mut term = Terminal::new(TestBackend::new(200, 50)).unwrap();
    let mut frames = Vec::new();
    for i in 0..200 {
        app.selected = (i * 37) % NODES;
        let t = Instant::now();
        draw(&mut term, &mut app, &theme);
        frames.push(t.elapsed());
    }
    let (frame_med, frame_p99) = median(frames);

    // Key press → state updated → frame drawn, while a rescan streams results in (100 results
    // arrive between key presses, as a burst would between two frames).
    let names: Vec<String> = app.rows.iter().map(|r| r.name.clone()).collect();
    app.update(Msg::ScanStarted {
        generation: 2,
        names,
    });
    let keys = [
        KeyCode::Char('j'),
        KeyCode::Char('s'),
        KeyCode::Char('k'),
        KeyCode::Char('S'),
        KeyCode::PageDown,
    ];
    let mut presses = Vec::new();
    let mut next = 0;
    for i in 0..100 {
        for _ in 0..100 {
            app.update(Msg::NodeDone {
                generation: 2,
                report: Box::new(report(&base, next % NODES)),
                raw: None,
            });
            next += 7;
        }
        let t = Instant::now();
        app.update(Msg::Key(KeyEvent::new(
            keys[i % keys.len()],
            KeyModifiers::NONE,
        )));
        draw(&mut term, &mut app, &theme);
        presses.push(t.elapsed());
    }
    let (key_med, key_p99) = median(presses);

    // Filter typed over 10,000 nodes.
    app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('/'),
        KeyModifiers::NONE,
    )));
    let mut typing = Vec::new();
    for c in "status:migrate rack07".chars() {
        let t = Instant::now();
        app.update(Msg::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )));
        draw(&mut term, &mut app, &theme);
        typing.push(t.elapsed());
    }
    let (type_med, type_p99) = median(typing);

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("nodes in the model: {NODES}; terminal 200x50");
    println!(
        "frame:                 median {:.2} ms, p99 {:.2} ms (target <= 10 ms)",
        ms(frame_med),
        ms(frame_p99)
    );
    println!(
        "key press while a scan streams (100 results per press): median {:.2} ms, p99 {:.2} ms (target <= 50 ms)",
        ms(key_med),
        ms(key_p99)
    );
    println!(
        "filter keystroke:      median {:.2} ms, p99 {:.2} ms",
        ms(type_med),
        ms(type_p99)
    );
    println!(
        "memory per node in the model: {per_node} bytes ({:.1} MiB for {NODES})",
        (per_node * NODES) as f64 / 1048576.0
    );
}
