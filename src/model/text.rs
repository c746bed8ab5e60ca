//! Text from a node on its way to a person (README.md, "Trust model"; the character classes are
//! Unicode's: General_Category from UAX #44, East_Asian_Width from UAX #11, as the
//! unicode-general-category and unicode-width crates give them).
//!
//! Three outputs, three rules:
//! - [`terminal_safe`] (table, CSV, and under [`screen_safe`]): the characters that can change
//!   what a terminal shows beyond their own cell are written as escapes: C0 and C1 controls and
//!   DEL (general category `Cc`, so every escape sequence loses its ESC or CSI), and Unicode
//!   format and separator characters (`Cf`: bidi marks, embeddings, overrides and isolates
//!   U+200E/F, U+202A–U+202E, U+2066–U+2069, U+061C, zero-width U+200B–U+200D, U+FEFF, soft
//!   hyphen, tags; `Zl` U+2028; `Zp` U+2029).
//! - [`screen_safe`] (the TUI, which lays out cells itself): the above, and every character
//!   whose width terminals disagree on, so a row never shifts the columns after it.
//! - [`write_json`]: exact values; the same characters as [`terminal_safe`] (less the C0 ones,
//!   which JSON itself escapes) written as `\uXXXX` escapes, which mean the same characters.
//!
//! Escapes: `\t`, `\n`, `\r`; `\xHH` below U+0100; `\u{H..}` above. In the two terminal
//! outputs a backslash of the text itself is written `\\`, so an escape is never ambiguous: a
//! name of the four characters `a\x1b` shows as `a\\x1b`, a name `a` + ESC as `a\x1b`. Escape
//! once, where text reaches the terminal: escaping escaped text doubles its backslashes.
//!
//! [`clip`], [`clip_with`] and [`clip_middle`] cut text to a number of characters (table
//! cells, the matrix).

use std::borrow::Cow;

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Whether `c` must never reach a terminal raw: general category `Cc` (C0, DEL, C1), `Cf`
/// (format), `Zl` (line separator) or `Zp` (paragraph separator).
pub fn is_unsafe(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

/// Whether terminals may disagree on the cells `c` takes, so the TUI shows it escaped. The rule:
/// - its width is unknown or zero (`UnicodeWidthChar::width` is `None` or 0: controls,
///   combining and other zero-width marks, variation selectors such as U+FE0F that turn a
///   character into an emoji presentation sequence, Hangul V/T jamo), or
/// - it is East Asian Ambiguous or otherwise context-dependent (`width` differs from
///   `width_cjk`: U+00AE, U+2026, U+FFFD, private use, …), or
/// - it is a combining mark (`Mn`, `Me`), a private-use or unassigned code point (`Co`, `Cn`:
///   the terminal's Unicode tables may be older or newer), a regional indicator
///   (U+1F1E6–U+1F1FF: flags take one or two cells depending on the terminal), or an emoji
///   modifier (U+1F3FB–U+1F3FF: merged into the emoji before it, or not).
///
/// A pair of characters that unicode-width counts as a ligature (Arabic lam-alef, Lisu tone
/// letters) is caught by [`screen_safe`], which looks at neighbours.
pub fn is_width_unstable(c: char) -> bool {
    let w = c.width();
    matches!(w, None | Some(0))
        || w != c.width_cjk()
        || matches!(
            get_general_category(c),
            GeneralCategory::NonspacingMark
                | GeneralCategory::EnclosingMark
                | GeneralCategory::PrivateUse
                | GeneralCategory::Unassigned
        )
        || matches!(c, '\u{1f1e6}'..='\u{1f1ff}' | '\u{1f3fb}'..='\u{1f3ff}')
}

/// Whether [`terminal_safe`] writes `c` other than as itself: [`is_unsafe`], or a backslash.
fn escaped(c: char) -> bool {
    c == '\\' || is_unsafe(c)
}

fn push_escape(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
        c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

/// `s` with every [`is_unsafe`] character written as an escape (`\x1b`, `\u{202e}`), so no
/// escape sequence, bidi reordering or line break from a node reaches the terminal, and each
/// backslash written `\\` (so `\x1b` in the output is always an escaped ESC). Borrowed when `s`
/// is clean. For the table and CSV output.
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    if !s.chars().any(escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if escaped(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether unicode-width gives the pair `a b` a width other than the sum of its characters'
/// (a ligature, in either context).
fn ligature(a: char, b: char) -> bool {
    let mut buf = [0u8; 8];
    let n = a.encode_utf8(&mut buf).len();
    let m = b.encode_utf8(&mut buf[n..]).len();
    let pair = std::str::from_utf8(&buf[..n + m]).unwrap_or("");
    let sum = |f: fn(char) -> Option<usize>| f(a).unwrap_or(0) + f(b).unwrap_or(0);
    pair.width() != sum(UnicodeWidthChar::width)
        || pair.width_cjk() != sum(UnicodeWidthChar::width_cjk)
}

/// `s` as the TUI may draw it: every [`is_unsafe`] or [`is_width_unstable`] character, and the
/// second character of a ligature pair, written as an escape, and a backslash as `\\` (as
/// [`terminal_safe`]). What is left takes exactly one or two cells per character in every
/// terminal, as ratatui counts them. Borrowed when clean.
pub fn screen_safe(s: &str) -> Cow<'_, str> {
    let bad = |c: char| escaped(c) || is_width_unstable(c);
    let mut prev: Option<char> = None;
    let clean = s.chars().all(|c| {
        let ok = !bad(c) && !prev.is_some_and(|p| ligature(p, c));
        prev = Some(c);
        ok
    });
    if clean {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut prev: Option<char> = None;
    for c in s.chars() {
        if bad(c) || prev.is_some_and(|p| ligature(p, c)) {
            push_escape(&mut out, c);
            prev = None;
        } else {
            out.push(c);
            prev = Some(c);
        }
    }
    Cow::Owned(out)
}

/// Writes `value` as JSON to `out` (pretty: two-space indents, as `serde_json::to_writer_pretty`)
/// with DEL, the C1 controls, and the `Cf`, `Zl` and `Zp` characters (which serde_json leaves
/// raw, as JSON allows) written as `\uXXXX` escapes (UTF-16 surrogate pairs above U+FFFF,
/// RFC 8259 section 7). They can only occur inside JSON strings, where the escape means the same
/// character, so every value is unchanged. Streams: nothing but `out`'s own buffer is held, so a
/// 10,000-node snapshot is never one string in memory.
///
/// Errors: `out`'s write errors; a value serde cannot write as JSON (a map with non-string
/// keys), as an `io::Error`.
pub fn write_json<W: std::io::Write, T: serde::Serialize + ?Sized>(
    out: W,
    value: &T,
    pretty: bool,
) -> std::io::Result<()> {
    let result = if pretty {
        let mut ser = serde_json::Serializer::with_formatter(
            out,
            SafeFormatter(serde_json::ser::PrettyFormatter::new()),
        );
        value.serialize(&mut ser)
    } else {
        let mut ser = serde_json::Serializer::with_formatter(
            out,
            SafeFormatter(serde_json::ser::CompactFormatter),
        );
        value.serialize(&mut ser)
    };
    result.map_err(std::io::Error::from)
}

/// [`write_json`] into a string (for the small documents printed whole).
///
/// Errors: as [`write_json`] (a `String` itself never fails).
pub fn json_string<T: serde::Serialize + ?Sized>(
    value: &T,
    pretty: bool,
) -> std::io::Result<String> {
    let mut buf = Vec::new();
    write_json(&mut buf, value, pretty)?;
    String::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// A serde_json formatter (`F`: pretty or compact) whose string fragments have the
/// [`is_unsafe`] characters at or above DEL escaped (serde_json escapes those below U+0020).
struct SafeFormatter<F>(F);

/// Delegates the layout methods to the inner formatter.
macro_rules! delegate {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $name<W: ?Sized + std::io::Write>(&mut self, w: &mut W $(, $arg: $ty)*) -> std::io::Result<()> {
            self.0.$name(w $(, $arg)*)
        }
    )*};
}

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for SafeFormatter<F> {
    delegate! {
        begin_array();
        end_array();
        begin_array_value(first: bool);
        end_array_value();
        begin_object();
        end_object();
        begin_object_key(first: bool);
        end_object_key();
        begin_object_value();
        end_object_value();
    }

    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let raw = |c: char| c as u32 >= 0x7f && is_unsafe(c);
        let mut rest = fragment;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| raw(c)) {
            w.write_all(&rest.as_bytes()[..at])?;
            for unit in c.encode_utf16(&mut [0u16; 2]) {
                write!(w, "\\u{unit:04x}")?;
            }
            rest = &rest[at + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }
}

/// `s` cut to `max` characters, the last one an ellipsis when cut.
pub fn clip(s: &str, max: usize) -> String {
    clip_with(s, max, '…')
}

/// `s` cut to `max` characters by its middle, an ellipsis where the middle was, so that both
/// ends stay (`a100-prop…550-mismatch`); `s` itself when it fits.
pub fn clip_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max || max < 3 {
        return clip(s, max.max(1));
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
}

/// `s` cut to `max` characters (`max` ≥ 1), the last one `mark` when cut.
pub fn clip_with(s: &str, max: usize, mark: char) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push(mark);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_middle_keeps_both_ends() {
        assert_eq!(clip_middle("gpu-a01-07", 20), "gpu-a01-07");
        assert_eq!(
            clip_middle("a100-proprietary-550-mismatch", 20),
            "a100-prop…0-mismatch"
        );
        assert_eq!(
            clip_middle("a100-proprietary-550-mismatch", 20)
                .chars()
                .count(),
            20
        );
        assert_eq!(clip_middle("abcdef", 2), "a…");
    }

    /// Every class the trust model lists, and each shown escaped by both terminal outputs.
    const LISTED: &[(&str, char)] = &[
        ("NUL", '\0'),
        ("ESC", '\x1b'),
        ("BEL", '\x07'),
        ("BS", '\x08'),
        ("DEL", '\x7f'),
        ("C1 NEL", '\u{85}'),
        ("C1 CSI", '\u{9b}'),
        ("C1 OSC", '\u{9d}'),
        ("ALM", '\u{61c}'),
        ("ZWSP", '\u{200b}'),
        ("ZWNJ", '\u{200c}'),
        ("ZWJ", '\u{200d}'),
        ("LRM", '\u{200e}'),
        ("RLM", '\u{200f}'),
        ("LRE", '\u{202a}'),
        ("RLE", '\u{202b}'),
        ("PDF", '\u{202c}'),
        ("LRO", '\u{202d}'),
        ("RLO", '\u{202e}'),
        ("LRI", '\u{2066}'),
        ("RLI", '\u{2067}'),
        ("FSI", '\u{2068}'),
        ("PDI", '\u{2069}'),
        ("LS", '\u{2028}'),
        ("PS", '\u{2029}'),
        ("BOM", '\u{feff}'),
        ("soft hyphen", '\u{ad}'),
        ("word joiner", '\u{2060}'),
        ("interlinear annotation", '\u{fff9}'),
        ("tag", '\u{e0041}'),
    ];

    #[test]
    fn every_listed_class_is_escaped() {
        for (what, c) in LISTED {
            let s = format!("a{c}b");
            for (out, f) in [("terminal", terminal_safe(&s)), ("screen", screen_safe(&s))] {
                assert!(!f.contains(*c), "{out}: {what} U+{:04X} raw", *c as u32);
                assert!(f.starts_with('a') && f.ends_with('b'), "{out}: {what}: {f}");
                assert!(f.len() > 2, "{out}: {what} dropped instead of escaped");
            }
        }
    }

    #[test]
    fn escapes_reach_the_terminal_escaped() {
        assert!(matches!(terminal_safe("NVIDIA H200"), Cow::Borrowed(_)));
        assert_eq!(
            terminal_safe("evil\x1b]0;pwned\x07"),
            "evil\\x1b]0;pwned\\x07"
        );
        assert_eq!(terminal_safe("\x1b[2J\x1b[31m"), "\\x1b[2J\\x1b[31m");
        assert_eq!(terminal_safe("a\u{9b}31m"), "a\\x9b31m");
        assert_eq!(terminal_safe("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(terminal_safe("l1\nl2\tx\r"), "l1\\nl2\\tx\\r");
        assert_eq!(terminal_safe("\0"), "\\x00");
        assert_eq!(terminal_safe("a\u{2028}b\u{2029}"), "a\\u{2028}b\\u{2029}");
        assert_eq!(terminal_safe("\u{feff}gpu"), "\\u{feff}gpu");
        assert_eq!(terminal_safe("\x7f"), "\\x7f");
        // A backslash of the text is doubled: the four characters `a\x1b` and `a` + ESC differ.
        assert_eq!(terminal_safe("a\\x1b"), "a\\\\x1b");
        assert_eq!(terminal_safe("a\x1b"), "a\\x1b");
        assert_eq!(terminal_safe("C:\\"), "C:\\\\");
        // Ordinary text, wide or not, stays as it is in the table.
        assert_eq!(
            terminal_safe("Ubuntu 24.04 LTS · 日本 ®"),
            "Ubuntu 24.04 LTS · 日本 ®"
        );
    }

    #[test]
    fn the_screen_escapes_characters_of_unstable_width() {
        // Unchanged: ASCII, Latin letters, CJK (two cells everywhere).
        for s in ["NVIDIA H200", "café Ünïcode", "日本語ノード", "😀"] {
            assert!(matches!(screen_safe(s), Cow::Borrowed(_)), "{s}");
        }
        let cases: &[(&str, &str)] = &[
            // East Asian Ambiguous: one cell, or two in a CJK terminal.
            ("A100®", "A100\\xae"),
            ("x…", "x\\u{2026}"),
            ("\u{fffd}(", "\\u{fffd}("),
            // Combining marks (zero width) and an enclosing mark.
            ("e\u{301}", "e\\u{301}"),
            ("1\u{20e3}", "1\\u{20e3}"),
            // Emoji presentation and text presentation selectors.
            ("\u{2764}\u{fe0f}", "\u{2764}\\u{fe0f}"),
            ("\u{263a}\u{fe0e}", "\u{263a}\\u{fe0e}"),
            // Emoji modifier sequence, ZWJ sequence, flag.
            ("\u{1f44d}\u{1f3fd}", "\u{1f44d}\\u{1f3fd}"),
            ("\u{1f468}\u{200d}\u{1f4bb}", "\u{1f468}\\u{200d}\u{1f4bb}"),
            ("\u{1f1e9}\u{1f1ea}", "\\u{1f1e9}\\u{1f1ea}"),
            // Private use, unassigned, Hangul vowel jamo.
            ("\u{e000}", "\\u{e000}"),
            ("\u{10ffff}", "\\u{10ffff}"),
            ("\u{1100}\u{1161}", "\u{1100}\\u{1161}"),
            // Arabic lam-alef: unicode-width counts the pair as one cell.
            ("\u{644}\u{627}", "\u{644}\\u{627}"),
            // And everything terminal_safe escapes.
            ("\x1b[0m\u{202e}", "\\x1b[0m\\u{202e}"),
            // A backslash of the text, doubled as in the table.
            ("a\\x1b", "a\\\\x1b"),
        ];
        for (raw, want) in cases {
            assert_eq!(screen_safe(raw), *want, "{raw:?}");
        }
        // What is left has one width for every terminal.
        for (raw, _) in cases {
            let s = screen_safe(raw);
            assert_eq!(s.width(), s.width_cjk(), "{raw:?}");
            let per_char: usize = s.chars().map(|c| c.width().unwrap()).sum();
            assert_eq!(s.width(), per_char, "{raw:?}");
        }
    }

    #[test]
    fn json_keeps_its_meaning() {
        let value = "a\u{202e}b\u{85}\x7f\u{2028}\u{feff}\u{e0041}\x1b";
        let safe = json_string(&value, false).unwrap();
        assert_eq!(
            safe,
            "\"a\\u202eb\\u0085\\u007f\\u2028\\ufeff\\udb40\\udc41\\u001b\""
        );
        assert_eq!(serde_json::from_str::<String>(&safe).unwrap(), value);
        for (_, c) in LISTED {
            let safe = json_string(&c.to_string(), true).unwrap();
            assert!(!safe.contains(*c), "U+{:04X}", *c as u32);
            assert_eq!(
                serde_json::from_str::<String>(&safe).unwrap(),
                c.to_string()
            );
        }
        // Everything else is left to serde_json: wide, ambiguous and accented text stays raw.
        let plain = serde_json::to_string(&"日本 ® é").unwrap();
        assert_eq!(json_string(&"日本 ® é", false).unwrap(), plain);
        // Keys are strings too, and the pretty layout is serde_json's.
        let map = std::collections::BTreeMap::from([("k\u{85}", vec![1, 2])]);
        assert_eq!(
            json_string(&map, true).unwrap(),
            "{\n  \"k\\u0085\": [\n    1,\n    2\n  ]\n}"
        );
    }
}
