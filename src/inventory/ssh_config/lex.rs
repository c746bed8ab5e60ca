//! One ssh_config line split as OpenSSH 9.2's readconf.c splits it: the keyword ends at
//! whitespace or one `=` (`strdelim`), the arguments are `argv_split` words (blanks separate,
//! `"…"` and `'…'` quote, `\"` `\'` `\\` and `\ ` escape, a `#` at the start of a word ends the
//! line). `ProxyCommand` and `ProxyJump` take the rest of the line as written; `Match` reads its
//! criteria with `strdelim` (blanks or one `=` separate, a `"…"` span is one word).

/// A line's keyword (as written) and what follows it (leading blanks and `=` skipped), or
/// `None` for a blank or comment line.
pub(super) fn keyword(line: &str) -> Option<(&str, &str)> {
    let line = line.trim_end_matches([' ', '\t', '\r', '\n', '\x0c']);
    let line = line.trim_start_matches([' ', '\t', '\r', '\n']);
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let end = line
        .find([' ', '\t', '\r', '\n', '='])
        .unwrap_or(line.len());
    let kw = &line[..end];
    let mut rest = &line[end..];
    // strdelim: blanks, then at most one `=` (when the keyword did not end at it), then blanks.
    let eq_first = rest.starts_with('=');
    if eq_first {
        rest = &rest[1..];
    }
    rest = rest.trim_start_matches([' ', '\t', '\r', '\n']);
    if !eq_first && rest.starts_with('=') {
        rest = rest[1..].trim_start_matches([' ', '\t', '\r', '\n']);
    }
    Some((kw, rest))
}

/// `argv_split(rest, terminate_on_comment = 1)`. Errors: an unclosed quote (OpenSSH: "invalid
/// quotes").
pub(super) fn words(s: &str) -> Result<Vec<String>, String> {
    let b: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == ' ' || b[i] == '\t' {
            i += 1;
            continue;
        }
        if b[i] == '#' {
            break;
        }
        let mut arg = String::new();
        let mut quote: Option<char> = None;
        while i < b.len() {
            let c = b[i];
            if c == '\\' {
                match b.get(i + 1) {
                    Some(&n)
                        if n == '\'' || n == '"' || n == '\\' || (quote.is_none() && n == ' ') =>
                    {
                        arg.push(n);
                        i += 1;
                    }
                    _ => arg.push(c),
                }
            } else if quote.is_none() && (c == ' ' || c == '\t') {
                break;
            } else if quote.is_none() && (c == '"' || c == '\'') {
                quote = Some(c);
            } else if quote == Some(c) {
                quote = None;
            } else {
                arg.push(c);
            }
            i += 1;
        }
        if quote.is_some() {
            return Err("invalid quotes (a quote is not closed)".into());
        }
        out.push(arg);
    }
    Ok(out)
}

/// `Match` criteria words as `strdelim` gives them: blanks or one `=` separate; a word starting
/// with `"` runs to the next `"`. A word starting with `#` ends the line.
pub(super) fn match_words(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = s.trim_start_matches([' ', '\t', '\r', '\n']);
    while !rest.is_empty() {
        if rest.starts_with('#') {
            break;
        }
        if let Some(q) = rest.strip_prefix('"') {
            let end = q
                .find('"')
                .ok_or("invalid quotes (a quote is not closed)")?;
            out.push(q[..end].to_string());
            rest = &q[end + 1..];
        } else {
            let end = rest
                .find([' ', '\t', '\r', '\n', '=', '"'])
                .unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = &rest[end..];
            if let Some(r) = rest.strip_prefix('=') {
                rest = r;
            }
        }
        rest = rest.trim_start_matches([' ', '\t', '\r', '\n']);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_as_readconf_splits_them() {
        assert_eq!(keyword("  Port=22 "), Some(("Port", "22")));
        assert_eq!(keyword("Port = 22"), Some(("Port", "22")));
        assert_eq!(keyword("Port\t22\x0c"), Some(("Port", "22")));
        assert_eq!(keyword("# Port 22"), None);
        assert_eq!(keyword("   "), None);
        assert_eq!(
            words(r#"a "b c" 'd e' f\ g h\"i #j k"#).unwrap(),
            ["a", "b c", "d e", "f g", "h\"i"]
        );
        assert_eq!(words("22#x").unwrap(), ["22#x"]);
        assert!(words("\"open").is_err());
        assert_eq!(
            match_words(r#"host a,b exec "test %h = x" !user=root # c"#).unwrap(),
            ["host", "a,b", "exec", "test %h = x", "!user", "root"]
        );
    }
}
