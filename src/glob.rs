//! Shell-style patterns as known_hosts(5) hosts and node selectors write them: `*` matches any
//! run of bytes (none too), `?` one byte, any other byte itself (OpenSSH `match.c`,
//! `match_pattern`). A leaf: imports nothing of the crate.
//!
//! The matcher is iterative: after a mismatch it goes back to the last `*` only and lets it
//! take one more byte. Going back further never helps (whatever an earlier `*` takes, the last
//! one can take instead), so a pattern `p` against a name `s` costs at most
//! `(|p| + 1) · (|s| + 1)` steps. The recursive matcher it replaces tried every split of every
//! star: `*a*a*a…*b` against `aaaa…` took exponential time (a known_hosts line, or a
//! `--node` pattern, could stall a scan).

/// Whether `s` matches the pattern `p`; ASCII letters compare case-insensitively when `fold`
/// (host names, as OpenSSH compares them).
pub fn matches(p: &[u8], s: &[u8], fold: bool) -> bool {
    matches_counting(p, s, fold).0
}

/// [`matches`], and the steps it took (each step moves through one byte of `s` or `p`, or goes
/// back to the last `*`): at most `(|p| + 1) · (|s| + 1)`.
pub fn matches_counting(p: &[u8], s: &[u8], fold: bool) -> (bool, u64) {
    let same = |a: u8, b: u8| a == b || (fold && a.eq_ignore_ascii_case(&b));
    let (mut pi, mut si) = (0usize, 0usize);
    // After the last `*` seen: where the pattern resumes, and the byte of `s` it took up to.
    let mut star: Option<(usize, usize)> = None;
    let mut steps = 0u64;
    while si < s.len() {
        steps += 1;
        match p.get(pi) {
            Some(b'*') => {
                pi += 1;
                star = Some((pi, si));
            }
            Some(&c) if c == b'?' || same(c, s[si]) => {
                pi += 1;
                si += 1;
            }
            _ => match star {
                // The last `*` takes one more byte; the pattern after it starts again there.
                Some((after, took)) => {
                    pi = after;
                    si = took + 1;
                    star = Some((after, took + 1));
                }
                None => return (false, steps),
            },
        }
    }
    while p.get(pi) == Some(&b'*') {
        steps += 1;
        pi += 1;
    }
    (pi == p.len(), steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_questions_and_case() {
        let m = |p: &str, s: &str| matches(p.as_bytes(), s.as_bytes(), true);
        assert!(m("*", ""));
        assert!(m("", ""));
        assert!(!m("", "a"));
        assert!(m("gpu-*", "gpu-01"));
        assert!(m("gpu-*", "gpu-"));
        assert!(!m("gpu-*", "gpu"));
        assert!(m("*.example.com", "a.b.EXAMPLE.com"));
        assert!(m("g?u-0?", "gpu-07"));
        assert!(!m("g?u-0?", "gpu-7"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
        assert!(m("*a*", "bab"));
        assert!(m("**x", "yyx"));
        assert!(m("[10.0.0.1]:2222", "[10.0.0.1]:2222"));
        assert!(!matches(b"GPU", b"gpu", false));
        assert!(matches(b"gpu*", b"gpu7", false));
    }

    /// The same answers as the recursive matcher it replaces, on every short pattern and name
    /// over a small alphabet.
    #[test]
    fn agrees_with_the_recursive_definition() {
        fn recursive(p: &[u8], s: &[u8]) -> bool {
            match (p.first(), s.first()) {
                (None, None) => true,
                (Some(b'*'), _) => {
                    recursive(&p[1..], s) || (!s.is_empty() && recursive(p, &s[1..]))
                }
                (Some(b'?'), Some(_)) => recursive(&p[1..], &s[1..]),
                (Some(a), Some(b)) if a == b => recursive(&p[1..], &s[1..]),
                _ => false,
            }
        }
        fn all(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
            let mut out = vec![Vec::new()];
            let mut last = vec![Vec::new()];
            for _ in 0..len {
                last = last
                    .iter()
                    .flat_map(|w: &Vec<u8>| {
                        alphabet.iter().map(move |c| [w.as_slice(), &[*c]].concat())
                    })
                    .collect();
                out.extend(last.iter().cloned());
            }
            out
        }
        let patterns = all(b"ab*?", 5);
        let names = all(b"ab", 6);
        for p in &patterns {
            for s in &names {
                assert_eq!(
                    matches(p, s, false),
                    recursive(p, s),
                    "{:?} ~ {:?}",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(s)
                );
            }
        }
    }

    /// `*a*a*…*a*b` (30 stars) against 60 `a`s: the recursive matcher tried every way to split
    /// the name among the stars (C(90, 30) ≈ 10^23 calls: it never returned); this one takes at
    /// most (|p| + 1)·(|s| + 1) steps.
    #[test]
    fn a_hostile_pattern_costs_polynomial_steps() {
        let p = format!("{}b", "*a".repeat(30));
        let s = "a".repeat(60);
        let (hit, steps) = matches_counting(p.as_bytes(), s.as_bytes(), true);
        assert!(!hit);
        let bound = (p.len() as u64 + 1) * (s.len() as u64 + 1);
        assert!(steps <= bound, "{steps} steps, bound {bound}");
        // And a 100,000-byte name against a 1,000-star pattern stays within the bound too.
        let p = format!("{}b", "*a".repeat(1000));
        let s = "a".repeat(100_000);
        let (hit, steps) = matches_counting(p.as_bytes(), s.as_bytes(), true);
        assert!(!hit);
        assert!(
            steps <= (p.len() as u64 + 1) * (s.len() as u64 + 1),
            "{steps}"
        );
    }
}
