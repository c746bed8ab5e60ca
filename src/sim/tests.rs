//! Unit tests of the simulator: options, faults, latency, the written files.

use super::*;

#[test]
fn shares_parse() {
    assert_eq!(parse_share("10%"), Ok(10.0));
    assert_eq!(parse_share("2.5"), Ok(2.5));
    assert!(parse_share("101%").is_err());
    assert!(parse_share("-1").is_err());
    assert!(parse_share("x").is_err());
}

#[test]
fn faults_are_the_shares_asked_spread_evenly_one_per_node() {
    let which = |v: &[Fault], f: Fault| {
        v.iter()
            .enumerate()
            .filter(|(_, x)| **x == f)
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        faults(10, 0.0, 0.0, 0.0, 0.0).unwrap(),
        vec![Fault::None; 10]
    );
    assert_eq!(
        faults(4, 100.0, 0.0, 0.0, 0.0).unwrap(),
        vec![Fault::Hang; 4]
    );
    let v = faults(1000, 10.0, 5.0, 2.5, 1.0).unwrap();
    assert_eq!(which(&v, Fault::Hang).len(), 100);
    assert_eq!(which(&v, Fault::Drop).len(), 50);
    assert_eq!(which(&v, Fault::Refuse).len(), 25);
    assert_eq!(which(&v, Fault::SlowAccept).len(), 10);
    // Spread: every tenth of the fleet holds about a tenth of the hanging nodes.
    for k in 0..10 {
        let here = which(&v, Fault::Hang)
            .iter()
            .filter(|&&i| i / 100 == k)
            .count();
        assert!((5..=15).contains(&here), "tenth {k}: {here}");
    }
    // Two nodes, half hang: one of them.
    assert_eq!(
        which(&faults(2, 50.0, 0.0, 0.0, 0.0).unwrap(), Fault::Hang).len(),
        1
    );
    assert!(faults(10, 60.0, 30.0, 5.0, 6.0).is_err());
}

fn bound_pair() -> Vec<Bound> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let ls = rt
        .block_on(layout::bind(
            &[Fault::None, Fault::Hang],
            Listen::default(),
            None,
        ))
        .expect("bind");
    let answer = Arc::new(corpus::Answer::new(b"", "gpufleet-x", 0));
    ls.into_iter()
        .enumerate()
        .map(|(i, (addr, socket))| Bound {
            node: Arc::new(SimNode {
                name: format!("sim-00{i}-f\"x"),
                rtt: Rtt::default(),
                answer: answer.clone(),
                fault: if i == 1 { Fault::Hang } else { Fault::None },
                upgrade: None,
            }),
            canary: false,
            fixture: "f\"x".into(),
            ip: std::net::Ipv4Addr::LOCALHOST,
            port: addr.port(),
            host_key: new_key("k").expect("key"),
            socket,
        })
        .collect()
}

#[test]
fn the_inventory_names_every_node_and_its_fixture() {
    let bound = bound_pair();
    let mut text = Vec::new();
    inventory_to(
        &mut text,
        &bound,
        "inv.toml.id_ed25519",
        "inv.toml.known_hosts",
        false,
    )
    .expect("write");
    let text = String::from_utf8(text).expect("UTF-8");
    let doc: toml::Table = text.parse().expect("TOML");
    let nodes = doc["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0]["name"].as_str(), Some("sim-000-f\"x"));
    assert_eq!(nodes[1]["labels"]["sim"].as_str(), Some("hang"));
    assert_eq!(doc["read_only"].as_bool(), Some(true));
    let dir = tempfile::tempdir().expect("tempdir");
    let w = write_inventory(
        &dir.path().join("inv.toml"),
        &bound,
        &new_key("u").expect("key"),
        false,
    )
    .expect("write");
    let kh = std::fs::read_to_string(&w.known_hosts).expect("known_hosts");
    assert_eq!(kh.lines().count(), 2);
    assert!(kh.starts_with(&format!("[127.0.0.1]:{} ssh-ed25519 ", bound[0].port)));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&w.key).expect("key file").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let parsed = crate::inventory::Inventory::load(&w.inventory);
    assert!(parsed.is_ok(), "{:?}", parsed.err());

    // The host list and the OpenSSH config name the same ports and the same files.
    let cfg = write_hosts(&dir.path().join("hosts"), &bound, &w).expect("hosts");
    let list = std::fs::read_to_string(dir.path().join("hosts")).expect("hosts");
    let want: Vec<String> = bound
        .iter()
        .map(|b| format!("127.0.0.1:{}", b.port))
        .collect();
    assert_eq!(list.lines().collect::<Vec<_>>(), want);
    let cfg = std::fs::read_to_string(cfg).expect("ssh_config");
    assert!(
        cfg.contains(&format!(
            "Host sim-001-f\"x\n  HostName 127.0.0.1\n  Port {}\n",
            bound[1].port
        )),
        "{cfg}"
    );
    assert!(
        cfg.contains(&format!("IdentityFile {}\n", w.key.display())),
        "{cfg}"
    );
    assert!(cfg.contains("StrictHostKeyChecking yes\n"), "{cfg}");
}

#[test]
fn a_refusing_node_refuses_the_tcp_connection() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let socks = layout::bind(&[Fault::Refuse], Listen::default(), None)
            .await
            .expect("bind");
        let port = socks[0].0.port();
        let e = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect_err("refused");
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
        // The port stays taken while the node exists.
        assert!(std::net::TcpListener::bind(("127.0.0.1", port)).is_err());
    });
}

/// The inventory of a large simulated site is parsed node by node (`inventory::parse_raw`'s
/// path for large files: one `[[nodes]]` table at a time), and as many nodes as were written.
#[test]
fn a_large_inventory_is_parsed_node_by_node() {
    let key = new_key("k").expect("key");
    let answer = Arc::new(corpus::Answer::new(b"", "gpufleet-x", 0));
    let listen = parse_listen("127.9.0.0/16").expect("range");
    let n = 3000;
    let faults = faults(n, 1.0, 1.0, 1.0, 1.0).expect("faults");
    let bound: Vec<Bound> = (0..n)
        .map(|i| Bound {
            node: Arc::new(SimNode {
                name: layout::node_name(Names::Rack, i, n, "f"),
                rtt: Rtt::default(),
                answer: answer.clone(),
                fault: faults[i],
                upgrade: None,
            }),
            canary: false,
            fixture: "h200-open-580-k6.18-real".into(),
            ip: listen.addr_of(i),
            port: 2200,
            host_key: key.clone(),
            socket: Socket::Refuse(tokio::net::TcpSocket::new_v4().expect("socket")),
        })
        .collect();
    let mut text = Vec::new();
    inventory_to(&mut text, &bound, "k", "kh", false).expect("write");
    let text = String::from_utf8(text).expect("UTF-8");
    assert!(crate::inventory::parses_node_by_node(&text));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.toml");
    std::fs::write(&path, &text).expect("write");
    let inv = crate::inventory::Inventory::load(&path).expect("inventory");
    assert_eq!(inv.nodes.len(), n);
}
