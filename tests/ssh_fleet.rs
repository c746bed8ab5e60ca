//! Fleet scans over real OpenSSH servers: one sshd per fixture node on 127.0.0.N, scanned by the
//! real binary. Each test uses its own addresses, so tests run in parallel.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::*;

#[test]
fn every_fixture_over_ssh_matches_its_expected_values() {
    // nodes/ and nodes-v2/ (the schema-2 cases), one sshd each.
    let fixtures = all_fixture_nodes();
    assert!(fixtures.len() >= 16, "need at least 16 fixture nodes");
    let fleet = Fleet::start(&fixtures, 10);
    let (code, doc) = fleet.snapshot(&[]);
    assert_eq!(code, 0);
    assert_eq!(doc["nodes"].as_array().unwrap().len(), fixtures.len());
    let mut failures = Vec::new();
    for f in &fixtures {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let n = node(&doc, &name);
        failures.extend(check_expected(f, n));
    }
    assert!(failures.is_empty(), "over SSH:\n{}", failures.join("\n"));
    // Inventory order in the JSON document, whatever the completion order.
    let names: Vec<&str> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    let inventory_order: Vec<String> = fixtures
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, inventory_order);
    assert_eq!(doc["summary"]["unreachable"], 0);
}

#[test]
fn selection_by_name_group_and_label_and_jsonl_streaming() {
    let fixtures: Vec<_> = fixture_nodes().into_iter().take(3).collect();
    let fleet = Fleet::start(&fixtures, 30);
    let mut text = fleet.inventory_text();
    text = text.replacen(
        "[[nodes]]\n",
        "[groups.first]\nlabels = { tier = \"one\" }\n[[nodes]]\ngroups = [\"first\"]\n",
        1,
    );
    fleet.write_inventory(&text);
    let first = fixtures[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let second = fixtures[1]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    for sel in [
        vec!["--group", "first"],
        vec!["--label", "tier=one"],
        vec!["--node", &first],
    ] {
        let (_, doc) = fleet.snapshot(&sel);
        let names: Vec<&str> = doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, [first.as_str()], "{sel:?}");
    }
    let inv = fleet.inventory.display().to_string();
    let out = fleet.gpufleet(&[
        "snapshot",
        "-i",
        &inv,
        "--format",
        "jsonl",
        "--concurrency",
        "1",
        "--node",
        &second,
        "--node",
        &first,
    ]);
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[..2].iter().all(|l| l["type"] == "node"));
    assert_eq!(lines[2]["type"], "summary");
    // One at a time, nodes go in inventory order, whatever order the selectors name them in.
    assert_eq!(lines[0]["data"]["name"], first.as_str());
    assert_eq!(lines[1]["data"]["name"], second.as_str());
    // A selector that matches nothing is an error, with a suggestion.
    let out = fleet.gpufleet(&["snapshot", "-i", &inv, "--node", &format!("{first}x")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean"));
}

#[test]
fn unreachable_nodes_are_data_and_never_stop_the_others() {
    let good = fixture("h200-open-580-k6.18-real");
    let fleet = Fleet::start(&[good.clone(), good.clone()], 50);
    let wrong_key = &fleet.nodes[1].1;
    // Node 2's known_hosts line carries another key: its host key looks changed.
    let other = fleet.tmp.path().join("other_host_key");
    keygen(&other, "");
    let kh = std::fs::read_to_string(&fleet.known_hosts)
        .unwrap()
        .replace(&public_key(&wrong_key.host_key), &public_key(&other));
    std::fs::write(&fleet.known_hosts, kh).unwrap();
    // A port nobody listens on.
    let closed = free_port("127.0.0.53");
    // A listener that accepts TCP and never speaks.
    let silent = TcpListener::bind("127.0.0.54:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for s in silent.incoming().flatten() {
            let _ = held_tx.send(s);
        }
    });
    // A key the server does not accept.
    let stranger = fleet.tmp.path().join("id_stranger");
    keygen(&stranger, "");
    let (a, b) = (&fleet.nodes[0].1, &fleet.nodes[1].1);
    let text = format!(
        "{}\n[[nodes]]\nname = \"ok\"\nhost = \"{}\"\nport = {}\nroot = \"{r}\"\n\
         [[nodes]]\nname = \"changed-key\"\nhost = \"{}\"\nport = {}\nroot = \"{r}\"\n\
         [[nodes]]\nname = \"closed\"\nhost = \"127.0.0.53\"\nport = {closed}\n\
         [[nodes]]\nname = \"silent\"\nhost = \"127.0.0.54\"\nport = {silent_port}\n\
         [[nodes]]\nname = \"stranger\"\nhost = \"{}\"\nport = {}\nidentity_file = \"{}\"\nroot = \"{r}\"\n",
        fleet.inventory_text().split("[[nodes]]").next().unwrap(),
        a.addr,
        a.port,
        b.addr,
        b.port,
        a.addr,
        a.port,
        stranger.display(),
        r = good.join("root").display(),
    );
    fleet.write_inventory(&text);
    let start = Instant::now();
    let (code, doc) = fleet.snapshot(&["--check"]);
    let took = start.elapsed();
    drop(held_rx);
    assert_eq!(code, 2, "--check with unreachable nodes exits 2");
    assert_eq!(node(&doc, "ok")["status"], "ready");
    let expect = [
        ("changed-key", "host-key-mismatch", "CHANGED"),
        ("closed", "ssh-refused", "refused"),
        ("silent", "ssh-timeout", "did not finish within 5 s"),
        ("stranger", "ssh-auth-failed", "accepted none of"),
    ];
    for (name, code, text) in expect {
        let n = node(&doc, name);
        assert_eq!(n["status"], "unreachable", "{name}: {n:#}");
        assert_eq!(codes(n), [code], "{name}");
        let msg = n["reasons"][0]["message"].as_str().unwrap();
        assert!(msg.contains(text), "{name}: {msg}");
        for fact in ["kernel", "driver", "gpus", "dma_buf", "peermem", "taint"] {
            assert!(n[fact].is_null(), "{name}: {fact} should be null");
        }
    }
    let changed = node(&doc, "changed-key")["reasons"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        changed.contains("SHA256:"),
        "the fingerprint is shown: {changed}"
    );
    // The silent listener costs the auth timeout (5 s), not more; the nodes run in parallel.
    assert!(took < Duration::from_secs(12), "took {took:?}");
    assert_eq!(doc["summary"]["unreachable"], 4);
}

#[test]
fn unknown_host_keys_are_refused_or_learned_and_changed_keys_never() {
    let good = fixture("cpu-node-no-driver-k6.8");
    let mut fleet = Fleet::start(std::slice::from_ref(&good), 70);
    std::fs::write(&fleet.known_hosts, "").unwrap();
    let name = good.file_name().unwrap().to_string_lossy().into_owned();

    let (_, doc) = fleet.snapshot(&[]);
    let n = node(&doc, &name);
    assert_eq!(codes(n), ["host-key-unknown"]);
    let msg = n["reasons"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("SHA256:") && msg.contains("accept-new"),
        "{msg}"
    );

    let (_, doc) = fleet.snapshot(&["--host-key-policy", "accept-new"]);
    assert_eq!(node(&doc, &name)["status"], "no-driver");
    let learned = std::fs::read_to_string(&fleet.known_hosts).unwrap();
    let sshd = &fleet.nodes[0].1;
    assert_eq!(
        learned.trim(),
        sshd.known_hosts_line(),
        "written to the inventory's known_hosts"
    );

    // Strict again: now known.
    let (_, doc) = fleet.snapshot(&[]);
    assert_eq!(node(&doc, &name)["status"], "no-driver");

    // The node comes back with a new host key: refused even with accept-new, file untouched.
    fleet.restart(0, true, "");
    let (_, doc) = fleet.snapshot(&["--host-key-policy", "accept-new"]);
    assert_eq!(codes(node(&doc, &name)), ["host-key-mismatch"]);
    assert_eq!(
        std::fs::read_to_string(&fleet.known_hosts).unwrap(),
        learned
    );
}

#[test]
fn ssh_agent_keys_certificates_and_encrypted_keys() {
    let good = fixture("h100-open-555-k6.6-peermem");
    let mut fleet = Fleet::start(std::slice::from_ref(&good), 90);
    let name = good.file_name().unwrap().to_string_lossy().into_owned();
    let inv_no_identity: String = fleet
        .inventory_text()
        .lines()
        .filter(|l| !l.starts_with("identity_file"))
        .collect::<Vec<_>>()
        .join("\n");

    // 1. The key only in a real ssh-agent.
    let sock = fleet.tmp.path().join("agent.sock");
    let mut agent = std::process::Command::new(support::need("ssh-agent"))
        .args(["-D", "-a"])
        .arg(&sock)
        .stdout(Stdio::null())
        .spawn()
        .expect("ssh-agent");
    let start = Instant::now();
    while !sock.exists() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let add = std::process::Command::new(support::need("ssh-add"))
        .arg(&fleet.user_key)
        .env("SSH_AUTH_SOCK", &sock)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(add.success());
    fleet.write_inventory(&inv_no_identity);
    let inv = fleet.inventory.display().to_string();
    let out = fleet
        .command(&["snapshot", "-i", &inv, "--format", "json"])
        .env("SSH_AUTH_SOCK", &sock)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        node(&doc, &name)["status"],
        "migrate",
        "via the agent: {doc:#}"
    );
    let _ = agent.kill();
    let _ = agent.wait();

    // 2. A passphrase-protected key and no agent: a clear message.
    let locked = fleet.tmp.path().join("id_locked");
    keygen(&locked, "correct horse");
    std::fs::write(&fleet.authorized_keys, public_key(&locked) + "\n").unwrap();
    fleet.write_inventory(&fleet.inventory_text().replace(
        &fleet.user_key.display().to_string(),
        &locked.display().to_string(),
    ));
    let (_, doc) = fleet.snapshot(&[]);
    let n = node(&doc, &name);
    assert_eq!(codes(n), ["ssh-auth-failed"]);
    let msg = n["reasons"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("passphrase-protected") && msg.contains("ssh-add"),
        "{msg}"
    );

    // 3. An OpenSSH user certificate: the server trusts the CA, not the key.
    let ca = fleet.tmp.path().join("user_ca");
    keygen(&ca, "");
    let certified = fleet.tmp.path().join("id_cert");
    keygen(&certified, "");
    let sign = std::process::Command::new(support::need("ssh-keygen"))
        .args(["-q", "-s"])
        .arg(&ca)
        .args(["-I", "gpufleet-test", "-n", &local_user(), "-V", "-5m:+1h"])
        .arg(certified.with_extension("pub"))
        .status()
        .unwrap();
    assert!(sign.success());
    assert!(fleet.tmp.path().join("id_cert-cert.pub").exists());
    std::fs::write(&fleet.authorized_keys, "").unwrap();
    let trust_ca = format!("TrustedUserCAKeys {}", ca.with_extension("pub").display());
    fleet.restart(0, false, &trust_ca);
    fleet.write_inventory(&fleet.inventory_text().replace(
        &fleet.user_key.display().to_string(),
        &certified.display().to_string(),
    ));
    let (_, doc) = fleet.snapshot(&[]);
    assert_eq!(
        node(&doc, &name)["status"],
        "migrate",
        "via the certificate: {doc:#}"
    );
}

/// Host names, ports, users and keys from an OpenSSH client config, as `ssh` would take them;
/// the inventory names only the nodes.
#[test]
fn an_openssh_client_config_fills_what_the_inventory_leaves_out() {
    let good = fixture("h200-open-580-k6.18-real");
    let fleet = Fleet::start(std::slice::from_ref(&good), 100);
    let sshd = &fleet.nodes[0].1;
    let ssh_config = fleet.tmp.path().join("ssh_config");
    std::fs::write(
        &ssh_config,
        format!(
            "Host h200\n  HostName {}\n  Port {}\n  User {}\n  IdentityFile {}\n  ServerAliveInterval 30\n",
            sshd.addr,
            sshd.port,
            local_user(),
            fleet.user_key.display()
        ),
    )
    .unwrap();
    fleet.write_inventory(&format!(
        "known_hosts = \"{}\"\n[[nodes]]\nname = \"h200\"\nroot = \"{}\"\n",
        fleet.known_hosts.display(),
        good.join("root").display()
    ));
    let cfg = ssh_config.display().to_string();
    let (_, doc) = fleet.snapshot(&["--ssh-config", &cfg]);
    assert_eq!(node(&doc, "h200")["status"], "ready", "{doc:#}");
    // Without it, "h200" is not a host that resolves.
    let (_, doc) = fleet.snapshot(&["--ssh-config", "none"]);
    assert_eq!(node(&doc, "h200")["status"], "unreachable");
}

/// A TCP peer on `addr` (a port of its own) that is no SSH server: for each connection it reads
/// what the client sends first (its SSH identification line) when `read_first`, writes `reply`,
/// keeps the connection `hold` long, and closes it. Returns the port.
fn fake_peer(addr: &str, read_first: bool, reply: &'static [u8], hold: Duration) -> u16 {
    use std::io::{Read, Write};
    let listener = TcpListener::bind((addr, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            std::thread::spawn(move || {
                if read_first {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
                    let _ = s.read(&mut [0u8; 512]);
                }
                let _ = s.write_all(reply);
                std::thread::sleep(hold);
            });
        }
    });
    port
}

/// Scans the nodes `(name, host, port)` (no sshd behind them) with the real binary
/// (`snapshot --format json`); returns the document and how long the scan took.
fn scan_peers(octet: u8, peers: &[(&str, &str, u16)]) -> (serde_json::Value, Duration) {
    let fleet = Fleet::start(&[], octet);
    let mut text = fleet.inventory_text();
    for (name, host, port) in peers {
        text.push_str(&format!(
            "[[nodes]]\nname = \"{name}\"\nhost = \"{host}\"\nport = {port}\n"
        ));
    }
    fleet.write_inventory(&text);
    let start = Instant::now();
    let (_, doc) = fleet.snapshot(&[]);
    (doc, start.elapsed())
}

/// The one reason of unreachable node `name`: (code, message).
fn unreachable_reason(doc: &serde_json::Value, name: &str) -> (String, String) {
    let n = node(doc, name);
    assert_eq!(n["status"], "unreachable", "{name}: {n:#}");
    assert_eq!(n["reasons"].as_array().unwrap().len(), 1, "{name}: {n:#}");
    for fact in ["kernel", "driver", "gpus"] {
        assert!(n[fact].is_null(), "{name}: {fact} should be null");
    }
    let r = &n["reasons"][0];
    (
        r["code"].as_str().unwrap().to_string(),
        r["message"].as_str().unwrap().to_string(),
    )
}

/// Fault matrix: a host name that does not resolve (`.invalid` never does, RFC 2606).
#[test]
fn a_name_that_does_not_resolve_is_ssh_resolve_failed() {
    let (doc, took) = scan_peers(55, &[("nowhere", "gpu-07.invalid", 22)]);
    let (code, msg) = unreachable_reason(&doc, "nowhere");
    assert_eq!(code, "ssh-resolve-failed", "{msg}");
    assert!(msg.starts_with("cannot resolve gpu-07.invalid: "), "{msg}");
    // Resolution runs under the connect timeout (3 s in the test config).
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

/// Fault matrix: an HTTP server on the SSH port.
#[test]
fn an_http_server_is_ssh_protocol_error_with_what_it_sent() {
    let port = fake_peer(
        "127.0.0.56",
        true,
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nBad Request",
        Duration::ZERO,
    );
    let (doc, _) = scan_peers(56, &[("web", "127.0.0.56", port)]);
    let (code, msg) = unreachable_reason(&doc, "web");
    assert_eq!(code, "ssh-protocol-error", "{msg}");
    // What it sent, as characters (each output escapes it once where it reaches a person).
    assert!(
        msg.contains(
            "not an SSH server: it sent \"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
        ),
        "{msg}"
    );
    // At most 80 characters of it, and cut visibly.
    assert!(
        msg.ends_with('…') && !msg.contains("Bad Request\"…"),
        "{msg}"
    );
}

/// The table of a saved snapshot, `gpufleet snapshot --from FILE --format table`.
fn table_of(doc: &serde_json::Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("doc.json");
    std::fs::write(&file, serde_json::to_vec(doc).unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "--format", "table", "--from"])
        .arg(&file)
        .env("HOME", dir.path())
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// Fault matrix: a peer that sends terminal escape sequences and bytes that are not UTF-8, then
/// closes; and one that sends them and then stays silent (it costs the auth timeout, 5 s).
#[test]
fn garbage_from_a_peer_is_ssh_protocol_error_and_shown_escaped() {
    const GARBAGE: &[u8] = b"\x1b[2J\x1b]0;owned\x07hello \xff\xfe\r\n";
    let closes = fake_peer("127.0.0.57", true, GARBAGE, Duration::ZERO);
    let stays = fake_peer(
        "127.0.0.57",
        false,
        b"\x1b[31mwelcome",
        Duration::from_secs(30),
    );
    let (doc, took) = scan_peers(
        57,
        &[
            ("garbage", "127.0.0.57", closes),
            ("garbage-then-silence", "127.0.0.57", stays),
        ],
    );
    let (code, msg) = unreachable_reason(&doc, "garbage");
    assert_eq!(code, "ssh-protocol-error", "{msg}");
    // JSON keeps what the peer sent (bytes that are not UTF-8 as U+FFFD).
    assert!(
        msg.ends_with(
            "is not an SSH server: it sent \"\x1b[2J\x1b]0;owned\x07hello \u{fffd}\u{fffd}\r\n\""
        ),
        "{msg:?}"
    );
    let (code, msg) = unreachable_reason(&doc, "garbage-then-silence");
    assert_eq!(code, "ssh-protocol-error", "{msg}");
    assert!(
        msg.ends_with("is not an SSH server: it sent \"\x1b[31mwelcome\""),
        "{msg:?}"
    );
    assert!(took < Duration::from_secs(12), "took {took:?}");
    // The table escapes it once: an ESC is `\x1b` there, never `\\x1b` (before: escaped in
    // the message and again by the table) and never raw.
    let table = table_of(&doc);
    assert!(
        table.contains(r#"it sent "\x1b[2J\x1b]0;owned\x07hello ��\r\n""#),
        "{table}"
    );
    assert!(table.contains(r#"it sent "\x1b[31mwelcome""#), "{table}");
    assert!(
        !table.contains(r"\\x1b") && !table.contains('\u{1b}'),
        "{table}"
    );
}

/// Fault matrix: a peer that sends an SSH identification line and then bytes that are no SSH
/// packet, and one whose identification line is 1 MB long: `ssh-protocol-error` (they were
/// `ssh-refused` "Index out of bounds" / "invalid SSH version string"), the bytes shown escaped.
#[test]
fn garbage_after_the_banner_and_a_huge_version_line_are_ssh_protocol_errors() {
    let garbage = fake_peer(
        "127.0.0.71",
        false,
        b"SSH-2.0-x\r\n\xff\xff\xff\xff\x1b[2Jgarbage",
        Duration::from_secs(3),
    );
    let line: &'static [u8] = Box::leak(
        [b"SSH-2.0-".as_slice(), &[b'a'; 1 << 20], b"\r\n"]
            .concat()
            .into_boxed_slice(),
    );
    let long = fake_peer("127.0.0.71", false, line, Duration::from_secs(3));
    let (doc, _) = scan_peers(
        71,
        &[
            ("after-banner", "127.0.0.71", garbage),
            ("long-version", "127.0.0.71", long),
        ],
    );
    let (code, msg) = unreachable_reason(&doc, "after-banner");
    assert_eq!(code, "ssh-protocol-error", "{msg}");
    assert!(
        msg.contains("sent an SSH identification line, then bytes that are no SSH key exchange"),
        "{msg}"
    );
    assert!(
        msg.contains("\u{fffd}\u{fffd}\u{fffd}\u{fffd}\x1b[2Jgarbage"),
        "{msg:?}"
    );
    let (code, msg) = unreachable_reason(&doc, "long-version");
    assert_eq!(code, "ssh-protocol-error", "{msg}");
    assert!(msg.contains("over 255 bytes"), "{msg}");
    assert!(msg.len() < 400, "{} bytes", msg.len());
}

/// Fault matrix: a listener that accepts and closes at once, saying nothing (not an SSH server,
/// or an sshd turning connections away before its identification line).
#[test]
fn a_peer_that_closes_at_once_is_ssh_protocol_error() {
    let port = fake_peer("127.0.0.58", false, b"", Duration::ZERO);
    let (doc, _) = scan_peers(58, &[("closer", "127.0.0.58", port)]);
    let (code, msg) = unreachable_reason(&doc, "closer");
    assert_eq!(code, "ssh-protocol-error", "{msg}");
    assert!(
        msg.contains("closed the connection without sending an SSH identification line"),
        "{msg}"
    );
}

/// `@cert-authority` known_hosts lines against real sshd servers with an OpenSSH
/// `HostCertificate`: a valid certificate is accepted with no plain line for the host; a wrong
/// principal, an expired certificate, a revoked CA and an untrusted CA are refused.
#[test]
fn host_certificates_signed_by_a_trusted_ca_are_accepted_and_bad_ones_refused() {
    let good = fixture("h200-open-580-k6.18-real");
    let mut fleet = Fleet::start(&vec![good.clone(); 5], 60);
    let ca = fleet.tmp.path().join("host_ca");
    keygen(&ca, "");
    let other_ca = fleet.tmp.path().join("other_ca");
    keygen(&other_ca, "");
    // (signing CA, principals, validity) per node.
    let certs = [
        (&ca, "127.0.0.60,gpu-60", "-5m:+1h"),
        (&ca, "someone-else.example", "-5m:+1h"),
        (&ca, "127.0.0.62", "20200101:20200102"),
        (&ca, "127.0.0.63", "-5m:+1h"),
        (&other_ca, "127.0.0.64", "-5m:+1h"),
    ];
    let mut known_hosts = String::new();
    for (i, (signer, principals, validity)) in certs.iter().enumerate() {
        let sshd = &fleet.nodes[i].1;
        let st = std::process::Command::new(support::need("ssh-keygen"))
            .args(["-q", "-s"])
            .arg(signer)
            .args([
                "-I",
                "gpufleet-test-host",
                "-h",
                "-n",
                principals,
                "-V",
                validity,
            ])
            .arg(sshd.host_key.with_extension("pub"))
            .status()
            .unwrap();
        assert!(st.success());
        let cert = sshd.dir.join("host_ed25519-cert.pub");
        assert!(cert.exists());
        let name = format!("[{}]:{}", sshd.addr, sshd.port);
        known_hosts.push_str(&format!("@cert-authority {name} {}\n", public_key(&ca)));
        if i == 3 {
            known_hosts.push_str(&format!("@revoked {name} {}\n", public_key(&ca)));
        }
        fleet.restart(i, false, &format!("HostCertificate {}", cert.display()));
    }
    // No plain line for any of them: only the CA vouches.
    std::fs::write(&fleet.known_hosts, known_hosts).unwrap();
    let mut text = fleet.inventory_text();
    for i in 0..5 {
        text = text.replacen(
            "name = \"h200-open-580-k6.18-real\"",
            &format!("name = \"n{i}\""),
            1,
        );
    }
    fleet.write_inventory(&text);
    let (_, doc) = fleet.snapshot(&[]);
    assert_eq!(node(&doc, "n0")["status"], "ready", "{doc:#}");
    let expect = [
        (
            "n1",
            "host-key-mismatch",
            "127.0.0.61 is not among its principals (someone-else.example)",
        ),
        ("n2", "host-key-mismatch", "it expired at 2020-01-02"),
        ("n3", "host-key-mismatch", "which is revoked"),
        (
            "n4",
            "host-key-unknown",
            "which no matching @cert-authority line names",
        ),
    ];
    for (name, code, text) in expect {
        let (got, msg) = unreachable_reason(&doc, name);
        assert_eq!(got, code, "{name}: {msg}");
        assert!(msg.contains(text), "{name}: {msg}");
    }
}
