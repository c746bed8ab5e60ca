//! The TUI at 10,000 simulated nodes streaming in (issue 12, item 5; issue "Interactive fleet
//! matrix"): key press → redrawn frame (target ≤ 50 ms), frame time (target ≤ 10 ms), live heap
//! bytes per node and peak RSS.
//!
//!     cargo bench --bench tui                      # 10,000 simulated nodes
//!     NODES=2000 cargo bench --bench tui           # another fleet size
//!     cargo bench --bench tui -- --synthetic       # the app and UI alone, no SSH (below)
//!
//! The default mode starts `gpufleet sim --nodes N` (the release binary, a child process: its
//! heap and RSS are not counted as the TUI's), then runs `gpufleet tui --read-only` on the
//! simulator's inventory in this process exactly as the command does — settings resolved from
//! the same command line ([`gpufleet::cli::TuiSession`]), the real fleet scan over SSH, the
//! real event loop ([`gpufleet::runtime::drive`]) — drawing into a 200x50 ratatui
//! `TestBackend` instead of a terminal. Once results stream in, a thread sends keys on the
//! input channel as the terminal reader does (moves, pages, sorts, the detail pane opened,
//! stepped and closed, a filter typed and cleared; one key at a time, 25 ms after the frame
//! that showed the last one) until at least 200 keys are done, the scan has ended and a round
//! of keys followed. Key → frame is measured from just before the key is queued to the end of
//! the first frame drawn after the app took it, with the CPU time the event loop's thread spent
//! meanwhile; keys pressed while the scan runs and after it ends are reported apart. Heap
//! bytes per node: the live heap (a counting allocator) once all N results are in, less the
//! live heap before the session was resolved, over N. Peak RSS: VmHWM of this process and of
//! the simulator.
//!
//! Not measured: the terminal's own output (escape sequences to a pty; `TestBackend` only
//! diffs cells). The simulator and the scan share the machine's cores with the TUI, as in
//! `gpufleet demo`: on a small shared machine the figures are noisy (bench/README.md).
//!
//! Measured (bench/README.md has every run; 2 shared vCPUs, load average 3 to 5): key → frame
//! while 10,000 results stream in, median 6 to 11 ms, p99 62 to 100 ms (the loop's own CPU per
//! key: median 6 ms, p99 23 to 28 ms; the rest is waiting for a core the simulator and the scan
//! share); after the scan ≤ 20 ms; frame median 3 to 4 ms while streaming. With the raw probe
//! output kept packed (session 4; a quiet machine, load 2): p99 37.8 ms, 14.3 KB of heap per
//! node (35 KB before), peak RSS 241 MiB (473 before).
//!
//! `--synthetic`: the former bench, no simulator — 10,000 clones of one real report (the H200
//! probe output) put into the app directly, then frames, keys with 100 results between two
//! presses, filter keystrokes and heap per node (without raw output) on a 200x50
//! `TestBackend`. Steadier, for changes to the app and UI code alone.

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
    app.laid_out(drawn);
}

fn synthetic() {
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

fn main() {
    if std::env::args().any(|a| a == "--synthetic") {
        synthetic();
    } else {
        simulated();
    }
}

/// What each frame the event loop draws tells the key thread.
#[derive(Clone, Copy)]
struct Note {
    keys: u64,
    at: Instant,
    running: bool,
    done: usize,
    /// CPU time of the event loop's thread so far.
    cpu: Duration,
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is valid for writes.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The load average over the last minute (`/proc/loadavg`).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string()
}

/// The keys of one round (a name for the table, the key), repeated; a round ends in the
/// matrix with no filter.
fn script() -> Vec<(&'static str, KeyEvent)> {
    let k = |c| KeyEvent::new(c, KeyModifiers::NONE);
    let ch = |c| k(KeyCode::Char(c));
    vec![
        ("move", ch('j')),
        ("move", ch('j')),
        ("move", ch('k')),
        ("page", k(KeyCode::PageDown)),
        ("page", k(KeyCode::PageDown)),
        ("page", k(KeyCode::PageUp)),
        ("sort", ch('s')),
        ("sort", ch('S')),
        ("move", ch('G')),
        ("move", ch('g')),
        ("detail", k(KeyCode::Enter)),
        ("detail", ch('n')),
        ("detail", ch('p')),
        ("detail", k(KeyCode::Esc)),
        ("filter", ch('/')),
        ("filter", ch('o')),
        ("filter", ch('p')),
        ("filter", ch('e')),
        ("filter", ch('n')),
        ("filter", k(KeyCode::Enter)),
        ("filter", k(KeyCode::Esc)),
    ]
}

const MIN_KEYS: usize = 200;

/// `VmHWM` of `/proc/PID/status`, in MiB.
fn peak_rss_mib(pid: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb / 1024.0
}

struct Stats {
    n: usize,
    median: Duration,
    p99: Duration,
    max: Duration,
}

fn stats(mut v: Vec<Duration>) -> Option<Stats> {
    if v.is_empty() {
        return None;
    }
    v.sort();
    Some(Stats {
        n: v.len(),
        median: v[v.len() / 2],
        p99: v[(v.len() * 99 / 100).min(v.len() - 1)],
        max: v[v.len() - 1],
    })
}

fn row(label: &str, v: Vec<Duration>) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    match stats(v) {
        Some(s) => println!(
            "{label:<34} {:>6} {:>9.2} {:>9.2} {:>9.2}",
            s.n,
            ms(s.median),
            ms(s.p99),
            ms(s.max)
        ),
        None => println!("{label:<34} {:>6}", 0),
    }
}

fn simulated() {
    use clap::{CommandFactory, FromArgMatches};
    use gpufleet::cli::{Cli, Command, Given, Settings, TuiSession};
    use std::io::BufRead;

    let nodes: usize = std::env::var("NODES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(NODES);
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("fleet.toml");
    let started = Instant::now();
    let mut sim = std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .arg("sim")
        .args(["--nodes", &nodes.to_string()])
        .arg("--write-inventory")
        .arg(&inventory)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start gpufleet sim");
    for line in std::io::BufReader::new(sim.stdout.take().unwrap()).lines() {
        let line = line.expect("gpufleet sim's output");
        if line.starts_with("ready") {
            break;
        }
    }
    let sim_ready = started.elapsed();

    // `gpufleet tui --read-only` on the simulator's files only, as `gpufleet demo` runs it.
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let argv = [
        "gpufleet".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "-i".as_ref(),
        inventory.as_os_str(),
        "--known-hosts".as_ref(),
        dir.path()
            .join("gpufleet_known_hosts")
            .into_os_string()
            .leak(),
        "--state-dir".as_ref(),
        dir.path().join("state").into_os_string().leak(),
        "--ssh-config".as_ref(),
        "none".as_ref(),
        "tui".as_ref(),
        "--read-only".as_ref(),
    ];
    let matches: clap::ArgMatches = Cli::command().try_get_matches_from(argv).unwrap();
    let given = Given::from_matches(&matches);
    let cli = Cli::from_arg_matches(&matches).unwrap();
    let settings = Settings::resolve(&cli, given).unwrap();
    let Some(Command::Tui(args)) = &cli.command else {
        unreachable!()
    };

    let before = LIVE.load(Ordering::Relaxed);
    let session = TuiSession::new(&settings, args).unwrap();
    let mut app = session.app;
    let rt = gpufleet::rt::build().unwrap();
    let mut term = Terminal::new(TestBackend::new(200, 50)).unwrap();

    let (notes, heard) = std::sync::mpsc::channel::<Note>();
    let mut keys_thread = None;
    let input = |tx: tokio::sync::mpsc::Sender<Msg>| {
        keys_thread = Some(std::thread::spawn(move || {
            let script = script();
            let mut last = heard.recv().unwrap();
            while last.done == 0 {
                last = heard.recv().unwrap();
            }
            // (kind, while streaming, key → frame, event loop CPU in between)
            let mut out: Vec<(&'static str, bool, Duration, Duration)> = Vec::new();
            let mut sent = 0u64;
            loop {
                let (kind, key) = script[out.len() % script.len()];
                let streaming = last.running;
                let t = Instant::now();
                tx.blocking_send(Msg::Key(key)).unwrap();
                sent += 1;
                let cpu_before = last.cpu;
                while last.keys < sent {
                    last = heard.recv().unwrap();
                }
                out.push((kind, streaming, last.at - t, last.cpu - cpu_before));
                // At least 200 keys, one round after the scan ended, and a whole last round.
                let after = out.iter().filter(|p| !p.1).count();
                if out.len() >= MIN_KEYS
                    && after >= script.len()
                    && out.len().is_multiple_of(script.len())
                {
                    break;
                }
                std::thread::sleep(Duration::from_millis(25));
                while let Ok(n) = heard.try_recv() {
                    last = n;
                }
            }
            let quit = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
            tx.blocking_send(Msg::Key(quit)).unwrap();
            out
        }));
    };
    let mut frames: Vec<(bool, Duration)> = Vec::new();
    let mut first_result = None;
    let mut all_in = None;
    let mut heap_all_in = 0;
    let mut failed = 0;
    let load_before = load();
    let scan_start = Instant::now();
    let on_frame = |app: &App, f: gpufleet::runtime::Frame| {
        let p = app.progress;
        let now = Instant::now();
        if p.done > 0 && first_result.is_none() {
            first_result = Some(now - scan_start);
        }
        if p.generation == 1 && !p.running && p.done == p.total && all_in.is_none() {
            all_in = Some(now - scan_start);
            heap_all_in = LIVE.load(Ordering::Relaxed);
            failed = p.failed;
        }
        frames.push((p.running, f.draw));
        let _ = notes.send(Note {
            keys: f.keys,
            at: now,
            running: p.running,
            done: p.done,
            cpu: thread_cpu(),
        });
    };
    rt.block_on(gpufleet::runtime::drive(
        &mut term,
        &mut app,
        &session.theme,
        session.target,
        session.upgrade,
        input,
        on_frame,
    ))
    .unwrap();
    let presses = keys_thread.unwrap().join().unwrap();
    let load_after = load();
    let tui_rss = peak_rss_mib("self");
    let sim_rss = peak_rss_mib(&sim.id().to_string());
    // SAFETY: signals our own child, still unreaped.
    unsafe { libc::kill(sim.id() as i32, libc::SIGTERM) };
    sim.wait().unwrap();

    println!(
        "gpufleet tui --read-only on `gpufleet sim --nodes {nodes}` (child process), 200x50 TestBackend"
    );
    println!(
        "simulator: ready after {:.1} s; load average {load_before} at the scan's start, {load_after} at the end ({} CPUs)",
        sim_ready.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "scan: first result after {:.2} s, all {nodes} in after {} ({failed} unreachable)",
        first_result.unwrap_or_default().as_secs_f64(),
        all_in.map_or("never".into(), |d| format!("{:.1} s", d.as_secs_f64()))
    );
    println!(
        "{:<34} {:>6} {:>9} {:>9} {:>9}",
        "", "n", "median ms", "p99 ms", "max ms"
    );
    let pick = |streaming: Option<bool>, kind: Option<&str>| -> Vec<Duration> {
        presses
            .iter()
            .filter(|(k, s, ..)| streaming.is_none_or(|x| x == *s) && kind.is_none_or(|x| x == *k))
            .map(|p| p.2)
            .collect()
    };
    let cpu = |streaming: bool| -> Vec<Duration> {
        presses
            .iter()
            .filter(|p| p.1 == streaming)
            .map(|p| p.3)
            .collect()
    };
    row("key → frame, while results stream", pick(Some(true), None));
    row("key → frame, after the scan", pick(Some(false), None));
    row("  its event loop CPU, streaming", cpu(true));
    row("  its event loop CPU, after", cpu(false));
    for kind in ["move", "page", "sort", "detail", "filter"] {
        row(&format!("  {kind} keys (both)"), pick(None, Some(kind)));
    }
    let fr = |streaming: bool| -> Vec<Duration> {
        frames
            .iter()
            .filter(|f| f.0 == streaming)
            .map(|f| f.1)
            .collect()
    };
    row("frame, while results stream", fr(true));
    row("frame, after the scan", fr(false));
    let per_node = heap_all_in.saturating_sub(before) / nodes;
    println!(
        "live heap once all {nodes} are in: {per_node} bytes per node ({:.1} MiB), reports and raw probe output kept",
        (heap_all_in.saturating_sub(before)) as f64 / 1048576.0
    );
    println!("peak RSS: TUI (this process) {tui_rss:.0} MiB, simulator {sim_rss:.0} MiB");
}
