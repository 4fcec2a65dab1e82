//! Answers that arrive in waves, and a rate that does not depend on where
//! the window's edges fall among them.
//!
//! Some servers answer every connection once per sweep of their event loop:
//! completions come in waves a period P apart, and a window holds a whole
//! number of waves. Answers ÷ window then depends on the window's phase by
//! up to one wave (±20% for a 5 s window of 1 s waves). The loader counts
//! 2xx completions in fine bins ([`bin_ns`]); after the run [`analyse`]
//! finds the waves' period from the series' autocorrelation and reads the
//! rate through a window tapered over one period at each edge. That is the
//! mean, over every phase in one period, of answers ÷ (W − P) in a window
//! of length W − P: for a periodic series exactly C/P whatever the phase,
//! and for a steady series the plain rate.
//!
//! Owns: the detection and the tapered rate. Must not: count anything (the
//! hot path keeps the bins, see `conn::Worker::answered`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Finest bin of the completion series, ns.
pub const FINEST_BIN_NS: u64 = 10_000_000;

/// Most bins one window is cut into: a long window gets wider bins, so the
/// series and its autocorrelation stay small (and O(n²) stays cheap).
pub const MAX_BINS: u64 = 8_000;

/// Shortest period called a burst: waves closer together than this move a
/// window's count by less than one wave in a hundred of a one-second
/// window, well inside any round-to-round noise.
pub const MIN_PERIOD_NS: u64 = 50_000_000;

/// Autocorrelation at the period needed to call the series periodic. A
/// steady server's bins are close to independent (|r| ≈ 1/√n, a few
/// hundredths for a one-second window); waves give r near 1.
pub const MIN_PERIODICITY: f64 = 0.5;

/// Share of the answers that must fall in the busiest quarter of the
/// period to call them waves (folded over the window at the period): 1 for
/// sharp waves, about 1/4 for steady answers, under 1/2 for a rate that only
/// swings up and down (a busy host's CPU contention did that here, with an
/// autocorrelation of 0.55 at 460 ms).
pub const MIN_CONCENTRATION: f64 = 0.6;

/// Fewest 2xx answers in the window to look for waves at all.
const MIN_ANSWERS: u64 = 50;

/// Width of one bin of the completion series for a window of `window_ns`.
pub fn bin_ns(window_ns: u64) -> u64 {
    FINEST_BIN_NS.max(window_ns.div_ceil(MAX_BINS))
}

/// Bins of the completion series for a window of `window_ns`.
pub fn bins(window_ns: u64) -> usize {
    window_ns.div_ceil(bin_ns(window_ns)).max(1) as usize
}

/// The waves a cell's answers came in, measured across the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bursts {
    /// Time between two waves, seconds, from the completion series'
    /// autocorrelation (bins of `bin_s`).
    pub period_s: f64,
    /// 2xx answers per wave: `rate_rps × period_s`.
    pub per_burst: f64,
    /// 2xx answers per second read over whole waves: the window tapered
    /// over one period at each edge (the mean over every phase), so where
    /// the window's edges fall among the waves does not move it.
    pub rate_rps: f64,
    /// 2xx answers ÷ the window, as counted: it moves by up to one wave
    /// with the window's phase.
    pub window_rps: f64,
    /// Autocorrelation of the completion series at the period (1: every
    /// wave alike).
    pub periodicity: f64,
    /// Share of the answers in the busiest quarter of the period, the
    /// series folded at the period (1: sharp waves; 1/4: steady).
    pub concentration: f64,
    /// Width of the completion series' bins, seconds.
    pub bin_s: f64,
}

impl Bursts {
    /// "bursts of about 2,000 answers every 200 ms".
    pub fn describe(&self) -> String {
        format!(
            "answers came in bursts of about {} every {}",
            crate::units::thousands(self.per_burst.round()),
            crate::units::micros(self.period_s * 1e6)
        )
    }
}

/// Look for waves in `bins` (2xx completions per bin of `bin_ns`, the
/// window `window_ns` long); `None` when the answers came steadily.
pub fn analyse(bins: &[u64], bin_ns: u64, window_ns: u64) -> Option<Bursts> {
    let total: u64 = bins.iter().sum();
    // Bins wholly inside the window: a last partial bin would read as a dip.
    let n = ((window_ns / bin_ns) as usize).min(bins.len());
    let min_lag = MIN_PERIOD_NS.div_ceil(bin_ns).max(2) as usize;
    // Two periods at least, so one period of taper fits at each edge.
    let max_lag = n / 2;
    if total < MIN_ANSWERS || max_lag <= min_lag {
        return None;
    }
    // Smoothed over three bins, so a wave whose answers fall one bin early
    // or late (a thread woken late, a wave astride two bins) still lines up
    // with the others.
    let x: Vec<f64> = (0..n)
        .map(|i| {
            let at = |j: usize| bins[j.min(n - 1)] as f64;
            (at(i.saturating_sub(1)) + 2.0 * at(i) + at(i + 1)) / 4.0
        })
        .collect();
    let mean = x.iter().sum::<f64>() / n as f64;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
    if var <= 0.0 {
        return None;
    }
    // Autocorrelation, each lag normalised by its own overlap.
    let r: Vec<f64> = (0..=max_lag + 1)
        .map(|k| {
            if k >= n {
                return 0.0;
            }
            let s: f64 = (0..n - k).map(|i| (x[i] - mean) * (x[i + k] - mean)).sum();
            s / (n - k) as f64 / var
        })
        .collect();
    let local_max = |k: usize| r[k] > r[k - 1] && r[k] >= r[k + 1];
    let best = (min_lag..=max_lag)
        .filter(|&k| local_max(k))
        .map(|k| r[k])
        .fold(f64::NEG_INFINITY, f64::max);
    if best < MIN_PERIODICITY {
        return None;
    }
    // The first peak well above noise and near the best: the period, not a
    // multiple of it (waves that jitter match their neighbours less well
    // than some farther ones, by chance).
    let k =
        (min_lag..=max_lag).find(|&k| local_max(k) && r[k] >= (0.6 * best).max(MIN_PERIODICITY))?;
    // A wave must have a trough between: a trend or a slow drift makes the
    // autocorrelation high at every lag, never low in between.
    let trough = r[1..k].iter().copied().fold(f64::INFINITY, f64::min);
    if r[k] - trough < MIN_PERIODICITY {
        return None;
    }
    let period_bins = refine(&r, k, max_lag);
    let period_ns = period_bins * bin_ns as f64;
    let w = window_ns as f64;
    // The refined period stays by the peak it was found at; anything else
    // (a series no wave explains) keeps the plain rate.
    if !period_ns.is_finite() || period_ns < MIN_PERIOD_NS as f64 || period_ns * 2.0 > w {
        return None;
    }
    let concentration = concentration(&bins[..n], period_bins);
    if concentration < MIN_CONCENTRATION {
        return None;
    }
    let rate_rps = tapered_rate(bins, bin_ns, window_ns, period_ns);
    if !rate_rps.is_finite() || rate_rps <= 0.0 {
        return None;
    }
    Some(Bursts {
        period_s: period_ns / 1e9,
        per_burst: rate_rps * period_ns / 1e9,
        rate_rps,
        window_rps: total as f64 / (w / 1e9),
        periodicity: r[k],
        concentration,
        bin_s: bin_ns as f64 / 1e9,
    })
}

/// The share of the answers in the busiest quarter of the period: `bins`
/// folded at `period_bins` into one bin per bin of the period.
fn concentration(bins: &[u64], period_bins: f64) -> f64 {
    let m = (period_bins.round() as usize).max(1);
    let mut fold = vec![0u64; m];
    for (i, &c) in bins.iter().enumerate() {
        let phase = ((i as f64 + 0.5) / period_bins).fract();
        fold[((phase * m as f64) as usize).min(m - 1)] += c;
    }
    let total: u64 = fold.iter().sum();
    if total == 0 {
        return 0.0;
    }
    fold.sort_unstable_by(|a, b| b.cmp(a));
    let busiest: u64 = fold[..m.div_ceil(4)].iter().sum();
    busiest as f64 / total as f64
}

/// The period in bins, finer than one bin: the peak's centre by a parabola
/// through its three points, then the same at the farthest multiple of it
/// inside the series (a bin's error there is shared by all its periods).
fn refine(r: &[f64], k: usize, max_lag: usize) -> f64 {
    // A parabola's vertex is the peak's centre only within half a bin of
    // it; past that (no peak, a flat top) it extrapolates, once to a
    // negative period (express's updates on the database profile read
    // 0 req/s that way).
    let vertex = |k: usize| {
        let (a, b, c) = (r[k - 1], r[k], r[k + 1]);
        let d = a - 2.0 * b + c;
        if d.abs() < 1e-12 {
            k as f64
        } else {
            k as f64 + (0.5 * (a - c) / d).clamp(-0.5, 0.5)
        }
    };
    let first = vertex(k);
    let mut period = first;
    let mut j = 2;
    while (j as f64 * period).round() as usize + j < max_lag {
        let guess = (j as f64 * period).round() as usize;
        let lo = guess.saturating_sub(j).max(1);
        let hi = (guess + j).min(max_lag);
        match (lo..=hi).max_by(|&a, &b| r[a].total_cmp(&r[b])) {
            // Only a true peak inside the search refines; one at the
            // search's edge is the slope of another.
            Some(peak) if peak > lo && peak < hi => period = vertex(peak) / j as f64,
            _ => break,
        }
        j += 1;
    }
    if (period - first).abs() > 0.5 {
        first
    } else {
        period
    }
}

/// Answers per second through a window tapered over `period_ns` at each
/// edge: the mean, over every phase `a` in one period, of the answers in
/// `[a, a + W − P)` ÷ (W − P). An answer at `t` counts for the share of
/// phases whose window holds it: `t / P` near the start, 1 in the middle,
/// `(W − t) / P` near the end. Each answer sits at its bin's centre.
pub fn tapered_rate(bins: &[u64], bin_ns: u64, window_ns: u64, period_ns: f64) -> f64 {
    let (w, p) = (window_ns as f64, period_ns);
    let len = w - p;
    if len <= 0.0 || p <= 0.0 {
        return 0.0;
    }
    let weighted: f64 = bins
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let t = ((i as f64 + 0.5) * bin_ns as f64).min(w);
            let share = (t.min(p) - (t - len).max(0.0)).max(0.0) / p;
            c as f64 * share
        })
        .sum();
    weighted / (len / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: express's updates-5 round on the database profile read
    /// a period of −26 µs and so 0 req/s. Whatever the series, the figure
    /// is the plain rate or a wave reading with a period of at least
    /// [`MIN_PERIOD_NS`] and a rate near the plain one.
    #[test]
    fn no_series_reads_a_period_below_the_floor_or_a_rate_far_from_the_count() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let window_ns = 3_000_000_000u64;
        for case in 0..400 {
            let n = bins(window_ns);
            let chunk = 1 + (case % 37) as usize;
            let level = 1 + (case % 11);
            let series: Vec<u64> = (0..n)
                .map(|i| {
                    let noise = next() % (level + 1);
                    // Clumps of irregular length: a database-bound server's
                    // answers, neither steady nor periodic.
                    let on = (i / chunk) % 2 == 0 || next() % 5 == 0;
                    if on {
                        level + noise
                    } else {
                        noise / 2
                    }
                })
                .collect();
            let total: u64 = series.iter().sum();
            if let Some(b) = analyse(&series, bin_ns(window_ns), window_ns) {
                assert!(
                    b.period_s * 1e9 >= MIN_PERIOD_NS as f64,
                    "case {case}: period {} s",
                    b.period_s
                );
                let plain = total as f64 / 3.0;
                assert!(
                    (b.rate_rps / plain - 1.0).abs() < 0.5,
                    "case {case}: {} req/s against {plain} counted",
                    b.rate_rps
                );
            }
        }
    }

    const BIN: u64 = FINEST_BIN_NS;

    /// `per` answers at every multiple of `period_ns` shifted by `phase_ns`,
    /// spread over `spread` bins, in a window of `window_ns`.
    fn waves(per: u64, period_ns: u64, phase_ns: u64, window_ns: u64, spread: u64) -> Vec<u64> {
        let mut b = vec![0u64; bins(window_ns)];
        let mut t = phase_ns;
        while t < window_ns {
            for s in 0..spread {
                let i = ((t / BIN) + s) as usize;
                if let Some(x) = b.get_mut(i) {
                    *x += per / spread;
                }
            }
            t += period_ns;
        }
        b
    }

    #[test]
    fn waves_read_one_wave_per_period_whatever_the_window_and_phase() {
        // 400 answers every 200 ms: 2,000/s.
        for window_ms in [1_100u64, 1_500, 2_300, 5_000] {
            for phase_ms in [0u64, 3, 50, 101, 150, 199] {
                let w = window_ms * 1_000_000;
                let b = waves(400, 200_000_000, phase_ms * 1_000_000, w, 2);
                let got = analyse(&b, BIN, w).unwrap_or_else(|| {
                    panic!("no bursts found, window {window_ms} ms phase {phase_ms} ms")
                });
                assert!(
                    (got.rate_rps / 2_000.0 - 1.0).abs() < 0.02,
                    "window {window_ms} ms phase {phase_ms} ms: {got:?}"
                );
                assert!((got.period_s - 0.2).abs() < 0.004, "{got:?}");
                assert!((got.per_burst - 400.0).abs() < 8.0, "{got:?}");
            }
        }
    }

    #[test]
    fn waves_that_jitter_by_a_bin_are_still_waves() {
        // 100 answers every 300 ms, each wave one bin early, on time or
        // late, sometimes split across two bins.
        let w = 2_300_000_000;
        let mut b = vec![0u64; bins(w)];
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for i in (7..230).step_by(30) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            match s % 4 {
                0 => b[i] += 100,
                1 => b[i + 1] += 100,
                2 => b[i - 1] += 100,
                _ => {
                    b[i] += 40;
                    b[i + 1] += 60;
                }
            }
        }
        let got = analyse(&b, BIN, w).expect("waves found");
        assert!((got.period_s - 0.3).abs() < 0.01, "{got:?}");
        assert!((got.rate_rps / 333.3 - 1.0).abs() < 0.03, "{got:?}");
    }

    #[test]
    fn a_steady_series_has_no_bursts() {
        // A pseudo-random steady load around 100 per bin.
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let b: Vec<u64> = (0..500)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                90 + s % 21
            })
            .collect();
        assert_eq!(analyse(&b, BIN, 5_000_000_000), None);
        // Nor a steady decline (a trend is not a wave).
        let trend: Vec<u64> = (0..500).map(|i| 1_000 - i).collect();
        assert_eq!(analyse(&trend, BIN, 5_000_000_000), None);
    }

    /// A rate that swings ±30% every 460 ms (CPU contention on a busy
    /// host) is not waves: most answers are not in a quarter of the period.
    #[test]
    fn a_rate_that_only_swings_is_not_bursts() {
        let b: Vec<u64> = (0..200)
            .map(|i| {
                let phase = f64::from(i) / 46.0 * std::f64::consts::TAU;
                (20_000.0 * (1.0 + 0.3 * phase.sin())) as u64
            })
            .collect();
        assert_eq!(analyse(&b, BIN, 2_000_000_000), None);
    }

    #[test]
    fn a_steady_series_reads_its_plain_rate_through_the_taper() {
        let b = vec![100u64; 300];
        let r = tapered_rate(&b, BIN, 3_000_000_000, 400_000_000.0);
        assert!((r - 10_000.0).abs() < 1.0, "{r}");
    }

    #[test]
    fn long_windows_get_wider_bins() {
        assert_eq!(bin_ns(5_000_000_000), BIN);
        assert_eq!(bins(5_000_000_000), 500);
        assert!(bins(3_600_000_000_000) as u64 <= MAX_BINS);
    }
}
