//! Descriptive statistics over a handful of rounds: median, mean, stdev, CV,
//! min/max, outlier counts and each round's deviation from the median.
//!
//! This module owns the arithmetic and the named thresholds with their
//! sources. It knows nothing about cells, frameworks or verdicts (that is
//! `judge::gates`), and it never panics on empty or non-finite input: an empty
//! sample yields `None`.

use serde::{Deserialize, Serialize};

/// Windows an until-stable warm-up compares (the Go lab setup: CV of the last
/// 3 windows).
pub const STABLE_WINDOWS: u32 = 3;

/// Tukey's inner fence: a value more than this many interquartile ranges
/// outside the quartiles is a mild outlier. Source: J. W. Tukey, *Exploratory
/// Data Analysis* (1977); used the same way by criterion.rs (`src/stats`).
pub const TUKEY_MILD: f64 = 1.5;

/// Tukey's outer fence: beyond this many IQRs a value is a severe outlier.
/// Same source as [`TUKEY_MILD`].
pub const TUKEY_SEVERE: f64 = 3.0;

/// A value whose modified z-score exceeds this is an outlier. Source:
/// B. Iglewicz and D. Hoaglin, *How to Detect and Handle Outliers* (1993);
/// hyperfine uses the same threshold (`src/outlier_detection.rs`).
pub const MODIFIED_Z_THRESHOLD: f64 = 3.5;

/// Scale that makes the median absolute deviation comparable to a standard
/// deviation in the modified z-score (0.6745 = Φ⁻¹(0.75)). Same source as
/// [`MODIFIED_Z_THRESHOLD`].
const MAD_SCALE: f64 = 0.6745;

/// Summary of one sample (for example the throughput of each round of a cell).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Aggregate {
    /// Number of values summarised.
    pub n: usize,
    /// Median; the headline figure. For an even count, the mean of the two
    /// middle values.
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Sample standard deviation (n − 1 in the denominator); 0 for one value.
    pub stdev: f64,
    /// Coefficient of variation: stdev / mean (a fraction, not a percentage);
    /// 0 when the mean is 0.
    pub cv: f64,
    /// Relative deviation of each value from the median, in input order:
    /// (value − median) / median, a signed fraction; 0 when the median is 0.
    pub deviation_from_median: Vec<f64>,
    /// Outlier counts by Tukey's fences and by the modified z-score.
    pub outliers: Outliers,
}

/// How many values of a sample are outliers, by two common rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Outliers {
    /// Values beyond the inner Tukey fences (1.5 IQR) but within the outer ones.
    pub tukey_mild: usize,
    /// Values beyond the outer Tukey fences (3 IQR).
    pub tukey_severe: usize,
    /// Values whose modified z-score exceeds 3.5.
    pub modified_z: usize,
}

/// Median of `values`; `None` when empty or when any value is not finite.
pub fn median(values: &[f64]) -> Option<f64> {
    let sorted = sorted_finite(values)?;
    Some(quantile_sorted(&sorted, 0.5))
}

/// Arithmetic mean; `None` when empty or not finite.
pub fn mean(values: &[f64]) -> Option<f64> {
    sorted_finite(values)?;
    Some(values.iter().sum::<f64>() / values.len() as f64)
}

/// Sample standard deviation (n − 1); `Some(0.0)` for one value.
pub fn stdev(values: &[f64]) -> Option<f64> {
    let m = mean(values)?;
    if values.len() < 2 {
        return Some(0.0);
    }
    let ss: f64 = values.iter().map(|v| (v - m).powi(2)).sum();
    Some((ss / (values.len() - 1) as f64).sqrt())
}

/// Coefficient of variation (stdev / mean) as a fraction; 0 when the mean is 0.
pub fn cv(values: &[f64]) -> Option<f64> {
    let m = mean(values)?;
    let s = stdev(values)?;
    Some(if m == 0.0 { 0.0 } else { s / m.abs() })
}

/// Whether the last `n` values (there must be at least `n`) vary by no
/// more than `max_cv`: the until-stable warm-up's test.
pub fn stable(values: &[f64], n: usize, max_cv: f64) -> bool {
    n > 0 && values.len() >= n && cv(&values[values.len() - n..]).is_some_and(|c| c <= max_cv)
}

/// Relative deviation of each value from the median: (v − median) / median.
pub fn deviation_from_median(values: &[f64]) -> Option<Vec<f64>> {
    let med = median(values)?;
    Some(
        values
            .iter()
            .map(|v| if med == 0.0 { 0.0 } else { (v - med) / med })
            .collect(),
    )
}

/// Outlier counts by Tukey's fences and the modified z-score.
pub fn outliers(values: &[f64]) -> Option<Outliers> {
    let sorted = sorted_finite(values)?;
    let q1 = quantile_sorted(&sorted, 0.25);
    let q3 = quantile_sorted(&sorted, 0.75);
    let iqr = q3 - q1;
    let mut out = Outliers::default();
    for &v in &sorted {
        let beyond = if v < q1 {
            (q1 - v) / iqr
        } else if v > q3 {
            (v - q3) / iqr
        } else {
            0.0
        };
        // With iqr == 0, any value off the quartiles gives +inf: it *is* far out.
        if beyond > TUKEY_SEVERE {
            out.tukey_severe += 1;
        } else if beyond > TUKEY_MILD {
            out.tukey_mild += 1;
        }
    }
    let med = quantile_sorted(&sorted, 0.5);
    let mut abs_dev: Vec<f64> = sorted.iter().map(|v| (v - med).abs()).collect();
    abs_dev.sort_by(f64::total_cmp);
    let mad = quantile_sorted(&abs_dev, 0.5);
    if mad > 0.0 {
        out.modified_z = sorted
            .iter()
            .filter(|v| (MAD_SCALE * (*v - med) / mad).abs() > MODIFIED_Z_THRESHOLD)
            .count();
    }
    Some(out)
}

/// Every statistic at once; `None` for an empty or non-finite sample.
pub fn aggregate(values: &[f64]) -> Option<Aggregate> {
    let sorted = sorted_finite(values)?;
    Some(Aggregate {
        n: values.len(),
        median: median(values)?,
        mean: mean(values)?,
        min: sorted[0],
        max: sorted[sorted.len() - 1],
        stdev: stdev(values)?,
        cv: cv(values)?,
        deviation_from_median: deviation_from_median(values)?,
        outliers: outliers(values)?,
    })
}

/// Confidence asked of [`median_interval`]: 95%, the level `compare` uses.
pub const MEDIAN_INTERVAL_CONFIDENCE: f64 = 0.95;

/// A median with a distribution-free interval around it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianInterval {
    /// Values in the sample.
    pub n: usize,
    /// The sample median.
    pub median: f64,
    /// Low end: the k-th smallest value.
    pub low: f64,
    /// High end: the k-th largest value.
    pub high: f64,
    /// Probability that [low, high] holds the true median, whatever the
    /// distribution: 1 − 2·P(Binomial(n, ½) < k).
    pub coverage: f64,
}

/// The order-statistic interval of the median: the widest-inward pair
/// (k-th smallest, k-th largest) whose coverage is at least `confidence`.
/// It assumes only that the values are independent draws of one
/// distribution (rounds are), not that it is normal, so a single slow
/// round cannot drag it the way it drags a t interval. With too few values
/// for that coverage (fewer than 6 at 95%) it is the min–max, and says how
/// much it covers (1 − 2^(1−n): 0.75 for 3 values, 0 for one, where the
/// interval is that value). Source: the sign-test interval, e.g.
/// Conover, *Practical Nonparametric Statistics* (1999), §3.2.
/// `+∞` is allowed (a latency known only to exceed the timeout); `None`
/// when empty or when a value is NaN.
pub fn median_interval(values: &[f64], confidence: f64) -> Option<MedianInterval> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    // P(Binomial(n, 1/2) <= j), exactly, for small n.
    let cdf = |j: usize| -> f64 {
        let mut c = 1.0f64; // C(n, 0)
        let mut sum = 0.0;
        for i in 0..=j {
            if i > 0 {
                c = c * (n - i + 1) as f64 / i as f64;
            }
            sum += c;
        }
        sum / 2f64.powi(n as i32)
    };
    // (x(k), x(n+1-k)) misses the median when fewer than k values lie on
    // one side of it: coverage 1 - 2 P(B <= k-1); for k = 1, 1 - 2^(1-n).
    let cover = |k: usize| 1.0 - 2.0 * cdf(k - 1);
    let mut k = 1;
    while k < n.div_ceil(2) && cover(k + 1) >= confidence {
        k += 1;
    }
    Some(MedianInterval {
        n,
        median,
        low: sorted[k - 1],
        high: sorted[n - k],
        coverage: cover(k).max(0.0),
    })
}

fn sorted_finite(values: &[f64]) -> Option<Vec<f64>> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(sorted)
}

/// Linear-interpolated quantile (type 7, the R and NumPy default) of a sorted,
/// non-empty slice.
fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn stdev_is_the_sample_standard_deviation() {
        // 2,4,4,4,5,5,7,9: population sd 2, sample sd sqrt(32/7).
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert!(close(stdev(&v).unwrap(), (32.0f64 / 7.0).sqrt()));
        assert_eq!(stdev(&[5.0]), Some(0.0));
        assert!(close(cv(&v).unwrap(), (32.0f64 / 7.0).sqrt() / 5.0));
    }

    #[test]
    fn deviation_is_signed_and_relative_to_the_median() {
        let d = deviation_from_median(&[100.0, 110.0, 80.0]).unwrap();
        assert!(
            close(d[0], 0.0) && close(d[1], 0.10) && close(d[2], -0.20),
            "{d:?}"
        );
    }

    #[test]
    fn counts_a_far_value_as_an_outlier_by_both_rules() {
        let v = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 160.0];
        let o = outliers(&v).unwrap();
        assert_eq!(o.tukey_severe, 1, "{o:?}");
        assert_eq!(o.modified_z, 1, "{o:?}");
        let calm = outliers(&[100.0, 101.0, 99.0, 100.5, 99.5]).unwrap();
        assert_eq!(calm, Outliers::default());
    }

    #[test]
    fn aggregate_gathers_everything() {
        let a = aggregate(&[10.0, 12.0, 11.0]).unwrap();
        assert_eq!((a.n, a.median, a.min, a.max), (3, 11.0, 10.0, 12.0));
        assert!(close(a.mean, 11.0) && close(a.stdev, 1.0));
        assert!(close(a.cv, 1.0 / 11.0));
        assert_eq!(aggregate(&[]), None);
    }

    #[test]
    fn median_interval_is_min_max_below_six_values_and_says_its_coverage() {
        let one = median_interval(&[4.0], 0.95).unwrap();
        assert_eq!(
            (one.low, one.median, one.high, one.coverage),
            (4.0, 4.0, 4.0, 0.0)
        );
        let three = median_interval(&[3.0, 1.0, 2.0], 0.95).unwrap();
        assert_eq!((three.low, three.median, three.high), (1.0, 2.0, 3.0));
        assert!(close(three.coverage, 0.75));
        let five = median_interval(&[5.0, 1.0, 4.0, 2.0, 3.0], 0.95).unwrap();
        assert!(close(five.coverage, 1.0 - 2.0 / 32.0));
        assert_eq!((five.low, five.high), (1.0, 5.0));
    }

    #[test]
    fn median_interval_moves_inwards_once_the_coverage_allows() {
        // n = 10: (x2, x9) covers 1 - 2·11/1024 = 97.9%, (x3, x8) 89%.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let i = median_interval(&v, 0.95).unwrap();
        assert_eq!((i.low, i.high), (2.0, 9.0));
        assert!(close(i.coverage, 1.0 - 22.0 / 1024.0), "{}", i.coverage);
        assert_eq!(i.median, 5.5);
    }

    #[test]
    fn median_interval_keeps_values_beyond_the_timeout_as_infinite() {
        let i = median_interval(&[1.0, f64::INFINITY, 2.0], 0.95).unwrap();
        assert_eq!((i.median, i.high), (2.0, f64::INFINITY));
        assert!(median_interval(&[1.0, f64::NAN], 0.95).is_none());
        assert!(median_interval(&[], 0.95).is_none());
    }
}
