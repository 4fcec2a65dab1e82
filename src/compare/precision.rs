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
use crate::results::{Cell, Precision, Results, RunPrecision, Status};

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

/// The half-width `p` would reach after `more` rounds of the same spread:
/// the spread backed out of `p` (Student's t over its rounds), then the
/// interval over `p.rounds + more` rounds. What a budget expects to buy.
pub fn projected(p: &Precision, more: u32) -> f64 {
    if p.rounds < 2 || more == 0 {
        return p.reached;
    }
    let n = f64::from(p.rounds);
    let later = n + f64::from(more);
    let half = p.reached.ln_1p();
    let spread = half * n.sqrt() / stats::t_quantile(n - 1.0, p.confidence);
    (stats::t_quantile(later - 1.0, p.confidence) * spread / later.sqrt()).exp_m1()
}

/// Give every cell of `results` its precision, against the profile's ask.
pub fn assign(results: &mut Results) {
    let asked = results.profile.rounds.precision();
    for c in &mut results.cells {
        c.precision = of(c, asked);
    }
    results.precision = of_run(results);
}

/// The run's two figures of precision: the median of its cells' interval
/// half-widths and of their rank groups' widths (ranks assigned first);
/// `None` before any cell.
pub fn of_run(results: &Results) -> Option<RunPrecision> {
    if results.cells.is_empty() {
        return None;
    }
    let intervals: Vec<f64> = results
        .cells
        .iter()
        .filter_map(|c| c.precision.as_ref().map(|p| p.reached))
        .collect();
    let ranks: Vec<&crate::results::RankGroup> = results
        .cells
        .iter()
        .filter_map(|c| c.rank.as_ref())
        .collect();
    let widths: Vec<f64> = ranks
        .iter()
        .map(|g| f64::from(g.high - g.low + 1))
        .collect();
    Some(RunPrecision {
        cells: results.cells.len() as u32,
        with_interval: intervals.len() as u32,
        median_interval: crate::stats::median(&intervals),
        ranked: ranks.len() as u32,
        median_rank_width: crate::stats::median(&widths),
        paired: !ranks.is_empty() && ranks.iter().all(|g| g.paired),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::RankGroup;

    fn group(low: u32, high: u32, paired: bool) -> Option<RankGroup> {
        Some(RankGroup {
            low,
            high,
            of: 4,
            by: "req/s".into(),
            pair_confidence: 0.99,
            paired,
        })
    }

    #[test]
    fn more_rounds_of_the_same_spread_narrow_the_interval_as_t_and_root_n_say() {
        // 3 rounds of log-spread 0.04: half-width t(2)·0.04/√3 = 0.0993;
        // 10 rounds: t(9)·0.04/√10 = 2.262·0.01265 = 0.0286.
        let half3 = 4.302_652_7 * 0.04 / 3f64.sqrt();
        let p = Precision {
            by: "req/s".into(),
            unit: "req/s".into(),
            confidence: 0.95,
            rounds: 3,
            low: 0.0,
            high: 0.0,
            reached: half3.exp_m1(),
            asked: Some(0.02),
        };
        let half10 = 2.262_157_2 * 0.04 / 10f64.sqrt();
        assert!((projected(&p, 7) - half10.exp_m1()).abs() < 1e-6);
        assert_eq!(projected(&p, 0), p.reached);
    }

    #[test]
    fn the_run_figures_are_the_medians_of_its_cells() {
        let mut r = crate::testdata::sample_results();
        assert!(
            r.cells.len() >= 4,
            "the sample has cells to take medians of"
        );
        crate::compare::rank::assign(&mut r);
        assign(&mut r);
        // Known widths and intervals set by hand over the sample's cells.
        let n = r.cells.len();
        for (i, c) in r.cells.iter_mut().enumerate() {
            c.rank = None;
            if let Some(p) = c.precision.as_mut() {
                p.reached = 0.01 * (i + 1) as f64;
            }
        }
        r.cells[0].rank = group(1, 1, true);
        r.cells[1].rank = group(1, 3, true);
        r.cells[2].rank = group(2, 4, true);
        let p = of_run(&r).unwrap();
        assert_eq!(p.cells, n as u32);
        assert_eq!((p.ranked, p.median_rank_width), (3, Some(3.0)));
        assert!(p.paired);
        let reached: Vec<f64> = r
            .cells
            .iter()
            .filter_map(|c| c.precision.as_ref().map(|p| p.reached))
            .collect();
        assert_eq!(p.with_interval, reached.len() as u32);
        assert_eq!(p.median_interval, crate::stats::median(&reached));
        r.cells[3].rank = group(2, 3, false);
        let p = of_run(&r).unwrap();
        assert_eq!(p.median_rank_width, Some(2.5));
        assert!(!p.paired);
        assert!(
            p.sentence()
                .contains("rank groups 2.5 places wide at the median (4 cells ranked)"),
            "{}",
            p.sentence()
        );
        r.cells.clear();
        assert_eq!(of_run(&r), None);
    }
}
