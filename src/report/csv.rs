//! results.csv: one row per cell and round (a cell that never ran, such as
//! one excluded by verify, gets one row with empty round fields), for
//! spreadsheets and pandas. Units are in the column names.

use std::path::PathBuf;

use anyhow::Context;

use super::{Exporter, Rendered};
use crate::results::{Cell, Reason, Results, Round};

/// results.csv.
pub struct CsvExporter;

const HEADER: &[&str] = &[
    "run_id",
    "framework",
    "scenario",
    "protocol",
    "concurrency",
    "target_rate_rps",
    "verdict",
    "reasons",
    "round",
    "warmup_s",
    "warmup_stable",
    "duration_s",
    "drain_s",
    "throughput_2xx_rps",
    "completed_2xx",
    "completed_3xx",
    "completed_4xx",
    "completed_5xx",
    "completed_other",
    "requests_sent",
    "requests_answered",
    "requests_lost",
    "errors_connect",
    "errors_read",
    "errors_write",
    "errors_timeout",
    "errors_parse",
    "errors_tls",
    "latency_mean_answered_us",
    "latency_stdev_answered_us",
    "latency_p50_us",
    "latency_p90_us",
    "latency_p99_us",
    "latency_p999_us",
    "latency_max_us",
    "latency_beyond_timeout",
    "requests_in_flight_at_end",
    "requests_unsent",
    "connections_requested",
    "connections_established",
    "connections_serving",
    "connections_reconnects",
    "connections_in_use_littles_law",
    "answers_checked",
    "answers_wrong",
    "wire_bytes_per_response",
    "achieved_rate_rps",
    "max_schedule_lag_us",
    "loader_threads",
    "loader_cpu_fraction_of_usable",
    "server_cpu_us_per_2xx",
    "server_memory_before_load_bytes",
    "server_memory_window_median_bytes",
    "server_memory_window_max_sample_bytes",
    "server_memory_window_peak_bytes",
    "server_memory_window_peak_source",
    "server_memory_lifetime_peak_bytes",
    "server_oom_kills",
    "server_restarts",
    "host_foreign_cores",
    "database_cpu_us_per_2xx",
    "database_saturation",
    "database_memory_window_median_bytes",
    "database_queries_per_response",
    "throughput_unit",
    "server_memory_per_connection_bytes",
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn row(results: &Results, cell: &Cell, round: Option<&Round>) -> Vec<String> {
    let k = &cell.key;
    let reasons: Vec<&str> = cell.verdict.reasons.iter().map(Reason::label).collect();
    let mut r = vec![
        results.run_id.clone(),
        k.framework.clone(),
        k.scenario.to_string(),
        k.protocol.to_string(),
        k.concurrency.to_string(),
        opt(k.rate),
        cell.verdict.status.to_string(),
        reasons.join("; "),
    ];
    match round {
        None => r.extend(std::iter::repeat_n(String::new(), HEADER.len() - r.len())),
        Some(x) => r.extend([
            x.index.to_string(),
            x.warmup_s.to_string(),
            opt(x.warmup_stable),
            x.duration_s.to_string(),
            x.drain_s.to_string(),
            x.throughput_rps.to_string(),
            x.responses.status_2xx.to_string(),
            x.responses.status_3xx.to_string(),
            x.responses.status_4xx.to_string(),
            x.responses.status_5xx.to_string(),
            x.responses.status_other.to_string(),
            x.requests.sent.to_string(),
            x.requests.answered.total().to_string(),
            x.requests.lost.total().to_string(),
            x.errors.connect.to_string(),
            x.errors.read.to_string(),
            x.errors.write.to_string(),
            x.errors.timeout.to_string(),
            x.errors.parse.to_string(),
            x.errors.tls.to_string(),
            // Over the answered requests only (latency_beyond_timeout
            // says how many are not in it); empty, not 0, when none was.
            opt((x.latency.count > 0).then_some(x.latency.mean_us)),
            opt((x.latency.count > 0).then_some(x.latency.stdev_us)),
            opt(x.latency.p50_us),
            opt(x.latency.p90_us),
            opt(x.latency.p99_us),
            opt(x.latency.p999_us),
            opt(x.latency.max_us),
            x.latency.beyond_timeout.to_string(),
            x.requests.in_flight_at_end.to_string(),
            x.requests.unsent.to_string(),
            x.connections.requested.to_string(),
            x.connections.established.to_string(),
            x.connections.serving.to_string(),
            x.connections.reconnects.to_string(),
            x.connections_in_use.to_string(),
            x.answers.checked.to_string(),
            x.answers.wrong.to_string(),
            opt(x.wire_bytes_per_response),
            opt(x.rate.as_ref().map(|r| r.achieved_rps)),
            opt(x.rate.as_ref().map(|r| r.max_lag_us)),
            x.loader.threads.to_string(),
            x.loader.cpu_fraction.to_string(),
            opt(x.server.cpu_us_per_request),
            opt(x.server.memory_before_bytes),
            opt(x.server.memory_median_bytes),
            opt(x.server.memory_max_bytes),
            opt(x.server.memory_window_peak_bytes),
            x.server.memory_peak_source.clone(),
            opt(x.server.memory_lifetime_peak_bytes),
            opt(x.server.oom_kills),
            x.server.restarts.to_string(),
            opt(x.host.as_ref().map(|h| h.foreign_cores)),
            opt(x.database.as_ref().and_then(|d| d.cpu_us_per_request)),
            opt(x.database.as_ref().and_then(|d| d.saturation)),
            opt(x.database.as_ref().and_then(|d| d.memory_median_bytes)),
            opt(x.database.as_ref().and_then(|d| d.queries_per_request)),
            // What `throughput_2xx_rps` counts: req/s, or msg/s (exact
            // echoes) and pings/s for WebSocket scenarios.
            k.scenario.rate_unit().to_string(),
            opt(x.server.memory_per_connection_bytes),
        ]),
    }
    r
}

impl Exporter<Results> for CsvExporter {
    fn render(&self, results: &Results) -> anyhow::Result<Vec<Rendered>> {
        let mut w = ::csv::Writer::from_writer(Vec::new());
        w.write_record(HEADER)?;
        for cell in &results.cells {
            if cell.rounds.is_empty() {
                w.write_record(row(results, cell, None))?;
            }
            for round in &cell.rounds {
                w.write_record(row(results, cell, Some(round)))?;
            }
        }
        let bytes = w.into_inner().context("finishing results.csv")?;
        Ok(vec![Rendered {
            path: PathBuf::from("results.csv"),
            bytes,
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::sample_results;

    #[test]
    fn one_row_per_round_and_one_per_cell_without_rounds() {
        let r = sample_results();
        let out = CsvExporter.render(&r).unwrap().remove(0);
        let mut rd = ::csv::Reader::from_reader(out.bytes.as_slice());
        let rows: Vec<_> = rd.records().map(|r| r.unwrap()).collect();
        let expected: usize = r.cells.iter().map(|c| c.rounds.len().max(1)).sum();
        assert_eq!(rows.len(), expected);
        assert!(rows.iter().all(|row| row.len() == HEADER.len()));
    }
}
