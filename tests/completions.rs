//! Completions, the man page and `--version`, from the real binary: the bash script is loaded
//! into a real bash and asked to complete; zsh and fish scripts are syntax-checked by those
//! shells when installed; the man page is rendered by man-db's `man` when installed.

// A test: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn gpufleet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .output()
        .unwrap()
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn bash_completes_subcommands_and_flag_values() {
    let out = gpufleet(&["completions", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("gpufleet.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    // COMP_WORDS as bash fills them for `gpufleet <TAB>`, `gpufleet snapshot --format <TAB>`,
    // and `gpufleet --inventory-format a<TAB>`.
    let probe = format!(
        r#"source '{}'
complete -p gpufleet
COMP_WORDS=(gpufleet di); COMP_CWORD=1; _gpufleet gpufleet di gpufleet; echo "1: ${{COMPREPLY[*]}}"
COMP_WORDS=(gpufleet snapshot --format ''); COMP_CWORD=3; _gpufleet gpufleet '' --format; echo "2: ${{COMPREPLY[*]}}"
COMP_WORDS=(gpufleet inventory list --inventory-format a); COMP_CWORD=4; _gpufleet gpufleet a --inventory-format; echo "3: ${{COMPREPLY[*]}}"
"#,
        script.display()
    );
    let r = Command::new("bash")
        .args(["--norc", "-c", &probe])
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "{t}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(t.contains("-F _gpufleet gpufleet"), "{t}");
    assert!(t.contains("1: diff"), "{t}");
    let formats = t.lines().find(|l| l.starts_with("2: ")).unwrap();
    for f in ["table", "json", "jsonl", "csv", "prometheus"] {
        assert!(
            formats.split_whitespace().any(|w| w == f),
            "{f} in {formats}"
        );
    }
    assert!(t.contains("3: ansible-ini ansible-yaml"), "{t}");
}

#[test]
fn zsh_and_fish_scripts_parse_in_their_shells() {
    let zsh = gpufleet(&["completions", "zsh"]);
    assert!(String::from_utf8_lossy(&zsh.stdout).starts_with("#compdef gpufleet"));
    let fish = gpufleet(&["completions", "fish"]);
    assert!(String::from_utf8_lossy(&fish.stdout).contains("complete -c gpufleet"));
    let dir = tempfile::tempdir().unwrap();
    for (shell, out, check) in [
        ("zsh", &zsh, vec!["-n"]),
        ("fish", &fish, vec!["--no-execute"]),
    ] {
        if !have(shell) {
            eprintln!("{shell} is not installed: its script is checked by its header only");
            continue;
        }
        let p = dir.path().join(shell);
        std::fs::write(&p, &out.stdout).unwrap();
        let r = Command::new(shell).args(&check).arg(&p).output().unwrap();
        assert!(
            r.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    assert_eq!(gpufleet(&["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn man_page_lists_the_commands_and_renders() {
    let out = gpufleet(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let roff = String::from_utf8_lossy(&out.stdout);
    assert!(roff.contains(".TH gpufleet 1"), "{roff}");
    for sub in [
        "snapshot",
        "tui",
        "upgrade",
        "inventory",
        "diff",
        "completions",
    ] {
        assert!(
            roff.contains(&format!("gpufleet\\-{sub}")) || roff.contains(sub),
            "{sub}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    assert_eq!(gpufleet(&["man", "--dir", &d]).status.code(), Some(0));
    for page in [
        "gpufleet.1",
        "gpufleet-snapshot.1",
        "gpufleet-diff.1",
        "gpufleet-inventory-list.1",
    ] {
        assert!(dir.path().join(page).is_file(), "{page}");
    }
    // A folder that does not exist yet is made (as ~/.local/share/man/man1 on a new machine).
    let nested = dir.path().join("share/man/man1");
    let n = nested.display().to_string();
    assert_eq!(gpufleet(&["man", "--dir", &n]).status.code(), Some(0));
    assert!(nested.join("gpufleet.1").is_file());
    if have("man") {
        let r = Command::new("man")
            .arg("-l")
            .arg(dir.path().join("gpufleet-snapshot.1"))
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        let page = String::from_utf8_lossy(&r.stdout);
        assert!(r.status.success() && page.contains("--output"), "{page}");
    }
}

#[test]
fn version_names_the_git_revision_in_a_checkout() {
    let out = gpufleet(&["--version"]);
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        v.starts_with(&format!("gpufleet {}", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    match head {
        Ok(h) if h.status.success() => {
            let rev = String::from_utf8_lossy(&h.stdout).trim().to_string();
            assert_eq!(
                v,
                format!("gpufleet {} (git {rev})", env!("CARGO_PKG_VERSION"))
            );
        }
        _ => assert_eq!(v, format!("gpufleet {}", env!("CARGO_PKG_VERSION"))),
    }
}

/// `gpufleet … | head -0` for every command that prints: the reader goes away before
/// gpufleet writes; gpufleet stops writing quietly and exits with its own status (0 here),
/// never a panic (`println!` panics on a closed stdout: exit 101). A gate (`snapshot --check`)
/// exits 141 instead, as a process SIGPIPE ended: a verdict its reader left before has not
/// passed.
#[test]
fn a_reader_that_leaves_early_is_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let inv = tmp.path().join("fleet.toml");
    std::fs::write(&inv, "[[nodes]]\nname = \"gpu01\"\nhost = \"127.0.0.1\"\n").unwrap();
    let old = tmp.path().join("old.json");
    // A snapshot of one node: a fixture's committed JSON output (tests/golden/).
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/nodes/h200-open-580-k6.18-real.json");
    let text = std::fs::read_to_string(golden)
        .unwrap()
        .replace("SCANNED_AT", "2026-12-01T00:00:00Z")
        .replace("GENERATED_AT", "2026-12-01T00:00:00Z");
    std::fs::write(&old, text).unwrap();
    let state = tmp.path().join("state");
    let config = tmp.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let (inv, old) = (inv.display().to_string(), old.display().to_string());
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["completions", "zsh"], 0),
        (vec!["man"], 0),
        (vec!["keys"], 0),
        (vec!["paths"], 0),
        (vec!["config", "show"], 0),
        (vec!["rollouts"], 0),
        (vec!["rollouts", "--json"], 0),
        (vec!["journal"], 0),
        // Its own status: gpu01 cannot be reached, its lock is unknown.
        (vec!["locks", "-i", &inv], 1),
        (vec!["inventory", "list", "-i", &inv], 0),
        (vec!["inventory", "list", "-i", &inv, "--format", "json"], 0),
        (vec!["diff", &old, &old], 0),
        (vec!["snapshot", "--from", &old, "--format", "json"], 0),
        (
            vec!["snapshot", "--from", &old, "--format", "json", "--check"],
            141,
        ),
    ];
    for (args, want) in cases {
        // The reader is gone before gpufleet writes (it closes its end at once): every write
        // fails.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(&args)
            .env("GPUFLEET_STATE_DIR", &state)
            .env("GPUFLEET_CONFIG", &config)
            .env_remove("GPUFLEET_INVENTORY")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(want), "{args:?}: {stderr}");
    }
}
