//! A cell's own precision: where its rounds place its headline figure (the
//! figure rank groups rank by: req/s in a closed loop, p99 at a fixed
//! rate), as a 95% interval, and whether that is as narrow as the
//! profile's `rounds: {precision}` asks. The run reads it after every
//! round to decide whether a cell needs another (`bench::execute`); the
//! reports print it beside the figure.
//!
//! The interval is [`stats::location`]: the one-sample form of the
//! interval `compare` and rank groups put on a ratio, over the same clean
//! rounds (rounds on a busy host or a slowed machine left out) with the same per-second floor, so
//! "precise to ±2%" and "apart from its neighbour" rest on one arithmetic.

use super::stats::{self, CONFIDENCE};
use crate::results::{Cell, Precision, Results, Status};

/// The precision of `cell`'s headline figure, judged against `asked`;
/// `None` for a rejected cell or below [`stats::MIN_ROUNDS`] clean rounds.
pub fn of(cell: &Cell, asked: Option<f64>) -> Option<Precision> {
    if cell.verdict.status == Status::Rejected {
        return None;
    }
    let metric = super::rank::headline(cell);
    let at = stats::location(&super::sample(metric, cell), CONFIDENCE)?;
    Some(Precision {
        by: metric.label().to_string(),
        unit: metric.unit().to_string(),
        confidence: CONFIDENCE,
        rounds: at.rounds as u32,
        low: at.low,
        high: at.high,
        reached: at.precision(),
        asked,
    })
}

/// Give every cell of `results` its precision, against the profile's ask.
pub fn assign(results: &mut Results) {
    let asked = results.profile.rounds.precision();
    for c in &mut results.cells {
        c.precision = of(c, asked);
    }
}
