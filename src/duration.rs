//! Durations in seconds, as operators write them: `600`, `600s`, `10m`, `2h`, `1d`, or a sum
//! such as `1h30m` (a number alone is seconds). For second-valued settings and flags
//! (`--soak`, a recipe step's `kill_after`); millisecond ones (the simulator's `--latency`)
//! keep their own unit and parser.

/// Seconds in `text`: `600`, `600s`, `10m`, `2h`, `1d`, `1h30m` or `1h 30m` (whitespace around
/// it ignored).
///
/// Errors: empty text, a unit other than `s`, `m`, `h`, `d`, a number without digits, or a
/// total past `u64` seconds; the message names the text and the accepted forms.
pub fn parse_secs(text: &str) -> Result<u64, String> {
    let bad =
        || format!("{text:?} is not a duration in seconds: write 600, 600s, 10m, 2h, 1d or 1h30m");
    let t = text.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| bad());
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in t.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        if c == ' ' && number.is_empty() {
            // `1h 30m`: a space between parts (never inside one: `10 m` is refused).
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        if number.is_empty() {
            return Err(bad());
        }
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        number.clear();
    }
    if !number.is_empty() {
        // `1h30` : a trailing number without its unit is ambiguous.
        return Err(bad());
    }
    Ok(total)
}

/// For serde: an optional duration in seconds, written as a number (`600`) or a string
/// (`"10m"`, [`parse_secs`]).
pub fn de_opt_secs<'de, D>(d: D) -> Result<Option<u64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(u64),
        S(String),
    }
    match <Option<Raw> as serde::Deserialize>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::N(n)) => Ok(Some(n)),
        Some(Raw::S(s)) => parse_secs(&s).map(Some).map_err(serde::de::Error::custom),
    }
}

/// For serde: a duration in seconds, written as a number (`600`) or a string (`"10m"`,
/// [`parse_secs`]).
pub fn de_secs<'de, D>(d: D) -> Result<u64, D::Error>
where
    D: serde::Deserializer<'de>,
{
    de_opt_secs(d)?.ok_or_else(|| serde::de::Error::custom("a duration in seconds is needed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_read_as_operators_write_them() {
        for (t, want) in [
            ("600", 600),
            ("600s", 600),
            ("10m", 600),
            (" 2h ", 7200),
            ("1d", 86_400),
            ("1h30m", 5400),
            ("1h 30m", 5400),
            ("0", 0),
        ] {
            assert_eq!(parse_secs(t), Ok(want), "{t}");
        }
        for t in [
            "",
            "m",
            "10x",
            "1h30",
            "10 m",
            "-5",
            "1.5m",
            "99999999999999999999d",
        ] {
            let e = parse_secs(t).unwrap_err();
            assert!(e.contains("not a duration in seconds"), "{t}: {e}");
        }
    }
}
