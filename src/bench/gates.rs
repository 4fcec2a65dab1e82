//! Gates: the verdict on every cell, with reasons.
//!
//! A cell is *rejected* when its number is not a valid measurement of what the
//! cell names (too few connections, errors, OOM or crash, failed verify, a
//! broken 2xx-only invariant); *flagged* when the number is real but must be
//! read with care (client-bound, noisy, a suspect round, a busy host, a forced
//! environment); otherwise *accepted*. Thresholds live in
//! [`crate::results::Thresholds`] with their sources.
//!
//! This module only judges data it is given; it measures nothing.

use crate::results::histogram::HistogramError;
use crate::results::{Cell, CellKey, CellSummary, Reason, Round, Thresholds, Verdict};

/// Relative tolerance when checking throughput == 2xx / window. Throughput is
/// computed from integers and a duration, so anything beyond float rounding
/// means something else was counted.
const INVARIANT_TOLERANCE: f64 = 1e-9;

/// What the gates need to know besides the rounds.
#[derive(Debug, Clone, Copy)]
pub struct GateContext<'a> {
    /// Thresholds to apply.
    pub thresholds: &'a Thresholds,
    /// Preflight failed and the run was forced with `--accept-env`.
    pub environment_forced: bool,
    /// What verify found if the framework failed it for this cell's scenario.
    pub verify_failure: Option<&'a str>,
    /// Rounds the profile asked for.
    pub rounds_planned: u32,
}

/// Summarise `rounds` and judge them: the finished cell.
pub fn finish_cell(
    key: CellKey,
    rounds: Vec<Round>,
    ctx: &GateContext<'_>,
) -> Result<Cell, HistogramError> {
    let summary = CellSummary::of(&rounds)?;
    let verdict = judge(&rounds, summary.as_ref(), ctx);
    Ok(Cell {
        key,
        rounds_planned: ctx.rounds_planned,
        rounds,
        summary,
        verdict,
    })
}

/// Every reason that applies to these rounds, as a verdict.
pub fn judge(rounds: &[Round], summary: Option<&CellSummary>, ctx: &GateContext<'_>) -> Verdict {
    let t = ctx.thresholds;
    let mut reasons = Vec::new();

    if let Some(detail) = ctx.verify_failure {
        reasons.push(Reason::FailedVerify {
            detail: detail.to_string(),
        });
    }
    if ctx.environment_forced {
        reasons.push(Reason::EnvironmentNotAccepted);
    }

    // Connections: the worst round decides (the 10K test that was really 1K).
    if let Some(r) = rounds
        .iter()
        .filter(|r| r.connections.established < r.connections.requested)
        .min_by_key(|r| r.connections.established)
    {
        reasons.push(Reason::ConnectionsShort {
            round: r.index,
            requested: r.connections.requested,
            established: r.connections.established,
        });
    }

    let oom: u64 = rounds.iter().map(|r| r.server.oom_kills).sum();
    if oom > 0 {
        reasons.push(Reason::OomKilled { kills: oom });
    }
    let restarts: u64 = rounds.iter().map(|r| r.server.restarts).sum();
    if restarts > 0 {
        reasons.push(Reason::Crashed { restarts });
    }

    for r in rounds {
        let expected = if r.duration_s > 0.0 {
            r.responses.s2xx as f64 / r.duration_s
        } else {
            0.0
        };
        let off = (r.throughput_rps - expected).abs();
        if off > INVARIANT_TOLERANCE * expected.max(1.0) {
            reasons.push(Reason::ThroughputNotFrom2xx {
                round: r.index,
                recorded_rps: r.throughput_rps,
                expected_rps: expected,
            });
        }
    }

    let errors: u64 = rounds.iter().map(Round::errors_total).sum();
    let attempts: u64 = rounds.iter().map(Round::attempts).sum();
    let rate = if attempts == 0 {
        0.0
    } else {
        errors as f64 / attempts as f64
    };
    if rate > t.max_error_rate {
        reasons.push(Reason::ErrorRate {
            rate,
            limit: t.max_error_rate,
            errors,
            attempts,
        });
    }
    if !rounds.is_empty() && rounds.iter().all(|r| r.responses.s2xx == 0) {
        reasons.push(Reason::NoSuccess);
    }

    // Loader ceiling: the figure is a floor for the server.
    let loader = rounds
        .iter()
        .map(|r| r.loader.cpu_fraction)
        .fold(0.0, f64::max);
    if loader >= t.loader_saturation {
        reasons.push(Reason::LoaderSaturated {
            cpu_fraction: loader,
            threshold: t.loader_saturation,
        });
    }
    if let Some(throttled) = rounds
        .iter()
        .filter_map(|r| r.loader.throttled_fraction)
        .reduce(f64::max)
        .filter(|&f| f > t.max_loader_throttled)
    {
        reasons.push(Reason::LoaderThrottled {
            fraction: throttled,
            threshold: t.max_loader_throttled,
        });
    }
    let rates: Vec<_> = rounds.iter().filter_map(|r| r.rate.as_ref()).collect();
    if let Some(worst) = rates.iter().map(|r| r.ratio()).reduce(f64::min) {
        if worst < t.min_rate_ratio {
            reasons.push(Reason::RateShort {
                ratio: worst,
                threshold: t.min_rate_ratio,
            });
        }
    }
    if let Some(lag) = rates.iter().map(|r| r.max_lag_us).max() {
        if lag > t.max_schedule_lag_us {
            reasons.push(Reason::ScheduleLag {
                max_lag_us: lag,
                bound_us: t.max_schedule_lag_us,
            });
        }
    }

    // A cell excluded by verify has no rounds by design; anything else with
    // fewer rounds than planned was cut short.
    if ctx.verify_failure.is_none() && (rounds.len() as u32) < ctx.rounds_planned {
        reasons.push(Reason::IncompleteRounds {
            measured: rounds.len() as u32,
            planned: ctx.rounds_planned,
        });
    }

    if let Some(s) = summary {
        let a = &s.throughput_rps;
        if a.n >= 2 && a.cv > t.max_cv {
            reasons.push(Reason::HighCv {
                cv: a.cv,
                limit: t.max_cv,
            });
        }
        for (r, dev) in rounds.iter().zip(&a.deviation_from_median) {
            if dev.abs() > t.suspect_round {
                reasons.push(Reason::SuspectRound {
                    round: r.index,
                    deviation: *dev,
                    limit: t.suspect_round,
                });
            }
        }
    }

    for r in rounds {
        if let Some(h) = &r.host {
            if h.foreign_cores > t.max_foreign_cores {
                reasons.push(Reason::HostBusy {
                    round: r.index,
                    foreign_cores: h.foreign_cores,
                    limit: t.max_foreign_cores,
                });
            }
        }
    }

    Verdict::from_reasons(reasons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testdata::round;
    use crate::results::{RateFigures, Status};

    fn key() -> CellKey {
        CellKey {
            framework: "demo".into(),
            scenario: crate::contract::Scenario::Plaintext,
            concurrency: 100,
            rate: None,
        }
    }

    fn judge_rounds(rounds: Vec<Round>, t: &Thresholds) -> Cell {
        let ctx = GateContext {
            thresholds: t,
            environment_forced: false,
            verify_failure: None,
            rounds_planned: 3,
        };
        finish_cell(key(), rounds, &ctx).unwrap()
    }

    fn steady() -> Vec<Round> {
        (0..3)
            .map(|i| round(i, 100, 10_000.0 + f64::from(i) * 50.0))
            .collect()
    }

    #[test]
    fn accepts_steady_clean_rounds() {
        let cell = judge_rounds(steady(), &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Accepted, "{:?}", cell.verdict);
    }

    #[test]
    fn rejects_cell_that_never_reached_requested_connections() {
        let mut rounds: Vec<Round> = (0..3).map(|i| round(i, 10_000, 10_000.0)).collect();
        rounds[1].connections.established = 1_021;
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Rejected);
        assert!(cell.verdict.reasons.contains(&Reason::ConnectionsShort {
            round: 1,
            requested: 10_000,
            established: 1_021
        }));
    }

    #[test]
    fn rejects_error_rate_above_limit_counting_non_2xx_as_errors() {
        let mut rounds = steady();
        rounds[0].responses.s5xx = rounds[0].responses.s2xx / 100;
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert!(
            matches!(cell.verdict.reasons[0], Reason::ErrorRate { rate, .. } if rate > 0.001),
            "{:?}",
            cell.verdict
        );
    }

    #[test]
    fn rejects_oom_and_crash() {
        let mut rounds = steady();
        rounds[2].server.oom_kills = 1;
        rounds[2].server.restarts = 1;
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Rejected);
        assert!(cell
            .verdict
            .reasons
            .contains(&Reason::OomKilled { kills: 1 }));
        assert!(cell
            .verdict
            .reasons
            .contains(&Reason::Crashed { restarts: 1 }));
    }

    #[test]
    fn rejects_throughput_that_counted_non_2xx() {
        let mut rounds = steady();
        rounds[0].responses.s4xx = 5;
        rounds[0].throughput_rps += 5.0 / rounds[0].duration_s;
        let cell = judge_rounds(
            rounds,
            &Thresholds {
                max_error_rate: 1.0,
                ..Thresholds::default()
            },
        );
        assert!(
            cell.verdict
                .reasons
                .iter()
                .any(|r| matches!(r, Reason::ThroughputNotFrom2xx { round: 0, .. })),
            "{:?}",
            cell.verdict
        );
    }

    #[test]
    fn flags_a_loader_that_keeps_hitting_its_cpu_quota() {
        let mut rounds = steady();
        rounds[2].loader.throttled_fraction = Some(0.8);
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Flagged);
        assert!(
            matches!(cell.verdict.reasons[..], [Reason::LoaderThrottled { fraction, .. }] if fraction == 0.8),
            "{:?}",
            cell.verdict
        );
        let mut rounds = steady();
        rounds[0].loader.throttled_fraction = Some(0.05);
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Accepted, "{:?}", cell.verdict);
    }

    #[test]
    fn flags_client_bound_cell_as_a_floor() {
        let mut rounds = steady();
        rounds[1].loader.cpu_fraction = 0.95;
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Flagged);
        assert!(matches!(
            cell.verdict.reasons[0],
            Reason::LoaderSaturated { .. }
        ));
    }

    #[test]
    fn flags_noisy_cell_and_the_suspect_round() {
        let rounds = vec![
            round(0, 100, 10_000.0),
            round(1, 100, 10_100.0),
            round(2, 100, 7_000.0),
        ];
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Flagged);
        assert!(cell
            .verdict
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::HighCv { .. })));
        assert!(cell.verdict.reasons.iter().any(
            |r| matches!(r, Reason::SuspectRound { round: 2, deviation, .. } if *deviation < -0.25)
        ));
    }

    #[test]
    fn flags_missed_rate_and_schedule_lag() {
        let mut rounds = steady();
        for r in &mut rounds {
            r.rate = Some(RateFigures {
                target_rps: 20_000.0,
                achieved_rps: 19_000.0,
                max_lag_us: 50_000,
            });
        }
        let cell = judge_rounds(rounds, &Thresholds::default());
        let kinds: Vec<_> = cell.verdict.reasons.iter().map(Reason::label).collect();
        assert!(
            kinds.contains(&"rate missed") && kinds.contains(&"schedule lag"),
            "{kinds:?}"
        );
    }

    #[test]
    fn flags_forced_environment_and_busy_host() {
        let mut rounds = steady();
        if let Some(h) = rounds[0].host.as_mut() {
            h.foreign_cores = 1.5;
        }
        let t = Thresholds::default();
        let ctx = GateContext {
            thresholds: &t,
            environment_forced: true,
            verify_failure: None,
            rounds_planned: 3,
        };
        let cell = finish_cell(key(), rounds, &ctx).unwrap();
        assert!(cell
            .verdict
            .reasons
            .contains(&Reason::EnvironmentNotAccepted));
        assert!(cell
            .verdict
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::HostBusy { .. })));
    }

    #[test]
    fn flags_cell_with_fewer_rounds_than_planned() {
        let mut rounds = steady();
        rounds.pop();
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Flagged);
        assert!(cell.verdict.reasons.contains(&Reason::IncompleteRounds {
            measured: 2,
            planned: 3
        }));
        assert!(!cell.is_complete());
    }

    #[test]
    fn rejects_scenario_the_framework_failed_to_verify() {
        let t = Thresholds::default();
        let ctx = GateContext {
            thresholds: &t,
            environment_forced: false,
            verify_failure: Some("body was `Hello` not `Hello, World!`"),
            rounds_planned: 3,
        };
        let cell = finish_cell(key(), steady(), &ctx).unwrap();
        assert_eq!(cell.verdict.status, Status::Rejected);
    }
}
