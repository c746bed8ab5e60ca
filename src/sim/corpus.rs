//! The fixture corpus the simulator serves: fixture nodes found on disk, and each one's probe
//! answer, computed once at startup by running the real probe script locally and replayed per
//! session with the client's boundary put in.
//!
//! A fixture node is a folder with `node.toml`, `root/` (the node's files at their own paths),
//! `bin/` (stand-ins for nvidia-smi, dmesg, …) and `commands/` (what those print); see
//! tests/fixtures/README.shared.md. The probe runs there exactly as tests/fixture_nodes.rs runs
//! it: `sh -s`, root prefix `R` = the fixture's `root/`, PATH = `<fixture>/bin:/usr/bin:/bin`
//! (with an empty `dmesg` after the fixture's `bin/`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::probe::{self, ProbeSettings};

/// The nvidia-smi limit of the startup probe runs, in seconds (the `T` of the header; the
/// client's own `T` is not used: its answer is the cached one). As in tests/fixture_nodes.rs.
pub const SMI_TIMEOUT_SECS: u64 = 2;

/// The node deadline of the startup probe runs, in seconds (the `D` of the header).
pub const DEADLINE_SECS: u64 = 30;

/// Kernel log lines kept by the startup probe runs (the `L` of the header).
pub const KERNEL_LOG_LINES: u64 = 200;

/// One fixture node of the corpus.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// The folder's name (`h200-open-580-k6.18-real`).
    pub name: String,
    /// The folder.
    pub dir: PathBuf,
    /// Which of the folders given to [`discover`] it came from (its index).
    pub source: usize,
}

/// The fixture nodes of `dirs`, in order: a folder that is a fixture node itself (holds a
/// `node.toml`) is that one node; any other folder gives its sub-folders holding a `node.toml`,
/// sorted by name.
///
/// Errors: a folder that cannot be read, a fixture whose name is not UTF-8, or no fixture at
/// all.
pub fn discover(dirs: &[PathBuf]) -> anyhow::Result<Vec<Fixture>> {
    let mut all = Vec::new();
    for (source, dir) in dirs.iter().enumerate() {
        if is_fixture(dir) {
            let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
                bail!("fixture {}: the folder name is not UTF-8", dir.display());
            };
            all.push(Fixture {
                name: name.to_string(),
                dir: dir.clone(),
                source,
            });
            continue;
        }
        let mut found = Vec::new();
        let entries =
            std::fs::read_dir(dir).with_context(|| format!("fixtures folder {}", dir.display()))?;
        for e in entries {
            let path = e
                .with_context(|| format!("fixtures folder {}", dir.display()))?
                .path();
            if !is_fixture(&path) {
                continue;
            }
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                bail!("fixture {}: the folder name is not UTF-8", path.display());
            };
            found.push(Fixture {
                name: name.to_string(),
                dir: path.clone(),
                source,
            });
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        all.extend(found);
    }
    if all.is_empty() {
        let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        bail!(
            "no fixture nodes (folders with a node.toml) in {}",
            list.join(", ")
        );
    }
    Ok(all)
}

/// The built-in corpus: this binary's source's tests/fixtures/nodes and tests/fixtures/nodes-v2
/// (kept in sync with the team's shared fixtures by scripts/sync-shared.sh), packed at build time
/// by build.rs as a gzip-compressed tar of each fixture node's node.toml, root/, bin/ and
/// commands/ (symlinks kept as symlinks, execute bits kept; the C source of a static stand-in
/// left out). Empty when the source had no tests/fixtures.
static BUILTIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/corpus.tar.gz"));

/// The folders of the built-in corpus inside the archive, in the order the mix takes them.
pub const BUILTIN_FOLDERS: [&str; 2] = ["nodes", "nodes-v2"];

/// Unpacks the built-in corpus ([`BUILTIN`], about 1 MB unpacked) into `dir`, an existing empty
/// folder the caller removes, and returns its corpus folders (`dir/nodes`, `dir/nodes-v2`, those
/// present) for [`discover`].
///
/// Errors: the binary has no built-in corpus (built from a source without tests/fixtures; the
/// message names `--fixtures DIR`), or a file cannot be written under `dir`.
pub fn unpack_builtin(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let gz = flate2::read::GzDecoder::new(BUILTIN);
    let mut archive = tar::Archive::new(gz);
    archive.set_preserve_permissions(true);
    archive.set_preserve_mtime(false);
    archive.set_overwrite(false);
    archive
        .unpack(dir)
        .with_context(|| format!("cannot unpack the built-in corpus into {}", dir.display()))?;
    let folders: Vec<PathBuf> = BUILTIN_FOLDERS
        .iter()
        .map(|f| dir.join(f))
        .filter(|d| d.is_dir())
        .collect();
    if folders.is_empty() {
        bail!(
            "this gpufleet has no built-in corpus (it was built from a source without \
             tests/fixtures): give fixture nodes with --fixtures DIR"
        );
    }
    Ok(folders)
}

/// The statuses of a realistic mix, in the order [`mix`] deals them.
const MIX_ORDER: [&str; 5] = ["ready", "migrate", "blocked", "attention", "no-driver"];

/// The `[expected] status` of a fixture's node.toml (`None` when it has none or cannot be read).
pub fn expected_status(f: &Fixture) -> Option<String> {
    let text = std::fs::read_to_string(f.dir.join("node.toml")).ok()?;
    let doc: toml::Table = text.parse().ok()?;
    Some(doc.get("expected")?.get("status")?.as_str()?.to_string())
}

/// `fixtures` reordered so that every status shows early and keeps showing: dealt round-robin
/// over the statuses (ready, migrate, blocked, attention, no-driver, then any other), each
/// status's fixtures alternating between the folders they came from. The first five nodes of the
/// default corpus then show every status, and the first eight both folders.
pub fn mix(fixtures: Vec<Fixture>) -> Vec<Fixture> {
    let mut groups: Vec<(String, Vec<Fixture>)> = MIX_ORDER
        .iter()
        .map(|s| (s.to_string(), Vec::new()))
        .collect();
    for f in fixtures {
        let status = expected_status(&f).unwrap_or_default();
        match groups.iter_mut().find(|g| g.0 == status) {
            Some(g) => g.1.push(f),
            None => groups.push((status, vec![f])),
        }
    }
    // Within a status: the first of each folder, then the second of each, …
    let queues: Vec<std::collections::VecDeque<Fixture>> = groups
        .into_iter()
        .map(|(_, fs)| {
            let mut rank = std::collections::HashMap::new();
            let mut keyed: Vec<(usize, usize, Fixture)> = fs
                .into_iter()
                .map(|f| {
                    let r = rank.entry(f.source).or_insert(0usize);
                    *r += 1;
                    (*r, f.source, f)
                })
                .collect();
            keyed.sort_by_key(|k| (k.0, k.1));
            keyed.into_iter().map(|k| k.2).collect()
        })
        .collect();
    let mut queues = queues;
    let mut out = Vec::new();
    while queues.iter().any(|q| !q.is_empty()) {
        for q in &mut queues {
            if let Some(f) = q.pop_front() {
                out.push(f);
            }
        }
    }
    out
}

/// A probe answer recorded under a placeholder boundary, replayed with another.
///
/// The output is kept split at every occurrence of the placeholder, so a replay is the pieces
/// joined by the client's boundary: byte-exact, whatever else the output holds.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The output between placeholders (one more piece than placeholders).
    pieces: Vec<Vec<u8>>,
    /// The exit status of the recorded run (0 normally).
    pub exit_status: u32,
    /// Whether the recorded output ends with the `meta complete` trailer.
    pub complete: bool,
}

impl Answer {
    /// Records `output`, printed by a probe run whose boundary was `placeholder`.
    pub fn new(output: &[u8], placeholder: &str, exit_status: u32) -> Answer {
        let needle = placeholder.as_bytes();
        let mut pieces = Vec::new();
        let mut rest = output;
        while let Some(at) = find(rest, needle) {
            pieces.push(rest[..at].to_vec());
            rest = &rest[at + needle.len()..];
        }
        pieces.push(rest.to_vec());
        let trailer = format!("{placeholder} meta complete\n");
        let complete = find(output, trailer.as_bytes()).is_some();
        Answer {
            pieces,
            exit_status,
            complete,
        }
    }

    /// The output with `boundary` where the placeholder was.
    pub fn render(&self, boundary: &str) -> Vec<u8> {
        let len = self.pieces.iter().map(Vec::len).sum::<usize>()
            + boundary.len() * (self.pieces.len() - 1);
        let mut out = Vec::with_capacity(len);
        for (i, piece) in self.pieces.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(boundary.as_bytes());
            }
            out.extend_from_slice(piece);
        }
        out
    }

    /// How many bytes a replay with a boundary of `boundary_len` bytes holds.
    pub fn len_with(&self, boundary_len: usize) -> usize {
        self.pieces.iter().map(Vec::len).sum::<usize>() + boundary_len * (self.pieces.len() - 1)
    }
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Runs the probe script once for `fixture` with the boundary `placeholder`, on this machine:
/// `/bin/sh -s` in its own process group, an empty environment but PATH =
/// `<fixture>/bin:<stand-ins>:/usr/bin:/bin` (the stand-ins: a `dmesg` that prints nothing, so a
/// fixture without its own kernel log shows an empty one, not this machine's, nor the refusal
/// of an unprivileged dmesg that stands for "the report quoted no log"), the header's
/// root prefix = `<fixture>/root`. Output is read
/// until the script ends or [`DEADLINE_SECS`] + 5 s pass (then it is cut there); the process
/// tree is killed either way.
///
/// The probe runs the fixture's `bin/` stand-ins (nvidia-smi, dmesg): a corpus is code, to be
/// trusted as such.
///
/// Errors: `/bin/sh` cannot be started, or the fixture's path is not UTF-8.
pub async fn record(fixture: &Fixture, placeholder: &str) -> anyhow::Result<Answer> {
    let root = fixture.dir.join("root");
    let bin = fixture.dir.join("bin");
    let (Some(root_s), Some(bin_s)) = (root.to_str(), bin.to_str()) else {
        bail!("fixture {}: the path is not UTF-8", fixture.dir.display());
    };
    let settings = ProbeSettings {
        root: root.clone(),
        nvidia_smi_timeout_secs: SMI_TIMEOUT_SECS,
        deadline: Duration::from_secs(DEADLINE_SECS),
        output_cap: probe::OUTPUT_CAP,
        kernel_log_lines: KERNEL_LOG_LINES,
    };
    let stdin = probe::probe_stdin(placeholder, root_s, &settings);
    // A simulated node's kernel log is its fixture's (`bin/dmesg`), never this machine's: a
    // fixture without one gets an empty log, from a stand-in after the fixture's bin/.
    let quiet = tempfile::Builder::new()
        .prefix("gpufleet-sim-bin.")
        .tempdir()
        .context("cannot make the simulator's stand-in folder")?;
    let dmesg = quiet.path().join("dmesg");
    std::fs::write(&dmesg, "#!/bin/sh\nexit 0\n")
        .and_then(|()| {
            std::fs::set_permissions(&dmesg, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        })
        .context("cannot write the simulator's dmesg stand-in")?;
    let Some(quiet_s) = quiet.path().to_str() else {
        bail!("the temporary folder's path is not UTF-8");
    };
    // Most fixtures come from reports that quoted no kernel log, and answer dmesg with the
    // unprivileged user's refusal (commands/dmesg-fail.out) to say so; a simulated node is a
    // node the operator can read, so it shows an empty log instead (a `fact-unknown` on every
    // node would be the demo's first sight). A fixture with a log of its own
    // (commands/dmesg.out) keeps it.
    let commands = fixture.dir.join("commands");
    let denied_only =
        commands.join("dmesg-fail.out").is_file() && !commands.join("dmesg.out").is_file();
    let path = if denied_only {
        format!("{quiet_s}:{bin_s}:/usr/bin:/bin")
    } else {
        format!("{bin_s}:{quiet_s}:/usr/bin:/bin")
    };
    // /bin/sh by its path: a fixture's bin/ (first on PATH) holds stand-ins, never the shell.
    let mut child = tokio::process::Command::new("/bin/sh")
        .arg("-s")
        .env_clear()
        .env("PATH", path)
        .current_dir(&fixture.dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .context("cannot start sh to record the fixtures' probe answers")?;
    let pid = child.id();
    if let Some(mut input) = child.stdin.take() {
        // A shell that exits early is not an error here: its output says what happened.
        let _ = input.write_all(&stdin).await;
    }
    let mut output = Vec::new();
    if let Some(mut out) = child.stdout.take() {
        let limit = Duration::from_secs(DEADLINE_SECS + 5);
        let mut capped = (&mut out).take(probe::OUTPUT_CAP as u64);
        let _ = tokio::time::timeout(limit, capped.read_to_end(&mut output)).await;
    }
    if let Some(pid) = pid {
        probe::kill_tree(pid);
    }
    let status = child.wait().await.ok();
    let exit_status = status
        .and_then(|s| s.code())
        .and_then(|c| u32::try_from(c).ok())
        .unwrap_or(255);
    Ok(Answer::new(&output, placeholder, exit_status))
}

/// Records the answers of `fixtures`, at most two probe runs at a time (a small machine).
/// Returns them in the order of `fixtures`.
///
/// Errors: as [`record`].
pub async fn record_all(
    fixtures: &[Fixture],
    placeholder: &str,
) -> anyhow::Result<Vec<Arc<Answer>>> {
    let gate = Arc::new(tokio::sync::Semaphore::new(2));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, f) in fixtures.iter().enumerate() {
        let (f, p, gate) = (f.clone(), placeholder.to_string(), gate.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            (i, record(&f, &p).await)
        });
    }
    let mut out: Vec<Option<Arc<Answer>>> = vec![None; fixtures.len()];
    while let Some(joined) = tasks.join_next().await {
        let (i, answer) = joined.context("a probe recording task failed")?;
        out[i] = Some(Arc::new(answer?));
    }
    out.into_iter()
        .map(|a| a.context("a probe recording is missing"))
        .collect()
}

/// Whether `dir` looks like a fixture node (has a `node.toml`).
pub fn is_fixture(dir: &Path) -> bool {
    dir.join("node.toml").is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_puts_the_boundary_where_the_placeholder_was() {
        let ph = "gpufleet-0000";
        let out = b"gpufleet-0000 meta probe\nprotocol 2\n\ngpufleet-0000 end ok\ngpufleet-0000 meta complete\n\ngpufleet-0000 end ok\n";
        let a = Answer::new(out, ph, 0);
        assert!(a.complete);
        let got = a.render("gpufleet-abcdef");
        let want = String::from_utf8_lossy(out).replace(ph, "gpufleet-abcdef");
        assert_eq!(got, want.as_bytes());
        assert_eq!(a.len_with("gpufleet-abcdef".len()), want.len());
        // Nothing else changes, placeholder-free output included.
        let b = Answer::new(b"no sections", ph, 2);
        assert!(!b.complete);
        assert_eq!(b.render("gpufleet-x"), b"no sections");
        assert_eq!(b.exit_status, 2);
        // A placeholder at both ends.
        let c = Answer::new(b"gpufleet-0000xgpufleet-0000", ph, 0);
        assert_eq!(c.render("B"), b"BxB");
    }

    #[test]
    fn the_default_mix_shows_every_status_in_any_five_and_both_folders_in_eight() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let all = discover(&[root.join("nodes"), root.join("nodes-v2")]).unwrap();
        let n = all.len();
        let mixed = mix(all);
        assert_eq!(mixed.len(), n, "nothing lost or repeated");
        let statuses: Vec<String> = mixed.iter().map(|f| expected_status(f).unwrap()).collect();
        for (s, want) in statuses.iter().zip(MIX_ORDER) {
            assert_eq!(s, want);
        }
        let first8: std::collections::HashSet<usize> =
            mixed.iter().take(8).map(|f| f.source).collect();
        assert_eq!(
            first8.len(),
            2,
            "{:?}",
            mixed.iter().take(8).map(|f| &f.name).collect::<Vec<_>>()
        );
        assert_eq!(mixed[0].name, "h200-open-580-k6.18-real");
    }

    /// Every entry under `dir`, relative, with what it is: a file's bytes and execute bit, a
    /// symlink's target, a folder.
    fn tree(dir: &Path) -> std::collections::BTreeMap<PathBuf, String> {
        use std::os::unix::fs::PermissionsExt;
        let mut out = std::collections::BTreeMap::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                let m = std::fs::symlink_metadata(&p).unwrap();
                let what = if m.file_type().is_symlink() {
                    format!("link {}", std::fs::read_link(&p).unwrap().display())
                } else if m.is_dir() {
                    todo.push(p.clone());
                    "dir".to_string()
                } else {
                    let x = m.permissions().mode() & 0o100 != 0;
                    format!("file x={x} {:?}", std::fs::read(&p).unwrap())
                };
                out.insert(rel, what);
            }
        }
        out
    }

    #[test]
    fn the_built_in_corpus_is_the_source_trees_fixtures_with_links_and_execute_bits() {
        let tmp = tempfile::tempdir().unwrap();
        let folders = unpack_builtin(tmp.path()).unwrap();
        assert_eq!(folders.len(), 2);
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        for (folder, unpacked) in BUILTIN_FOLDERS.iter().zip(&folders) {
            let mut want = tree(&root.join(folder));
            // Left out at build time: the C source of a static stand-in (read by nothing).
            want.retain(|p, _| p.extension().is_none_or(|e| e != "c"));
            let got = tree(unpacked);
            assert_eq!(got.len(), want.len(), "{folder}: entry count");
            for (p, w) in &want {
                assert_eq!(got.get(p), Some(w), "{folder}/{}", p.display());
            }
            // The corpus holds symlinks (sysfs, /dev/null masks) and executable stand-ins.
            assert!(got.values().any(|v| v.starts_with("link ")), "{folder}");
            assert!(
                got.values().any(|v| v.starts_with("file x=true")),
                "{folder}"
            );
        }
    }
}
