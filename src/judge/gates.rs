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
use crate::results::{Cell, CellKey, CellSummary, HostUse, Reason, Round, Thresholds, Verdict};

/// What the gates need to know besides the rounds.
#[derive(Debug, Clone, Copy)]
pub struct GateContext<'a> {
    /// Thresholds to apply.
    pub thresholds: &'a Thresholds,
    /// Preflight failed and the run went ahead anyway (`--accept-env`, or `preflight: warn`).
    pub environment_forced: bool,
    /// What verify found if the framework failed it for this cell's scenario.
    pub verify_failure: Option<&'a str>,
    /// Rounds the profile asked for: the most a cell takes.
    pub rounds_planned: u32,
    /// Rounds every cell takes: `rounds_planned`, or fewer when rounds go
    /// on only until the cell is precise.
    pub rounds_min: u32,
    /// The rounds went on until precise and the cell's headline figure
    /// reached the asked precision: its spread is what that precision
    /// allows, so a CV above `max_cv` is not flagged (the flag stays on
    /// cells that never got there).
    pub precise: bool,
    /// Closed loop: requests in flight per connection (Little's law is
    /// checked against connections served × this); `None` at a fixed rate,
    /// where the number in flight is not the connection count.
    pub closed_loop_pipeline: Option<u32>,
    /// Concurrent streams per HTTP/2 connection: what is in flight per
    /// connection on an h2 or h2c cell instead of `closed_loop_pipeline`.
    pub http2_streams: u32,
}

/// Summarise `rounds` and judge them: the finished cell.
pub fn finish_cell(
    key: CellKey,
    rounds: Vec<Round>,
    ctx: &GateContext<'_>,
) -> Result<Cell, HistogramError> {
    // The figures rest on the rounds not left out; every round still
    // counts for what went wrong in it (errors, connections, crashes).
    let kept: Vec<Round> = rounds
        .iter()
        .filter(|r| !left_out(r, ctx.thresholds))
        .cloned()
        .collect();
    let summary = CellSummary::of_kept(&rounds, &kept)?;
    // HTTP/2 keeps `http2_streams` requests in flight per connection.
    // A paced scenario (ws-idle) waits between its requests by design:
    // what is in flight is not the connection count, as at a fixed rate.
    let ctx = &GateContext {
        closed_loop_pipeline: ctx
            .closed_loop_pipeline
            .filter(|_| !key.scenario.is_paced())
            .map(|p| {
                if key.protocol.is_http2() {
                    ctx.http2_streams
                } else {
                    p
                }
            }),
        ..*ctx
    };
    let verdict = judge(&rounds, &kept, summary.as_ref(), ctx);
    Ok(Cell {
        key,
        rounds_planned: ctx.rounds_planned,
        rounds_min: (ctx.rounds_min < ctx.rounds_planned).then_some(ctx.rounds_min),
        rounds,
        summary,
        verdict,
        rank: None,
        precision: None,
    })
}

/// Whether the loader, not the server, set the cell's figure (flagged
/// client-bound: the loader saturated its CPU or its quota throttled it).
/// Its req/s is only a floor of what the server could do, and its latency
/// holds the loader's own queueing: the reports show it as a floor and
/// rank groups leave it out (`compare::rank`).
pub fn client_bound(cell: &Cell) -> bool {
    cell.verdict.reasons.iter().any(|r| {
        matches!(
            r,
            Reason::LoaderSaturated { .. } | Reason::LoaderThrottled { .. }
        )
    })
}

/// Whether `r` is left out of its cell's figures: measured on a busy host
/// (`busy_host`) or on a slowed machine (the probe's mark, unless
/// `slowed_machine` is off). It stays in the results
/// with the reason that left it out.
pub fn left_out(r: &Round, t: &Thresholds) -> bool {
    busy_host(r, t).is_some() || (r.slowed.is_some() && !t.off.slowed_machine)
}

/// The host figures of `r` when it was measured on a busy host: other
/// processes' CPU and the hypervisor's steal together above
/// `max_foreign_cores`.
fn busy_host<'a>(r: &'a Round, t: &Thresholds) -> Option<&'a HostUse> {
    r.host
        .as_ref()
        .filter(|h| h.not_ours_cores() > t.max_foreign_cores)
}

/// Cores the server must keep busy through a round for the probe to judge
/// it. Beside a busy server the probe reads steadily (within 1% across a
/// cell's rounds in the `standard` run) and the machine's speed sets the
/// server's figures; beside a server that mostly sleeps (a 10 ms delay at
/// 800 req/s) its reading wandered by ±10% from round to round with the
/// server's figures unmoved, so it judges nothing there.
pub const PROBE_BUSY_CORES: f64 = 0.5;

/// The probe reading a round can be judged by: its in-window median
/// exchange, ns, when it was probed and its server kept at least
/// `PROBE_BUSY_CORES` busy over the window.
pub fn judged_probe(r: &Round) -> Option<f64> {
    let m = r.machine?;
    let cores = r.server.cpu_time_us? as f64 / (r.duration_s * 1e6);
    (r.duration_s > 0.0 && cores >= PROBE_BUSY_CORES).then_some(m.exchange_ns)
}

/// Share of a framework's probed rounds below which its fast reference
/// sits: low enough to be a round outside any slow spell, high enough that
/// one freak fast sample does not set it.
pub const REFERENCE_QUANTILE: f64 = 0.10;

/// The fast reference of a framework's calibration probe: the
/// `REFERENCE_QUANTILE` quantile (lower nearest rank) of its rounds' probe
/// exchange, ns; `None` without any. Per framework, because the probe
/// shares the core with the server and a server's own load moves it a
/// little; a round is slowed only against rounds of the same server.
pub fn machine_reference(probes: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = probes.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[((v.len() - 1) as f64 * REFERENCE_QUANTILE).floor() as usize])
}

/// The round where `count` is largest, with it; `None` when it is 0 in
/// every round (the flag names the worst round, and only when there is one).
/// Share of a database scenario's required rows per response a round may
/// fall short by: the requests in flight as the window opened whose rows
/// were counted before it (at most the connections over the window's
/// responses; the counts run from the window's start to after the load,
/// once every backend flushed, so no flush lag can lower them).
pub const DATABASE_WORK_SLACK: f64 = 0.02;

/// `r`'s rows read or updated per response below its scenario's need.
fn database_work_short(r: &Round) -> Option<Reason> {
    let w = r.database.as_ref()?.work.as_ref()?;
    let short = |what: &str, per: Option<f64>, need: Option<f64>| match (per, need) {
        (Some(per), Some(need)) if per < need * (1.0 - DATABASE_WORK_SLACK) => {
            Some(Reason::DatabaseWorkShort {
                round: r.index,
                table: if what == "updated" {
                    "world".into()
                } else {
                    w.table.clone()
                },
                what: what.into(),
                per_request: per,
                required: need,
            })
        }
        _ => None,
    };
    short("read", w.rows_read_per_request, Some(w.rows_read_required)).or_else(|| {
        short(
            "updated",
            w.rows_written_per_request,
            w.rows_written_required,
        )
    })
}

fn worst(rounds: &[Round], count: impl Fn(&Round) -> u64) -> Option<(&Round, u64)> {
    rounds
        .iter()
        .map(|r| (r, count(r)))
        .filter(|&(_, n)| n > 0)
        .max_by_key(|&(_, n)| n)
}

/// Every reason that applies to these rounds, as a verdict.
/// `kept` are the rounds not left out (`left_out`), which the summary's
/// speed figures rest on.
pub fn judge(
    rounds: &[Round],
    kept: &[Round],
    summary: Option<&CellSummary>,
    ctx: &GateContext<'_>,
) -> Verdict {
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

    // Connections: the worst round decides (the 10K test that was really
    // 1K, or 10K connected of which the server served 1K).
    if let Some(r) = rounds
        .iter()
        .filter(|r| r.connections.serving < r.connections.requested)
        .min_by_key(|r| r.connections.serving)
    {
        reasons.push(Reason::ConnectionsShort {
            round: r.index,
            requested: r.connections.requested,
            established: r.connections.established,
            serving: r.connections.serving,
        });
    }

    let oom: u64 = rounds.iter().filter_map(|r| r.server.oom_kills).sum();
    if oom > 0 {
        reasons.push(Reason::OomKilled { kills: oom });
    }
    let restarts: u64 = rounds.iter().map(|r| r.server.restarts).sum();
    if restarts > 0 {
        reasons.push(Reason::Crashed { restarts });
    }

    for r in rounds.iter().filter(|r| !r.requests.balanced()) {
        reasons.push(Reason::RequestsUnaccounted {
            round: r.index,
            sent: r.requests.sent,
            answered: r.requests.answered.total(),
            lost: r.requests.lost.total(),
            in_flight: r.requests.in_flight_at_end,
        });
    }
    if let Some((r, in_flight)) = worst(rounds, |r| r.requests.in_flight_at_end) {
        reasons.push(Reason::InFlightAtEnd {
            round: r.index,
            in_flight,
        });
    }
    if let Some((r, unsent)) = worst(rounds, |r| r.requests.unsent) {
        reasons.push(Reason::Unsent {
            round: r.index,
            unsent,
            due: r.requests.due(),
        });
    }
    if let Some(r) = rounds.iter().find(|r| r.server.cpu_time_us.is_none()) {
        reasons.push(Reason::CpuUnknown {
            round: r.index,
            why: r
                .server
                .cpu_unknown
                .clone()
                .unwrap_or_else(|| "no reason recorded".into()),
        });
    }
    // Every load is keep-alive: a connection reopened inside the window
    // means the server closed it (or a timeout did).
    if let Some((r, reconnects)) = worst(rounds, |r| r.connections.reconnects) {
        reasons.push(Reason::Reconnects {
            round: r.index,
            reconnects,
            connections: r.connections.requested,
        });
    }
    // HTTP/2: a stream limit below `load.streams` caps what was in flight;
    // the round with the lowest limit decides.
    if let Some((r, s)) = rounds
        .iter()
        .filter_map(|r| r.stream_limit.map(|s| (r, s)))
        .min_by_key(|(_, s)| s.limit)
    {
        reasons.push(Reason::StreamLimit {
            round: r.index,
            limit: s.limit,
            streams: s.streams,
            connections: s.connections,
        });
    }
    let checked: u64 = rounds.iter().map(|r| r.answers.checked).sum();
    if let Some(first) = rounds.iter().find(|r| r.answers.wrong > 0) {
        reasons.push(Reason::WrongAnswers {
            round: first.index,
            checked,
            wrong: rounds.iter().map(|r| r.answers.wrong).sum(),
            example: first.answers.example.clone().unwrap_or_default(),
        });
    }

    if let Some(r) = rounds
        .iter()
        .filter(|r| r.tls.as_ref().is_some_and(|t| t.failed > 0))
        .max_by_key(|r| r.tls.as_ref().map_or(0, |t| t.failed))
    {
        let t = r.tls.as_ref().expect("filtered on tls");
        reasons.push(Reason::TlsFailed {
            round: r.index,
            failed: t.failed,
            tried: t.handshakes + t.failed,
            last_error: t
                .last_error
                .clone()
                .unwrap_or_else(|| "no reason given".into()),
        });
    }

    let errors: u64 = rounds.iter().map(Round::errors_total).sum();
    let attempts: u64 = rounds.iter().map(Round::attempts).sum();
    let rate = if attempts == 0 {
        0.0
    } else {
        errors as f64 / attempts as f64
    };
    if rate > t.max_error_rate && !t.off.max_error_rate {
        reasons.push(Reason::ErrorRate {
            rate,
            limit: t.max_error_rate,
            errors,
            attempts,
        });
    }
    if !rounds.is_empty() && rounds.iter().all(|r| r.responses.status_2xx == 0) {
        reasons.push(Reason::NoSuccess);
    }

    // Little's law (closed loop): what the figures say was in use must be
    // what was served. The round furthest off decides.
    if let (Some(pipeline), false) = (ctx.closed_loop_pipeline, t.off.littles_law_tolerance) {
        if let Some((r, expected, gap)) = rounds
            .iter()
            .filter_map(|r: &Round| {
                let expected = r.connections.serving as f64 * f64::from(pipeline);
                (expected > 0.0 && r.latency.count > 0)
                    .then(|| (r, expected, (r.connections_in_use / expected - 1.0).abs()))
            })
            .max_by(|a, b| a.2.total_cmp(&b.2))
        {
            if gap > t.littles_law_tolerance {
                reasons.push(Reason::LittlesLaw {
                    round: r.index,
                    in_use: r.connections_in_use,
                    expected,
                    tolerance: t.littles_law_tolerance,
                });
            }
        }
    }
    for r in rounds.iter().filter(|r| r.warmup_stable == Some(false)) {
        reasons.push(Reason::NotStable {
            round: r.index,
            warmup_s: r.warmup_s,
        });
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
    // Database work: rows the executor read (or updated) per 2xx response
    // below what the scenario needs is a cache or a fake, in any round.
    if let Some(short) = rounds.iter().find_map(database_work_short) {
        reasons.push(short);
    }
    // A round whose table change after the load did not show in the spot
    // check's answers: a cache still on.
    if let Some((r, c)) = rounds.iter().find_map(|r| {
        r.database
            .as_ref()
            .and_then(|d| d.table_change.as_ref())
            .filter(|c| !c.followed)
            .map(|c| (r, c))
    }) {
        reasons.push(Reason::DatabaseStale {
            round: r.index,
            detail: c.detail.clone(),
        });
    }
    // Database ceiling: the same threshold as the loader's.
    if let Some(db) = rounds
        .iter()
        .filter_map(|r| r.database.as_ref().and_then(|d| d.saturation))
        .reduce(f64::max)
        .filter(|&s| s >= t.loader_saturation)
    {
        reasons.push(Reason::DatabaseBound {
            saturation: db,
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
    // fewer rounds than every cell takes was cut short (past those, a cell
    // whose rounds go on until precise stops when it is).
    if ctx.verify_failure.is_none() && (rounds.len() as u32) < ctx.rounds_min {
        reasons.push(Reason::IncompleteRounds {
            measured: rounds.len() as u32,
            planned: ctx.rounds_min,
        });
    }
    // Answers in waves: a note naming them, from the round whose window
    // count was furthest from its rate over whole waves.
    if let Some((r, b)) = rounds
        .iter()
        .filter_map(|r| r.bursts.map(|b| (r, b)))
        .max_by(|(_, a), (_, b)| {
            (a.window_rps - a.rate_rps)
                .abs()
                .total_cmp(&(b.window_rps - b.rate_rps).abs())
        })
    {
        reasons.push(Reason::Bursts {
            round: r.index,
            period_s: b.period_s,
            per_burst: b.per_burst,
            rate_rps: b.rate_rps,
            window_rps: b.window_rps,
        });
    }
    // Rounds on a slowed machine are a note: left out of the figures and
    // measured again. The cell is flagged only when too few clean rounds
    // remain for what was asked.
    if !t.off.slowed_machine {
        for r in rounds {
            if let Some(s) = r.slowed {
                reasons.push(Reason::MachineSlowed {
                    round: r.index,
                    exchange_ns: s.exchange_ns,
                    reference_ns: s.reference_ns,
                    limit: s.limit,
                });
            }
        }
    }
    let slowed = rounds.iter().any(|r| r.slowed.is_some()) && !t.off.slowed_machine;
    if slowed && (rounds.len() as u32) >= ctx.rounds_min && (kept.len() as u32) < ctx.rounds_min {
        reasons.push(Reason::FewCleanRounds {
            clean: kept.len() as u32,
            asked: ctx.rounds_min,
        });
    }

    if let Some(s) = summary {
        let a = &s.throughput_rps;
        if a.n >= 2 && a.cv > t.max_cv && !t.off.max_cv && !ctx.precise {
            reasons.push(Reason::HighCv {
                cv: a.cv,
                limit: t.max_cv,
            });
        }
        for (r, dev) in kept.iter().zip(&a.deviation_from_median) {
            if dev.abs() > t.suspect_round && !t.off.suspect_round {
                reasons.push(Reason::SuspectRound {
                    round: r.index,
                    deviation: *dev,
                    limit: t.suspect_round,
                });
            }
        }
    }

    for r in rounds {
        if let Some(h) = busy_host(r, t) {
            reasons.push(Reason::HostBusy {
                round: r.index,
                foreign_cores: h.foreign_cores,
                limit: t.max_foreign_cores,
                softirq_cores: h.softirq_cores,
                steal_cores: h.steal_cores,
            });
        }
    }

    Verdict::from_reasons(reasons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{RateFigures, Status};
    use crate::testdata::round;

    fn key() -> CellKey {
        CellKey {
            framework: "demo".into(),
            scenario: crate::contract::Scenario::Plaintext,
            protocol: crate::contract::Protocol::Http1,
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
            rounds_min: 3,
            precise: false,
            closed_loop_pipeline: None,
            http2_streams: 1,
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

    /// Answers in waves leave the cell accepted, with a note naming the
    /// waves and both rates.
    #[test]
    fn notes_answers_that_came_in_bursts_without_flagging_the_cell() {
        let mut rounds = steady();
        rounds[1].bursts = Some(crate::roles::load::bursts::Bursts {
            period_s: 1.0,
            per_burst: 10_000.0,
            rate_rps: 10_050.0,
            window_rps: 12_000.0,
            periodicity: 0.9,
            concentration: 1.0,
            bin_s: 0.01,
        });
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Accepted, "{:?}", cell.verdict);
        let note = cell
            .verdict
            .reasons
            .iter()
            .find(|r| matches!(r, Reason::Bursts { round: 1, .. }))
            .expect("a bursts note");
        assert_eq!(note.label(), "bursts");
        let text = note.to_string();
        assert!(
            text.contains("bursts of about 10,000 every 1.00 s") && text.contains("12,000"),
            "{text}"
        );
    }

    #[test]
    fn rejects_cell_that_never_reached_requested_connections() {
        let mut rounds: Vec<Round> = (0..3).map(|i| round(i, 10_000, 10_000.0)).collect();
        rounds[1].connections.established = 1_021;
        rounds[1].connections.serving = 1_021;
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Rejected);
        assert!(cell.verdict.reasons.contains(&Reason::ConnectionsShort {
            round: 1,
            requested: 10_000,
            established: 1_021,
            serving: 1_021,
        }));
    }

    #[test]
    fn rejects_connections_established_but_never_served() {
        // A server that stops calling accept(): the handshakes complete in
        // its backlog, the connections never get an answer.
        let mut rounds = steady();
        rounds[0].connections.serving = 10;
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Rejected);
        let text = cell.verdict.reasons[0].to_string();
        assert!(
            text.contains("only 10 of 100 requested connections were served"),
            "{text}"
        );
        assert!(text.contains("100 established"), "{text}");
    }

    #[test]
    fn rejects_wrong_answers_under_load_with_the_example() {
        let mut rounds = steady();
        rounds[1].answers.wrong = 2;
        rounds[1].answers.example = Some("GET /: body `Hello, World?`".into());
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Rejected);
        assert!(
            cell.verdict.reasons.iter().any(|r| matches!(r,
                Reason::WrongAnswers { round: 1, wrong: 2, example, .. } if example.contains("World?"))),
            "{:?}",
            cell.verdict
        );
    }

    #[test]
    fn flags_a_closed_loop_cell_that_breaks_littles_law() {
        let ctx_rounds = |gap: f64| {
            let mut rounds = steady();
            rounds[2].connections_in_use = 100.0 * gap;
            let t = Thresholds::default();
            let ctx = GateContext {
                thresholds: &t,
                environment_forced: false,
                verify_failure: None,
                rounds_planned: 3,
                rounds_min: 3,
                precise: false,
                closed_loop_pipeline: Some(1),
                http2_streams: 1,
            };
            finish_cell(key(), rounds, &ctx).unwrap()
        };
        // The sample rounds obey it: in use = served connections.
        assert_eq!(ctx_rounds(1.0).verdict.status, Status::Accepted);
        assert_eq!(ctx_rounds(1.05).verdict.status, Status::Accepted);
        // Express at 1,000 connections: 4,918 req/s × 53 ms = 261 in use.
        let cell = ctx_rounds(0.261);
        assert!(
            cell.verdict.reasons.iter().any(|r| matches!(r,
                Reason::LittlesLaw { round: 2, expected, .. } if *expected == 100.0)),
            "{:?}",
            cell.verdict
        );
    }

    #[test]
    fn rejects_requests_the_loader_lost_track_of() {
        let mut rounds = steady();
        rounds[0].requests.sent += 3;
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Rejected);
        assert!(cell
            .verdict
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::RequestsUnaccounted { round: 0, .. })));
    }

    #[test]
    fn stuck_requests_count_as_errors_and_reject() {
        let mut rounds = steady();
        // 1 request in 100 of one round never answered: lost to timeouts.
        let stuck = rounds[0].requests.sent / 100;
        rounds[0].requests.answered.status_2xx -= stuck;
        rounds[0].requests.lost.timeout = stuck;
        rounds[0].errors.timeout = stuck;
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert!(
            matches!(cell.verdict.reasons[0], Reason::ErrorRate { errors, .. } if errors == stuck),
            "{:?}",
            cell.verdict
        );
    }

    #[test]
    fn flags_an_until_stable_warm_up_that_never_settled() {
        let mut rounds = steady();
        rounds[1].warmup_stable = Some(false);
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Flagged);
        assert!(cell
            .verdict
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::NotStable { round: 1, .. })));
    }

    #[test]
    fn rejects_error_rate_above_limit_counting_non_2xx_as_errors() {
        let mut rounds = steady();
        let bad = rounds[0].requests.answered.status_2xx / 100;
        rounds[0].requests.answered.status_2xx -= bad;
        rounds[0].requests.answered.status_5xx = bad;
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
        rounds[2].server.oom_kills = Some(1);
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
    fn flags_a_server_stream_limit_below_load_streams_naming_both_and_what_was_in_flight() {
        let mut rounds = steady();
        for (r, limit) in rounds.iter_mut().zip([8, 4, 8]) {
            r.stream_limit = Some(crate::results::StreamLimit {
                limit,
                streams: 32,
                connections: 8,
            });
        }
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Flagged, "{:?}", cell.verdict);
        let [reason] = &cell.verdict.reasons[..] else {
            panic!("{:?}", cell.verdict)
        };
        assert_eq!(
            *reason,
            Reason::StreamLimit {
                round: 1,
                limit: 4,
                streams: 32,
                connections: 8
            }
        );
        assert_eq!(reason.label(), "stream limit");
        let text = reason.to_string();
        assert!(
            text.contains("allows 4 concurrent streams per connection")
                && text.contains("fewer than the 32 load.streams asks")
                && text
                    .contains("8 connections × 4 streams = 32 requests in flight at most, not 256"),
            "{text}"
        );
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
    fn flags_a_database_bound_cell() {
        let mut rounds = steady();
        rounds[2].database = Some(crate::results::DatabaseUse {
            saturation: Some(0.97),
            ..Default::default()
        });
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Flagged);
        assert!(cell
            .verdict
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::DatabaseBound { saturation, .. } if *saturation == 0.97)));
    }

    #[test]
    fn rejects_a_database_cell_whose_rows_per_response_fall_short_naming_both() {
        let work = |read: f64, written: Option<f64>| crate::results::DatabaseUse {
            work: Some(crate::results::DatabaseWork {
                table: "world".into(),
                rows_read_per_request: Some(read),
                rows_read_required: 5.0,
                rows_written_per_request: written,
                rows_written_required: written.map(|_| 4.999),
                ..Default::default()
            }),
            ..Default::default()
        };
        // Honest: reads and writes as needed (within the slack).
        let mut rounds = steady();
        for r in &mut rounds {
            r.database = Some(work(10.0, Some(4.95)));
        }
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Accepted, "{:?}", cell.verdict);
        // A cache from round 2 on: rejected, naming the round and both numbers.
        let mut rounds = steady();
        rounds[0].database = Some(work(5.0, None));
        rounds[1].database = Some(work(0.4, None));
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Rejected, "{:?}", cell.verdict);
        let text = cell.verdict.reasons[0].to_string();
        assert!(
            text.contains("round 2")
                && text.contains("0.40 rows of world")
                && text.contains("needs 5.00"),
            "{text}"
        );
        // Reads as needed, writes rolled back or skipped.
        let mut rounds = steady();
        rounds[2].database = Some(work(10.0, Some(0.0)));
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert!(cell
            .verdict
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::DatabaseWorkShort { what, .. } if what == "updated")));
    }

    #[test]
    fn rejects_a_round_whose_answers_did_not_follow_the_table() {
        let change = |followed: bool| crate::results::DatabaseUse {
            table_change: Some(crate::results::TableChange {
                followed,
                detail: "8 of 8 rows held the old numbers".into(),
            }),
            ..Default::default()
        };
        let mut rounds = steady();
        rounds[0].database = Some(change(true));
        rounds[2].database = Some(change(false));
        let cell = judge_rounds(rounds, &Thresholds::default());
        assert_eq!(cell.verdict.status, Status::Rejected, "{:?}", cell.verdict);
        let text = cell.verdict.reasons[0].to_string();
        assert!(
            text.starts_with("round 3: answers did not follow the table: 8 of 8"),
            "{text}"
        );
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
    fn a_cell_precise_as_asked_is_not_flagged_for_its_cv_but_keeps_its_suspect_round() {
        let rounds = vec![
            round(0, 100, 10_000.0),
            round(1, 100, 10_100.0),
            round(2, 100, 7_000.0),
        ];
        let t = Thresholds::default();
        let ctx = GateContext {
            thresholds: &t,
            environment_forced: false,
            verify_failure: None,
            rounds_planned: 6,
            rounds_min: 3,
            precise: true,
            closed_loop_pipeline: None,
            http2_streams: 1,
        };
        let cell = finish_cell(key(), rounds, &ctx).unwrap();
        assert!(!cell
            .verdict
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::HighCv { .. })));
        assert!(cell
            .verdict
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::SuspectRound { .. })));
        assert_eq!(cell.rounds_min, Some(3));
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
            rounds_min: 3,
            precise: false,
            closed_loop_pipeline: None,
            http2_streams: 1,
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
    fn cores_the_hypervisor_stole_count_against_the_host_like_other_work() {
        // Each alone under the 0.5-core limit; together over it: the round
        // is left out and the reason names both parts.
        let mut rounds = steady();
        let h = rounds[1].host.as_mut().unwrap();
        h.foreign_cores = 0.3;
        h.steal_cores = 0.4;
        let t = Thresholds::default();
        assert!(left_out(&rounds[1], &t));
        assert!(!left_out(&rounds[0], &t));
        let cell = judge_rounds(rounds.clone(), &t);
        let busy: Vec<String> = cell
            .verdict
            .reasons
            .iter()
            .filter(|r| matches!(r, Reason::HostBusy { round: 1, .. }))
            .map(ToString::to_string)
            .collect();
        assert_eq!(busy.len(), 1, "{:?}", cell.verdict.reasons);
        assert!(
            busy[0].contains("other processes 0.30")
                && busy[0].contains("stolen by the hypervisor 0.40"),
            "{busy:?}"
        );
        // Steal alone, under the limit: not busy.
        rounds[1].host.as_mut().unwrap().foreign_cores = 0.0;
        assert!(!left_out(&rounds[1], &t));
    }

    #[test]
    fn rounds_left_out_leave_the_speed_figures_but_count_for_what_went_wrong() {
        // Round 2 on a busy host and round 3 on a slowed machine, both slow
        // and with errors: req/s, its spread and latency are the clean
        // rounds'; the errors of every round count.
        let mut rounds = vec![
            round(0, 100, 10_000.0),
            round(1, 100, 10_050.0),
            round(2, 100, 6_000.0),
            round(3, 100, 7_000.0),
        ];
        rounds[2].host.as_mut().unwrap().foreign_cores = 1.5;
        rounds[3].slowed = crate::results::Slowed::judge(8_500.0, 5_000.0, 0.10);
        for r in &mut rounds[2..] {
            r.errors.timeout = 5;
        }
        let cell = judge_rounds(rounds.clone(), &Thresholds::default());
        let s = cell.summary.as_ref().unwrap();
        assert_eq!(s.throughput_rps.n, 2);
        assert!((s.throughput_rps.median - 10_025.0).abs() < 1e-9, "{s:?}");
        assert!(s.throughput_rps.cv < 0.01, "{s:?}");
        assert_eq!(
            s.errors.timeout, 10,
            "errors of left-out rounds still count"
        );
        let clean = CellSummary::of(&rounds[..2]).unwrap().unwrap();
        assert_eq!(s.latency, clean.latency);
        let r = &cell.verdict.reasons;
        assert!(
            !r.iter()
                .any(|x| matches!(x, Reason::HighCv { .. } | Reason::SuspectRound { .. })),
            "{r:?}"
        );
        assert!(r
            .iter()
            .any(|x| matches!(x, Reason::HostBusy { round: 2, .. })));
        assert!(r
            .iter()
            .any(|x| matches!(x, Reason::MachineSlowed { round: 3, .. })));
        // Switched off, the slowed round counts again, and is noisy.
        let mut t = Thresholds::default();
        t.off.slowed_machine = true;
        let cell = judge_rounds(rounds, &t);
        assert_eq!(cell.summary.unwrap().throughput_rps.n, 3);
        assert!(!cell
            .verdict
            .reasons
            .iter()
            .any(|x| matches!(x, Reason::MachineSlowed { .. })));
    }

    #[test]
    fn the_probe_judges_only_rounds_whose_server_kept_its_core_busy() {
        let mut r = round(0, 100, 10_000.0);
        r.machine = Some(crate::results::MachineSpeed {
            core: 0,
            samples: 12,
            exchange_ns: 5_000.0,
            exchange_ns_min: 4_900.0,
            exchange_ns_max: 5_100.0,
        });
        let window_us = r.duration_s * 1e6;
        r.server.cpu_time_us = Some((0.9 * window_us) as u64);
        assert_eq!(judged_probe(&r), Some(5_000.0));
        r.server.cpu_time_us = Some((0.3 * window_us) as u64);
        assert_eq!(judged_probe(&r), None, "a server that mostly sleeps");
        r.server.cpu_time_us = None;
        assert_eq!(judged_probe(&r), None, "CPU unknown");
        r.server.cpu_time_us = Some(window_us as u64);
        r.machine = None;
        assert_eq!(judged_probe(&r), None, "not probed");
    }

    #[test]
    fn machine_reference_is_the_lower_tenth_of_the_probes() {
        assert_eq!(machine_reference([]), None);
        assert_eq!(machine_reference([8.0]), Some(8.0));
        assert_eq!(machine_reference([8.0, 5.0, 9.0]), Some(5.0));
        // 21 values: the 10th percentile is the third smallest.
        let v: Vec<f64> = (0..21).map(|i| 100.0 - f64::from(i)).collect();
        assert_eq!(machine_reference(v), Some(82.0));
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
            rounds_min: 3,
            precise: false,
            closed_loop_pipeline: None,
            http2_streams: 1,
        };
        let cell = finish_cell(key(), steady(), &ctx).unwrap();
        assert_eq!(cell.verdict.status, Status::Rejected);
    }
}
