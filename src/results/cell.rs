//! Cells and their rounds: the coordinates of a cell, every figure of one
//! measured round, and the summary over a cell's rounds.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::histogram;
use super::{ErrorCounts, Latency, Reason, Verdict};
use crate::contract::Scenario;
use crate::stats::{self, Aggregate};

/// The coordinates of a cell: framework × scenario × concurrency (× rate).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct CellKey {
    /// Framework name (folder under frameworks/).
    pub framework: String,
    /// Contract scenario.
    pub scenario: Scenario,
    /// Connections the loader keeps open.
    pub concurrency: u32,
    /// Target request rate in req/s (fixed-rate, open-loop mode); absent in
    /// closed-loop mode where every connection sends as fast as it can.
    pub rate: Option<u64>,
}

impl CellKey {
    /// A file-name-safe stem, e.g. `axum-plaintext-c256` or `axum-json-c64-r20000`.
    pub fn stem(&self) -> String {
        let mut s = format!("{}-{}-c{}", self.framework, self.scenario, self.concurrency);
        if let Some(r) = self.rate {
            s.push_str(&format!("-r{r}"));
        }
        s
    }

    /// The load column label: `256` or `256 @ 20000/s`.
    pub fn load_label(&self) -> String {
        match self.rate {
            Some(r) => format!("{} @ {r}/s", self.concurrency),
            None => self.concurrency.to_string(),
        }
    }
}

impl fmt::Display for CellKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} c={}",
            self.framework, self.scenario, self.concurrency
        )?;
        if let Some(r) = self.rate {
            write!(f, " rate={r}/s")?;
        }
        Ok(())
    }
}

/// Responses by status class.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct StatusCounts {
    /// 2xx responses: the only ones counted as throughput.
    pub s2xx: u64,
    /// 3xx responses.
    pub s3xx: u64,
    /// 4xx responses.
    pub s4xx: u64,
    /// 5xx responses.
    pub s5xx: u64,
    /// Responses with a status outside 200–599 (1xx, or not a number).
    #[serde(default)]
    pub other: u64,
}

impl StatusCounts {
    /// Responses of any class.
    pub fn total(&self) -> u64 {
        self.s2xx + self.s3xx + self.s4xx + self.s5xx + self.other
    }

    /// Responses that were not 2xx.
    pub fn non_2xx(&self) -> u64 {
        self.s3xx + self.s4xx + self.s5xx + self.other
    }

    fn add(&mut self, o: &StatusCounts) {
        self.s2xx += o.s2xx;
        self.s3xx += o.s3xx;
        self.s4xx += o.s4xx;
        self.s5xx += o.s5xx;
        self.other += o.other;
    }
}

/// Connections asked for and really held.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Connections {
    /// Connections the cell asked the loader to hold.
    pub requested: u32,
    /// Most connections open at the same moment during the run (the
    /// loader's `peak_open`).
    pub established: u32,
}

/// Fixed-rate (open-loop) figures of a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateFigures {
    /// Target request rate, req/s.
    pub target_rps: f64,
    /// Requests sent / measured seconds, req/s.
    pub achieved_rps: f64,
    /// Largest delay between when a request was due and when the loader sent
    /// it (waiting for a slow server excluded), µs.
    pub max_lag_us: u64,
}

impl RateFigures {
    /// achieved / target.
    pub fn ratio(&self) -> f64 {
        if self.target_rps > 0.0 {
            self.achieved_rps / self.target_rps
        } else {
            0.0
        }
    }
}

/// The load generator's own resource use in a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoaderUse {
    /// CPUs allotted to the loader container.
    pub cpus: f64,
    /// CPU time used / (allotted CPUs × window): 1.0 means fully busy.
    pub cpu_fraction: f64,
    /// Share of CPU-quota scheduler periods in which the loader was
    /// throttled (from its cgroup's cpu.stat); absent when not readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_fraction: Option<f64>,
}

/// The server's resource use in a round (cgroup readings, sampled every 250 ms).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerUse {
    /// Server CPU time during the window, µs (cgroup cpu.stat usage_usec delta,
    /// or cpuacct.usage on v1).
    pub cpu_time_us: u64,
    /// cpu_time_us / 2xx responses: CPU cost of one request, µs. Holds even
    /// when the loader is the bottleneck. Absent when there were no 2xx.
    pub cpu_us_per_request: Option<f64>,
    /// Memory as the measured window started (after the warm-up), bytes.
    pub memory_idle_bytes: Option<u64>,
    /// Median of the memory samples under load, bytes.
    pub memory_median_bytes: Option<u64>,
    /// Largest memory sample under load, bytes.
    pub memory_max_bytes: Option<u64>,
    /// The cgroup's own high-water mark (memory.peak / max_usage_in_bytes),
    /// bytes; catches spikes between samples.
    pub memory_peak_bytes: Option<u64>,
    /// Every memory sample (250 ms apart) under load, bytes.
    pub memory_samples_bytes: Vec<u64>,
    /// OOM kills during the round (cgroup memory.events oom_kill delta).
    pub oom_kills: u64,
    /// Unexpected container exits or restarts during the round.
    pub restarts: u64,
}

/// What the host was doing during a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostUse {
    /// Host CPUs online.
    pub cpus: u32,
    /// 1-minute load average before the round.
    pub load_1m_before: f64,
    /// 1-minute load average after the round.
    pub load_1m_after: f64,
    /// Average busy cores on the host during the window (/proc/stat).
    pub busy_cores: f64,
    /// busy_cores minus the server's and the loader's CPU use: other work, cores.
    pub foreign_cores: f64,
}

/// One measured round of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Round {
    /// Round number, 0-based.
    pub index: u32,
    /// When the measured window started (UTC).
    #[schemars(with = "String")]
    pub started_at: DateTime<Utc>,
    /// Warm-up before the window, seconds.
    pub warmup_s: f64,
    /// Length of the measured window, seconds.
    pub duration_s: f64,
    /// Responses by status class.
    pub responses: StatusCounts,
    /// Socket errors by kind.
    pub errors: ErrorCounts,
    /// 2xx responses / duration_s, req/s. Non-2xx never count.
    pub throughput_rps: f64,
    /// Latency of responses in the window (from send, or from the scheduled
    /// send in fixed-rate mode), µs.
    pub latency: Latency,
    /// The window's latency histogram (µs), base64 HdrHistogram V2 + deflate.
    pub histogram: String,
    /// Connections requested and established.
    pub connections: Connections,
    /// Bytes read from the socket per response (headers + body), bytes.
    pub wire_bytes_per_response: Option<f64>,
    /// Fixed-rate figures, in fixed-rate mode.
    pub rate: Option<RateFigures>,
    /// 2xx responses in each 1 s window of the measurement, req/s.
    pub windows_rps: Vec<f64>,
    /// The loader's CPU use.
    pub loader: LoaderUse,
    /// The server's resource use.
    pub server: ServerUse,
    /// Host activity, when it could be read.
    pub host: Option<HostUse>,
}

impl Cell {
    /// Whether every planned round is in, or the cell was excluded before
    /// measuring (failed verification): nothing left to run.
    pub fn is_complete(&self) -> bool {
        self.rounds.len() as u32 >= self.rounds_planned
            || (self.rounds.is_empty()
                && self
                    .verdict
                    .reasons
                    .iter()
                    .any(|r| matches!(r, Reason::FailedVerify { .. })))
    }

    /// Whether round `index` was measured.
    pub fn has_round(&self, index: u32) -> bool {
        self.rounds.iter().any(|r| r.index == index)
    }
}

impl Round {
    /// Socket errors plus non-2xx responses.
    pub fn errors_total(&self) -> u64 {
        self.errors.total() + self.responses.non_2xx()
    }

    /// Responses of any status plus socket errors.
    pub fn attempts(&self) -> u64 {
        self.responses.total() + self.errors.total()
    }
}

/// One cell: its rounds, their summary and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    /// Coordinates.
    pub key: CellKey,
    /// Rounds the profile asked for.
    pub rounds_planned: u32,
    /// Every round measured so far, raw, in round order.
    pub rounds: Vec<Round>,
    /// Aggregates over the rounds; absent when no round completed.
    pub summary: Option<CellSummary>,
    /// The gates' verdict.
    pub verdict: Verdict,
}

/// Aggregates of a cell over its rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CellSummary {
    /// Throughput per round, req/s; `median` is the headline figure.
    pub throughput_rps: Aggregate,
    /// p99 latency per round, µs.
    pub latency_p99_us: Aggregate,
    /// Latency over all rounds together (merged histogram), µs.
    pub latency: Latency,
    /// Merged histogram of all rounds (µs), base64 HdrHistogram V2 + deflate.
    pub histogram: String,
    /// Server CPU time per 2xx response per round, µs.
    pub cpu_us_per_request: Option<Aggregate>,
    /// Median memory under load per round, bytes.
    pub memory_median_bytes: Option<Aggregate>,
    /// Highest memory seen in any round (peak mark or sample), bytes.
    pub memory_peak_bytes: Option<u64>,
    /// Responses by class, summed over rounds.
    pub responses: StatusCounts,
    /// Socket errors by kind, summed over rounds.
    pub errors: ErrorCounts,
    /// (Socket errors + non-2xx) / attempts over all rounds.
    pub error_rate: f64,
    /// Fewest connections established in any round.
    pub connections_established_min: u32,
    /// Median over rounds of wire bytes per response.
    pub wire_bytes_per_response: Option<f64>,
    /// Highest loader CPU use over the rounds, fraction of its allotment.
    pub loader_cpu_fraction_max: f64,
}

impl CellSummary {
    /// Summarise `rounds`; `None` when there are none.
    pub fn of(rounds: &[Round]) -> Result<Option<CellSummary>, histogram::HistogramError> {
        if rounds.is_empty() {
            return Ok(None);
        }
        let tput: Vec<f64> = rounds.iter().map(|r| r.throughput_rps).collect();
        let p99: Vec<f64> = rounds.iter().map(|r| r.latency.p99_us as f64).collect();
        let cpu: Vec<f64> = rounds
            .iter()
            .filter_map(|r| r.server.cpu_us_per_request)
            .collect();
        let mem: Vec<f64> = rounds
            .iter()
            .filter_map(|r| r.server.memory_median_bytes.map(|b| b as f64))
            .collect();
        let wire: Vec<f64> = rounds
            .iter()
            .filter_map(|r| r.wire_bytes_per_response)
            .collect();
        let merged = histogram::merge(rounds.iter().map(|r| r.histogram.as_str()))?;
        let mut responses = StatusCounts::default();
        let mut errors = ErrorCounts::default();
        for r in rounds {
            responses.add(&r.responses);
            errors.merge(&r.errors);
        }
        let attempts = responses.total() + errors.total();
        let failed = errors.total() + responses.non_2xx();
        Ok(Some(CellSummary {
            // Rounds always carry finite numbers; an empty aggregate would be a bug.
            throughput_rps: stats::aggregate(&tput).unwrap_or_else(|| zero_aggregate(tput.len())),
            latency_p99_us: stats::aggregate(&p99).unwrap_or_else(|| zero_aggregate(p99.len())),
            latency: Latency::of(&merged),
            histogram: histogram::encode(&merged)?,
            cpu_us_per_request: stats::aggregate(&cpu),
            memory_median_bytes: stats::aggregate(&mem),
            memory_peak_bytes: rounds
                .iter()
                .flat_map(|r| [r.server.memory_peak_bytes, r.server.memory_max_bytes])
                .flatten()
                .max(),
            responses,
            errors,
            error_rate: if attempts == 0 {
                0.0
            } else {
                failed as f64 / attempts as f64
            },
            connections_established_min: rounds
                .iter()
                .map(|r| r.connections.established)
                .min()
                .unwrap_or(0),
            wire_bytes_per_response: stats::median(&wire),
            loader_cpu_fraction_max: rounds
                .iter()
                .map(|r| r.loader.cpu_fraction)
                .fold(0.0, f64::max),
        }))
    }
}

fn zero_aggregate(n: usize) -> Aggregate {
    Aggregate {
        n,
        median: 0.0,
        mean: 0.0,
        min: 0.0,
        max: 0.0,
        stdev: 0.0,
        cv: 0.0,
        deviation_from_median: vec![0.0; n],
        outliers: stats::Outliers::default(),
    }
}
