//! The seam between the run pipeline and the outside world: the [`Lab`]
//! trait (start a framework, verify it, measure one round, stop it) and the
//! raw [`Measurement`] a round produces.
//!
//! The real implementation drives Docker, the loader container and the
//! cgroup probe; the fake one (tests) returns scripted numbers so every gate
//! and failure path of the pipeline can be provoked without a daemon. This
//! module owns the conversion from raw figures to a [`Round`]; it judges
//! nothing.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::contract::Scenario;
use crate::docker::container::{LoaderSpec, ServerSpec};
use crate::results::histogram::{self, HistogramError, Latency};
use crate::results::{
    AnswerChecks, AppliedLimits, Connections, ErrorCounts, HostUse, LoaderShare, LoaderUse,
    PhaseTimes, RateFigures, RequestAccounting, Round, ServerUse, StatusCounts, VerifyOutcome,
    WindowTimes,
};
use crate::stats;

/// What starting a framework's server yielded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Started {
    /// Where the loader reaches it: `http://IP:PORT`.
    pub url: String,
    /// Container start to first 200 on the readiness path, ms.
    pub cold_start_ms: Option<f64>,
    /// The very first probe got the 200, so the server may have been ready
    /// sooner: `cold_start_ms` is an upper bound.
    pub cold_start_is_upper_bound: bool,
    /// Limits the daemon really applied.
    pub limits: Option<AppliedLimits>,
    /// Creating and starting the container, seconds.
    pub start_s: f64,
    /// From the container's start to the readiness 200, seconds.
    pub readiness_s: f64,
}

/// Raw figures of one measured round, before aggregation.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// When the measured window started.
    pub started_at: DateTime<Utc>,
    /// The window's instants, as the loader timed them.
    pub window: WindowTimes,
    /// Warm-up before the window, seconds.
    pub warmup_s: f64,
    /// Until-stable: whether the warm-up became stable.
    pub warmup_stable: Option<bool>,
    /// 2xx responses in each second of the warm-up.
    pub warmup_windows_ok: Vec<u64>,
    /// Measured window, seconds (as the loader really timed it).
    pub duration_s: f64,
    /// Responses completed inside the window, by status class.
    pub responses: StatusCounts,
    /// Requests sent inside the window, answered or lost.
    pub requests: RequestAccounting,
    /// Errors of the window.
    pub errors: ErrorCounts,
    /// The drain after the window, seconds.
    pub drain_s: f64,
    /// Latency histogram of the window's requests (ns), base64 HdrHistogram
    /// V2 + deflate.
    pub histogram: String,
    /// Connections requested, established, serving.
    pub connections: Connections,
    /// The loader's per-request timeout, µs: requests beyond it are counted
    /// as "> timeout" in the percentiles.
    pub timeout_us: u64,
    /// Mean bytes read per answer.
    pub wire_bytes_per_response: Option<f64>,
    /// Fixed-rate figures.
    pub rate: Option<RateFigures>,
    /// Answers checked against the contract under load.
    pub answers: AnswerChecks,
    /// 2xx responses in each 1 s window.
    pub windows_ok: Vec<u64>,
    /// Mean latency (µs) of the window requests answered in each 1 s
    /// window; `None` where none was.
    pub windows_latency_mean_us: Vec<Option<f64>>,
    /// CPUs allotted to the loader.
    pub loader_cpus: f64,
    /// The loader's worker threads.
    pub loader_threads: u32,
    /// Loader CPU time (user + system) during the window, µs.
    pub loader_cpu_us: u64,
    /// Share of the loader's CPU-quota periods throttled in the window.
    pub loader_throttled_fraction: Option<f64>,
    /// Server cgroup CPU time inside the window, µs; `None`: unknown.
    pub server_cpu_us: Option<u64>,
    /// Why the server's CPU time is unknown, when it is.
    pub server_cpu_unknown: Option<String>,
    /// Why the server's sampler stopped early, if it did.
    pub sampler_stopped_by: Option<String>,
    /// Server memory before the round's load started, bytes.
    pub memory_before_bytes: Option<u64>,
    /// Server memory sampled inside the window, bytes.
    pub memory_samples_bytes: Vec<u64>,
    /// Highest memory inside the window, bytes.
    pub memory_window_peak_bytes: Option<u64>,
    /// How the window's peak was measured.
    pub memory_peak_source: String,
    /// Which clock carried the loader's window instants to the server's
    /// samples (CPU, memory and host figures are bracketed by it).
    pub window_clock: String,
    /// The container's lifetime high-water mark, bytes.
    pub memory_lifetime_peak_bytes: Option<u64>,
    /// OOM kills during the round.
    pub oom_kills: u64,
    /// Server exits or restarts during the round.
    pub restarts: u64,
    /// Host activity during the window.
    pub host: Option<HostUse>,
    /// Where the round's wall time went: the loader's phases (the others
    /// stay zero; the executor times those).
    pub phases: PhaseTimes,
    /// Each loader's own figures when several shared the round.
    pub loaders: Vec<LoaderShare>,
}

impl Measurement {
    /// 2xx responses per second of the window.
    pub fn throughput_rps(&self) -> f64 {
        per_second(self.responses.status_2xx, self.duration_s)
    }

    /// The round these figures make: throughput from 2xx only, latency from
    /// the histogram, CPU per request from the server's cgroup, loader use
    /// relative to the CPU its threads can use, Little's law.
    pub fn into_round(self, index: u32) -> Result<Round, HistogramError> {
        let h = histogram::decode(&self.histogram)?;
        let throughput_rps = self.throughput_rps();
        let latency = Latency::of(&h, self.requests.beyond_timeout(), Some(self.timeout_us));
        // A thread runs on one core at a time: a loader of 1 thread on a
        // 2-CPU allotment is saturated at 1 CPU, not 2.
        let usable = if self.loader_threads > 0 {
            self.loader_cpus.min(f64::from(self.loader_threads))
        } else {
            self.loader_cpus
        };
        let allot_us = usable * self.duration_s * 1e6;
        let samples: Vec<f64> = self
            .memory_samples_bytes
            .iter()
            .map(|&b| b as f64)
            .collect();
        let completed_rps = per_second(self.responses.total(), self.duration_s);
        Ok(Round {
            index,
            started_at: self.started_at,
            window: self.window,
            warmup_s: self.warmup_s,
            warmup_stable: self.warmup_stable,
            warmup_windows_rps: self.warmup_windows_ok.iter().map(|&n| n as f64).collect(),
            duration_s: self.duration_s,
            responses: self.responses,
            requests: self.requests,
            errors: self.errors,
            drain_s: self.drain_s,
            throughput_rps,
            connections_in_use: completed_rps * latency.mean_us / 1e6,
            latency,
            histogram: self.histogram,
            connections: self.connections,
            wire_bytes_per_response: self.wire_bytes_per_response,
            rate: self.rate,
            answers: self.answers,
            windows_rps: self.windows_ok.iter().map(|&n| n as f64).collect(),
            windows_latency_mean_us: self.windows_latency_mean_us,
            loader: LoaderUse {
                cpus: self.loader_cpus,
                threads: self.loader_threads,
                // Several loaders: the busiest decides, so a round is
                // client-bound when any of its loaders is.
                cpu_fraction: match self.loaders.iter().map(|l| l.cpu_fraction).reduce(f64::max) {
                    Some(busiest) => busiest,
                    None if allot_us > 0.0 => self.loader_cpu_us as f64 / allot_us,
                    None => 0.0,
                },
                throttled_fraction: self.loader_throttled_fraction,
            },
            server: ServerUse {
                cpu_time_us: self.server_cpu_us,
                cpu_us_per_request: self
                    .server_cpu_us
                    .filter(|_| self.responses.status_2xx > 0)
                    .map(|cpu| cpu as f64 / self.responses.status_2xx as f64),
                cpu_unknown: self.server_cpu_unknown,
                sampler_stopped_by: self.sampler_stopped_by,
                memory_before_bytes: self.memory_before_bytes,
                memory_median_bytes: stats::median(&samples).map(|m| m.round() as u64),
                memory_max_bytes: self.memory_samples_bytes.iter().copied().max(),
                memory_window_peak_bytes: self.memory_window_peak_bytes,
                memory_peak_source: self.memory_peak_source,
                memory_lifetime_peak_bytes: self.memory_lifetime_peak_bytes,
                memory_samples_bytes: self.memory_samples_bytes,
                oom_kills: self.oom_kills,
                restarts: self.restarts,
            },
            host: self.host,
            window_clock: self.window_clock,
            loaders: self.loaders,
        })
    }
}

fn per_second(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

/// Where frameworks run and get measured: the lab runs the specs it is
/// given ([`crate::bench::spec`]) and knows nothing of the profile.
///
/// Calls come in this order per framework: `start`, `idle_memory`, `verify`,
/// then `measure` for each loader run (with `alive` after each, and `stop` +
/// `start` again when the server must restart), and `stop` last. Every
/// method is bounded in time by the implementation.
#[allow(async_fn_in_trait)] // used in one task; no Send bound needed
pub trait Lab {
    /// A running server.
    type Server;

    /// Start the server of `spec` and wait until it answers its readiness
    /// path.
    async fn start(&mut self, spec: &ServerSpec) -> anyhow::Result<(Self::Server, Started)>;

    /// Loaders like `loader` (limits, sysctls; aimed nowhere yet) will be
    /// asked for soon: a lab may get ready for them while nothing is
    /// measured (the real lab starts its loader container during the next
    /// idle settle). Nothing by default.
    fn expect_loader(&mut self, _loader: &LoaderSpec) {}

    /// Memory the idle server uses after waiting `settle`, bytes.
    async fn idle_memory(
        &mut self,
        server: &Self::Server,
        settle: Duration,
    ) -> anyhow::Result<Option<u64>>;

    /// Check the server against the contract for `scenarios`.
    async fn verify(
        &mut self,
        server: &Self::Server,
        scenarios: &[Scenario],
    ) -> anyhow::Result<VerifyOutcome>;

    /// Run the loader of `loader` against the server while sampling it.
    async fn measure(
        &mut self,
        server: &Self::Server,
        loader: &LoaderSpec,
    ) -> anyhow::Result<Measurement>;

    /// Whether the server is still running.
    async fn alive(&mut self, server: &Self::Server) -> anyhow::Result<bool>;

    /// Stop and remove the server.
    async fn stop(&mut self, server: Self::Server) -> anyhow::Result<()>;
}

#[cfg(test)]
mod tests {
    use crate::bench::fake::measurement;

    #[test]
    fn round_counts_only_2xx_and_divides_cpu_by_them() {
        let mut m = measurement(100, 10_000.0);
        m.responses.status_5xx = 500;
        m.server_cpu_us = Some(1_500_000);
        m.loader_cpu_us = 9_000_000;
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
    }

    #[test]
    fn memory_median_and_max_come_from_the_samples() {
        let mut m = measurement(100, 10_000.0);
        m.memory_samples_bytes = vec![10, 30, 20, 40];
        let r = m.into_round(0).unwrap();
        assert_eq!(r.server.memory_median_bytes, Some(25));
        assert_eq!(r.server.memory_max_bytes, Some(40));
    }
}
