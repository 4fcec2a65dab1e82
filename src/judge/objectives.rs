//! Judging a profile's objectives on a finished run: for every planned
//! cell an objective applies to, the figure of each round, the median's
//! interval over the rounds ([`stats::median_interval`]), and met, missed
//! or undecided.
//!
//! The rule (docs/results.md, "Objectives"): met when the whole interval
//! satisfies the objective, missed when none of it does, undecided when it
//! straddles the bound or covers the median with less than
//! [`MIN_DECIDING_COVERAGE`] (fewer than 3 rounds). The rounds and figures
//! are the headline's: speed figures from the rounds `gates::left_out`
//! keeps, a percentile from the kept rounds' merged histogram. Accepted and flagged cells are judged on their
//! rounds; a rejected cell, or a planned cell with no result, misses every
//! objective that applies to it: its figures do not measure what the cell
//! names, so they cannot meet anything.
//!
//! This module reads results and decides; it does no I/O.

use crate::results::{
    Cell, CellKey, Objective, ObjectiveInterval, ObjectiveMetric, ObjectiveOutcome,
    ObjectiveStatus, Results, Round, Status,
};
use crate::stats::{self, MEDIAN_INTERVAL_CONFIDENCE};

/// Judge `objectives` on every planned cell of `results` they apply to,
/// in plan order, objectives in the order given.
pub fn judge(results: &Results, objectives: &[Objective]) -> Vec<ObjectiveOutcome> {
    let mut out = Vec::new();
    for key in &results.plan {
        for o in objectives
            .iter()
            .filter(|o| o.applies_to(&key.framework, key.scenario))
        {
            out.push(judge_cell(key, results.cell(key), o, &results.thresholds));
        }
    }
    out
}

/// Whether any objective was missed.
pub fn any_missed(outcomes: &[ObjectiveOutcome]) -> bool {
    outcomes.iter().any(|o| o.status == ObjectiveStatus::Missed)
}

/// The figure `metric` of one round: `+∞` for a percentile known only to
/// lie above the request timeout, `None` when the round has no such figure
/// (CPU that could not be read, no attempts).
pub fn round_value(metric: ObjectiveMetric, r: &Round) -> Option<f64> {
    let pct = |v: Option<u64>| match v {
        Some(us) => Some(us as f64),
        None if r.latency.beyond_timeout > 0 => Some(f64::INFINITY),
        None => None,
    };
    match metric {
        ObjectiveMetric::P50 => pct(r.latency.p50_us),
        ObjectiveMetric::P90 => pct(r.latency.p90_us),
        ObjectiveMetric::P99 => pct(r.latency.p99_us),
        ObjectiveMetric::P999 => pct(r.latency.p999_us),
        ObjectiveMetric::Rps => Some(r.throughput_rps),
        ObjectiveMetric::ErrorRate => {
            let attempts = r.attempts();
            (attempts > 0).then(|| r.errors_total() as f64 / attempts as f64)
        }
        ObjectiveMetric::CpuUsPerRequest => r.server.cpu_us_per_request,
        ObjectiveMetric::MemoryWindowPeak => r
            .server
            .memory_window_peak_bytes
            .or(r.server.memory_max_bytes)
            .map(|b| b as f64),
    }
}

/// The least coverage of the median an interval needs to decide an
/// objective either way: the min–max of 3 rounds (1 − 2^(1−3) = 75%), the
/// fewest rounds a profile runs by default. One round covers its median
/// with 0%, two with 50%: on those an objective is undecided, whatever the
/// value, rather than met or missed on a single draw.
pub const MIN_DECIDING_COVERAGE: f64 = 0.75;

/// Whether `metric` is a figure of speed, taken like the headline from the
/// rounds not left out (busy host, slowed machine: `gates::left_out`);
/// the others (error rate, the memory high-water mark) count what went
/// wrong over every round, as the cell's summary does.
fn from_kept_rounds(metric: ObjectiveMetric) -> bool {
    !matches!(
        metric,
        ObjectiveMetric::ErrorRate | ObjectiveMetric::MemoryWindowPeak
    )
}

/// The headline's own value of a percentile metric: from the merged
/// histogram of the kept rounds (`CellSummary::latency`), `+∞` above the
/// timeout; `None` for the other metrics.
fn headline_percentile(metric: ObjectiveMetric, cell: &Cell) -> Option<f64> {
    let l = &cell.summary.as_ref()?.latency;
    let v = match metric {
        ObjectiveMetric::P50 => l.p50_us,
        ObjectiveMetric::P90 => l.p90_us,
        ObjectiveMetric::P99 => l.p99_us,
        ObjectiveMetric::P999 => l.p999_us,
        _ => return None,
    };
    l.rank_value(v)
}

fn judge_cell(
    key: &CellKey,
    cell: Option<&Cell>,
    o: &Objective,
    thresholds: &crate::results::Thresholds,
) -> ObjectiveOutcome {
    let outcome = |status, cell_status, interval, why: String| ObjectiveOutcome {
        cell: key.clone(),
        objective: o.clone(),
        status,
        cell_status,
        interval,
        why,
    };
    let Some(cell) = cell.filter(|c| !c.rounds.is_empty() || c.verdict.status == Status::Rejected)
    else {
        return outcome(
            ObjectiveStatus::Missed,
            None,
            None,
            "the cell has no result (the run's incidents say why)".into(),
        );
    };
    if cell.verdict.status == Status::Rejected {
        let reasons: Vec<String> = cell
            .verdict
            .reasons
            .iter()
            .filter(|r| r.status() == Status::Rejected)
            .map(|r| r.to_string())
            .collect();
        return outcome(
            ObjectiveStatus::Missed,
            Some(Status::Rejected),
            None,
            format!("the cell was rejected ({})", reasons.join("; ")),
        );
    }
    let status = Some(cell.verdict.status);
    let judged: Vec<&Round> = if from_kept_rounds(o.metric) {
        cell.rounds
            .iter()
            .filter(|r| !crate::judge::gates::left_out(r, thresholds))
            .collect()
    } else {
        cell.rounds.iter().collect()
    };
    if judged.is_empty() {
        return outcome(
            ObjectiveStatus::Undecided,
            status,
            None,
            format!(
                "every round was left out of the figures (busy host or slowed machine), so {} \
                 has no value to judge",
                o.metric
            ),
        );
    }
    let values: Vec<f64> = judged
        .iter()
        .filter_map(|r| round_value(o.metric, r))
        .collect();
    let Some(mut iv) = stats::median_interval(&values, MEDIAN_INTERVAL_CONFIDENCE) else {
        return outcome(
            ObjectiveStatus::Undecided,
            status,
            None,
            format!("{} is unknown in every round", o.metric),
        );
    };
    // A percentile's figure is the headline's (the kept rounds' merged
    // histogram), not the median of per-round percentiles: the interval of
    // the per-round values is widened to hold it where it falls outside.
    if let Some(head) = headline_percentile(o.metric, cell) {
        iv.median = head;
        iv.low = iv.low.min(head);
        iv.high = iv.high.max(head);
    }
    let (lo_ok, hi_ok) = (o.op.holds(iv.low, o.bound), o.op.holds(iv.high, o.bound));
    let verdict = match (lo_ok, hi_ok) {
        _ if iv.coverage < MIN_DECIDING_COVERAGE => ObjectiveStatus::Undecided,
        (true, true) => ObjectiveStatus::Met,
        (false, false) => ObjectiveStatus::Missed,
        _ => ObjectiveStatus::Undecided,
    };
    let finite = |v: f64| v.is_finite().then_some(v);
    let interval = ObjectiveInterval {
        rounds: iv.n,
        median: finite(iv.median),
        low: finite(iv.low),
        high: finite(iv.high),
        coverage: iv.coverage,
    };
    let m = o.metric;
    let span = if iv.n == 1 {
        format!("one round: {}", m.format(iv.median))
    } else if iv.coverage < MIN_DECIDING_COVERAGE {
        format!(
            "{} rounds, min–max {} – {} (median {})",
            iv.n,
            m.format(iv.low),
            m.format(iv.high),
            m.format(iv.median),
        )
    } else if iv.coverage >= MEDIAN_INTERVAL_CONFIDENCE {
        format!(
            "{} rounds, {:.0}% interval of the median {} – {} (median {})",
            iv.n,
            iv.coverage * 100.0,
            m.format(iv.low),
            m.format(iv.high),
            m.format(iv.median)
        )
    } else {
        format!(
            "{} rounds, min–max {} – {} (median {}; covers the median with {:.0}%)",
            iv.n,
            m.format(iv.low),
            m.format(iv.high),
            m.format(iv.median),
            iv.coverage * 100.0
        )
    };
    let relation = match verdict {
        ObjectiveStatus::Undecided if iv.coverage < MIN_DECIDING_COVERAGE => format!(
            "covers the median with {:.0}%, under the {:.0}% that decides (3 rounds or more) \
             whether it satisfies",
            iv.coverage * 100.0,
            MIN_DECIDING_COVERAGE * 100.0
        ),
        ObjectiveStatus::Met => "all of it satisfies".into(),
        ObjectiveStatus::Missed => "none of it satisfies".into(),
        ObjectiveStatus::Undecided => "it straddles".into(),
    };
    let mut left_out = String::new();
    let busy = cell.rounds.len() - judged.len();
    if busy > 0 {
        left_out.push_str(&format!(
            "; {busy} round(s) on a busy host or slowed machine left out, as from the headline"
        ));
    }
    let unknown = judged.len() - values.len();
    if unknown > 0 {
        left_out.push_str(&format!("; {unknown} round(s) without the figure left out"));
    }
    outcome(
        verdict,
        status,
        Some(interval),
        format!(
            "{span}: {relation} {} {} {}{left_out}",
            m,
            o.op.symbol(),
            o.bound_text()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Scenario;
    use crate::testdata;

    fn objective(text: &str) -> Objective {
        Objective::parse(text, None, None).unwrap()
    }

    /// The sample run with the first cell's rounds set to these p99s (µs)
    /// and req/s.
    fn with_rounds(p99: &[Option<u64>], rps: &[f64]) -> (Results, CellKey) {
        let mut r = testdata::sample_results();
        let i = r
            .cells
            .iter()
            .position(|c| c.verdict.status != Status::Rejected)
            .unwrap();
        let cell = &mut r.cells[i];
        let proto = cell.rounds[0].clone();
        cell.rounds = p99
            .iter()
            .zip(rps)
            .enumerate()
            .map(|(k, (p, t))| {
                let mut x = proto.clone();
                x.index = k as u32;
                x.latency.p99_us = *p;
                x.latency.beyond_timeout = u64::from(p.is_none());
                x.throughput_rps = *t;
                x
            })
            .collect();
        // The headline p99 stands in as the rounds' median (a round above
        // the timeout sorting last), as a merged histogram of these rounds
        // would put it.
        let mut sorted: Vec<Option<u64>> = p99.to_vec();
        sorted.sort_by_key(|p| p.unwrap_or(u64::MAX));
        let latency = &mut cell.summary.as_mut().unwrap().latency;
        latency.p99_us = sorted[sorted.len() / 2];
        latency.beyond_timeout = u64::from(latency.p99_us.is_none());
        let key = cell.key.clone();
        r.plan = vec![key.clone()];
        (r, key)
    }

    #[test]
    fn met_missed_and_undecided_follow_the_interval_not_the_median() {
        let (r, _) = with_rounds(
            &[Some(4_000), Some(4_500), Some(6_000)],
            &[100.0, 110.0, 120.0],
        );
        let judged = judge(
            &r,
            &[
                objective("p99 < 8ms"),
                objective("p99 < 3ms"),
                // The median (4.5 ms) is under 5 ms, but one round is not:
                // three rounds cannot say.
                objective("p99 < 5ms"),
                objective("rps >= 100"),
                objective("rps > 100"),
            ],
        );
        let s: Vec<_> = judged.iter().map(|o| o.status).collect();
        use ObjectiveStatus::*;
        assert_eq!(
            s,
            vec![Met, Missed, Undecided, Met, Undecided],
            "{judged:#?}"
        );
        assert!(
            judged[2].why.contains("straddles p99 < 5.00 ms"),
            "{}",
            judged[2].why
        );
        let iv = judged[2].interval.as_ref().unwrap();
        assert_eq!(
            (iv.low, iv.median, iv.high),
            (Some(4000.0), Some(4500.0), Some(6000.0))
        );
        assert!((iv.coverage - 0.75).abs() < 1e-12);
    }

    #[test]
    fn a_percentile_above_the_timeout_misses_every_latency_bound() {
        let (r, _) = with_rounds(&[None, None, None], &[1.0, 1.0, 1.0]);
        let j = judge(&r, &[objective("p99 < 10s")]);
        assert_eq!(j[0].status, ObjectiveStatus::Missed, "{}", j[0].why);
        assert_eq!(j[0].interval.as_ref().unwrap().high, None);
        assert!(j[0].why.contains("> timeout"), "{}", j[0].why);
    }

    #[test]
    fn rejected_and_missing_cells_miss_and_skipped_scenarios_are_not_judged() {
        let r = testdata::sample_results();
        let rejected = r
            .cells
            .iter()
            .find(|c| c.verdict.status == Status::Rejected)
            .expect("the sample has a rejected cell")
            .key
            .clone();
        let j = judge(&r, &[objective("rps >= 0")]);
        let o = j.iter().find(|o| o.cell == rejected).unwrap();
        assert_eq!(o.status, ObjectiveStatus::Missed);
        assert!(o.why.starts_with("the cell was rejected"), "{}", o.why);
        assert_eq!(j.len(), r.plan.len(), "one outcome per planned cell");

        let mut gone = r.clone();
        let key = gone.cells.remove(0).key;
        let j = judge(&gone, &[objective("rps >= 0")]);
        let o = j.iter().find(|o| o.cell == key).unwrap();
        assert_eq!((o.status, o.cell_status), (ObjectiveStatus::Missed, None));

        let only_param = Objective::parse("rps >= 0", Some(Scenario::Param), None).unwrap();
        let j = judge(&r, &[only_param]);
        assert!(j.iter().all(|o| o.cell.scenario == Scenario::Param));
        assert!(any_missed(&judge(&r, &[objective("rps >= 0")])));
    }

    #[test]
    fn one_round_leaves_every_objective_undecided() {
        let (r, _) = with_rounds(&[Some(4_000)], &[100.0]);
        let j = judge(&r, &[objective("p99 < 5ms"), objective("rps >= 1000")]);
        assert_eq!(j[0].status, ObjectiveStatus::Undecided, "{}", j[0].why);
        assert_eq!(j[1].status, ObjectiveStatus::Undecided, "{}", j[1].why);
        assert!(j[1].why.starts_with("one round: 100 req/s"), "{}", j[1].why);
        assert!(
            j[1].why.contains("covers the median with 0%"),
            "{}",
            j[1].why
        );
    }

    #[test]
    fn objectives_leave_out_the_rounds_the_headline_leaves_out() {
        // Rounds 2 and 3 ran on a busy host: the headline rests on round 1
        // alone, and so must the objective (one round: undecided), not on
        // a median over rounds the figures threw out.
        let (mut r, key) = with_rounds(
            &[
                Some(4_000),
                Some(9_000),
                Some(9_000),
                Some(4_100),
                Some(4_200),
            ],
            &[100.0, 10.0, 10.0, 101.0, 102.0],
        );
        let c = r.cells.iter_mut().find(|c| c.key == key).unwrap();
        for x in &mut c.rounds[1..3] {
            x.host.as_mut().unwrap().foreign_cores = 100.0;
        }
        let j = judge(&r, &[objective("rps >= 100"), objective("error_rate < 1%")]);
        assert_eq!(j[0].status, ObjectiveStatus::Met, "{}", j[0].why);
        assert_eq!(j[0].interval.as_ref().unwrap().rounds, 3);
        assert!(
            j[0].why.contains("2 round(s) on a busy host"),
            "{}",
            j[0].why
        );
        // What went wrong counts over every round, as the summary does.
        assert_eq!(j[1].interval.as_ref().unwrap().rounds, 5);
        for x in &mut r.cells.iter_mut().find(|c| c.key == key).unwrap().rounds {
            x.host.as_mut().unwrap().foreign_cores = 100.0;
        }
        let j = judge(&r, &[objective("rps >= 100")]);
        assert_eq!(j[0].status, ObjectiveStatus::Undecided, "{}", j[0].why);
        assert!(
            j[0].why.starts_with("every round was left out"),
            "{}",
            j[0].why
        );
    }

    #[test]
    fn a_percentile_objective_is_judged_on_the_headline_merged_histogram() {
        let (mut r, key) = with_rounds(
            &[Some(4_000), Some(4_500), Some(4_600)],
            &[100.0, 100.0, 100.0],
        );
        // Here the merged histogram's p99 (the headline) is 7 ms, above every
        // round's own: the objective reads the headline, not their median.
        let c = r.cells.iter_mut().find(|c| c.key == key).unwrap();
        c.summary.as_mut().unwrap().latency.p99_us = Some(7_000);
        let j = judge(&r, &[objective("p99 < 5ms")]);
        assert_eq!(j[0].status, ObjectiveStatus::Undecided, "{}", j[0].why);
        let iv = j[0].interval.as_ref().unwrap();
        assert_eq!(
            (iv.low, iv.median, iv.high),
            (Some(4_000.0), Some(7_000.0), Some(7_000.0))
        );
        let j = judge(&r, &[objective("p99 < 8ms")]);
        assert_eq!(j[0].status, ObjectiveStatus::Met, "{}", j[0].why);
    }
}
