//! Verdicts on a cell and the reasons behind them, as data: what was measured,
//! against which threshold, and the words the report shows.
//!
//! This module owns the vocabulary (the [`Reason`] enum and its Display; the
//! [`Thresholds`] with their sources are the profile's, in `profile::thresholds`). Deciding which reasons apply is
//! `judge::gates`; this module must not look at measurements.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::contract::Scenario;

pub use crate::profile::thresholds::*;

/// The overall judgement of a cell.
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
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// No gate objected: the number stands as measured.
    Accepted,
    /// Kept and shown, with a marker: read the reason before comparing.
    Flagged,
    /// Not a valid measurement: the report shows the reason, not the number.
    Rejected,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Accepted => "accepted",
            Status::Flagged => "flagged",
            Status::Rejected => "rejected",
        })
    }
}

/// Why a cell is flagged or rejected: the measured value and the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    // ---- rejections ----
    /// Fewer connections were served than the cell asked for: not
    /// established (nofile, backlog, refused), or connected but never
    /// answered (a server that stopped calling accept()).
    ConnectionsShort {
        /// Round (0-based) with the fewest connections served.
        round: u32,
        /// Connections requested.
        requested: u64,
        /// Connection slots connected before the window.
        established: u64,
        /// Connections that got a response inside the window.
        serving: u64,
    },
    /// Errors (socket errors plus non-2xx responses) above the limit.
    ErrorRate {
        /// Errors / attempts over all rounds (a fraction).
        rate: f64,
        /// The limit (a fraction).
        limit: f64,
        /// Errors counted.
        errors: u64,
        /// Attempts counted (requests sent in the window, plus errors that
        /// lost no request such as failed connects).
        attempts: u64,
    },
    /// Answers checked under load were not what the contract says: a
    /// framework that passes verification and then serves something else
    /// gets no number.
    WrongAnswers {
        /// Round (0-based) of the first wrong answer.
        round: u32,
        /// Answers checked over the rounds.
        checked: u64,
        /// Wrong ones.
        wrong: u64,
        /// The first, with what was expected.
        example: String,
    },
    /// TLS handshakes failed: a certificate the run's CA did not sign, no
    /// protocol in common under ALPN (h2 asked, http/1.1 agreed), a
    /// handshake that timed out. A server that cannot agree to the
    /// protocol asked gets no number for it.
    TlsFailed {
        /// Round (0-based) with the most failed handshakes.
        round: u32,
        /// Handshakes that failed in it.
        failed: u64,
        /// Handshakes tried in it (failed included).
        tried: u64,
        /// The last failure, in the loader's words (what was agreed).
        last_error: String,
    },
    /// The kernel OOM killer ended a server process during the cell.
    OomKilled {
        /// OOM kills counted by the cgroup.
        kills: u64,
    },
    /// The server container exited or restarted during measurement.
    Crashed {
        /// Unexpected restarts or exits counted.
        restarts: u64,
    },
    /// A container the server depends on (its database) exited, or the
    /// kernel OOM-killed inside it, during the cell.
    DatabaseDown {
        /// Round (0-based) after which it was found down.
        round: u32,
        /// The container, by name, and how it ended.
        what: String,
    },
    /// The framework failed contract verification for this scenario.
    FailedVerify {
        /// What verification found.
        detail: String,
    },
    /// Requests sent inside the window were not all answered or lost: some
    /// went missing. An invariant of the loader itself.
    RequestsUnaccounted {
        /// Round (0-based).
        round: u32,
        /// Requests sent inside the window.
        sent: u64,
        /// Answered (whenever).
        answered: u64,
        /// Lost to errors and timeouts.
        lost: u64,
        /// Still in flight when the drain ended.
        #[serde(default)]
        in_flight: u64,
    },
    /// No round produced a single 2xx response.
    NoSuccess,
    // ---- flags ----
    /// The loader used most of its CPU allotment: the figure is a floor for
    /// the server, not its speed.
    LoaderSaturated {
        /// Highest loader CPU use over the rounds, fraction of allotment.
        cpu_fraction: f64,
        /// Saturation threshold (a fraction).
        threshold: f64,
    },
    /// A database cell's rows read (or updated) per 2xx response, by the
    /// tables' own counters, fell below what its scenario needs: answers
    /// from a cache or made up (a rule of the contract, so a rejection).
    DatabaseWorkShort {
        /// Round (0-based) with the least work per response.
        round: u32,
        /// The table counted: `world` or `fortune`.
        table: String,
        /// `read` or `updated`.
        what: String,
        /// Rows per 2xx response the executor counted.
        per_request: f64,
        /// Rows per response the scenario needs.
        required: f64,
    },
    /// After a database round fairground changed the table behind the
    /// server's back, and the spot check's answers did not follow: a cache.
    DatabaseStale {
        /// Round (0-based).
        round: u32,
        /// What was asked and seen.
        detail: String,
    },
    /// The database ran near its CPU ceiling (database scenarios): the
    /// figure is the database's as much as the framework's.
    DatabaseBound {
        /// Highest database saturation over the rounds
        /// ([`super::DatabaseUse::saturation`]).
        saturation: f64,
        /// Threshold (the loader's saturation threshold).
        threshold: f64,
    },
    /// The loader kept running out of its CPU quota: client-bound even if
    /// its average CPU use looks lower.
    LoaderThrottled {
        /// Highest share of throttled periods over the rounds.
        fraction: f64,
        /// Threshold (a fraction).
        threshold: f64,
    },
    /// Closed loop: connections in use by the figures (responses per second
    /// × mean latency) do not match the connections served × pipeline, as
    /// Little's law says they must; the figures measure something else.
    LittlesLaw {
        /// Round (0-based) furthest off.
        round: u32,
        /// Responses per second × mean latency.
        in_use: f64,
        /// Connections served × pipeline depth.
        expected: f64,
        /// Largest accepted |in_use / expected − 1|.
        tolerance: f64,
    },
    /// Until-stable warm-up: the warm-up windows never agreed, and the
    /// window opened when its longest time ran out.
    NotStable {
        /// Round (0-based).
        round: u32,
        /// Warm-up spent, seconds.
        warmup_s: f64,
    },
    /// Fixed rate: the loader did not achieve the target rate.
    RateShort {
        /// Lowest achieved / target over the rounds.
        ratio: f64,
        /// Threshold.
        threshold: f64,
    },
    /// Fixed rate: sends ran late against the schedule.
    ScheduleLag {
        /// Largest lag over the rounds, µs.
        max_lag_us: u64,
        /// Bound, µs.
        bound_us: u64,
    },
    /// Throughput varied across rounds more than the limit.
    HighCv {
        /// CV of throughput across rounds (a fraction).
        cv: f64,
        /// Limit (a fraction).
        limit: f64,
    },
    /// One round's throughput was far from the median (kept and shown).
    SuspectRound {
        /// Round (0-based).
        round: u32,
        /// (round − median) / median, signed fraction.
        deviation: f64,
        /// Limit on |deviation| (a fraction).
        limit: f64,
    },
    /// Something else on the host used CPU during a round.
    HostBusy {
        /// Round (0-based).
        round: u32,
        /// Cores used by processes other than the server and the loader.
        foreign_cores: f64,
        /// Limit, cores.
        limit: f64,
        /// Cores in soft interrupts meanwhile (not counted foreign).
        #[serde(default)]
        softirq_cores: f64,
        /// Cores stolen by the hypervisor meanwhile.
        #[serde(default)]
        steal_cores: f64,
    },
    /// Requests of the window were still in flight when the drain ended
    /// (neither answered nor past their own deadline): their latency is
    /// only known to exceed the drain.
    InFlightAtEnd {
        /// Round (0-based).
        round: u32,
        /// Requests still in flight.
        in_flight: u64,
    },
    /// Fixed rate: requests due inside the window were never written
    /// because each connection was still busy with earlier ones: the
    /// server (or the loader) could not keep the rate. They count as
    /// slower than the timeout in the percentiles.
    Unsent {
        /// Round (0-based) with the most.
        round: u32,
        /// Requests due and never sent in that round.
        unsent: u64,
        /// Requests due in that round's window.
        due: u64,
    },
    /// Connections were reopened inside the window of a keep-alive load:
    /// the server (or a timeout) closed them, so the cell measured
    /// connection setup as well as requests.
    Reconnects {
        /// Round (0-based) with the most.
        round: u32,
        /// Connections reopened in that round's window.
        reconnects: u64,
        /// Connections requested.
        connections: u64,
    },
    /// The server's CPU time over the window could not be read: CPU per
    /// request is unknown (absent, never 0) for this round.
    CpuUnknown {
        /// Round (0-based), the first one.
        round: u32,
        /// Why (the sampler's reason).
        why: String,
    },
    /// HTTP/2: the server allowed fewer concurrent streams per connection
    /// (SETTINGS_MAX_CONCURRENT_STREAMS) than `load.streams` asked; the
    /// others waited in the loader's queue, so the cell measured less
    /// concurrency than it names (lawful HTTP/2, so a flag).
    StreamLimit {
        /// Round (0-based) with the lowest limit.
        round: u32,
        /// The server's limit, streams per connection.
        limit: u64,
        /// Streams per connection asked (`load.streams`).
        streams: u64,
        /// Connections asked.
        connections: u64,
    },
    /// Preflight failed and the run went ahead with `--accept-env`.
    EnvironmentNotAccepted,
    /// Fewer rounds than planned were measured.
    IncompleteRounds {
        /// Rounds measured.
        measured: u32,
        /// Rounds planned.
        planned: u32,
    },
    /// A note, not a flag: the calibration probe found the machine slowed
    /// in this round, so it is left out of the figures (and was measured
    /// again).
    MachineSlowed {
        /// Round (0-based).
        round: u32,
        /// The round's probe exchange, ns.
        exchange_ns: f64,
        /// The framework's fast reference it was judged by, ns.
        reference_ns: f64,
        /// Largest accepted slowdown (a fraction).
        limit: f64,
    },
    /// The answers came in waves a period apart (an event loop that
    /// answers every connection once per sweep): the rate is read over
    /// whole waves, not the window's count. A note, not a flag.
    Bursts {
        /// Round (0-based) where the count over the window was furthest
        /// from the rate over whole waves.
        round: u32,
        /// Time between two waves, seconds.
        period_s: f64,
        /// 2xx answers per wave.
        per_burst: f64,
        /// 2xx per second read over whole waves (the round's figure).
        rate_rps: f64,
        /// 2xx ÷ the window, which moves with the window's phase.
        window_rps: f64,
    },
    /// Fewer rounds than asked were measured on an unslowed, quiet machine:
    /// the figures rest on the clean ones.
    FewCleanRounds {
        /// Rounds the figures rest on.
        clean: u32,
        /// Rounds every cell takes.
        asked: u32,
    },
}

impl Reason {
    /// Whether this reason rejects the cell or only flags it.
    pub fn status(&self) -> Status {
        match self {
            Reason::ConnectionsShort { .. }
            | Reason::ErrorRate { .. }
            | Reason::OomKilled { .. }
            | Reason::Crashed { .. }
            | Reason::FailedVerify { .. }
            | Reason::DatabaseDown { .. }
            | Reason::WrongAnswers { .. }
            | Reason::TlsFailed { .. }
            | Reason::RequestsUnaccounted { .. }
            | Reason::DatabaseWorkShort { .. }
            | Reason::DatabaseStale { .. }
            | Reason::NoSuccess => Status::Rejected,
            Reason::MachineSlowed { .. } | Reason::Bursts { .. } => Status::Accepted,
            _ => Status::Flagged,
        }
    }

    /// Short label for a table cell (the full text is in the notes).
    pub fn label(&self) -> &'static str {
        match self {
            Reason::ConnectionsShort { .. } => "connections short",
            Reason::ErrorRate { .. } => "errors",
            Reason::OomKilled { .. } => "OOM killed",
            Reason::Crashed { .. } => "crashed",
            Reason::FailedVerify { .. } => "failed verify",
            Reason::DatabaseDown { .. } => "database died",
            Reason::WrongAnswers { .. } => "wrong answers",
            Reason::TlsFailed { .. } => "TLS failed",
            Reason::RequestsUnaccounted { .. } => "requests unaccounted",
            Reason::LittlesLaw { .. } => "Little's law",
            Reason::NotStable { .. } => "not stable",
            Reason::NoSuccess => "no 2xx",
            Reason::LoaderSaturated { .. } | Reason::LoaderThrottled { .. } => "client-bound",
            Reason::DatabaseWorkShort { .. } => "database work short",
            Reason::DatabaseStale { .. } => "stale answers (cache)",
            Reason::DatabaseBound { .. } => "database-bound",
            Reason::RateShort { .. } => "rate missed",
            Reason::ScheduleLag { .. } => "schedule lag",
            Reason::HighCv { .. } => "noisy",
            Reason::SuspectRound { .. } => "suspect round",
            Reason::HostBusy { .. } => "host busy",
            Reason::EnvironmentNotAccepted => "env not accepted",
            Reason::IncompleteRounds { .. } => "incomplete",
            Reason::InFlightAtEnd { .. } => "drain too short",
            Reason::Unsent { .. } => "unsent requests",
            Reason::Reconnects { .. } => "reconnects",
            Reason::CpuUnknown { .. } => "CPU unknown",
            Reason::StreamLimit { .. } => "stream limit",
            Reason::MachineSlowed { .. } => "round re-measured",
            Reason::Bursts { .. } => "bursts",
            Reason::FewCleanRounds { .. } => "slowed machine",
        }
    }
}

fn pct(x: f64) -> String {
    crate::units::percent(x)
}

/// A value and its limit as percentages with enough digits to tell them
/// apart (0.104% against 0.1% is not "0.1% above the limit 0.1%").
fn pct_vs(value: f64, limit: f64) -> (String, String) {
    crate::units::percents_apart(value, limit)
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::ConnectionsShort { round, requested, established, serving } => write!(
                f,
                "only {serving} of {requested} requested connections were served in round {} ({established} established): the cell did not test the concurrency it names",
                round + 1
            ),
            Reason::ErrorRate { rate, limit, errors, attempts } => {
                let (r, l) = pct_vs(*rate, *limit);
                write!(
                    f,
                    "error rate {r} ({errors} of {attempts} attempts: lost requests, timeouts, failed connects and non-2xx answers) is above the limit {l}"
                )
            }
            Reason::WrongAnswers { round, checked, wrong, example } => write!(
                f,
                "{wrong} of {checked} answers checked under load were wrong (first in round {}): {example}",
                round + 1
            ),
            Reason::TlsFailed { round, failed, tried, last_error } => write!(
                f,
                "{failed} of {tried} TLS handshakes failed in round {}: {last_error}",
                round + 1
            ),
            Reason::OomKilled { kills } => write!(
                f,
                "the server was killed by the kernel OOM killer ({kills} kill(s), cgroup memory.events oom_kill)"
            ),
            Reason::Crashed { restarts } => write!(
                f,
                "the server container exited or restarted {restarts} time(s) during measurement"
            ),
            Reason::DatabaseDown { round, what } => write!(
                f,
                "{what} (found after round {}): the cell is not measured past it, and the framework's remaining cells were not measured",
                round + 1
            ),
            Reason::FailedVerify { detail } => {
                write!(f, "the framework failed contract verification for this scenario: {detail}")
            }
            Reason::RequestsUnaccounted { round, sent, answered, lost, in_flight } => write!(
                f,
                "round {}: {sent} requests sent in the window but {answered} answered + {lost} lost + {in_flight} still in flight; the loader lost track of {}",
                round + 1,
                sent.abs_diff(answered + lost + in_flight)
            ),
            Reason::InFlightAtEnd { round, in_flight } => write!(
                f,
                "round {}: {in_flight} requests of the window were still in flight when the drain ended (their latency is only known to exceed the timeout); a longer load.timeout gives them time",
                round + 1
            ),
            Reason::Unsent { round, unsent, due } => write!(
                f,
                "round {}: {unsent} of the {due} requests due in the window were never sent, each connection still waiting on earlier answers: the server could not keep the rate; they count as slower than the timeout in the percentiles",
                round + 1
            ),
            Reason::CpuUnknown { round, why } => write!(
                f,
                "round {}: the server's CPU time could not be read, so CPU per request is unknown (not 0): {why}",
                round + 1
            ),
            Reason::Reconnects { round, reconnects, connections } => write!(
                f,
                "round {}: {reconnects} connections were reopened inside the window of a keep-alive load of {connections} connections (the server or a timeout closed them): the figures include connection setup",
                round + 1
            ),
            Reason::LittlesLaw { round, in_use, expected, tolerance } => write!(
                f,
                "round {}: responses/s × mean latency = {in_use:.1} connections in use, but {expected:.0} were served (tolerance ±{}): requests waited without being counted (stuck connections, a loader that stalled) or the window's figures are biased",
                round + 1,
                pct(*tolerance)
            ),
            Reason::NotStable { round, warmup_s } => write!(
                f,
                "round {}: the warm-up was not stable after {warmup_s:.1} s; the window opened anyway",
                round + 1
            ),
            Reason::NoSuccess => f.write_str("no round produced a 2xx response"),
            Reason::LoaderSaturated { cpu_fraction, threshold } => {
                let (v, t) = pct_vs(*cpu_fraction, *threshold);
                write!(
                    f,
                    "the load generator used {v} of the CPU its threads can use (threshold {t}): the server may be faster than shown; compare CPU µs per request instead"
                )
            }
            Reason::DatabaseWorkShort {
                round,
                table,
                what,
                per_request,
                required,
            } => write!(
                f,
                "round {}: PostgreSQL's executor {what} {per_request:.2} rows of {table} per 2xx response, \
                 the scenario needs {required:.2}: answers served from a cache or made up \
                 (rows counted by the table's own counters, not by statement text)",
                round + 1
            ),
            Reason::DatabaseStale { round, detail } => write!(
                f,
                "round {}: answers did not follow the table: {detail}: a cache",
                round + 1
            ),
            Reason::DatabaseBound {
                saturation,
                threshold,
            } => {
                let (v, t) = pct_vs(*saturation, *threshold);
                write!(
                    f,
                    "the database ran at {v} of its CPU ceiling (threshold {t}): the figure is the database's as much as the framework's; compare the framework's CPU µs per request"
                )
            }
            Reason::LoaderThrottled { fraction, threshold } => {
                let (v, t) = pct_vs(*fraction, *threshold);
                write!(
                    f,
                    "the load generator was throttled by its CPU quota in {v} of scheduler periods (threshold {t}): the server may be faster than shown; compare CPU µs per request instead"
                )
            }
            Reason::RateShort { ratio, threshold } => {
                let (v, t) = pct_vs(*ratio, *threshold);
                write!(f, "achieved only {v} of the target rate (threshold {t})")
            }
            Reason::ScheduleLag { max_lag_us, bound_us } => write!(
                f,
                "the loader sent late: schedule lag up to {max_lag_us} µs exceeds {bound_us} µs"
            ),
            Reason::IncompleteRounds { measured, planned } => write!(
                f,
                "only {measured} of {planned} planned rounds were measured (run interrupted or server lost)"
            ),
            Reason::MachineSlowed { round, exchange_ns, reference_ns, limit } => write!(
                f,
                "round {} ran on a slowed machine: the calibration probe read {:.2} µs per exchange, {} above this framework's fast reference {:.2} µs (limit {}); left out of the figures and measured again",
                round + 1,
                exchange_ns / 1000.0,
                pct(exchange_ns / reference_ns - 1.0),
                reference_ns / 1000.0,
                pct(*limit),
            ),
            Reason::Bursts { round, period_s, per_burst, rate_rps, window_rps } => write!(
                f,
                "answers came in bursts of about {} every {} (round {}): the rate is read over whole waves, {} req/s, where a count over the window read {} req/s and would move by up to one wave with where its edges fell",
                crate::units::thousands(*per_burst),
                crate::units::micros(period_s * 1e6),
                round + 1,
                crate::units::thousands(*rate_rps),
                crate::units::thousands(*window_rps),
            ),
            Reason::FewCleanRounds { clean, asked } => write!(
                f,
                "only {clean} of the {asked} rounds asked were measured on a quiet, unslowed machine (the others are left out, and their repeats were slowed or busy too); the figures rest on those {clean}"
            ),
            Reason::HighCv { cv, limit } => {
                let (v, l) = pct_vs(*cv, *limit);
                write!(f, "throughput varied across rounds: CV {v} is above the limit {l}")
            }
            Reason::SuspectRound { round, deviation, limit } => {
                let (d, l) = pct_vs(deviation.abs(), *limit);
                write!(
                    f,
                    "round {} was {}{d} from the median throughput (limit ±{l}); kept and shown",
                    round + 1,
                    if *deviation >= 0.0 { "+" } else { "−" },
                )
            }
            Reason::HostBusy { round, foreign_cores, limit, softirq_cores, steal_cores } => {
                let (v, l) =
                    crate::units::numbers_apart(*foreign_cores + *steal_cores, *limit, 2);
                write!(
                    f,
                    "round {}: {v} CPU cores of the host were not ours over the window (other processes {foreign_cores:.2}, stolen by the hypervisor {steal_cores:.2}; limit {l}; besides, soft interrupts {softirq_cores:.2} cores)",
                    round + 1
                )
            }
            Reason::StreamLimit { round, limit, streams, connections } => write!(
                f,
                "round {}: the server allows {limit} concurrent streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS), fewer than the {streams} load.streams asks: {connections} connections × {} streams = {} requests in flight at most, not {}; the others waited in the loader's queue and their wait is in the latency",
                round + 1,
                streams.min(limit),
                connections * streams.min(limit),
                connections * streams
            ),
            Reason::EnvironmentNotAccepted => f.write_str(
                "the environment failed preflight and the run went ahead anyway (--accept-env or preflight: warn)",
            ),
        }
    }
}

/// A cell's verdict: the status and every reason that led to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    /// Accepted, flagged or rejected; the worst status among the reasons.
    pub status: Status,
    /// Every reason found (empty when accepted), rejections first.
    pub reasons: Vec<Reason>,
}

impl Verdict {
    /// The distinct labels of the reasons, in order (a reason found in two
    /// rounds is one label), optionally leaving out incomplete rounds, which
    /// only matter once a run is over. Notes (a reason that changes no
    /// status) have no label: the notes section lists them.
    pub fn labels(&self, with_incomplete: bool) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for r in &self.reasons {
            if !with_incomplete && matches!(r, Reason::IncompleteRounds { .. }) {
                continue;
            }
            // A note (a round left out and measured again) changes no status.
            if r.status() == Status::Accepted {
                continue;
            }
            if !out.contains(&r.label()) {
                out.push(r.label());
            }
        }
        out
    }

    /// The verdict that follows from `reasons`.
    pub fn from_reasons(mut reasons: Vec<Reason>) -> Verdict {
        reasons.sort_by_key(|r| std::cmp::Reverse(r.status()));
        let status = reasons
            .iter()
            .map(Reason::status)
            .max()
            .unwrap_or(Status::Accepted);
        Verdict { status, reasons }
    }
}

/// A scenario a framework was verified against and excluded from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Exclusion {
    /// The scenario excluded.
    pub scenario: Scenario,
    /// The protocol it was verified in and excluded from; absent for
    /// `http1` (and in runs before protocols existed).
    #[serde(default, skip_serializing_if = "crate::contract::Protocol::is_http1")]
    pub protocol: crate::contract::Protocol,
    /// What verification found, in words.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_reason_decides_and_rejections_come_first() {
        let v = Verdict::from_reasons(vec![
            Reason::HighCv {
                cv: 0.08,
                limit: 0.05,
            },
            Reason::OomKilled { kills: 1 },
        ]);
        assert_eq!(v.status, Status::Rejected);
        assert!(matches!(v.reasons[0], Reason::OomKilled { .. }));
        assert_eq!(Verdict::from_reasons(vec![]).status, Status::Accepted);
    }

    #[test]
    fn labels_are_distinct_and_can_leave_out_incomplete_rounds() {
        let busy = |round| Reason::HostBusy {
            round,
            foreign_cores: 1.0,
            limit: 0.5,
            softirq_cores: 0.0,
            steal_cores: 0.0,
        };
        let v = Verdict::from_reasons(vec![
            busy(0),
            Reason::IncompleteRounds {
                measured: 1,
                planned: 2,
            },
            busy(1),
        ]);
        assert_eq!(v.labels(true), ["host busy", "incomplete"]);
        assert_eq!(v.labels(false), ["host busy"]);
    }

    #[test]
    fn reason_text_carries_value_and_threshold() {
        let r = Reason::LoaderSaturated {
            cpu_fraction: 0.97,
            threshold: 0.9,
        };
        assert_eq!(r.status(), Status::Flagged);
        let s = r.to_string();
        assert!(s.contains("97.0%") && s.contains("90.0%"), "{s}");
        let r = Reason::ConnectionsShort {
            round: 0,
            requested: 10_000,
            established: 1_021,
            serving: 1_021,
        };
        assert!(r.to_string().contains("only 1021 of 10000"), "{r}");
        // Digits enough to show why it failed: not "0.1% above 0.1%".
        let r = Reason::ErrorRate {
            rate: 0.00104,
            limit: 0.001,
            errors: 104,
            attempts: 100_000,
        };
        assert!(
            r.to_string().contains("0.104%") && r.to_string().contains("0.100%"),
            "{r}"
        );
    }
}
