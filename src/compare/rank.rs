//! Rank groups inside one run: within a scenario × connections (× rate),
//! frameworks whose headline figures the run's own rounds cannot tell
//! apart share a rank. A table sorted by median alone says "A beats B by
//! 3%" when three rounds of each say nothing of the sort.
//!
//! The interval is `compare`'s, pair by pair: two frameworks are apart
//! when the interval on their ratio (Welch's t on the logs of the round
//! values) lies wholly outside ±[`FLOOR`] (2%: readers take separate places
//! as "faster", and two copies of one server in one run read 1.2% apart
//! with rounds within 0.5%, tests/compare_docker.rs). Not `compare`'s band, the range between a
//! side's best and worst round: that absorbs drift *between* runs, which
//! the rounds of one run cannot show, while the frameworks of one run
//! interleave their rounds and share the machine's states; inside a run
//! the interval already carries the rounds' noise. With k frameworks there
//! are k(k−1)/2 pairs, and each pair's interval is taken at 1 − 0.05 /
//! pairs (Bonferroni): the chance that *any* pair of frameworks that do
//! not differ is split stays under 5% (measured by simulation in the
//! tests). Bonferroni rather than Holm because it gives every pair an
//! interval, not only a p-value.
//!
//! A framework's rank is then the range of places it could take: 1 + the
//! number of frameworks clearly better, up to k − the number clearly
//! worse. "1–3" means the run cannot say whether it is first or third.
//! The headline is req/s in a closed loop (higher is better) and p99 at a
//! fixed rate (lower is better). Rejected cells, client-bound cells (the
//! loader set their figure: a req/s that is only a floor,
//! `judge::gates::client_bound`),
//! cells with fewer than [`MIN_ROUNDS`] clean rounds, and a cell alone in
//! its column get no rank.

use std::collections::BTreeMap;

use super::figures::Metric;
use super::stats::{self, MIN_ROUNDS};
use super::verdict::{self, Call};
use crate::judge::gates::client_bound;
use crate::results::{Cell, RankGroup, Results, Status};

/// Chance that any pair of a column is split though the frameworks do not
/// differ, at most.
pub const FAMILY_ERROR: f64 = 0.05;

/// Smallest difference that separates two places, a fraction: on this
/// project's VM the 400 µs and 404 µs burn servers of one run read
/// 2,385 and 2,357 req/s (1.2% apart) with each one's five rounds within
/// 0.5%, an interval that a 1% floor would let split a pair that differs by
/// 1%.
pub const FLOOR: f64 = 0.02;

/// The figure a cell is ranked by (and its precision is judged on).
pub(super) fn headline(cell: &Cell) -> Metric {
    if cell.key.rate.is_some() {
        Metric::LatencyP99
    } else {
        Metric::Throughput
    }
}

/// Give every cell of `results` its rank group (or none), column by column.
pub fn assign(results: &mut Results) {
    let mut columns: BTreeMap<_, Vec<usize>> = BTreeMap::new();
    for (i, c) in results.cells.iter_mut().enumerate() {
        c.rank = None;
        if c.verdict.status == Status::Rejected || client_bound(c) {
            continue;
        }
        let k = &c.key;
        columns
            .entry((k.scenario, k.protocol, k.concurrency, k.rate))
            .or_default()
            .push(i);
    }
    for members in columns.values() {
        let samples: Vec<(usize, stats::Sample)> = members
            .iter()
            .map(|&i| {
                let c = &results.cells[i];
                (i, super::sample(headline(c), c))
            })
            .filter(|(_, s)| s.values.len() >= MIN_ROUNDS)
            .collect();
        // One framework alone has nothing to be ranked against.
        if samples.len() < 2 {
            continue;
        }
        let paired = results.profile.interleave_rounds;
        for (i, rank) in groups(&samples, headline(&results.cells[members[0]]), paired) {
            results.cells[i].rank = Some(rank);
        }
    }
}

/// The rank group of each sample (tagged by its cell index) of one column,
/// judged by `metric`. With `paired` (the run interleaved its rounds, so
/// round *i* of every framework is one block in time), a pair is judged on
/// the ratios of the rounds both measured in the same block
/// ([`stats::paired_estimate_at`]), falling back to Welch's interval when
/// fewer than [`MIN_ROUNDS`] rounds pair up.
fn groups(
    samples: &[(usize, stats::Sample)],
    metric: Metric,
    paired: bool,
) -> Vec<(usize, RankGroup)> {
    let k = samples.len();
    let pairs = (k * k.saturating_sub(1) / 2).max(1);
    let confidence = 1.0 - FAMILY_ERROR / pairs as f64;
    // better[i]: how many are clearly better than i; worse[i]: clearly worse.
    let (mut better, mut worse) = (vec![0u32; k], vec![0u32; k]);
    // Pairs of each judged unpaired (Welch).
    let mut unpaired = vec![0u32; k];
    for a in 0..k {
        for b in a + 1..k {
            let (x, y) = (&samples[a].1, &samples[b].1);
            let e = match paired.then(|| stats::paired_estimate_at(x, y, confidence)) {
                Some(Ok(e)) => Ok(e),
                _ => {
                    unpaired[a] += 1;
                    unpaired[b] += 1;
                    stats::estimate_at(x, y, confidence)
                }
            };
            let Ok(e) = e else {
                continue;
            };
            // b against a: improved means b is better.
            match verdict::judge(metric, &e, FLOOR).0 {
                Call::Improved => {
                    better[a] += 1;
                    worse[b] += 1;
                }
                Call::Regressed => {
                    worse[a] += 1;
                    better[b] += 1;
                }
                Call::WithinNoise | Call::Inconclusive => {}
            }
        }
    }
    (0..k)
        .map(|i| {
            (
                samples[i].0,
                RankGroup {
                    low: 1 + better[i],
                    high: k as u32 - worse[i],
                    of: k as u32,
                    by: metric.label().to_string(),
                    pair_confidence: confidence,
                    paired: unpaired[i] == 0,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    fn sample(values: &[f64]) -> stats::Sample {
        stats::Sample::of_rounds(values.to_vec())
    }

    fn ranks(columns: &[&[f64]]) -> Vec<(u32, u32)> {
        let s: Vec<(usize, stats::Sample)> = columns
            .iter()
            .enumerate()
            .map(|(i, v)| (i, sample(v)))
            .collect();
        groups(&s, Metric::Throughput, false)
            .into_iter()
            .map(|(_, r)| (r.low, r.high))
            .collect()
    }

    #[test]
    fn clearly_different_frameworks_get_places_and_close_ones_share_one() {
        // 1000, 1010 (1% apart, rounds 3% apart) and 1500 req/s.
        let r = ranks(&[
            &[1000.0, 1030.0, 985.0, 1012.0, 995.0],
            &[1010.0, 990.0, 1035.0, 1002.0, 1020.0],
            &[1500.0, 1490.0, 1520.0, 1505.0, 1480.0],
        ]);
        assert_eq!(r, vec![(2, 3), (2, 3), (1, 1)]);
    }

    #[test]
    fn a_chain_of_overlaps_gives_overlapping_groups() {
        // A ≈ B, B ≈ C, but A and C clearly apart: A 1–2, B 1–3, C 2–3.
        let r = ranks(&[
            &[1100.0, 1102.0, 1098.0, 1101.0],
            &[1050.0, 1120.0, 990.0, 1060.0],
            &[1000.0, 1002.0, 998.0, 1001.0],
        ]);
        assert_eq!(r, vec![(1, 2), (1, 3), (2, 3)]);
    }

    #[test]
    fn an_interleaved_run_ranks_by_pairs_and_says_so() {
        let mut r = crate::testdata::sample_results();
        assign(&mut r);
        let ranked: Vec<&RankGroup> = r.cells.iter().filter_map(|c| c.rank.as_ref()).collect();
        assert!(!ranked.is_empty());
        assert!(ranked.iter().all(|g| !g.paired), "{ranked:?}");
        r.profile.interleave_rounds = true;
        assign(&mut r);
        let ranked: Vec<&RankGroup> = r.cells.iter().filter_map(|c| c.rank.as_ref()).collect();
        assert!(!ranked.is_empty());
        assert!(ranked.iter().all(|g| g.paired), "{ranked:?}");
    }

    #[test]
    fn client_bound_cells_are_left_out_of_rank_groups() {
        let mut r = crate::testdata::sample_results();
        assign(&mut r);
        let bound: Vec<&Cell> = r.cells.iter().filter(|c| client_bound(c)).collect();
        // The sample's axum plaintext c=10000: its loader ran at 97%.
        assert!(!bound.is_empty());
        assert!(bound.iter().all(|c| c.rank.is_none()), "{bound:#?}");
        // Its column ranks the others among themselves only.
        let k = &bound[0].key;
        for c in r.cells.iter().filter(|c| {
            c.key.scenario == k.scenario && c.key.concurrency == k.concurrency && c.rank.is_some()
        }) {
            let of = r
                .cells
                .iter()
                .filter(|o| {
                    o.key.scenario == k.scenario
                        && o.key.concurrency == k.concurrency
                        && o.rank.is_some()
                })
                .count() as u32;
            assert_eq!(c.rank.as_ref().unwrap().of, of);
        }
    }

    #[test]
    fn latency_ranks_the_lower_first() {
        let s = vec![
            (0, sample(&[900.0, 910.0, 905.0])),
            (1, sample(&[600.0, 605.0, 598.0])),
        ];
        let g = groups(&s, Metric::LatencyP99, false);
        assert_eq!((g[0].1.low, g[0].1.high), (2, 2));
        assert_eq!((g[1].1.low, g[1].1.high), (1, 1));
        assert_eq!(g[1].1.by, "p99");
    }

    fn normal(rng: &mut impl Rng) -> f64 {
        let (u, v): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Share of trials in which the frameworks of `true_ratios` (each's
    /// true figure relative to the first's) are split into more than one
    /// group (`split`) or fully apart (`apart`): `n` rounds each, log-noise
    /// `sigma`.
    fn simulate(n: usize, sigma: f64, true_ratios: &[f64]) -> (f64, f64) {
        const TRIALS: usize = 2000;
        let mut rng = rand::rngs::StdRng::seed_from_u64(23);
        let (mut split, mut apart) = (0, 0);
        for _ in 0..TRIALS {
            let s: Vec<(usize, stats::Sample)> = true_ratios
                .iter()
                .enumerate()
                .map(|(i, &r)| {
                    let v: Vec<f64> = (0..n)
                        .map(|_| 1000.0 * r * (sigma * normal(&mut rng)).exp())
                        .collect();
                    (i, sample(&v))
                })
                .collect();
            let g = groups(&s, Metric::Throughput, false);
            if g.iter().any(|(_, r)| r.low > 1 || r.high < r.of) {
                split += 1;
            }
            if g.iter().all(|(_, r)| r.low == r.high) {
                apart += 1;
            }
        }
        (split as f64 / TRIALS as f64, apart as f64 / TRIALS as f64)
    }

    /// Like [`simulate`], with the machine's slow phases: every block
    /// (round *i* of every framework) shares a drift of log-sd `drift`,
    /// each round adds its own noise `sigma`; judged paired or not.
    fn simulate_blocks(
        n: usize,
        drift: f64,
        sigma: f64,
        true_ratios: &[f64],
        paired: bool,
    ) -> (f64, f64) {
        const TRIALS: usize = 2000;
        let mut rng = rand::rngs::StdRng::seed_from_u64(29);
        let (mut split, mut apart) = (0, 0);
        for _ in 0..TRIALS {
            let blocks: Vec<f64> = (0..n).map(|_| drift * normal(&mut rng)).collect();
            let s: Vec<(usize, stats::Sample)> = true_ratios
                .iter()
                .enumerate()
                .map(|(i, &r)| {
                    let v: Vec<f64> = blocks
                        .iter()
                        .map(|b| 1000.0 * r * (b + sigma * normal(&mut rng)).exp())
                        .collect();
                    (i, sample(&v).of_rounds_numbered((0..n as u32).collect()))
                })
                .collect();
            let g = groups(&s, Metric::Throughput, paired);
            assert!(g.iter().all(|(_, r)| r.paired == paired));
            if g.iter().any(|(_, r)| r.low > 1 || r.high < r.of) {
                split += 1;
            }
            if g.iter().all(|(_, r)| r.low == r.high) {
                apart += 1;
            }
        }
        (split as f64 / TRIALS as f64, apart as f64 / TRIALS as f64)
    }

    #[test]
    fn paired_blocks_cancel_the_machines_drift() {
        // This machine's slow phases: rounds of one framework 7% apart
        // (docs/methodology.md, the A/A study: CV 3.4-13%, and the slow
        // rounds are slow in CPU per request, the machine's own speed);
        // what a block does not share, 2%.
        let (drift, sigma) = (0.07, 0.02);
        for n in [3, 6, 10] {
            for k in [2, 5] {
                let (split, _) = simulate_blocks(n, drift, sigma, &vec![1.0; k], true);
                eprintln!(
                    "A/A paired, {k} copies, {n} blocks, drift 7%, noise 2%: split in {:.2}%",
                    split * 100.0
                );
                assert!(split < 0.05, "{k} copies, {n} blocks: {split}");
            }
        }
        // 5% apart: with 15 blocks (of 3 s windows: under a minute of
        // windows per framework) pairing ranks them apart; Welch's interval
        // counts the drift on both sides and almost never does.
        let (_, paired) = simulate_blocks(15, drift, sigma, &[1.0, 1.05], true);
        let (_, welch) = simulate_blocks(15, drift, sigma, &[1.0, 1.05], false);
        let (_, paired10) = simulate_blocks(10, drift, sigma, &[1.0, 1.05], true);
        eprintln!(
            "5% apart, drift 7%, noise 2%: ranked apart in {:.1}% paired and {:.1}% by Welch \
             with 15 blocks, {:.1}% paired with 10",
            paired * 100.0,
            welch * 100.0,
            paired10 * 100.0
        );
        assert!(paired >= 0.90, "{paired}");
        assert!(welch < 0.5, "{welch}");
        // Pairing needs no drift to be right: without it, the A/A pair is
        // split no more often.
        let (split, _) = simulate_blocks(6, 0.0, 0.05, &[1.0, 1.0], true);
        eprintln!(
            "A/A paired, no drift, noise 5%, 6 blocks: split in {:.2}%",
            split * 100.0
        );
        assert!(split < 0.05, "{split}");
    }

    #[test]
    fn simulated_known_answers() {
        // A/A at the default settings (3 rounds), three and five copies of
        // one framework, rounds 5% apart: how often any copy is ranked
        // apart from another.
        for k in [2, 3, 5] {
            let (split, _) = simulate(3, 0.05, &vec![1.0; k]);
            eprintln!(
                "A/A, {k} copies, 3 rounds, noise 5%: split in {:.2}% of runs",
                split * 100.0
            );
            assert!(split < 0.05, "{k} copies: {split}");
        }
        // 10% apart with 2% noise: ranked apart (5 rounds, and 3).
        let (_, apart5) = simulate(5, 0.02, &[1.0, 1.1]);
        let (_, apart3) = simulate(3, 0.02, &[1.0, 1.1]);
        eprintln!(
            "10% apart, noise 2%: ranked apart in {:.1}% of runs with 5 rounds, {:.1}% with 3",
            apart5 * 100.0,
            apart3 * 100.0
        );
        assert!(apart5 > 0.95, "{apart5}");
        // 1% apart with 5% noise: a tie.
        let (split, _) = simulate(3, 0.05, &[1.0, 1.01]);
        eprintln!(
            "1% apart, noise 5%, 3 rounds: split in {:.2}% of runs",
            split * 100.0
        );
        assert!(split < 0.05, "{split}");
    }
}
