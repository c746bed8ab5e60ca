//! The shell gpufleet runs on a node for the write side (pure: these functions build command
//! lines; the executor runs them). Everything lives under `<root>/var/lib/gpufleet/`:
//!
//! - `rollout.lock/` — the node lock: made with an atomic `mkdir`; its `owner` file names the
//!   rollout on its first line (compared exactly), then the operator (`user@host pid N`) and
//!   since when. Taken under `flock lock.mutex` where flock exists, so that a takeover of an
//!   abandoned rollout's lock is atomic too; without flock a takeover claims
//!   `rollout.lock/taken-from-<id>` with `mkdir`, so two takers never both pass.
//! - `steps/<rollout>/<step>.{out,rc,pid,boot,run}` — a recipe step run detached from the SSH
//!   session (its own session through `setsid`, else `nohup`; stdin from /dev/null, no tty): its
//!   output, its exit status (written to a temporary file, then renamed), its pid, the node's
//!   boot identity at its launch (a pid from another boot is never the step) and when it started
//!   ([`steps`]). The `.out` file is created with `set -C` before the step starts: it is the
//!   claim that makes the step start once. The step holds `step.lock` (flock) while it runs,
//!   naming itself in `step.lock.holder`: steps run one at a time per node.
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

pub use crate::model::parse::lock::LockOwner;

/// Reads [`read_lock_command`]'s output: `Some(None)` free, `Some(Some(owner))` held, `None`
/// when it is not that command's output.
pub fn parse_lock(output: &str) -> Option<Option<LockOwner>> {
    let mut lines = output.lines();
    match lines.next()?.trim() {
        "gpufleet-lock free" => Some(None),
        "gpufleet-lock held" => Some(Some(crate::model::parse::lock::parse_owner(
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

mod steps;
pub use steps::*;

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Runs `cmd` with sh: its exit code and its stdout then stderr (steps.rs's tests too).
    pub(super) fn sh(cmd: &str) -> (Option<i32>, String) {
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
}
