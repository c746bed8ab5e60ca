//! The shell gpufleet runs on a node for the write side (pure: these functions build command
//! lines; the executor runs them). Everything lives under `<root>/var/lib/gpufleet/`:
//!
//! - `rollout.lock/` — the node lock: made with an atomic `mkdir`; its `owner` file names the
//!   rollout on its first line (compared exactly), then the operator (`user@host pid N`) and
//!   since when. Taken under `flock lock.mutex` where flock exists, so that a takeover of an
//!   abandoned rollout's lock is atomic too; without flock a takeover claims
//!   `rollout.lock/taken-from-<id>` with `mkdir`, so two takers never both pass.
//! - `steps/<rollout>/<step>.{out,rc,pid}` — a recipe step run detached from the SSH session
//!   (its own session through `setsid`, else `nohup`; stdin from /dev/null, no tty): its output,
//!   its exit status (written to a temporary file, then renamed) and its pid. The `.out` file is
//!   created with `set -C` before the step starts: it is the claim that makes the step start
//!   once. The step holds `step.lock` (flock) while it runs: steps run one at a time per node.
//!   Giving the node lock back removes step folders older than 30 days.

use super::drain::quote_arg as quote;

/// The node lock's folder, relative to the node's root.
pub const MARKER: &str = "var/lib/gpufleet/rollout.lock";

/// Exit status of the lock command when another rollout holds the node.
pub const LOCKED: u32 = 3;

fn root_path(root: &str, rel: &str) -> String {
    format!("{}/{rel}", root.trim_end_matches('/'))
}

/// `<root>/var/lib/gpufleet`.
pub fn state_dir(root: &str) -> String {
    root_path(root, "var/lib/gpufleet")
}

/// `script` run by `sh -c` with `args` as `$1…`, under `flock -w 30 <mutex>` where flock exists.
fn under_mutex(root: &str, name: &str, script: &str, args: &[&str]) -> String {
    let dir = quote(&state_dir(root));
    let mutex = quote(&format!("{}/lock.mutex", state_dir(root)));
    let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
    let tail = format!("sh -c {} {name} {}", quote(script), args.join(" "));
    format!(
        "mkdir -p {dir} && if command -v flock >/dev/null 2>&1; then exec flock -w 30 {mutex} {tail}; else exec {tail}; fi"
    )
}

const LOCK_SCRIPT: &str = r#"L=$1/rollout.lock; me=$2; op=$3; shift 3
take() {
  printf '%s\n%s\nsince %s\n' "$me" "$op" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$L/owner.$$" &&
    mv -f "$L/owner.$$" "$L/owner"
}
if mkdir "$L" 2>/dev/null; then take; exit $?; fi
i=0
while [ ! -s "$L/owner" ] && [ $i -lt 5 ]; do sleep 1; i=$((i+1)); done
o=$(head -n 1 "$L/owner" 2>/dev/null)
if [ -n "$o" ] && [ "$o" = "$me" ]; then take; exit $?; fi
for t in "$@"; do
  if [ -n "$o" ] && [ "$o" = "$t" ]; then
    if mkdir "$L/taken-from-$o" 2>/dev/null; then take; exit $?; fi
    echo "locked: the lock of abandoned rollout $o was taken over by another rollout just now" >&2
    exit 3
  fi
done
echo "locked by rollout ${o:-(unknown: no owner file)} ($(sed -n '2p;3p' "$L/owner" 2>/dev/null | tr '\n' ' ' | sed 's/ *$//'))" >&2
exit 3"#;

/// The command that takes the node lock for `rollout` on behalf of `operator`
/// (`user@host pid N`): exit 0 when taken (or already this rollout's), [`LOCKED`] with
/// `locked by rollout …` on stderr when another rollout holds it. A lock of a rollout in
/// `takeover` (abandoned ones) is taken over, by one taker only.
pub fn lock_command(root: &str, rollout: &str, operator: &str, takeover: &[String]) -> String {
    let dir = state_dir(root);
    let mut args = vec![dir.as_str(), rollout, operator];
    args.extend(takeover.iter().map(String::as_str));
    under_mutex(root, "gpufleet-lock", LOCK_SCRIPT, &args)
}

const UNLOCK_SCRIPT: &str = r#"L=$1/rollout.lock; me=$2
[ -d "$L" ] || exit 0
o=$(head -n 1 "$L/owner" 2>/dev/null)
if [ "$o" = "$me" ]; then
  rm -rf "$L" || exit $?
  if [ -d "$1/steps" ] && command -v find >/dev/null 2>&1; then
    find "$1/steps" -mindepth 1 -maxdepth 1 -type d -mtime +30 -exec rm -rf {} + 2>/dev/null
  fi
  exit 0
fi
echo "not unlocked: the lock is held by rollout ${o:-(unknown)}, not $me" >&2
exit 3"#;

/// The command that gives the node lock back: only when `rollout` holds it. It then removes
/// the step folders (`steps/<rollout>/`) not changed for more than 30 days, so a node keeps its
/// recent rollouts' step output and no more.
pub fn unlock_command(root: &str, rollout: &str) -> String {
    let dir = state_dir(root);
    under_mutex(root, "gpufleet-unlock", UNLOCK_SCRIPT, &[&dir, rollout])
}

/// The read-only command that prints the node lock's marker: `gpufleet-lock free`, or
/// `gpufleet-lock held` then the `owner` file.
pub fn read_lock_command(root: &str) -> String {
    let l = quote(&root_path(root, MARKER));
    format!(
        "if [ -d {l} ]; then echo 'gpufleet-lock held'; cat {l}/owner 2>/dev/null; else echo 'gpufleet-lock free'; fi"
    )
}

pub use crate::model::lock::LockOwner;

/// Reads [`read_lock_command`]'s output: `Some(None)` free, `Some(Some(owner))` held, `None`
/// when it is not that command's output.
pub fn parse_lock(output: &str) -> Option<Option<LockOwner>> {
    let mut lines = output.lines();
    match lines.next()?.trim() {
        "gpufleet-lock free" => Some(None),
        "gpufleet-lock held" => Some(Some(crate::model::lock::parse_owner(
            output.split_once('\n').map_or("", |(_, rest)| rest),
        ))),
        _ => None,
    }
}

/// The node's boot identity, relative to its root: a random UUID the kernel makes at each
/// boot (`random(4)`: `boot_id`).
pub const BOOT_ID: &str = "proc/sys/kernel/random/boot_id";

/// How much later a `btime` must be to be another boot: `btime` (boot time in seconds since the
/// epoch, `proc(5)`) is computed from the clock and the uptime, so it can move by a second
/// between reads of one boot.
pub const BTIME_SLACK_S: u64 = 2;

/// What says which boot a node is running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootIdentity {
    /// `/proc/sys/kernel/random/boot_id` (lowercase UUID).
    BootId(String),
    /// `btime` of `/proc/stat`, where there is no `boot_id`.
    Btime(u64),
}

impl std::fmt::Display for BootIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootIdentity::BootId(id) => write!(f, "boot_id {id}"),
            BootIdentity::Btime(t) => write!(f, "btime {t}"),
        }
    }
}

impl BootIdentity {
    /// Reads `boot_id UUID` or `btime N` (this type's `Display`) back; `None` for anything else.
    pub fn parse(s: &str) -> Option<BootIdentity> {
        let (kind, value) = s.trim().split_once(' ')?;
        match kind {
            "boot_id" => {
                let ok = value.len() == 36
                    && value.char_indices().all(|(i, c)| {
                        if [8, 13, 18, 23].contains(&i) {
                            c == '-'
                        } else {
                            c.is_ascii_digit() || ('a'..='f').contains(&c)
                        }
                    });
                ok.then(|| BootIdentity::BootId(value.to_string()))
            }
            "btime" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                value.parse().ok().map(BootIdentity::Btime)
            }
            _ => None,
        }
    }

    /// Whether `now` is another boot than `self`: `Some(true)` another, `Some(false)` the same,
    /// `None` when they cannot be compared (one is a `boot_id`, the other a `btime`; a `btime`
    /// earlier than before: the clock moved back, or it did).
    pub fn is_new(&self, now: &BootIdentity) -> Option<bool> {
        match (self, now) {
            (BootIdentity::BootId(a), BootIdentity::BootId(b)) => Some(a != b),
            (BootIdentity::Btime(a), BootIdentity::Btime(b)) if *b > a + BTIME_SLACK_S => {
                Some(true)
            }
            (BootIdentity::Btime(a), BootIdentity::Btime(b)) if b + BTIME_SLACK_S >= *a => {
                Some(false)
            }
            _ => None,
        }
    }
}

const BOOT_ID_SCRIPT: &str = r#"R=${1%/}
# Inside the root only: no component of the path may be a symbolic link.
inside() { p=$R; for c in "$@"; do p=$p/$c; if [ -L "$p" ]; then return 1; fi; done; [ -f "$p" ]; }
if inside proc sys kernel random boot_id; then
  id=$(head -c 100 "$R/proc/sys/kernel/random/boot_id" 2>/dev/null | head -n 1)
  if [ -n "$id" ]; then echo "gpufleet-boot boot_id $id"; exit 0; fi
fi
if inside proc stat; then
  t=$(sed -n 's/^btime \([0-9][0-9]*\)$/\1/p' "$R/proc/stat" 2>/dev/null | head -n 1)
  if [ -n "$t" ]; then echo "gpufleet-boot btime $t"; exit 0; fi
fi
echo "gpufleet-boot unknown: neither $R/proc/sys/kernel/random/boot_id nor btime in $R/proc/stat could be read""#;

/// The read-only command that prints the node's boot identity under its root `root`:
/// `gpufleet-boot boot_id UUID` from [`BOOT_ID`], else `gpufleet-boot btime N` from
/// `<root>/proc/stat`, else `gpufleet-boot unknown: …`. A path with a symbolic link in it is
/// not read (it could lead outside the root).
pub fn boot_id_command(root: &str) -> String {
    format!(
        "sh -c {} gpufleet-boot-id {}",
        quote(BOOT_ID_SCRIPT),
        quote(root)
    )
}

/// Reads [`boot_id_command`]'s output: `Ok(identity)`, or `Err` with what the node said
/// (`unknown: …`, or output that is not that command's).
pub fn parse_boot_id(output: &str) -> Result<BootIdentity, String> {
    let first = output.lines().next().unwrap_or("").trim();
    match first.strip_prefix("gpufleet-boot ") {
        Some(rest) => BootIdentity::parse(rest).ok_or_else(|| rest.to_string()),
        None => Err(format!("not a boot identity: {first:?}")),
    }
}

/// Where one recipe step keeps its files on the node: `<prefix>.out`, `.rc`, `.pid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFiles {
    /// `<root>/var/lib/gpufleet/steps/<rollout>/<NN>-<name>`.
    pub prefix: String,
    /// `<root>/var/lib/gpufleet/step.lock`.
    pub lock: String,
}

impl StepFiles {
    /// The files of step number `seq` (its place in the node's plan) named `name`.
    pub fn new(root: &str, rollout: &str, seq: usize, name: &str) -> StepFiles {
        let safe = |s: &str| -> String {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        StepFiles {
            prefix: format!(
                "{}/steps/{}/{seq:02}-{}",
                state_dir(root),
                safe(rollout),
                safe(name)
            ),
            lock: format!("{}/step.lock", state_dir(root)),
        }
    }
}

/// The detached runner: writes its pid, waits for the node's step lock, writes who holds it
/// (`rollout R step NN-name pid P` into `step.lock.holder`), marks the step's start (`.run`),
/// runs the step with its output in `.out`, then writes the exit status to `.rc` (temporary
/// file, then rename). A step lock that stays busy is `busy HOLDER` in `.rc`.
const RUNNER: &str = r#"echo $$ > "$1.pid.r" && mv -f "$1.pid.r" "$1.pid"
d=${1%/*}; me="rollout ${d##*/} step ${1##*/} pid $$"
if command -v flock >/dev/null 2>&1; then
  exec 9>>"$2"
  if ! flock -w "$3" 9; then
    h=$(head -c 300 "$2.holder" 2>/dev/null | head -n 1 | tr -cd '[:print:]')
    echo "busy ${h:-(holder unknown)}" > "$1.rc.t"; mv -f "$1.rc.t" "$1.rc"; exit 0
  fi
  printf '%s\n' "$me" > "$2.holder.$$" && mv -f "$2.holder.$$" "$2.holder"
fi
: > "$1.run"
sh -c "$4" < /dev/null >> "$1.out" 2>&1
echo $? > "$1.rc.t" && mv -f "$1.rc.t" "$1.rc""#;

/// Shell that sets `B` to the node's boot identity line ([`boot_id_command`]'s output) under
/// the root `R`, which the step files' prefix names (`<root>/var/lib/gpufleet/steps/…`).
fn with_boot(script: &str) -> String {
    format!(
        "R=${{1%/var/lib/gpufleet/steps/*}}; B=$(sh -c {} gpufleet-boot-id \"$R\" 2>/dev/null)\n{script}",
        quote(BOOT_ID_SCRIPT)
    )
}

const LAUNCH: &str = r#"S=$1; L=$2; W=$3; C=$4; R=$5; RUNNER=$6
mkdir -p "$(dirname "$S")" || exit 4
if [ "$R" = retry ] && [ -e "$S.out" ]; then
  ended=no
  if [ -e "$S.rc" ] && [ "$(cat "$S.rc")" != 0 ]; then ended=yes; fi
  if [ ! -e "$S.rc" ]; then
    p=$(cat "$S.pid" 2>/dev/null)
    if ! { [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }; then ended=yes; fi
    if [ -e "$S.boot" ] && [ "$(cat "$S.boot")" != "$B" ]; then ended=yes; fi
  fi
  if [ $ended = yes ]; then
    n=1; while [ -e "$S.try$n.out" ]; do n=$((n+1)); done
    for x in out rc pid boot run; do if [ -e "$S.$x" ]; then mv -f "$S.$x" "$S.try$n.$x"; fi; done
  fi
fi
if ( set -C; : > "$S.out" ) 2>/dev/null; then
  printf '%s\n' "$B" > "$S.boot"
  cd /
  if command -v setsid >/dev/null 2>&1; then
    setsid sh -c "$RUNNER" gpufleet-step "$S" "$L" "$W" "$C" < /dev/null > /dev/null 2>&1 &
  else
    nohup sh -c "$RUNNER" gpufleet-step "$S" "$L" "$W" "$C" < /dev/null > /dev/null 2>&1 &
  fi
  echo $! > "$S.pid.l" && mv -f "$S.pid.l" "$S.pid"
  echo "gpufleet-step started"
else
  echo "gpufleet-step attached"
fi"#;

/// Starts the step `command` detached on the node, unless a sign says it started before
/// (its `.out` exists): then it attaches to it. With `retry` (the journal says this step
/// failed before and the operator resumed), an attempt that ended (non-zero status, or
/// gone without one) is moved aside to `<prefix>.tryN.*` and the step starts again; one that
/// succeeded or still runs is attached to. Prints `gpufleet-step started` or `… attached`.
/// `wait_s`: how long the step may wait for the node's step lock.
pub fn launch_command(files: &StepFiles, command: &str, wait_s: u64, retry: bool) -> String {
    let args = [
        files.prefix.as_str(),
        files.lock.as_str(),
        &wait_s.to_string(),
        command,
        if retry { "retry" } else { "once" },
        RUNNER,
    ];
    let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
    format!(
        "sh -c {} gpufleet-launch {}",
        quote(&with_boot(LAUNCH)),
        args.join(" ")
    )
}

const POLL: &str = r#"S=$1; L=$2
if [ -e "$S.rc" ]; then
  rc=$(cat "$S.rc")
  case $rc in busy*)
    rm -f "$S.out" "$S.rc" "$S.pid" "$S.boot"
    echo "gpufleet-step $rc"; exit 0
  esac
  echo "gpufleet-step done $rc"; tail -c 4000 "$S.out" 2>/dev/null; exit 0
fi
if [ ! -e "$S.out" ]; then echo "gpufleet-step none"; exit 0; fi
if [ -e "$S.boot" ] && [ "$(cat "$S.boot")" != "$B" ]; then
  echo "gpufleet-step dead"; tail -c 4000 "$S.out" 2>/dev/null; exit 0
fi
p=$(cat "$S.pid" 2>/dev/null)
if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
  a=waiting
  if [ -e "$S.run" ] && t=$(stat -c %Y "$S.run" 2>/dev/null) && n=$(date +%s); then a="age $((n-t))"; fi
  echo "gpufleet-step running $p $a"; exit 0
fi
if command -v flock >/dev/null 2>&1 && ! flock -n "$L" true 2>/dev/null; then
  h=$(head -c 300 "$L.holder" 2>/dev/null | head -n 1 | tr -cd '[:print:]')
  echo "gpufleet-step running (the step lock is held by ${h:-an unknown holder})"; exit 0
fi
echo "gpufleet-step dead"; tail -c 4000 "$S.out" 2>/dev/null"#;

/// The read-only command that says where a step stands: its first line is
/// `gpufleet-step done RC`, `running PID age SECONDS` (since the step got the step lock and
/// started; `waiting` before), `dead` (started, gone without an exit status; or started before
/// the node's last boot: a pid from another boot is never taken for the step, the boot identity
/// recorded at the launch in `.boot` is compared), `busy HOLDER` (the step lock stayed busy: it
/// never ran; its files are removed; HOLDER is `rollout R step NN-name pid P`) or `none`; the
/// output's tail follows for `done` and `dead`.
pub fn poll_command(files: &StepFiles) -> String {
    format!(
        "sh -c {} gpufleet-poll {} {}",
        quote(&with_boot(POLL)),
        quote(&files.prefix),
        quote(&files.lock)
    )
}

/// Where a step stands, from [`poll_command`]'s output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepState {
    /// Ended with this exit status (the text of the `.rc` file), and the output's tail.
    Done(String, String),
    /// Running (or waiting for the step lock), for this many seconds since it started, where
    /// the node says (`None`: waiting for the step lock, or not known).
    Running(Option<u64>),
    /// Started, but gone without an exit status (the node rebooted, or it was killed).
    Dead(String),
    /// The node's step lock stayed busy: the step never ran; who held it, as the node says
    /// (`rollout R step NN-name pid P`: node text, escape it where it is shown).
    Busy(String),
    /// No sign that it ever started.
    None,
}

/// Reads [`poll_command`]'s output; `None` when it is not one.
pub fn parse_poll(output: &str) -> Option<StepState> {
    let (first, rest) = output.split_once('\n').unwrap_or((output, ""));
    let state = first.trim().strip_prefix("gpufleet-step ")?;
    let mut words = state.split_whitespace();
    Some(match words.next()? {
        "done" => StepState::Done(words.next().unwrap_or("").to_string(), rest.to_string()),
        "running" => {
            let w: Vec<&str> = words.collect();
            StepState::Running(match w.as_slice() {
                [_, "age", n] => n.parse().ok(),
                _ => None,
            })
        }
        "dead" => StepState::Dead(rest.to_string()),
        "busy" => StepState::Busy(state.strip_prefix("busy").unwrap_or("").trim().to_string()),
        "none" => StepState::None,
        _ => return None,
    })
}

const KILL: &str = r#"S=$1; WHY=$2; G=$3
if [ -e "$S.rc" ]; then echo "gpufleet-kill ended $(cat "$S.rc")"; exit 0; fi
if [ ! -e "$S.out" ]; then echo "gpufleet-kill none"; exit 0; fi
if [ -e "$S.boot" ] && [ "$(cat "$S.boot")" != "$B" ]; then
  echo "gpufleet-kill gone (started before the node's last boot)"; exit 0
fi
p=$(cat "$S.pid" 2>/dev/null)
case $p in ''|*[!0-9]*) echo "gpufleet-kill gone (no pid)"; exit 0;; esac
if ! kill -0 "$p" 2>/dev/null; then echo "gpufleet-kill gone"; exit 0; fi
alive() { kill -0 -"$p" 2>/dev/null || kill -0 "$p" 2>/dev/null; }
kill -TERM -"$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
i=0; while alive && [ $i -lt "$G" ]; do sleep 1; i=$((i+1)); done
how=TERM
if alive; then
  kill -KILL -"$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; how="TERM, then KILL after $G s"
fi
if [ ! -e "$S.rc" ]; then echo "killed:$WHY" > "$S.rc.t" && mv -f "$S.rc.t" "$S.rc"; fi
echo "gpufleet-kill killed $p ($how)""#;

/// Seconds between the TERM and the KILL of [`kill_command`].
pub const KILL_GRACE_S: u64 = 10;

/// The command that stops a running step: TERM to its process group (the runner is a session
/// leader where `setsid` exists; else only the runner's pid), then KILL after `grace_s` seconds
/// while any of it lives, then `killed:<why>` as its status (`.rc`) unless it ended meanwhile.
/// `why` is a word: `kill_after` or `cancel` (anything else is `killed:stop`). A pid recorded
/// before the node's last boot is never signalled. Prints `gpufleet-kill killed PID (HOW)`,
/// `… ended RC` (it had ended), `… gone (…)` or `… none` (it never started).
pub fn kill_command(files: &StepFiles, why: &str, grace_s: u64) -> String {
    let why = if why.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') && !why.is_empty() {
        why
    } else {
        "stop"
    };
    format!(
        "sh -c {} gpufleet-kill {} {} {}",
        quote(&with_boot(KILL)),
        quote(&files.prefix),
        quote(why),
        grace_s
    )
}

/// The status text ([`StepState::Done`]'s) a killed step has: `Some(why)` for `killed:WHY`.
pub fn killed_status(rc: &str) -> Option<&str> {
    rc.strip_prefix("killed:")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::{Duration, Instant};

    fn sh(cmd: &str) -> (Option<i32>, String) {
        let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
        let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
        s.push_str(&String::from_utf8_lossy(&out.stderr));
        (out.status.code(), s)
    }

    #[test]
    fn the_lock_names_its_rollout_and_only_that_rollout_passes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let owner = dir.path().join(MARKER).join("owner");
        assert_eq!(
            sh(&lock_command(&root, "r1", "ops@a pid 1", &[])).0,
            Some(0)
        );
        let text = std::fs::read_to_string(&owner).unwrap();
        assert!(text.starts_with("r1\nops@a pid 1\nsince "), "{text}");
        // The same rollout (a resume) passes again; another does not, and is told who holds it.
        assert_eq!(
            sh(&lock_command(&root, "r1", "ops@a pid 2", &[])).0,
            Some(0)
        );
        let (rc, said) = sh(&lock_command(&root, "r10", "ops@b pid 3", &[]));
        assert_eq!(rc, Some(3));
        assert!(
            said.contains("locked by rollout r1 (ops@a pid 2 since "),
            "{said}"
        );
        // A prefix or a pattern of the holder is not the holder.
        assert_eq!(sh(&lock_command(&root, "r", "x", &[])).0, Some(3));
        assert_eq!(
            sh(&lock_command(&root, "r*", "x", &["r?".into()])).0,
            Some(3)
        );
        // Unlock only by the holder.
        assert_eq!(sh(&unlock_command(&root, "r2")).0, Some(3));
        assert!(owner.exists());
        assert_eq!(sh(&unlock_command(&root, "r1")).0, Some(0));
        assert!(!owner.exists());
        assert_eq!(
            sh(&unlock_command(&root, "r1")).0,
            Some(0),
            "nothing to unlock"
        );
        // An abandoned rollout's lock is taken over, once.
        assert_eq!(sh(&lock_command(&root, "r2", "x", &[])).0, Some(0));
        assert_eq!(
            sh(&lock_command(&root, "r3", "x", &["r2".into()])).0,
            Some(0)
        );
        assert!(std::fs::read_to_string(&owner).unwrap().starts_with("r3\n"));
        let (rc, said) = sh(&lock_command(&root, "r4", "x", &["r2".into()]));
        assert_eq!(rc, Some(3), "{said}");
        assert!(said.contains("locked by rollout r3"), "{said}");
    }

    #[test]
    fn the_lock_can_be_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let read = || parse_lock(&sh(&read_lock_command(&root)).1).unwrap();
        assert_eq!(read(), None);
        sh(&lock_command(&root, "r-1", "ops@a pid 7", &[]));
        let o = read().unwrap();
        assert_eq!(
            (o.rollout.as_str(), o.operator.as_deref()),
            ("r-1", Some("ops@a pid 7"))
        );
        assert!(o.since.unwrap().ends_with('Z'));
        assert_eq!(parse_lock("nonsense"), None);
    }

    #[test]
    fn many_takers_at_once_one_passes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let children: Vec<_> = (0..8)
            .map(|i| {
                Command::new("sh")
                    .arg("-c")
                    .arg(lock_command(&root, &format!("r{i}"), "x", &[]))
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let passed = children
            .into_iter()
            .filter_map(|mut c| c.wait().unwrap().success().then_some(()))
            .count();
        assert_eq!(passed, 1);
    }

    fn poll(files: &StepFiles) -> StepState {
        parse_poll(&sh(&poll_command(files)).1).unwrap()
    }

    fn wait_done(files: &StepFiles) -> StepState {
        let start = Instant::now();
        loop {
            let s = poll(files);
            if !matches!(s, StepState::Running(_)) || start.elapsed() > Duration::from_secs(20) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    #[test]
    fn a_step_runs_detached_once_and_its_status_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let files = StepFiles::new(&root, "r-1", 2, "in stall");
        assert!(
            files
                .prefix
                .ends_with("/var/lib/gpufleet/steps/r-1/02-in_stall")
        );
        assert_eq!(poll(&files), StepState::None);
        let marker = dir.path().join("ran");
        let cmd = format!(
            "sleep 1; echo ran >> {}; echo 'a b'; exit 7",
            marker.display()
        );
        // The launching shell ends at once; the step goes on without it.
        let (rc, said) = sh(&launch_command(&files, &cmd, 5, false));
        assert_eq!((rc, said.trim()), (Some(0), "gpufleet-step started"));
        assert!(matches!(poll(&files), StepState::Running(_)));
        // A second launch attaches; it does not start the step again.
        let (_, said) = sh(&launch_command(&files, &cmd, 5, false));
        assert_eq!(said.trim(), "gpufleet-step attached");
        match wait_done(&files) {
            StepState::Done(rc, out) => assert_eq!((rc.as_str(), out.trim()), ("7", "a b")),
            s => panic!("{s:?}"),
        }
        assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
        // Attaching after the end reads the recorded status; nothing runs again.
        assert_eq!(
            sh(&launch_command(&files, &cmd, 5, false)).1.trim(),
            "gpufleet-step attached"
        );
        assert!(matches!(poll(&files), StepState::Done(rc, _) if rc == "7"));
        // A retry (the operator resumed after the failure) moves the attempt aside.
        let (_, said) = sh(&launch_command(&files, "echo again", 5, true));
        assert_eq!(said.trim(), "gpufleet-step started");
        assert!(
            matches!(wait_done(&files), StepState::Done(rc, out) if rc == "0" && out.trim() == "again")
        );
        assert!(std::path::Path::new(&format!("{}.try1.rc", files.prefix)).exists());
        // A successful step is not run again on retry.
        assert_eq!(
            sh(&launch_command(&files, "echo third", 5, true)).1.trim(),
            "gpufleet-step attached"
        );
    }

    #[test]
    fn unlocking_prunes_step_folders_older_than_30_days_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        assert_eq!(sh(&lock_command(&root, "r-new", "ops", &[])).0, Some(0));
        let steps = dir.path().join("var/lib/gpufleet/steps");
        for r in ["r-old", "r-new"] {
            std::fs::create_dir_all(steps.join(r)).unwrap();
            std::fs::write(steps.join(r).join("01-x.out"), "out").unwrap();
        }
        let old = steps.join("r-old").display().to_string();
        assert_eq!(sh(&format!("touch -d '40 days ago' '{old}'")).0, Some(0));
        // Another rollout's unlock is refused and prunes nothing.
        assert_eq!(sh(&unlock_command(&root, "r-other")).0, Some(3));
        assert!(steps.join("r-old").exists());
        assert_eq!(sh(&unlock_command(&root, "r-new")).0, Some(0));
        assert!(!steps.join("r-old").exists());
        assert!(steps.join("r-new/01-x.out").exists());
    }

    #[test]
    fn steps_take_turns_on_the_step_lock() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let a = StepFiles::new(&root, "r", 1, "a");
        let b = StepFiles::new(&root, "r", 2, "b");
        let log = dir.path().join("log");
        let l = log.display();
        sh(&launch_command(
            &a,
            &format!("echo a1 >> {l}; sleep 1; echo a2 >> {l}"),
            5,
            false,
        ));
        std::thread::sleep(Duration::from_millis(200));
        sh(&launch_command(&b, &format!("echo b >> {l}"), 5, false));
        assert!(matches!(wait_done(&a), StepState::Done(..)));
        assert!(matches!(wait_done(&b), StepState::Done(..)));
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "a1\na2\nb\n");
        // A step that cannot get the lock in time never runs, and says so.
        let c = StepFiles::new(&root, "r", 3, "c");
        let d = StepFiles::new(&root, "r", 4, "d");
        sh(&launch_command(&c, "sleep 2", 5, false));
        std::thread::sleep(Duration::from_millis(200));
        sh(&launch_command(&d, &format!("echo d >> {l}"), 0, false));
        assert!(
            matches!(wait_done(&d), StepState::Busy(ref h) if h.starts_with("rollout r step 03-c pid ")),
            "the holder is named"
        );
        assert_eq!(
            poll(&d),
            StepState::None,
            "its files are gone: it may start later"
        );
        assert!(!std::fs::read_to_string(&log).unwrap().contains('d'));
    }

    #[test]
    fn the_boot_identity_is_read_under_the_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let read = || parse_boot_id(&sh(&boot_id_command(&root)).1);
        let e = read().unwrap_err();
        assert!(e.starts_with("unknown: neither "), "{e}");
        // btime, where there is no boot_id.
        std::fs::create_dir_all(dir.path().join("proc/sys/kernel/random")).unwrap();
        std::fs::write(
            dir.path().join("proc/stat"),
            "cpu  1 2 3\nbtime 1764750000\nprocesses 9\n",
        )
        .unwrap();
        assert_eq!(read(), Ok(BootIdentity::Btime(1_764_750_000)));
        let id = "0f5a4b0e-6a2b-4e8e-9a51-3c1b2f0d9e77";
        let f = dir.path().join(BOOT_ID);
        std::fs::write(&f, format!("{id}\n")).unwrap();
        assert_eq!(read(), Ok(BootIdentity::BootId(id.into())));
        // Garbage is not an identity.
        std::fs::write(&f, "not a uuid; $(reboot)\n").unwrap();
        assert!(read().is_err());
        // A link that could lead outside the root is not followed: btime is read instead.
        std::fs::remove_file(&f).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("id"), format!("{id}\n")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("id"), &f).unwrap();
        assert_eq!(read(), Ok(BootIdentity::Btime(1_764_750_000)));
        // The real one of this machine.
        let real = parse_boot_id(&sh(&boot_id_command("/")).1).unwrap();
        assert!(matches!(real, BootIdentity::BootId(_)), "{real}");
    }

    #[test]
    fn boot_identities_compare() {
        let a = BootIdentity::BootId("0f5a4b0e-6a2b-4e8e-9a51-3c1b2f0d9e77".into());
        let b = BootIdentity::BootId("1f5a4b0e-6a2b-4e8e-9a51-3c1b2f0d9e77".into());
        assert_eq!(a.is_new(&a), Some(false));
        assert_eq!(a.is_new(&b), Some(true));
        let t = BootIdentity::Btime(1000);
        assert_eq!(t.is_new(&BootIdentity::Btime(1001)), Some(false), "jitter");
        assert_eq!(t.is_new(&BootIdentity::Btime(999)), Some(false), "jitter");
        assert_eq!(t.is_new(&BootIdentity::Btime(1003)), Some(true));
        assert_eq!(t.is_new(&BootIdentity::Btime(900)), None);
        assert_eq!(a.is_new(&t), None);
        for x in [&a, &t] {
            assert_eq!(BootIdentity::parse(&x.to_string()).as_ref(), Some(x));
        }
        for bad in [
            "boot_id 0F5A4B0E-6A2B-4E8E-9A51-3C1B2F0D9E77",
            "boot_id x",
            "btime -1",
            "btime ",
            "uptime 5",
        ] {
            assert_eq!(BootIdentity::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_step_gone_without_status_is_dead() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let f = StepFiles::new(&root, "r", 1, "x");
        std::fs::create_dir_all(std::path::Path::new(&f.prefix).parent().unwrap()).unwrap();
        std::fs::write(format!("{}.out", f.prefix), "half\n").unwrap();
        std::fs::write(format!("{}.pid", f.prefix), "999999999\n").unwrap();
        assert_eq!(poll(&f), StepState::Dead("half\n".into()));
        assert_eq!(
            parse_poll("gpufleet-step running 12 waiting\n"),
            Some(StepState::Running(None))
        );
        assert_eq!(
            parse_poll("gpufleet-step running 12 age 7\n"),
            Some(StepState::Running(Some(7)))
        );
        assert_eq!(parse_poll("hello"), None);
    }

    #[test]
    fn a_step_is_killed_with_its_process_group_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let f = StepFiles::new(&root, "r-1", 1, "hang");
        let child = dir.path().join("child.pid");
        // The step starts a child of its own: it goes with the group.
        let cmd = format!("sleep 300 & echo $! > {}; wait", child.display());
        assert_eq!(
            sh(&launch_command(&f, &cmd, 5, false)).1.trim(),
            "gpufleet-step started"
        );
        let start = Instant::now();
        while !matches!(poll(&f), StepState::Running(Some(_))) || !child.exists() {
            assert!(start.elapsed() < Duration::from_secs(20), "{:?}", poll(&f));
            std::thread::sleep(Duration::from_millis(100));
        }
        let grandchild = std::fs::read_to_string(&child).unwrap().trim().to_string();
        let (rc, said) = sh(&kill_command(&f, "kill_after", 2));
        assert_eq!(rc, Some(0), "{said}");
        assert!(said.starts_with("gpufleet-kill killed "), "{said}");
        assert!(
            matches!(poll(&f), StepState::Done(ref rc, _) if killed_status(rc) == Some("kill_after"))
        );
        assert_ne!(
            sh(&format!("kill -0 {grandchild}")).0,
            Some(0),
            "the step's own child is gone too"
        );
        // Killing an ended step changes nothing; a never-started one is `none`.
        assert!(
            sh(&kill_command(&f, "cancel", 2))
                .1
                .starts_with("gpufleet-kill ended killed:kill_after")
        );
        let g = StepFiles::new(&root, "r-1", 2, "never");
        assert_eq!(
            sh(&kill_command(&g, "cancel", 2)).1.trim(),
            "gpufleet-kill none"
        );
        // A step that was retried after a kill starts again.
        assert_eq!(
            sh(&launch_command(&f, "echo again", 5, true)).1.trim(),
            "gpufleet-step started"
        );
        assert!(matches!(wait_done(&f), StepState::Done(rc, _) if rc == "0"));
    }

    #[test]
    fn a_pid_from_before_the_last_boot_is_never_the_step() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        let random = dir.path().join("proc/sys/kernel/random");
        std::fs::create_dir_all(&random).unwrap();
        let id = |n: u8| format!("00000000-0000-4000-8000-00000000000{n}\n");
        std::fs::write(random.join("boot_id"), id(1)).unwrap();
        let f = StepFiles::new(&root, "r", 1, "s");
        sh(&launch_command(&f, "sleep 30", 5, false));
        assert!(matches!(poll(&f), StepState::Running(_)));
        let boot = std::fs::read_to_string(format!("{}.boot", f.prefix)).unwrap();
        assert_eq!(
            boot.trim(),
            format!("gpufleet-boot boot_id {}", id(1).trim())
        );
        // "Reboot": the recorded pid is alive (this machine did not reboot), but the node's
        // boot identity changed: the pid is another boot's, so the step is dead, and it is
        // not signalled.
        std::fs::write(random.join("boot_id"), id(2)).unwrap();
        assert!(matches!(poll(&f), StepState::Dead(_)), "{:?}", poll(&f));
        assert!(
            sh(&kill_command(&f, "cancel", 1))
                .1
                .starts_with("gpufleet-kill gone (started before")
        );
        let pid = std::fs::read_to_string(format!("{}.pid", f.prefix)).unwrap();
        assert_eq!(
            sh(&format!("kill -0 {}", pid.trim())).0,
            Some(0),
            "not signalled"
        );
        // A retry moves it aside and starts the step anew.
        assert_eq!(
            sh(&launch_command(&f, "true", 5, true)).1.trim(),
            "gpufleet-step started"
        );
        sh(&format!("kill -TERM -{}", pid.trim()));
    }
}
