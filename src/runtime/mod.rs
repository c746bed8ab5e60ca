//! The TUI runtime: owns the terminal, the input thread, scan tasks and their channel. It feeds
//! messages to [`App::update`], carries out the effects, and draws. The terminal is restored on
//! every exit path: quit, Ctrl-C (a key in raw mode), SIGTERM, SIGHUP, and panics (ratatui's
//! panic hook, plus turning mouse capture off first).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use ratatui::crossterm::execute;
use tokio::sync::mpsc;

use crate::app::{App, Effect, ExportFormat, Msg};
use crate::fleet::scan::{Event as ScanEvent, ScanError, Source};
use crate::probe::scan::now_rfc3339;
use crate::ui::{self, Theme};

mod rollout;

/// What the TUI scans ([`crate::fleet::scan::Source`]), shared by its scans.
pub type Target = Arc<Source>;

/// What the TUI needs to upgrade nodes (fleet mode only): the rollout use case's context.
pub type UpgradeCtx = crate::fleet::rollout::Rollouts;

/// Runs scan `generation` over `names` of `target`, sending progress on `tx`. Aborting the
/// returned task aborts every node probe in it.
fn spawn_scan(
    target: Target,
    generation: u64,
    names: Vec<String>,
    tx: mpsc::Sender<Msg>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _ = tx
            .send(Msg::ScanStarted {
                generation,
                names: names.clone(),
            })
            .await;
        let wanted: std::collections::HashSet<String> = names.into_iter().collect();
        let on_tx = tx.clone();
        // Called in each node's task: the raw output is packed there, on the workers.
        let on = move |ev: ScanEvent| {
            let tx = on_tx.clone();
            async move {
                let msg = match ev {
                    ScanEvent::Running { name, .. } => Msg::NodeRunning { generation, name },
                    ScanEvent::Done { report, raw, .. } => Msg::NodeDone {
                        generation,
                        report,
                        raw: raw.map(|run| Arc::new(crate::app::RawOutput::of(&run))),
                    },
                    ScanEvent::Warning(w) => Msg::Notice(w),
                };
                let _ = tx.send(msg).await;
            }
        };
        let ended = target.run(Some(&wanted), on, std::future::pending()).await;
        let failed = match ended {
            Ok(()) | Err(ScanError::Interrupted) => None,
            Err(ScanError::LocalProbe(e)) => {
                let name = target.names().remove(0);
                Some(Msg::NodeDone {
                    generation,
                    report: Box::new(crate::model::NodeReport::unreachable(
                        name,
                        crate::model::Code::ProbeOutputInvalid,
                        format!("cannot start sh: {e}"),
                        Vec::new(),
                        now_rfc3339(),
                        0,
                    )),
                    raw: None,
                })
            }
            Err(ScanError::Files(e)) => Some(Msg::Notice(format!(
                "cannot read the snapshots again: {e}; the reports shown are those read before"
            ))),
        };
        if let Some(msg) = failed {
            let _ = tx.send(msg).await;
        }
        let _ = tx.send(Msg::ScanFinished { generation }).await;
    })
}

fn export(format: ExportFormat, reports: Vec<crate::model::NodeReport>) -> Result<String, String> {
    export_in(Path::new(""), format, reports)
}

/// Writes `reports` to `dir/gpufleet-<UTC time>.<json|csv>` (`dir` empty: the current folder)
/// with the same writers as `gpufleet snapshot`, so the CSV is neutralized and escaped as there;
/// returns the file's path.
fn export_in(
    dir: &Path,
    format: ExportFormat,
    reports: Vec<crate::model::NodeReport>,
) -> Result<String, String> {
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%d-%H%M%SZ")
        .to_string();
    let ext = match format {
        ExportFormat::Json => "json",
        ExportFormat::Csv => "csv",
    };
    // Never overwrite an earlier export (two in the same second get -2, -3, …).
    let mut path = dir.join(format!("gpufleet-{stamp}.{ext}"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("gpufleet-{stamp}-{n}.{ext}"));
        n += 1;
    }
    let file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let out: Box<dyn Write> = Box::new(std::io::BufWriter::new(file));
    let fmt = match format {
        ExportFormat::Json => crate::snapshot::Format::Json,
        ExportFormat::Csv => crate::snapshot::Format::Csv,
    };
    let mut sink = crate::snapshot::sink(fmt, out);
    crate::snapshot::write_all(&mut *sink, now_rfc3339(), reports).map_err(|e| e.to_string())?;
    let shown = std::env::current_dir()
        .map(|d| d.join(&path))
        .unwrap_or(path);
    Ok(shown.display().to_string())
}

/// Runs the TUI until the user quits or a signal ends it.
pub fn run(
    mut app: App,
    theme: Theme,
    target: Target,
    upgrade: Option<UpgradeCtx>,
) -> anyhow::Result<()> {
    let rt = crate::rt::build()?;
    let mut terminal = ratatui::try_init().map_err(|e| {
        anyhow::anyhow!("cannot start the TUI on this terminal: {e} (try `gpufleet snapshot`)")
    })?;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(std::io::stdout(), DisableMouseCapture);
        hook(info);
    }));
    let _ = execute!(std::io::stdout(), EnableMouseCapture);
    let result = rt.block_on(drive(
        &mut terminal,
        &mut app,
        &theme,
        target,
        upgrade,
        read_terminal,
        |_, _| {},
    ));
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    // Not `ratatui::restore()`: it `eprintln!`s its error, which panics when the terminal is
    // gone (a closed window), and its panic hook would then panic again and abort.
    let _ = ratatui::try_restore();
    // The TUI's panic hooks restore a terminal that is not ours any more: back to the default.
    drop(std::panic::take_hook());
    result
}

/// The terminal's input: a thread that reads key presses, mouse events and resizes and sends
/// them on `tx` until the event loop is gone.
fn read_terminal(tx: mpsc::Sender<Msg>) {
    std::thread::spawn(move || {
        while let Ok(ev) = event::read() {
            let msg = match ev {
                Event::Key(k) if k.kind == event::KeyEventKind::Press => Msg::Key(k),
                Event::Mouse(m) => Msg::Mouse(m),
                Event::Resize(w, h) => Msg::Resize(w, h),
                _ => continue,
            };
            if tx.blocking_send(msg).is_err() {
                break;
            }
        }
    });
}

/// One frame the event loop drew, as [`drive`] tells its `on_frame`.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    /// Key messages the app had been given when this frame was drawn, counted from the start
    /// of the loop.
    pub keys: u64,
    /// The time the frame took: building it from the app ([`ui::draw`]) and writing it to the
    /// terminal's backend.
    pub draw: Duration,
}

/// The TUI's event loop on any ratatui backend, until the app quits or SIGTERM / SIGHUP: it
/// scans `target` (a first scan at once), feeds scan results, input and ticks to
/// [`App::update`], carries out the effects, and draws a frame after each burst of messages.
/// `input` is called once with the sender input messages (keys, mouse, resize) go on — the
/// real TUI reads the terminal ([`run`]); `benches/tui.rs` sends keys itself — and `on_frame`
/// after each frame drawn, with the app as drawn.
///
/// Errors: the backend cannot draw; a signal handler cannot be installed.
pub async fn drive<B: ratatui::backend::Backend>(
    terminal: &mut ratatui::Terminal<B>,
    app: &mut App,
    theme: &Theme,
    target: Target,
    upgrade: Option<UpgradeCtx>,
    input: impl FnOnce(mpsc::Sender<Msg>),
    mut on_frame: impl FnMut(&App, Frame),
) -> anyhow::Result<()>
where
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let upgrade = upgrade.map(Arc::new);
    let (tx, mut rx) = mpsc::channel::<Msg>(4096);
    // Input has its own channel, read first: a key never queues behind thousands of results.
    let (input_tx, mut input_rx) = mpsc::channel::<Msg>(256);
    input(input_tx);
    let mut keys = 0u64;
    // Something changed since the last frame; it is to be drawn at once (input, ticks,
    // effects), not only when the frame gap has passed (results alone).
    let (mut undrawn, mut draw_now) = (true, true);
    let mut last_draw = Instant::now();
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut scan_task: Option<tokio::task::JoinHandle<()>> = None;
    let mut last_scan_end: Option<Instant> = None;
    let mut pending = vec![Effect::Scan {
        generation: app.progress.generation + 1,
        names: None,
    }];
    loop {
        if !pending.is_empty() {
            (undrawn, draw_now) = (true, true);
        }
        for effect in std::mem::take(&mut pending) {
            match effect {
                Effect::Quit => {
                    if let Some(t) = scan_task.take() {
                        t.abort();
                    }
                    return Ok(());
                }
                Effect::Scan { generation, names } => {
                    if let Some(t) = scan_task.take() {
                        t.abort();
                    }
                    let names = names.unwrap_or_else(|| target.names());
                    scan_task = Some(spawn_scan(target.clone(), generation, names, tx.clone()));
                }
                Effect::Cancel => {
                    if let Some(t) = scan_task.take() {
                        t.abort();
                    }
                    last_scan_end = Some(Instant::now());
                }
                Effect::Export { format, reports } => {
                    pending.extend(app.update(Msg::Exported(export(format, reports))));
                }
                Effect::PlanUpgrade { nodes } => match rollout::fleet(&upgrade, &target) {
                    Ok((ctx, scan)) => {
                        let names = nodes.iter().map(|r| r.name.clone()).collect();
                        rollout::plan(ctx, scan, names, tx.clone());
                    }
                    Err(why) => pending.extend(app.update(Msg::UpgradePlanned(Err(
                        crate::app::PlanRefused {
                            why,
                            unfinished: false,
                        },
                    )))),
                },
                Effect::RunUpgrade { plan } => {
                    // The plan the operator confirmed, carried whole: it is what runs.
                    let names: Vec<String> = plan.nodes.iter().map(|n| n.node.clone()).collect();
                    let started = rollout::fleet(&upgrade, &target).and_then(|(ctx, scan)| {
                        rollout::run(&ctx, rollout::Start::Plan(plan), scan, tx.clone())
                    });
                    if let Err(e) = started {
                        pending.extend(app.update(Msg::UpgradeDone {
                            names,
                            summary: format!("upgrade not started: {e}"),
                            result: None,
                        }));
                    }
                }
                Effect::Resume { rollout: id } => {
                    let started = rollout::fleet(&upgrade, &target).and_then(|(ctx, scan)| {
                        rollout::run(&ctx, rollout::Start::Resume(id), scan, tx.clone())
                    });
                    if let Err(e) = started {
                        pending.extend(app.update(Msg::UpgradeDone {
                            names: Vec::new(),
                            summary: format!("resume not started: {e}"),
                            result: None,
                        }));
                    }
                }
                Effect::FindUnfinished { kind } => {
                    let found = rollout::fleet(&upgrade, &target)
                        .and_then(|(ctx, _)| rollout::find(&ctx, kind));
                    pending.extend(app.update(Msg::UnfinishedFound(found)));
                }
                Effect::Abandon { rollout: id } => {
                    let done = rollout::fleet(&upgrade, &target)
                        .and_then(|(ctx, _)| rollout::abandon(&ctx, &id));
                    let msg = match done {
                        Ok((names, r)) => Msg::RolloutActed {
                            names,
                            result: Ok(Box::new(r)),
                        },
                        Err(e) => Msg::RolloutActed {
                            names: Vec::new(),
                            result: Err(format!("abandon: {e}")),
                        },
                    };
                    pending.extend(app.update(msg));
                }
                Effect::CancelRollout { rollout: id } => match rollout::fleet(&upgrade, &target) {
                    Ok((ctx, scan)) => rollout::cancel(ctx, scan, id, tx.clone()),
                    Err(e) => pending.extend(app.update(Msg::RolloutActed {
                        names: Vec::new(),
                        result: Err(format!("cancel: {e}")),
                    })),
                },
            }
        }
        if undrawn && (draw_now || last_draw.elapsed() >= RESULT_FRAME_GAP) {
            draw(terminal, app, theme, keys, &mut on_frame)?;
            (undrawn, draw_now) = (false, false);
            last_draw = Instant::now();
        }
        let held_back = tokio::time::Instant::from_std(last_draw + RESULT_FRAME_GAP);
        tokio::select! {
            biased;
            _ = sigterm.recv() => pending.push(Effect::Quit),
            _ = sighup.recv() => pending.push(Effect::Quit),
            Some(msg) = input_rx.recv() => {
                pending.extend(apply(app, msg, &mut keys, &mut last_scan_end));
                (undrawn, draw_now) = (true, true);
            }
            _ = tick.tick() => {
                let since = last_scan_end.map(|t| t.elapsed().as_secs());
                pending.extend(app.update(Msg::Tick { since_scan_secs: since }));
                (undrawn, draw_now) = (true, true);
            }
            Some(msg) = rx.recv() => {
                apply_burst(app, msg, &mut rx, &input_rx, &mut keys, &mut last_scan_end, &mut pending);
                undrawn = true;
            }
            _ = tokio::time::sleep_until(held_back), if undrawn => {}
        }
        // Input that came meanwhile is applied before the next frame.
        while let Ok(msg) = input_rx.try_recv() {
            pending.extend(apply(app, msg, &mut keys, &mut last_scan_end));
            (undrawn, draw_now) = (true, true);
        }
    }
}

/// Results applied in one go before a frame is drawn, at most.
const BATCH: usize = 4096;
/// Time spent applying queued results before a frame is drawn, at most (input that arrives
/// stops it at once).
const BATCH_TIME: Duration = Duration::from_millis(8);
/// Frames drawn for scan results alone come at most this often (input, ticks and effects draw
/// at once): with 10,000 nodes streaming in, a frame per burst of results would take the CPU
/// that keys need (bench/README.md, "The TUI at 10,000 simulated nodes").
const RESULT_FRAME_GAP: Duration = Duration::from_millis(50);

/// Gives `msg` to the app; counts keys, notes when the current scan finished. Returns the
/// effects to carry out.
fn apply(
    app: &mut App,
    msg: Msg,
    keys: &mut u64,
    last_scan_end: &mut Option<Instant>,
) -> Vec<Effect> {
    if let Msg::Key(_) = msg {
        *keys += 1;
    }
    if let Msg::ScanFinished { generation } = &msg
        && *generation == app.progress.generation
    {
        *last_scan_end = Some(Instant::now());
    }
    app.update(msg)
}

/// Results come in bursts: applies `first` and what is queued behind it on `rx`, to be drawn
/// once — for [`BATCH_TIME`] and [`BATCH`] messages at most, and not one more once `input`
/// waits. Returns how many were applied.
fn apply_burst(
    app: &mut App,
    first: Msg,
    rx: &mut mpsc::Receiver<Msg>,
    input: &mpsc::Receiver<Msg>,
    keys: &mut u64,
    last_scan_end: &mut Option<Instant>,
    pending: &mut Vec<Effect>,
) -> usize {
    let until = Instant::now() + BATCH_TIME;
    let (mut next, mut n) = (Some(first), 0);
    while let Some(m) = next.take() {
        pending.extend(apply(app, m, keys, last_scan_end));
        n += 1;
        if n >= BATCH || !input.is_empty() || Instant::now() >= until {
            break;
        }
        next = rx.try_recv().ok();
    }
    n
}

/// Draws one frame of `app` and keeps what the app needs from it (page size, mouse targets,
/// scroll limits); then tells `on_frame`.
fn draw<B: ratatui::backend::Backend>(
    terminal: &mut ratatui::Terminal<B>,
    app: &mut App,
    theme: &Theme,
    keys: u64,
    on_frame: &mut impl FnMut(&App, Frame),
) -> anyhow::Result<()>
where
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let started = Instant::now();
    app.ensure_view();
    let mut drawn = ui::Drawn::default();
    terminal.draw(|f| drawn = ui::draw(f, app, theme))?;
    let draw = started.elapsed();
    app.laid_out(drawn);
    on_frame(app, Frame { keys, draw });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Code, NodeReport};

    /// A key that arrives while results are queued stops the burst: it is applied before the
    /// thousands behind (issue 12, item 5), which wait for the next turn.
    #[test]
    fn a_waiting_key_stops_a_burst_of_results() {
        use crate::app::{Keymap, Row};
        use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
        let names: Vec<String> = (0..3000).map(|i| format!("n{i:04}")).collect();
        let rows = names.iter().map(|n| Row::new(n.clone())).collect();
        let mut app = App::new(rows, Keymap::default(), true, "test".into());
        app.update(Msg::ScanStarted {
            generation: 1,
            names: names.clone(),
        });
        let (tx, mut rx) = mpsc::channel(4096);
        for n in &names {
            let mut r = NodeReport::unreachable(
                n.clone(),
                Code::SshTimeout,
                "x".into(),
                vec![],
                String::new(),
                0,
            );
            r.status = crate::model::NodeStatus::Ready;
            tx.try_send(Msg::NodeDone {
                generation: 1,
                report: Box::new(r),
                raw: None,
            })
            .unwrap();
        }
        let (input_tx, input_rx) = mpsc::channel(8);
        let first = rx.try_recv().unwrap();
        let (mut keys, mut end, mut pending) = (0, None, Vec::new());
        let all = apply_burst(
            &mut app,
            first,
            &mut rx,
            &input_rx,
            &mut keys,
            &mut end,
            &mut pending,
        );
        assert!(all >= 1, "{all}");
        let key = KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE);
        input_tx.try_send(Msg::Key(key)).unwrap();
        let first = rx.try_recv().unwrap();
        let n = apply_burst(
            &mut app,
            first,
            &mut rx,
            &input_rx,
            &mut keys,
            &mut end,
            &mut pending,
        );
        assert_eq!(
            n, 1,
            "the burst stopped at the first result once a key waited"
        );
        assert_eq!(app.progress.done, all + 1);
        assert_eq!(rx.len(), 3000 - all - 1, "the rest wait in the channel");
    }

    /// The TUI's CSV export (`E`) neutralizes formulas and escapes node text as
    /// `gpufleet snapshot --format csv` does.
    #[test]
    fn the_tui_csv_export_is_neutralized_and_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = NodeReport::unreachable(
            "=cmd|'/c calc'!A1\x1b[2J\u{202e}".into(),
            Code::SshTimeout,
            "x".into(),
            vec![],
            String::new(),
            0,
        );
        n.status = crate::model::NodeStatus::Unknown;
        let path = export_in(dir.path(), ExportFormat::Csv, vec![n]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut rdr = csv::Reader::from_reader(text.as_bytes());
        let row = rdr.records().next().unwrap().unwrap();
        assert_eq!(&row[0], "'=cmd|'/c calc'!A1\\x1b[2J\\u{202e}");
        assert_eq!(&row[1], "unknown");
        assert!(!text.contains('\x1b') && !text.contains('\u{202e}'));
    }
}
