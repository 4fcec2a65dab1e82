//! Spending a profile's `budget:`: after the first pass (`rounds.min`
//! rounds of every cell, frameworks interleaved block by block), each block
//! of rounds starts only while the estimate of its wall time fits in what
//! is left; when a whole block does not fit, the frameworks whose cells
//! lack the most precision run and the others sit it out. The estimates
//! come from the run's own segments: a framework's overhead per segment
//! (start, readiness, settle, verification, stop) and the median wall time
//! of a round.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::results::{Budget, Cell, Status};

/// The run's clock and its record of where segments spent their time.
#[derive(Debug)]
pub(super) struct Spending {
    /// When the budget's time began (the run's first framework).
    pub began: Instant,
    /// Seconds since `began` spent building images: not the budget's.
    builds: f64,
    /// The budget.
    pub asked: Duration,
    /// Wall time of every measured round (loader and sampling).
    rounds: Vec<f64>,
    /// Per framework: wall time of each segment beyond its rounds.
    overheads: BTreeMap<String, Vec<f64>>,
    /// Wall time of each block of the first pass, in order.
    pub first_pass_blocks: Vec<f64>,
}

impl Spending {
    pub fn new(began: Instant, asked: Duration) -> Spending {
        Spending {
            began,
            builds: 0.0,
            asked,
            rounds: Vec::new(),
            overheads: BTreeMap::new(),
            first_pass_blocks: Vec::new(),
        }
    }

    /// A round took `wall` seconds.
    pub fn round(&mut self, wall: f64) {
        self.rounds.push(wall);
    }

    /// Seconds of every round so far: a segment's rounds are the
    /// difference across it.
    pub fn rounds_total(&self) -> f64 {
        self.rounds.iter().sum()
    }

    /// A segment of `framework` took `wall` seconds, `rounds` of them in
    /// its rounds.
    pub fn segment(&mut self, framework: &str, wall: f64, rounds: f64) {
        self.overheads
            .entry(framework.to_string())
            .or_default()
            .push((wall - rounds).max(0.0));
    }

    /// Image builds took `seconds`: a fresh machine's builds do not eat
    /// the rounds a cached one gets.
    pub fn built(&mut self, seconds: f64) {
        self.builds += seconds;
    }

    /// Seconds of image builds so far: a segment's are the difference
    /// across it.
    pub fn builds_total(&self) -> f64 {
        self.builds
    }

    /// Seconds of the budget spent at `now`: the time since it began, image
    /// builds left out.
    pub fn spent(&self, now: Instant) -> f64 {
        (now.saturating_duration_since(self.began).as_secs_f64() - self.builds).max(0.0)
    }

    /// Seconds left of the budget at `now`.
    pub fn left(&self, now: Instant) -> f64 {
        self.asked.as_secs_f64() - self.spent(now)
    }

    /// Estimated wall time of a segment of `framework` measuring `rounds`
    /// rounds: its median overhead (every framework's when it has none
    /// yet) plus that many median rounds.
    pub fn estimate(&self, framework: &str, rounds: usize) -> f64 {
        let overhead = match self.overheads.get(framework) {
            Some(o) => crate::stats::median(o),
            None => {
                let all: Vec<f64> = self.overheads.values().flatten().copied().collect();
                crate::stats::median(&all)
            }
        };
        overhead.unwrap_or(0.0) + rounds as f64 * crate::stats::median(&self.rounds).unwrap_or(0.0)
    }

    /// A block's wall time for the expectation: the median of the first
    /// pass's blocks after the first (whose segments also built images
    /// and warmed caches), the first when it is the only one.
    pub fn block(&self) -> Option<f64> {
        match self.first_pass_blocks.as_slice() {
            [] => None,
            [only] => Some(*only),
            [_, rest @ ..] => crate::stats::median(rest),
        }
    }
}

/// A framework that wants to run in a block past the first pass.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Candidate {
    /// How far its least precise cell is from the asked precision: reached
    /// ÷ asked (infinite for a cell with too few clean rounds for an
    /// interval).
    pub need: f64,
    /// Estimated wall time of its segment, seconds.
    pub cost: f64,
}

/// The need of a cell that lacks the asked precision: reached ÷ asked; a
/// cell without an interval yet needs rounds most, a rejected one none
/// (more rounds do not mend it).
pub(super) fn need(cell: Option<&Cell>, asked: f64) -> f64 {
    let Some(cell) = cell else {
        return f64::INFINITY;
    };
    if cell.verdict.status == Status::Rejected {
        return 0.0;
    }
    // The store keeps each cell's precision current.
    match &cell.precision {
        Some(p) => p.reached / asked,
        None => f64::INFINITY,
    }
}

/// Which candidates run in a block with `left` seconds of budget: all when
/// they fit together; otherwise the neediest first, each one that still
/// fits, the others sitting out. Indices into `candidates`, ascending (the
/// block keeps its shuffled order).
pub(super) fn choose(candidates: &[Candidate], left: f64) -> Vec<usize> {
    let all: f64 = candidates.iter().map(|c| c.cost).sum();
    if all <= left {
        return (0..candidates.len()).collect();
    }
    let mut by_need: Vec<usize> = (0..candidates.len()).collect();
    by_need.sort_by(|&a, &b| candidates[b].need.total_cmp(&candidates[a].need));
    let mut spent = 0.0;
    let mut chosen = Vec::new();
    for i in by_need {
        if spent + candidates[i].cost <= left {
            spent += candidates[i].cost;
            chosen.push(i);
        }
    }
    chosen.sort_unstable();
    chosen
}

/// The expectation after the first pass: blocks of `block` seconds that
/// fit in `left` (at most `most`), and the median interval the cells would
/// reach over them. A cell already precise stays as reached; one that
/// goes on is carried over the expected blocks by its own spread
/// ([`crate::compare::precision::projected`]), and stops at the asked
/// precision when it gets there.
pub(super) fn expect(
    budget: &mut Budget,
    cells: &[Cell],
    asked: f64,
    left: f64,
    block: f64,
    most: u32,
) {
    budget.block_s = Some(block);
    let blocks = if block > 0.0 {
        ((left.max(0.0) / block).floor() as u32).min(most)
    } else {
        most
    };
    budget.expected_blocks = Some(blocks);
    let expected: Vec<f64> = cells
        .iter()
        .filter_map(|c| c.precision.as_ref())
        .map(|p| {
            if p.met() {
                p.reached
            } else {
                crate::compare::precision::projected(p, blocks).max(asked)
            }
        })
        .collect();
    budget.expected_median_interval = crate::stats::median(&expected);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(need: f64, cost: f64) -> Candidate {
        Candidate { need, cost }
    }

    #[test]
    fn a_block_that_fits_runs_whole_and_one_that_does_not_runs_its_neediest() {
        let cands = [
            c(1.5, 10.0),
            c(4.0, 10.0),
            c(f64::INFINITY, 10.0),
            c(2.0, 10.0),
        ];
        assert_eq!(choose(&cands, 40.0), vec![0, 1, 2, 3]);
        // Room for two: the one without an interval and the widest.
        assert_eq!(choose(&cands, 25.0), vec![1, 2]);
        // A costly needy one that does not fit leaves room for cheaper ones.
        let cands = [c(9.0, 30.0), c(2.0, 10.0), c(1.2, 10.0)];
        assert_eq!(choose(&cands, 25.0), vec![1, 2]);
        assert!(choose(&cands, 5.0).is_empty());
    }

    #[test]
    fn estimates_add_a_frameworks_overhead_to_its_rounds() {
        let t0 = Instant::now();
        let mut s = Spending::new(t0, Duration::from_secs(600));
        s.round(11.0);
        s.round(12.0);
        s.round(13.0);
        s.segment("a", 30.0, 24.0); // overhead 6
        s.segment("b", 40.0, 13.0); // overhead 27
        assert_eq!(s.estimate("a", 2), 6.0 + 24.0);
        assert_eq!(s.estimate("b", 1), 27.0 + 12.0);
        // One it has not seen: the median of all overheads.
        assert_eq!(s.estimate("c", 1), 16.5 + 12.0);
        assert!((s.left(t0 + Duration::from_secs(100)) - 500.0).abs() < 1e-9);
        // Image builds are not the budget's.
        s.built(40.0);
        assert!((s.left(t0 + Duration::from_secs(100)) - 540.0).abs() < 1e-9);
        assert_eq!(s.block(), None);
        s.first_pass_blocks = vec![90.0, 40.0, 50.0, 45.0];
        assert_eq!(s.block(), Some(45.0), "the first block is left out");
    }
}
