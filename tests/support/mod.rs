//! Test harness with real parts: OpenSSH sshd processes (Debian's openssh-server), one per fake
//! node on its own loopback address 127.0.0.N, each serving one fixture node (its `bin/` first on
//! PATH through `SetEnv`, the inventory's root prefix = its `root/`). The harness starts and
//! stops only its own processes, by PID.
#![allow(dead_code)]
// Test helpers: a panic here is a failing test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod sim;
pub mod slurm;
pub mod upgrade;

pub fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The fixture nodes folder: `$GPUFLEET_FIXTURES`, `../shared/fixtures/nodes`, else the copy.
pub fn fixtures_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GPUFLEET_FIXTURES") {
        return PathBuf::from(d);
    }
    // Always the project's copy: it has real symlinks, which the shared copy may hold as regular
    // files (tests/fixture_nodes.rs checks that the two agree; scripts/sync-shared.sh refreshes it).
    manifest().join("tests/fixtures/nodes")
}

/// The schema-2 fixture folder (`tests/fixtures/nodes-v2`).
pub fn fixtures_v2_dir() -> PathBuf {
    manifest().join("tests/fixtures/nodes-v2")
}

pub fn fixture(name: &str) -> PathBuf {
    fixtures_dir().join(name)
}

/// Every fixture node folder of `nodes/` and `nodes-v2/` (the schema-2 cases), sorted.
pub fn all_fixture_nodes() -> Vec<PathBuf> {
    let mut v = fixture_nodes();
    if std::env::var_os("GPUFLEET_FIXTURES").is_none() {
        v.extend(fixture_nodes_in(&fixtures_v2_dir()));
    }
    v
}

/// The schema-3 fixture folder (`tests/fixtures-v3`: issue 24's cases, built by the project, not
/// synced from the shared fixtures).
pub fn fixtures_v3_dir() -> PathBuf {
    manifest().join("tests/fixtures-v3")
}

/// Every fixture node folder of `tests/fixtures-v3`, sorted.
pub fn fixture_nodes_v3() -> Vec<PathBuf> {
    fixture_nodes_in(&fixtures_v3_dir())
}

/// A fixture of `nodes/` or `nodes-v2/` by name.
pub fn any_fixture(name: &str) -> PathBuf {
    let v1 = fixture(name);
    if v1.is_dir() {
        v1
    } else {
        fixtures_v2_dir().join(name)
    }
}

/// Every fixture node folder of `nodes/`, sorted.
pub fn fixture_nodes() -> Vec<PathBuf> {
    fixture_nodes_in(&fixtures_dir())
}

fn fixture_nodes_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("fixtures folder {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("node.toml").is_file())
        .collect();
    v.sort();
    v
}

/// Compares a node's JSON with its fixture's `[expected]` table; returns the mismatches.
pub fn check_expected(fixture: &Path, node: &Value) -> Vec<String> {
    let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
    let spec: toml::Table = std::fs::read_to_string(fixture.join("node.toml"))
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{name}/node.toml: {e}"));
    let expected = spec["expected"].as_table().expect("[expected]");
    let gpus = node["gpus"].as_array().cloned().unwrap_or_default();
    let mut failures = Vec::new();
    for (key, want) in expected {
        if key == "reasons" || key == "absent_reasons" {
            let codes: Vec<&str> = node["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["code"].as_str().unwrap())
                .collect();
            let must_appear = key == "reasons";
            for code in want.as_array().unwrap() {
                let code = code.as_str().unwrap();
                if must_appear && !codes.contains(&code) {
                    failures.push(format!("{name}: reason {code} missing from {codes:?}"));
                }
                if !must_appear && codes.contains(&code) {
                    failures.push(format!("{name}: reason {code} must not appear: {codes:?}"));
                }
            }
            continue;
        }
        let got = match key.as_str() {
            "kernel" => node["kernel"]["release"].clone(),
            "module_flavor" => node["driver"]["flavor"].clone(),
            "driver_version" => node["driver"]["version"].clone(),
            "gpu_count" => Value::from(gpus.len()),
            "gpu_name" => gpus.first().map_or(Value::Null, |g| g["name"].clone()),
            "compute_capability" => gpus
                .first()
                .map_or(Value::Null, |g| g["compute_capability"].clone()),
            "peermem_loaded" => node["peermem"]["loaded"].clone(),
            "peermem_configured" => node["peermem"]["configured"].clone(),
            "dma_buf_kernel" => node["dma_buf"]["kernel_support"].clone(),
            "proprietary_taint" => node["taint"]["proprietary"].clone(),
            "status" => node["status"].clone(),
            other => {
                panic!("[expected] key {other:?} is unknown to the tests (fixtures/README.md)")
            }
        };
        if got != serde_json::to_value(want).unwrap() {
            failures.push(format!("{name}: {key} = {got}, expected {want}"));
        }
    }
    failures
}

pub fn keygen(path: &Path, passphrase: &str) {
    let st = Command::new(need("ssh-keygen"))
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            passphrase,
            "-C",
            "gpufleet-test",
            "-f",
        ])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("ssh-keygen (openssh-client) is installed");
    assert!(st.success());
}

pub fn public_key(path: &Path) -> String {
    let text = std::fs::read_to_string(path.with_extension("pub")).unwrap();
    text.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn local_user() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A port free on `addr` right now.
pub fn free_port(addr: &str) -> u16 {
    TcpListener::bind((addr, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `cond` every 20 ms until it holds. Panics naming `what` when `limit` passes first: a
/// test waits on a condition, never on a fixed sleep.
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < limit,
            "waited {limit:?} for {what}: it did not happen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The Debian package that installs the program `name` (what `scripts/test.sh` installs).
fn package_of(name: &str) -> &str {
    match name {
        "sshd" => "openssh-server",
        "ssh" | "ssh-keygen" | "ssh-agent" | "ssh-add" => "openssh-client",
        "scontrol" | "sinfo" | "srun" | "squeue" => "slurm-client",
        "munge" | "unmunge" | "munged" | "mungekey" => "munge",
        "ip" => "iproute2",
        "promtool" => "prometheus",
        "runuser" | "unshare" => "util-linux",
        other => other,
    }
}

/// The program `name` from PATH, /usr/sbin or /sbin. When it is not installed the test binary
/// stops at once with one line naming the package to install (exit status 2; no panic and no
/// backtrace): `scripts/test.sh` installs every package the suite needs.
pub fn need(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    match found {
        Some(p) => p,
        None => {
            eprintln!(
                "gpufleet tests: `{name}` is not installed: apt-get install {} (or run scripts/test.sh as root, which installs what the tests need)",
                package_of(name)
            );
            std::process::exit(2)
        }
    }
}

fn sshd_binary() -> PathBuf {
    need("sshd")
}

/// One real sshd on `addr:port`, stopped (by PID) on drop.
pub struct Sshd {
    pub addr: String,
    pub port: u16,
    pub dir: PathBuf,
    pub host_key: PathBuf,
    child: Child,
}

impl Sshd {
    /// Starts sshd; `bin` goes first on the session PATH; `extra` lines go into sshd_config.
    pub fn start(
        dir: &Path,
        addr: &str,
        port: u16,
        authorized_keys: &Path,
        bin: Option<&Path>,
        extra: &str,
    ) -> Sshd {
        std::fs::create_dir_all(dir).unwrap();
        let host_key = dir.join("host_ed25519");
        if !host_key.exists() {
            keygen(&host_key, "");
        }
        // Privilege separation needs this folder when sshd runs as root.
        let _ = std::fs::create_dir_all("/run/sshd");
        let path = match bin {
            Some(b) if b.is_dir() => format!("{}:/usr/bin:/bin", b.display()),
            _ => "/usr/bin:/bin".to_string(),
        };
        // `extra` may set the session PATH itself (a node without some tool).
        let setenv = if extra.contains("SetEnv PATH=") {
            String::new()
        } else {
            format!("SetEnv PATH={path}\n")
        };
        let cfg = dir.join("sshd_config");
        std::fs::write(
            &cfg,
            format!(
                "ListenAddress {addr}:{port}\nHostKey {}\nPidFile {}\nAuthorizedKeysFile {}\n\
                 UsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nPermitRootLogin prohibit-password\n{setenv}\
                 LogLevel ERROR\nMaxStartups 200:30:400\n{extra}\n",
                host_key.display(),
                dir.join("sshd.pid").display(),
                authorized_keys.display(),
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("sshd.log")).unwrap();
        let child = Command::new(sshd_binary())
            .args(["-D", "-e", "-f"])
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start sshd");
        let s = Sshd {
            addr: addr.to_string(),
            port,
            dir: dir.to_path_buf(),
            host_key,
            child,
        };
        s.wait_ready();
        s
    }

    fn wait_ready(&self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if TcpStream::connect((self.addr.as_str(), self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default();
        panic!("sshd on {}:{} did not start:\n{log}", self.addr, self.port);
    }

    /// The known_hosts line for this server.
    pub fn known_hosts_line(&self) -> String {
        format!(
            "[{}]:{} {}",
            self.addr,
            self.port,
            public_key(&self.host_key)
        )
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn config(&self) -> PathBuf {
        self.dir.join("sshd_config")
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A "rebooted" node's sshd was started again as a daemon: stop it, and anything else
        // that names its config (the stand-in's `sleep; sshd` still waiting), by that path.
        let _ = Command::new("pkill")
            .arg("-f")
            .arg(self.config().display().to_string())
            .status();
        // Sessions of a hung node (see `Fleet::hang`).
        if let Ok(pids) = std::fs::read_to_string(self.dir.join("hung.pids")) {
            for pid in pids.split_whitespace() {
                let _ = Command::new("kill").arg(pid).stderr(Stdio::null()).status();
            }
        }
    }
}

impl Drop for Fleet {
    /// Stops the sshds before `tmp` (which holds their pid files) is removed: fields drop in
    /// declaration order, after this.
    fn drop(&mut self) {
        self.nodes.clear();
    }
}

/// A fleet of sshd processes, one per fixture, with a user key, a known_hosts file and an
/// inventory naming them all.
pub struct Fleet {
    pub tmp: tempfile::TempDir,
    pub user_key: PathBuf,
    pub authorized_keys: PathBuf,
    pub known_hosts: PathBuf,
    pub inventory: PathBuf,
    pub config: PathBuf,
    pub nodes: Vec<(PathBuf, Sshd)>,
}

impl Fleet {
    /// Starts one sshd per fixture on 127.0.0.`first_octet`, `first_octet`+1, …
    pub fn start(fixtures: &[PathBuf], first_octet: u8) -> Fleet {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        let user_key = tmp.path().join("id_user");
        keygen(&user_key, "");
        let authorized_keys = tmp.path().join("authorized_keys");
        std::fs::write(&authorized_keys, public_key(&user_key) + "\n").unwrap();
        let mut nodes = Vec::new();
        for (i, f) in fixtures.iter().enumerate() {
            let addr = format!("127.0.0.{}", first_octet as usize + i);
            let port = free_port(&addr);
            let dir = tmp.path().join(format!("sshd-{i}"));
            let sshd = Sshd::start(
                &dir,
                &addr,
                port,
                &authorized_keys,
                Some(&f.join("bin")),
                "",
            );
            nodes.push((f.clone(), sshd));
        }
        let known_hosts = tmp.path().join("known_hosts");
        let lines: Vec<String> = nodes.iter().map(|(_, s)| s.known_hosts_line()).collect();
        std::fs::write(&known_hosts, lines.join("\n") + "\n").unwrap();
        let config = tmp.path().join("config.toml");
        std::fs::write(&config, "[probe]\nnvidia_smi_timeout = 2\ndeadline = 20\n[ssh]\nconnect_timeout = 3\nauth_timeout = 5\n").unwrap();
        let fleet = Fleet {
            inventory: tmp.path().join("inventory.toml"),
            tmp,
            user_key,
            authorized_keys,
            known_hosts,
            config,
            nodes,
        };
        fleet.write_inventory(&fleet.inventory_text());
        fleet
    }

    /// Stops node `i`'s sshd and starts it again on the same address and port, with a new
    /// host key if `new_host_key`, and `extra` lines in its sshd_config.
    pub fn restart(&mut self, i: usize, new_host_key: bool, extra: &str) {
        let (f, old) = self.nodes.remove(i);
        let (addr, port, dir) = (old.addr.clone(), old.port, old.dir.clone());
        drop(old);
        if new_host_key {
            std::fs::remove_file(dir.join("host_ed25519")).unwrap();
        }
        let new = Sshd::start(
            &dir,
            &addr,
            port,
            &self.authorized_keys,
            Some(&f.join("bin")),
            extra,
        );
        self.nodes.insert(i, (f, new));
    }

    /// Restarts node `i` so every session hangs after a good login (`sleep 300`). Each session
    /// writes its pid to `hung.pids` in the sshd's folder, and dropping the sshd stops them:
    /// sshd leaves a forced command running when the client goes.
    pub fn hang(&mut self, i: usize) {
        let pids = self.nodes[i].1.dir.join("hung.pids");
        self.restart(
            i,
            false,
            &format!(
                "ForceCommand echo $$ >> '{}'; exec sleep 300",
                pids.display()
            ),
        );
    }

    pub fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    /// `[[nodes]]` entries for every sshd (name = fixture folder name).
    pub fn inventory_text(&self) -> String {
        let mut s = format!(
            "known_hosts = \"{}\"\n[defaults]\nuser = \"{}\"\nidentity_file = \"{}\"\n",
            self.known_hosts.display(),
            local_user(),
            self.user_key.display()
        );
        for (f, sshd) in &self.nodes {
            s.push_str(&format!(
                "[[nodes]]\nname = \"{}\"\nhost = \"{}\"\nport = {}\nroot = \"{}\"\n",
                f.file_name().unwrap().to_string_lossy(),
                sshd.addr,
                sshd.port,
                f.join("root").display()
            ));
        }
        s
    }

    pub fn write_inventory(&self, text: &str) {
        std::fs::write(&self.inventory, text).unwrap();
    }

    /// Runs the real binary with a clean environment: HOME in the temp dir, no ssh-agent.
    pub fn gpufleet(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_gpufleet"));
        c.args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.home())
            .env("GPUFLEET_CONFIG", &self.config)
            .env(
                "GPUFLEET_KNOWN_HOSTS",
                self.tmp.path().join("gpufleet_known_hosts"),
            )
            .env("USER", local_user());
        c
    }

    /// `snapshot -i <inventory> --format json` plus `args`; returns (exit code, document).
    pub fn snapshot(&self, args: &[&str]) -> (i32, Value) {
        let inv = self.inventory.display().to_string();
        let mut all = vec!["snapshot", "-i", &inv, "--format", "json"];
        all.extend_from_slice(args);
        let out = self.gpufleet(&all);
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}); stderr:\n{}\nstdout:\n{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            )
        });
        (out.status.code().unwrap_or(-1), doc)
    }
}

/// The node named `name` in a snapshot document.
pub fn node<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no node {name} in {doc:#}"))
}

pub fn codes(node: &Value) -> Vec<String> {
    node["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap().to_string())
        .collect()
}

/// A tmux server of the test's own (its own socket), with one session of 160x45 (or the size
/// [`Tmux::start_sized`] gives). The session's command runs in a temporary folder of its own
/// ([`Tmux::cwd`]), never in the checkout: the TUI writes its exports (`e`, `E`) into its
/// current folder, and a key typed in the matrix by mistake would leave them in the
/// repository (8 of them were committed once). On drop, a `gpufleet-*` export that appeared in
/// the checkout while the session ran fails the test.
pub struct Tmux {
    pub socket: String,
    pub session: String,
    /// The session's current folder (where the TUI's exports land).
    pub cwd: tempfile::TempDir,
    /// The checkout's `gpufleet-*` exports when the session started.
    exports_before: Vec<PathBuf>,
}

/// The `gpufleet-*.json` / `gpufleet-*.csv` files (TUI exports) in `dir`, sorted.
pub fn exports_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    n.starts_with("gpufleet-") && (n.ends_with(".json") || n.ends_with(".csv"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

impl Tmux {
    pub fn start(command: &str) -> Tmux {
        Tmux::start_sized(command, 160, 45)
    }

    /// [`Tmux::start`] with a terminal of `width` x `height`.
    pub fn start_sized(command: &str, width: u16, height: u16) -> Tmux {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cwd = tempfile::Builder::new()
            .prefix("gpufleet-tmux-cwd-")
            .tempdir()
            .unwrap();
        let t = Tmux {
            socket: format!("gpufleet-test-{}-{n}", std::process::id()),
            session: "tui".into(),
            exports_before: exports_in(Path::new(env!("CARGO_MANIFEST_DIR"))),
            cwd,
        };
        let (w, h) = (width.to_string(), height.to_string());
        let ok = Command::new(need("tmux"))
            .args([
                "-L",
                &t.socket,
                "new-session",
                "-d",
                "-s",
                &t.session,
                "-c",
                t.cwd.path().to_str().unwrap(),
                "-x",
                &w,
                "-y",
                &h,
                command,
            ])
            .status()
            .expect("tmux is installed (.ci/run installs it)");
        assert!(ok.success());
        t
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["-L", &self.socket, "send-keys", "-t", &self.session];
        args.extend_from_slice(keys);
        assert!(
            Command::new(need("tmux"))
                .args(&args)
                .status()
                .unwrap()
                .success()
        );
    }

    pub fn screen(&self) -> String {
        let out = Command::new(need("tmux"))
            .args([
                "-L",
                &self.socket,
                "capture-pane",
                "-p",
                "-t",
                &self.session,
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen contains `text`; returns the screen.
    pub fn wait_for(&self, text: &str) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "waited for {text:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new(need("tmux"))
            .args(["-L", &self.socket, "kill-server"])
            .status();
        let now = exports_in(Path::new(env!("CARGO_MANIFEST_DIR")));
        let new: Vec<&PathBuf> = now
            .iter()
            .filter(|p| !self.exports_before.contains(p))
            .collect();
        if !new.is_empty() && !std::thread::panicking() {
            panic!("a TUI session wrote exports into the checkout: {new:?}");
        }
    }
}

/// Copies a fixture tree with `cp -a` (symlinks, modes and FIFOs as they are).
pub fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
}

/// A writable copy of fixture `name` (of `nodes/` or `nodes-v2/`) in a temp dir whose path is
/// unique to this call, so a test can find its own processes by it (the originals are never
/// edited).
pub fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::Builder::new()
        .prefix("gpufleet-test-")
        .tempdir()
        .unwrap();
    let node = t.path().join(name);
    copy_tree(&any_fixture(name), &node);
    (t, node)
}

/// A PATH of symlinks to the system tools the probe and the replayed fixture commands use,
/// without `without` (a node that lacks them).
pub fn tools_without(without: &[&str]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    for tool in [
        "sh", "cat", "ls", "grep", "id", "gzip", "od", "sleep", "dirname", "awk", "timeout",
        "head", "tail", "readlink", "find", "dmesg", "mkdir", "rm",
    ] {
        if without.contains(&tool) {
            continue;
        }
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} is not installed"));
        std::os::unix::fs::symlink(found, dir.path().join(tool)).unwrap();
    }
    let p = dir.path().display().to_string();
    (dir, p)
}

/// An executable `name` in folder `bin` that runs `action` (sh code) when its first argument
/// ends with `suffix`, and `exec /bin/<name> "$@"` otherwise: a `cat` that hangs on one file, a
/// `cat` that floods.
pub fn shim(bin: &Path, name: &str, suffix: &str, action: &str) {
    let script =
        format!("#!/bin/sh\ncase \"$1\" in *{suffix}) {action} ;; esac\nexec /bin/{name} \"$@\"\n");
    let path = bin.join(name);
    std::fs::write(&path, script).unwrap();
    let mut perm = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm).unwrap();
}

/// An oracle program from PyPI (`nodeset` of ClusterShell, `ansible-inventory` of ansible-core):
/// `$GPUFLEET_ORACLE_BIN/<name>` when set, else target/ci-venv/bin (scripts/test.sh installs the
/// pinned `package` there), else PATH. Missing: one line naming the package; under CI (`CI` set)
/// the test binary stops with exit status 2, elsewhere the differential test is skipped (None).
pub fn need_pip(name: &str, package: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::var_os("GPUFLEET_ORACLE_BIN")
        .map(PathBuf::from)
        .into_iter()
        .chain([manifest().join("target/ci-venv/bin")])
        .chain(std::env::split_paths(&path));
    let found = dirs.map(|d| d.join(name)).find(|p| p.is_file());
    if found.is_none() {
        let line = format!(
            "`{name}` is not installed: python3 -m venv target/ci-venv && target/ci-venv/bin/pip install {package} (scripts/test.sh does)"
        );
        if std::env::var_os("CI").is_some() {
            eprintln!("gpufleet tests: {line}");
            std::process::exit(2)
        }
        eprintln!("gpufleet tests: SKIPPED, {line}");
    }
    found
}
