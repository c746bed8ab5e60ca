//! An INI value as Ansible's INI plugin types it (ansible-core 2.19 `InventoryModule._parse_value`:
//! Python's `ast.literal_eval`, else the text as written), for host-line and `:vars` values
//! alike. What literal_eval accepts: numbers (`1_000`, `0x10`, `0o7`, `0b1`, `1e3`, `.5`, with
//! unary `+`/`-`), strings (`'…'`, `"…"`, triple-quoted, `r`/`u` prefixes, Python's escapes,
//! adjacent ones joined), `True`, `False`, `None`, and lists, tuples, dicts and sets of those.
//! A leading blank is skipped, a trailing `# comment` allowed. Anything else (a bare word,
//! `010`, `{k: 1}` with a name in it) is the text itself. Numbers come back as Python prints
//! them in JSON (`1000`, `1000.0`, `1e+16`), as `ansible-inventory --list` shows them.

/// A typed INI value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Lit {
    /// A string, a number as Python prints it, or `true`/`false`.
    Text(String),
    /// `None`.
    Null,
    /// A list, tuple, dict or set: not one value.
    Container,
}

/// Types `v` as Ansible does ([`Lit`]).
pub(super) fn literal(v: &str) -> Lit {
    let t = v.trim_start_matches([' ', '\t']);
    let mut p = Parser {
        s: t.as_bytes(),
        i: 0,
    };
    match p.expr(0) {
        Some(l) if p.end() => l,
        _ => Lit::Text(v.to_string()),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// Blanks (and, inside brackets, line breaks and comments).
    fn blanks(&mut self, depth: usize) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\x0c' => self.i += 1,
                b'\n' | b'\r' if depth > 0 => self.i += 1,
                b'\\' if self.s.get(self.i + 1) == Some(&b'\n') => self.i += 2,
                b'#' if depth > 0 => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.i += 1;
                    }
                }
                _ => break,
            }
        }
    }

    /// Whether only blanks, line breaks and a comment are left.
    fn end(&mut self) -> bool {
        self.blanks(0);
        if self.peek() == Some(b'#') {
            while self.peek().is_some_and(|c| c != b'\n') {
                self.i += 1;
            }
        }
        while matches!(self.peek(), Some(b'\n' | b'\r' | b' ' | b'\t')) {
            self.i += 1;
        }
        self.i == self.s.len()
    }

    fn expr(&mut self, depth: usize) -> Option<Lit> {
        if depth > 100 {
            return None;
        }
        self.blanks(depth);
        let c = self.peek()?;
        match c {
            b'[' | b'(' | b'{' => self.container(c, depth),
            b'+' | b'-' => {
                let mut neg = false;
                while let Some(c @ (b'+' | b'-')) = self.peek() {
                    neg ^= c == b'-';
                    self.i += 1;
                    self.blanks(depth);
                }
                let n = self.number()?;
                // `-0` is the int 0; `-0.0` stays negative, as Python prints it.
                Some(Lit::Text(if neg && n != "0" { format!("-{n}") } else { n }))
            }
            b'0'..=b'9' | b'.' => self.number().map(Lit::Text),
            _ => {
                if let Some(s) = self.strings(depth) {
                    return Some(Lit::Text(s));
                }
                let start = self.i;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                {
                    self.i += 1;
                }
                match &self.s[start..self.i] {
                    b"True" => Some(Lit::Text("true".into())),
                    b"False" => Some(Lit::Text("false".into())),
                    b"None" => Some(Lit::Null),
                    _ => None,
                }
            }
        }
    }

    /// `[…]`, `(…)`, `{…}`: every element a literal; `(x)` is x itself.
    fn container(&mut self, open: u8, depth: usize) -> Option<Lit> {
        let close = match open {
            b'[' => b']',
            b'(' => b')',
            _ => b'}',
        };
        self.i += 1;
        let mut n = 0;
        let mut trailing_comma = false;
        let mut first = None;
        loop {
            self.blanks(depth + 1);
            if self.peek() == Some(close) {
                self.i += 1;
                break;
            }
            let e = self.expr(depth + 1)?;
            if open == b'{' {
                // A dict's `key: value` (a set has no colons; mixing them is a syntax error).
                self.blanks(depth + 1);
                if self.peek() == Some(b':') {
                    self.i += 1;
                    self.expr(depth + 1)?;
                }
            }
            n += 1;
            first.get_or_insert(e);
            self.blanks(depth + 1);
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    trailing_comma = true;
                }
                c if c == close => {
                    trailing_comma = false;
                }
                _ => return None,
            }
        }
        if open == b'(' && n == 1 && !trailing_comma {
            return first;
        }
        Some(Lit::Container)
    }

    /// Python number literals (not complex), as Python prints the value.
    fn number(&mut self) -> Option<String> {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
            || (matches!(self.peek(), Some(b'+' | b'-'))
                && matches!(self.s.get(self.i.wrapping_sub(1)), Some(b'e' | b'E'))
                && !self.s[start..self.i].starts_with(b"0x")
                && !self.s[start..self.i].starts_with(b"0X"))
        {
            self.i += 1;
        }
        let tok = std::str::from_utf8(&self.s[start..self.i]).ok()?;
        number_value(tok)
    }

    /// One or more adjacent string literals, joined.
    fn strings(&mut self, depth: usize) -> Option<String> {
        let mut out: Option<String> = None;
        loop {
            let save = self.i;
            match self.string() {
                Some(s) => out.get_or_insert_with(String::new).push_str(&s),
                None => {
                    self.i = save;
                    return out;
                }
            }
            let save = self.i;
            self.blanks(depth);
            if !matches!(self.peek(), Some(b'\'' | b'"' | b'r' | b'R' | b'u' | b'U')) {
                self.i = save;
                return out;
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        let mut raw = false;
        match self.peek()? {
            b'r' | b'R' => {
                raw = true;
                self.i += 1;
            }
            b'u' | b'U' => self.i += 1,
            _ => {}
        }
        let q = self.peek().filter(|c| *c == b'\'' || *c == b'"')?;
        let triple = self.s[self.i..].starts_with(&[q, q, q]);
        self.i += if triple { 3 } else { 1 };
        let text = std::str::from_utf8(&self.s[self.i..]).ok()?;
        let mut out = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            if c as u32 == q as u32 {
                if !triple {
                    self.i += at + 1;
                    return Some(out);
                }
                if text[at..].starts_with(&String::from_utf8(vec![q; 3]).ok()?) {
                    self.i += at + 3;
                    return Some(out);
                }
                out.push(c);
                continue;
            }
            if c == '\n' && !triple {
                return None;
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let (_, e) = chars.next()?;
            if raw {
                out.push('\\');
                out.push(e);
                continue;
            }
            match e {
                '\n' => {}
                '\\' | '\'' | '"' => out.push(e),
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'a' => out.push('\x07'),
                'b' => out.push('\x08'),
                'f' => out.push('\x0c'),
                'v' => out.push('\x0b'),
                '0'..='7' => {
                    let mut n = e.to_digit(8)?;
                    for _ in 0..2 {
                        match chars.peek() {
                            Some((_, d @ '0'..='7')) => {
                                n = n * 8 + d.to_digit(8)?;
                                chars.next();
                            }
                            _ => break,
                        }
                    }
                    out.push(char::from_u32(n)?);
                }
                'x' | 'u' | 'U' => {
                    let len = match e {
                        'x' => 2,
                        'u' => 4,
                        _ => 8,
                    };
                    let mut n = 0u32;
                    for _ in 0..len {
                        n = n * 16 + chars.next()?.1.to_digit(16)?;
                    }
                    out.push(char::from_u32(n)?);
                }
                // `\N{…}` names: not read here (the value stays text).
                'N' => return None,
                e => {
                    out.push('\\');
                    out.push(e);
                }
            }
        }
        None
    }
}

/// The value of a Python int or float literal as Python prints it; `None` if it is not one.
fn number_value(tok: &str) -> Option<String> {
    let digits = |s: &str, radix: u32| {
        !s.is_empty()
            && !s.starts_with('_')
            && !s.ends_with('_')
            && !s.contains("__")
            && s.chars().all(|c| c == '_' || c.is_digit(radix))
    };
    let lower = tok.to_ascii_lowercase();
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = lower.strip_prefix(prefix) {
            let rest = rest.strip_prefix('_').unwrap_or(rest);
            if !digits(rest, radix) {
                return None;
            }
            return u128::from_str_radix(&rest.replace('_', ""), radix)
                .ok()
                .map(|n| n.to_string());
        }
    }
    let (mantissa, exp) = match lower.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (lower.as_str(), None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    if exp.is_none() && frac.is_none() {
        if !digits(int, 10) {
            return None;
        }
        let plain = int.replace('_', "");
        // Python refuses leading zeros in a non-zero decimal integer (`010`).
        if plain.len() > 1 && plain.starts_with('0') {
            return plain.chars().all(|c| c == '0').then(|| "0".to_string());
        }
        return Some(plain);
    }
    let int_ok = int.is_empty() || digits(int, 10);
    let frac_ok = frac.is_none_or(|f| f.is_empty() || digits(f, 10));
    if !int_ok || !frac_ok || (int.is_empty() && frac.is_none_or(str::is_empty)) {
        return None;
    }
    if let Some(e) = exp {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        if !digits(e, 10) {
            return None;
        }
    }
    let x: f64 = lower.replace('_', "").parse().ok()?;
    Some(python_float(x))
}

/// `repr(float)` of Python 3: the shortest digits that read back, fixed notation when the
/// decimal point falls within -4 < point <= 16 (with `.0` for a whole number), else
/// `d.ddde+XX`. Infinity is `Infinity`, as Python's JSON writes it.
pub(super) fn python_float(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sci = format!("{:e}", x.abs());
    let (m, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let d: String = m.chars().filter(char::is_ascii_digit).collect();
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let point = e + 1;
    let body = if -4 < point && point <= 16 {
        if point <= 0 {
            format!("0.{}{d}", "0".repeat((-point) as usize))
        } else if point as usize >= d.len() {
            format!("{d}{}.0", "0".repeat(point as usize - d.len()))
        } else {
            format!("{}.{}", &d[..point as usize], &d[point as usize..])
        }
    } else {
        let frac = if d.len() > 1 {
            format!(".{}", &d[1..])
        } else {
            String::new()
        };
        let es = if e < 0 { '-' } else { '+' };
        format!("{}{frac}e{es}{:02}", &d[..1], e.abs())
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Lit {
        Lit::Text(s.to_string())
    }

    /// Every string of up to four characters of the alphabet that matters to these readers:
    /// none of them panics (INI values, YAML plain scalars, ssh argument words are hostile input).
    #[test]
    fn short_inputs_never_panic() {
        let alphabet: Vec<char> = "0'\"\\[](){}:,._-+eExjr#1 \n\u{e9}".chars().collect();
        let n = alphabet.len();
        let mut buf = String::new();
        for len in 0..=4u32 {
            for i in 0..n.pow(len) {
                buf.clear();
                let mut k = i;
                for _ in 0..len {
                    buf.push(alphabet[k % n]);
                    k /= n;
                }
                let _ = literal(&buf);
                let _ = super::super::yaml11::resolve(&buf);
                if let Ok(words) = super::super::ssh_args::split(&buf) {
                    let _ = crate::inventory::ssh_config::CommandLine::default().add(&words, "v");
                }
            }
        }
    }

    /// What ansible-inventory 2.19 shows for these (Python 3.11's literal_eval).
    #[test]
    fn typed_as_python_literal_eval() {
        for (v, want) in [
            ("1_000", t("1000")),
            ("0x10", t("16")),
            ("1e3", t("1000.0")),
            ("[1,2]", Lit::Container),
            ("'a' 'b'", t("ab")),
            ("+5", t("5")),
            ("(1,2)", Lit::Container),
            ("{k:1}", t("{k:1}")),
            ("{'k': 1}", Lit::Container),
            ("1.50", t("1.5")),
            ("-0", t("0")),
            ("010", t("010")),
            ("0o7", t("7")),
            ("1.0e16", t("1e+16")),
            ("1e15", t("1000000000000000.0")),
            ("0.00001", t("1e-05")),
            ("-2.5", t("-2.5")),
            ("(3)", t("3")),
            ("True", t("true")),
            ("None", Lit::Null),
            ("\"x y\"", t("x y")),
            ("'a\\tb'", t("a\tb")),
            ("r'a\\tb'", t("a\\tb")),
            ("1 # c", t("1")),
            ("  7", t("7")),
            ("abc", t("abc")),
            ("1_", t("1_")),
            ("1.2.3", t("1.2.3")),
            ("", t("")),
            ("[a]", t("[a]")),
        ] {
            assert_eq!(literal(v), want, "{v:?}");
        }
    }
}
