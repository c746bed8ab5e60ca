//! `gpufleet sim` as a child process, and the test's gpufleet beside it (tests/sim.rs,
//! tests/sim_upgrade.rs).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// A running simulator, stopped (by PID, SIGTERM then SIGKILL) on drop.
pub struct Sim {
    child: Child,
    /// Its stdout up to the `ready` line.
    pub banner: String,
    /// Where its stderr goes.
    stderr: PathBuf,
}

impl Sim {
    /// Starts `gpufleet sim` with `args` and waits (up to 120 s: a loaded 2-core machine) for
    /// its `ready` line.
    pub fn start(dir: &Path, args: &[&str]) -> Sim {
        let stderr = dir.join("sim.stderr");
        let mut child = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .arg("sim")
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", dir.join("home"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start gpufleet sim");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut banner = String::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                banner.push_str(&line);
                banner.push('\n');
                if line.starts_with("ready") {
                    let _ = tx.send(banner.clone());
                }
            }
        });
        let mut sim = Sim {
            child,
            banner: String::new(),
            stderr,
        };
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(banner) => sim.banner = banner,
            Err(_) => panic!(
                "gpufleet sim did not get ready; stderr:\n{}",
                std::fs::read_to_string(&sim.stderr).unwrap_or_default()
            ),
        }
        sim
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Stops it (SIGTERM) and returns its stderr, with its report at exit.
    pub fn stop(mut self) -> String {
        // SAFETY: kill(2) on our own child's pid, which it keeps until we wait for it.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        self.stderr()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        // Already reaped (stopped): its pid may be someone else's now.
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) on our own child's pid, which it keeps until we wait for it.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test's gpufleet: a clean environment (HOME in the temp folder, no ssh-agent), a config
/// with short limits.
pub fn gpufleet(dir: &Path, args: &[&str]) -> Output {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        "[probe]\nnvidia_smi_timeout = 2\ndeadline = 20\n[ssh]\nconnect_timeout = 5\nauth_timeout = 10\n",
    )
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.join("home"))
        .env("GPUFLEET_CONFIG", &config)
        .env("GPUFLEET_KNOWN_HOSTS", dir.join("gpufleet_known_hosts"))
        .output()
        .unwrap()
}

/// `snapshot -i <inventory> --format json` plus `extra`; the document.
pub fn snapshot(dir: &Path, inventory: &Path, extra: &[&str]) -> Value {
    let inv = inventory.display().to_string();
    let mut args = vec!["snapshot", "-i", &inv, "--format", "json"];
    args.extend_from_slice(extra);
    let out = gpufleet(dir, &args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "snapshot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

/// The inventory's nodes: (name, port, fixture label).
pub fn inventory_nodes(inventory: &Path) -> Vec<(String, u16, String)> {
    let doc: toml::Table = std::fs::read_to_string(inventory).unwrap().parse().unwrap();
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                u16::try_from(n["port"].as_integer().unwrap()).unwrap(),
                n["labels"]["fixture"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// OpenSSH's client with `key` (and only it), the simulator's known_hosts checked strictly.
pub fn ssh(key: &Path, known_hosts: &Path, port: u16, command: &str, stdin: &[u8]) -> Output {
    let mut child = Command::new(super::need("ssh"))
        .args([
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
        ])
        .args([
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
        ])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
        .arg("-i")
        .arg(key)
        .arg("-p")
        .arg(port.to_string())
        .arg("root@127.0.0.1")
        .arg(command)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ssh (openssh-client) is installed");
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = input.write_all(&bytes);
    });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let mut stdout = Vec::new();
    out.read_to_end(&mut stdout).unwrap();
    let status = child.wait().unwrap();
    writer.join().unwrap();
    Output {
        status,
        stdout,
        stderr: err_reader.join().unwrap(),
    }
}
