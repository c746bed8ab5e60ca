//! Fleet scans: every selected node probed over SSH with bounded concurrency; each report is
//! sent as soon as its node finishes, so output streams and one node's failure never stops the
//! others.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::endpoint::Endpoint;
use super::pace::Pace;
use super::ssh::{HostKeys, SshSettings, run_ssh};
use super::{ProbeSettings, RawRun, report};
use crate::model::{NodeReport, Thresholds};

/// RFC 3339 UTC timestamp with seconds, for `scanned_at` and `generated_at`.
pub fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    now.round(jiff::Unit::Second).unwrap_or(now).to_string()
}

/// Everything one scan needs, shared by its tasks.
pub struct Scan {
    pub probe: ProbeSettings,
    pub ssh: SshSettings,
    pub keys: Arc<HostKeys>,
    pub thresholds: Thresholds,
    /// What the last scan's concurrency did, when it moved from its start
    /// ([`Pace::summary`]); set when [`Scan::each`] returns.
    pub adapted: std::sync::Mutex<Option<String>>,
}

impl Scan {
    /// Probes one node; never fails: an unreachable node is a report too.
    pub async fn node(&self, node: impl Into<Endpoint>) -> NodeReport {
        self.probe_node(node).await.0
    }

    /// Probes one node and also returns the raw probe output (`None` when unreachable), for
    /// views that show the evidence.
    pub async fn probe_node(&self, node: impl Into<Endpoint>) -> (NodeReport, Option<RawRun>) {
        let node: Endpoint = node.into();
        let node = &node;
        let scanned_at = now_rfc3339();
        let start = Instant::now();
        let mut probe = self.probe.clone();
        probe.root = node.root.clone().into();
        match run_ssh(node, &probe, &self.ssh, self.keys.clone()).await {
            Ok(run) => {
                let r = report(Some(node.name.clone()), &run, &self.thresholds, scanned_at);
                (r, Some(run))
            }
            Err(u) => (
                NodeReport::unreachable(
                    node.name.clone(),
                    u.code,
                    u.message,
                    Vec::new(),
                    scanned_at,
                    start.elapsed().as_millis() as u64,
                ),
                None,
            ),
        }
    }

    /// [`Scan::probe_node`] in its own task, so that a bug (a panic) in one node's scan becomes
    /// that node's `probe-output-invalid` report instead of a missing node.
    pub async fn probe_guarded(
        self: Arc<Self>,
        node: impl Into<Endpoint>,
    ) -> (NodeReport, Option<RawRun>) {
        let node: Endpoint = node.into();
        let name = node.name.clone();
        let scan = self.clone();
        // The scan's gate goes with the node into its task (it hears of the handshake).
        let job = async move { scan.probe_node(node).await };
        let pace = super::pace::current();
        let job = async move {
            match pace {
                Some(p) => p.scope(job).await,
                None => job.await,
            }
        };
        match tokio::spawn(job).await {
            Ok(r) => r,
            Err(e) => (
                NodeReport::unreachable(
                    name,
                    crate::model::Code::ProbeOutputInvalid,
                    format!("internal error while scanning this node: {e}"),
                    Vec::new(),
                    now_rfc3339(),
                    0,
                ),
                None,
            ),
        }
    }

    /// Runs `per_node(scan, index, node)` for each of `nodes` (its index in `nodes`), started in
    /// order, as many at a time as the scan's [`Pace`] allows (from `ssh.concurrency`, adapting
    /// to the handshakes: `probe::pace`, within the open-files limit); returns when every one is
    /// done, with [`Scan::adapted`] set. The one concurrency loop of fleet scans:
    /// [`Scan::run`]'s and the TUI's.
    pub async fn each<N, F, Fut>(self: Arc<Self>, nodes: impl IntoIterator<Item = N>, per_node: F)
    where
        F: Fn(Arc<Scan>, usize, N) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let asked = self.ssh.concurrency.max(1);
        let open_files = crate::rt::raise_open_files();
        if let (_, Some(m)) = crate::rt::fit_concurrency(asked, open_files) {
            eprintln!("{m}");
        }
        let room = crate::rt::fit_concurrency(usize::MAX, open_files).0;
        let pace = Pace::new(asked, self.ssh.concurrency_fixed, room);
        let mut tasks = JoinSet::new();
        for (pos, node) in nodes.into_iter().enumerate() {
            // A finished task's memory (its whole future) is freed only when it is joined:
            // joined as we go, a 10,000-node scan holds the tasks in flight, not every task.
            while tasks.try_join_next().is_some() {}
            // Taking the permit before spawning starts nodes in inventory order.
            let permit = pace.acquire().await;
            let job = pace.clone().scope(per_node(self.clone(), pos, node));
            tasks.spawn(async move {
                let _permit = permit;
                job.await;
            });
        }
        while tasks.join_next().await.is_some() {}
        *self
            .adapted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = pace.summary();
    }

    /// Scans `nodes` ([`Scan::each`]), sending each report on `tx` as it finishes (in
    /// completion order) with its node's index in `nodes`. Returns when every node is done.
    pub async fn run<N: Into<Endpoint>>(
        self: Arc<Self>,
        nodes: Vec<N>,
        tx: mpsc::Sender<(usize, NodeReport)>,
    ) {
        self.each(nodes, move |scan, pos, node| {
            let (tx, node): (_, Endpoint) = (tx.clone(), node.into());
            async move {
                let (report, _) = scan.probe_guarded(node).await;
                let _ = tx.send((pos, report)).await;
            }
        })
        .await
    }
}
