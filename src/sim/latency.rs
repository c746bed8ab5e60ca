//! The simulator's round-trip latencies (`--latency`): one for every node, or one per group of
//! racks, as a site whose racks sit behind different links.
//!
//! A rack is eight consecutive nodes ([`super::layout::RACK`]): node `i` is in rack
//! `i / 8 + 1`, the `rNN` of its rack-style name (`gpu-r03-n02` is in rack 3), whatever
//! `--names` says. `--latency` is a comma-separated list of items, each `RTT` (every node not in
//! a group; at most one such item, zero when there is none) or `RACKS=RTT`, where `RACKS` is
//! `rN` or `rN-rM` (inclusive; `rN-M` too) and `RTT` is `40ms` or `40ms±10ms` (drawn per
//! connection, uniformly): `--latency 5ms,r1-r100=50ms±10ms,r101=200ms`. Groups may not overlap.

use std::fmt::Write as _;
use std::time::Duration;

use super::layout::RACK;

/// A round-trip latency: `base` ± `spread` (uniform), drawn once per connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rtt {
    pub base: Duration,
    pub spread: Duration,
}

impl Rtt {
    /// The latency of the `k`-th connection: `base` ± `spread`, spread evenly by a hash of `k`
    /// (a deterministic draw: a rerun sees the same sequence).
    pub fn draw(&self, k: u64) -> Duration {
        if self.spread.is_zero() {
            return self.base;
        }
        // splitmix64
        let mut z = k.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let unit = (z >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        let lo = self.base.saturating_sub(self.spread).as_secs_f64();
        let hi = (self.base + self.spread).as_secs_f64();
        Duration::from_secs_f64(lo + (hi - lo) * unit)
    }

    /// `50 ms`, `50 ms ± 10 ms`.
    fn describe(&self) -> String {
        let mut s = format!("{} ms", self.base.as_millis());
        if !self.spread.is_zero() {
            let _ = write!(s, " ± {} ms", self.spread.as_millis());
        }
        s
    }
}

/// Racks `first` to `last` (1-based, inclusive) and their latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RackGroup {
    pub first: usize,
    pub last: usize,
    pub rtt: Rtt,
}

/// `--latency`: the latency of the nodes in no group, and the rack groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latency {
    /// Every node outside `groups`.
    pub default: Rtt,
    /// Rack groups, in the order written, not overlapping.
    pub groups: Vec<RackGroup>,
}

impl Latency {
    /// The same latency for every node.
    pub fn all(rtt: Rtt) -> Latency {
        Latency {
            default: rtt,
            groups: Vec::new(),
        }
    }

    /// Node `i`'s latency: its rack's group's, else the default.
    pub fn of_node(&self, i: usize) -> Rtt {
        let rack = i / RACK + 1;
        self.groups
            .iter()
            .find(|g| (g.first..=g.last).contains(&rack))
            .map_or(self.default, |g| g.rtt)
    }

    /// Whether every node's latency is zero.
    pub fn is_zero(&self) -> bool {
        self.default == Rtt::default() && self.groups.iter().all(|g| g.rtt == Rtt::default())
    }

    /// For the startup summary: `50 ms round trip`, `5 ms round trip, racks r1–r100 50 ms ±
    /// 10 ms`; empty when every latency is zero.
    pub fn describe(&self) -> String {
        if self.is_zero() {
            return String::new();
        }
        let mut s = format!("{} round trip", self.default.describe());
        for g in &self.groups {
            let racks = if g.first == g.last {
                format!("rack r{}", g.first)
            } else {
                format!("racks r{}–r{}", g.first, g.last)
            };
            let _ = write!(s, ", {racks} {}", g.rtt.describe());
        }
        s
    }
}

/// `40` or `40ms` → 40 ms; `40ms±10ms`, `40±10` or `40ms+-10ms` → 40 ms ± 10 ms (the spread at
/// most the base). Errors for anything else (`whole` is the whole option, for the message).
fn parse_rtt(s: &str, whole: &str) -> Result<Rtt, String> {
    let ms = |t: &str| -> Result<Duration, String> {
        t.trim()
            .trim_end_matches("ms")
            .trim()
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| {
                format!(
                    "{whole:?}: {s:?} is not a latency in whole milliseconds (like 40ms or \
                     40ms±10ms)"
                )
            })
    };
    let (base, spread) = match s.split_once('±').or_else(|| s.split_once("+-")) {
        Some((b, sp)) => (ms(b)?, ms(sp)?),
        None => (ms(s)?, Duration::ZERO),
    };
    if spread > base {
        return Err(format!(
            "{whole:?}: {s:?}: the spread is larger than the latency"
        ));
    }
    Ok(Rtt { base, spread })
}

/// `r3` → 3; `r1-r100` or `r1-100` → 1 to 100.
fn parse_racks(s: &str, whole: &str) -> Result<(usize, usize), String> {
    let bad = || {
        format!(
            "{whole:?}: {s:?} is not a rack or a range of racks (like r3 or r1-r100; racks count \
             from r1, eight nodes each)"
        )
    };
    let num = |t: &str| -> Result<usize, String> {
        let t = t.trim();
        let t = t
            .strip_prefix('r')
            .or_else(|| t.strip_prefix('R'))
            .unwrap_or(t);
        t.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(bad)
    };
    let t = s.trim();
    if !t.starts_with(['r', 'R']) {
        return Err(bad());
    }
    let (first, last) = match t.split_once('-') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => (num(t)?, num(t)?),
    };
    if last < first {
        return Err(format!("{whole:?}: {s:?}: the range runs backwards"));
    }
    Ok((first, last))
}

/// `--latency`'s value (see the module's documentation). Errors: an item that is not a latency
/// or `RACKS=RTT`, two default items, groups that overlap.
pub fn parse_latency(s: &str) -> Result<Latency, String> {
    let mut default = None;
    let mut groups: Vec<RackGroup> = Vec::new();
    for item in s.split(',') {
        match item.split_once('=') {
            None => {
                if default.is_some() {
                    return Err(format!(
                        "{s:?}: two latencies for the nodes in no rack group"
                    ));
                }
                default = Some(parse_rtt(item, s)?);
            }
            Some((racks, rtt)) => {
                let (first, last) = parse_racks(racks, s)?;
                let rtt = parse_rtt(rtt, s)?;
                if let Some(o) = groups.iter().find(|g| first <= g.last && g.first <= last) {
                    return Err(format!(
                        "{s:?}: racks r{first}–r{last} overlap racks r{}–r{}",
                        o.first, o.last
                    ));
                }
                groups.push(RackGroup { first, last, rtt });
            }
        }
    }
    Ok(Latency {
        default: default.unwrap_or_default(),
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn one_latency_for_every_node() {
        for s in ["40ms±10ms", "40±10", "40ms+-10ms", " 40 ms ± 10 ms "] {
            assert_eq!(
                parse_latency(s),
                Ok(Latency::all(Rtt {
                    base: ms(40),
                    spread: ms(10)
                })),
                "{s}"
            );
        }
        assert_eq!(parse_latency("0"), Ok(Latency::default()));
        assert!(parse_latency("0").unwrap().is_zero());
        assert_eq!(
            parse_latency("50ms").unwrap().describe(),
            "50 ms round trip"
        );
        for bad in ["10ms±20ms", "40ms±", "±10", "4s", "", "x"] {
            assert!(parse_latency(bad).is_err(), "{bad}");
        }
    }

    /// Racks r1–r2 (nodes 0 to 15) at 50 ms, rack r4 (nodes 24 to 31) at 200 ± 10 ms, every
    /// other node at 5 ms.
    #[test]
    fn rack_groups_give_their_nodes_their_latency() {
        let l = parse_latency("5ms, r1-r2=50ms, R4=200ms±10ms").unwrap();
        assert_eq!(l.groups.len(), 2);
        let base = |i| l.of_node(i).base;
        assert_eq!((base(0), base(15)), (ms(50), ms(50)));
        assert_eq!((base(16), base(23)), (ms(5), ms(5)));
        assert_eq!((base(24), base(31)), (ms(200), ms(200)));
        assert_eq!(l.of_node(31).spread, ms(10));
        assert_eq!(base(32), ms(5));
        assert_eq!(
            l.describe(),
            "5 ms round trip, racks r1–r2 50 ms, rack r4 200 ms ± 10 ms"
        );
        // No default: zero outside the groups; `r3-5` is `r3-r5`.
        let l = parse_latency("r3-5=50ms").unwrap();
        assert_eq!(
            (l.of_node(15).base, l.of_node(16).base, l.of_node(39).base),
            (ms(0), ms(50), ms(50))
        );
        assert_eq!(l.of_node(40).base, ms(0));
        for bad in [
            "r1-r4=5ms,r4=6ms", // overlap
            "5ms,6ms",          // two defaults
            "r0=5ms",           // racks count from 1
            "r5-r2=5ms",        // backwards
            "rack-a=5ms",
            "3=5ms",
            "r1=",
            "r1=5s",
        ] {
            assert!(parse_latency(bad).is_err(), "{bad}");
        }
        assert!(
            parse_latency("r1-r4=5ms,r2=6ms")
                .unwrap_err()
                .contains("overlap")
        );
    }

    #[test]
    fn a_spread_stays_in_its_bounds_and_covers_them() {
        let rtt = Rtt {
            base: ms(40),
            spread: ms(10),
        };
        let draws: Vec<Duration> = (0..1000).map(|k| rtt.draw(k)).collect();
        let lo = draws.iter().min().unwrap();
        let hi = draws.iter().max().unwrap();
        assert!(*lo >= ms(30) && *lo < ms(32), "{lo:?}");
        assert!(*hi <= ms(50) && *hi > ms(48), "{hi:?}");
        assert_eq!(rtt.draw(7), rtt.draw(7));
    }
}
