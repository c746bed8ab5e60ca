//! Node sets as ClusterShell's `nodeset -e` reads them (ClusterShell 1.10, the oracle of
//! tests/nodeset_oracle.rs): one code path for a TOML node's `name` / `host` and for `-n`.
//!
//! - A pattern holds ranges in brackets: `gpu[001-128]`, `node[1,3,5]`, `node[1-10/2]` (a step),
//!   `rack[1-2]-node[1-3]` (a product, leftmost bracket varying slowest). Zero padding comes from
//!   the bounds: `[08-10]` is `08 09 10`; `[001-10]` and `[1-010]` are errors (nodeset: "padding
//!   length mismatch"). Digits beside a bracket join its numbers as nodeset joins them:
//!   `n0[1-3]` is `n01 n02 n03`, `n1[9-10]` the range `19-110` (92 names), `n0[8-10]` an error
//!   (`08-010`), `n[1-3]0` is `n10 n20 n30`, `n[1-5/2]0` an error.
//! - Patterns combine left to right, with no precedence, by `,` (union), `!` (difference),
//!   `&` (intersection) and `^` (symmetric difference): `node[1-10]!node5`.
//! - Blanks around a pattern, an operator or inside brackets are ignored, as nodeset ignores
//!   them; blanks inside a name are kept.
//! - Errors where nodeset errors: an unclosed or stray bracket, adjacent brackets
//!   (`n[1-2][3-4]`), an empty `[]` or list item, a backwards range, a step on one number, a
//!   missing operand (`a,,b`, `a!`).
//!
//! Deliberate differences from nodeset, each an error naming the construct (docs: README,
//! "Node ranges"): names come out in the order written (nodeset sorts them), duplicates once;
//! `@group` (nodeset reads groups.conf, gpufleet does not); `*` / `?` outside `-n` (nodeset
//! matches them against its group source's `all` nodes; in `-n` gpufleet matches them against
//! the inventory, see [`combine`]); negative numbers, signs, `_` and non-ASCII digits in a range
//! (nodeset takes Python's `int()` reading of them); more than [`MAX_EXPANSION`] names.

use std::collections::HashSet;

/// Most names one expression may expand to, so a typo like `[1-10000000]` fails fast.
pub const MAX_EXPANSION: usize = 100_000;

/// How an operand combines with the names before it (nodeset's operators).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `,`
    Union,
    /// `!`
    Difference,
    /// `&`
    Intersection,
    /// `^`
    Xor,
}

impl Op {
    fn of(c: char) -> Option<Op> {
        match c {
            ',' => Some(Op::Union),
            '!' => Some(Op::Difference),
            '&' => Some(Op::Intersection),
            '^' => Some(Op::Xor),
            _ => None,
        }
    }
}

/// One operand of an expression: the operator before it (`Union` for the first), its text as
/// written (blanks trimmed), and the names its ranges expand to, in written order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    pub op: Op,
    pub text: String,
    pub names: Vec<String>,
}

impl Term {
    /// Whether the operand names a ClusterShell group (`@name`).
    pub fn is_group(&self) -> bool {
        self.text.starts_with('@')
    }

    /// Whether the operand holds a `*` / `?` wildcard.
    pub fn is_glob(&self) -> bool {
        self.names.iter().any(|n| n.contains(['*', '?']))
    }
}

/// Splits `expr` into its operands and expands each one's ranges. Errors say what nodeset would
/// refuse, quoting the expression.
pub fn parse(expr: &str) -> Result<Vec<Term>, String> {
    parse_terms(expr).map_err(|e| format!("{e} in {expr:?}"))
}

/// The names `expr` stands for, literally (a TOML `name` or `host`): operands combined in
/// order, each name once, in the order written. `@group` and `*` / `?` are refused (there is no
/// set of all nodes to match them against).
pub fn expand(expr: &str) -> Result<Vec<String>, String> {
    let terms = parse(expr)?;
    combine(&terms, |t| {
        if t.is_group() {
            Err(group_refusal(&t.text, expr))
        } else if t.is_glob() {
            Err(format!(
                "`{}` in {expr:?} is a wildcard: nodeset matches `*` and `?` against the \
                 `all` nodes of its group source, which a name here has none of; write the names \
                 or a range",
                t.text
            ))
        } else {
            Ok(t.names.clone())
        }
    })
}

/// The refusal of a `@group` operand.
pub fn group_refusal(term: &str, expr: &str) -> String {
    format!(
        "`{term}` in {expr:?} is a ClusterShell node group: gpufleet does not read \
         ClusterShell's groups.conf; name the nodes (or select an inventory group with -g)"
    )
}

/// Combines the operands left to right, each one's names given by `resolve` (the literal
/// names, or the inventory nodes an operand matches). Returns each name once, in order.
pub fn combine(
    terms: &[Term],
    mut resolve: impl FnMut(&Term) -> Result<Vec<String>, String>,
) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    let mut have: HashSet<String> = HashSet::new();
    for t in terms {
        let names = resolve(t)?;
        match t.op {
            Op::Union => {
                for n in names {
                    if have.insert(n.clone()) {
                        out.push(n);
                    }
                }
            }
            Op::Difference => {
                for n in &names {
                    have.remove(n);
                }
                out.retain(|n| have.contains(n));
            }
            Op::Intersection => {
                let these: HashSet<&String> = names.iter().collect();
                have.retain(|n| these.contains(n));
                out.retain(|n| have.contains(n));
            }
            Op::Xor => {
                let these: HashSet<String> = names.iter().cloned().collect();
                let both: HashSet<String> = have.intersection(&these).cloned().collect();
                out.retain(|n| !both.contains(n));
                for n in names {
                    if !both.contains(&n) && have.insert(n.clone()) {
                        out.push(n);
                    }
                }
                have.retain(|n| !both.contains(n));
            }
        }
        if out.len() > MAX_EXPANSION {
            return Err(format!("more than {MAX_EXPANSION} names"));
        }
    }
    Ok(out)
}

/// Whether `pattern` has a range in it.
pub fn has_range(pattern: &str) -> bool {
    pattern.contains('[')
}

fn next_op(s: &str) -> Option<(usize, Op)> {
    s.char_indices()
        .find_map(|(i, c)| Op::of(c).map(|op| (i, op)))
}

/// nodeset's scanner: operands split at the first operator outside a bracket pattern.
fn parse_terms(expr: &str) -> Result<Vec<Term>, String> {
    let mut rest = expr.trim();
    if rest.is_empty() {
        return Err("empty node set".into());
    }
    let mut terms = Vec::new();
    let mut op = Op::Union;
    while !rest.is_empty() {
        rest = rest.trim_start();
        let opnext = next_op(rest);
        let bracket = rest.find('[');
        let (term, next): (Vec<Piece>, Option<(Op, &str)>);
        let text_end: usize;
        if bracket.is_some_and(|b| opnext.is_none_or(|(o, _)| o > b)) {
            let (pieces, after, used) = bracket_pattern(rest)?;
            term = pieces;
            next = after;
            text_end = used;
        } else {
            let (node, after) = match opnext {
                None => (rest, None),
                Some((i, o)) => {
                    let (node, tail) = (&rest[..i], &rest[i + 1..]);
                    if node.is_empty() || tail.is_empty() {
                        return Err(missing_operand(o));
                    }
                    (node, Some((o, tail)))
                }
            };
            if node.contains(']') {
                return Err(format!("`]` without `[` in `{node}`"));
            }
            text_end = node.len();
            term = vec![Piece::Text(node.trim_end().to_string())];
            next = after;
        }
        check_digits(&rest[..text_end])?;
        let names = product(&term)?;
        terms.push(Term {
            op,
            text: rest[..text_end].trim().to_string(),
            names,
        });
        match next {
            None => break,
            Some((o, tail)) => {
                op = o;
                rest = tail;
            }
        }
    }
    Ok(terms)
}

fn missing_operand(op: Op) -> String {
    let c = match op {
        Op::Union => ',',
        Op::Difference => '!',
        Op::Intersection => '&',
        Op::Xor => '^',
    };
    format!("`{c}` is missing an operand (nodeset: \"missing nodeset operand\")")
}

/// Python's `\d` and `int()` read non-ASCII decimal digits as numbers: refused here.
fn check_digits(s: &str) -> Result<(), String> {
    match s.chars().find(|c| c.is_numeric() && !c.is_ascii_digit()) {
        Some(c) => Err(format!(
            "`{c}` is a non-ASCII digit (nodeset reads it as a number, gpufleet refuses it)"
        )),
        None => Ok(()),
    }
}

enum Piece {
    Text(String),
    Range(Vec<String>),
}

/// A pattern with brackets, up to the next operator outside them: its pieces, the operator and
/// what follows it, and how many bytes of `s` the operand took.
#[allow(clippy::type_complexity)]
fn bracket_pattern(s: &str) -> Result<(Vec<Piece>, Option<(Op, &str)>, usize), String> {
    let mut pieces = Vec::new();
    let mut sfx = s;
    while let Some((pfx, after)) = sfx.split_once('[') {
        if !pieces.is_empty() && next_op(sfx).is_some_and(|(o, _)| o < pfx.len()) {
            break;
        }
        let Some((inner, tail)) = after.split_once(']') else {
            return Err("`[` is not closed (nodeset: \"missing bracket\")".into());
        };
        if pfx.contains(']') {
            return Err(format!("`]` without `[` in `{pfx}`"));
        }
        if !tail.is_empty() {
            let close = tail.find(']');
            let open = tail.find('[');
            if let Some(c) = close
                && open.is_none_or(|o| c < o)
            {
                return Err(format!("`]` without `[` in `{tail}`"));
            }
        }
        let mut inner = inner.to_string();
        let mut tail = tail;
        // Digits right after `]` join the range's numbers (`[1-3]0` is 10, 20, 30).
        let digits = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            if inner.contains('/') {
                return Err(format!(
                    "digits `{}` after a range with a step (nodeset: \"illegal trailing digits \
                     after range with steps\")",
                    &tail[..digits]
                ));
            }
            let d = &tail[..digits];
            inner = inner
                .split(',')
                .map(|e| {
                    let joined: Vec<String> = e.split('-').map(|b| format!("{b}{d}")).collect();
                    let joined = joined.join("-");
                    if e.contains('-') {
                        format!("{joined}/1{}", "0".repeat(d.len()))
                    } else {
                        joined
                    }
                })
                .collect::<Vec<_>>()
                .join(",");
            tail = &tail[digits..];
        }
        // Digits right before `[` join them too (`n1[9-10]` is the range 19-110).
        let stem = pfx.trim_end_matches(|c: char| c.is_ascii_digit());
        if stem.len() < pfx.len() {
            let d = &pfx[stem.len()..];
            let runs = contiguous(&range_set(&inner)?);
            inner = runs
                .iter()
                .map(|(a, b)| {
                    if a == b {
                        format!("{d}{a}")
                    } else {
                        format!("{d}{a}-{d}{b}")
                    }
                })
                .collect::<Vec<_>>()
                .join(",");
        }
        if tail.starts_with('[') {
            return Err(format!(
                "`{tail}`: a bracket right after a bracket (nodeset: \"illegal reopening \
                 bracket\"); write the product with a separator, as `a[1-2]-[3-4]`"
            ));
        }
        if !stem.is_empty() {
            pieces.push(Piece::Text(stem.to_string()));
        }
        pieces.push(Piece::Range(range_set(&inner)?));
        sfx = tail;
        match (sfx.find('['), next_op(sfx)) {
            (Some(b), Some((o, _))) if o < b => break,
            (Some(_), _) => continue,
            (None, _) => break,
        }
    }
    let (last, next) = match next_op(sfx) {
        None => (sfx, None),
        Some((i, o)) => {
            let tail = &sfx[i + 1..];
            if tail.is_empty() {
                return Err(missing_operand(o));
            }
            (&sfx[..i], Some((o, tail)))
        }
    };
    let last = last.trim_end();
    if !last.is_empty() {
        pieces.push(Piece::Text(last.to_string()));
    }
    let used = s.len() - sfx.len() + last.len();
    Ok((pieces, next, used))
}

fn product(pieces: &[Piece]) -> Result<Vec<String>, String> {
    let mut out = vec![String::new()];
    for p in pieces {
        match p {
            Piece::Text(t) => out.iter_mut().for_each(|o| o.push_str(t)),
            Piece::Range(items) => {
                let total = out.len().saturating_mul(items.len());
                if total > MAX_EXPANSION {
                    return Err(format!("{total} names or more (at most {MAX_EXPANSION})"));
                }
                let mut next = Vec::with_capacity(total);
                for o in &out {
                    for i in items {
                        next.push(format!("{o}{i}"));
                    }
                }
                out = next;
            }
        }
    }
    Ok(out)
}

/// The numbers of a bracket (`1-3,7,10-20/5`) as written, each once. nodeset's rules: blanks
/// ignored, padding from a zero-led bound, both bounds the same width when either is padded.
fn range_set(inner: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut have = HashSet::new();
    for sub in inner.split(',') {
        let sub = sub.trim();
        if sub.is_empty() {
            return Err("an empty range in `[]` (nodeset: \"empty range\")".into());
        }
        let bad = |why: &str| format!("bad range `{sub}`: {why}");
        let (base, step) = match sub.split_once('/') {
            None => (sub, 1u64),
            Some((b, s)) => (
                b,
                number(s.trim()).ok_or_else(|| bad("the step is not a number"))?,
            ),
        };
        let (begin, end) = match base.split_once('-') {
            None if step != 1 => return Err(bad("a step needs a range like 1-10/2")),
            None => (base.trim(), base.trim()),
            Some((b, e)) => {
                if b.trim().is_empty() || e.contains('-') {
                    return Err(bad(
                        "negative numbers are refused (nodeset reads `-` there as a sign)",
                    ));
                }
                (b.trim(), e.trim())
            }
        };
        let (Some(lo), Some(hi)) = (number(begin), number(end)) else {
            return Err(bad(
                "not a number or a range like 1-8 (brackets hold a node range as in ClusterShell \
                 and Slurm, not a glob character class)",
            ));
        };
        let padded = |s: &str| s.len() > 1 && s.starts_with('0');
        let pad = if padded(begin) { begin.len() } else { 0 };
        if (padded(begin) || (padded(end) && hi != 0)) && begin.len() != end.len() {
            return Err(bad(
                "padding length mismatch (a zero-padded range has bounds of one width)",
            ));
        }
        if lo > hi || step == 0 {
            return Err(bad(
                "it runs backwards or its step is 0 (nodeset: \"invalid values in range\")",
            ));
        }
        if (hi - lo) / step >= MAX_EXPANSION as u64 {
            return Err(bad(&format!("more than {MAX_EXPANSION} numbers")));
        }
        let mut n = lo;
        while n <= hi {
            let s = format!("{n:0pad$}");
            if have.insert(s.clone()) {
                out.push(s);
            }
            n = match n.checked_add(step) {
                Some(n) => n,
                None => break,
            };
        }
    }
    Ok(out)
}

/// ASCII digits only, as a number (Python's `int()` also takes signs, `_` and other scripts'
/// digits: refused here).
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// nodeset's contiguous runs of a set of numbers (as strings): sorted by width then value, a
/// run goes on while the numbers follow one another and keep its padding. Returns each run's
/// first and last number as written.
fn contiguous(items: &[String]) -> Vec<(String, String)> {
    let mut sorted: Vec<&String> = items.iter().collect();
    sorted.sort_by(|a, b| a.len().cmp(&b.len()).then(a.cmp(b)));
    let mut runs: Vec<(String, String)> = Vec::new();
    let mut last: Option<(u64, bool, usize)> = None;
    for s in sorted {
        let v: u64 = s.parse().unwrap_or(0);
        let padded = s.len() > 1 && s.starts_with('0');
        let joins = match last {
            Some((lv, lpadded, lwidth)) => {
                lv + 1 == v && if lpadded { s.len() == lwidth } else { !padded }
            }
            None => false,
        };
        match runs.last_mut() {
            Some(run) if joins => run.1 = s.clone(),
            _ => runs.push((s.clone(), s.clone())),
        }
        let run_padded = runs
            .last()
            .is_some_and(|r| r.0.len() > 1 && r.0.starts_with('0'));
        let width = runs.last().map_or(0, |r| r.0.len());
        last = Some((v, run_padded, width));
    }
    runs
}

#[cfg(test)]
mod tests;
