//! The matrix's order: rows sorted by the sort column (grouped first when rows are grouped by
//! a label), ties by node name. Each row's key is made once per rebuild from its cached cells
//! and its report, so sorting 10,000 rows allocates nothing per comparison (issue 12, item 5:
//! a sort key over 10,000 rows while results stream in).

use std::borrow::Cow;
use std::cmp::Ordering;

use super::{App, Column, Row, cell};
use crate::model::MajorMinor;
use crate::model::NodeStatus;
use crate::view::columns::SortKey;

/// A row's key in the sort column, by the column's kind of sort ([`SortKey`]).
enum Key<'a> {
    /// [`SortKey::Cell`]: the cell's text (empty cells last).
    Cell(Cow<'a, str>),
    /// The others: `None` until the row has a report (such rows come after those with one).
    Report(Option<ReportKey<'a>>),
}

/// What [`Column::compare`] compares, made once: the column's text as the matrix shows it
/// ([`Column::display`] through the cell cache), or the value it is sorted by.
enum ReportKey<'a> {
    Text(Cow<'a, str>),
    Version(Cow<'a, str>),
    Status(NodeStatus),
    Cc(Option<MajorMinor>),
    GpuCount(Option<usize>, Cow<'a, str>),
}

/// `Some` before `None`, as [`Column::compare`] orders a missing value.
fn some_first<T: Ord>(a: &Option<T>, b: &Option<T>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.cmp(b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

impl ReportKey<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        use ReportKey::*;
        match (self, other) {
            (Text(a), Text(b)) => a.cmp(b),
            (Version(a), Version(b)) => crate::model::version_cmp(a, b),
            (Status(a), Status(b)) => a.cmp(b),
            (Cc(a), Cc(b)) => some_first(a, b),
            (GpuCount(a, x), GpuCount(b, y)) => some_first(a, b).then_with(|| x.cmp(y)),
            // One column sorts every row: the kinds are always the same.
            _ => Ordering::Equal,
        }
    }
}

/// The text of `row` in column `c` as the matrix shows it: the cached cell of a matrix column
/// (its [`Column::display`] made screen-safe and clipped to 64 characters), else computed.
fn text(row: &Row, c: Column) -> Cow<'_, str> {
    if Column::matrix().any(|m| m == c) {
        Cow::Borrowed(cell(row, c))
    } else {
        Cow::Owned(super::compute_cell(row, c).text)
    }
}

fn key(row: &Row, c: Column) -> Key<'_> {
    let kind = c.spec().sort;
    if kind == SortKey::Cell {
        return Key::Cell(text(row, c));
    }
    Key::Report(row.report.as_ref().map(|r| {
        match kind {
            SortKey::Version => ReportKey::Version(text(row, c)),
            SortKey::Status => ReportKey::Status(r.status),
            SortKey::ComputeCapability => ReportKey::Cc(
                r.min_compute_capability()
                    .and_then(|s| s.parse::<MajorMinor>().ok()),
            ),
            SortKey::GpuCount => ReportKey::GpuCount(r.gpus.as_ref().map(Vec::len), text(row, c)),
            // The node's name as the report gives it, not the cell (which carries marks).
            SortKey::Text if c == Column::Node => ReportKey::Text(Cow::Borrowed(&r.name)),
            SortKey::Text | SortKey::Cell => ReportKey::Text(text(row, c)),
        }
    }))
}

impl App {
    /// `view` (indices into `rows`) in the matrix's order: by the group label's value when
    /// grouping (rows without the label last), then the sort column (reversed when
    /// descending), then the node name.
    pub(super) fn sorted<'a>(&'a self, view: Vec<usize>) -> Vec<usize> {
        let group = |r: &'a Row| -> Option<&'a str> {
            let k = self.group_by.as_ref()?;
            Some(r.labels.get(k).map_or("\u{10ffff}", String::as_str))
        };
        let mut keyed: Vec<(usize, Option<&str>, Key<'_>)> = view
            .into_iter()
            .map(|i| (i, group(&self.rows[i]), key(&self.rows[i], self.sort)))
            .collect();
        let desc = |o: Ordering| if self.descending { o.reverse() } else { o };
        keyed.sort_by(|(i, ga, ka), (j, gb, kb)| {
            let (a, b) = (&self.rows[*i], &self.rows[*j]);
            ga.cmp(gb)
                .then_with(|| {
                    desc(match (ka, kb) {
                        (Key::Cell(x), Key::Cell(y)) => (x.is_empty(), x).cmp(&(y.is_empty(), y)),
                        (Key::Report(x), Key::Report(y)) => match (x, y) {
                            (Some(x), Some(y)) => x.cmp(y),
                            (Some(_), None) => Ordering::Less,
                            (None, Some(_)) => Ordering::Greater,
                            (None, None) => Ordering::Equal,
                        },
                        _ => Ordering::Equal,
                    })
                })
                .then_with(|| a.name.cmp(&b.name))
        });
        keyed.into_iter().map(|(i, ..)| i).collect()
    }
}
