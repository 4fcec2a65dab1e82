//! Change points in a series of run figures: E-divisive means (Matteson &
//! James, "A Nonparametric Approach for Multiple Change Point Analysis of
//! Multivariate Data", JASA 2014), the detector MongoDB's and DataStax's
//! continuous performance testing use (signal-processing, Hunter/Otava).
//!
//! Why this one: it assumes no distribution (run figures are skewed and
//! their noise differs between metrics), finds several change points by
//! bisection, and its significance test is a permutation test on the
//! series itself, so the false-alarm rate is the chosen α whatever the
//! noise looks like. PELT needs a cost model and a penalty tuned to the
//! noise, which a handful of runs cannot estimate.
//!
//! Pure arithmetic over a slice; deterministic (the permutations come from
//! a fixed seed), so the same series always gives the same answer.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// Significance level of the permutation test.
pub const ALPHA: f64 = 0.01;
/// Permutations per test: p-values come in steps of 1/200, so 0.005 is the
/// smallest and α = 0.01 needs the observed split to beat 198 of 199.
pub const PERMUTATIONS: usize = 199;
/// Fewest runs on each side of a change point: fewer cannot show a level,
/// so a change shows once three runs after it exist.
pub const MIN_SEGMENT: usize = 3;
/// From this many runs in a stretch, the permutation test shuffles whole
/// runs (each keeping its rounds) instead of single rounds. Rounds of one
/// run share that run's state of the machine (its drift), so shuffling
/// rounds across runs calls that drift a change: simulated with this
/// machine's noise, 13–35% of flat series then showed a change point
/// (`history::simulated`). Whole runs are exchangeable when nothing
/// changed, whatever the drift; but they can be dealt in few enough ways
/// to cap p: with 8 runs the three splits a test can pick (3|5, 4|4, 5|3)
/// see 8!/(3!·3!) = 1,120 distinct orderings, enough for p = 0.005; with 6
/// runs the one split sees C(6, 3) = 20, and p could never go below 0.05.
pub const SHUFFLE_RUNS_FROM: usize = 8;
/// Seed of the permutations.
const SEED: u64 = 0x6661_6972_6772_6e64;

/// A change point found in a series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Found {
    /// Index of the first value after the change.
    pub index: usize,
    /// The E-divisive statistic Q̂ of the split.
    pub q: f64,
    /// Permutation p-value of the split.
    pub p_value: f64,
}

/// Q̂(τ) for every split τ of `x` at a group boundary (`ends[g]` is where
/// group g ends in `x`) with at least [`MIN_SEGMENT`] groups on each side:
/// (m·k/(m+k)) · (2/(m·k) Σ|Lᵢ−Rⱼ| − Σ_{i<l}|Lᵢ−Lₗ|/C(m,2) −
/// Σ_{j<l}|Rⱼ−Rₗ|/C(k,2)) over the values, the distance between the two
/// sides' samples beyond the spread within each. Returns (groups before
/// the split, Q̂). O(n²) in values.
fn statistic(x: &[f64], ends: &[usize]) -> Vec<(usize, f64)> {
    let n = x.len();
    let groups = ends.len();
    if groups < 2 * MIN_SEGMENT {
        return Vec::new();
    }
    // within_left[t]: Σ_{i<l<t} |x_i − x_l|; within_right[t]: Σ_{t≤j<l} …
    let mut within_left = vec![0.0; n + 1];
    for t in 1..=n {
        let add: f64 = (0..t - 1).map(|i| (x[i] - x[t - 1]).abs()).sum();
        within_left[t] = within_left[t - 1] + add;
    }
    let mut within_right = vec![0.0; n + 1];
    for t in (0..n).rev() {
        let add: f64 = (t + 1..n).map(|l| (x[t] - x[l]).abs()).sum();
        within_right[t] = within_right[t + 1] + add;
    }
    let total = within_left[n];
    (MIN_SEGMENT..=groups - MIN_SEGMENT)
        .filter_map(|g| {
            let t = ends[g - 1];
            let (m, k) = (t as f64, (n - t) as f64);
            if m < 2.0 || k < 2.0 {
                return None;
            }
            let cross = total - within_left[t] - within_right[t];
            let e = 2.0 * cross / (m * k)
                - within_left[t] / (m * (m - 1.0) / 2.0)
                - within_right[t] / (k * (k - 1.0) / 2.0);
            Some((g, m * k / (m + k) * e))
        })
        .collect()
}

/// The best split of `x` (grouped by `ends`) and its Q̂.
fn best(x: &[f64], ends: &[usize]) -> Option<(usize, f64)> {
    statistic(x, ends)
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// Every significant change point of `x`, one value per run, in index
/// order: the best split, kept when its permutation p-value is at most
/// [`ALPHA`], then each side searched again. (`history` gives the detector
/// every round; the tests show what one value per run can and cannot find.)
#[cfg(test)]
pub fn change_points(x: &[f64]) -> Vec<Found> {
    let groups: Vec<Vec<f64>> = x.iter().map(|&v| vec![v]).collect();
    change_points_of_runs(&groups)
}

/// Every significant change point between runs, each run given by all its
/// rounds' values: a split falls between two runs, and the permutation
/// test shuffles whole runs from [`SHUFFLE_RUNS_FROM`] runs on (runs of a
/// steady series are exchangeable whatever the drift between them), and
/// rounds across the runs below that, where whole runs can be dealt in too
/// few ways. With three rounds a run, three
/// runs on each side give 18 values, C(18, 9) = 48,620 ways to deal them,
/// so a step of three runs after three can reach p = 0.005; with one value
/// per run the same six runs have 20 ways, and p can never go below 0.1.
/// `Found::index` is the first run after the change.
pub fn change_points_of_runs(runs: &[Vec<f64>]) -> Vec<Found> {
    let runs: Vec<&Vec<f64>> = runs.iter().collect();
    let mut out = Vec::new();
    bisect(&runs, 0, &mut out);
    out.sort_by_key(|f| f.index);
    out
}

/// The values of `runs` in order, and where each run ends among them.
fn flatten<'a>(runs: impl Iterator<Item = &'a Vec<f64>>) -> (Vec<f64>, Vec<usize>) {
    let mut x = Vec::new();
    let mut ends = Vec::new();
    for r in runs {
        x.extend_from_slice(r);
        ends.push(x.len());
    }
    (x, ends)
}

fn bisect(runs: &[&Vec<f64>], offset: usize, out: &mut Vec<Found>) {
    let (x, ends) = flatten(runs.iter().copied());
    let Some((g, q)) = best(&x, &ends) else {
        return;
    };
    if q.is_nan() || q <= 0.0 {
        return;
    }
    let mut rng = StdRng::seed_from_u64(SEED ^ (offset as u64) ^ ((x.len() as u64) << 32));
    let by_runs = runs.len() >= SHUFFLE_RUNS_FROM;
    let mut order: Vec<&Vec<f64>> = runs.to_vec();
    let mut shuffled = x.clone();
    let mut as_large = 0usize;
    for _ in 0..PERMUTATIONS {
        let found = if by_runs {
            order.shuffle(&mut rng);
            let (xp, ep) = flatten(order.iter().copied());
            best(&xp, &ep)
        } else {
            shuffled.shuffle(&mut rng);
            best(&shuffled, &ends)
        };
        if found.is_some_and(|(_, qp)| qp >= q) {
            as_large += 1;
        }
    }
    let p_value = (as_large + 1) as f64 / (PERMUTATIONS + 1) as f64;
    if p_value > ALPHA {
        return;
    }
    out.push(Found {
        index: offset + g,
        q,
        p_value,
    });
    bisect(&runs[..g], offset, out);
    bisect(&runs[g..], offset + g, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic noise: a small LCG through Box–Muller.
    fn noise(seed: u64, n: usize, sd: f64) -> Vec<f64> {
        let mut s = seed;
        let mut u = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        (0..n)
            .map(|_| sd * (-2.0 * u().ln()).sqrt() * (2.0 * std::f64::consts::PI * u()).cos())
            .collect()
    }

    #[test]
    fn a_step_is_found_where_it_is() {
        let e = noise(7, 20, 0.02);
        let x: Vec<f64> = (0..20)
            .map(|i| if i < 12 { 1.0 } else { 0.92 } + e[i])
            .collect();
        let found = change_points(&x);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].index, 12);
        assert!(found[0].p_value <= ALPHA);
    }

    #[test]
    fn a_flat_series_and_a_short_one_have_none() {
        assert!(change_points(&[1.0; 20]).is_empty());
        assert!(change_points(&[1.0, 2.0, 3.0, 4.0, 5.0]).is_empty());
        let e = noise(11, 20, 0.02);
        let x: Vec<f64> = e.iter().map(|v| 1.0 + v).collect();
        assert!(change_points(&x).is_empty(), "{:?}", change_points(&x));
    }

    #[test]
    fn three_runs_of_three_rounds_then_three_more_show_a_step_one_value_each_cannot() {
        // Rounds with 2% noise; a 20% step after the third run.
        let e = noise(5, 18, 0.02);
        let runs: Vec<Vec<f64>> = (0..6)
            .map(|r| {
                let level: f64 = if r < 3 { 1.0 } else { 1.2 };
                (0..3).map(|i| level.ln() + e[r * 3 + i]).collect()
            })
            .collect();
        let found = change_points_of_runs(&runs);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].index, 3);
        assert!(found[0].p_value <= ALPHA, "{found:?}");
        // The runs' medians alone: six values cannot reach α.
        let medians: Vec<f64> = runs
            .iter()
            .map(|r| crate::stats::median(r).unwrap())
            .collect();
        assert!(change_points(&medians).is_empty());
        // And six steady runs of three rounds show nothing.
        let e = noise(9, 18, 0.02);
        let steady: Vec<Vec<f64>> = (0..6).map(|r| e[r * 3..r * 3 + 3].to_vec()).collect();
        assert!(change_points_of_runs(&steady).is_empty());
    }

    #[test]
    fn two_steps_are_both_found() {
        let e = noise(3, 30, 0.01);
        let x: Vec<f64> = (0..30)
            .map(|i| match i {
                0..10 => 1.0,
                10..20 => 1.2,
                _ => 0.9,
            } + e[i])
            .collect();
        let found = change_points(&x);
        let idx: Vec<usize> = found.iter().map(|f| f.index).collect();
        // Both steps, whatever else the flat stretches show: a flat stretch
        // of 10 is split falsely with probability about α per test (here
        // its first five values happen to lie below its last five, which
        // one permutation in 252 also does), which is why `history`
        // confirms every change point with `compare`.
        assert!(idx.contains(&10) && idx.contains(&20), "{found:?}");
    }
}
