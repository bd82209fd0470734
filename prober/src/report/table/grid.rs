//! The table's source x destination grid of one path class. Built in one pass over the report's
//! results with one small state per cell over numbered row and column names, never a copy of a
//! result: the scheduled mode renders the table of every run, millions of results on a large
//! cluster.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::Hash;
use std::net::IpAddr;

use probe_proto::Outcome;

use super::{GREEN, GRID_FULL, RED, Style, YELLOW, cell_char, natural, paint, safe, wrap};
use crate::model::{PathClass, Record};

/// What one cell shows, folded from its probes in the report's order: the first failure's
/// outcome, else a finding's evidence, else unknown, else ok.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    Ok,
    Unknown,
    Flagged,
    Failed(Outcome),
}

impl Cell {
    fn fold(self, r: &Record<'_>, flagged: &HashSet<&str>) -> Self {
        match self {
            Self::Failed(_) => self,
            _ if r.is_failed() => Self::Failed(r.result.outcome),
            Self::Flagged => self,
            // The id is written out only when some finding flags a probe that answered.
            _ if !flagged.is_empty() && flagged.contains(&*r.result.id.text()) => Self::Flagged,
            _ if r.is_unknown() => Self::Unknown,
            _ => self,
        }
    }

    fn show(self) -> (char, &'static str) {
        match self {
            Self::Failed(o) => (cell_char(o), RED),
            Self::Flagged => ('!', RED),
            Self::Unknown => ('?', YELLOW),
            Self::Ok => ('.', GREEN),
        }
    }
}

/// A column as a record names it, before any text is written: the service, a node, an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Column<'a> {
    Svc,
    Node(&'a str),
    Address(IpAddr),
}

impl<'a> Column<'a> {
    fn of(r: &Record<'a>) -> Self {
        match (r.path, &r.to.node, r.to.service.as_deref()) {
            (PathClass::PodToService | PathClass::NodeToService, _, _)
            | (PathClass::Dns, _, Some("kube-dns")) => Self::Svc,
            (_, Some(n), _) => Self::Node(n),
            _ => Self::Address(r.to.address),
        }
    }

    /// The label shown: a node's name shown safely, `svc`, or the address.
    fn text(self) -> String {
        match self {
            Self::Svc => "svc".into(),
            Self::Node(n) => safe::name(n).into_owned(),
            Self::Address(a) => a.to_string(),
        }
    }
}

/// Labels numbered once each. Two keys shown alike (names cut to the same text) share a label,
/// as they share a row or column on screen.
struct Labels<K> {
    by_key: HashMap<K, u32>,
    by_text: HashMap<String, u32>,
    texts: Vec<String>,
}

impl<K> Default for Labels<K> {
    fn default() -> Self {
        Self {
            by_key: HashMap::new(),
            by_text: HashMap::new(),
            texts: Vec::new(),
        }
    }
}

impl<K: Hash + Eq> Labels<K> {
    fn number(&mut self, key: K, text: impl FnOnce() -> String) -> u32 {
        if let Some(&i) = self.by_key.get(&key) {
            return i;
        }
        let text = text();
        let next = u32::try_from(self.texts.len()).unwrap_or(u32::MAX);
        let i = *self.by_text.entry(text.clone()).or_insert(next);
        if i == next {
            self.texts.push(text);
        }
        self.by_key.insert(key, i);
        i
    }

    /// The label numbers in natural order of their text.
    fn sorted(&self) -> Vec<u32> {
        let mut v: Vec<u32> = (0..self.texts.len())
            .filter_map(|i| u32::try_from(i).ok())
            .collect();
        v.sort_by(|a, b| natural(self.text(*a), self.text(*b)));
        v
    }

    fn text(&self, i: u32) -> &str {
        &self.texts[i as usize]
    }
}

/// One path class's grid.
#[derive(Default)]
pub(super) struct Grid<'a> {
    rows: Labels<&'a str>,
    cols: Labels<Column<'a>>,
    cells: HashMap<(u32, u32), Cell>,
}

impl<'a> Grid<'a> {
    /// The grid of `rs`, the results of one path class; `flagged` as for [`Cell::fold`].
    pub(super) fn of(rs: impl Iterator<Item = Record<'a>>, flagged: &HashSet<&str>) -> Self {
        let mut g = Self::default();
        for r in rs {
            let from: &'a str = &r.from.node;
            // Names are shown escaped and cut: a label's width is bounded, so is every cell's.
            let row = g.rows.number(from, || safe::name(from).into_owned());
            let col = Column::of(&r);
            let col = g.cols.number(col, || col.text());
            let cell = g.cells.entry((row, col)).or_insert(Cell::Ok);
            *cell = cell.fold(&r, flagged);
        }
        g
    }

    fn cell(&self, row: u32, col: u32) -> (char, &'static str) {
        self.cells.get(&(row, col)).map_or((' ', ""), |c| c.show())
    }
}

fn bad(ch: char) -> bool {
    !matches!(ch, '.' | ' ')
}

/// A grid too wide for the terminal: per source, the failing destinations, wrapped.
fn row_list(
    out: &mut String,
    g: &Grid<'_>,
    rows: &[u32],
    cols: &[u32],
    label_w: usize,
    style: Style,
) {
    for &row in rows {
        let bad: Vec<String> = cols
            .iter()
            .filter_map(|&c| match g.cell(row, c) {
                ('.' | ' ', _) => None,
                (ch, _) => Some(format!("{}({ch})", g.cols.text(c))),
            })
            .collect();
        let text = if bad.is_empty() {
            "all ok".to_string()
        } else {
            bad.join(" ")
        };
        let line = wrap(
            &format!("  {:<label_w$}{text}", g.rows.text(row)),
            style.width,
            4 + label_w,
        );
        let color = if bad.is_empty() { GREEN } else { RED };
        let _ = writeln!(
            out,
            "{}",
            if style.color {
                paint(&line, color, style)
            } else {
                line
            }
        );
    }
}

/// Writes the grid: whole when it is small, else only the rows and columns with a problem; as
/// a list per source when it is wider than the terminal.
pub(super) fn render(out: &mut String, g: &Grid<'_>, style: Style) {
    let mut rows = g.rows.sorted();
    let mut cols = g.cols.sorted();
    let (all_rows, all_cols) = (rows.len(), cols.len());
    if all_rows > GRID_FULL || all_cols > GRID_FULL {
        // A large grid is read for its problems: keep the rows and columns that have one.
        let (bad_rows, bad_cols): (BTreeSet<u32>, BTreeSet<u32>) = g
            .cells
            .iter()
            .filter(|(_, c)| bad(c.show().0))
            .map(|((r, c), _)| (*r, *c))
            .unzip();
        rows.retain(|r| bad_rows.contains(r));
        cols.retain(|c| bad_cols.contains(c));
        if rows.is_empty() {
            let _ = writeln!(
                out,
                "  {}",
                paint(&format!("all ok ({all_rows} x {all_cols})"), GREEN, style)
            );
            return;
        }
        // Said only when something was left out, and only of the side that was.
        let side = |kept: usize, all: usize, what: &str| {
            if kept == all {
                format!("all {all} {what}")
            } else {
                format!("only the {kept} of {all} {what} with a problem")
            }
        };
        if rows.len() < all_rows || cols.len() < all_cols {
            let _ = writeln!(
                out,
                "{}",
                wrap(
                    &format!(
                        "  {}, {}; the rest are ok",
                        side(rows.len(), all_rows, "sources"),
                        side(cols.len(), all_cols, "destinations")
                    ),
                    style.width,
                    4
                )
            );
        }
    }
    let label_w = rows
        .iter()
        .map(|r| g.rows.text(*r).len())
        .max()
        .unwrap_or(2)
        .max(7)
        + 2;
    let col_w = cols
        .iter()
        .map(|c| g.cols.text(*c).len())
        .max()
        .unwrap_or(1)
        + 1;
    if 2 + label_w + col_w * cols.len() > style.width {
        row_list(out, g, &rows, &cols, label_w, style);
        return;
    }
    let _ = write!(out, "  {:<label_w$}", "from\\to");
    for c in &cols {
        let _ = write!(out, "{:>col_w$}", g.cols.text(*c));
    }
    out.push('\n');
    for &row in &rows {
        let _ = write!(out, "  {:<label_w$}", g.rows.text(row));
        for &c in &cols {
            let (ch, color) = g.cell(row, c);
            let padded = format!("{ch:>col_w$}");
            out.push_str(&if color.is_empty() {
                padded
            } else {
                paint(&padded, color, style)
            });
        }
        out.push('\n');
    }
}
