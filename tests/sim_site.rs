//! `gpufleet sim` modelling a large site (issue 26): nodes over a loopback range take ports
//! below the ephemeral range without `--base-port`, racks get their own round-trip latency
//! (`--latency 0,r2=…`), and `--slow-accept` nodes take their TCP connections late. Scanned by
//! gpufleet over real SSH; scale itself is measured by `bench/sim_scale.sh`, not here.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Read;
use std::time::{Duration, Instant};

use support::sim::*;

/// The first bytes a node sends (its SSH banner) and how long after the TCP connection they
/// came.
fn banner_after(host: &str, port: u16) -> (String, Duration) {
    let mut s = std::net::TcpStream::connect((host, port)).unwrap();
    let t = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = [0u8; 8];
    s.read_exact(&mut buf).unwrap();
    (String::from_utf8_lossy(&buf).into_owned(), t.elapsed())
}

/// 16 nodes on a /28 (14 addresses, so two ports: 2200 and 2201 without `--base-port`); rack
/// r2 (nodes 8 to 15) at 400 ms a round trip, rack r1 at none; 1 node of 16 (10 %) slow to
/// accept by 900 ms. The slow node's banner comes ≥ 900 ms after its TCP connection, another's
/// at once; every node answers gpufleet's probe, and every rack-r2 node's session lasts at least
/// two of its round trips (key exchange, authentication, the exec: more than two), longer than
/// any rack-r1 node's.
#[test]
fn racks_get_their_latency_and_slow_nodes_accept_late() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let inventory = dir.join("fleet.toml");
    // A range of its own (tests/sim.rs takes 127.9.x.0): no other run binds these ports there.
    let third = std::process::id() % 250;
    let range = format!("127.10.{third}.0/28");
    let sim = Sim::start(
        dir,
        &[
            "--nodes",
            "16",
            "--listen",
            &range,
            "--latency",
            "0,r2=400ms",
            "--slow-accept",
            "10%",
            "--accept-delay",
            "900ms",
            "--write-inventory",
            inventory.to_str().unwrap(),
        ],
    );
    for part in [
        format!("16 nodes on 127.10.{third}.1–127.10.{third}.14 (14 addresses), ports 2200–2201"),
        "1 slow to accept (900 ms)".to_string(),
        "0 ms round trip, rack r2 400 ms".to_string(),
    ] {
        assert!(sim.banner.contains(&part), "{part}: {}", sim.banner);
    }
    let doc: toml::Table = std::fs::read_to_string(&inventory)
        .unwrap()
        .parse()
        .unwrap();
    let nodes: Vec<(String, String, u16, Option<String>)> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["host"].as_str().unwrap().to_string(),
                u16::try_from(n["port"].as_integer().unwrap()).unwrap(),
                n["labels"]
                    .get("sim")
                    .map(|v| v.as_str().unwrap().to_string()),
            )
        })
        .collect();
    let slow: Vec<usize> = (0..16)
        .filter(|&i| nodes[i].3.as_deref() == Some("slow-accept"))
        .collect();
    assert_eq!(slow.len(), 1, "{nodes:?}");
    let s = slow[0];
    let (banner, late) = banner_after(&nodes[s].1, nodes[s].2);
    assert!(banner.starts_with("SSH-2.0"), "{banner:?}");
    assert!(late >= Duration::from_millis(900), "{late:?}");
    // A node of rack r1 that is not the slow one sends its banner without waiting for it.
    let quick = (0..8).find(|i| *i != s).unwrap();
    let (banner, _) = banner_after(&nodes[quick].1, nodes[quick].2);
    assert!(banner.starts_with("SSH-2.0"), "{banner:?}");

    let doc = snapshot(dir, &inventory, &["--ssh-config", "none"]);
    let reported = doc["nodes"].as_array().unwrap();
    assert_eq!(reported.len(), 16);
    let took = |i: usize| -> u64 {
        let r = reported
            .iter()
            .find(|r| r["name"] == nodes[i].0.as_str())
            .unwrap();
        assert_ne!(r["status"], "unreachable", "{r}");
        r["duration_ms"].as_u64().unwrap()
    };
    let r1_max = (0..8).filter(|i| *i != s).map(took).max().unwrap();
    let r2_min = (8..16).filter(|i| *i != s).map(took).min().unwrap();
    assert!(r2_min >= 800, "rack r2: {r2_min} ms");
    assert!(
        r1_max < r2_min,
        "rack r1 up to {r1_max} ms, r2 from {r2_min} ms"
    );
    let said = sim.stop();
    assert!(said.contains("ms per connection"), "{said}");
}
