//! The rollout test fleet: real OpenSSH servers serving scratch copies of the A100 legacy-stack
//! fixture, with the recipe stand-ins (tests/upgrade.rs and the other rollout tests).
//! The recipe's commands are fixture stand-ins that change the node's tree (proprietary → open,
//! nvidia-peermem removed); the `reboot` stand-in stops the node's sshd and starts it again after
//! a delay (or never). Drains go through the `command` backend writing a log.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::*;

pub const SWITCH: &str = r#"#!/bin/sh
# fixture stand-in: "install the open driver of the same branch, remove nvidia-peermem"
r=$1
v=$(sed -n 's/.*Kernel Module  \([0-9.]*\) .*/\1/p' "$r/proc/driver/nvidia/version")
printf 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build  (dvs-builder@test)  Mon Nov 30 10:00:00 UTC 2026\nGCC version:  gcc version 11.4.0\n' "$v" > "$r/proc/driver/nvidia/version"
sed -i -e 's/(POE)/(OE)/' -e '/^nvidia_peermem /d' -e 's/nvidia_peermem,//g' "$r/proc/modules"
rm -f "$r/etc/modules-load.d/nvidia-peermem.conf"
rm -rf "$r/sys/module/nvidia_peermem"
echo "switched to the open module $v"
"#;

pub const REBOOT: &str = r#"#!/bin/sh
# fixture stand-in: "reboot": the sticky taint goes, sshd stops, and comes back after a delay
# as another boot (a new boot_id); with EVENTS set, "down NODE" and "up NODE" are logged there
r=$1
. "$r/../reboot.env"
echo 12288 > "$r/proc/sys/kernel/tainted"
kill "$(cat "$PIDFILE")"
if [ -n "$EVENTS" ]; then echo "down $NODE" >> "$EVENTS"; fi
if [ "$DELAY" != never ]; then
  setsid sh -c "sleep $DELAY; cat /proc/sys/kernel/random/uuid > '$r/proc/sys/kernel/random/boot_id'; /usr/sbin/sshd -f '$SSHD_CONFIG' -E '$SSHD_CONFIG.log'; if [ -n '$EVENTS' ]; then echo 'up $NODE' >> '$EVENTS'; fi" >/dev/null 2>&1 < /dev/null &
fi
echo "rebooting"
"#;

/// A reboot that returns at once and goes down 6 s later (`systemctl reboot`, `shutdown -r`,
/// `sh -c 'sleep 6; reboot' &`): the [`REBOOT`] stand-in, started in the background.
pub const REBOOT_LATER: &str = r#"#!/bin/sh
# fixture stand-in: a reboot that is only scheduled: the command ends at once, the node goes down 6 s later
setsid sh -c "sleep 6; exec fixture-reboot '$1'" >/dev/null 2>&1 < /dev/null &
echo "reboot scheduled in 6 s"
"#;

/// A fleet of `n` scratch copies of the A100 legacy-stack fixture, each with the stand-ins.
pub struct UpgradeFleet {
    pub fleet: Fleet,
    pub scratch: tempfile::TempDir,
    pub nodes: Vec<PathBuf>,
    pub drain_log: PathBuf,
    pub state: PathBuf,
}

pub fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-R")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
    let st = Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

impl UpgradeFleet {
    pub fn start(n: usize, octet: u8, delay: &str, extra_config: &str) -> UpgradeFleet {
        let scratch = tempfile::tempdir().unwrap();
        let mut nodes = Vec::new();
        for i in 0..n {
            let node = scratch.path().join(format!("node{i}"));
            copy_tree(&fixture("a100-proprietary-535-k5.15-peermem"), &node);
            for (name, text) in [
                ("fixture-switch-open", SWITCH),
                ("fixture-reboot", REBOOT),
                ("fixture-reboot-later", REBOOT_LATER),
            ] {
                let p = node.join("bin").join(name);
                std::fs::write(&p, text).unwrap();
                Command::new("chmod").arg("+x").arg(&p).status().unwrap();
            }
            // The node's boot identity (the kernel makes one at each boot).
            let random = node.join("root/proc/sys/kernel/random");
            std::fs::create_dir_all(&random).unwrap();
            std::fs::write(
                random.join("boot_id"),
                format!("00000000-0000-4000-8000-{:012}\n", i),
            )
            .unwrap();
            nodes.push(node);
        }
        let fleet = Fleet::start(&nodes, octet);
        for (i, (node, sshd)) in nodes
            .iter()
            .zip(fleet.nodes.iter().map(|(_, s)| s))
            .enumerate()
        {
            std::fs::write(
                node.join("reboot.env"),
                format!(
                    "SSHD_CONFIG={}\nPIDFILE={}\nDELAY={delay}\nNODE=node{i}\nEVENTS=\n",
                    sshd.config().display(),
                    sshd.dir.join("sshd.pid").display()
                ),
            )
            .unwrap();
        }
        let drain_log = scratch.path().join("drain.log");
        let reboot = if extra_config.contains("reboot_timeout") {
            ""
        } else {
            "reboot_timeout = 15"
        };
        let config = format!(
            r#"[probe]
nvidia_smi_timeout = 2
deadline = 20
[ssh]
connect_timeout = 3
auth_timeout = 5
[upgrade]
max_unavailable = 2
{reboot}
{extra_config}
[recipes.fixture]
steps = [
  {{ name = "switch", run = "fixture-switch-open {{root}}" }},
  {{ name = "reboot", run = "fixture-reboot {{root}}", reboot = true }},
]
[recipes.reboot_later]
steps = [
  {{ name = "switch", run = "fixture-switch-open {{root}}" }},
  {{ name = "reboot", run = "fixture-reboot-later {{root}}", reboot = true }},
]
[recipes.no_reboot]
steps = [
  {{ name = "switch", run = "fixture-switch-open {{root}}" }},
  {{ name = "reboot", run = "echo 'reboot: nothing happens'", reboot = true }},
]
[recipes.noop]
steps = [{{ name = "nothing", run = "true" }}]
[recipes.slow]
steps = [{{ name = "slow", run = "sleep 4" }}, {{ name = "switch", run = "fixture-switch-open {{root}}" }}]
[recipes.switch]
steps = [{{ name = "switch", run = "fixture-switch-open {{root}}" }}]
[recipes.marked]
steps = [{{ name = "mark", run = "echo start >> {{root}}/../ran; sleep 3; echo end >> {{root}}/../ran" }}, {{ name = "switch", run = "fixture-switch-open {{root}}" }}]
[recipes.marked_long]
steps = [{{ name = "mark", run = "echo start >> {{root}}/../ran; sleep 8; echo end >> {{root}}/../ran" }}, {{ name = "switch", run = "fixture-switch-open {{root}}" }}]
"#
        );
        std::fs::write(&fleet.config, config).unwrap();
        let state = scratch.path().join("state");
        UpgradeFleet {
            fleet,
            scratch,
            nodes,
            drain_log,
            state,
        }
    }

    /// The inventory: node0 is the canary; every node drains through logging commands.
    pub fn inventory(&self, recipes: &[&str], extra_defaults: &str) {
        let log = self.drain_log.display();
        let mut text = format!(
            "[defaults]\nuser = \"{}\"\nidentity_file = \"{}\"\n{extra_defaults}\n\
             drain = {{ backend = \"command\", drain = \"echo drain {{node}} >> {log}\", status = \"grep -E '^(drain|uncordon) {{node}}$' {log} | tail -n 1 | grep -q '^drain'\", uncordon = \"echo uncordon {{node}} >> {log}\" }}\n",
            local_user(),
            self.fleet.user_key.display()
        );
        text = format!(
            "known_hosts = \"{}\"\n{text}",
            self.fleet.known_hosts.display()
        );
        for (i, (node, sshd)) in self
            .nodes
            .iter()
            .zip(self.fleet.nodes.iter().map(|(_, s)| s))
            .enumerate()
        {
            text.push_str(&format!(
                "[[nodes]]\nname = \"node{i}\"\nhost = \"{}\"\nport = {}\nroot = \"{}\"\nrecipe = \"{}\"\ncanary = {}\n",
                sshd.addr,
                sshd.port,
                node.join("root").display(),
                recipes[i.min(recipes.len() - 1)],
                i == 0
            ));
        }
        self.fleet.write_inventory(&text);
    }

    /// Replaces the inventory's `drain = {…}` line.
    pub fn set_drain(&self, line: &str) {
        let inv = std::fs::read_to_string(&self.fleet.inventory).unwrap();
        let start = inv.find("drain = {").unwrap();
        let end = start + inv[start..].find('\n').unwrap();
        self.fleet
            .write_inventory(&format!("{}{line}{}", &inv[..start], &inv[end..]));
    }

    /// `gpufleet --state-dir STATE ARGS -i INVENTORY`, ready to run (environment as Fleet sets it).
    pub fn command(&self, args: &[&str]) -> Command {
        let inv = self.fleet.inventory.display().to_string();
        let state = self.state.display().to_string();
        let mut all = vec!["--state-dir", &state];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-i", &inv]);
        self.fleet.command(&all)
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// [`UpgradeFleet::command`] with another state folder (another operator).
    pub fn command_in(&self, state: &Path, args: &[&str]) -> Command {
        let inv = self.fleet.inventory.display().to_string();
        let state = state.display().to_string();
        let mut all = vec!["--state-dir", &state];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-i", &inv]);
        self.fleet.command(&all)
    }

    /// `gpufleet journal` of the state folder `state`, as printed.
    pub fn journal_text(&self, state: &Path) -> String {
        let out = self.command_in(state, &["journal"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The lines the `marked` recipes wrote on node `i` (`start`, `end`).
    pub fn marks(&self, i: usize) -> Vec<String> {
        std::fs::read_to_string(self.nodes[i].join("ran"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Waits (up to 90 s: a loaded 2-core machine) until the journal has an entry for which
    /// `want` holds.
    pub fn wait_journal(&self, want: impl Fn(&serde_json::Value) -> bool) {
        let start = Instant::now();
        while !self.journal().iter().any(&want) {
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "journal: {:#?}",
                self.journal()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn drains(&self) -> Vec<String> {
        std::fs::read_to_string(&self.drain_log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    pub fn journal(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.state.join("journal.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Logs node `i`'s reboots ("down nodeI", "up nodeI") into the drain log, so that their
    /// order against drains and uncordons shows.
    pub fn log_reboots(&self, i: usize) {
        let env = self.nodes[i].join("reboot.env");
        let text = std::fs::read_to_string(&env).unwrap().replace(
            "EVENTS=\n",
            &format!("EVENTS={}\n", self.drain_log.display()),
        );
        std::fs::write(&env, text).unwrap();
    }

    /// Node `i`'s boot identity now.
    pub fn boot_id(&self, i: usize) -> String {
        std::fs::read_to_string(self.nodes[i].join("root/proc/sys/kernel/random/boot_id"))
            .unwrap()
            .trim()
            .to_string()
    }

    pub fn status(&self, node: &str) -> String {
        let (_, doc) = self.fleet.snapshot(&["--node", node]);
        node_status(&doc, node)
    }
}

pub fn node_status(doc: &serde_json::Value, name: &str) -> String {
    node(doc, name)["status"].as_str().unwrap().to_string()
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
