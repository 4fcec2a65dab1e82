//! Service-level objectives: what a profile's `objectives:` asks of a cell
//! (`p99 < 5ms`, `rps >= 50000`, …) and, once the run is over, what each
//! cell's rounds say about it (met, missed or undecided, with the interval
//! it was judged on).
//!
//! The objectives themselves (types and parser) are the profile's
//! (`profile::objectives`); this module owns their outcomes as results.json
//! keeps them; `judge::objectives` decides them, the reports render. It
//! does no I/O.

use serde::{Deserialize, Serialize};

use super::{CellKey, Status};

pub use crate::profile::objectives::*;

/// What one cell's rounds say about one objective.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ObjectiveStatus {
    /// The whole interval satisfies the objective.
    Met,
    /// The whole interval fails it, or the cell was rejected or has no
    /// result.
    Missed,
    /// The interval straddles the bound (or the figure is unknown): the
    /// rounds cannot tell.
    Undecided,
}

impl ObjectiveStatus {
    /// The word the reports print.
    pub fn word(self) -> &'static str {
        match self {
            ObjectiveStatus::Met => "met",
            ObjectiveStatus::Missed => "missed",
            ObjectiveStatus::Undecided => "undecided",
        }
    }
}

/// The interval an objective was judged on: the median of the cell's
/// per-round values and a distribution-free interval of that median
/// (docs/results.md, "Objectives").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ObjectiveInterval {
    /// Rounds with a value.
    pub rounds: usize,
    /// Median of those values, in the metric's base unit; `null` when it
    /// lies above the request timeout (a latency that is only known to be
    /// larger than any bound).
    pub median: Option<f64>,
    /// Low end of the interval; `null` above the timeout.
    pub low: Option<f64>,
    /// High end of the interval; `null` above the timeout.
    pub high: Option<f64>,
    /// The interval's coverage of the true median, a fraction: 0.95 or
    /// more from 6 rounds up; with fewer it is the min–max of the rounds,
    /// whose coverage is 1 − 2^(1−n) (0 for one round: the round's own
    /// value, 0.75 for three).
    pub coverage: f64,
}

/// One objective judged on one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ObjectiveOutcome {
    /// The cell judged.
    pub cell: CellKey,
    /// The objective.
    pub objective: Objective,
    /// Met, missed or undecided.
    pub status: ObjectiveStatus,
    /// The cell's verdict when it was judged; absent when the cell has no
    /// result.
    pub cell_status: Option<Status>,
    /// The interval judged; absent for a rejected cell or one without
    /// result (missed without a figure).
    pub interval: Option<ObjectiveInterval>,
    /// Why, in one sentence with the figures and their units.
    pub why: String,
}

impl ObjectiveOutcome {
    /// The interval for people: `4.10 ms – 4.60 ms (median 4.31 ms, 3 rounds)`.
    pub fn interval_text(&self) -> String {
        let Some(i) = &self.interval else {
            return "–".into();
        };
        let m = self.objective.metric;
        let f = |v: Option<f64>| m.format(v.unwrap_or(f64::INFINITY));
        if i.rounds == 1 {
            format!("{} (1 round)", f(i.median))
        } else {
            format!(
                "{} – {} (median {}, {} rounds)",
                f(i.low),
                f(i.high),
                f(i.median),
                i.rounds
            )
        }
    }
}
