//! The database container's figures of a round (database scenarios only):
//! its cgroup over the same window as the server's, what PostgreSQL itself
//! counted between the window's edges (`pg_stat_statements`), the rows its
//! executor read and wrote (the tables' own counters, once settled), and
//! whether answers followed a change of the table after the round.

use serde::{Deserialize, Serialize};

/// Statements of the contract's tables PostgreSQL counted over a window.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct DatabaseStatements {
    /// SELECTs of `world`.
    pub world_reads: u64,
    /// UPDATEs of `world`.
    pub world_updates: u64,
    /// Rows those UPDATEs changed.
    pub rows_updated: u64,
    /// SELECTs of `fortune`.
    pub fortune_reads: u64,
    /// Every statement of the contract's tables.
    pub total: u64,
}

/// The rows PostgreSQL's executor read and wrote in a round, by the
/// tables' own counters (`pg_stat_user_tables`: rows read by sequential and
/// index scans, rows updated), whatever the statements said: counted from
/// the window's start until the backends had flushed them after the load
/// (a backend keeps its counts up to 10 s; see docs/results.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DatabaseWork {
    /// The table the scenario reads: `world` or `fortune`.
    pub table: String,
    /// Rows of it read, from the window's start to the settled reading
    /// (less what the nudges needed of it, when they read it).
    pub rows_read: u64,
    /// Rows of `world` updated over the same span.
    pub rows_written: u64,
    /// Rows read per 2xx response of the window.
    pub rows_read_per_request: Option<f64>,
    /// Rows written per 2xx response of the window (updates only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_written_per_request: Option<f64>,
    /// Rows the scenario needs read per response: `db` 1, `queries-N` N,
    /// `fortunes` the table's rows, `updates-N` N plus the rows it writes
    /// (each write looks its row up).
    pub rows_read_required: f64,
    /// Rows `updates-N` needs written per response: its distinct ids,
    /// N less the repeats random ids bring (about 0.02 at N = 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_written_required: Option<f64>,
    /// From the load's end to the reading the figures rest on, seconds.
    pub settled_after_s: f64,
    /// 2xx responses the counts stand for: the window's, less those
    /// answered before the counts' first reading (a busy database answers
    /// it some way into the window), at the window's rate. The
    /// per-response figures divide by it; absent: the window's 2xx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responses: Option<u64>,
    /// 2xx answers of the requests fairground sent after the load so the
    /// database's backends flushed their counts at once (a few dozen, of
    /// the other table's scenario when the server answers it, else of the
    /// cheapest request of this table, whose rows are taken off
    /// `rows_read`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nudged_responses: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a round's spot check saw after fairground changed the table behind
/// the server's back (every row of `world` to a number it did not hold, or
/// a `fortune` row with markup added), once the load was over.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TableChange {
    /// Whether every answer of the spot check showed the change.
    pub followed: bool,
    /// What was asked and seen (the first stale answer when one was).
    pub detail: String,
}

/// The database's cgroup and counts as the lab read them over one window:
/// raw readings, summarised by [`DatabaseUse::of`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DatabaseSamples {
    /// CPU time inside the window, µs; `None`: unknown, `cpu_unknown` says why.
    pub cpu_time_us: Option<u64>,
    /// Why the CPU time is unknown.
    pub cpu_unknown: Option<String>,
    /// Memory samples inside the window, bytes.
    pub memory_samples_bytes: Vec<u64>,
    /// Statements counted over `statements_span_s` of the window; `None`
    /// when they could not be read (the reason in `statements_unknown`).
    pub statements: Option<DatabaseStatements>,
    /// The part of the window they were counted over, seconds.
    pub statements_span_s: Option<f64>,
    /// Why the statements are unknown.
    pub statements_unknown: Option<String>,
    /// The rows read and written (per-request figures not yet divided).
    pub work: Option<DatabaseWork>,
    /// The spot check after the table changed (`db`, `queries-N`, `fortunes`).
    pub table_change: Option<TableChange>,
    /// CPUs it was allotted.
    pub cpus: f64,
    /// What it shares its cores with (`the server`), if anything.
    pub shares_cores_with: Option<String>,
}

/// The database's use in a round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DatabaseUse {
    /// CPU time inside the window, µs.
    pub cpu_time_us: Option<u64>,
    /// CPU time per 2xx response, µs: the database's share of a request.
    pub cpu_us_per_request: Option<f64>,
    /// Why the CPU time is unknown, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_unknown: Option<String>,
    /// How near the database was to its CPU ceiling, from 0 to 1: its CPU
    /// over its allotment; when it shares the server's cores and used more
    /// CPU than the server, the two together over that allotment (the core
    /// they share ran full, and the database took most of it).
    pub saturation: Option<f64>,
    /// Median memory inside the window, bytes.
    pub memory_median_bytes: Option<u64>,
    /// Highest memory sample inside the window, bytes.
    pub memory_max_bytes: Option<u64>,
    /// Statements of the contract's tables per response: those counted
    /// over `statements_span_s`, over the responses of that span (the
    /// window's rate of answers times its length).
    pub queries_per_request: Option<f64>,
    /// The statements PostgreSQL counted over `statements_span_s`.
    pub statements: Option<DatabaseStatements>,
    /// The part of the window the statements were counted over, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statements_span_s: Option<f64>,
    /// Why the statements are unknown, when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statements_unknown: Option<String>,
    /// The rows the executor read and wrote, and per response: the work
    /// figure the gates judge (statements are the second figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<DatabaseWork>,
    /// After the load, fairground changed the table and asked a few
    /// requests: whether their answers followed (a cache's do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_change: Option<TableChange>,
    /// CPUs it was allotted.
    pub cpus: f64,
    /// What it shares its cores with, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares_cores_with: Option<String>,
}

impl DatabaseUse {
    /// The summary of `s` over a window of `duration_s` that served `ok`
    /// 2xx responses of `answered` (any status) while the server used
    /// `server_cpu_us`.
    pub fn of(
        s: DatabaseSamples,
        ok: u64,
        answered: u64,
        duration_s: f64,
        server_cpu_us: Option<u64>,
    ) -> Self {
        let per = |n: f64| (ok > 0).then(|| n / ok as f64);
        let samples: Vec<f64> = s.memory_samples_bytes.iter().map(|&b| b as f64).collect();
        let allot_us = s.cpus * duration_s * 1e6;
        let saturation = s.cpu_time_us.filter(|_| allot_us > 0.0).map(|db| {
            match (server_cpu_us, s.shares_cores_with.is_some()) {
                (Some(server), true) if db >= server => (db + server) as f64 / allot_us,
                _ => db as f64 / allot_us,
            }
        });
        DatabaseUse {
            cpu_time_us: s.cpu_time_us,
            cpu_us_per_request: s.cpu_time_us.and_then(|c| per(c as f64)),
            cpu_unknown: s.cpu_unknown,
            saturation,
            memory_median_bytes: crate::stats::median(&samples).map(|m| m.round() as u64),
            memory_max_bytes: s.memory_samples_bytes.iter().copied().max(),
            queries_per_request: match (s.statements, s.statements_span_s) {
                (Some(st), Some(span)) if answered > 0 && duration_s > 0.0 && span > 0.0 => {
                    Some(st.total as f64 / (answered as f64 / duration_s * span))
                }
                _ => None,
            },
            statements: s.statements,
            statements_span_s: s.statements_span_s,
            statements_unknown: s.statements_unknown,
            table_change: s.table_change,
            work: s.work.map(|w| {
                let counted = w.responses.unwrap_or(ok);
                let per = |n: f64| (counted > 0).then(|| n / counted as f64);
                DatabaseWork {
                    rows_read_per_request: per(w.rows_read as f64),
                    rows_written_per_request: w
                        .rows_written_required
                        .and_then(|_| per(w.rows_written as f64)),
                    ..w
                }
            }),
            cpus: s.cpus,
            shares_cores_with: s.shares_cores_with,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(db_cpu: u64, shares: bool) -> DatabaseSamples {
        DatabaseSamples {
            cpu_time_us: Some(db_cpu),
            memory_samples_bytes: vec![30, 10, 20],
            statements: Some(DatabaseStatements {
                world_reads: 2000,
                total: 2000,
                ..Default::default()
            }),
            statements_span_s: Some(0.5),
            cpus: 1.0,
            shares_cores_with: shares.then(|| "the server".into()),
            ..Default::default()
        }
    }

    #[test]
    fn per_request_figures_divide_by_2xx() {
        let u = DatabaseUse::of(samples(400_000, false), 1000, 1000, 1.0, Some(500_000));
        assert_eq!(u.cpu_us_per_request, Some(400.0));
        // 2000 statements over half the window's 1000 answers.
        assert_eq!(u.queries_per_request, Some(4.0));
        assert_eq!(u.memory_median_bytes, Some(20));
        assert_eq!(u.saturation, Some(0.4));
    }

    #[test]
    fn a_shared_core_run_full_by_the_database_is_saturated() {
        let u = DatabaseUse::of(samples(600_000, true), 1000, 1000, 1.0, Some(380_000));
        assert!((u.saturation.unwrap() - 0.98).abs() < 1e-9);
        // The server took most of the core: not the database's ceiling.
        let u = DatabaseUse::of(samples(300_000, true), 1000, 1000, 1.0, Some(680_000));
        assert_eq!(u.saturation, Some(0.3));
        // Nothing served: no per-request figure rather than a division by 0.
        let u = DatabaseUse::of(samples(1, false), 0, 0, 1.0, None);
        assert_eq!(u.cpu_us_per_request, None);
    }

    #[test]
    fn rows_of_work_are_per_2xx_response() {
        let mut s = samples(1, false);
        s.work = Some(DatabaseWork {
            table: "world".into(),
            rows_read: 9_000,
            rows_written: 4_000,
            rows_read_required: 5.0,
            rows_written_required: Some(5.0),
            ..Default::default()
        });
        let w = DatabaseUse::of(s, 1000, 1200, 1.0, None).work.unwrap();
        assert_eq!(w.rows_read_per_request, Some(9.0));
        assert_eq!(w.rows_written_per_request, Some(4.0));
    }
}
