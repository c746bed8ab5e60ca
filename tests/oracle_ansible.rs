//! Ansible inventories against ansible-core's own `ansible-inventory --list` (PyPI
//! ansible-core 2.19, pinned in scripts/test.sh): every case is an inventory (INI or YAML, with
//! `group_vars/` and `host_vars/` files beside it) read by `gpufleet inventory list -f json`
//! and by ansible-inventory. For every host both must give the same address (`ansible_host`,
//! else the name), port, user, key file, groups (with their parents) and labels (the other
//! scalar variables, booleans as `true`/`false`), or both refuse the inventory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Files of a case; the first is the inventory given to `-i`.
type Files = &'static [(&'static str, &'static str)];

const CASES: &[Files] = &[
    // The case: d1 takes group_vars/ and host_vars/ beside the inventory.
    &[
        ("hosts.ini", "[gpu]\nd1\n"),
        (
            "group_vars/gpu.yml",
            "ansible_host: 10.7.7.1\nansible_port: 2701\nansible_user: gvgpu\nrack: r1\n",
        ),
        ("host_vars/d1.yml", "zone: z1\n"),
    ],
    &[
        ("hosts.ini", "[gpu]\nd1\n"),
        ("group_vars/gpu", "ansible_user: noext\n"),
    ],
    &[
        ("hosts.ini", "[gpu]\nd1\n"),
        ("group_vars/gpu.yaml", "ansible_user: yaml\n"),
    ],
    &[
        ("hosts.ini", "[gpu]\nd1\n"),
        (
            "group_vars/gpu.json",
            "{\"ansible_user\": \"json\", \"n\": 3}\n",
        ),
    ],
    // A folder: every file, sorted, later ones winning; hidden, backup and .txt files left out.
    &[
        ("hosts.ini", "[gpu]\nd1\nd2\n"),
        ("group_vars/gpu/a.yml", "rack: a\nansible_user: ua\n"),
        ("group_vars/gpu/b.yml", "rack: b\n"),
        ("group_vars/gpu/sub/c.yml", "deep: c\n"),
        ("group_vars/gpu/.hidden.yml", "hidden: x\n"),
        ("group_vars/gpu/b.yml~", "backup: x\n"),
        ("group_vars/gpu/notes.txt", "txt: x\n"),
        ("host_vars/d2/one.yml", "rack: d2\n"),
    ],
    // Precedence: inline group vars < group_vars/all < group_vars/<g> < inline host < host_vars.
    &[
        (
            "hosts.ini",
            "[gpu]\nd1 ansible_port=2201\nd2\n[gpu:vars]\nansible_user=inline\nk=inline\n",
        ),
        ("group_vars/all.yml", "ansible_user: all\nk: all\nz: all\n"),
        ("group_vars/gpu.yml", "k: gpu\n"),
        ("host_vars/d1.yml", "ansible_port: 2202\n"),
    ],
    &[
        (
            "hosts.ini",
            "[all:vars]\nansible_user=allinline\n[gpu]\nd1\n",
        ),
        ("group_vars/all.yml", "ansible_user: allfile\n"),
    ],
    // ansible_group_priority between groups of one depth, set in the inventory.
    &[(
        "hosts.ini",
        "[a]\nh1\n[b]\nh1\n[a:vars]\nansible_group_priority=10\nansible_port=2001\n[b:vars]\nansible_port=2002\n",
    )],
    &[(
        "hosts.ini",
        "[a]\nh1\n[b]\nh1\n[a:vars]\nansible_port=2001\n[b:vars]\nansible_port=2002\n",
    )],
    &[(
        "hosts.ini",
        "[z]\nh1\n[b]\nh1\n[z:vars]\nansible_group_priority=-1\nansible_port=2001\n[b:vars]\nansible_port=2002\n",
    )],
    &[(
        "hosts.yml",
        "all:\n  children:\n    a:\n      vars: {ansible_group_priority: 3, ansible_user: ua}\n      hosts: {h1: }\n    b:\n      vars: {ansible_user: ub}\n      hosts: {h1: }\n",
    )],
    // Depth: a child's vars win over its parent's.
    &[(
        "hosts.ini",
        "[parent:children]\nchild\n[child]\nh1\n[parent:vars]\nansible_port=2100\nk=p\n[child:vars]\nansible_port=2101\n",
    )],
    &[(
        "hosts.ini",
        "[p:children]\nc\n[c]\nh1\n[p:vars]\nansible_group_priority=99\nansible_user=p\n[c:vars]\nansible_user=c\n",
    )],
    // IPv6 hosts, with and without a port.
    &[("hosts.ini", "[v6]\n[2001:db8::1]:2203\n2001:db8::3\n")],
    &[("hosts.ini", "[v6]\n[2001:db8::1]:2203 ansible_user=six\n")],
    // INI value typing: host lines and :vars.
    &[(
        "hosts.ini",
        "[g]\nh1 a=True b=False c=None d='q' e=\"x y\" f=010 g=1\n",
    )],
    &[(
        "hosts.ini",
        "[g]\nh1\n[g:vars]\na=True\nb=\"quoted\"\nc=None\nd='single'\n",
    )],
    // INI value typing as literal_eval (issue 22): numbers as Python prints them, lists and
    // maps no label, adjacent strings joined, host lines and :vars alike.
    &[(
        "hosts.ini",
        "[g]\nh1 a=1_000 b=0x10 c=1e3 d=[1,2] e=\"'a' 'b'\" f=+5 g=(1,2) h={'k':1} i=1.50 j=-0 k=010 l=0o7 m=1.0e16 n=0.00001 o=-2.5 p=(3) q=1.2.3\n",
    )],
    &[(
        "hosts.ini",
        "[g]\nh1\n[g:vars]\nva=1_000\nvb=[1, 2]\nvc={'k': 1}\nvd=\"'x' \\\"y\\\"\"\nve=1e15\nvf='a\\tb'\nvg=  7\n",
    )],
    &[(
        "hosts.ini",
        "[g]\nh1 ansible_port=0x8ae ansible_user='ops'\n",
    )],
    // YAML plain scalars as PyYAML (YAML 1.1) types them, inline and in group_vars/ (issue 22).
    &[(
        "hosts.yml",
        "all:\n  hosts:\n    y1:\n      a: yes\n      b: on\n      c: 1e3\n      d: 010\n      e: 0o7\n      f: 1_000\n      g: 2026-01-01\n      h: 1.0e+3\n      i: 0x1F\n      j: Off\n      k: Yes\n      l: n\n      m: 1:30\n      n: '010'\n      o: \"yes\"\n      p: 09\n      q: .5\n      ansible_port: 0x8ae\n",
    )],
    &[
        ("hosts.ini", "[gpu]\nd1\n"),
        (
            "group_vars/gpu.yml",
            "flag: on\nnum: 0755\nspeed: 1_000\nmix: {a: 1, b: no}\nt: 12:00\n",
        ),
    ],
    // The basics.
    &[("hosts.ini", "h0\n[gpu]\ngpu[01:03]\n[cpu]\ncpu[a:c]\n")],
    &[("hosts.ini", "[gpu]\ngpu[0:10:5] ansible_user=ops\n")],
    &[("hosts.ini", "[gpu]\ng1:2222\ng2 ansible_port=2223\n")],
    &[(
        "hosts.ini",
        "[gpu]\ng1 ansible_host=10.0.0.1 ansible_ssh_private_key_file=/k/id\n",
    )],
    &[(
        "hosts.ini",
        "[a:children]\nb\n[b:children]\nc\n[c]\nh1\n[a:vars]\nla=1\n[b:vars]\nlb=2\n",
    )],
    &[(
        "hosts.ini",
        "# comment\n; also\n[g]\nh1 # trailing\n\n[g:vars]\nrack = r7\n",
    )],
    &[(
        "hosts.yml",
        "all:\n  hosts:\n    h1:\n      ansible_port: 2201\n  vars:\n    ansible_user: allu\n",
    )],
    &[(
        "hosts.yml",
        "all:\n  children:\n    gpu:\n      hosts:\n        g[1:2]:\n          ansible_user: u\n      vars:\n        rack: r1\n",
    )],
    &[(
        "hosts.yml",
        "gpu:\n  hosts:\n    g1:\n    g2:\n      ansible_host: 10.0.0.2\n",
    )],
    &[
        (
            "hosts.yml",
            "all:\n  children:\n    gpu:\n      hosts: {g1: , g2: }\n",
        ),
        ("group_vars/gpu.yml", "ansible_user: fromfile\n"),
        ("host_vars/g2.yml", "ansible_user: g2file\n"),
    ],
    &[(
        "hosts.yml",
        "all:\n  hosts:\n    g1:\n      flag: true\n      num: 7\n      text: 'x'\n",
    )],
    &[(
        "hosts.yml",
        "all:\n  children:\n    a:\n      children:\n        b:\n          hosts: {h1: {ansible_port: 2300}}\n      vars: {ansible_port: 2200}\n",
    )],
    &[
        ("hosts.ini", "[g]\nh1\n"),
        ("host_vars/h1.json", "{\"ansible_host\": \"10.9.9.9\"}\n"),
    ],
    &[
        ("hosts.ini", "[g]\nh1\n"),
        ("host_vars/other.yml", "ansible_host: never\n"),
    ],
    &[
        ("hosts.ini", "[g]\nh1\n"),
        ("group_vars/ungrouped.yml", "x: never\n"),
    ],
    &[
        ("hosts.ini", "h1\n"),
        ("group_vars/ungrouped.yml", "x: ungrouped\n"),
    ],
    &[
        ("hosts.ini", "h1\n[g]\nh2\n"),
        ("group_vars/all/main.yml", "ansible_user: everyone\n"),
    ],
    &[(
        "hosts.ini",
        "[g]\nh1\n[g:vars]\nansible_user=a\n[g:vars]\nansible_user=b\n",
    )],
    &[(
        "hosts.ini",
        "[g]\nh1 ansible_user=a\n[h]\nh1 ansible_user=b\n",
    )],
    // Both refuse these.
    &[
        ("hosts.ini", "[g]\nh1\n"),
        ("group_vars/g.yml", "a: [unclosed\n"),
    ],
    &[("hosts.ini", "[g:children]\ng\n")],
    &[("hosts.ini", "[v6]\n[2001:db8::2]\n")],
    &[(
        "hosts.ini",
        "[g]\nh1\n[g:vars]\nansible_group_priority=high\n",
    )],
];

/// ansible-inventory accepts these, gpufleet refuses them naming the construct (README,
/// "Inventories"): a host name with a `:` that is not a port (Ansible keeps `h1:notaport` as
/// the name, which no SSH connection can use).
const DEVIATIONS: &[(Files, &str)] = &[(&[("hosts.ini", "[g]\nh1:notaport\n")], "is not 1-65535")];

/// Each host's resolution, in one shape for both.
type Hosts = BTreeMap<String, BTreeMap<String, String>>;

/// One reader's answer: the hosts, or its error.
type Outcome = Result<Hosts, String>;

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(float_key(s)),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) if n.is_f64() => Some(format!("float {:?}", n.as_f64().unwrap())),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A label that is a float as text (gpufleet's `1e+16`, Python's JSON float) compared by value:
/// serde_json reads ansible-inventory's `1e+16` as a number and prints it `1e16`.
fn float_key(s: &str) -> String {
    match s.parse::<f64>() {
        Ok(x) if s.contains(['.', 'e', 'E']) && !s.starts_with(['.', '+']) && !s.ends_with('.') => {
            format!("float {x:?}")
        }
        _ => s.to_string(),
    }
}

fn ansible(bin: &Path, inv: &Path, user: &str) -> Result<Hosts, String> {
    let out = Command::new(bin)
        .args(["--list", "-i"])
        .arg(inv)
        .env("ANSIBLE_INVENTORY_UNPARSED_FAILED", "true")
        .env("ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED", "true")
        .env(
            "ANSIBLE_LOCAL_TEMP",
            inv.parent().unwrap().join(".ansible-tmp"),
        )
        .env("ANSIBLE_HOME", inv.parent().unwrap().join(".ansible-home"))
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let obj = doc.as_object().unwrap();
    // Parents of each group, from the group tree.
    let mut parents: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut direct: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (g, v) in obj {
        for c in v["children"].as_array().into_iter().flatten() {
            parents
                .entry(c.as_str().unwrap().into())
                .or_default()
                .push(g.clone());
        }
        for h in v["hosts"].as_array().into_iter().flatten() {
            direct
                .entry(h.as_str().unwrap().into())
                .or_default()
                .push(g.clone());
        }
    }
    let mut hosts = Hosts::new();
    let none = serde_json::Map::new();
    // A host without variables is in no `hostvars` entry, only in its groups' `hosts`.
    let mut names: BTreeSet<String> = direct.keys().cloned().collect();
    names.extend(
        doc["_meta"]["hostvars"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(h, _)| h.clone()),
    );
    for h in &names {
        let vars = doc["_meta"]["hostvars"]
            .get(h)
            .and_then(Value::as_object)
            .unwrap_or(&none);
        let mut r = BTreeMap::new();
        let get = |k: &str| vars.get(k).and_then(text);
        r.insert("host".into(), get("ansible_host").unwrap_or(h.clone()));
        r.insert("port".into(), get("ansible_port").unwrap_or("22".into()));
        r.insert("user".into(), get("ansible_user").unwrap_or(user.into()));
        if let Some(k) = get("ansible_ssh_private_key_file") {
            r.insert("key".into(), k);
        }
        let mut groups = BTreeSet::new();
        let mut todo = direct.get(h).cloned().unwrap_or_default();
        while let Some(g) = todo.pop() {
            if groups.insert(g.clone()) {
                todo.extend(parents.get(&g).cloned().unwrap_or_default());
            }
        }
        groups.remove("all");
        groups.remove("ungrouped");
        r.insert(
            "groups".into(),
            groups.into_iter().collect::<Vec<_>>().join(","),
        );
        for (k, v) in vars {
            if !k.starts_with("ansible_")
                && !k.starts_with("gpufleet_")
                && let Some(t) = text(v)
            {
                r.insert(format!("label.{k}"), t);
            }
        }
        hosts.insert(h.clone(), r);
    }
    Ok(hosts)
}

fn gpufleet(inv: &Path, home: &Path) -> Result<Hosts, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args([
            "inventory",
            "list",
            "-f",
            "json",
            "--ssh-config",
            "none",
            "-i",
        ])
        .arg(inv)
        .env("HOME", home)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut hosts = Hosts::new();
    for n in doc.as_array().unwrap() {
        let mut r = BTreeMap::new();
        r.insert("host".into(), text(&n["host"]).unwrap());
        r.insert("port".into(), text(&n["port"]).unwrap());
        r.insert("user".into(), text(&n["user"]).unwrap());
        if let Some(k) = text(&n["identity_file"]) {
            r.insert("key".into(), k);
        }
        let mut groups: Vec<String> = n["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_str().unwrap().to_string())
            .collect();
        groups.sort();
        r.insert("groups".into(), groups.join(","));
        for (k, v) in n["labels"].as_object().into_iter().flatten() {
            r.insert(format!("label.{k}"), text(v).unwrap());
        }
        hosts.insert(text(&n["name"]).unwrap(), r);
    }
    Ok(hosts)
}

#[test]
fn ansible_inventories_agree_with_ansible_inventory_list() {
    let Some(bin) = support::need_pip("ansible-inventory", "ansible-core==2.19.14") else {
        return;
    };
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    let root = tempfile::tempdir().unwrap();
    // ansible-inventory takes about 2 s to start: two cases at a time.
    let results: Vec<(usize, Outcome, Outcome)> = std::thread::scope(|scope| {
        let chunks: Vec<Vec<usize>> = (0..2)
            .map(|t| (0..CASES.len()).filter(|i| i % 2 == t).collect())
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|idx| {
                let (bin, user, root) = (&bin, &user, root.path());
                scope.spawn(move || {
                    idx.into_iter()
                        .map(|i| {
                            let files = CASES[i];
                            let dir = root.join(format!("c{i}"));
                            for (name, text) in files {
                                let p = dir.join(name);
                                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                                std::fs::write(&p, text).unwrap();
                            }
                            let inv = dir.join(files[0].0);
                            (i, gpufleet(&inv, root), ansible(bin, &inv, user))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut differ = Vec::new();
    let mut hosts = 0;
    let mut results = results;
    results.sort_by_key(|r| r.0);
    for (i, mine, theirs) in results {
        if let Ok(h) = &theirs {
            hosts += h.len();
        }
        let same = match (&mine, &theirs) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if !same {
            differ.push(format!(
                "case {i} ({:?}):\n  gpufleet {mine:?}\n  ansible  {theirs:?}",
                CASES[i][0].1
            ));
        }
    }
    for (i, (files, word)) in DEVIATIONS.iter().enumerate() {
        let dir = root.path().join(format!("d{i}"));
        for (name, text) in *files {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
        }
        let inv = dir.join(files[0].0);
        let theirs = ansible(&bin, &inv, &user);
        assert!(
            theirs.is_ok(),
            "deviation {i}: ansible-inventory refuses it now: {theirs:?}"
        );
        match gpufleet(&inv, root.path()) {
            Err(e) if e.contains(word) => {}
            other => differ.push(format!(
                "deviation {i}: a refusal ({word}) expected, got {other:?}"
            )),
        }
    }
    eprintln!(
        "ansible-inventory oracle: {} inventories ({hosts} hosts), {} agree, {} deliberate deviations",
        CASES.len() + DEVIATIONS.len(),
        CASES.len() + DEVIATIONS.len() - differ.len() - DEVIATIONS.len(),
        DEVIATIONS.len()
    );
    assert!(
        differ.is_empty(),
        "{} of {} differ from ansible-inventory:\n{}",
        differ.len(),
        CASES.len(),
        differ.join("\n")
    );
}
