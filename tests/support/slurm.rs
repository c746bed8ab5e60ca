//! A real Slurm cluster for tests (tests/upgrade.rs drains through it, tests/inventories.rs
//! lists it): slurmctld here, one slurmd per node in its own network namespace.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::free_port;

/// A real Slurm cluster: slurmctld here, one slurmd per node in its own network namespace
/// (198.18.0.0/15, started with `nsenter --net=…`), on a bridge the test makes. Munge must run
/// (.ci/run starts munged). Everything is stopped by PID and removed on drop.
pub struct Slurm {
    pub dir: tempfile::TempDir,
    pub tag: String,
    pub nodes: usize,
    pub conf: PathBuf,
}

/// A system binary by name, wherever Debian puts it (sbin may be missing from PATH in CI).
pub fn sbin(name: &str) -> PathBuf {
    super::need(name)
}

impl Slurm {
    pub fn ip(args: &str) {
        let cmd = format!("{} {args}", sbin("ip").display());
        let st = Command::new("sh").arg("-c").arg(&cmd).status().unwrap();
        assert!(st.success(), "{cmd}");
    }

    pub fn start(nodes: usize, subnet: u8) -> Slurm {
        Slurm::start_with(nodes, subnet, "")
    }

    /// As [`Slurm::start`], with `extra` appended to slurm.conf (more partitions, say).
    pub fn start_with(nodes: usize, subnet: u8, extra: &str) -> Slurm {
        let dir = tempfile::tempdir().unwrap();
        let tag = format!("g{}{subnet}", std::process::id() % 10000);
        let p = dir.path();
        std::fs::create_dir_all(p.join("state")).unwrap();
        let bridge = format!("{tag}br");
        Slurm::ip(&format!("link add {bridge} type bridge"));
        Slurm::ip(&format!("addr add 198.18.{subnet}.1/24 dev {bridge}"));
        Slurm::ip(&format!("link set {bridge} up"));
        let mut node_lines = String::new();
        for i in 1..=nodes {
            let ns = format!("{tag}n{i}");
            Slurm::ip(&format!("netns add {ns}"));
            Slurm::ip(&format!(
                "link add {tag}v{i} type veth peer name eth0 netns {ns}"
            ));
            Slurm::ip(&format!("link set {tag}v{i} master {bridge} up"));
            Slurm::ip(&format!(
                "-n {ns} addr add 198.18.{subnet}.{}/24 dev eth0",
                i + 1
            ));
            Slurm::ip(&format!("-n {ns} link set eth0 up"));
            Slurm::ip(&format!("-n {ns} link set lo up"));
            node_lines.push_str(&format!(
                "NodeName=gpu{i} NodeAddr=198.18.{subnet}.{} CPUs=1 RealMemory=100 State=UNKNOWN\n",
                i + 1
            ));
            std::fs::create_dir_all(p.join(format!("spool/gpu{i}"))).unwrap();
        }
        // slurmctld listens on every address: the port must be free on all of them (the sshd
        // tests beside it take ports on 127.0.0.N).
        let port = free_port("0.0.0.0");
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap()
            .trim()
            .to_string();
        let d = p.display();
        let conf = p.join("slurm.conf");
        let names: Vec<String> = (1..=nodes).map(|i| format!("gpu{i}")).collect();
        std::fs::write(
            &conf,
            format!(
                "ClusterName=gpufleet\nSlurmctldHost={host}(198.18.{subnet}.1)\nSlurmctldPort={port}\nSlurmdPort={}\n\
                 AuthType=auth/munge\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
                 SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd-%n.pid\nSlurmUser=root\nSlurmdUser=root\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n\
                 ReturnToService=2\nSchedulerType=sched/builtin\nSelectType=select/linear\nMpiDefault=none\n\
                 SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd-%n.log\n{node_lines}\
                 PartitionName=gpu Nodes={} Default=YES State=UP\n{extra}",
                free_port("127.0.0.1"),
                names.join(",")
            ),
        )
        .unwrap();
        let s = Slurm {
            dir,
            tag,
            nodes,
            conf,
        };
        let st = Command::new(sbin("slurmctld"))
            .arg("-f")
            .arg(&s.conf)
            .arg("-i")
            .status()
            .expect("slurmctld (.ci/run installs it)");
        assert!(st.success());
        for i in 1..=nodes {
            let st = Command::new(sbin("nsenter"))
                .arg(format!("--net=/run/netns/{}n{i}", s.tag))
                .arg(sbin("slurmd"))
                .arg("-f")
                .arg(&s.conf)
                .arg("-N")
                .arg(format!("gpu{i}"))
                .status()
                .unwrap();
            assert!(st.success());
        }
        let start = Instant::now();
        loop {
            let states = s.states();
            if states.len() == nodes && states.iter().all(|x| x.starts_with("idle")) {
                break;
            }
            if start.elapsed() > Duration::from_secs(60) {
                let log =
                    std::fs::read_to_string(s.dir.path().join("slurmctld.log")).unwrap_or_default();
                panic!("slurm nodes not idle: {states:?}\nslurmctld.log:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        s
    }

    pub fn states(&self) -> Vec<String> {
        let out = Command::new(sbin("sinfo"))
            // One line a node: every node is in `gpu`; another partition would repeat it.
            .args(["-h", "-N", "-p", "gpu", "-o", "%T"])
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    pub fn state(&self, node: &str) -> String {
        let out = Command::new(sbin("sinfo"))
            .args(["-h", "-N", "-p", "gpu", "-n", node, "-o", "%T"])
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let p = self.dir.path();
        let mut pids = vec![p.join("slurmctld.pid")];
        pids.extend((1..=self.nodes).map(|i| p.join(format!("slurmd-gpu{i}.pid"))));
        for f in pids {
            if let Ok(pid) = std::fs::read_to_string(f) {
                let _ = Command::new("kill").args(["-9", pid.trim()]).status();
            }
        }
        // Daemons that had not written their pid file yet: only ours name this config file.
        let _ = Command::new("pkill")
            .args(["-9", "-f"])
            .arg(self.conf.display().to_string())
            .status();
        std::thread::sleep(Duration::from_millis(300));
        let _ = Command::new(sbin("ip"))
            .args(["link", "del", &format!("{}br", self.tag)])
            .status();
        for i in 1..=self.nodes {
            let _ = Command::new(sbin("ip"))
                .args(["netns", "del", &format!("{}n{i}", self.tag)])
                .status();
        }
    }
}
