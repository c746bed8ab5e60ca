//! The scheduler's view in a scan (issue 22, item 5; docs/domain.md, "The scheduler's view"):
//! nodes a scheduler took out of service are still probed where they answer, and carry an
//! info reason naming the state — `scheduler-drained`, `scheduler-down` — with the
//! scheduler's own words as evidence; an unreachable one stays `unreachable` with it. Slurm is
//! real (slurmctld and slurmd in network namespaces: tests/support/slurm.rs) and the nodes are
//! real OpenSSH servers; Kubernetes is a stand-in kubectl answering from files (no API server
//! can run here: the test's name says so).

// A test: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;

use serde_json::Value;
use support::slurm::{Slurm, sbin};
use support::{Fleet, codes, fixture, free_port, local_user, node};

const FIXTURE: &str = "a100-proprietary-535-k5.15-peermem";

/// An inventory of `gpu1`, `gpu2` (the two sshds) and `gpu3` (nothing listens: unreachable),
/// each drained through `drain`.
fn inventory(f: &Fleet, drain: &str) -> String {
    let mut s = format!(
        "known_hosts = \"{}\"\n[defaults]\nuser = \"{}\"\nidentity_file = \"{}\"\n{drain}\n",
        f.known_hosts.display(),
        local_user(),
        f.user_key.display()
    );
    let root = fixture(FIXTURE).join("root");
    for (i, (_, sshd)) in f.nodes.iter().enumerate() {
        s.push_str(&format!(
            "[[nodes]]\nname = \"gpu{}\"\nhost = \"{}\"\nport = {}\nroot = \"{}\"\n",
            i + 1,
            sshd.addr,
            sshd.port,
            root.display()
        ));
    }
    let dead = "127.0.0.159";
    s.push_str(&format!(
        "[[nodes]]\nname = \"gpu3\"\nhost = \"{dead}\"\nport = {}\nroot = \"/\"\n",
        free_port(dead)
    ));
    s
}

fn scheduler_reasons(n: &Value) -> Vec<&Value> {
    n["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["code"].as_str().unwrap().starts_with("scheduler-"))
        .collect()
}

fn snapshot(f: &Fleet, env: &[(&str, &str)]) -> Value {
    let inv = f.inventory.display().to_string();
    let mut c = f.command(&["snapshot", "-i", &inv, "--format", "json"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn drained_and_down_slurm_nodes_are_probed_and_say_so_unreachable_stays_unreachable_real_slurm() {
    let slurm = Slurm::start(3, 27);
    let fx = fixture(FIXTURE);
    let f = Fleet::start(&[fx.clone(), fx], 157);
    f.write_inventory(&inventory(&f, r#"drain = { backend = "slurm" }"#));
    let conf = slurm.conf.display().to_string();
    let scontrol = |args: &[&str]| {
        let out = Command::new(sbin("scontrol"))
            .args(args)
            .env("SLURM_CONF", &slurm.conf)
            .output()
            .unwrap();
        assert!(out.status.success(), "scontrol {args:?}: {out:?}");
    };
    // All idle: no scheduler reason anywhere.
    let doc = snapshot(&f, &[("SLURM_CONF", &conf)]);
    for n in ["gpu1", "gpu2", "gpu3"] {
        assert!(scheduler_reasons(node(&doc, n)).is_empty(), "{n}: {doc:#}");
    }
    let healthy = node(&doc, "gpu2")["status"].clone();
    assert_ne!(healthy, "unreachable");

    scontrol(&["update", "NodeName=gpu2", "State=DRAIN", "Reason=bad dimm"]);
    scontrol(&["update", "NodeName=gpu3", "State=DOWN", "Reason=psu"]);
    let doc = snapshot(&f, &[("SLURM_CONF", &conf)]);
    assert!(scheduler_reasons(node(&doc, "gpu1")).is_empty());

    // Drained: probed all the same (same status and facts as before), and said.
    let g2 = node(&doc, "gpu2");
    assert_eq!(g2["status"], healthy);
    assert!(g2["kernel"]["release"].is_string(), "{g2:#}");
    let r = scheduler_reasons(g2);
    assert_eq!(r.len(), 1, "{g2:#}");
    assert_eq!(r[0]["code"], "scheduler-drained");
    assert_eq!(r[0]["severity"], "info");
    let msg = r[0]["message"].as_str().unwrap();
    assert!(
        msg.starts_with(
            "out of service in Slurm: drained (Slurm IDLE+DRAIN): Reason \"bad dimm\" set by root"
        ),
        "{msg}"
    );
    let ev = &r[0]["evidence"][0];
    assert_eq!(ev["source"], "scontrol -o show node gpu2");
    let line = ev["line"].as_str().unwrap();
    assert!(
        line.starts_with("State=IDLE+DRAIN Reason=bad dimm [root@") && line.ends_with(']'),
        "{line}"
    );
    // Info reasons come last (sorted by severity only).
    let severities: Vec<&str> = g2["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["severity"].as_str().unwrap())
        .collect();
    let mut sorted = severities.clone();
    sorted.sort_by_key(|s| ["error", "warn", "info"].iter().position(|x| x == s));
    assert_eq!(severities, sorted);

    // Down and unreachable: stays unreachable, with the scheduler's state beside it.
    let g3 = node(&doc, "gpu3");
    assert_eq!(g3["status"], "unreachable");
    let c = codes(g3);
    assert!(c.contains(&"ssh-refused".to_string()), "{c:?}");
    let r = scheduler_reasons(g3);
    assert_eq!(r.len(), 1, "{g3:#}");
    assert_eq!(r[0]["code"], "scheduler-down");
    assert!(
        r[0]["evidence"][0]["line"]
            .as_str()
            .unwrap()
            .starts_with("State=DOWN Reason=psu [root@"),
        "{g3:#}"
    );

    // A scheduler that cannot be asked is unknown, never "in service".
    let doc = snapshot(&f, &[("SLURM_CONF", "/nonexistent/slurm.conf")]);
    for n in ["gpu1", "gpu2", "gpu3"] {
        let g = node(&doc, n);
        assert!(scheduler_reasons(g).is_empty());
        assert!(
            g["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["code"] == "fact-unknown"
                    && r["message"]
                        .as_str()
                        .unwrap()
                        .starts_with("scheduler state unknown: ")),
            "{n}: {g:#}"
        );
    }
}

#[test]
fn a_cordoned_node_is_scheduler_drained_a_not_ready_one_scheduler_down_stand_in_kubectl() {
    let fx = fixture(FIXTURE);
    let f = Fleet::start(&[fx.clone(), fx], 161);
    f.write_inventory(&inventory(&f, r#"drain = { backend = "kubernetes" }"#));
    // A stand-in kubectl: `get node -o jsonpath=… -- NAME` prints `unschedulable=` and the
    // taints from NAME.unschedulable and NAME.taints beside it, as the real one prints them;
    // every call is logged.
    let bin = f.tmp.path().join("kubectl-stand-in");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        bin.join("kubectl"),
        r#"#!/bin/sh
d=$(dirname "$0")
printf '%s\n' "$*" >> "$d/calls"
for last; do :; done
printf 'unschedulable=%s\n' "$(cat "$d/$last.unschedulable" 2>/dev/null)"
cat "$d/$last.taints" 2>/dev/null || true
"#,
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(bin.join("kubectl"))
        .status()
        .unwrap();
    std::fs::write(bin.join("gpu1.unschedulable"), "true").unwrap();
    std::fs::write(
        bin.join("gpu1.taints"),
        "node.kubernetes.io/unschedulable\tNoSchedule\t\n",
    )
    .unwrap();
    // A GPU node's permanent taint is not out of service.
    std::fs::write(bin.join("gpu2.taints"), "dedicated\tNoSchedule\tgpu\n").unwrap();
    std::fs::write(
        bin.join("gpu3.taints"),
        "node.kubernetes.io/not-ready\tNoExecute\t\nnode.kubernetes.io/unreachable\tNoExecute\t\n",
    )
    .unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let doc = snapshot(&f, &[("PATH", &path)]);

    let g1 = node(&doc, "gpu1");
    assert_ne!(g1["status"], "unreachable");
    let r = scheduler_reasons(g1);
    assert_eq!(r.len(), 1, "{g1:#}");
    assert_eq!(r[0]["code"], "scheduler-drained");
    assert_eq!(
        r[0]["message"],
        "out of service in Kubernetes: cordoned (.spec.unschedulable is true); probed all the same"
    );
    assert_eq!(r[0]["evidence"][0]["line"], "unschedulable=true");
    assert!(
        r[0]["evidence"][0]["source"]
            .as_str()
            .unwrap()
            .starts_with("kubectl get node -o "),
        "{g1:#}"
    );
    assert!(scheduler_reasons(node(&doc, "gpu2")).is_empty());
    let g3 = node(&doc, "gpu3");
    assert_eq!(g3["status"], "unreachable");
    let r = scheduler_reasons(g3);
    assert_eq!(r.len(), 1, "{g3:#}");
    assert_eq!(r[0]["code"], "scheduler-down");
    assert_eq!(r[0]["evidence"].as_array().unwrap().len(), 3);

    // One read a node, each with the node's name after `--`.
    let calls = std::fs::read_to_string(bin.join("calls")).unwrap();
    let mut names: Vec<&str> = calls
        .lines()
        .map(|l| {
            assert!(l.starts_with("get node -o jsonpath="), "{l}");
            l.rsplit_once(" -- ").unwrap().1
        })
        .collect();
    names.sort();
    assert_eq!(names, ["gpu1", "gpu2", "gpu3"]);
}
