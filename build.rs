//! Puts the git revision into `gpufleet --version` (`GPUFLEET_GIT_SUFFIX`, " (git <12 hex>)"),
//! when the source is a git checkout of this package and git runs; otherwise (a tarball, no
//! git) the suffix is empty and the version is the package's alone.
//!
//! Packs the simulator's built-in corpus into `$OUT_DIR/corpus.tar.gz` (see [`pack_corpus`]):
//! `gpufleet sim`/`demo` embed it, so an installed binary runs the demo without this source tree.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The corpus folders packed, under tests/fixtures/ (kept in sync with ../shared by
/// scripts/sync-shared.sh); the archive holds them under these names.
const CORPUS: [&str; 2] = ["nodes", "nodes-v2"];

/// What of a fixture node the simulator reads: its node.toml (the mix's expected status) and
/// the probe's environment (root/, the bin/ stand-ins and the commands/ they answer from).
const FIXTURE_PARTS: [&str; 4] = ["node.toml", "root", "bin", "commands"];

/// Files left out: the C source of a static stand-in (commands/*.c), read by no stand-in.
fn left_out(rel: &Path) -> bool {
    rel.extension().is_some_and(|e| e == "c")
        && rel
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|p| p == "commands")
}

/// Appends `path` (a file, folder or symlink, never followed) as `name`, folders recursively in
/// name order. Anything else (a fifo, a socket, a device) fails the build: the archive cannot
/// hold it and a corpus should not have it.
fn append(
    tar: &mut tar::Builder<impl std::io::Write>,
    path: &Path,
    name: &Path,
) -> Result<(), String> {
    let say = |e: std::io::Error| format!("{}: {e}", path.display());
    let meta = std::fs::symlink_metadata(path).map_err(say)?;
    let t = meta.file_type();
    if !(t.is_file() || t.is_dir() || t.is_symlink()) {
        return Err(format!(
            "{}: not a file, folder or symlink (mode {:o}); the built-in corpus cannot hold it",
            path.display(),
            meta.permissions().mode()
        ));
    }
    if t.is_file() && left_out(name) {
        return Ok(());
    }
    tar.append_path_with_name(path, name).map_err(say)?;
    if t.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(say)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(say)?;
        entries.sort();
        for e in entries {
            let Some(file) = e.file_name() else { continue };
            append(tar, &e, &name.join(file))?;
        }
    }
    Ok(())
}

/// Packs tests/fixtures/{nodes,nodes-v2}: each fixture node (a folder with a node.toml) with
/// its [`FIXTURE_PARTS`], symlinks as symlinks, in name order, with fixed times and owners and
/// modes 0644/0755 (the execute bit kept), gzip-compressed, to `out`. A missing corpus folder
/// (a source without tests/) packs nothing for it: the simulator then says the binary has no
/// built-in corpus.
fn pack_corpus(manifest: &Path, out: &Path) -> Result<(), String> {
    let file = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    tar.follow_symlinks(false);
    for folder in CORPUS {
        let dir = manifest.join("tests/fixtures").join(folder);
        println!("cargo:rerun-if-changed={}", dir.display());
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut nodes: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("node.toml").is_file())
            .collect();
        nodes.sort();
        for node in nodes {
            let Some(node_name) = node.file_name() else {
                continue;
            };
            let name = Path::new(folder).join(node_name);
            for part in FIXTURE_PARTS {
                let p = node.join(part);
                if std::fs::symlink_metadata(&p).is_ok() {
                    append(&mut tar, &p, &name.join(part))?;
                }
            }
        }
    }
    let gz = tar
        .into_inner()
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let mut file = gz.finish().map_err(|e| format!("{}: {e}", out.display()))?;
    file.flush().map_err(|e| format!("{}: {e}", out.display()))
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(out_dir) = std::env::var_os("OUT_DIR") else {
        panic!("cargo sets OUT_DIR for build scripts");
    };
    // The corpus is the simulator's (the `sim` feature, on by default).
    if std::env::var_os("CARGO_FEATURE_SIM").is_some()
        && let Err(e) = pack_corpus(manifest, &Path::new(&out_dir).join("corpus.tar.gz"))
    {
        panic!("cannot pack the simulator's built-in corpus: {e}");
    }
    println!("cargo:rerun-if-env-changed=GPUFLEET_GIT_REVISION");
    // A packager may say the revision itself (a source tarball has no .git).
    let given = std::env::var("GPUFLEET_GIT_REVISION")
        .ok()
        .filter(|s| !s.is_empty());
    // Only this package's own checkout counts: not a repository the tarball was unpacked in.
    let ours = git(&["rev-parse", "--show-toplevel"]).is_some_and(|top| {
        Path::new(&top).canonicalize().ok()
            == Path::new(env!("CARGO_MANIFEST_DIR")).canonicalize().ok()
    });
    let rev = given.or_else(|| {
        if !ours {
            return None;
        }
        // Rebuild when HEAD moves (a commit, a checkout), in a worktree too.
        for p in ["HEAD", "packed-refs"] {
            if let Some(path) = git(&["rev-parse", "--git-path", p]) {
                println!("cargo:rerun-if-changed={path}");
            }
        }
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
            && let Some(path) = git(&["rev-parse", "--git-path", &r])
        {
            println!("cargo:rerun-if-changed={path}");
        }
        git(&["rev-parse", "--short=12", "HEAD"])
    });
    let rev = rev.filter(|r| r.chars().all(|c| c.is_ascii_alphanumeric()));
    let suffix = rev.map(|r| format!(" (git {r})")).unwrap_or_default();
    println!("cargo:rustc-env=GPUFLEET_GIT_SUFFIX={suffix}");
}
