//! `--format prometheus`: the snapshot in Prometheus's text exposition format 0.0.4, for
//! node_exporter's textfile collector (docs/domain.md "Prometheus"; the format:
//! prometheus.io/docs/instrumenting/exposition_formats; the collector:
//! github.com/prometheus/node_exporter, "Textfile Collector"). Every metric is a gauge with a
//! `# HELP` and `# TYPE` line, samples of one family together, the same label names in every
//! sample of a family, and no timestamps (the textfile collector refuses them). An unknown
//! value is an empty label (Prometheus treats it as absent), or no sample at all for a number.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Instant;

use super::Sink;
use crate::model::NodeStatus;
use crate::model::report::{NodeReport, Snapshot};
use crate::model::text::terminal_safe;
use crate::view;

/// A label value as the exposition format wants it: node text made terminal-safe first (no
/// control character survives; [`terminal_safe`] doubles a backslash of the node's own, so a
/// real newline and the two characters `\n` stay two different values, never one duplicated
/// series), then [`exposition_escape`].
pub fn escape_label_value(v: &str) -> String {
    exposition_escape(&terminal_safe(v))
}

/// The `node` label's value: the node's exact name, escaped once as the format says (`\` →
/// `\\`, `"` → `\"`, line feed → `\n`), so that the label Prometheus reads equals the
/// inventory's name. A name with another control character (the format has no escape for it,
/// and it would reach a terminal raw) is given as [`escape_label_value`] gives it.
pub fn node_label_value(name: &str) -> String {
    if name.chars().any(|c| c != '\n' && c.is_control()) {
        return escape_label_value(name);
    }
    exposition_escape(name)
}

/// `\` → `\\`, `"` → `\"`, line feed → `\n` (the text exposition format's label escapes).
fn exposition_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

struct Family {
    name: &'static str,
    help: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl Family {
    fn new(name: &'static str, help: &'static str) -> Family {
        Family {
            name,
            help,
            samples: Vec::new(),
        }
    }

    fn add(&mut self, labels: Vec<(&'static str, String)>, value: f64) {
        self.samples.push((labels, value));
    }

    fn write(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} gauge", self.name);
        for (labels, v) in &self.samples {
            out.push_str(self.name);
            if !labels.is_empty() {
                let ls: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| {
                        let v = if *k == "node" {
                            node_label_value(v)
                        } else {
                            escape_label_value(v)
                        };
                        format!("{k}=\"{v}\"")
                    })
                    .collect();
                let _ = write!(out, "{{{}}}", ls.join(","));
            }
            let _ = writeln!(out, " {}", number(*v));
        }
    }
}

/// A sample value: integers without a fraction, others as Rust prints them (both are valid
/// Go `ParseFloat` input).
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Seconds since the Unix epoch of an RFC 3339 time; `None` when it does not parse.
fn unix_seconds(t: &str) -> Option<f64> {
    let ts: jiff::Timestamp = t.parse().ok()?;
    Some(ts.as_millisecond() as f64 / 1000.0)
}

/// The whole exposition text of `snapshot`; `scan_seconds` is the scan's wall time.
///
/// Families (all gauges): `gpufleet_node_info{node,kernel,flavor,driver}` 1;
/// `gpufleet_node_status{node,status}` 1 for the node's status and 0 for the others;
/// `gpufleet_node_gpus{node}` the GPU count (no sample when unknown);
/// `gpufleet_node_next_boot_driver{node,state}` 1 for `ok`, `missing` or `n/a` and 0 for the
/// others (no sample when unknown); `gpufleet_node_reason{node,code,severity}` 1 per reason;
/// `gpufleet_node_scan_duration_seconds{node}`, `gpufleet_node_scan_timestamp_seconds{node}`;
/// `gpufleet_nodes{status}` counts; `gpufleet_scan_duration_seconds`,
/// `gpufleet_scan_timestamp_seconds` for the whole snapshot.
pub fn render(snapshot: &Snapshot, scan_seconds: f64) -> String {
    let mut info = Family::new(
        "gpufleet_node_info",
        "The node's kernel release, NVIDIA module flavor and driver version (always 1; empty when unknown); its status is gpufleet_node_status.",
    );
    let mut status = Family::new(
        "gpufleet_node_status",
        "1 for the node's gpufleet status, 0 for the other statuses.",
    );
    let mut gpus = Family::new(
        "gpufleet_node_gpus",
        "NVIDIA GPUs seen on the node (no sample when unknown).",
    );
    let mut next_boot = Family::new(
        "gpufleet_node_next_boot_driver",
        "1 for whether the kernel the next boot starts has the NVIDIA driver (ok, missing, n/a), 0 for the others; no sample when unknown.",
    );
    let mut reasons = Family::new(
        "gpufleet_node_reason",
        "A reason gpufleet gives for the node's status (always 1).",
    );
    let mut duration = Family::new(
        "gpufleet_node_scan_duration_seconds",
        "Wall time of the node's probe, in seconds.",
    );
    let mut scanned = Family::new(
        "gpufleet_node_scan_timestamp_seconds",
        "When the node was probed, in seconds since the Unix epoch.",
    );
    for n in &snapshot.nodes {
        let node = || ("node", n.name.clone());
        let text = |f: view::Fact<&str>| f.known().unwrap_or_default().to_string();
        info.add(
            vec![
                node(),
                ("kernel", text(view::kernel(n))),
                (
                    "flavor",
                    view::machine::flavor(n).unwrap_or_default().to_string(),
                ),
                ("driver", text(view::driver_version(n))),
            ],
            1.0,
        );
        for s in NodeStatus::ALL {
            status.add(
                vec![node(), ("status", s.as_str().to_string())],
                if s == n.status { 1.0 } else { 0.0 },
            );
        }
        if let Some(g) = &n.gpus
            && n.status != NodeStatus::Unreachable
        {
            gpus.add(vec![node()], g.len() as f64);
        }
        if let Some(nb) = view::next_boot(n).known() {
            for state in crate::model::report::NextBootDriver::ALL {
                next_boot.add(
                    vec![node(), ("state", state.as_str().to_string())],
                    if nb == state { 1.0 } else { 0.0 },
                );
            }
        }
        for r in &n.reasons {
            reasons.add(
                vec![
                    node(),
                    ("code", r.code.as_str().to_string()),
                    ("severity", r.severity.as_str().to_string()),
                ],
                1.0,
            );
        }
        duration.add(vec![node()], n.duration_ms as f64 / 1000.0);
        if let Some(t) = unix_seconds(&n.scanned_at) {
            scanned.add(vec![node()], t);
        }
    }
    let mut counts = Family::new("gpufleet_nodes", "Nodes per gpufleet status.");
    for (s, c) in &snapshot.summary {
        counts.add(vec![("status", s.to_string())], *c as f64);
    }
    let mut scan = Family::new(
        "gpufleet_scan_duration_seconds",
        "Wall time of the whole scan, in seconds.",
    );
    scan.add(Vec::new(), scan_seconds);
    let mut when = Family::new(
        "gpufleet_scan_timestamp_seconds",
        "When the snapshot was made, in seconds since the Unix epoch.",
    );
    if let Some(t) = unix_seconds(&snapshot.generated_at) {
        when.add(Vec::new(), t);
    }
    let mut out = String::new();
    for f in [
        &info, &status, &gpus, &next_boot, &reasons, &duration, &scanned, &counts, &scan, &when,
    ] {
        f.write(&mut out);
    }
    out
}

/// Buffers until the end: a family's samples must be written together.
pub(super) struct PromSink<'a> {
    out: Box<dyn Write + 'a>,
    started: Instant,
    nodes: super::Placed,
}

impl<'a> PromSink<'a> {
    pub(super) fn new(out: Box<dyn Write + 'a>) -> Self {
        PromSink {
            out,
            started: Instant::now(),
            nodes: super::Placed::default(),
        }
    }
}

impl Sink for PromSink<'_> {
    fn node(&mut self, pos: usize, node: NodeReport) -> io::Result<()> {
        self.nodes.put(pos, node);
        Ok(())
    }
    fn finish(&mut self, end: &super::End) -> io::Result<()> {
        let snapshot = self.nodes.take(end);
        let text = render(&snapshot, self.started.elapsed().as_secs_f64());
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Code;

    #[test]
    fn label_values_are_escaped_after_terminal_escaping() {
        assert_eq!(escape_label_value(r#"a"b\c"#), r#"a\"b\\\\c"#);
        // A raw newline or ESC from a node becomes text first, then its backslash is doubled.
        assert_eq!(escape_label_value("x\ny"), r"x\\ny");
        assert_eq!(escape_label_value("\x1b[2J"), r"\\x1b[2J");
        // Two names that print alike in a terminal are two series here.
        assert_ne!(
            escape_label_value("gpu1\ngpu2"),
            escape_label_value(r"gpu1\ngpu2")
        );
    }

    /// Issue 22 item 4: the node label is the exact name, escaped once.
    #[test]
    fn the_node_label_is_the_exact_name_escaped_once() {
        assert_eq!(node_label_value(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(node_label_value("x\ny"), r"x\ny");
        assert_ne!(node_label_value("x\ny"), node_label_value(r"x\ny"));
        assert_eq!(node_label_value(r"x\ny"), r"x\\ny");
        // No escape in the format for ESC: the terminal-safe text, as other node text.
        assert_eq!(node_label_value("\x1b[2J"), r"\\x1b[2J");
    }

    #[test]
    fn an_unreachable_node_has_no_gpu_count_and_its_reason() {
        let n = NodeReport::unreachable(
            "gpu\"01".into(),
            Code::SshTimeout,
            "timed out".into(),
            vec![],
            "2026-11-30T10:00:00Z".into(),
            1500,
        );
        let doc = Snapshot::new("2026-11-30T10:00:01Z".into(), vec![n]);
        let text = render(&doc, 2.5);
        assert!(
            text.contains(
                "gpufleet_node_info{node=\"gpu\\\"01\",kernel=\"\",flavor=\"\",driver=\"\"} 1\n"
            ),
            "{text}"
        );
        assert!(!text.contains("gpufleet_node_gpus{"), "{text}");
        assert!(text.contains("gpufleet_node_reason{node=\"gpu\\\"01\",code=\"ssh-timeout\",severity=\"error\"} 1\n"), "{text}");
        assert!(text.contains("gpufleet_node_scan_duration_seconds{node=\"gpu\\\"01\"} 1.5\n"));
        assert!(
            text.contains("gpufleet_node_scan_timestamp_seconds{node=\"gpu\\\"01\"} 1796032800\n"),
            "{text}"
        );
        assert!(text.contains("gpufleet_scan_timestamp_seconds 1796032801\n"));
        assert!(text.contains("gpufleet_scan_duration_seconds 2.5\n"));
        assert!(text.contains("gpufleet_nodes{status=\"unreachable\"} 1\n"));
        assert!(text.contains("gpufleet_node_status{node=\"gpu\\\"01\",status=\"ready\"} 0\n"));
    }
}
