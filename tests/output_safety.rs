//! Output safety (README "Trust model"): a node whose files and nvidia-smi print escape
//! sequences, bidi overrides, U+2028, U+FEFF, invalid UTF-8 and NUL bytes, through the real
//! binary and the real probe, on a temp copy of a fixture node (the original is never edited):
//! none of it reaches stdout raw in the table or CSV, CSV formulas are neutralized, and in the
//! TUI (a real terminal, tmux) the row and the detail pane show escapes on an intact screen.

// A test or bench: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{Tmux, copy_tree, fixture, manifest};

/// ESC sequences (CSI clear screen, SGR colour and blink, OSC window title, OSC 8 hyperlink),
/// a C1 CSI, bidi overrides and isolates, U+2028/U+2029, U+FEFF, an invalid UTF-8 byte, NUL.
const HOSTILE: &[u8] = "\x1b[2J\x1b[31;5mRED\x1b]0;owned\x07\x1b]8;;http://x/\x07link\x1b]8;;\x07\u{9b}1m\u{202e}gnp.exe\u{202c}\u{2066}iso\u{2069}\u{2028}LS\u{2029}PS\u{feff}BOM\u{200b}\u{61c}".as_bytes();

fn hostile(extra: &[u8]) -> Vec<u8> {
    [HOSTILE, b"\xff\xfe\x00NUL", extra].concat()
}

/// A writable copy of the real H200 fixture whose hostname, os-release PRETTY_NAME, GPU name
/// (the replayed nvidia-smi's `commands/gpus.csv`) and an /etc/modprobe.d file (a comment, and
/// a `softdep` line that is evidence for peermem-configured) hold the hostile bytes.
/// `hostname` replaces the hostile hostname when given.
fn hostile_node(hostname: Option<&[u8]>) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let node = t.path().join("h200-hostile");
    copy_tree(&fixture("h200-open-580-k6.18-real"), &node);
    let root = node.join("root");
    let name = hostname.map_or_else(
        || [b"evil".as_slice(), &hostile(b"")].concat(),
        <[u8]>::to_vec,
    );
    std::fs::write(
        root.join("proc/sys/kernel/hostname"),
        [name, b"\n".to_vec()].concat(),
    )
    .unwrap();
    let os = std::fs::read(root.join("etc/os-release")).unwrap();
    let os = String::from_utf8(os).unwrap().replace(
        "PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"",
        "PRETTY_NAME=\"Ubuntu @@\"",
    );
    let (a, b) = os.split_once("@@").unwrap();
    std::fs::write(
        root.join("etc/os-release"),
        [a.as_bytes(), &hostile(b""), b.as_bytes()].concat(),
    )
    .unwrap();
    let csv = node.join("commands/gpus.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    let (a, b) = text.split_once("0, NVIDIA H200,").unwrap();
    std::fs::write(
        &csv,
        [
            a.as_bytes(),
            b"0, NVIDIA H200",
            &hostile(b""),
            b",",
            b.as_bytes(),
        ]
        .concat(),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("etc/modprobe.d")).unwrap();
    std::fs::write(
        root.join("etc/modprobe.d/evil.conf"),
        [
            b"# comment \xff\xfe\x00NUL ".as_slice(),
            HOSTILE,
            b"\nsoftdep nvidia post: nvidia-peermem ",
            &hostile(b"\n"),
        ]
        .concat(),
    )
    .unwrap();
    (t, node)
}

fn snapshot(node: &Path, format: &str) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["snapshot", "--format", format, "--nvidia-smi-timeout", "2"])
        .arg("--config")
        .arg(manifest().join("config/config.example.toml"))
        .arg("--root")
        .arg(node.join("root"))
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", node.join("bin").display()),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The characters the trust model lists, written out here rather than taken from gpufleet.
fn forbidden(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(
            c,
            '\u{61c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{feff}'
        )
}

fn assert_no_raw(what: &str, out: &[u8]) -> String {
    let text = String::from_utf8(out.to_vec())
        .unwrap_or_else(|e| panic!("{what}: stdout is not UTF-8: {e}"));
    if let Some(c) = text.chars().find(|c| forbidden(*c)) {
        panic!("{what}: raw U+{:04X} in stdout:\n{text}", c as u32);
    }
    text
}

#[test]
fn hostile_node_text_never_reaches_stdout_raw_in_the_table_or_csv() {
    let (_t, node) = hostile_node(None);
    // The bytes are really there, and reach gpufleet (JSON keeps them exactly).
    let json = snapshot(&node, "json");
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let n = &doc["nodes"][0];
    let name = n["name"].as_str().unwrap();
    assert!(
        name.starts_with("evil\x1b[2J\x1b[31;5mRED\x1b]0;owned\x07"),
        "{name:?}"
    );
    assert!(name.contains("\u{202e}gnp.exe") && name.contains('\u{2028}') && name.contains('\0'));
    assert!(
        name.contains('\u{feff}') && name.contains('\u{fffd}'),
        "{name:?}"
    );
    let gpu = n["gpus"][0]["name"].as_str().unwrap();
    assert!(gpu.starts_with("NVIDIA H200\x1b[2J"), "{gpu:?}");
    let reasons = serde_json::to_string(&n["reasons"]).unwrap();
    assert!(reasons.contains("/etc/modprobe.d/evil.conf"), "{reasons}");
    assert_no_raw("json", &json.stdout);

    for format in ["table", "csv", "jsonl"] {
        let out = snapshot(&node, format);
        let text = assert_no_raw(format, &out.stdout);
        if format == "jsonl" {
            continue;
        }
        // Shown, escaped: name, GPU name and the modprobe.d evidence line.
        for want in [
            "evil\\x1b[2J\\x1b[31;5mRED\\x1b]0;owned\\x07",
            "NVIDIA H200\\x1b[2J",
            "\\x9b1m\\u{202e}gnp.exe\\u{202c}\\u{2066}iso\\u{2069}\\u{2028}LS\\u{2029}PS\\u{feff}BOM\\u{200b}\\u{61c}",
            "\\x00NUL",
        ] {
            assert!(text.contains(want), "{format}: {want:?} missing:\n{text}");
        }
        if format == "table" {
            assert!(
                text.contains(
                    "/etc/modprobe.d/evil.conf: softdep nvidia post: nvidia-peermem \\x1b[2J"
                ),
                "{text}"
            );
        }
    }

    let out = snapshot(&node, "csv");
    let mut rdr = csv::Reader::from_reader(out.stdout.as_slice());
    let header: Vec<String> = rdr.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, gpufleet::snapshot::csv_columns());
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(
        rows.len(),
        1,
        "one node, one row: no line break got through"
    );
    assert!(rows[0][0].starts_with("evil\\x1b[2J"), "{:?}", &rows[0][0]);
    assert!(
        rows[0][5].starts_with("1x NVIDIA H200\\x1b[2J"),
        "{:?}",
        &rows[0][5]
    );
}

#[test]
fn csv_formulas_from_a_node_are_neutralized() {
    for name in [
        "=HYPERLINK(\"http://x/\",\"y\")",
        "+1+cmd|' /C calc'!A0",
        "-2+3",
        "@SUM(1+1)",
    ] {
        let (_t, node) = hostile_node(Some(name.as_bytes()));
        let out = snapshot(&node, "csv");
        let mut rdr = csv::Reader::from_reader(out.stdout.as_slice());
        let row = rdr.records().next().unwrap().unwrap();
        assert_eq!(&row[0], format!("'{name}"), "{name}");
        // The table shows the name as it is.
        let table = String::from_utf8(snapshot(&node, "table").stdout).unwrap();
        assert!(table.lines().nth(1).unwrap().starts_with(name), "{table}");
    }
}

/// The pane's title: an OSC 0 that got through would have set it.
fn pane_title(tmux: &Tmux) -> String {
    let out = Command::new(support::need("tmux"))
        .args([
            "-L",
            &tmux.socket,
            "display-message",
            "-p",
            "-t",
            &tmux.session,
            "#{pane_title}",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// An intact screen: 45 lines of at most 160 columns, the top line, the bottom key line.
fn assert_intact(screen: &str) {
    let lines: Vec<&str> = screen.lines().collect();
    assert!(
        lines.iter().all(|l| l.chars().count() <= 160),
        "a line overflows:\n{screen}"
    );
    assert!(
        lines[0].starts_with(" gpufleet ") && lines[0].trim_end().ends_with(" local"),
        "{screen}"
    );
    assert!(
        lines.iter().any(|l| l.contains("? help  / filter")),
        "the key line is gone:\n{screen}"
    );
}

#[test]
fn the_tui_shows_a_hostile_node_escaped_on_an_intact_screen() {
    // A hostname the TUI names its row with (valid UTF-8, else it falls back to localhost).
    let (_t, node) = hostile_node(Some(
        "evil\x1b]0;owned\x07\x1b[2J\u{202e}rtl\u{2028}\u{feff}®é\u{301}".as_bytes(),
    ));
    let home = tempfile::tempdir().unwrap();
    let command = format!(
        "env -i PATH={bin}:/usr/bin:/bin TERM=xterm-256color HOME={home} {exe} tui --local --root {root} --config {config}; echo EXITED-$?; sleep 30",
        bin = node.join("bin").display(),
        home = home.path().display(),
        exe = env!("CARGO_BIN_EXE_gpufleet"),
        root = node.join("root").display(),
        config = manifest().join("config/config.example.toml").display(),
    );
    let tmux = Tmux::start(&command);
    let screen = tmux.wait_for("scanned 1/1");
    let screen = if screen.contains("1 migrate") {
        screen
    } else {
        tmux.wait_for("1 migrate")
    };
    assert_intact(&screen);
    // The row: the name escaped (the column shows 40 cells of it, cut in the middle: both its
    // ends, each escaped).
    let row = screen
        .lines()
        .find(|l| l.contains("evil"))
        .unwrap_or_else(|| panic!("no row:\n{screen}"));
    assert!(row.contains("evil\\x1b]0;owned"), "{row}");
    assert!(row.contains("\\u{feff}"), "{row}");
    // The GPUs column joins only when it fits (the kernel comes first): when it does, the GPU
    // name is escaped there too (the detail pane's check below always runs).
    if screen
        .lines()
        .any(|l| l.contains("STATUS") && l.contains("GPUS"))
    {
        assert!(row.contains("1x NVIDIA H200\\x1b[2J"), "{row}");
    }
    assert!(row.contains("migrate"), "{row}");
    // Columns line up with the header: nothing in the name took more or fewer cells.
    let header = screen.lines().find(|l| l.contains("STATUS")).unwrap();
    let col = |l: &str, w: &str| l.find(w).map(|b| l[..b].chars().count());
    assert_eq!(
        col(header, "STATUS"),
        col(row, "migrate"),
        "{header}\n{row}"
    );
    assert_eq!(
        col(header, "KERNEL"),
        col(row, "6.18.44"),
        "{header}\n{row}"
    );
    assert_ne!(pane_title(&tmux), "owned");

    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("facts and evidence");
    assert_intact(&screen);
    // The whole name on the pane's first line: ambiguous-width (®) and combining (U+0301)
    // characters escaped too.
    assert!(
        screen.contains(
            "evil\\x1b]0;owned\\x07\\x1b[2J\\u{202e}rtl\\u{2028}\\u{feff}\\xaeé\\u{301}  migrate"
        ),
        "{screen}"
    );
    for want in [
        // The GPU name (nvidia-smi), in the GPU fact and its evidence.
        "NVIDIA H200\\x1b[2J\\x1b[31;5mRED\\x1b]0;owned\\x07",
        // The softdep line, as evidence for peermem-configured.
        "/etc/modprobe.d/evil.conf: softdep nvidia post: nvidia-peermem \\x1b[2J",
        // os-release's PRETTY_NAME, invalid UTF-8 and NUL included.
        "Ubuntu \\x1b[2J",
    ] {
        let screen = if screen.contains(want) {
            screen.clone()
        } else {
            // Scroll until it shows (the pane is 60% of the screen).
            let mut found = None;
            for _ in 0..40 {
                tmux.keys(&["j"]);
                std::thread::sleep(std::time::Duration::from_millis(50));
                let s = tmux.screen();
                if s.contains(want) {
                    found = Some(s);
                    break;
                }
            }
            found.unwrap_or_else(|| panic!("{want:?} never shown:\n{}", tmux.screen()))
        };
        assert_intact(&screen);
    }
    // The raw probe section of the modprobe.d file: its comment, escaped.
    let mut seen = None;
    for _ in 0..300 {
        tmux.keys(&["j"]);
        let s = tmux.screen();
        if s.contains("# comment \\u{fffd}") {
            seen = Some(s);
            break;
        }
    }
    let screen = seen.unwrap_or_else(|| panic!("raw section not shown:\n{}", tmux.screen()));
    assert_intact(&screen);
    let line = screen.lines().find(|l| l.contains("# comment")).unwrap();
    assert!(
        line.contains(
            "# comment \\u{fffd}\\u{fffd}\\x00NUL \\x1b[2J\\x1b[31;5mRED\\x1b]0;owned\\x07\\x1b]8;;http://x/\\x07link\\x1b]8;;\\x07\\x9b1m\\u{202e}gnp.exe"
        ),
        "{line}"
    );
    assert_ne!(pane_title(&tmux), "owned");

    tmux.keys(&["q"]);
    tmux.wait_for("EXITED-0");
}

/// Escapes are unambiguous (docs/domain.md, "Trust model"): a node named with a literal
/// backslash, `gpu\x1b` (seven characters), and a node named `gpu` + ESC never look alike in
/// the table, the CSV or the TUI: the backslash is shown doubled, the ESC as `\x1b`.
#[test]
fn a_literal_backslash_and_an_escape_never_look_alike() {
    let literal = "gpu\\x1b";
    let escape = "gpu\x1b";
    for (name, want) in [(literal, "gpu\\\\x1b"), (escape, "gpu\\x1b")] {
        let (_t, node) = hostile_node(Some(name.as_bytes()));
        let json: serde_json::Value =
            serde_json::from_slice(&snapshot(&node, "json").stdout).unwrap();
        assert_eq!(json["nodes"][0]["name"], name, "JSON keeps the exact name");
        let table = assert_no_raw("table", &snapshot(&node, "table").stdout);
        let cell = table.lines().nth(1).unwrap().split(' ').next().unwrap();
        assert_eq!(cell, want, "{table}");
        let csv = snapshot(&node, "csv");
        let mut rdr = csv::Reader::from_reader(csv.stdout.as_slice());
        let row = rdr.records().next().unwrap().unwrap();
        assert_eq!(&row[0], want);

        let home = tempfile::tempdir().unwrap();
        let command = format!(
            "env -i PATH={bin}:/usr/bin:/bin TERM=xterm-256color HOME={home} {exe} tui --local --root {root} --config {config}; echo EXITED-$?; sleep 30",
            bin = node.join("bin").display(),
            home = home.path().display(),
            exe = env!("CARGO_BIN_EXE_gpufleet"),
            root = node.join("root").display(),
            config = manifest().join("config/config.example.toml").display(),
        );
        let tmux = Tmux::start(&command);
        let screen = tmux.wait_for("scanned 1/1");
        let row = screen
            .lines()
            .find(|l| l.contains("gpu\\"))
            .unwrap_or_else(|| panic!("no row:\n{screen}"));
        let cell = row
            .split_whitespace()
            .find(|w| w.starts_with("gpu\\"))
            .unwrap();
        assert_eq!(cell, want, "{row}");
        tmux.keys(&["q"]);
        tmux.wait_for("EXITED-0");
    }
}
