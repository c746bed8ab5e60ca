//! Unit tests of the TOML inventory, selection and node resolution.

use super::*;

fn inv(text: &str) -> Result<Inventory, String> {
    Inventory::parse(text, Path::new("/etc/fleet/inv.toml")).map_err(|e| e.0)
}

#[test]
fn example_inventory_loads() {
    let i = inv(include_str!("../../config/inventory.example.toml")).unwrap();
    assert!(i.nodes.len() > 100);
    assert!(i.nodes.iter().any(|n| n.canary));
}

#[test]
fn layers_resolve_node_over_groups_over_defaults() {
    let i = inv(r#"
known_hosts = "kh"
[defaults]
user = "ops"
identity_file = "keys/id"
labels = { site = "ams" }
[groups.a100]
port = 2222
labels = { gpu = "a100" }
[groups.canaries]
user = "canary-ops"
[[nodes]]
name = "gpu[01-02]"
host = "10.0.0.[1-2]"
groups = ["a100", "canaries"]
labels = { rack = "r1" }
canary = true
[[nodes]]
name = "cpu1"
user = "me"
root = "/host"
"#)
    .unwrap();
    assert_eq!(i.known_hosts.as_deref(), Some(Path::new("/etc/fleet/kh")));
    let g = &i.nodes[1];
    assert_eq!(
        (g.name.as_str(), g.host.as_str(), g.port),
        ("gpu02", "10.0.0.2", 2222)
    );
    assert_eq!(g.user, "canary-ops");
    assert_eq!(
        g.identity_file.as_deref(),
        Some(Path::new("/etc/fleet/keys/id"))
    );
    assert_eq!(g.labels.len(), 3);
    assert!(g.canary);
    let c = &i.nodes[2];
    assert_eq!(
        (c.host.as_str(), c.port, c.user.as_str(), c.root.as_str()),
        ("cpu1", 22, "me", "/host")
    );
}

#[test]
fn typos_name_line_column_and_the_closest_key() {
    let e = inv("[[nodes]]\nname = \"a\"\nusr = \"x\"\n").unwrap_err();
    assert!(
        e.starts_with("/etc/fleet/inv.toml:3:1: unknown field `usr`"),
        "{e}"
    );
    assert!(e.ends_with("did you mean `user`?"), "{e}");
    let e = inv("[defualts]\nuser = \"x\"\n").unwrap_err();
    assert!(
        e.contains(":1:2:") && e.contains("did you mean `defaults`?"),
        "{e}"
    );
    let e = inv("[groups.a100]\n[[nodes]]\nname = \"a\"\ngroups = [\"a10\"]\n").unwrap_err();
    assert!(
        e.contains(":4:11: unknown group `a10`; did you mean `a100`?"),
        "{e}"
    );
}

#[test]
fn range_and_pairing_errors() {
    let e = inv("[[nodes]]\nname = \"gpu[1-\"\n").unwrap_err();
    assert!(e.contains(":2:8: name:") && e.contains("not closed"), "{e}");
    let e = inv("[[nodes]]\nname = \"g[1-3]\"\nhost = \"h[1-2]\"\n").unwrap_err();
    assert!(e.contains(":3:8: host expands to 2 entries"), "{e}");
    let e = inv("[[nodes]]\nname = \"a\"\n[[nodes]]\nname = \"a\"\n").unwrap_err();
    assert!(e.contains("listed twice"), "{e}");
    let i = inv("[[nodes]]\nname = \"g[1-2]\"\nhost = \"{name}.dc1\"\n").unwrap();
    assert_eq!(i.nodes[1].host, "g2.dc1");
    // Issue 13 item 6: `{name}` works in `root` too, from defaults, a group or the node.
    let i = inv(
        "[defaults]\nroot = \"/captures/{name}\"\n[groups.x]\nroot = \"/x/{name}/root\"\n\
         [[nodes]]\nname = \"g[1-2]\"\n[[nodes]]\nname = \"h1\"\ngroups = [\"x\"]\n\
         [[nodes]]\nname = \"k1\"\nroot = \"/\"\n",
    )
    .unwrap();
    let roots: Vec<&str> = i.nodes.iter().map(|n| n.root.as_str()).collect();
    assert_eq!(roots, ["/captures/g1", "/captures/g2", "/x/h1/root", "/"]);
}

#[test]
fn selection() {
    let i = inv(r#"
[groups.a]
[[nodes]]
name = "gpu[01-04]"
groups = ["a"]
labels = { rack = "r1" }
[[nodes]]
name = "gpu[05-06]"
labels = { rack = "r2" }
"#)
    .unwrap();
    let names = |s: Selection| -> Vec<String> {
        s.apply(&i)
            .unwrap()
            .iter()
            .map(|n| n.name.clone())
            .collect()
    };
    assert_eq!(names(Selection::default()).len(), 6);
    assert_eq!(
        names(Selection {
            nodes: vec!["gpu0[1-2]".into()],
            ..Default::default()
        }),
        ["gpu01", "gpu02"]
    );
    assert_eq!(
        names(Selection {
            nodes: vec!["gpu0*".into()],
            labels: vec!["rack=r2".into()],
            ..Default::default()
        }),
        ["gpu05", "gpu06"]
    );
    assert_eq!(
        names(Selection {
            groups: vec!["a".into()],
            ..Default::default()
        })
        .len(),
        4
    );
    assert_eq!(
        names(Selection {
            labels: vec!["rack".into()],
            ..Default::default()
        })
        .len(),
        6
    );
    let e = Selection {
        nodes: vec!["gpu7".into()],
        ..Default::default()
    }
    .apply(&i)
    .unwrap_err();
    assert!(e.contains("did you mean"), "{e}");
    assert!(
        Selection {
            groups: vec!["zz".into()],
            ..Default::default()
        }
        .apply(&i)
        .is_err()
    );
}

/// README: values of one selector are a union, selectors intersect; `--label canary` is
/// the inventory's `canary = true` too.
#[test]
fn label_values_of_one_key_are_a_union_and_canary_selects_canaries() {
    let i = inv(r#"
[[nodes]]
name = "gpu0[1-2]"
labels = { rack = "r1", zone = "a" }
[[nodes]]
name = "gpu0[3-4]"
labels = { rack = "r2", zone = "b" }
[[nodes]]
name = "gpu05"
labels = { rack = "r3", zone = "a" }
canary = true
[[nodes]]
name = "gpu06"
labels = { canary = "yes" }
"#)
    .unwrap();
    let names = |labels: &[&str]| -> Result<Vec<String>, String> {
        Selection {
            labels: labels.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
        .apply(&i)
        .map(|v| v.iter().map(|n| n.name.clone()).collect())
    };
    let four = ["gpu01", "gpu02", "gpu03", "gpu04"];
    assert_eq!(names(&["rack=r1", "rack=r2"]).unwrap(), four);
    assert_eq!(names(&["rack=r1,rack=r2"]).unwrap(), four);
    // Another key intersects.
    assert_eq!(
        names(&["rack=r1", "rack=r3", "zone=a"]).unwrap(),
        ["gpu01", "gpu02", "gpu05"]
    );
    assert_eq!(
        names(&["rack=r2", "zone=a"]).unwrap_err(),
        "no node of /etc/fleet/inv.toml matches the selection"
    );
    // `canary`: the flag, and a label of that name.
    assert_eq!(names(&["canary"]).unwrap(), ["gpu05", "gpu06"]);
    assert_eq!(names(&["canary", "zone=a"]).unwrap(), ["gpu05"]);
}

#[test]
fn comma_lists_and_label_requirements() {
    let i = inv("[[nodes]]\nname = \"gpu0[1-6]\"\nlabels = { rack = \"r1\" }\n").unwrap();
    let sel = |nodes: &[&str], labels: &[&str]| Selection {
        nodes: nodes.iter().map(|s| s.to_string()).collect(),
        labels: labels.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let names = |s: Selection| -> Vec<String> {
        s.apply(&i)
            .unwrap()
            .iter()
            .map(|n| n.name.clone())
            .collect()
    };
    assert_eq!(
        names(sel(&["gpu01,gpu0[5-6]"], &[])),
        ["gpu01", "gpu05", "gpu06"]
    );
    assert_eq!(names(sel(&[], &["rack=r1,rack"])).len(), 6);
    assert!(
        sel(&[], &["=x"])
            .apply(&i)
            .unwrap_err()
            .contains("key=value")
    );
    assert!(
        sel(&[], &["rack=r9"])
            .apply(&i)
            .unwrap_err()
            .contains("matches the selection")
    );
    let empty = inv("").unwrap();
    assert!(
        Selection::default()
            .apply(&empty)
            .unwrap_err()
            .contains("lists no nodes")
    );
}

#[test]
fn empty_names_port_zero_and_ipv6_hosts() {
    assert!(
        inv("[[nodes]]\nname = \"\"\n")
            .unwrap_err()
            .contains("name is empty")
    );
    assert!(
        inv("[[nodes]]\nname = \"a\"\nport = 0\n")
            .unwrap_err()
            .contains("port 0")
    );
    let i = inv("[[nodes]]\nname = \"v6\"\nhost = \"[::1]\"\n").unwrap();
    assert_eq!(i.nodes[0].host, "::1");
}

#[test]
fn ssh_config_fills_what_the_inventory_leaves_unset() {
    let text = "Host gpu*\n  User ops\n  Port 2222\n  IdentityFile /keys/fleet\nHost gpu01\n  HostName 10.0.0.1\n";
    let (ssh, _) = ssh_config::parse(text, Path::new("/ssh_config")).unwrap();
    let i = Inventory::parse_with(
        "[[nodes]]\nname = \"gpu0[1-2]\"\n[[nodes]]\nname = \"gpu03\"\nuser = \"me\"\nport = 22\n",
        Path::new("/inv.toml"),
        Some(&ssh),
    )
    .unwrap();
    let n = &i.nodes;
    assert_eq!(
        (n[0].host.as_str(), n[0].port, n[0].user.as_str()),
        ("10.0.0.1", 2222, "ops")
    );
    assert_eq!(n[1].host, "gpu02");
    assert_eq!(
        n[1].identity_file.as_deref(),
        Some(Path::new("/keys/fleet"))
    );
    // The inventory's own values win.
    assert_eq!((n[2].port, n[2].user.as_str()), (22, "me"));
}

/// A large inventory parsed node by node is the inventory parsed whole, errors and their
/// line:column included, and what the node-by-node path cannot take is parsed whole.
#[test]
fn a_large_inventory_parsed_node_by_node_is_the_same_inventory() {
    let mut text = String::from(
        "# big\nknown_hosts = \"kh\"\n[defaults]\nuser = \"ops\"\n[groups.a]\nport = 2222\n",
    );
    for i in 0..4000 {
        text.push_str(&format!(
            "\n[[nodes]] # node {i}\nname = \"gpu{i:05}\"\nhost = \"10.0.{}.{}\"\ngroups = [\"a\"]\n[nodes.labels]\nrack = \"r{}\"\n",
            i / 250,
            i % 250,
            i % 7
        ));
    }
    assert!(text.len() > BY_NODE_FROM);
    let whole: RawInventory = toml::from_str(&text).unwrap();
    let parts = by_node(&text).expect("the node-by-node path applies");
    assert_eq!(format!("{whole:?}"), format!("{parts:?}"));
    assert_eq!(inv(&text).unwrap().nodes.len(), 4000);
    // An error in the last node: the same line and column as the whole text's.
    let bad = format!("{text}\n[[nodes]]\nname = \"gpu99999\"\nhost = \"\"\n");
    let e = inv(&bad).unwrap_err();
    let line = bad.lines().count();
    assert!(e.contains(&format!(":{line}:8: host is empty")), "{e}");
    // Not for the node-by-node path: a table after the nodes, a multi-line string, a syntax
    // error (whose message is the toml crate's for the whole text).
    let after = format!("{text}\n[groups.b]\nport = 22\n");
    assert!(by_node(&after).is_none());
    assert_eq!(inv(&after).unwrap().nodes.len(), 4000);
    let multi = text.replacen("# big", "# big\nread_only = false\n", 1)
        + "\n[[nodes]]\nname = \"x\"\nrecipe = '''\n[[nodes]]\n'''\n";
    assert!(by_node(&multi).is_none());
    assert_eq!(inv(&multi).unwrap().nodes.len(), 4001);
    let broken = format!("{text}\n[[nodes]]\nname = \n");
    assert!(by_node(&broken).is_none());
    assert!(inv(&broken).is_err());
}

/// `-n` reads a nodeset expression (the code TOML names use): operators combine operands, each
/// matched against the inventory; a name that matches nothing is an error even after `!`.
#[test]
fn node_selection_takes_nodeset_operators() {
    let i = inv("[[nodes]]\nname = \"gpu[01-06],cpu[1-2]\"\n").unwrap();
    let names = |n: &str| -> Result<Vec<String>, String> {
        Selection {
            nodes: vec![n.into()],
            ..Default::default()
        }
        .apply(&i)
        .map(|v| v.iter().map(|n| n.name.clone()).collect())
    };
    assert_eq!(i.nodes.len(), 8);
    assert_eq!(names("gpu[01-06/2]").unwrap(), ["gpu01", "gpu03", "gpu05"]);
    assert_eq!(names("gpu*!gpu0[2-5]").unwrap(), ["gpu01", "gpu06"]);
    assert_eq!(
        names("gpu0[1-3]&gpu0[3-6],cpu1").unwrap(),
        ["gpu03", "cpu1"]
    );
    assert_eq!(names("gpu0[1-2]^gpu0[2-3]").unwrap(), ["gpu01", "gpu03"]);
    let e = names("gpu*!gpu7").unwrap_err();
    assert!(e.contains("no node named `gpu7`"), "{e}");
    let e = names("@rack1").unwrap_err();
    assert!(e.contains("groups.conf"), "{e}");
    let e = names("gpu[1-2][3]").unwrap_err();
    assert!(e.starts_with("--node:") && e.contains("reopening"), "{e}");
    assert!(
        names("gpu01&cpu1")
            .unwrap_err()
            .contains("matches the selection")
    );
    let e = inv("[[nodes]]\nname = \"a1&a2\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no names"), "{e}");
}
