//! Judging a profile's objectives on a finished run: for every planned
//! cell an objective applies to, the figure of each round, the median's
//! interval over the rounds ([`stats::median_interval`]), and met, missed
//! or undecided.
//!
//! The rule (docs/results.md, "Objectives"): met when the whole interval
//! satisfies the objective, missed when none of it does, undecided when it
//! straddles the bound. Accepted and flagged cells are judged on their
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
            out.push(judge_cell(key, results.cell(key), o));
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

fn judge_cell(key: &CellKey, cell: Option<&Cell>, o: &Objective) -> ObjectiveOutcome {
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
    let values: Vec<f64> = cell
        .rounds
        .iter()
        .filter_map(|r| round_value(o.metric, r))
        .collect();
    let status = Some(cell.verdict.status);
    let Some(iv) = stats::median_interval(&values, MEDIAN_INTERVAL_CONFIDENCE) else {
        return outcome(
            ObjectiveStatus::Undecided,
            status,
            None,
            format!("{} is unknown in every round", o.metric),
        );
    };
    let (lo_ok, hi_ok) = (o.op.holds(iv.low, o.bound), o.op.holds(iv.high, o.bound));
    let verdict = match (lo_ok, hi_ok) {
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
        ObjectiveStatus::Met => "all of it satisfies",
        ObjectiveStatus::Missed => "none of it satisfies",
        ObjectiveStatus::Undecided => "it straddles",
    };
    let unknown = cell.rounds.len() - values.len();
    let left_out = if unknown > 0 {
        format!("; {unknown} round(s) without the figure left out")
    } else {
        String::new()
    };
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
    fn one_round_is_judged_on_its_own_value() {
        let (r, _) = with_rounds(&[Some(4_000)], &[100.0]);
        let j = judge(&r, &[objective("p99 < 5ms"), objective("p99 <= 4ms")]);
        assert_eq!(j[0].status, ObjectiveStatus::Met);
        assert_eq!(j[1].status, ObjectiveStatus::Met);
        assert!(j[0].why.starts_with("one round: 4.00 ms"), "{}", j[0].why);
    }
}
