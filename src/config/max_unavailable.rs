//! `[upgrade] max_unavailable` and `--max-unavailable`: `N` nodes or `P%` of the selected ones
//! (docs/domain.md, "The unavailability budget").

use serde::Deserialize;

/// `max_unavailable`: a count, or a percentage of the selected nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnavailable {
    /// At most this many nodes (at least 1).
    Count(usize),
    /// At most this percent (1-100) of the selected nodes, rounded down, at least 1.
    Percent(u8),
}

impl MaxUnavailable {
    /// The budget for `selected` nodes: the count, or the percentage rounded down, at least 1.
    pub fn of(self, selected: usize) -> usize {
        match self {
            MaxUnavailable::Count(n) => n.max(1),
            MaxUnavailable::Percent(p) => (selected * p as usize / 100).max(1),
        }
    }
}

impl From<usize> for MaxUnavailable {
    fn from(n: usize) -> Self {
        MaxUnavailable::Count(n)
    }
}

impl std::fmt::Display for MaxUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxUnavailable::Count(n) => write!(f, "{n}"),
            MaxUnavailable::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Why a `max_unavailable` value was refused; the text (debug-quoted) is in the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaxUnavailableError {
    /// `P%` with `P` not 1 to 100.
    #[error("{0:?}: a percentage is 1% to 100%")]
    Percent(String),
    /// Neither a count of 1 to 10000 nor a percentage.
    #[error("{0:?}: a number of nodes (1 to 10000) or a percentage of them (\"25%\")")]
    Count(String),
}

impl std::str::FromStr for MaxUnavailable {
    type Err = MaxUnavailableError;

    /// `N` (1 to 10000) or `P%` (1 to 100), spaces around them ignored.
    fn from_str(s: &str) -> Result<Self, MaxUnavailableError> {
        let s = s.trim();
        if let Some(p) = s.strip_suffix('%') {
            match p.trim().parse::<u8>() {
                Ok(p) if (1..=100).contains(&p) => Ok(MaxUnavailable::Percent(p)),
                _ => Err(MaxUnavailableError::Percent(s.to_string())),
            }
        } else {
            match s.parse::<usize>() {
                Ok(n) if (1..=10_000).contains(&n) => Ok(MaxUnavailable::Count(n)),
                _ => Err(MaxUnavailableError::Count(s.to_string())),
            }
        }
    }
}

impl<'de> Deserialize<'de> for MaxUnavailable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(i64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => n.to_string().parse(),
            Raw::S(s) => s.parse(),
        }
        .map_err(serde::de::Error::custom)
    }
}
