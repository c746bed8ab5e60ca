//! Node ranges against ClusterShell's own `nodeset -e` (PyPI ClusterShell 1.10.1, pinned in
//! scripts/test.sh): every expression is expanded by gpufleet (`inventory::range::expand`, the
//! code TOML names, hosts and `-n` share) and by nodeset, and the two must agree — the same
//! names (nodeset prints them sorted; gpufleet keeps the written order, so sets are compared,
//! and their sizes), or both refuse. The deliberate differences (README, "Node ranges") are
//! listed apart: nodeset accepts them, gpufleet refuses them naming the construct.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::process::Command;

use gpufleet::inventory::range;

/// Expressions whose result both must agree on (ok or an error).
const CASES: &[&str] = &[
    "node1",
    "node[1-10/2]",
    "node[0-10/3]",
    "node[1-10/20]",
    "node[0001-1000/250]",
    "node[1-3],gpu[1-2]",
    "node[1-10]!node5",
    "node[1-10]&node[5-15]",
    "node[1-5]^node[3-7]",
    "n[1-3]^n2^n3",
    "x[1-2]&x[2-3],y1",
    "x[1-3]!x2,x2",
    "n[2-3]^n[2-3]",
    "n1&n2",
    "node[1-3]!node[2]",
    "n[1-3]!n[01-03]",
    "n[1-3] ! n2",
    "node1, node2",
    "n[1-3],  n4",
    "node[1 - 3]",
    "n[ 1 , 3 ]",
    "node[01-10]",
    "node[09-11]",
    "node[9-11]",
    "node[00-03]",
    "n[00-01]",
    "node[1-2,1-3]",
    "n[1-3,01-03]",
    "n[1,01]",
    "node01,node1",
    "node[1-3]-rack[1-2]",
    "a[1-2]b[3-4]c",
    "a1b[1-2]",
    "[1-3]",
    "[1-3]node",
    "10.0.0.[1-3]",
    "n[1-2].example.com",
    "node-[1-2]",
    "n0[1-3]",
    "n1[0-10]",
    "n1[9-10]",
    "n1[1-5/2]",
    "n[1-3]0",
    "n[1-3]x[1-2]0",
    "n[1-2]/2",
    "n[1-2]:3",
    "n[1-2]%",
    "n%1",
    "x[1-2]y z",
    // nodeset refuses these: so must gpufleet.
    "node[1-2][3-4]",
    "node[1-3][]",
    "n[1-3]0[1-2]",
    "node[1-[2-3]]",
    "node[1-010]",
    "node[001-10]",
    "node[01-3]",
    "node[1-03]",
    "n0[8-10]",
    "node[3-1]",
    "node[]",
    "node[",
    "node]",
    "node[a-c]",
    "node[1-3",
    "node[1-3]!",
    "!node1",
    "node1,,node2",
    ",n1",
    "n[1-3]&",
    "node[1,,2]",
    "node[1-10/0]",
    "node[1/2]",
    "n[1-5/2]0",
    "n[1 - 3]0",
    "n[1--3]",
    "n[1-3/2/2]",
    "n[1-3/-1]",
    "n[1-2],x]",
];

/// nodeset accepts these, gpufleet refuses them (README, "Node ranges"), with this word.
const DEVIATIONS: &[(&str, &str)] = &[
    ("@grp", "groups.conf"),
    ("node*", "wildcard"),
    ("n[1-2]*", "wildcard"),
    ("node?", "wildcard"),
    ("node[-1-3]", "negative"),
    ("n[1-3-5]", "negative"),
    ("n[+1-3]", "not a number"),
    ("n[\u{663}]", "not a number"),
    ("n\u{663}", "non-ASCII digit"),
    ("n[1-100001]", "more than"),
];

/// nodeset's names (one a line: `-S '\n'`, since a name may hold a blank), or its error.
fn nodeset(bin: &std::path::Path, expr: &str) -> Result<BTreeSet<String>, String> {
    let out = Command::new(bin)
        .args(["-S", "\\n", "-e"])
        .arg(expr)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

#[test]
fn node_ranges_agree_with_clustershell_nodeset() {
    let Some(bin) = support::need_pip("nodeset", "ClusterShell==1.10.1") else {
        return;
    };
    assert!(CASES.len() >= 40);
    let mut differ = Vec::new();
    let mut agree = 0;
    for expr in CASES {
        let ours = range::expand(expr);
        let theirs = nodeset(&bin, expr);
        let same = match (&ours, &theirs) {
            (Ok(v), Ok(set)) => {
                let mine: BTreeSet<String> = v.iter().cloned().collect();
                mine.len() == v.len() && &mine == set
            }
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if same {
            agree += 1;
        } else {
            differ.push(format!("{expr:?}: gpufleet {ours:?}, nodeset {theirs:?}"));
        }
    }
    for (expr, word) in DEVIATIONS {
        let theirs = nodeset(&bin, expr);
        assert!(
            theirs.is_ok(),
            "{expr:?}: nodeset refuses it now: {theirs:?}"
        );
        match range::expand(expr) {
            Err(e) if e.contains(word) => {}
            other => differ.push(format!(
                "{expr:?}: a deliberate refusal ({word}), got {other:?}"
            )),
        }
    }
    eprintln!(
        "nodeset oracle: {} cases, {agree} agree, {} deliberate deviations",
        CASES.len() + DEVIATIONS.len(),
        DEVIATIONS.len()
    );
    assert!(
        differ.is_empty(),
        "{} differ from nodeset:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

/// The same expressions as TOML node names: the inventory holds exactly expand()'s names.
#[test]
fn toml_names_are_the_same_code_path() {
    let dir = std::env::temp_dir().join(format!("gpufleet-nodeset-{}", std::process::id()));
    let path = dir.join("inventory.toml");
    for expr in CASES {
        let text = format!("[[nodes]]\nname = {}\n", toml_str(expr));
        let inv = gpufleet::inventory::Inventory::parse(&text, &path);
        match range::expand(expr) {
            Ok(names) if names.is_empty() => {
                let e = inv.unwrap_err().to_string();
                assert!(e.contains("no names"), "{expr:?}: {e}");
            }
            Ok(names) => {
                let inv = inv.unwrap_or_else(|e| panic!("{expr:?}: {e}"));
                let got: Vec<&str> = inv.nodes.iter().map(|n| n.name.as_str()).collect();
                assert_eq!(got, names, "{expr:?}");
            }
            Err(_) => assert!(
                inv.is_err(),
                "{expr:?} is refused by expand, not by the TOML"
            ),
        }
    }
}

fn toml_str(s: &str) -> String {
    format!("{:?}", s)
}
