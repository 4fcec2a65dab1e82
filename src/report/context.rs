//! The run's context as results.md and report.html both show it: the
//! preflight checks, the images carried to other hosts, the note for each
//! flagged or rejected cell, and the tables of what produced no result
//! (exclusions, failures, skips, incidents, cells not measured).
//!
//! Built once from [`Results`] as format-free grids and lists; each format
//! only decides the syntax (hyperfine's markup exporters are the pattern),
//! so a column or a sentence cannot drift between the two files.

use super::view::{noted, rounds_from_median, RunView};
use crate::results::{CellKey, Results, Status, Topology};

/// How a column's cells sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Words.
    Left,
    /// Figures.
    Right,
}

/// One cell of a grid.
#[derive(Debug, Clone, PartialEq)]
pub enum Text {
    /// Words, shown as they are (each format escapes them).
    Plain(String),
    /// A name shown as code: an image tag, a daemon's address.
    Code(String),
    /// A figure: its text and the value it sorts by.
    Num(String, f64),
    /// A verdict word (`pass`, `warn`, `fail`), styled as one.
    Verdict(String),
}

impl Text {
    fn plain(s: impl Into<String>) -> Text {
        Text::Plain(s.into())
    }

    /// The words, whatever the kind.
    pub fn as_str(&self) -> &str {
        match self {
            Text::Plain(s) | Text::Code(s) | Text::Num(s, _) | Text::Verdict(s) => s,
        }
    }
}

/// A table: headings with their alignment, and rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Column headings.
    pub head: Vec<(&'static str, Align)>,
    /// Rows in order.
    pub rows: Vec<Row>,
}

/// One row: an optional class (the verdict it carries) and its cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `pass`, `warn`, `fail`, or empty.
    pub class: String,
    /// One per heading.
    pub cells: Vec<Text>,
}

impl Grid {
    fn new(head: &[(&'static str, Align)]) -> Grid {
        Grid {
            head: head.to_vec(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, class: impl Into<String>, cells: Vec<Text>) {
        self.rows.push(Row {
            class: class.into(),
            cells,
        });
    }
}

const L: Align = Align::Left;
const R: Align = Align::Right;

/// A titled grid of the no-result appendix.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// Heading.
    pub title: &'static str,
    /// A sentence before the grid, if any.
    pub intro: Option<&'static str>,
    /// The grid.
    pub grid: Grid,
}

/// Preflight's checks, one row each; `None` when there were none.
pub fn checks(r: &Results) -> Option<Grid> {
    let env = &r.environment;
    if env.checks.is_empty() {
        return None;
    }
    let mut g = Grid::new(&[
        ("check", L),
        ("verdict", L),
        ("measured", L),
        ("threshold", L),
        ("remedy", L),
    ]);
    for c in &env.checks {
        let status = c.status.to_string();
        g.row(
            status.clone(),
            vec![
                Text::plain(&c.name),
                Text::Verdict(status),
                Text::plain(&c.measured),
                Text::plain(&c.threshold),
                Text::plain(c.remedy.as_deref().unwrap_or("")),
            ],
        );
    }
    Some(g)
}

/// The images carried to each other daemon of a multi-host run.
pub fn carried_images(t: &Topology) -> Option<Grid> {
    if t.images.is_empty() {
        return None;
    }
    let mut g = Grid::new(&[("image", L), ("carried to", L), ("size", R), ("time", R)]);
    for i in &t.images {
        let (size, time) = if i.skipped {
            (Text::plain("already there"), Text::plain(""))
        } else {
            (
                Text::Num(crate::units::bytes(i.bytes as f64), i.bytes as f64),
                Text::Num(format!("{:.1} s", i.seconds), i.seconds),
            )
        };
        g.row(
            "",
            vec![
                Text::Code(i.tag.clone()),
                Text::Code(i.endpoint.clone()),
                size,
                time,
            ],
        );
    }
    Some(g)
}

/// The note of one flagged or rejected cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Note<'a> {
    /// Its number, as the markers link to it.
    pub n: usize,
    /// The cell.
    pub key: &'a CellKey,
    /// Flagged or rejected.
    pub status: Status,
    /// Every reason, then the spread of its rounds when it has one.
    pub lines: Vec<String>,
}

/// Every note, in number order.
pub fn notes<'a>(view: &RunView<'a>) -> Vec<Note<'a>> {
    view.notes_in_order()
        .into_iter()
        .filter_map(|(n, key)| {
            let c = view.r.cell(key)?;
            let mut lines: Vec<String> = noted(c)
                .iter()
                .map(|r| c.key.scenario.in_own_words(&r.to_string()))
                .collect();
            if let Some(rounds) = rounds_from_median(c) {
                lines.push(format!(
                    "{} per round: {rounds}",
                    c.key.scenario.rate_unit()
                ));
            }
            Some(Note {
                n,
                key,
                status: c.verdict.status,
                lines,
            })
        })
        .collect()
}

/// What produced no result: scenarios excluded by contract verification,
/// frameworks that failed, skips and incidents; only the parts that have
/// rows.
pub fn appendix(r: &Results) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut excluded = Grid::new(&[("framework", L), ("scenario", L), ("what verify found", L)]);
    for (f, e) in RunView::new(r).exclusions() {
        excluded.row(
            "",
            vec![
                Text::plain(&f.name),
                Text::plain(e.scenario.to_string()),
                Text::plain(&e.reason),
            ],
        );
    }
    parts.push(Part {
        title: "Excluded by contract verification",
        intro: None,
        grid: excluded,
    });
    let mut failed = Grid::new(&[("framework", L), ("why", L)]);
    for f in &r.frameworks {
        if let Some(why) = &f.failure {
            failed.row("", vec![Text::plain(&f.name), Text::plain(why)]);
        }
    }
    parts.push(Part {
        title: "Frameworks that produced no results",
        intro: None,
        grid: failed,
    });
    let mut skipped = Grid::new(&[("framework", L), ("scenario", L), ("reason", L)]);
    for k in &r.skipped {
        let scenario = k
            .scenario
            .map(|x| x.to_string())
            .unwrap_or_else(|| "all".into());
        skipped.row(
            "",
            vec![
                Text::plain(&k.framework),
                Text::plain(scenario),
                Text::plain(&k.reason),
            ],
        );
    }
    parts.push(Part {
        title: "Skipped",
        intro: None,
        grid: skipped,
    });
    let mut incidents = Grid::new(&[
        ("time (UTC)", L),
        ("framework", L),
        ("cell", L),
        ("round", R),
        ("what", L),
    ]);
    for i in &r.incidents {
        let round = match i.round {
            Some(n) => Text::Num((n + 1).to_string(), f64::from(n + 1)),
            None => Text::plain(""),
        };
        incidents.row(
            "",
            vec![
                Text::plain(i.at.format("%H:%M:%S").to_string()),
                Text::plain(&i.framework),
                Text::plain(i.cell.as_ref().map(|k| k.to_string()).unwrap_or_default()),
                round,
                Text::plain(&i.what),
            ],
        );
    }
    parts.push(Part {
        title: "Incidents",
        intro: Some("What went wrong during the run and was recorded."),
        grid: incidents,
    });
    parts.retain(|p| !p.grid.rows.is_empty());
    parts
}

/// Heading of the cells a run planned and did not measure.
pub const NOT_MEASURED: &str = "Not measured";

/// The sentence before them (`fairground run --resume` code in both
/// formats).
pub const NOT_MEASURED_INTRO: (&str, &str, &str) = (
    "Planned but not measured (resume with ",
    "fairground run --resume <this directory>",
    "):",
);

/// The cells the run planned and did not measure.
pub fn not_measured(r: &Results) -> Vec<String> {
    r.remaining().into_iter().map(|k| k.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_appendix_has_only_the_parts_with_rows() {
        let mut r = crate::testdata::sample_results();
        r.skipped.clear();
        r.incidents.clear();
        for f in &mut r.frameworks {
            f.failure = None;
            f.verify = None;
        }
        assert!(appendix(&r).is_empty());
        r.frameworks[0].failure = Some("build failed: exit 1".into());
        let parts = appendix(&r);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].title, "Frameworks that produced no results");
        assert_eq!(
            parts[0].grid.rows[0].cells[1].as_str(),
            "build failed: exit 1"
        );
    }
}
