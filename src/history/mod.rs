//! `fairground history DIR…`: many runs of one benchmark over time (or
//! over commits), and *when* something changed.
//!
//! The runs are read (run directories, or folders of them such as
//! `output/`), ordered by the commit time git recorded when every run has
//! one, else by start time; series are split where two neighbouring runs
//! are not comparable (`compare`'s own refusal rules, with the differing
//! settings named). In each part, for every cell and figure (`compare`'s
//! metrics), each run contributes the median of its rounds and the
//! interval of that median (the one objectives use); change points are
//! found by E-divisive means over the log medians (`detect`), and each is
//! confirmed by `compare` of the runs on either side: a change point is
//! **confirmed** when that comparison calls the cell's figure regressed or
//! improved. Writes history.json (this module's [`History`]) and
//! history.html (`html`).
//!
//! Reads results and writes its two files; measures and re-judges nothing.

mod detect;
mod html;
#[cfg(test)]
mod simulated;

pub use self::html::page;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use self::detect::{ALPHA, MIN_SEGMENT, PERMUTATIONS};
use crate::compare::{Call, Difference, Metric};
use crate::results::{self, CellKey, GitInfo, Results, Status};
use crate::stats::{self, MEDIAN_INTERVAL_CONFIDENCE};

/// Layout version of history.json.
pub const HISTORY_SCHEMA_VERSION: u32 = 1;
/// File names written.
pub const HISTORY_JSON: &str = "history.json";
/// The page.
pub const HISTORY_HTML: &str = "history.html";

/// history.json: the runs in order, where the series split, and every
/// series with its points and change points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct History {
    /// Layout version ([`HISTORY_SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// Version of fairground that wrote it.
    pub fairground_version: String,
    /// How runs were ordered and change points found, in words.
    pub method: Method,
    /// The runs, in order.
    pub runs: Vec<RunEntry>,
    /// Comparable stretches of runs; a new one starts where a run is not
    /// comparable with the one before.
    pub segments: Vec<Segment>,
    /// One series per cell and figure.
    pub series: Vec<Series>,
    /// Counts.
    pub summary: Summary,
}

/// The method, for the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Method {
    /// `commit time` or `start time`.
    pub order: String,
    /// The detector.
    pub detector: String,
    /// Its significance level.
    pub alpha: f64,
    /// Permutations per test.
    pub permutations: usize,
    /// Fewest runs on either side of a change point.
    pub min_segment: usize,
    /// Each run's point and interval.
    pub point: String,
    /// How a change point is confirmed.
    pub confirmation: String,
}

/// One run of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunEntry {
    /// Position in the order, from 0.
    pub index: usize,
    /// Its results.json.
    pub path: String,
    /// Run id.
    pub run_id: String,
    /// Profile name.
    pub profile_name: String,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// The git state it was made from, when recorded.
    pub git: Option<GitInfo>,
    /// The segment it belongs to.
    pub segment: usize,
}

/// A stretch of mutually comparable neighbours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Segment {
    /// First run (index).
    pub first_run: usize,
    /// Last run (index).
    pub last_run: usize,
    /// Why it starts here: the settings that differ from the run before
    /// (empty for the first segment).
    pub split_because: Vec<Difference>,
}

/// One figure of one cell across the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Series {
    /// The cell.
    pub cell: CellKey,
    /// The figure.
    pub metric: Metric,
    /// Unit of the values.
    pub unit: String,
    /// One point per run that has the cell.
    pub points: Vec<Point>,
    /// Change points found in it, in run order.
    pub change_points: Vec<ChangePoint>,
}

/// One run's figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Point {
    /// The run (index).
    pub run: usize,
    /// The cell's verdict in that run.
    pub status: Status,
    /// Median over the rounds; absent for a rejected cell or a figure no
    /// round has.
    pub median: Option<f64>,
    /// Low end of the interval of the median.
    pub low: Option<f64>,
    /// High end.
    pub high: Option<f64>,
    /// Rounds with the figure (rounds on a busy host or a slowed machine left
    /// out, as `compare` does).
    pub rounds: usize,
    /// The interval's coverage (see docs/results.md, "Objectives").
    pub coverage: f64,
}

/// A change point, with the comparison that confirms it or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChangePoint {
    /// The first run after the change (index).
    pub run: usize,
    /// The run just before it (index), which `compare` took as BASE.
    pub before_run: usize,
    /// Median of the run medians from the previous change point (or the
    /// segment's start) up to the change.
    pub level_before: f64,
    /// Median of the run medians from the change to the next one.
    pub level_after: f64,
    /// level_after / level_before.
    pub ratio: f64,
    /// Permutation p-value of the split.
    pub p_value: f64,
    /// Whether `compare` of the runs on either side called it.
    pub confirmed: bool,
    /// `compare`'s call on this cell and figure, when it could compare.
    pub compare_call: Option<Call>,
    /// `compare`'s words.
    pub compare_why: String,
}

/// Counts over the whole history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Runs read.
    pub runs: usize,
    /// Comparable segments.
    pub segments: usize,
    /// Series.
    pub series: usize,
    /// Change points found.
    pub change_points: usize,
    /// Of which `compare` confirmed.
    pub confirmed: usize,
}

/// A run read from disk.
pub(crate) struct Run {
    path: PathBuf,
    results: Results,
}

/// The results.json files `dirs` name: each directory holding one, or the
/// subdirectories of a folder that hold one (`latest` and other links to a
/// run already read are read once).
fn find_runs(dirs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = Vec::new();
    let push = |f: PathBuf, files: &mut Vec<PathBuf>| {
        let canon = f.canonicalize().unwrap_or(f);
        if !files.contains(&canon) {
            files.push(canon);
        }
    };
    for d in dirs {
        let here = if d.is_file() {
            d.clone()
        } else {
            d.join(results::RESULTS_FILE)
        };
        if here.is_file() {
            push(here, &mut files);
            continue;
        }
        let entries = std::fs::read_dir(d).map_err(|source| InputError::NotAFolder {
            dir: d.clone(),
            source,
        })?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path().join(results::RESULTS_FILE)))
            .filter(|f| f.is_file())
            .collect();
        found.sort();
        if found.is_empty() {
            return Err(InputError::Empty { dir: d.clone() }.into());
        }
        for f in found {
            push(f, &mut files);
        }
    }
    Ok(files)
}

/// What is wrong with the runs given to `history`: always bad input.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A path is neither a run nor a folder that can be listed.
    #[error("{}: not a run directory or a folder of runs: {source}", dir.display())]
    NotAFolder {
        /// The path given.
        dir: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A folder holds no run.
    #[error("{}: holds no results.json, and no folder in it does; give run directories written by `fairground run`, or the folder holding them", dir.display())]
    Empty {
        /// The folder given.
        dir: PathBuf,
    },
    /// Fewer than two runs in all.
    #[error("a history needs at least two runs; found {found}")]
    TooFew {
        /// Runs found.
        found: usize,
    },
}

impl crate::exit::ExitCodeOf for InputError {
    fn exit_code(&self) -> crate::exit::ExitCode {
        use crate::exit::ExitCode::BadInput;
        match self {
            InputError::NotAFolder { .. } => BadInput,
            InputError::Empty { .. } => BadInput,
            InputError::TooFew { .. } => BadInput,
        }
    }
}

/// Read every run under `dirs` (run directories, or folders of them);
/// fewer than two is bad input: a history needs two.
pub(crate) fn read_runs(dirs: &[PathBuf]) -> anyhow::Result<Vec<Run>> {
    let mut runs = Vec::new();
    for path in find_runs(dirs)? {
        let results = results::read_file(&path)?;
        runs.push(Run { path, results });
    }
    if runs.len() < 2 {
        return Err(InputError::TooFew { found: runs.len() }.into());
    }
    Ok(runs)
}

/// The history of `runs` (in any order), and the runs in its order.
pub(crate) fn build(mut runs: Vec<Run>) -> anyhow::Result<(History, Vec<Run>)> {
    let by_commit = runs.iter().all(|r| {
        r.results
            .git
            .as_ref()
            .is_some_and(|g| g.commit_time.is_some())
    });
    runs.sort_by(|a, b| {
        let key = |r: &Run| {
            let commit = if by_commit {
                r.results
                    .git
                    .as_ref()
                    .and_then(|g| g.commit_time.as_deref())
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.with_timezone(&chrono::Utc))
            } else {
                None
            };
            (commit, r.results.started_at)
        };
        key(a).cmp(&key(b))
    });

    // Segments: split wherever a run cannot be compared with the one before.
    let mut segments = vec![Segment {
        first_run: 0,
        last_run: 0,
        split_because: Vec::new(),
    }];
    for i in 1..runs.len() {
        let diff = crate::compare::differences(&runs[i - 1].results, &runs[i].results);
        if diff.is_empty() {
            segments.last_mut().expect("one segment").last_run = i;
        } else {
            segments.push(Segment {
                first_run: i,
                last_run: i,
                split_because: diff,
            });
        }
    }
    let segment_of = |i: usize| {
        segments
            .iter()
            .position(|s| (s.first_run..=s.last_run).contains(&i))
            .expect("every run is in a segment")
    };
    let entries: Vec<RunEntry> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| RunEntry {
            index: i,
            path: r.path.display().to_string(),
            run_id: r.results.run_id.clone(),
            profile_name: r.results.profile_name.clone(),
            started_at: r
                .results
                .started_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            git: r.results.git.clone(),
            segment: segment_of(i),
        })
        .collect();

    // Every cell any run measured, in first-seen order.
    let mut keys: Vec<CellKey> = Vec::new();
    for r in &runs {
        for c in &r.results.cells {
            if !keys.contains(&c.key) {
                keys.push(c.key.clone());
            }
        }
    }
    let mut series = Vec::new();
    // Comparisons are made once per pair of runs and reused by every series.
    let mut comparisons: std::collections::BTreeMap<
        (usize, usize),
        anyhow::Result<crate::compare::Comparison>,
    > = std::collections::BTreeMap::new();
    for key in &keys {
        for metric in Metric::ALL {
            let points: Vec<Point> = runs
                .iter()
                .enumerate()
                .filter_map(|(i, r)| point(i, r, key, metric))
                .collect();
            if points.iter().all(|p| p.median.is_none()) {
                continue;
            }
            let mut change_points = Vec::new();
            for seg in &segments {
                let inside: Vec<&Point> = points
                    .iter()
                    .filter(|p| {
                        p.median.is_some() && (seg.first_run..=seg.last_run).contains(&p.run)
                    })
                    .collect();
                let medians: Vec<f64> = inside.iter().filter_map(|p| p.median).collect();
                // Every run's rounds, on a log scale where the figure is
                // positive: a step is a ratio, whatever the level.
                let rounds: Vec<Vec<f64>> = inside
                    .iter()
                    .map(|p| round_values(&runs[p.run], key, metric))
                    .collect();
                let positive = rounds.iter().flatten().all(|v| *v > 0.0);
                let values: Vec<Vec<f64>> = if positive {
                    rounds
                        .iter()
                        .map(|r| r.iter().map(|v| v.ln()).collect())
                        .collect()
                } else {
                    rounds
                };
                let found = detect::change_points_of_runs(&values);
                let bounds: Vec<usize> = std::iter::once(0)
                    .chain(found.iter().map(|f| f.index))
                    .chain(std::iter::once(inside.len()))
                    .collect();
                for (j, f) in found.iter().enumerate() {
                    let level = |a: usize, b: usize| stats::median(&medians[a..b]).unwrap_or(0.0);
                    let before = level(bounds[j], bounds[j + 1]);
                    let after = level(bounds[j + 1], bounds[j + 2]);
                    let (b_run, n_run) = (inside[f.index - 1].run, inside[f.index].run);
                    let cmp = comparisons.entry((b_run, n_run)).or_insert_with(|| {
                        crate::compare::compare_runs(
                            (&runs[b_run].path, &runs[b_run].results),
                            (&runs[n_run].path, &runs[n_run].results),
                        )
                    });
                    let row = cmp
                        .as_ref()
                        .ok()
                        .and_then(|c| comparison_row(&c.rows, key, metric));
                    let (call, why) = match (row, &*cmp) {
                        (Some(row), _) => (Some(row.call), row.why.clone()),
                        (None, Err(e)) => (None, format!("{e:#}")),
                        (None, Ok(_)) => (
                            None,
                            "compare has no row for this cell (rejected on one side)".into(),
                        ),
                    };
                    change_points.push(ChangePoint {
                        run: n_run,
                        before_run: b_run,
                        level_before: before,
                        level_after: after,
                        ratio: if before != 0.0 {
                            after / before
                        } else {
                            f64::NAN
                        },
                        p_value: f.p_value,
                        confirmed: matches!(call, Some(Call::Regressed | Call::Improved)),
                        compare_call: call,
                        compare_why: why,
                    });
                }
            }
            series.push(Series {
                cell: key.clone(),
                metric,
                unit: metric.unit_of(key.scenario).to_string(),
                points,
                change_points,
            });
        }
    }
    let found: usize = series.iter().map(|s| s.change_points.len()).sum();
    let confirmed: usize = series
        .iter()
        .map(|s| s.change_points.iter().filter(|c| c.confirmed).count())
        .sum();
    let history = History {
        schema_version: HISTORY_SCHEMA_VERSION,
        fairground_version: env!("CARGO_PKG_VERSION").to_string(),
        method: Method {
            order: if by_commit { "commit time (git), then start time" } else { "start time" }.into(),
            detector: "E-divisive means (Matteson & James 2014) on the log of every round's figure, splits between runs only, bisecting, each split kept when a permutation test gives p <= alpha (whole runs shuffled from 8 runs in a stretch, rounds shuffled across the runs below that)".into(),
            alpha: ALPHA,
            permutations: PERMUTATIONS,
            min_segment: MIN_SEGMENT,
            point: "median of the cell's rounds (rounds on a busy host or a slowed machine left out, as compare does), with the order-statistic interval of the median (min-max below 6 rounds)".into(),
            confirmation: "fairground compare of the run just before and the run just after the change: confirmed when it calls the figure regressed or improved".into(),
        },
        summary: Summary {
            runs: runs.len(),
            segments: segments.len(),
            series: series.len(),
            change_points: found,
            confirmed,
        },
        runs: entries,
        segments,
        series,
    };
    Ok((history, runs))
}

/// The point of run `i` for `key` and `metric`; `None` when the run has
/// no such cell.
fn point(i: usize, run: &Run, key: &CellKey, metric: Metric) -> Option<Point> {
    let cell = run.results.cell(key)?;
    if cell.verdict.status == Status::Rejected {
        return Some(Point {
            run: i,
            status: Status::Rejected,
            median: None,
            low: None,
            high: None,
            rounds: 0,
            coverage: 0.0,
        });
    }
    let values = round_values(run, key, metric);
    let iv = stats::median_interval(&values, MEDIAN_INTERVAL_CONFIDENCE);
    Some(Point {
        run: i,
        status: cell.verdict.status,
        median: iv.map(|v| v.median),
        low: iv.map(|v| v.low),
        high: iv.map(|v| v.high),
        rounds: values.len(),
        coverage: iv.map_or(0.0, |v| v.coverage),
    })
}

/// The figure of every round of run `run`'s cell `key` that compare would
/// judge (rounds the gates left out: busy host, slowed machine); empty for a rejected or absent cell.
/// The row of a comparison of two runs that confirms a change point of
/// `key`'s `metric`: the same framework, scenario, connections, rate and
/// protocol on both sides. The protocol matters: a cell measured in http1
/// and h2 has two rows, and the http1 one must not confirm an h2 step.
fn comparison_row<'a>(
    rows: &'a [crate::compare::Row],
    key: &CellKey,
    metric: Metric,
) -> Option<&'a crate::compare::Row> {
    rows.iter().find(|row| {
        row.metric == metric
            && row.cell.base_framework == key.framework
            && row.cell.new_framework == key.framework
            && row.cell.scenario == key.scenario
            && row.cell.base_protocol == key.protocol
            && row.cell.new_protocol == key.protocol
            && row.cell.concurrency == key.concurrency
            && row.cell.rate == key.rate
    })
}

fn round_values(run: &Run, key: &CellKey, metric: Metric) -> Vec<f64> {
    let Some(cell) = run.results.cell(key) else {
        return Vec::new();
    };
    if cell.verdict.status == Status::Rejected {
        return Vec::new();
    }
    let left_out = crate::compare::left_out_rounds(cell);
    let kept: Vec<&crate::results::Round> = cell
        .rounds
        .iter()
        .filter(|r| !left_out.contains(&r.index))
        .collect();
    // A percentile beyond the timeout in any kept round: no value for the
    // run (a gap), not the median of the rounds that stayed under it.
    if kept.iter().any(|r| metric.beyond_timeout(r)) {
        return Vec::new();
    }
    kept.iter().filter_map(|r| metric.of(r)).collect()
}

/// The terminal summary: runs, splits, change points.
pub fn terminal(h: &History) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "history: {} runs ordered by {}, {} comparable segment(s), {} series",
        h.summary.runs, h.method.order, h.summary.segments, h.summary.series
    );
    for seg in h.segments.iter().skip(1) {
        let what: Vec<String> = seg
            .split_because
            .iter()
            .map(|d| format!("{} {} → {}", d.field, d.base, d.new))
            .collect();
        let _ = writeln!(
            s,
            "split before run #{} ({}): not comparable with the run before: {}",
            seg.first_run,
            h.runs[seg.first_run].run_id,
            what.join("; ")
        );
    }
    for ser in &h.series {
        for c in &ser.change_points {
            let r = &h.runs[c.run];
            let commit = r
                .git
                .as_ref()
                .map(|g| format!(", commit {}", g.short()))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "change point: {} {} at run #{} ({}{}): {} → {} ({:+.1}%), p = {:.3}; {}: {}",
                ser.cell,
                ser.metric.label(),
                c.run,
                r.run_id,
                commit,
                fmt_value(ser.metric, &ser.unit, c.level_before),
                fmt_value(ser.metric, &ser.unit, c.level_after),
                (c.ratio - 1.0) * 100.0,
                c.p_value,
                if c.confirmed {
                    "confirmed by compare"
                } else {
                    "NOT confirmed by compare"
                },
                c.compare_call.map_or_else(
                    || c.compare_why.clone(),
                    |call| format!("{} ({})", call.word(), c.compare_why)
                )
            );
        }
    }
    let _ = writeln!(
        s,
        "{} change point(s), {} confirmed",
        h.summary.change_points, h.summary.confirmed
    );
    s
}

/// A value of `metric` for people.
pub(crate) fn fmt_value(metric: Metric, unit: &str, v: f64) -> String {
    match metric {
        Metric::Throughput => format!("{} {unit}", crate::units::thousands(v)),
        Metric::LatencyP50 | Metric::LatencyP99 | Metric::CpuPerRequest => crate::units::micros(v),
        Metric::MemoryUnderLoad => crate::units::bytes(v),
        Metric::WireBytes => format!("{} B", crate::units::sig3(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Protocol, Scenario};

    #[test]
    fn a_change_point_is_confirmed_only_by_the_same_protocols_comparison() {
        let mut base = crate::testdata::sample_results();
        let http1 = base
            .cells
            .iter()
            .find(|c| {
                c.key.framework == "axum"
                    && c.key.scenario == Scenario::Plaintext
                    && c.key.concurrency == 100
            })
            .unwrap()
            .clone();
        let mut h2 = http1.clone();
        h2.key.protocol = Protocol::H2c;
        base.plan.push(h2.key.clone());
        base.cells.push(h2.clone());
        // NEW: the http1 cell halves; its h2 twin is unchanged.
        let mut new = base.clone();
        let c = new.cells.iter_mut().find(|c| c.key == http1.key).unwrap();
        for r in &mut c.rounds {
            r.throughput_rps /= 2.0;
            for w in &mut r.windows_rps {
                *w /= 2.0;
            }
        }
        c.summary.as_mut().unwrap().throughput_rps.median /= 2.0;
        let cmp = crate::compare::compare_runs(
            (std::path::Path::new("base.json"), &base),
            (std::path::Path::new("new.json"), &new),
        )
        .unwrap();
        let one = comparison_row(&cmp.rows, &http1.key, Metric::Throughput).unwrap();
        assert_eq!(one.call, Call::Regressed, "{}", one.why);
        let two = comparison_row(&cmp.rows, &h2.key, Metric::Throughput).unwrap();
        assert_eq!(two.cell.base_protocol, Protocol::H2c);
        assert_ne!(two.call, Call::Regressed, "the http1 row answered for h2");
    }

    #[test]
    fn a_p99_beyond_the_timeout_in_a_round_is_no_figure_rather_than_the_survivors() {
        let mut base = crate::testdata::sample_results();
        // Five rounds a side, so the four that survive would be enough
        // for compare to make a call on their own.
        let extra: Vec<_> = base.cells[0].rounds[..2].to_vec();
        for (i, mut r) in extra.into_iter().enumerate() {
            r.index = 3 + i as u32;
            base.cells[0].rounds.push(r);
        }
        let key = base.cells[0].key.clone();
        // NEW: round 1's p99 lies beyond the timeout; rounds 2 and 3 read
        // the same as BASE. Dropping round 1 would compare the survivors
        // and call it unchanged.
        let mut new = base.clone();
        let c = new.cells.iter_mut().find(|c| c.key == key).unwrap();
        c.rounds[0].latency.p99_us = None;
        c.rounds[0].latency.beyond_timeout = 1_000;
        let slow = c.rounds[0].clone();
        let cmp = crate::compare::compare_runs(
            (std::path::Path::new("base.json"), &base),
            (std::path::Path::new("new.json"), &new),
        )
        .unwrap();
        let row = comparison_row(&cmp.rows, &key, Metric::LatencyP99).unwrap();
        assert_eq!(row.call, Call::Inconclusive, "{}", row.why);
        assert!(Metric::LatencyP99.beyond_timeout(&slow));
        assert!(!Metric::Throughput.beyond_timeout(&slow));
    }
}
