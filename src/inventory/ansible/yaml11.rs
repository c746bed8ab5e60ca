//! Plain YAML scalars as Ansible reads them: Ansible's YAML loader is PyYAML's, whose implicit
//! resolver is YAML 1.1's (PyYAML `resolver.py`), while `saphyr` resolves YAML 1.2's core schema.
//! They differ on plain scalars only: `yes`/`no`/`on`/`off` are booleans in 1.1, `010` is octal
//! (8), `1_000` is 1000, `1:30` is sexagesimal (90), `1e3` (no dot) and `0o7` are strings, a
//! float needs a dot and a signed exponent. Values come back as `ansible-inventory --list`
//! prints them (numbers as Python does).

/// What a plain scalar is under YAML 1.1.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Plain {
    /// A boolean, integer or float: its text as Ansible prints it.
    Value(String),
    /// A string: the scalar's text.
    Str,
}

fn all(s: &str, f: impl Fn(char) -> bool) -> bool {
    !s.is_empty() && s.chars().all(f)
}

/// `[0-9][0-9_]*`-like: starts with a digit of `radix`, then digits and `_`.
fn run(s: &str, radix: u32) -> bool {
    s.chars().next().is_some_and(|c| c.is_digit(radix)) && all(s, |c| c == '_' || c.is_digit(radix))
}

/// `(?::[0-5]?[0-9])+` after a base-60 head: the parts after the first `:`.
fn sexagesimal_parts(parts: &[&str]) -> bool {
    !parts.is_empty()
        && parts.iter().all(|p| {
            (1..=2).contains(&p.len())
                && all(p, |c| c.is_ascii_digit())
                && (p.len() == 1 || p.as_bytes()[0] <= b'5')
        })
}

/// Resolves plain scalar `raw` as PyYAML's implicit resolver does.
pub(super) fn resolve(raw: &str) -> Plain {
    let v = Plain::Value;
    match raw {
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return v("true".into());
        }
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return v("false".into());
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return v("Infinity".into()),
        "-.inf" | "-.Inf" | "-.INF" => return v("-Infinity".into()),
        ".nan" | ".NaN" | ".NAN" => return v("NaN".into()),
        _ => {}
    }
    if let Some(n) = int(raw) {
        return v(n);
    }
    if let Some(f) = float(raw) {
        return v(f);
    }
    Plain::Str
}

fn split_sign(s: &str) -> (bool, &str) {
    match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    }
}

/// YAML 1.1 `int`: `0b[01_]+`, `0[0-7_]+`, `0|[1-9][0-9_]*`, `0x[0-9a-fA-F_]+`,
/// `[1-9][0-9_]*(:[0-5]?[0-9])+`, each with an optional sign; the value as PyYAML constructs it.
fn int(raw: &str) -> Option<String> {
    let (neg, s) = split_sign(raw);
    let value: i128 = if let Some(b) = s.strip_prefix("0b") {
        if !all(b, |c| c == '_' || c == '0' || c == '1') {
            return None;
        }
        i128::from_str_radix(&b.replace('_', ""), 2).ok()?
    } else if let Some(h) = s.strip_prefix("0x") {
        if !all(h, |c| c == '_' || c.is_ascii_hexdigit()) {
            return None;
        }
        i128::from_str_radix(&h.replace('_', ""), 16).ok()?
    } else if s == "0" {
        0
    } else if let Some(o) = s.strip_prefix('0') {
        if !all(o, |c| c == '_' || ('0'..='7').contains(&c)) {
            return None;
        }
        let o = o.replace('_', "");
        if o.is_empty() {
            0
        } else {
            i128::from_str_radix(&o, 8).ok()?
        }
    } else if s.contains(':') {
        let parts: Vec<&str> = s.split(':').collect();
        let head = parts[0];
        let head_ok = head.starts_with(|c: char| ('1'..='9').contains(&c)) && run(head, 10);
        if !(head_ok && sexagesimal_parts(&parts[1..])) {
            return None;
        }
        let mut n: i128 = head.replace('_', "").parse().ok()?;
        for p in &parts[1..] {
            n = n.checked_mul(60)?.checked_add(p.parse().ok()?)?;
        }
        n
    } else {
        if !(s.starts_with(|c: char| ('1'..='9').contains(&c)) && run(s, 10)) {
            return None;
        }
        s.replace('_', "").parse().ok()?
    };
    Some(if neg {
        (-value).to_string()
    } else {
        value.to_string()
    })
}

/// YAML 1.1 `float` (PyYAML's regex): `[-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)?`,
/// `\.[0-9_]+([eE][-+][0-9]+)?`, `[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*`.
fn float(raw: &str) -> Option<String> {
    let exp_ok = |e: &str| {
        let e = e.strip_prefix(['+', '-']);
        e.is_some_and(|d| all(d, |c| c.is_ascii_digit()))
    };
    let (mantissa, exp) = match raw.find(['e', 'E']) {
        Some(i) => (&raw[..i], Some(&raw[i + 1..])),
        None => (raw, None),
    };
    if exp.is_some_and(|e| !exp_ok(e)) {
        return None;
    }
    let frac_ok = |f: &str| f.is_empty() || all(f, |c| c == '_' || c.is_ascii_digit());
    if let Some(rest) = mantissa.strip_prefix('.') {
        // `.5`: no sign.
        if !run(rest, 10) {
            return None;
        }
    } else {
        let (neg, s) = split_sign(mantissa);
        let (head, frac) = s.split_once('.')?;
        if head.contains(':') {
            if exp.is_some() {
                return None;
            }
            let parts: Vec<&str> = head.split(':').collect();
            if !run(parts[0], 10) || !sexagesimal_parts(&parts[1..]) || !frac_ok(frac) {
                return None;
            }
            let mut x: f64 = parts[0].replace('_', "").parse().ok()?;
            for p in &parts[1..] {
                x = x * 60.0 + p.parse::<f64>().ok()?;
            }
            let f = frac.replace('_', "");
            if !f.is_empty() {
                x += format!("0.{f}").parse::<f64>().ok()?;
            }
            return Some(super::literal::python_float(if neg { -x } else { x }));
        }
        if !run(head, 10) || !frac_ok(frac) {
            return None;
        }
    }
    let x: f64 = raw.replace('_', "").to_ascii_lowercase().parse().ok()?;
    Some(super::literal::python_float(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What ansible-inventory 2.19 (PyYAML) shows for these plain scalars.
    #[test]
    fn plain_scalars_resolve_as_pyyaml() {
        let v = |s: &str| Plain::Value(s.to_string());
        for (raw, want) in [
            ("yes", v("true")),
            ("On", v("true")),
            ("off", v("false")),
            ("y", Plain::Str),
            ("1e3", Plain::Str),
            ("010", v("8")),
            ("0o7", Plain::Str),
            ("1_000", v("1000")),
            ("1.0e+3", v("1000.0")),
            ("0x1F", v("31")),
            (".inf", v("Infinity")),
            ("1:30", v("90")),
            ("-12", v("-12")),
            ("09", Plain::Str),
            ("1.5", v("1.5")),
            ("1.", v("1.0")),
            (".5", v("0.5")),
            ("2026-01-01", Plain::Str),
            ("1:30.5", v("90.5")),
            ("abc", Plain::Str),
            ("0", v("0")),
        ] {
            assert_eq!(resolve(raw), want, "{raw:?}");
        }
    }
}
