//! Upgrades against the simulator (`gpufleet sim --allow-upgrades`, `gpufleet demo
//! --allow-upgrades`): the node-side commands of a rollout ([`node_side`]) are recognised and
//! their effects simulated on a private copy of the node's fixture; **nothing is executed**.
//!
//! Recognised, each also under `sudo -n sh -c '…'` (a recipe with `sudo = true`):
//! - [`node_side::lock_command`], [`node_side::unlock_command`],
//!   [`node_side::read_lock_command`]: the node lock, kept in memory and written into the copy
//!   (`<copy>/root/var/lib/gpufleet/rollout.lock/owner`), so the next probe shows it;
//! - [`node_side::launch_command`] and [`node_side::poll_command`]: a detached recipe step, kept
//!   in memory per step file prefix (started / attached, running PID age SECONDS / done RC /
//!   dead);
//! - [`node_side::kill_command`] (a step's `kill_after`, `gpufleet upgrade --cancel`): the
//!   simulated step is stopped before its effect (a killed `switch-open` switches nothing, a
//!   killed `reboot` reboots nothing) and ends with the status `killed:WHY`, as on a node;
//! - [`node_side::boot_id_command`]: the node's boot identity, a random `boot_id` made when the
//!   simulator starts and made again at each simulated reboot (so a rollout proves the reboot);
//! - `true`.
//!
//! A command is recognised only when it is byte for byte what those functions build from the
//! arguments read back out of it; anything else is refused by the server (exit status 127).
//!
//! The recipe steps it simulates (a step's `run`, exactly):
//! - [`SWITCH_OPEN`]: runs for [`SWITCH_TIME`], then the copy shows the open kernel module of
//!   the same version and no nvidia-peermem (loaded or configured to load), as
//!   tests/upgrade.rs's fixture stand-in does on a real node's tree; exit status 0.
//! - [`HANG`]: runs until it is killed (a stuck package manager or DKMS build), for
//!   `kill_after` and `--cancel`; it changes nothing.
//! - [`REBOOT`]: after [`REBOOT_DELAY`] the node goes down: every open session is cut without a
//!   goodbye, new connections are closed at once, the step ends without an exit status (a
//!   reboot kills it); after [`REBOOT_DOWNTIME`] the node answers again, its kernel taint
//!   recomputed for the module now loaded (the proprietary module's `P` flag gone).
//! - anything else: the step ends with exit status 127 and says it is not simulated.
//!
//! After each change the node's probe answer is recorded again from the copy ([`corpus::record`],
//! the fixture's own probe run, as at startup) before the change is reported done, so the next
//! probe sees it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::corpus::{self, Answer, Fixture};
use super::stream::Cut;
use crate::actions::node_side::{self, StepFiles};

/// The recipe step that switches the node to the open kernel module and drops nvidia-peermem.
pub const SWITCH_OPEN: &str = "gpufleet-sim switch-open";
/// The recipe step that reboots the node.
pub const REBOOT: &str = "gpufleet-sim reboot";
/// The recipe step that never ends on its own: it runs until it is killed.
pub const HANG: &str = "gpufleet-sim hang";
/// How long [`SWITCH_OPEN`] runs.
pub const SWITCH_TIME: Duration = Duration::from_millis(1000);
/// How long after its launch [`REBOOT`] takes the node down.
pub const REBOOT_DELAY: Duration = Duration::from_millis(500);
/// How long a rebooting node stays down.
pub const REBOOT_DOWNTIME: Duration = Duration::from_secs(3);

/// The config written beside a `--allow-upgrades` inventory: the recipe `sim` (steps named for
/// what they simulate), short timeouts, waves of 5.
pub const CONFIG: &str = r#"# Written by `gpufleet sim --allow-upgrades`: the recipe its nodes simulate.
[upgrade]
max_unavailable = 5
drain_timeout = 60
step_timeout = 60
reboot_timeout = 60

[recipes.sim]
steps = [
  { name = "switch-open", run = "gpufleet-sim switch-open" },
  { name = "reboot", run = "gpufleet-sim reboot", reboot = true },
]
"#;

/// A node-side command of a rollout, as read back from its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeCommand {
    Lock {
        rollout: String,
        operator: String,
        takeover: Vec<String>,
    },
    Unlock {
        rollout: String,
    },
    ReadLock,
    BootId,
    Launch {
        files: StepFiles,
        command: String,
        retry: bool,
    },
    Poll {
        files: StepFiles,
    },
    Kill {
        files: StepFiles,
        why: String,
    },
    True,
}

/// The root prefix whose state folder is `dir` (`/var/lib/gpufleet` → `/`).
fn root_of(dir: &str) -> Option<String> {
    let r = dir.strip_suffix("/var/lib/gpufleet")?;
    Some(if r.is_empty() { "/".into() } else { r.into() })
}

/// Reads `command` back into the rollout command it is, or `None` when it is not exactly one
/// (`sudo -n sh -c '<one of them>'` too, one level).
pub fn recognise(command: &str) -> Option<NodeCommand> {
    let words = shlex::split(command)?;
    if let [sudo, n, sh, c, inner] = words.as_slice()
        && [sudo, n, sh, c].map(String::as_str) == ["sudo", "-n", "sh", "-c"]
        && format!("sudo -n sh -c {}", node_side_quote(inner)) == command
    {
        return recognise_plain(inner);
    }
    recognise_plain(command)
}

fn node_side_quote(s: &str) -> String {
    crate::actions::drain::quote_arg(s)
}

fn recognise_plain(command: &str) -> Option<NodeCommand> {
    if command == "true" {
        return Some(NodeCommand::True);
    }
    if let Some(rest) = command.strip_prefix("if [ -d ") {
        let (quoted, _) = rest.split_once(" ]; then")?;
        let path = shlex::split(quoted)?.into_iter().next()?;
        let root = path.strip_suffix(node_side::MARKER)?;
        let root = if root.is_empty() { "/" } else { root };
        return (node_side::read_lock_command(root) == command).then_some(NodeCommand::ReadLock);
    }
    if command.starts_with("mkdir -p ") {
        let (_, tail) = command.split_once("; else exec ")?;
        let tail = tail.strip_suffix("; fi")?;
        let words = shlex::split(tail)?;
        let (name, args) = match words.as_slice() {
            [sh, c, _script, name, args @ ..] if sh == "sh" && c == "-c" => (name, args),
            _ => return None,
        };
        let root = root_of(args.first()?)?;
        return match (name.as_str(), args) {
            ("gpufleet-lock", [_, rollout, operator, takeover @ ..]) => (node_side::lock_command(
                &root, rollout, operator, takeover,
            ) == command)
                .then(|| NodeCommand::Lock {
                    rollout: rollout.clone(),
                    operator: operator.clone(),
                    takeover: takeover.to_vec(),
                }),
            ("gpufleet-unlock", [_, rollout]) => (node_side::unlock_command(&root, rollout)
                == command)
                .then(|| NodeCommand::Unlock {
                    rollout: rollout.clone(),
                }),
            _ => None,
        };
    }
    let words = shlex::split(command)?;
    match words.as_slice() {
        [sh, c, _, name, prefix, lock, wait, run, mode, _runner]
            if sh == "sh" && c == "-c" && name == "gpufleet-launch" =>
        {
            let files = StepFiles {
                prefix: prefix.clone(),
                lock: lock.clone(),
            };
            let retry = mode == "retry";
            let wait: u64 = wait.parse().ok()?;
            (node_side::launch_command(&files, run, wait, retry) == command).then(|| {
                NodeCommand::Launch {
                    files,
                    command: run.clone(),
                    retry,
                }
            })
        }
        [sh, c, _, name, root] if sh == "sh" && c == "-c" && name == "gpufleet-boot-id" => {
            (node_side::boot_id_command(root) == command).then_some(NodeCommand::BootId)
        }
        [sh, c, _, name, prefix, lock] if sh == "sh" && c == "-c" && name == "gpufleet-poll" => {
            let files = StepFiles {
                prefix: prefix.clone(),
                lock: lock.clone(),
            };
            (node_side::poll_command(&files) == command).then_some(NodeCommand::Poll { files })
        }
        [sh, c, _, name, prefix, why, grace]
            if sh == "sh" && c == "-c" && name == "gpufleet-kill" =>
        {
            let files = StepFiles {
                prefix: prefix.clone(),
                lock: String::new(),
            };
            let grace: u64 = grace.parse().ok()?;
            (node_side::kill_command(&files, why, grace) == command).then(|| NodeCommand::Kill {
                files,
                why: why.clone(),
            })
        }
        _ => None,
    }
}

/// Where one simulated step stands.
#[derive(Debug, Clone)]
enum StepSim {
    /// Running as this pid since then.
    Running(u32, Instant),
    Done(String, String),
    Dead(String),
}

#[derive(Debug, Default)]
struct Inner {
    /// The node's private copy of its fixture, once a write made it.
    copy: Option<PathBuf>,
    /// The node lock's owner file, when held.
    lock: Option<String>,
    /// Steps by their file prefix.
    steps: HashMap<String, StepSim>,
    /// The task simulating each running step, by its file prefix (aborted by a kill).
    tasks: HashMap<String, tokio::task::AbortHandle>,
    /// The node is down (rebooting) until then.
    down_until: Option<Instant>,
    /// Open connections, to cut at a reboot.
    conns: Vec<Weak<Cut>>,
    next_pid: u32,
    /// The boot identity: a random UUID, made again at each reboot.
    boot_id: String,
}

/// One node's simulated write-side state.
#[derive(Debug)]
pub struct Upgradable {
    name: String,
    fixture: Fixture,
    /// Where its copy goes.
    copy_at: PathBuf,
    placeholder: String,
    inner: Mutex<Inner>,
    answer: Mutex<Arc<Answer>>,
    /// Serialises re-recordings, so the last one reflects the latest files.
    recording: tokio::sync::Mutex<()>,
}

/// What a command answers: exit status, stdout, stderr.
pub type Reply = (u32, String, String);

impl Upgradable {
    /// Node `name` serving `fixture` (recorded as `answer`); its copy is made under `copies`
    /// when first written to.
    pub fn new(name: &str, fixture: &Fixture, answer: Arc<Answer>, copies: &Path) -> Upgradable {
        Upgradable {
            name: name.to_string(),
            fixture: fixture.clone(),
            copy_at: copies.join(name),
            placeholder: crate::probe::new_boundary(),
            inner: Mutex::new(Inner {
                next_pid: 4000,
                boot_id: new_boot_id(),
                ..Inner::default()
            }),
            answer: Mutex::new(answer),
            recording: tokio::sync::Mutex::new(()),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The node's current probe answer.
    pub fn answer(&self) -> Arc<Answer> {
        self.answer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether the node is down (rebooting): its connections are closed at once.
    pub fn is_down(&self) -> bool {
        self.inner().down_until.is_some_and(|t| Instant::now() < t)
    }

    /// Keeps `cut` to cut the connection at a reboot.
    pub fn register(&self, cut: &Arc<Cut>) {
        let mut i = self.inner();
        i.conns.retain(|w| w.strong_count() > 0);
        i.conns.push(Arc::downgrade(cut));
    }

    /// The copy's root folder, made on first use.
    fn copy_root(&self) -> Result<PathBuf, String> {
        let mut i = self.inner();
        if let Some(c) = &i.copy {
            return Ok(c.join("root"));
        }
        copy_tree(&self.fixture.dir, &self.copy_at).map_err(|e| {
            format!(
                "cannot copy the fixture {}: {e}",
                self.fixture.dir.display()
            )
        })?;
        i.copy = Some(self.copy_at.clone());
        Ok(self.copy_at.join("root"))
    }

    /// Records the probe answer again from the copy.
    async fn rerecord(&self) -> Result<(), String> {
        let _one = self.recording.lock().await;
        let dir = self.inner().copy.clone();
        let Some(dir) = dir else { return Ok(()) };
        let f = Fixture {
            dir,
            ..self.fixture.clone()
        };
        let a = corpus::record(&f, &self.placeholder)
            .await
            .map_err(|e| format!("{e:#}"))?;
        *self.answer.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(a);
        Ok(())
    }

    /// Writes (or removes) the lock's owner file in the copy.
    fn write_lock(&self, owner: Option<&str>) -> Result<(), String> {
        let root = self.copy_root()?;
        let dir = root.join(node_side::MARKER);
        let r = match owner {
            Some(o) => {
                std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join("owner"), o))
            }
            None if dir.exists() => std::fs::remove_dir_all(&dir),
            None => Ok(()),
        };
        r.map_err(|e| format!("{}: {e}", dir.display()))
    }

    /// Answers `cmd` (recognised by [`recognise`]).
    pub async fn handle(self: &Arc<Self>, cmd: NodeCommand) -> Reply {
        match cmd {
            NodeCommand::True => (0, String::new(), String::new()),
            NodeCommand::BootId => (
                0,
                format!("gpufleet-boot boot_id {}\n", self.inner().boot_id),
                String::new(),
            ),
            NodeCommand::ReadLock => match self.inner().lock.clone() {
                Some(owner) => (0, format!("gpufleet-lock held\n{owner}"), String::new()),
                None => (0, "gpufleet-lock free\n".into(), String::new()),
            },
            NodeCommand::Lock {
                rollout,
                operator,
                takeover,
            } => {
                let held = self.inner().lock.clone();
                let holder = held.as_deref().map(|o| o.lines().next().unwrap_or(""));
                let free = match holder {
                    None => true,
                    Some(h) => h == rollout || takeover.iter().any(|t| t == h),
                };
                if !free {
                    let o = held.as_deref().unwrap_or_default();
                    let rest: Vec<&str> = o.lines().skip(1).take(2).collect();
                    return (
                        node_side::LOCKED,
                        String::new(),
                        format!(
                            "locked by rollout {} ({})\n",
                            holder.unwrap_or(""),
                            rest.join(" ")
                        ),
                    );
                }
                let owner = format!("{rollout}\n{operator}\nsince {}\n", now_utc());
                self.inner().lock = Some(owner.clone());
                self.changed(self.write_lock(Some(&owner))).await
            }
            NodeCommand::Unlock { rollout } => {
                let held = self.inner().lock.clone();
                match held {
                    None => (0, String::new(), String::new()),
                    Some(o) if o.lines().next() == Some(rollout.as_str()) => {
                        self.inner().lock = None;
                        self.changed(self.write_lock(None)).await
                    }
                    Some(o) => (
                        node_side::LOCKED,
                        String::new(),
                        format!(
                            "not unlocked: the lock is held by rollout {}, not {rollout}\n",
                            o.lines().next().unwrap_or("(unknown)")
                        ),
                    ),
                }
            }
            NodeCommand::Launch {
                files,
                command,
                retry,
            } => self.launch(&files.prefix, &command, retry),
            NodeCommand::Kill { files, why } => self.kill(&files.prefix, &why),
            NodeCommand::Poll { files } => match self.inner().steps.get(&files.prefix) {
                None => (0, "gpufleet-step none\n".into(), String::new()),
                Some(StepSim::Running(pid, since)) => (
                    0,
                    format!(
                        "gpufleet-step running {pid} age {}\n",
                        since.elapsed().as_secs()
                    ),
                    String::new(),
                ),
                Some(StepSim::Done(rc, out)) => {
                    (0, format!("gpufleet-step done {rc}\n{out}"), String::new())
                }
                Some(StepSim::Dead(out)) => {
                    (0, format!("gpufleet-step dead\n{out}"), String::new())
                }
            },
        }
    }

    /// After a change of the copy: records the answer again; exit status 0, or 1 and why.
    async fn changed(&self, written: Result<(), String>) -> Reply {
        match written {
            Ok(()) => match self.rerecord().await {
                Ok(()) => (0, String::new(), String::new()),
                Err(e) => (
                    1,
                    String::new(),
                    format!("gpufleet sim: {}: {e}\n", self.name),
                ),
            },
            Err(e) => (
                1,
                String::new(),
                format!("gpufleet sim: {}: {e}\n", self.name),
            ),
        }
    }

    fn launch(self: &Arc<Self>, prefix: &str, command: &str, retry: bool) -> Reply {
        let mut i = self.inner();
        let again = match i.steps.get(prefix) {
            None => true,
            Some(StepSim::Done(rc, _)) => retry && rc != "0",
            Some(StepSim::Dead(_)) => retry,
            Some(StepSim::Running(..)) => false,
        };
        if !again {
            return (0, "gpufleet-step attached\n".into(), String::new());
        }
        i.next_pid += 1;
        let pid = i.next_pid;
        i.steps
            .insert(prefix.to_string(), StepSim::Running(pid, Instant::now()));
        let me = self.clone();
        let key = prefix.to_string();
        let command = command.to_string();
        // Spawned while `i` is held: its end (which takes the lock) comes after its handle is
        // kept.
        let task = tokio::spawn(async move {
            let end = me.run_step(&command).await;
            let mut i = me.inner();
            if matches!(i.steps.get(&key), Some(StepSim::Running(p, _)) if *p == pid) {
                i.tasks.remove(&key);
                i.steps.insert(key, end);
            }
        });
        i.tasks.insert(prefix.to_string(), task.abort_handle());
        (0, "gpufleet-step started\n".into(), String::new())
    }

    /// [`node_side::kill_command`] on the step at `prefix`: a running one is stopped before
    /// its effect and ends `killed:WHY`; the answers are the node's (`killed PID (TERM)`,
    /// `ended RC`, `gone`, `none`).
    fn kill(&self, prefix: &str, why: &str) -> Reply {
        let mut i = self.inner();
        let said = match i.steps.get(prefix).cloned() {
            None => "none".to_string(),
            Some(StepSim::Done(rc, _)) => format!("ended {rc}"),
            Some(StepSim::Dead(_)) => "gone".to_string(),
            Some(StepSim::Running(pid, _)) => {
                if let Some(t) = i.tasks.remove(prefix) {
                    t.abort();
                }
                i.steps.insert(
                    prefix.to_string(),
                    StepSim::Done(format!("killed:{why}"), String::new()),
                );
                format!("killed {pid} (TERM)")
            }
        };
        (0, format!("gpufleet-kill {said}\n"), String::new())
    }

    /// Simulates the step `command`; returns how it ends.
    async fn run_step(&self, command: &str) -> StepSim {
        match command {
            SWITCH_OPEN => {
                tokio::time::sleep(SWITCH_TIME).await;
                let done = self.copy_root().and_then(|r| switch_open(&r));
                match done {
                    Ok(said) => match self.rerecord().await {
                        Ok(()) => StepSim::Done("0".into(), said),
                        Err(e) => StepSim::Done("1".into(), format!("{said}{e}\n")),
                    },
                    Err(e) => StepSim::Done("1".into(), format!("{e}\n")),
                }
            }
            HANG => std::future::pending().await,
            REBOOT => {
                tokio::time::sleep(REBOOT_DELAY).await;
                {
                    let mut i = self.inner();
                    i.down_until = Some(Instant::now() + REBOOT_DOWNTIME);
                    // It comes back as another boot.
                    i.boot_id = new_boot_id();
                    for c in i.conns.drain(..).filter_map(|w| w.upgrade()) {
                        c.cut();
                    }
                }
                // Recorded while the node is down: it comes back with the new answer.
                let rebooted = match self.copy_root().and_then(|r| boot(&r)) {
                    Ok(()) => self.rerecord().await,
                    Err(e) => Err(e),
                };
                if let Err(e) = rebooted {
                    eprintln!("gpufleet sim: {}: reboot: {e}", self.name);
                }
                StepSim::Dead("rebooting\n".into())
            }
            other => StepSim::Done(
                "127".into(),
                format!(
                    "gpufleet sim: {}: step `{}` is not simulated (it runs nothing; the steps it simulates are `{SWITCH_OPEN}`, `{REBOOT}` and `{HANG}`)\n",
                    self.name,
                    other
                        .chars()
                        .take(200)
                        .flat_map(char::escape_debug)
                        .collect::<String>()
                ),
            ),
        }
    }
}

/// A random boot identity, as the kernel makes one (`random(4)`: a version 4 UUID, lowercase).
fn new_boot_id() -> String {
    let mut b = [0u8; 16];
    // The OS generator; a failure leaves zeros, which the next reboot still changes.
    let _ = getrandom::fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// UTC now, `YYYY-MM-DDTHH:MM:SSZ`.
fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Copies the folder `from` to `to` (files, folders, symbolic links as links).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let t = e.file_type()?;
        if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if t.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// The [`SWITCH_OPEN`] effect on a node tree at `root`: `/proc/driver/nvidia/version` names
/// the open kernel module of the same version and arch (its banner read as the probe reads it,
/// [`crate::model::parse::driver::parse_banner`]: open or proprietary, x86_64, aarch64 or any other
/// arch; an open module's banner is kept as it is, the other lines always), `/proc/modules`
/// loses nvidia-peermem and the proprietary `P` taint of the nvidia modules, the
/// nvidia-peermem modules-load.d file and `/sys/module/nvidia_peermem` go. Returns what the
/// step prints.
///
/// Errors: no loaded NVIDIA driver (no version file), a version file without a banner or
/// without a version in it, or a file that cannot be written.
pub fn switch_open(root: &Path) -> Result<String, String> {
    let vf = root.join("proc/driver/nvidia/version");
    let text = std::fs::read_to_string(&vf).map_err(|e| {
        format!(
            "no NVIDIA driver loaded ({}: {e}): nothing to switch",
            vf.display()
        )
    })?;
    // The banner as the probe reads it (src/model/parse/driver.rs): open and proprietary, any arch.
    let banner = crate::model::parse::driver::parse_banner(&text)
        .ok_or_else(|| format!("{}: no NVIDIA kernel module banner", vf.display()))?;
    let version = banner
        .version
        .clone()
        .ok_or_else(|| format!("{}: no driver version in its banner", vf.display()))?;
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    // Every line but the banner kept (GCC version, …); an open module's banner is kept as is.
    if banner.flavor != crate::model::Flavor::Open {
        let rest: String = text
            .lines()
            .filter(|l| *l != banner.line)
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(
            &vf,
            format!(
                "NVRM version: NVIDIA UNIX Open Kernel Module for {}  {version}  Release Build  (gpufleet-sim@)\n{rest}",
                banner.arch
            ),
        )
        .map_err(|e| io(&vf, e))?;
    }
    let mf = root.join("proc/modules");
    if let Ok(m) = std::fs::read_to_string(&mf) {
        let out: String = m
            .lines()
            .filter(|l| !l.starts_with("nvidia_peermem "))
            .map(|l| {
                let l = l.replace("nvidia_peermem,", "");
                if l.starts_with("nvidia") {
                    format!("{}\n", l.replace("(POE)", "(OE)"))
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(&mf, out).map_err(|e| io(&mf, e))?;
    }
    let conf = root.join("etc/modules-load.d/nvidia-peermem.conf");
    if conf.exists() {
        std::fs::remove_file(&conf).map_err(|e| io(&conf, e))?;
    }
    let sys = root.join("sys/module/nvidia_peermem");
    if sys.exists() {
        std::fs::remove_dir_all(&sys).map_err(|e| io(&sys, e))?;
    }
    Ok(format!(
        "switched to the open kernel module {version} ({}); nvidia-peermem removed\n",
        banner.arch
    ))
}

/// The [`REBOOT`] effect on a node tree at `root`: with the open module loaded the kernel's
/// taint is `O` + `E` (12288: out-of-tree, unsigned), the proprietary `P` gone.
fn boot(root: &Path) -> Result<(), String> {
    let vf = root.join("proc/driver/nvidia/version");
    let open = std::fs::read_to_string(&vf).is_ok_and(|t| t.contains("Open Kernel Module"));
    let tf = root.join("proc/sys/kernel/tainted");
    if open && tf.exists() {
        std::fs::write(&tf, "12288\n").map_err(|e| format!("{}: {e}", tf.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
