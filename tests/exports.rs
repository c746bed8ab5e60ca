//! Exports of a real scan (two fixture nodes over real OpenSSH servers, one unreachable node):
//! `--format prometheus` checked by Prometheus's own `promtool check metrics` (Debian's
//! `prometheus` package, installed by .ci/run) and by the exposition-format reader below, and
//! `--output FILE` written atomically for every format.

// A test: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Output, Stdio};

use support::*;

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A strict reader of the text exposition format 0.0.4 (prometheus.io, "Exposition formats"),
/// enough for what gpufleet writes: `# HELP`/`# TYPE` before a family's samples, samples of one
/// family together, label values in quotes with `\\`, `\"`, `\n` escapes, a float value, no
/// timestamp. Returns each sample as (name, labels, value); panics on anything else.
fn parse_exposition(text: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    let name_ok = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut typed: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (n, t) = rest.split_once(' ').unwrap();
            assert!(name_ok(n) && t == "gauge", "{line}");
            assert!(!typed.contains(&n.to_string()), "family {n} twice");
            typed.push(n.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#') && !line.is_empty(), "{line:?}");
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => panic!("no value: {line}"),
        };
        assert!(name_ok(name), "{line}");
        assert_eq!(
            typed.last().map(String::as_str),
            Some(name),
            "sample outside its family: {line}"
        );
        let (labels, v) = match rest.strip_prefix('{') {
            Some(r) => parse_labels_tail(r, line),
            None => (BTreeMap::new(), value_of(rest, line)),
        };
        out.push((name.to_string(), labels, v));
    }
    out
}

/// The sample value after the name or the labels: one float, no timestamp.
fn value_of(rest: &str, line: &str) -> f64 {
    let value = rest.trim_start();
    assert!(
        !value.is_empty() && !value.contains(' '),
        "a missing value, or a timestamp after it: {line}"
    );
    value
        .parse()
        .unwrap_or_else(|_| panic!("value {value:?} in {line}"))
}

/// The labels after `{` (`k="v",k2="v2"}`) and the value after the `}`.
fn parse_labels_tail(r: &str, line: &str) -> (BTreeMap<String, String>, f64) {
    let mut labels = BTreeMap::new();
    let mut s = r;
    loop {
        let eq = s.find('=').unwrap();
        let key = &s[..eq];
        assert!(
            key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "label name {key:?} in {line}"
        );
        let mut it = s[eq + 1..].chars();
        assert_eq!(it.next(), Some('"'));
        let mut value = String::new();
        let mut consumed = eq + 2;
        loop {
            let c = it.next().expect("unterminated");
            consumed += c.len_utf8();
            match c {
                '\\' => {
                    let e = it.next().unwrap();
                    consumed += e.len_utf8();
                    value.push(match e {
                        '\\' => '\\',
                        '"' => '"',
                        'n' => '\n',
                        other => panic!("bad escape \\{other} in {line}"),
                    });
                }
                '"' => break,
                c => value.push(c),
            }
        }
        assert!(
            labels.insert(key.to_string(), value).is_none(),
            "label twice: {line}"
        );
        s = &s[consumed..];
        if let Some(more) = s.strip_prefix(',') {
            s = more;
            continue;
        }
        let tail = s.strip_prefix('}').expect("labels end with }");
        return (labels, value_of(tail, line));
    }
}

#[test]
fn prometheus_export_of_a_real_scan_passes_promtool_and_a_strict_reader() {
    let f = Fleet::start(
        &[
            fixture("a100-proprietary-535-k5.15-peermem"),
            fixture("h200-open-580-k6.18-real"),
        ],
        170,
    );
    // A node name with every character the format must escape, and one node nobody answers for.
    let inv = f.inventory_text().replacen(
        "name = \"a100-proprietary-535-k5.15-peermem\"",
        "name = \"a100 \\\"legacy\\\" \\\\ rack\\n7\"",
        1,
    ) + &format!(
        "[[nodes]]\nname = \"gone\"\nhost = \"127.0.0.1\"\nport = {}\n",
        free_port("127.0.0.1")
    );
    f.write_inventory(&inv);
    let prom = f.tmp.path().join("textfile/gpufleet.prom");
    std::fs::create_dir_all(prom.parent().unwrap()).unwrap();
    std::fs::write(&prom, "# the previous scan\n").unwrap();
    let invp = f.inventory.display().to_string();
    let out = f.gpufleet(&[
        "snapshot",
        "-i",
        &invp,
        "--format",
        "prometheus",
        "--output",
        &prom.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(out.stdout.is_empty(), "{}", text(&out));
    let body = std::fs::read_to_string(&prom).unwrap();
    // Nothing but the file is left in the textfile folder (the temporary file was renamed).
    let left: Vec<_> = std::fs::read_dir(prom.parent().unwrap()).unwrap().collect();
    assert_eq!(left.len(), 1);

    // Prometheus's own checker.
    let mut promtool = Command::new(support::need("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; .ci/run installs it)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool: {}\n{body}",
        text(&checked)
    );

    let samples = parse_exposition(&body);
    let find = |name: &str, want: &[(&str, &str)]| {
        samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && want
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, v)| *v)
            .collect::<Vec<f64>>()
    };
    // The node label, read back, is the inventory's exact name (issue 22 item 4: escaped once,
    // the line feed a line feed); the status is in gpufleet_node_status alone.
    let legacy = "a100 \"legacy\" \\ rack\n7";
    assert!(
        body.contains("node=\"a100 \\\"legacy\\\" \\\\ rack\\n7\""),
        "{body}"
    );
    let info = samples
        .iter()
        .find(|(n, l, _)| n == "gpufleet_node_info" && l["node"] == legacy)
        .unwrap_or_else(|| panic!("{body}"));
    assert!(!info.1.contains_key("status"), "{:?}", info.1);
    assert_eq!(info.1["flavor"], "proprietary");
    assert_eq!(info.1["kernel"], "5.15.0-105-generic");
    assert!(!info.1["driver"].is_empty());
    assert_eq!(
        find(
            "gpufleet_node_status",
            &[("node", legacy), ("status", "migrate")]
        ),
        [1.0]
    );
    assert_eq!(
        find(
            "gpufleet_node_status",
            &[("node", legacy), ("status", "ready")]
        ),
        [0.0]
    );
    let ready = "h200-open-580-k6.18-real";
    assert_eq!(
        find(
            "gpufleet_node_status",
            &[("node", ready), ("status", "ready")]
        ),
        [1.0]
    );
    assert_eq!(find("gpufleet_node_gpus", &[("node", ready)]), [1.0]);
    assert_eq!(
        find("gpufleet_node_gpus", &[("node", "gone")]),
        Vec::<f64>::new(),
        "unknown: no sample"
    );
    assert_eq!(
        find(
            "gpufleet_node_status",
            &[("node", "gone"), ("status", "unreachable")]
        ),
        [1.0]
    );
    assert_eq!(find("gpufleet_nodes", &[("status", "unreachable")]), [1.0]);
    assert_eq!(
        find("gpufleet_node_next_boot_driver", &[("node", "gone")]).len(),
        0
    );
    assert_eq!(find("gpufleet_scan_duration_seconds", &[]).len(), 1);
    let ts = find("gpufleet_scan_timestamp_seconds", &[])[0];
    assert!(ts > 1.7e9, "{ts}");
    assert!(
        !find(
            "gpufleet_node_reason",
            &[("node", legacy), ("code", "peermem-loaded")]
        )
        .is_empty(),
        "{body}"
    );
    // Every sample of a family has the same label names (node_exporter refuses others).
    let mut names: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (n, l, _) in &samples {
        let keys: Vec<String> = l.keys().cloned().collect();
        let prev = names.entry(n).or_insert_with(|| keys.clone());
        assert_eq!(*prev, keys, "{n}");
    }
}

#[test]
fn output_file_is_written_atomically_for_every_format() {
    let f = Fleet::start(&[fixture("h200-open-580-k6.18-real")], 175);
    let invp = f.inventory.display().to_string();
    let dir = f.tmp.path().join("out");
    std::fs::create_dir(&dir).unwrap();
    for (format, check) in [
        ("json", "\"schema_version\": 3"),
        ("jsonl", "{\"type\":\"node\",\"data\":{"),
        ("csv", "name,status,kernel"),
        ("table", "NODE"),
        ("prometheus", "# TYPE gpufleet_node_info gauge"),
    ] {
        let path = dir.join(format!("snap.{format}"));
        let out = f.gpufleet(&[
            "snapshot",
            "-i",
            &invp,
            "-f",
            format,
            "-o",
            &path.display().to_string(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", text(&out));
        assert!(out.stdout.is_empty());
        let body = std::fs::read_to_string(&path).unwrap();
        assert!(
            body.starts_with(check) || body.contains(check),
            "{format}: {body}"
        );
        assert!(
            !body.contains('\x1b'),
            "{format}: no colour codes in a file"
        );
    }
    // Without --format, a file with no known extension gets JSON...
    let path = dir.join("default");
    let out = f.gpufleet(&["snapshot", "-i", &invp, "-o", &path.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["nodes"][0]["status"], "ready");
    // ... and a file named for its format gets that format (node_exporter reads *.prom).
    let path = dir.join("gpufleet.prom");
    let out = f.gpufleet(&["snapshot", "-i", &invp, "-o", &path.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let body = std::fs::read_to_string(&path).unwrap();
    assert!(body.contains("# TYPE gpufleet_node_info gauge"), "{body}");
    let path = dir.join("fleet.csv");
    let out = f.gpufleet(&["snapshot", "-i", &invp, "-o", &path.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .starts_with("name,status,kernel")
    );
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    // A folder that does not exist: exit 2 with the path, before any node is probed.
    let out = f.gpufleet(&["snapshot", "-i", &invp, "-o", "/nonexistent/dir/x.prom"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/dir/x.prom"),
        "{}",
        text(&out)
    );
}

#[test]
fn the_strict_reader_refuses_what_the_format_forbids() {
    let ok = "# HELP m x\n# TYPE m gauge\nm{a=\"q\\\"\\\\\\n\",b=\"\"} 1.5\nm 2\n";
    let s = parse_exposition(ok);
    assert_eq!(s[0].1["a"], "q\"\\\n");
    assert_eq!(s[1].2, 2.0);
    for bad in [
        "# TYPE m gauge\nm 1 1700000000000\n",    // a timestamp
        "# TYPE m gauge\nm{a=\"\\x\"} 1\n",       // an unknown escape
        "m 1\n",                                  // no TYPE before it
        "# TYPE m gauge\nm{a=\"1\",a=\"2\"} 1\n", // a label twice
        "# TYPE m gauge\nm{a=\"1} 1\n",           // unterminated
        "# TYPE m counter\nm 1\n",                // not a gauge
    ] {
        let r = std::panic::catch_unwind(|| parse_exposition(bad));
        assert!(r.is_err(), "accepted {bad:?}");
    }
}
