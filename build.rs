//! Puts the git revision into `gpufleet --version` (`GPUFLEET_GIT_SUFFIX`, " (git <12 hex>)"),
//! when the source is a git checkout of this package and git runs; otherwise (a tarball, no
//! git) the suffix is empty and the version is the package's alone.

use std::path::Path;
use std::process::Command;

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
