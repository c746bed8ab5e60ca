//! Text from a node on its way to a terminal (architecture.md decision 5): control characters,
//! escape sequences and bidirectional overrides are shown escaped, never emitted raw.

use std::borrow::Cow;

fn is_dangerous(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every control character (C0, DEL, C1), and every bidi control, written as an escape
/// (`\x1b`, `\u{202e}`), so ESC sequences cannot reach the terminal. Borrowed when `s` is clean.
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_dangerous) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if is_dangerous(c) && (c as u32) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if is_dangerous(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Serialized JSON with the invisible bidirectional controls (which serde_json leaves raw, as
/// JSON allows) written as `\uXXXX` escapes. They can only occur inside JSON strings, where the
/// escape means the same character, so the document's meaning is unchanged.
pub fn json_safe(json: String) -> String {
    if !json.chars().any(|c| c as u32 > 0x7f && is_dangerous(c)) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 12);
    for c in json.chars() {
        if c as u32 > 0x7f && is_dangerous(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_reach_the_terminal_escaped() {
        assert_eq!(terminal_safe("NVIDIA H200"), "NVIDIA H200");
        assert_eq!(
            terminal_safe("evil\x1b]0;pwned\x07"),
            "evil\\x1b]0;pwned\\x07"
        );
        assert_eq!(terminal_safe("a\u{9b}31m"), "a\\x9b31m");
        assert_eq!(terminal_safe("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(terminal_safe("l1\nl2"), "l1\\nl2");
        assert!(!terminal_safe("\x7f").contains('\x7f'));
    }

    #[test]
    fn json_keeps_its_meaning() {
        let raw = serde_json::to_string(&"a\u{202e}b\u{85}").unwrap();
        let safe = json_safe(raw);
        assert_eq!(safe, "\"a\\u202eb\\u0085\"");
        assert_eq!(
            serde_json::from_str::<String>(&safe).unwrap(),
            "a\u{202e}b\u{85}"
        );
    }
}
