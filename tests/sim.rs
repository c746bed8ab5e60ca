//! `gpufleet sim` as a child process, scanned by gpufleet and by OpenSSH's `ssh`: every node
//! answers as its fixture's `[expected]` table says, OpenSSH gets the same reports as gpufleet
//! (the probe on stdin, and as a `sh -c` command through the written ssh_config), any other
//! command is refused with 127 and runs nothing, only the written user key is accepted, the
//! lock marker reads free, and `--hang`, `--drop`, `--refuse` nodes are seen as such.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use gpufleet::model::Thresholds;
use gpufleet::probe::{RawRun, RunEnd};
use serde_json::Value;
use support::sim::*;
use support::{any_fixture, check_expected, manifest};

/// The fixture a simulated node was cycled from: the `fixture` label the simulator wrote for it
/// in the inventory (its name is rack-style: `gpu-r01-n03`).
fn fixture_of(inventory: &[(String, u16, String)], node: &Value) -> PathBuf {
    let name = node["name"].as_str().unwrap();
    let (_, _, fixture) = inventory
        .iter()
        .find(|n| n.0 == name)
        .unwrap_or_else(|| panic!("{name} is not in the inventory"));
    assert!(
        name.starts_with("gpu-r") && !name.contains(fixture.as_str()),
        "{name}"
    );
    any_fixture(fixture)
}

/// A report as JSON without what differs from run to run (when, how long).
fn comparable(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("scanned_at");
        o.remove("duration_ms");
    }
    v
}

/// The probe as one exec command, the form for tools that cannot feed stdin, written here as a
/// shell writes `B=… R='' T=2 D=20 L=200 sh -c "$(cat probe.sh)"` into a single-quoted word:
/// the script without its trailing newline, every `'` as `'\''`.
fn probe_as_command(boundary: &str) -> String {
    let script = std::fs::read_to_string(manifest().join("src/probe/probe.sh")).unwrap();
    let script = script.trim_end_matches('\n').replace('\'', r"'\''");
    format!("B='{boundary}' R='' T=2 D=20 L=200 sh -c '{script}'")
}

/// OpenSSH's client through the simulator's ssh_config, by node name.
/// `ssh -F config name command`; with `tty`, `-tt` as Ansible's `raw` module runs it (a
/// terminal asked for and granted).
fn ssh_by_name(config: &Path, name: &str, command: &str, tty: bool) -> Output {
    Command::new(support::need("ssh"))
        .args(if tty { &["-tt"][..] } else { &[] })
        .arg("-F")
        .arg(config)
        .arg(name)
        .arg(command)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .expect("ssh (openssh-client) is installed")
}

/// gpufleet's report of one probe output read by another client.
fn report_of(name: &str, boundary: &str, out: &Output) -> Value {
    let run = RawRun {
        boundary: boundary.to_string(),
        output: out.stdout.clone(),
        end: RunEnd::Completed,
        duration: Duration::from_millis(1),
        exit: None,
    };
    let report = gpufleet::probe::report(
        Some(name.to_string()),
        &run,
        &Thresholds::default(),
        "2026-01-01T00:00:00Z".into(),
    );
    serde_json::to_value(&report).unwrap()
}

#[test]
fn sim_is_scanned_by_gpufleet_and_openssh_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inventory = dir.join("fleet.toml");
    let hosts = dir.join("hosts");
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            "6",
            "--write-inventory",
            inventory.to_str().unwrap(),
            "--write-hosts",
            hosts.to_str().unwrap(),
        ],
    );
    assert!(
        sim.banner
            .contains(&format!("inventory: {}", inventory.display())),
        "{}",
        sim.banner
    );
    let key = dir.join("fleet.toml.id_ed25519");
    let known_hosts = dir.join("fleet.toml.known_hosts");
    let ssh_config = dir.join("hosts.ssh_config");
    assert!(key.is_file() && known_hosts.is_file() && ssh_config.is_file());
    let nodes = inventory_nodes(&inventory);
    assert_eq!(nodes.len(), 6);
    // The host list is the inventory's nodes, in order.
    let listed: Vec<String> = std::fs::read_to_string(&hosts)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let want: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.1)).collect();
    assert_eq!(listed, want);
    // The default mix: 6 nodes show every status.
    let statuses: std::collections::BTreeSet<String> = nodes
        .iter()
        .map(|n| {
            let t: toml::Table = std::fs::read_to_string(any_fixture(&n.2).join("node.toml"))
                .unwrap()
                .parse()
                .unwrap();
            t["expected"]["status"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        statuses.into_iter().collect::<Vec<_>>(),
        ["attention", "blocked", "migrate", "no-driver", "ready"]
    );

    // (a) gpufleet scans it; every node says what its fixture expects.
    let doc = snapshot(dir, &inventory, &[]);
    let reported = doc["nodes"].as_array().unwrap();
    assert_eq!(reported.len(), 6, "{doc:#}");
    let mut failures = Vec::new();
    for node in reported {
        let fixture = fixture_of(&nodes, node);
        failures.extend(check_expected(&fixture, node));
        // A simulated node's kernel log is readable: empty where its fixture's report quoted
        // none, never the unprivileged refusal that stands for that in the fixture.
        if node.to_string().contains("kernel_log unknown") {
            failures.push(format!("{}: kernel log unknown: {node}", node["name"]));
        }
    }
    assert!(
        failures.is_empty(),
        "simulated nodes differ from their fixtures:\n{}\nsim stderr:\n{}",
        failures.join("\n"),
        sim.stderr()
    );

    // (b) OpenSSH's ssh runs the probe on every node — the even ones with the header and
    // script on stdin of `sh -s`, the odd ones as one `sh -c` command through the written
    // ssh_config — and gpufleet reads that output as the same report it made itself.
    let boundary = "gpufleet-0123456789abcdef0123456789abcdef";
    let mut stdin = format!("B='{boundary}' R='/' T=2 D=20 L=200\n").into_bytes();
    stdin.extend(std::fs::read(manifest().join("src/probe/probe.sh")).unwrap());
    for (i, (name, port, _)) in nodes.iter().enumerate() {
        let out = if i % 2 == 0 {
            ssh(&key, &known_hosts, *port, "sh -s", &stdin)
        } else {
            // The first of them asks for a terminal first (Ansible's raw module, bssh).
            ssh_by_name(&ssh_config, name, &probe_as_command(boundary), i == 1)
        };
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with(&format!("{boundary} meta probe\nprotocol 2\n")),
            "{text}"
        );
        assert!(
            text.ends_with(&format!("{boundary} meta complete\n\n{boundary} end ok\n")),
            "no `meta complete` trailer with our boundary:\n{text}"
        );
        // Every section line carries our boundary: the recording's was replaced everywhere.
        for line in text.lines().filter(|l| l.starts_with("gpufleet-")) {
            assert!(line.starts_with(boundary), "{line}");
        }
        let theirs = comparable(report_of(name, boundary, &out));
        let ours = reported
            .iter()
            .find(|n| n["name"] == name.as_str())
            .unwrap();
        assert_eq!(
            theirs,
            comparable(ours.clone()),
            "{name}: OpenSSH's output reads differently from gpufleet's scan"
        );
    }
    let (_, port, _) = nodes[0].clone();

    // `gpufleet locks` reads every node's lock marker: free.
    let inv = inventory.display().to_string();
    let out = gpufleet(dir, &["locks", "-i", &inv]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (name, _, _) in &nodes {
        assert!(said.contains(&format!("{name}  free")), "{said}");
    }

    // (c) Any other command is refused with 127 and runs nothing.
    let victim = dir.join("victim");
    std::fs::create_dir_all(victim.join("x")).unwrap();
    let rm = format!("rm -rf {}", victim.display());
    let out = ssh(&key, &known_hosts, port, &rm, b"");
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("runs nothing"), "{err}");
    assert!(victim.join("x").is_dir(), "the command ran");
    // `sh -s` with something other than the probe on stdin too.
    let out = ssh(
        &key,
        &known_hosts,
        port,
        "sh -s",
        format!("rm -rf {}\n", victim.display()).as_bytes(),
    );
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    assert!(victim.join("x").is_dir(), "the script ran");
    // A probe header followed by more than the probe script.
    let mut more = stdin.clone();
    more.extend_from_slice(format!("rm -rf {}\n", victim.display()).as_bytes());
    let out = ssh(&key, &known_hosts, port, "sh -s", &more);
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    assert!(victim.join("x").is_dir(), "the script ran");

    // Only the written user key gets in.
    let other = dir.join("other_key");
    support::keygen(&other, "");
    let out = ssh(&other, &known_hosts, port, "sh -s", &stdin);
    assert_eq!(out.status.code(), Some(255), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{out:?}"
    );
    assert!(sim.stderr().contains("refused"), "{}", sim.stderr());
    // At exit it reports its own CPU per connection.
    let said = sim.stop();
    assert!(said.contains("ms per connection"), "{said}");
    assert!(
        said.contains(
            ": 12 probes answered, 0 hung, 0 dropped, 3 commands refused, 6 other commands"
        ),
        "{said}"
    );
}

/// The inventory's `sim` label of each node (`hang`, `drop`, `refuse` or none).
fn fault_labels(inventory: &Path) -> Vec<(String, Option<String>)> {
    let doc: toml::Table = std::fs::read_to_string(inventory).unwrap().parse().unwrap();
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["labels"]
                    .get("sim")
                    .map(|v| v.as_str().unwrap().to_string()),
            )
        })
        .collect()
}

/// `--listen CIDR --base-port P`: node i on address i mod the range's size and port P + i / size
/// (deterministic), in the inventory, the host list, known_hosts and the ssh_config alike; every
/// node answers gpufleet as its fixture says, and OpenSSH reaches one by name. `--names fixture`
/// keeps the fixture in the name.
#[test]
fn sim_spreads_nodes_over_a_loopback_range_with_deterministic_ports() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inventory = dir.join("fleet.toml");
    let hosts = dir.join("hosts");
    // A /29 of its own (6 addresses) and a port that only this run uses on them.
    let third = std::process::id() % 250;
    let range = format!("127.9.{third}.0/29");
    let base: u16 = 2200;
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            "9",
            "--listen",
            &range,
            "--base-port",
            &base.to_string(),
            "--names",
            "fixture",
            "--write-inventory",
            inventory.to_str().unwrap(),
            "--write-hosts",
            hosts.to_str().unwrap(),
        ],
    );
    let summary = format!(
        "9 nodes on 127.9.{third}.1–127.9.{third}.6 (6 addresses), ports {base}–{}",
        base + 1
    );
    assert!(sim.banner.contains(&summary), "{}", sim.banner);
    let doc: toml::Table = std::fs::read_to_string(&inventory)
        .unwrap()
        .parse()
        .unwrap();
    let placed: Vec<(String, String, i64)> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["host"].as_str().unwrap().to_string(),
                n["port"].as_integer().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, i64)> = (0..9)
        .map(|i| {
            (
                format!("127.9.{third}.{}", i % 6 + 1),
                i64::from(base) + (i / 6) as i64,
            )
        })
        .collect();
    assert_eq!(
        placed
            .iter()
            .map(|p| (p.1.clone(), p.2))
            .collect::<Vec<_>>(),
        want
    );
    let nodes = inventory_nodes(&inventory);
    for (name, _, fixture) in &nodes {
        assert!(
            name.starts_with("sim-") && name.ends_with(&format!("-{fixture}")),
            "{name}"
        );
    }
    let listed: Vec<String> = std::fs::read_to_string(&hosts)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let want_list: Vec<String> = want.iter().map(|(h, p)| format!("{h}:{p}")).collect();
    assert_eq!(listed, want_list);
    let kh = std::fs::read_to_string(dir.join("fleet.toml.known_hosts")).unwrap();
    assert!(
        kh.starts_with(&format!("[127.9.{third}.1]:{base} ssh-ed25519 ")),
        "{kh}"
    );

    let report = snapshot(dir, &inventory, &[]);
    let reported = report["nodes"].as_array().unwrap();
    assert_eq!(reported.len(), 9, "{report:#}");
    let mut failures = Vec::new();
    for node in reported {
        let (_, _, fixture) = nodes
            .iter()
            .find(|n| n.0 == node["name"].as_str().unwrap())
            .unwrap();
        failures.extend(check_expected(&any_fixture(fixture), node));
    }
    assert!(
        failures.is_empty(),
        "{}
{}",
        failures.join("\n"),
        sim.stderr()
    );
    // OpenSSH by name, through the ssh_config: the node on the range's last address.
    let boundary = "gpufleet-0123456789abcdef0123456789abcdef";
    let out = ssh_by_name(
        &dir.join("hosts.ssh_config"),
        &nodes[5].0,
        &probe_as_command(boundary),
        false,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).ends_with(&format!("{boundary} end ok\n")));
    sim.stop();
}

#[test]
fn hung_dropping_and_refusing_sim_nodes_are_reported_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inventory = dir.join("fleet.toml");
    let fixture = any_fixture("h200-open-580-k6.18-real");
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            "4",
            "--hang",
            "25%",
            "--drop",
            "25%",
            "--refuse",
            "25%",
            "--latency",
            "20ms±5ms",
            "--fixtures",
            fixture.to_str().unwrap(),
            "--write-inventory",
            inventory.to_str().unwrap(),
        ],
    );
    assert!(
        sim.banner
            .contains("1 hanging, 1 dropping, 1 refusing, 20 ms ± 5 ms round trip"),
        "{}",
        sim.banner
    );
    let labels = fault_labels(&inventory);
    let mut seen: Vec<Option<String>> = labels.iter().map(|l| l.1.clone()).collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            None,
            Some("drop".into()),
            Some("hang".into()),
            Some("refuse".into())
        ]
    );
    let doc = snapshot(dir, &inventory, &["--deadline", "4"]);
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4);
    let listed = inventory_nodes(&inventory);
    let codes = |n: &Value| -> Vec<String> {
        n["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r["code"].as_str().unwrap(),
                    r["message"].as_str().unwrap()
                )
            })
            .collect()
    };
    for (name, label) in &labels {
        let node = nodes.iter().find(|n| n["name"] == name.as_str()).unwrap();
        let said = codes(node);
        match label.as_deref() {
            None => {
                assert_eq!(
                    check_expected(&fixture_of(&listed, node), node),
                    Vec::<String>::new()
                );
                // Every exchange waits one round trip (≥ 15 ms): the probe's took at least one.
                assert!(node["duration_ms"].as_u64().unwrap() >= 15, "{node:#}");
            }
            Some("hang") => {
                assert_eq!(node["status"], "unreachable", "{node:#}");
                assert!(said[0].contains("deadline passed"), "{said:?}");
            }
            Some("drop") => {
                // Half the answer, then the connection closed: cut short, never a verdict.
                assert_ne!(node["status"], "ready", "{node:#}");
                assert!(
                    said.iter()
                        .any(|r| r.starts_with("probe-incomplete")
                            && r.contains("connection closed")),
                    "{said:?}"
                );
            }
            Some("refuse") => {
                assert_eq!(node["status"], "unreachable", "{node:#}");
                assert!(
                    said[0].starts_with("ssh-refused") && said[0].contains("Connection refused"),
                    "{said:?}"
                );
            }
            Some(other) => panic!("label {other}"),
        }
    }
    let said = sim.stop();
    // The refused node never reached the server: 3 connections.
    assert!(
        said.contains("gpufleet sim: 3 connections: 1 probes answered, 1 hung, 1 dropped"),
        "{said}"
    );
}

#[test]
fn demo_prints_the_simulated_fleet_as_a_table_when_not_on_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    // stdout is a pipe here: the table, then exit 0 (the sim's files are gone afterwards).
    let out = gpufleet(
        dir,
        &[
            "demo",
            "--nodes",
            "12",
            "--deadline",
            "3",
            "--latency",
            "5ms±2ms",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
    assert!(text.starts_with("NODE "), "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("gpu-r")).collect();
    assert_eq!(rows.len(), 12, "{text}");
    // 12 nodes with 1 % faults: none; every status of the mix shows.
    for status in ["ready", "migrate", "blocked", "attention", "no-driver"] {
        assert!(
            rows.iter()
                .any(|r| r.split_whitespace().nth(1) == Some(status)),
            "{status}: {text}"
        );
    }
    assert!(text.contains("12 nodes: "), "{text}");
    assert!(err.contains("gpufleet sim: 12 nodes on 127.0.0.1"), "{err}");
    // Rack-style names, in order.
    let names: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.split_whitespace().next())
        .collect();
    assert_eq!(names[..2], ["gpu-r01-n01", "gpu-r01-n02"], "{text}");
    assert_eq!(names[8], "gpu-r02-n01", "{text}");
}

/// `demo --listen CIDR --base-port P` serves its nodes there (the summary says where).
#[test]
fn demo_listens_where_it_is_told() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let third = 250 + std::process::id() % 5;
    let range = format!("127.9.{third}.0/30");
    let out = gpufleet(
        dir,
        &[
            "demo",
            "--nodes",
            "5",
            "--deadline",
            "5",
            "--latency",
            "0",
            "--hang",
            "0",
            "--drop",
            "0",
            "--refuse",
            "0",
            "--listen",
            &range,
            "--base-port",
            "2300",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
    let want = format!("5 nodes on 127.9.{third}.1–127.9.{third}.2 (2 addresses), ports 2300–2302");
    assert!(err.contains(&want), "{err}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("gpu-r01-n0")).count(),
        5,
        "{text}"
    );
    let bad = gpufleet(dir, &["demo", "--listen", "10.0.0.0/8"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("loopback"));
}

/// An installed gpufleet (the binary alone, copied elsewhere) runs the demo from its built-in
/// corpus: no CARGO_MANIFEST_DIR, a working folder without sources, and this source tree hidden
/// (an empty tmpfs over it, in a mount namespace of its own: needs root and unshare). Every
/// status shows (the stand-ins ran: execute bits kept; the sysfs links resolved), and the
/// unpacked corpus is gone from TMPDIR afterwards.
#[test]
fn an_installed_binary_runs_the_demo_from_its_built_in_corpus() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for d in ["bin", "elsewhere", "home", "tmp"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let bin = dir.join("bin/gpufleet");
    std::fs::copy(env!("CARGO_BIN_EXE_gpufleet"), &bin).unwrap();
    let hide = "mount -t tmpfs none \"$0\" && exec \"$@\"";
    let out = Command::new(support::need("unshare"))
        .args(["--mount", "--propagation", "private", "sh", "-c", hide])
        .arg(manifest())
        .arg(&bin)
        .args(["demo", "--nodes", "5", "--deadline", "5", "--latency", "0"])
        .args(["--hang", "0", "--drop", "0", "--refuse", "0"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.join("home"))
        .env("TMPDIR", dir.join("tmp"))
        .current_dir(dir.join("elsewhere"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
    assert!(text.starts_with("NODE "), "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("gpu-r")).collect();
    let statuses: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        statuses,
        ["ready", "migrate", "blocked", "attention", "no-driver"],
        "{text}"
    );
    // nvidia-smi answered from the fixture's bin/ stand-in (an executable in the archive).
    assert!(text.contains("8x NVIDIA A100-SXM4-80GB"), "{text}");
    assert!(text.contains("5 nodes: "), "{text}");
    let left: Vec<_> = std::fs::read_dir(dir.join("tmp")).unwrap().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

/// `snapshot --brief` keeps stdout one line per node and says on stderr what to do for each
/// code it showed: an unknown host key gets the ssh-keyscan / `--host-key-policy accept-new`
/// advice (issue 23); `gpufleet reasons CODE` says the same.
#[test]
fn brief_gives_each_codes_hint_on_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inventory = dir.join("fleet.toml");
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            "2",
            "--write-inventory",
            inventory.to_str().unwrap(),
        ],
    );
    let nodes = inventory_nodes(&inventory);
    // A host list: no known_hosts of the simulator's, so both host keys are unknown.
    let list: String = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}\n", n.1))
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "-i", "-", "--brief", "--ssh-config", "none"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.join("home"))
        .env("GPUFLEET_KNOWN_HOSTS", dir.join("empty_known_hosts"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(list.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    // No node answered: exit 2, the table still written.
    assert_eq!(out.status.code(), Some(2), "{text}\n{err}");
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.lines().skip(1).all(|l| l.contains("host-key-unknown")),
        "{text}"
    );
    let hint = err
        .lines()
        .find(|l| l.starts_with("hint: host-key-unknown (2 nodes): "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        hint.contains("ssh-keyscan") && hint.contains("--host-key-policy accept-new"),
        "{hint}"
    );
    let explained = gpufleet(dir, &["reasons", "host-key-unknown"]);
    assert_eq!(explained.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&explained.stdout).contains("--host-key-policy accept-new"));
    sim.stop();
}
