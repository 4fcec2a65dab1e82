//! A round from its two sources, in one step: the loader's report as it
//! crossed the container boundary ([`LoadReport`]) and what the lab measured
//! around it ([`LabFigures`]: the server's cgroup, the host, where the
//! loader ran). Every derived figure of a round — throughput, per-second
//! rates, CPU per request, loader saturation, Little's law, the memory
//! summaries — is computed here and nowhere else; reports and `compare`
//! read them from the [`Round`].

use chrono::{DateTime, Utc};

use super::histogram::{self, HistogramError, Latency};
use super::{HostUse, LoaderShare, LoaderUse, MachineSpeed, RateFigures, Round, ServerUse};
use crate::roles::load::LoadReport;
use crate::stats;

/// What the lab adds to the loader's report for one round. The report's
/// window must already be on the samples' clock (`window_clock` says which
/// clock carried it there).
#[derive(Debug, Clone, PartialEq)]
pub struct LabFigures {
    /// Which clock carried the loader's window instants to the server's
    /// samples.
    pub window_clock: String,
    /// CPUs the loader's threads can use (its allotment, at most one per
    /// thread): what its CPU time is divided by.
    pub loader_usable_cpus: f64,
    /// The loader's worker threads (each loader's, when several shared
    /// the round).
    pub loader_threads: u32,
    /// The server's cgroup over the window.
    pub server: ServerSamples,
    /// Host activity over the window, when it could be read.
    pub host: Option<HostUse>,
    /// Each loader's own figures when several shared the round.
    pub loaders: Vec<LoaderShare>,
    /// The calibration probe around the round, when it could be timed.
    pub machine: Option<MachineSpeed>,
    /// The database's cgroup and counts, in database scenarios.
    pub database: Option<super::DatabaseSamples>,
}

/// The server's cgroup as the sampler read it over one window: raw
/// readings only, the summaries are the round's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerSamples {
    /// CPU time inside the window, µs; `None`: unknown, `cpu_unknown` says why.
    pub cpu_time_us: Option<u64>,
    /// Why the CPU time is unknown, when it is.
    pub cpu_unknown: Option<String>,
    /// Why the sampler stopped early, if it did.
    pub sampler_stopped_by: Option<String>,
    /// Memory before the round's load started, bytes.
    pub memory_before_bytes: Option<u64>,
    /// Memory samples inside the window, bytes.
    pub memory_samples_bytes: Vec<u64>,
    /// Highest memory inside the window, bytes.
    pub memory_window_peak_bytes: Option<u64>,
    /// How the window's peak was measured.
    pub memory_peak_source: String,
    /// The container's lifetime high-water mark, bytes.
    pub memory_lifetime_peak_bytes: Option<u64>,
    /// OOM kills during the round; `None`: the cgroup's counter could not
    /// be read (the round then says so instead of claiming none).
    pub oom_kills: Option<u64>,
    /// Server exits or restarts during the round.
    pub restarts: u64,
}

impl Round {
    /// Round `index` from the loader's report and the lab's figures:
    /// throughput from 2xx only, latency from the histogram (every request
    /// beyond the timeout counted above it), CPU per request from the
    /// server's cgroup, loader use relative to the CPU its threads can use,
    /// Little's law from every completed response.
    pub fn measured(
        index: u32,
        load: LoadReport,
        lab: LabFigures,
    ) -> Result<Round, HistogramError> {
        let h = histogram::decode(&load.latency.histogram)?;
        let duration_s = load.measured_s;
        let timeout_us = load.settings.timeout_ms * 1000;
        let latency = Latency::of(&h, load.requests.beyond_timeout(), Some(timeout_us));
        // Answers in waves: the loader read the rate over whole waves, so
        // the window's phase among them does not move it.
        let throughput_rps = match load.bursts {
            Some(b) => b.rate_rps,
            None => per_second(load.responses.status_2xx, duration_s),
        };
        let completed_rps = per_second(load.responses.total(), duration_s);
        let loader_cpu_us = load.loader.user_cpu_us + load.loader.sys_cpu_us;
        let allot_us = lab.loader_usable_cpus * duration_s * 1e6;
        let s = lab.server;
        let database = lab.database.map(|d| {
            super::DatabaseUse::of(
                d,
                load.responses.status_2xx,
                load.responses.total(),
                duration_s,
                s.cpu_time_us,
            )
        });
        let samples: Vec<f64> = s.memory_samples_bytes.iter().map(|&b| b as f64).collect();
        let started_at = DateTime::<Utc>::from_timestamp_nanos(load.window.start_unix_ns as i64);
        Ok(Round {
            index,
            started_at,
            window: load.window,
            warmup_s: load.warmup.seconds,
            warmup_stable: load.warmup.stable,
            warmup_windows_rps: load.warmup.windows_ok.iter().map(|&n| n as f64).collect(),
            duration_s,
            responses: load.responses,
            requests: load.requests,
            errors: load.errors,
            drain_s: load.drain_s,
            throughput_rps,
            bursts: load.bursts,
            connections_in_use: completed_rps * latency.mean_us / 1e6,
            latency,
            histogram: load.latency.histogram,
            connections: load.connections,
            wire_bytes_per_response: (load.bytes.mean_response_bytes > 0.0)
                .then_some(load.bytes.mean_response_bytes),
            tls: load.tls,
            stream_limit: load
                .http2_stream_limit
                .filter(|&limit| limit < load.settings.streams as u64)
                .map(|limit| super::StreamLimit {
                    limit,
                    streams: load.settings.streams as u64,
                    connections: load.connections.requested,
                }),
            loader_warnings: load.warnings,
            rate: load.rate.map(|x| RateFigures {
                target_rps: x.target_rps,
                achieved_rps: x.achieved_rps,
                max_lag_us: x.max_schedule_lag_us,
            }),
            answers: load.answers,
            windows_rps: load.windows.iter().map(|w| w.ok as f64).collect(),
            windows_latency_mean_us: load.windows.iter().map(|w| w.latency_mean_us).collect(),
            loader: LoaderUse {
                cpus: lab.loader_usable_cpus,
                threads: lab.loader_threads,
                // Several loaders: the busiest decides, so a round is
                // client-bound when any of its loaders is.
                cpu_fraction: match lab.loaders.iter().map(|l| l.cpu_fraction).reduce(f64::max) {
                    Some(busiest) => busiest,
                    None if allot_us > 0.0 => loader_cpu_us as f64 / allot_us,
                    None => 0.0,
                },
                throttled_fraction: load.loader.throttling.map(|t| t.fraction()),
            },
            server: ServerUse {
                cpu_time_us: s.cpu_time_us,
                cpu_us_per_request: s
                    .cpu_time_us
                    .filter(|_| load.responses.status_2xx > 0)
                    .map(|cpu| cpu as f64 / load.responses.status_2xx as f64),
                cpu_unknown: s.cpu_unknown,
                sampler_stopped_by: s.sampler_stopped_by,
                memory_per_connection_bytes: match (
                    s.memory_before_bytes,
                    stats::median(&samples),
                    load.connections.established,
                ) {
                    (Some(before), Some(under), n) if n > 0 => {
                        Some((under - before as f64) / n as f64)
                    }
                    _ => None,
                },
                memory_before_bytes: s.memory_before_bytes,
                memory_median_bytes: stats::median(&samples).map(|m| m.round() as u64),
                memory_max_bytes: s.memory_samples_bytes.iter().copied().max(),
                memory_window_peak_bytes: s.memory_window_peak_bytes,
                memory_peak_source: s.memory_peak_source,
                memory_lifetime_peak_bytes: s.memory_lifetime_peak_bytes,
                memory_samples_bytes: s.memory_samples_bytes,
                oom_kills: s.oom_kills,
                restarts: s.restarts,
            },
            database,
            host: lab.host,
            window_clock: lab.window_clock,
            loaders: lab.loaders,
            machine: lab.machine,
            slowed: None,
        })
    }
}

/// `n` per second of `seconds`; 0 for an empty window.
pub(crate) fn per_second(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use crate::bench::fake::measurement;

    #[test]
    fn a_stream_limit_below_the_streams_asked_and_the_loaders_warnings_are_kept() {
        let mut m = measurement(8, 1_000.0);
        m.load.settings.streams = 32;
        m.load.http2_stream_limit = Some(4);
        m.load.warnings = vec!["the server allows 4 concurrent streams".into()];
        let r = m.into_round(0).unwrap();
        let s = r.stream_limit.expect("below the streams asked");
        assert_eq!((s.limit, s.streams, s.connections), (4, 32, 8));
        assert_eq!((s.effective(), s.asked()), (32, 256));
        assert_eq!(
            r.loader_warnings,
            ["the server allows 4 concurrent streams"]
        );
        // A limit at or above the streams asked capped nothing.
        let mut m = measurement(8, 1_000.0);
        m.load.settings.streams = 4;
        m.load.http2_stream_limit = Some(4);
        assert_eq!(m.into_round(0).unwrap().stream_limit, None);
    }

    #[test]
    fn round_counts_only_2xx_and_divides_cpu_by_them() {
        let mut m = measurement(100, 10_000.0);
        m.load.responses.status_5xx = 500;
        m.lab.server.cpu_time_us = Some(1_500_000);
        m.load.loader.user_cpu_us = 8_000_000;
        m.load.loader.sys_cpu_us = 1_000_000;
        let r = m.into_round(2).unwrap();
        assert_eq!(r.index, 2);
        assert_eq!(r.throughput_rps, 10_000.0);
        // 100,000 2xx in the window; the 500 5xx cost CPU too but are not requests served.
        assert_eq!(r.server.cpu_us_per_request, Some(15.0));
        assert!(
            (r.loader.cpu_fraction - 0.9).abs() < 1e-9,
            "{}",
            r.loader.cpu_fraction
        );
        assert_eq!(r.latency.count, 100_000);
        // Little's law counts every completed response: (100,000 + 500) / 10 s
        // at the fake's mean latency of 100 connections / 10,000 req/s.
        assert!(
            (r.connections_in_use - 100.5).abs() < 0.5,
            "{}",
            r.connections_in_use
        );
    }

    #[test]
    fn unknown_server_figures_stay_unknown() {
        let mut m = measurement(100, 10_000.0);
        m.lab.server.cpu_time_us = None;
        m.lab.server.cpu_unknown = Some("no CPU sample after the window's end".into());
        m.lab.server.oom_kills = None;
        m.load.bytes.mean_response_bytes = 0.0;
        let r = m.into_round(0).unwrap();
        assert_eq!(r.server.cpu_us_per_request, None);
        assert_eq!(r.server.oom_kills, None);
        assert_eq!(r.wire_bytes_per_response, None);
        assert!(r.server.cpu_unknown.unwrap().contains("no CPU sample"));
    }

    #[test]
    fn memory_median_and_max_come_from_the_samples() {
        let mut m = measurement(100, 10_000.0);
        m.lab.server.memory_samples_bytes = vec![10, 30, 20, 40];
        let r = m.into_round(0).unwrap();
        assert_eq!(r.server.memory_median_bytes, Some(25));
        assert_eq!(r.server.memory_max_bytes, Some(40));
    }
}
