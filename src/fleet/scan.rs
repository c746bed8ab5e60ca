//! The scan use case: what one scan reads — this machine, an inventory's nodes over SSH, or
//! snapshots collected elsewhere — decided once ([`Source`]), and one stream of reports
//! ([`Source::run`]) that `gpufleet snapshot`, the TUI, `policy check --against` and a rollout's
//! prepare all read. The rollout journal's drain marks are joined here, on the way out
//! (docs/domain.md, "Snapshot JSON": `rollout.drained_by`), and each node's scheduler state
//! ([`super::scheduler`]: `scheduler-down`, `scheduler-drained`), so the read path never calls
//! the write layer and the model never reads a scheduler.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use crate::inventory::Node;
use crate::model::Thresholds;
use crate::model::report::NodeReport;
use crate::probe::scan::{Scan, now_rfc3339};
use crate::probe::{self, ProbeSettings, RawRun};

/// What a scan reads.
pub enum Source {
    /// This machine, with the local probe (`sh`).
    Local(Local),
    /// Inventory nodes over SSH.
    Fleet(Fleet),
    /// `gpufleet snapshot --format json|jsonl` files collected elsewhere (`--from`).
    Files(Files),
}

/// This machine.
pub struct Local {
    /// The node's name; `None`: the report takes the hostname the probe read.
    pub name: Option<String>,
    /// The probe's settings, root prefix included.
    pub settings: ProbeSettings,
    pub thresholds: Thresholds,
}

/// Inventory nodes over SSH.
pub struct Fleet {
    pub scan: Arc<Scan>,
    /// The selected nodes, in inventory order (a report's position is its index here).
    pub nodes: Vec<Node>,
    /// The rollout journal whose drained nodes are marked (`rollout.drained_by`), read again at
    /// each run; `None`: no marks.
    pub journal: Option<PathBuf>,
    /// Read each node's scheduler state while it is probed (Slurm and Kubernetes drain
    /// backends) and join it as a reason ([`super::scheduler`]); `None`: not read (a rollout's
    /// prepare reads the states itself, before planning).
    pub schedulers: Option<Arc<super::scheduler::Schedulers>>,
}

/// Snapshots collected elsewhere, merged by node name, the newest `scanned_at` winning
/// ([`crate::snapshot::collected`]).
pub struct Files {
    pub files: Vec<PathBuf>,
    /// The nodes found when the files were first read, in the order first seen.
    pub names: Vec<Box<str>>,
    /// What the first read's merge found (a report from the future, a node two files disagree
    /// on: [`crate::snapshot::collected`]), for the caller to say once; later runs tell theirs
    /// as [`Event::Warning`]s.
    pub findings: Vec<String>,
    /// How far after now a `scanned_at` may be before it is a finding.
    clock_skew: std::time::Duration,
    /// The merge of that first read (its text and where each winning report lies, not the
    /// reports: they are parsed one at a time as a run gives them), taken by the first run;
    /// later runs read the files again.
    first: Mutex<Option<crate::snapshot::collected::Loaded>>,
}

/// What a scan tells as it goes.
pub enum Event {
    /// The probe of the node at `pos` started.
    Running { pos: usize, name: String },
    /// The node at `pos` is done: its report (an unreachable node is a report too) and, when it
    /// answered, the raw probe output.
    Done {
        pos: usize,
        report: Box<NodeReport>,
        raw: Option<RawRun>,
    },
    /// Something the scan could not do that does not stop it (an unreadable journal: drained
    /// nodes are not marked), in words.
    Warning(String),
}

/// Why a run ended early.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// `cancel` completed (Ctrl-C, SIGTERM): nodes still running were stopped.
    #[error("interrupted")]
    Interrupted,
    /// The local probe could not start (`sh` missing, no processes left).
    #[error("cannot start sh for the local probe: {0}")]
    LocalProbe(std::io::Error),
    /// The collected files cannot be read again (file:line: why; node text quoted: escape it
    /// where it is shown).
    #[error("{0}")]
    Files(String),
}

impl Files {
    /// Reads and merges `files` ([`crate::snapshot::collected::load_with`]), a `scanned_at`
    /// more than `clock_skew` after now being a finding.
    ///
    /// Errors: as `load_with`'s (`file:line: message`; node text quoted).
    pub fn read(files: Vec<PathBuf>, clock_skew: std::time::Duration) -> Result<Files, String> {
        let mut loaded = crate::snapshot::collected::load_with(&files, &Self::options(clock_skew))?;
        Ok(Files {
            // Moved, not copied: 1,000,000 names are 40 MB as Strings.
            names: loaded.take_names(),
            findings: loaded.warnings(),
            files,
            clock_skew,
            first: Mutex::new(Some(loaded)),
        })
    }

    /// The merge's options now.
    fn options(clock_skew: std::time::Duration) -> crate::snapshot::collected::Options {
        crate::snapshot::collected::Options {
            now: jiff::Timestamp::now(),
            clock_skew,
        }
    }

    /// The merge of the first read, once (its findings are [`Files::findings`]); later, the
    /// files read again, with that read's findings. Its reports are parsed as they are taken
    /// (`Loaded::into_collected`).
    ///
    /// Errors: as [`Files::read`]'s.
    pub fn reports(&self) -> Result<(crate::snapshot::collected::Loaded, Vec<String>), String> {
        let first = self
            .first
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match first {
            Some(l) => Ok((l, Vec::new())),
            None => {
                let l = crate::snapshot::collected::load_with(
                    &self.files,
                    &Self::options(self.clock_skew),
                )?;
                let w = l.warnings();
                Ok((l, w))
            }
        }
    }
}

impl Source {
    /// The names of the nodes a run reports, in report order (a local node without a name:
    /// `localhost`).
    pub fn names(&self) -> Vec<String> {
        match self {
            Source::Local(l) => vec![l.name.clone().unwrap_or_else(|| "localhost".into())],
            Source::Fleet(f) => f.nodes.iter().map(|n| n.name.clone()).collect(),
            Source::Files(f) => f.names.iter().map(|n| n.to_string()).collect(),
        }
    }

    /// How many nodes a run over all of them reports.
    pub fn len(&self) -> usize {
        match self {
            Source::Local(_) => 1,
            Source::Fleet(f) => f.nodes.len(),
            Source::Files(f) => f.names.len(),
        }
    }

    /// Whether a run reports no node at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Scans the nodes named in `wanted` (`None`: all), telling `on` as it goes: each node's
    /// [`Event::Running`] then [`Event::Done`] (in completion order, from the node's own task,
    /// so work done in `on` — compressing the raw output — runs on the workers in parallel),
    /// and [`Event::Warning`]s. Fleet nodes are probed at most `ssh.concurrency` at a time,
    /// started in inventory order; a report's `pos` is its node's index in the source.
    /// Returns when every node is done.
    ///
    /// Errors: [`ScanError::Interrupted`] once `cancel` completes (the nodes still running are
    /// stopped, their process trees included); [`ScanError::LocalProbe`];
    /// [`ScanError::Files`].
    pub async fn run<F, Fut>(
        &self,
        wanted: Option<&HashSet<String>>,
        on: F,
        cancel: impl Future<Output = ()>,
    ) -> Result<(), ScanError>
    where
        F: Fn(Event) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let is_wanted = |name: &String| wanted.is_none_or(|w| w.contains(name));
        match self {
            Source::Local(l) => {
                let name = self.names().remove(0);
                if !is_wanted(&name) {
                    return Ok(());
                }
                on(Event::Running {
                    pos: 0,
                    name: name.clone(),
                })
                .await;
                let scanned_at = now_rfc3339();
                let run = probe::run_local_cancellable(&l.settings, cancel)
                    .await
                    .map_err(ScanError::LocalProbe)?
                    .ok_or(ScanError::Interrupted)?;
                let report = probe::report(l.name.clone(), &run, &l.thresholds, scanned_at);
                on(Event::Done {
                    pos: 0,
                    report: Box::new(report),
                    raw: Some(run),
                })
                .await;
                Ok(())
            }
            Source::Fleet(f) => {
                let marks = Arc::new(match drain_marks(f.journal.as_ref()) {
                    Ok(m) => m,
                    Err(w) => {
                        on(Event::Warning(w)).await;
                        BTreeMap::new()
                    }
                });
                let on = Arc::new(on);
                // Positions, not copies: a node is copied when its task starts.
                let chosen: Vec<usize> = (0..f.nodes.len())
                    .filter(|&i| is_wanted(&f.nodes[i].name))
                    .collect();
                let work = f.scan.clone().each(chosen, |scan, _, pos| {
                    let (on, marks, node) = (on.clone(), marks.clone(), f.nodes[pos].clone());
                    let schedulers = f.schedulers.clone();
                    async move {
                        on(Event::Running {
                            pos,
                            name: node.name.clone(),
                        })
                        .await;
                        // The scheduler is asked while the node is probed.
                        let sched_node = schedulers.as_ref().map(|_| node.clone());
                        let sched = async {
                            match (&schedulers, &sched_node) {
                                (Some(s), Some(n)) => s.reason(n).await,
                                _ => None,
                            }
                        };
                        let ((mut report, raw), sched) =
                            tokio::join!(scan.probe_guarded(node), sched);
                        mark_drained(&mut report, &marks);
                        if let Some(r) = sched {
                            super::scheduler::join(&mut report, r);
                        }
                        let report = Box::new(report);
                        on(Event::Done { pos, report, raw }).await;
                    }
                });
                tokio::select! {
                    () = work => Ok(()),
                    () = cancel => Err(ScanError::Interrupted),
                }
            }
            Source::Files(f) => {
                let (reports, findings) = f.reports().map_err(ScanError::Files)?;
                if let Some(first) = findings.first() {
                    let more = findings.len() - 1;
                    let more = if more > 0 {
                        format!(" (and {more} more)")
                    } else {
                        String::new()
                    };
                    on(Event::Warning(format!("merge: {first}{more}"))).await;
                }
                // One report parsed at a time, handed on, dropped by the receiver.
                for (pos, c) in reports.into_collected().enumerate() {
                    if is_wanted(&c.report.name) {
                        on(Event::Done {
                            pos,
                            report: Box::new(c.report),
                            raw: None,
                        })
                        .await;
                    }
                }
                Ok(())
            }
        }
    }

    /// Every report of a run over all nodes, in source order (for a rollout's prepare: the
    /// reports a plan is made from).
    ///
    /// Errors: as [`Source::run`]'s.
    pub async fn reports(
        &self,
        cancel: impl Future<Output = ()>,
    ) -> Result<Vec<NodeReport>, ScanError> {
        let got = Arc::new(Mutex::new(Vec::with_capacity(self.len())));
        let sink = got.clone();
        self.run(
            None,
            move |ev| {
                if let Event::Done { pos, report, .. } = ev {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((pos, report));
                }
                std::future::ready(())
            },
            cancel,
        )
        .await?;
        let mut got = std::mem::take(&mut *got.lock().unwrap_or_else(PoisonError::into_inner));
        got.sort_by_key(|(pos, _)| *pos);
        Ok(got.into_iter().map(|(_, r)| *r).collect())
    }
}

/// The nodes the journal at `path` left drained (node → rollout id,
/// [`crate::actions::rollout::drained_by`]); none without a journal.
///
/// Errors: the journal exists but cannot be read, in words (`path: why; drained nodes are not
/// marked`).
fn drain_marks(path: Option<&PathBuf>) -> Result<BTreeMap<String, String>, String> {
    let Some(path) = path else {
        return Ok(BTreeMap::new());
    };
    crate::actions::rollout::drained_in(path)
        .map_err(|e| format!("{}: {e}; drained nodes are not marked", path.display()))
}

/// Sets the report's `rollout.drained_by` from `marks` (node → rollout id).
fn mark_drained(report: &mut NodeReport, marks: &BTreeMap<String, String>) {
    if let Some(r) = marks.get(&report.name) {
        report
            .rollout
            .get_or_insert_with(Default::default)
            .drained_by = Some(r.clone());
    }
}
