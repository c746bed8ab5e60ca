//! Issue 13 item 6, the rough edges found in a trial, each proved through the real binary
//! (and, for a fleet, real sshds on loopback): `{name}` in `root`, `--check --allow-no-driver`
//! on a mixed fleet, `snapshot --format table --brief`, `--label` unions, config typos,
//! version thresholds, `gpufleet keys` / the README listing every `[keys]` action, and the
//! node selector flags: one set for every command, brackets read as ranges.

// A test: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;

use support::*;

fn gpufleet(args: &[&str], home: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .output()
        .unwrap()
}

/// A mixed fleet over real sshds: a ready GPU node, a CPU node (no driver), a node to migrate.
#[test]
fn a_mixed_fleet_root_name_check_allow_no_driver_brief_and_labels() {
    let fixtures = [
        fixture("h200-open-580-k6.18-real"),
        fixture("cpu-node-no-driver-k6.8"),
        fixture("a100-proprietary-535-k5.15-peermem"),
    ];
    let fleet = Fleet::start(&fixtures, 213);
    // `{name}` in `root` (here in [defaults]): each node reads its own fixture's tree.
    let dir = fixtures[0].parent().unwrap();
    assert!(fixtures.iter().all(|f| f.parent().unwrap() == dir));
    let mut text = fleet.inventory_text();
    for f in &fixtures {
        text = text.replace(&format!("root = \"{}\"\n", f.join("root").display()), "");
    }
    assert!(!text.contains("root ="), "{text}");
    text = text.replace(
        "[defaults]\n",
        &format!("[defaults]\nroot = \"{}/{{name}}/root\"\n", dir.display()),
    );
    // Labels: rack r1 (h200, cpu), r2 (a100); the a100 is a canary.
    text = text.replace(
        "name = \"h200-open-580-k6.18-real\"\n",
        "name = \"h200-open-580-k6.18-real\"\nlabels = { rack = \"r1\" }\n",
    );
    text = text.replace(
        "name = \"cpu-node-no-driver-k6.8\"\n",
        "name = \"cpu-node-no-driver-k6.8\"\nlabels = { rack = \"r1\" }\n",
    );
    text = text.replace(
        "name = \"a100-proprietary-535-k5.15-peermem\"\n",
        "name = \"a100-proprietary-535-k5.15-peermem\"\nlabels = { rack = \"r2\" }\ncanary = true\n",
    );
    fleet.write_inventory(&text);

    let (code, doc) = fleet.snapshot(&[]);
    assert_eq!(code, 0);
    assert_eq!(node(&doc, "h200-open-580-k6.18-real")["status"], "ready");
    assert_eq!(node(&doc, "cpu-node-no-driver-k6.8")["status"], "no-driver");
    assert_eq!(
        node(&doc, "a100-proprietary-535-k5.15-peermem")["status"],
        "migrate"
    );

    // --check on the GPU + CPU nodes: the CPU node fails it unless --allow-no-driver.
    let (code, _) = fleet.snapshot(&["--label", "rack=r1", "--check"]);
    assert_eq!(code, 1);
    let (code, doc) = fleet.snapshot(&["--label", "rack=r1", "--check", "--allow-no-driver"]);
    assert_eq!(code, 0);
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 2);
    // A node to migrate still fails it.
    let (code, _) = fleet.snapshot(&["--check", "--allow-no-driver"]);
    assert_eq!(code, 1);

    // Repeated values of one label key are a union; `--label canary` is the canary flag.
    let (_, doc) = fleet.snapshot(&["--label", "rack=r1", "--label", "rack=r2"]);
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 3);
    let (_, doc) = fleet.snapshot(&["--label", "canary"]);
    let names: Vec<&str> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a100-proprietary-535-k5.15-peermem"]);

    // --brief: the header, then exactly one line per node, with its reason codes.
    let inv = fleet.inventory.display().to_string();
    let out = fleet.gpufleet(&["snapshot", "-i", &inv, "--format", "table", "--brief"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(
        lines[0].starts_with("NODE") && lines[0].ends_with("REASONS"),
        "{stdout}"
    );
    let a100 = lines
        .iter()
        .find(|l| l.starts_with("a100-proprietary-535-k5.15-peermem "))
        .unwrap();
    assert!(
        a100.contains("migrate") && a100.contains("proprietary-module"),
        "{a100}"
    );
    // --brief alone means the table; with another format it is a usage error.
    let out = fleet.gpufleet(&["snapshot", "-i", &inv, "--brief"]);
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 4);
    let out = fleet.gpufleet(&["snapshot", "-i", &inv, "--brief", "--format", "json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--brief is for the table format"));
}

/// Config typos get "did you mean", with the file and line: a key, a table, a `[keys]` action.
#[test]
fn config_typos_get_did_you_mean() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let cases = [
        (
            "[probe]\ndedline = 5\n",
            ":2:1:",
            "did you mean `deadline`?",
        ),
        ("[prob]\ndeadline = 5\n", ":1:", "did you mean `probe`?"),
        (
            "[ssh]\nconcurency = 5\n",
            ":2:1:",
            "did you mean `concurrency`?",
        ),
        (
            "[tui]\nthem = \"light\"\n",
            ":2:1:",
            "did you mean `theme`?",
        ),
    ];
    for (text, at, hint) in cases {
        std::fs::write(&config, text).unwrap();
        let out = gpufleet(
            &["--config", config.to_str().unwrap(), "config", "show"],
            dir.path(),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert!(err.contains(&format!("config.toml{at}")), "{text}: {err}");
        assert!(err.contains(hint), "{text}: {err}");
    }
    // A misspelt [keys] action: said by `gpufleet keys` (exit 1), the rest still listed.
    std::fs::write(&config, "[keys]\nqiut = [\"z\"]\n").unwrap();
    let out = gpufleet(&["--config", config.to_str().unwrap(), "keys"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("[keys] `qiut` is not an action; did you mean `quit`?"),
        "{out:?}"
    );
}

/// Version thresholds accept `"5.12"` and a bare number by its raw token (`6.10` is 6.10).
#[test]
fn version_thresholds_as_strings_and_raw_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[assessment]\ndmabuf_min_kernel = \"5.12\"\nkernel_guideline = 6.10\n",
    )
    .unwrap();
    let out = gpufleet(
        &["--config", config.to_str().unwrap(), "config", "show"],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let line = |key: &str| {
        stdout
            .lines()
            .find(|l| l.contains(key))
            .unwrap_or_else(|| panic!("{key} missing:\n{stdout}"))
            .to_string()
    };
    assert!(line("kernel_guideline").contains("6.10"), "{stdout}");
    assert!(line("dmabuf_min_kernel").contains("5.12"), "{stdout}");
    // A 6.6 kernel is below the 6.10 guideline, and not below 6.1.
    let h100 = fixture("h100-open-555-k6.6-peermem");
    let advised = |config: &std::path::Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
            .args(["--config", config.to_str().unwrap()])
            .args([
                "snapshot",
                "--format",
                "json",
                "--nvidia-smi-timeout",
                "1",
                "--root",
            ])
            .arg(h100.join("root"))
            .env("HOME", dir.path())
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", h100.join("bin").display()),
            )
            .output()
            .unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        codes(&doc["nodes"][0]).contains(&"kernel-below-guideline".to_string())
    };
    assert!(advised(&config));
    std::fs::write(&config, "[assessment]\nkernel_guideline = 6.1\n").unwrap();
    assert!(!advised(&config));
}

/// Every `[keys]` action is listed by `gpufleet keys` (with its default keys) and in the operator
/// guide (docs/operators.md).
#[test]
fn every_keys_action_is_in_gpufleet_keys_and_the_readme() {
    let dir = tempfile::tempdir().unwrap();
    let out = gpufleet(&["keys"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let listing = String::from_utf8(out.stdout).unwrap();
    let readme = std::fs::read_to_string(manifest().join("docs/operators.md")).unwrap();
    let keymap = gpufleet::app::Keymap::default();
    for a in gpufleet::app::Action::ALL {
        let line = listing
            .lines()
            .find(|l| l.split_whitespace().next() == Some(a.name()))
            .unwrap_or_else(|| panic!("{} missing:\n{listing}", a.name()));
        assert!(line.contains(&keymap.keys_of(*a)), "{line}");
        assert!(
            readme.contains(&format!("`{}`", a.name())),
            "docs/operators.md does not list `{}`",
            a.name()
        );
    }
    // Read-only: the actions that change nodes are listed, unbound.
    let out = gpufleet(&["keys", "--read-only"], dir.path());
    let listing = String::from_utf8(out.stdout).unwrap();
    let upgrade = listing.lines().find(|l| l.starts_with("upgrade ")).unwrap();
    assert!(upgrade.contains("(unbound)"), "{upgrade}");
}

/// The help paragraph of `flag` in `help` (from its line to the next option).
fn flag_help(help: &str, flag: &str) -> String {
    let mut out = Vec::new();
    for l in help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(flag))
    {
        if !out.is_empty() && l.trim_start().starts_with('-') {
            break;
        }
        out.push(l.trim());
    }
    out.join(" ").trim().to_string()
}

/// `-n/-g/-l` are one set of flags: `inventory list` and the scanning commands say the same
/// help, and select the same way. Brackets in `-n` are a node range as in Slurm and
/// ClusterShell (the -i slurm:NODELIST syntax), never a glob character class, as the help says:
/// `sim-00[04]*` is `sim-0004*`; a pattern whose range matches nothing says how it was read.
#[test]
fn one_set_of_selector_flags_and_brackets_are_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    for cmd in ["snapshot", "tui", "upgrade", "locks"] {
        let scan = String::from_utf8_lossy(&gpufleet(&[cmd, "--help"], home).stdout).into_owned();
        let list =
            String::from_utf8_lossy(&gpufleet(&["inventory", "list", "--help"], home).stdout)
                .into_owned();
        for flag in ["-n, --node", "-g, --group", "-l, --label"] {
            let (a, b) = (flag_help(&scan, flag), flag_help(&list, flag));
            assert!(!a.is_empty(), "{cmd} {flag}:\n{scan}");
            assert_eq!(a, b, "{cmd} and inventory list differ on {flag}");
        }
        assert!(
            flag_help(&scan, "-n, --node").contains("never a glob character class"),
            "{scan}"
        );
    }
    let inv = home.join("fleet.toml");
    std::fs::write(
        &inv,
        "[[nodes]]\nname = \"sim-000-h200\"\nhost = \"127.0.0.1\"\n\
         [[nodes]]\nname = \"sim-004-cpu\"\nhost = \"127.0.0.1\"\n\
         [[nodes]]\nname = \"sim-0004-a100\"\nhost = \"127.0.0.1\"\n",
    )
    .unwrap();
    let inv = inv.to_str().unwrap();
    let names = |sel: &str| -> Vec<String> {
        let out = gpufleet(
            &["inventory", "list", "-i", inv, "-f", "json", "-n", sel],
            home,
        );
        assert_eq!(out.status.code(), Some(0), "{sel}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("sim-00[04]*"), ["sim-0004-a100"]);
    assert_eq!(names("sim-000-*,sim-004*"), ["sim-000-h200", "sim-004-cpu"]);
    assert_eq!(names("sim-00[0,4]-*"), ["sim-000-h200", "sim-004-cpu"]);
    // A range that matches nothing says how the pattern was read.
    let out = gpufleet(&["inventory", "list", "-i", inv, "-n", "sim-00[12]*"], home);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("no node named `sim-0012*`"), "{err}");
    assert!(err.contains("read from `sim-00[12]*`"), "{err}");
    assert!(err.contains("not a glob character class"), "{err}");
    // Letters are no range: said, not matched.
    let out = gpufleet(&["inventory", "list", "-i", inv, "-n", "sim-[a-c]*"], home);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("not a glob character class"), "{err}");
    // The scanning commands build the same selection (the error comes before any SSH).
    let out = gpufleet(&["snapshot", "-i", inv, "-n", "sim-00[12]*"], home);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("read from `sim-00[12]*`"), "{err}");
}

/// Issue 21 (lows): lines of the rollout journal that are not entries (garbage, NUL bytes a file
/// system left after a crash, a planted escape sequence) are said by `gpufleet rollouts` and
/// `gpufleet journal`, with the file and each line's number, escaped; the real entries are
/// still read (before: `rollouts` said nothing, `journal` only a count).
#[test]
fn garbage_and_nul_lines_in_the_journal_are_said_with_their_line() {
    let home = tempfile::tempdir().unwrap();
    let state = home.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let journal = state.join("journal.jsonl");
    let entry = |phase: &str| {
        format!(
            "{{\"ts\":\"2026-11-30T10:00:00Z\",\"who\":\"ops@laptop\",\"rollout\":\"r-1\",\"node\":\"\",\"step\":\"rollout\",\"phase\":\"{phase}\",\"outcome\":\"\"}}\n"
        )
    };
    let mut text = entry("start").into_bytes();
    text.extend_from_slice(b"\0\0\0\0\0\0\0\0\n");
    text.extend_from_slice(b"garbage \x1b[2J\n");
    text.extend_from_slice(entry("done").as_bytes());
    std::fs::write(&journal, &text).unwrap();
    let state_arg = state.display().to_string();
    for cmd in ["rollouts", "journal"] {
        let out = gpufleet(&["--state-dir", &state_arg, cmd], home.path());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{cmd}: {err}");
        assert!(
            err.contains(&format!("journal {}: 2 line(s)", journal.display())),
            "{cmd}: {err}"
        );
        assert!(
            err.contains(r#"line 2 "\x00\x00\x00\x00\x00\x00\x00\x00", line 3 "garbage \x1b[2J""#),
            "{cmd}: {err}"
        );
        assert!(
            !err.contains('\x1b'),
            "{cmd}: raw escape on the terminal: {err:?}"
        );
        // The entries around the bad lines are read.
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("r-1"),
            "{cmd}: {out:?}"
        );
    }
}
