//! Recipe steps on the node: started detached, polled, killed (the files: [`super`]).

use super::*;

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
    use crate::actions::node_side::tests::sh;
    use std::time::{Duration, Instant};

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
