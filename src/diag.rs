//! Diagnostics for people: where in a file (line and column), "did you mean" suggestions, and
//! TOML errors formatted `file:line:column: message`. A leaf module: it depends on nothing in the
//! crate, so config, inventory, themes and keymaps all use it without importing each other.

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The line starts of one text, for many line lookups: [`LineIndex::line`] is a binary search,
/// where [`line_col`] counts the newlines before the offset (a file of N items looked up item by
/// item would cost O(N²)).
#[derive(Debug, Clone)]
pub struct LineIndex {
    /// Byte offsets of every `\n` of the text, in order.
    newlines: Vec<usize>,
}

impl LineIndex {
    /// Indexes `text`.
    pub fn new(text: &str) -> LineIndex {
        LineIndex {
            newlines: text
                .bytes()
                .enumerate()
                .filter_map(|(i, b)| (b == b'\n').then_some(i))
                .collect(),
        }
    }

    /// 1-based line of byte `offset` (the same as `line_col(text, offset).0`).
    pub fn line(&self, offset: usize) -> usize {
        self.newlines.partition_point(|&nl| nl < offset) + 1
    }
}

/// The closest of `candidates` to `word`, if it is close enough to be a likely typo
/// (Damerau-Levenshtein distance at most 2, or a third of the candidate's length).
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Adds "did you mean `x`?" to serde's "unknown field `y`, expected one of `a`, `b`" messages.
pub fn with_suggestion(message: &str) -> String {
    let msg = message.trim();
    let Some(rest) = msg.strip_prefix("unknown field `") else {
        return msg.to_string();
    };
    let Some((field, tail)) = rest.split_once('`') else {
        return msg.to_string();
    };
    let expected: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
    match closest(field, expected) {
        Some(s) => format!("{msg}; did you mean `{s}`?"),
        None => msg.to_string(),
    }
}

/// A TOML parse or type error as `origin:line:column: message` (with a suggestion for an
/// unknown key). `origin` is the file path, or a name such as `theme dark`.
pub fn toml_error(origin: &str, text: &str, e: &toml::de::Error) -> String {
    let (line, col) = e.span().map_or((1, 1), |s| line_col(text, s.start));
    format!("{origin}:{line}:{col}: {}", with_suggestion(e.message()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_index_agrees_with_line_col() {
        let text = "a\nbc\n\né\nlast";
        let idx = LineIndex::new(text);
        for off in 0..=text.len() + 2 {
            if text.is_char_boundary(off.min(text.len())) {
                assert_eq!(idx.line(off), line_col(text, off).0, "offset {off}");
            }
        }
        assert_eq!(LineIndex::new("").line(0), 1);
    }

    #[test]
    fn positions_suggestions_and_toml_errors() {
        assert_eq!(line_col("ab\ncd\n", 4), (2, 2));
        assert_eq!(line_col("é\nx", 1), (1, 1), "inside a character: its start");
        assert_eq!(line_col("x", 99), (1, 2));
        assert_eq!(
            closest("concurency", ["concurrency", "deadline"]),
            Some("concurrency")
        );
        assert_eq!(closest("zzz", ["concurrency"]), None);
        assert_eq!(
            with_suggestion("unknown field `hots`, expected one of `host`, `port`"),
            "unknown field `hots`, expected one of `host`, `port`; did you mean `host`?"
        );
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct T {
            host: String,
        }
        let text = "\nhots = 1\n";
        let e = toml::from_str::<T>(text).unwrap_err();
        let m = toml_error("inv.toml", text, &e);
        assert!(m.starts_with("inv.toml:2:1: unknown field `hots`"), "{m}");
        assert!(m.ends_with("did you mean `host`?"), "{m}");
    }
}
