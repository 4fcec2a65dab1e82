//! The verdict on one metric of one cell: improved, regressed, within noise
//! or inconclusive, with the noise band it was held to and the reason in
//! words.
//!
//! The rule is criterion.rs's: a change is named only when the whole
//! confidence interval lies outside the noise band; anything else is within
//! noise. The band is not a fixed percentage: it is how far apart the best
//! and worst rounds of one side are (the wider of the two sides, or the
//! typical such range of the same metric over every cell compared,
//! whichever is larger): a change smaller than the disagreement between
//! rounds of one run is noise. This file decides; it computes no interval
//! (`compare::stats`) and formats no table.

use serde::{Deserialize, Serialize};

use super::figures::{Better, Metric};
use super::stats::Estimate;

/// What a comparison concluded about one metric of one cell.
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
pub enum Call {
    /// NEW is worse than BASE: the whole interval is beyond the band on the
    /// worse side. Listed first.
    Regressed,
    /// NEW is better than BASE: the whole interval is beyond the band on the
    /// better side.
    Improved,
    /// The interval reaches into the band: no change larger than the noise
    /// could be shown.
    WithinNoise,
    /// Too few rounds (or no positive value) to form an interval.
    Inconclusive,
}

impl Call {
    /// The word a table shows.
    pub fn word(self) -> &'static str {
        match self {
            Call::Regressed => "regressed",
            Call::Improved => "improved",
            Call::WithinNoise => "within noise",
            Call::Inconclusive => "inconclusive",
        }
    }
}

/// The smallest band, a fraction: a change below 1% is never named, however
/// precisely it was measured. Source: criterion.rs's default noise
/// threshold (±1%). The rounds of a run cannot see drift between runs
/// (where the kernel put the server's memory, cache and frequency state),
/// and a figure as steady as CPU per request can have rounds within 0.5% of
/// each other while two runs of the same server differ by more.
pub const MIN_BAND: f64 = 0.01;

/// The noise band of one metric of one cell, as a fraction: a ratio between
/// 1/(1 + band) and 1 + band is noise (the band is symmetric in log space,
/// like the interval). `run_floor` is a log range too. A figure that does
/// not vary at all (no spread on either side) has no floor: its ratio is
/// exact, so any change is real.
pub fn band(e: &Estimate, run_floor: f64) -> f64 {
    let measured = e.band_range().max(run_floor);
    if e.low == e.high {
        return measured.exp() - 1.0;
    }
    (measured.exp() - 1.0).max(MIN_BAND)
}

/// Judge `metric` by its estimate and band; the call and why, in words.
pub fn judge(metric: Metric, e: &Estimate, band: f64) -> (Call, String) {
    let edge = (1.0 + band).ln();
    let (lo, hi) = (e.low.ln(), e.high.ln());
    let interval = format!("95% interval ×{:.3}–×{:.3}", e.low, e.high);
    let band_words = format!("noise band ±{:.1}%", band * 100.0);
    let higher = if lo > edge {
        Some(true)
    } else if hi < -edge {
        Some(false)
    } else {
        None
    };
    match higher {
        None => (
            Call::WithinNoise,
            format!("{interval} reaches into the {band_words}"),
        ),
        Some(up) => {
            let better = (metric.better() == Better::Higher) == up;
            let call = if better {
                Call::Improved
            } else {
                Call::Regressed
            };
            let side = if up { "above" } else { "below" };
            (
                call,
                format!("{interval} lies wholly {side} the {band_words}"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(ratio: f64, low: f64, high: f64, range: f64) -> Estimate {
        Estimate {
            ratio,
            low,
            high,
            df: 4.0,
            spread_base: range / 2.0,
            spread_new: range / 4.0,
            range_base: range,
            range_new: range / 2.0,
            range_ratio: None,
        }
    }

    #[test]
    fn names_a_change_only_when_the_whole_interval_clears_the_band() {
        let e = est(0.80, 0.78, 0.82, 0.03);
        let b = band(&e, 0.0);
        assert!((b - (0.03f64.exp() - 1.0)).abs() < 1e-12);
        // Rounds within 0.2% of each other still get a 1% band.
        assert_eq!(band(&est(1.0, 0.999, 1.001, 0.002), 0.0), MIN_BAND);
        assert_eq!(judge(Metric::Throughput, &e, b).0, Call::Regressed);
        assert_eq!(judge(Metric::CpuPerRequest, &e, b).0, Call::Improved);
        let up = est(1.25, 1.2, 1.3, 0.03);
        assert_eq!(judge(Metric::LatencyP99, &up, b).0, Call::Regressed);
        assert_eq!(judge(Metric::Throughput, &up, b).0, Call::Improved);
    }

    #[test]
    fn an_interval_touching_the_band_is_within_noise() {
        // Point estimate 10% down, but the interval reaches 0.975, inside a
        // ±3% band.
        let e = est(0.90, 0.83, 0.975, 0.03);
        let (call, why) = judge(Metric::Throughput, &e, band(&e, 0.0));
        assert_eq!(call, Call::WithinNoise);
        assert!(
            why.contains("reaches into") && why.contains("±3.0%"),
            "{why}"
        );
    }

    #[test]
    fn the_run_floor_widens_the_band_of_a_cell_that_was_quiet_by_chance() {
        let e = est(0.95, 0.94, 0.96, 0.005);
        assert_eq!(
            judge(Metric::Throughput, &e, band(&e, 0.0)).0,
            Call::Regressed
        );
        let wide = band(&e, 0.08);
        assert_eq!(judge(Metric::Throughput, &e, wide).0, Call::WithinNoise);
    }
}
