//! The statistics of a comparison: the ratio NEW/BASE of one metric in one
//! cell, its confidence interval, and the round-to-round range of each side
//! that the noise band is made of (docs/compare.md explains the choice).
//!
//! Rounds are the independent unit: each round is its own warm-up and
//! window (and, with `restart_between_rounds`, its own server start), while
//! the per-second windows inside a round share all of that and are
//! autocorrelated. So each side is one value per round, and the interval is
//! Welch's t interval on the logarithms of those values: the difference of
//! log means is the log of the ratio of geometric means, logs make a
//! multiplicative change symmetric (×0.8 and ×1.25 are equally far from 1),
//! and the t quantile with Welch–Satterthwaite degrees of freedom widens the
//! interval honestly when a side has only three rounds (a bootstrap of three
//! values has ten distinct resamples and under-covers).
//!
//! Where a round's value is the mean of per-second windows (req/s), the
//! windows give a floor under the round-to-round variance: a round's mean of
//! W windows varies at least as much as var(window)/W, so three rounds that
//! happen to agree closely cannot shrink the interval and the band below
//! what the seconds inside them show.
//!
//! Everything here is deterministic arithmetic (no resampling, no seed);
//! it judges nothing: verdicts are `compare::verdict`.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::stats;

/// Confidence level of the interval on the ratio.
pub const CONFIDENCE: f64 = 0.95;

/// Fewest rounds per side for an interval and a band: with two, the spread
/// rests on one difference (one degree of freedom, t₀.₉₇₅ = 12.7) and says
/// nothing; three is what the default profile runs ("the least that gives a
/// median and a spread", profile::DEFAULT_ROUNDS).
pub const MIN_ROUNDS: usize = 3;

/// One side of a comparison: a metric's value in each round, and the floor
/// that the round's windows put under their variance.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sample {
    /// The metric's value in each round (positive; the unit of the metric).
    pub values: Vec<f64>,
    /// Variance of the log of a round's value implied by the windows inside
    /// the rounds (mean over rounds of var(window)/mean(window)² / windows);
    /// 0 when the metric has no windows.
    pub window_floor: f64,
    /// Windows counted over all rounds (0 when the metric has none).
    pub windows: usize,
    /// The index of the round each value comes from, in the same order
    /// (empty when not known): what pairs a value with the other side's
    /// value of the same round ([`paired_estimate_at`]).
    pub rounds: Vec<u32>,
}

impl Sample {
    /// A sample of round values without windows.
    pub fn of_rounds(values: Vec<f64>) -> Sample {
        Sample {
            values,
            ..Sample::default()
        }
    }

    /// A sample of round values, each the mean of the `windows` given for
    /// that round (one slice per round, in the same order).
    pub fn with_windows(values: Vec<f64>, windows: &[&[f64]]) -> Sample {
        let per_round: Vec<f64> = windows
            .iter()
            .filter_map(|w| {
                let m = stats::mean(w)?;
                let sd = stats::stdev(w)?;
                (m > 0.0 && w.len() >= 2).then(|| (sd / m).powi(2) / w.len() as f64)
            })
            .collect();
        Sample {
            values,
            window_floor: stats::mean(&per_round).unwrap_or(0.0),
            windows: windows.iter().map(|w| w.len()).sum(),
            rounds: Vec::new(),
        }
    }

    /// The same sample with the round index of each value.
    pub fn of_rounds_numbered(mut self, rounds: Vec<u32>) -> Sample {
        debug_assert_eq!(rounds.len(), self.values.len());
        self.rounds = rounds;
        self
    }
}

/// The ratio NEW/BASE and what it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// Ratio of geometric means, NEW / BASE.
    pub ratio: f64,
    /// Lower end of the [`CONFIDENCE`] interval on the ratio.
    pub low: f64,
    /// Upper end of the interval.
    pub high: f64,
    /// Welch–Satterthwaite degrees of freedom of the interval (infinite when
    /// neither side varies).
    pub df: f64,
    /// Round-to-round standard deviation of the log values of BASE (after
    /// the window floor): its relative spread, as the interval uses it.
    pub spread_base: f64,
    /// The same for NEW.
    pub spread_new: f64,
    /// Largest minus smallest log round value of BASE: how far apart its
    /// best and worst rounds are (a relative distance). The noise band.
    pub range_base: f64,
    /// The same for NEW.
    pub range_new: f64,
    /// Paired ([`paired_estimate_at`]): largest minus smallest per-block
    /// log ratio, the noise band of a pair whose blocks share the
    /// machine's drift (each side's own range carries that drift); `None`
    /// for Welch's interval.
    pub range_ratio: Option<f64>,
}

impl Estimate {
    /// The range the noise band is made of: the per-block ratios' when
    /// paired, else the wider side's.
    pub fn band_range(&self) -> f64 {
        self.range_ratio
            .unwrap_or_else(|| self.range_base.max(self.range_new))
    }
}

/// Why a metric of a cell could not be estimated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Insufficient {
    /// A side has fewer rounds with this figure than [`MIN_ROUNDS`].
    #[error(
        "{base} round(s) in BASE and {new} in NEW; at least {MIN_ROUNDS} per side give a spread"
    )]
    TooFewRounds {
        /// Rounds with a value in BASE.
        base: usize,
        /// Rounds with a value in NEW.
        new: usize,
    },
    /// A value is zero, negative or not finite: no ratio can be formed.
    #[error("a round's value is {value} (not positive): no ratio can be formed")]
    NotPositive {
        /// The offending value.
        value: f64,
    },
}

/// The paired interval on the log ratio of `new` to `base` at
/// `confidence`, from the rounds both sides measured under the same index:
/// the t interval (n − 1 degrees of freedom) on the mean of the per-round
/// log ratios. It is the right one where round *i* of both sides ran side
/// by side in time (`interleave_rounds`: round *i* of every framework is one
/// block): a slow phase of the machine that lands on a block moves both
/// sides and cancels from their ratio, where Welch's interval on the two
/// sides' spreads counts it twice. The variance of the ratios is floored by
/// the two sides' window floors together, as Welch's is. `Err` when fewer
/// than [`MIN_ROUNDS`] rounds pair up.
pub fn paired_estimate_at(
    base: &Sample,
    new: &Sample,
    confidence: f64,
) -> Result<Estimate, Insufficient> {
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    for (r, &b) in base.rounds.iter().zip(&base.values) {
        if let Some(j) = new.rounds.iter().position(|x| x == r) {
            pairs.push((b, new.values[j]));
        }
    }
    let n = pairs.len();
    if n < MIN_ROUNDS {
        return Err(Insufficient::TooFewRounds { base: n, new: n });
    }
    let lx = logs(&pairs.iter().map(|p| p.0).collect::<Vec<_>>())?;
    let ly = logs(&pairs.iter().map(|p| p.1).collect::<Vec<_>>())?;
    let d: Vec<f64> = lx.iter().zip(&ly).map(|(x, y)| y - x).collect();
    let md = stats::mean(&d).unwrap_or(0.0);
    let vd = stats::stdev(&d)
        .unwrap_or(0.0)
        .powi(2)
        .max(base.window_floor + new.window_floor);
    let df = (n - 1) as f64;
    let half = if vd > 0.0 {
        t_quantile(df, confidence) * (vd / n as f64).sqrt()
    } else {
        0.0
    };
    Ok(Estimate {
        ratio: md.exp(),
        low: (md - half).exp(),
        high: (md + half).exp(),
        df: if vd > 0.0 { df } else { f64::INFINITY },
        spread_base: stats::stdev(&lx).unwrap_or(0.0),
        spread_new: stats::stdev(&ly).unwrap_or(0.0),
        range_base: range(&lx),
        range_new: range(&ly),
        range_ratio: Some(range(&d)),
    })
}

/// Welch's interval on the log ratio of `new` to `base`, at [`CONFIDENCE`].
pub fn estimate(base: &Sample, new: &Sample) -> Result<Estimate, Insufficient> {
    estimate_at(base, new, CONFIDENCE)
}

/// The same at `confidence` (rank groups take each of many pairs at a
/// higher one).
pub fn estimate_at(base: &Sample, new: &Sample, confidence: f64) -> Result<Estimate, Insufficient> {
    let (nx, ny) = (base.values.len(), new.values.len());
    if nx < MIN_ROUNDS || ny < MIN_ROUNDS {
        return Err(Insufficient::TooFewRounds { base: nx, new: ny });
    }
    let lx = logs(&base.values)?;
    let ly = logs(&new.values)?;
    // Both have ≥ MIN_ROUNDS finite values, so these are Some.
    let (mx, my) = (
        stats::mean(&lx).unwrap_or(0.0),
        stats::mean(&ly).unwrap_or(0.0),
    );
    let vx = stats::stdev(&lx)
        .unwrap_or(0.0)
        .powi(2)
        .max(base.window_floor);
    let vy = stats::stdev(&ly)
        .unwrap_or(0.0)
        .powi(2)
        .max(new.window_floor);
    let (ax, ay) = (vx / nx as f64, vy / ny as f64);
    let se2 = ax + ay;
    let d = my - mx;
    let (half, df) = if se2 > 0.0 {
        let df = se2 * se2 / (ax * ax / (nx - 1) as f64 + ay * ay / (ny - 1) as f64);
        (t_quantile(df, confidence) * se2.sqrt(), df)
    } else {
        // Neither side varies at all (wire bytes of a fixed answer): the
        // ratio is exact.
        (0.0, f64::INFINITY)
    };
    Ok(Estimate {
        ratio: d.exp(),
        low: (d - half).exp(),
        high: (d + half).exp(),
        df,
        spread_base: vx.sqrt(),
        spread_new: vy.sqrt(),
        range_base: range(&lx),
        range_new: range(&ly),
        range_ratio: None,
    })
}

/// One side on its own: where its figure lies, at `confidence`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Location {
    /// Rounds the interval rests on.
    pub rounds: usize,
    /// Geometric mean of the round values: the centre of the interval.
    pub center: f64,
    /// Lower end of the interval.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

impl Location {
    /// Half the interval's width relative to its centre, a fraction: the
    /// interval is centre ×/÷ (1 + precision), so 0.02 reads "±2%".
    pub fn precision(&self) -> f64 {
        self.high / self.center - 1.0
    }
}

/// Student's t interval on the mean of the logs of one side's round values
/// (floored by its windows as [`estimate`] floors them), at `confidence`:
/// the one-sample form of the interval `compare` puts on a ratio, so a
/// cell's own precision and its comparison with another rest on the same
/// arithmetic. `None` below [`MIN_ROUNDS`] or for a value that is not
/// positive. Not the median's order-statistic interval
/// (`crate::stats::median_interval`): below six rounds that one is the
/// min–max and covers 75–94%, never 95%.
pub fn location(sample: &Sample, confidence: f64) -> Option<Location> {
    let n = sample.values.len();
    if n < MIN_ROUNDS {
        return None;
    }
    let l = logs(&sample.values).ok()?;
    let m = stats::mean(&l)?;
    let var = stats::stdev(&l)?.powi(2).max(sample.window_floor);
    let half = t_quantile((n - 1) as f64, confidence) * (var / n as f64).sqrt();
    Some(Location {
        rounds: n,
        center: m.exp(),
        low: (m - half).exp(),
        high: (m + half).exp(),
    })
}

/// The two-sided `confidence` quantile of Student's t with `df` degrees
/// of freedom.
pub(crate) fn t_quantile(df: f64, confidence: f64) -> f64 {
    let p = 1.0 - (1.0 - confidence) / 2.0;
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) if df.is_finite() => t.inverse_cdf(p),
        // Infinite degrees of freedom: the normal quantile.
        _ => statrs::distribution::Normal::standard().inverse_cdf(p),
    }
}

fn range(values: &[f64]) -> f64 {
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    max - min
}

fn logs(values: &[f64]) -> Result<Vec<f64>, Insufficient> {
    values
        .iter()
        .map(|&v| {
            if v > 0.0 && v.is_finite() {
                Ok(v.ln())
            } else {
                Err(Insufficient::NotPositive { value: v })
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn a_paired_interval_cancels_what_each_block_shares_and_pairs_by_round() {
        // Blocks at 100, 200, 300 (the machine's speed); NEW 10% above in
        // each: the ratio is exact, however far the blocks drift.
        let base = Sample::of_rounds(vec![100.0, 200.0, 300.0]).of_rounds_numbered(vec![0, 1, 2]);
        let new = Sample::of_rounds(vec![330.0, 110.0, 220.0]).of_rounds_numbered(vec![2, 0, 1]);
        let e = paired_estimate_at(&base, &new, CONFIDENCE).unwrap();
        assert!(close(e.ratio, 1.1, 1e-12), "{e:?}");
        assert!(
            close(e.low, 1.1, 1e-12) && close(e.high, 1.1, 1e-12),
            "{e:?}"
        );
        // Welch's interval on the same rounds reaches far past ×1.1.
        let w = estimate(&base, &new).unwrap();
        assert!(w.low < 0.5 && w.high > 2.0, "{w:?}");
        // Known answer with spread: log ratios 0.1, 0.12, 0.08 → mean 0.1,
        // sd 0.02, half-width t(2) 4.303 × 0.02/√3.
        let new = Sample::of_rounds(vec![
            100.0 * 0.1f64.exp(),
            200.0 * 0.12f64.exp(),
            300.0 * 0.08f64.exp(),
        ])
        .of_rounds_numbered(vec![0, 1, 2]);
        let e = paired_estimate_at(&base, &new, CONFIDENCE).unwrap();
        let half = 4.302_653 * 0.02 / 3f64.sqrt();
        assert!(close(e.low.ln(), 0.1 - half, 1e-5), "{e:?}");
        assert!(close(e.high.ln(), 0.1 + half, 1e-5), "{e:?}");
        assert_eq!(e.df, 2.0);
        // Rounds only one side kept do not pair: two in common are too few.
        let new = Sample::of_rounds(vec![110.0, 220.0, 440.0]).of_rounds_numbered(vec![0, 1, 3]);
        assert_eq!(
            paired_estimate_at(&base, &new, CONFIDENCE),
            Err(Insufficient::TooFewRounds { base: 2, new: 2 })
        );
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        // Student's t, two-sided 95%: df 4 → 2.776, df 10 → 2.228; normal 1.960.
        assert!(close(t_quantile(4.0, CONFIDENCE), 2.776, 1e-3));
        assert!(close(t_quantile(10.0, CONFIDENCE), 2.228, 1e-3));
        assert!(close(t_quantile(f64::INFINITY, CONFIDENCE), 1.960, 1e-3));
        // Two-sided 99%, df 4: 4.604.
        assert!(close(t_quantile(4.0, 0.99), 4.604, 1e-3));
    }

    #[test]
    fn location_known_answer_and_its_precision() {
        // logs 0, ±0.02 around ln 100: sd 0.02, n 3, df 2, t 4.303.
        let v: Vec<f64> = [0.0, 0.02, -0.02]
            .iter()
            .map(|x| 100.0 * f64::exp(*x))
            .collect();
        let l = location(&Sample::of_rounds(v), CONFIDENCE).unwrap();
        let half = 4.302_653 * 0.02 / 3f64.sqrt();
        assert!(close(l.center, 100.0, 1e-9), "{l:?}");
        assert!(close(l.high, 100.0 * half.exp(), 1e-4), "{l:?}");
        assert!(close(l.low, 100.0 * (-half).exp(), 1e-4), "{l:?}");
        assert!(close(l.precision(), half.exp() - 1.0, 1e-6), "{l:?}");
        assert_eq!(
            location(&Sample::of_rounds(vec![1.0, 2.0]), CONFIDENCE),
            None
        );
        assert_eq!(
            location(&Sample::of_rounds(vec![1.0, 0.0, 2.0]), CONFIDENCE),
            None
        );
    }

    #[test]
    fn identical_samples_give_ratio_one_and_an_interval_around_it() {
        let s = Sample::of_rounds(vec![100.0, 104.0, 97.0]);
        let e = estimate(&s, &s).unwrap();
        assert!(close(e.ratio, 1.0, 1e-12));
        assert!(e.low < 1.0 && e.high > 1.0, "{e:?}");
        // Symmetric in log space.
        assert!(close(e.low * e.high, 1.0, 1e-12), "{e:?}");
    }

    #[test]
    fn known_answer_welch_interval() {
        // logs of base: ln 100, ln 100·e^0.02, ln 100·e^-0.02 → sd 0.02;
        // new is the same ×0.8. se = 0.02·sqrt(2/3), df = 4, t = 2.776.
        let base: Vec<f64> = [0.0, 0.02, -0.02]
            .iter()
            .map(|x| 100.0 * f64::exp(*x))
            .collect();
        let new: Vec<f64> = base.iter().map(|v| v * 0.8).collect();
        let e = estimate(&Sample::of_rounds(base), &Sample::of_rounds(new)).unwrap();
        let half = 2.776_445 * 0.02 * (2.0f64 / 3.0).sqrt();
        assert!(close(e.ratio, 0.8, 1e-12));
        assert!(close(e.df, 4.0, 1e-9), "{}", e.df);
        assert!(close(e.low, 0.8 * (-half).exp(), 1e-5), "{e:?}");
        assert!(close(e.high, 0.8 * half.exp(), 1e-5), "{e:?}");
        assert!(close(e.spread_base, 0.02, 1e-12));
        assert!(close(e.range_base, 0.04, 1e-12) && close(e.range_new, 0.04, 1e-12));
    }

    #[test]
    fn windows_floor_the_spread_of_rounds_that_agree_by_chance() {
        let rounds = vec![1000.0, 1000.0, 1000.0];
        let w: [f64; 4] = [900.0, 1100.0, 900.0, 1100.0];
        let s = Sample::with_windows(rounds.clone(), &[&w, &w, &w]);
        // var(w)/mean² = (115.47/1000)² = 0.013333; / 4 windows = 0.0033333.
        assert!(close(s.window_floor, 0.013_333_3 / 4.0, 1e-6), "{s:?}");
        assert_eq!(s.windows, 12);
        let e = estimate(&s, &s).unwrap();
        assert!(close(e.spread_base, (0.013_333_3f64 / 4.0).sqrt(), 1e-6));
        assert!(e.low < 0.95, "the floor widens the interval: {e:?}");
        // Without windows, identical rounds give an exact ratio.
        let bare = Sample::of_rounds(rounds);
        let e = estimate(&bare, &bare).unwrap();
        assert_eq!((e.low, e.high), (1.0, 1.0));
    }

    #[test]
    fn too_few_rounds_or_a_zero_value_give_no_estimate() {
        let two = Sample::of_rounds(vec![1.0, 2.0]);
        let three = Sample::of_rounds(vec![1.0, 2.0, 3.0]);
        assert_eq!(
            estimate(&two, &three),
            Err(Insufficient::TooFewRounds { base: 2, new: 3 })
        );
        let zero = Sample::of_rounds(vec![1.0, 0.0, 3.0]);
        assert!(matches!(
            estimate(&three, &zero),
            Err(Insufficient::NotPositive { .. })
        ));
    }
}
