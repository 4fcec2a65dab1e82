//! Cells and their rounds: the coordinates of a cell, every figure of one
//! measured round, and the summary over a cell's rounds.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::histogram;
use super::{Latency, Reason, Verdict};
pub use crate::plan::CellKey;
pub use crate::roles::load::report::{
    AnswerChecks, Connections, ErrorCounts, RequestAccounting, StatusCounts, WindowTimes,
};
use crate::stats::{self, Aggregate};

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
    /// The loader's worker threads.
    #[serde(default)]
    pub threads: u32,
    /// CPU time used / (CPUs its threads can use × window): 1.0 means fully
    /// busy. Its threads can use at most min(allotted CPUs, threads) cores,
    /// so one thread pegged on a 2-CPU allotment reads 1.0, not 0.5.
    pub cpu_fraction: f64,
    /// Share of CPU-quota scheduler periods in which the loader was
    /// throttled (from its cgroup's cpu.stat); absent when not readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_fraction: Option<f64>,
}

/// The server's resource use in a round: its cgroup, read every 250 ms and
/// at the loader's window edges (docs/results.md says how each is bracketed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerUse {
    /// Server CPU time inside the loader's window, µs: the cgroup's CPU
    /// counter interpolated at the window's two instants. `None` when it
    /// could not be read (never 0 for unknown): `cpu_unknown` says why.
    pub cpu_time_us: Option<u64>,
    /// Why the server's CPU time is unknown, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_unknown: Option<String>,
    /// Why the sampler's series ended before it was stopped, if it did
    /// (the container exited, a counter could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler_stopped_by: Option<String>,
    /// cpu_time_us / 2xx responses completed in the window: CPU cost of one
    /// request, µs. Holds even when the loader is the bottleneck. Absent
    /// when there were no 2xx.
    pub cpu_us_per_request: Option<f64>,
    /// Memory before this round's load started (the median of the samples
    /// taken before the loader's first connection), bytes.
    pub memory_before_bytes: Option<u64>,
    /// Median of the memory samples inside the window, bytes.
    pub memory_median_bytes: Option<u64>,
    /// Largest memory sample inside the window, bytes.
    pub memory_max_bytes: Option<u64>,
    /// Highest memory inside the window, bytes: the cgroup's high-water mark
    /// reset as the window opened and read as it closed when the kernel
    /// allows (`memory_peak_source`), else the largest sample.
    pub memory_window_peak_bytes: Option<u64>,
    /// How `memory_window_peak_bytes` was measured: `high-water mark` (reset
    /// at the window's start, read at its end) or `samples` (250 ms apart).
    #[serde(default)]
    pub memory_peak_source: String,
    /// The container's high-water mark since it started (start-up,
    /// verification and earlier rounds included), bytes.
    pub memory_lifetime_peak_bytes: Option<u64>,
    /// Every memory sample (250 ms apart) inside the window, bytes.
    pub memory_samples_bytes: Vec<u64>,
    /// What each open connection costs the server: (median memory under
    /// load − memory before the load) / connections established, bytes.
    /// The figure of `ws-idle`, where the load is little more than the
    /// connections held; absent without a memory before or a connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_per_connection_bytes: Option<f64>,
    /// OOM kills during the round (cgroup memory.events oom_kill delta, at
    /// least 1 when Docker reports the container OOM-killed); `null` when
    /// the cgroup's counter could not be read and Docker saw no kill.
    pub oom_kills: Option<u64>,
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
    /// busy_cores minus soft interrupts and the server's and the loader's
    /// CPU use, all over the loader's window: other work, cores.
    pub foreign_cores: f64,
    /// Cores in soft interrupts during the window (/proc/stat `softirq`):
    /// mostly the network stack carrying the benchmark's own traffic,
    /// which no container is charged for, so it is not counted foreign.
    #[serde(default)]
    pub softirq_cores: f64,
    /// Cores the hypervisor stole during the window (/proc/stat `steal`).
    #[serde(default)]
    pub steal_cores: f64,
}

impl HostUse {
    /// CPU that was not ours over the window, cores: other processes'
    /// (`foreign_cores`) and what the hypervisor gave other guests
    /// (`steal_cores`). Either takes time from the server and the loader
    /// that their own CPU figures never show, so the host-busy gate sets
    /// the sum against its limit.
    pub fn not_ours_cores(&self) -> f64 {
        self.foreign_cores + self.steal_cores
    }
}

/// One measured round of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Round {
    /// Round number, 0-based.
    pub index: u32,
    /// When the measured window started (UTC).
    #[schemars(with = "String")]
    pub started_at: DateTime<Utc>,
    /// The window's instants, as the loader timed them.
    #[serde(default)]
    pub window: WindowTimes,
    /// Warm-up before the window, seconds.
    pub warmup_s: f64,
    /// Until-stable warm-up: whether it became stable (false: the window
    /// opened because its longest time ran out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_stable: Option<bool>,
    /// 2xx responses in each second of the warm-up, req/s.
    #[serde(default)]
    pub warmup_windows_rps: Vec<f64>,
    /// Length of the measured window, seconds.
    pub duration_s: f64,
    /// Responses completed inside the window, by status class.
    pub responses: StatusCounts,
    /// Every request sent inside the window: answered or lost, none missing.
    #[serde(default)]
    pub requests: RequestAccounting,
    /// Errors of the window: its lost requests and the connects that failed.
    pub errors: ErrorCounts,
    /// The drain after the window, seconds (≤ the request timeout).
    #[serde(default)]
    pub drain_s: f64,
    /// 2xx responses completed in the window / duration_s, req/s. Non-2xx
    /// never count. When the answers came in waves (`bursts`), read over
    /// whole waves instead, so the window's edges do not move it.
    pub throughput_rps: f64,
    /// The waves the answers came in (their period, answers per wave, the
    /// count over the window beside the rate over whole waves); absent
    /// when they came steadily.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bursts: Option<crate::roles::load::bursts::Bursts>,
    /// Latency of every answer to a request sent inside the window, the
    /// drain included (from send, or from the scheduled send in fixed-rate
    /// mode), µs.
    pub latency: Latency,
    /// Which clock carried the loader's window instants to the server's
    /// samples: the same kernel's monotonic clock, or the wall clock for a
    /// loader on another host (CPU, memory and host figures are bracketed
    /// by it).
    #[serde(default)]
    pub window_clock: String,
    /// The window's latency histogram (values in ns), base64 HdrHistogram V2 + deflate.
    pub histogram: String,
    /// Connections requested, established, serving and re-established.
    pub connections: Connections,
    /// Little's law: responses (any status) completed per second × mean
    /// latency, the connections the figures say were in use. In a closed
    /// loop it equals `connections.serving` × pipeline when the figures
    /// are right.
    #[serde(default)]
    pub connections_in_use: f64,
    /// Bytes read from the socket per answer (headers + body), bytes.
    pub wire_bytes_per_response: Option<f64>,
    /// TLS as the loader saw it (https and h2 cells): handshakes, their
    /// time (one sample per connection made) and what the server agreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::roles::load::report::TlsReport>,
    /// HTTP/2: the server allowed fewer concurrent streams per connection
    /// (SETTINGS_MAX_CONCURRENT_STREAMS) than the cell asked for
    /// (`load.streams`); absent when it allowed them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_limit: Option<StreamLimit>,
    /// What the loader warned about in this round, in its words (limits
    /// that capped connections, a stream limit, a missed rate, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loader_warnings: Vec<String>,
    /// Fixed-rate figures, in fixed-rate mode.
    pub rate: Option<RateFigures>,
    /// Answers checked against the contract under load.
    #[serde(default)]
    pub answers: AnswerChecks,
    /// 2xx responses in each 1 s window of the measurement, req/s.
    pub windows_rps: Vec<f64>,
    /// Mean latency (µs; corrected at a fixed rate) of the window requests
    /// answered in each 1 s window, `null` where none was: at a fixed rate
    /// past capacity it rises second by second with the backlog.
    #[serde(default)]
    pub windows_latency_mean_us: Vec<Option<f64>>,
    /// The loader's CPU use.
    pub loader: LoaderUse,
    /// The server's resource use.
    pub server: ServerUse,
    /// The database's use, in database scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<super::DatabaseUse>,
    /// Host activity, when it could be read.
    pub host: Option<HostUse>,
    /// Each loader's own figures when several loaders (on other hosts)
    /// shared the round; the round's figures are theirs merged exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaders: Vec<LoaderShare>,
    /// How fast the machine ran on the server's core during the round's
    /// window (the calibration probe, `host::speed`), when it could be
    /// timed: absent when the daemon is on another host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineSpeed>,
    /// Set when the probe found the machine slowed in this round, against
    /// the framework's rounds measured before it: the round stays here with
    /// its evidence but is left out of the cell's figures (and measured
    /// again). Decided when the round was stored, against the framework's
    /// rounds until then, and (a fixed number of rounds) once more when its
    /// server's steps are done, against all of them; never taken back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowed: Option<Slowed>,
}

/// An HTTP/2 round whose server allowed fewer streams per connection than
/// the cell asked: what was really in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StreamLimit {
    /// The lowest SETTINGS_MAX_CONCURRENT_STREAMS the server announced.
    pub limit: u64,
    /// Streams per connection the cell asked for (`load.streams`).
    pub streams: u64,
    /// Connections the cell asked for.
    pub connections: u64,
}

impl StreamLimit {
    /// Requests the server had in flight at most: connections ×
    /// min(streams, limit).
    pub fn effective(&self) -> u64 {
        self.connections * self.streams.min(self.limit)
    }

    /// Requests the cell asked to keep in flight: connections × streams.
    pub fn asked(&self) -> u64 {
        self.connections * self.streams
    }
}

/// A round measured on a slowed machine: its probe against the reference
/// it was judged by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Slowed {
    /// The round's probe exchange (`machine.exchange_ns`), ns.
    pub exchange_ns: f64,
    /// The framework's fast reference the round was judged by: the 10th
    /// percentile of the probe over its rounds so far, this one included, ns.
    pub reference_ns: f64,
    /// The threshold (`thresholds.slowed_machine`): the share above the
    /// reference past which a round counts as slowed.
    pub limit: f64,
}

impl Slowed {
    /// The round's probe over the reference, − 1 (0.25 = 25% slower).
    pub fn slowdown(&self) -> f64 {
        self.exchange_ns / self.reference_ns - 1.0
    }

    /// Whether a round probed at `exchange_ns` is slowed against
    /// `reference_ns` (`None` when it is not).
    pub fn judge(exchange_ns: f64, reference_ns: f64, limit: f64) -> Option<Slowed> {
        (reference_ns > 0.0 && exchange_ns > reference_ns * (1.0 + limit)).then_some(Slowed {
            exchange_ns,
            reference_ns,
            limit,
        })
    }
}

/// The calibration probe over one round's window: a fixed loopback
/// exchange timed in the probing thread's own CPU time on the server's
/// core, every 250 ms. A
/// machine whose kernel path runs slower makes every framework's requests
/// cost more; these figures tell that apart from a slower framework.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MachineSpeed {
    /// The core the probe ran on.
    pub core: u32,
    /// Probe samples inside the window.
    pub samples: u32,
    /// One 64-byte TCP loopback exchange (write, read, write back, read,
    /// by one thread), ns of its CPU time: median of the samples.
    pub exchange_ns: f64,
    /// The fastest sample's exchange, ns.
    pub exchange_ns_min: f64,
    /// The slowest sample's exchange, ns.
    pub exchange_ns_max: f64,
}

impl MachineSpeed {
    /// The figures of `samples` (those inside the window) probed on
    /// `core`; `None` without any.
    pub fn of(core: usize, samples: &[crate::host::speed::Sample]) -> Option<MachineSpeed> {
        let ex: Vec<f64> = samples.iter().map(|s| s.exchange_ns).collect();
        Some(MachineSpeed {
            core: core as u32,
            samples: samples.len() as u32,
            exchange_ns: crate::stats::median(&ex)?,
            exchange_ns_min: ex.iter().copied().fold(f64::INFINITY, f64::min),
            exchange_ns_max: ex.iter().copied().fold(0.0, f64::max),
        })
    }
}

/// One loader's part of a round that several loaders shared (profile
/// `hosts:`): its own counts and histogram figures, before merging.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoaderShare {
    /// The Docker endpoint it ran on.
    pub endpoint: String,
    /// Connections it was asked to hold.
    pub connections_requested: u64,
    /// Connections it established before its window.
    pub connections_established: u64,
    /// 2xx responses inside its window.
    pub responses_2xx: u64,
    /// Requests in its latency histogram.
    pub latency_count: u64,
    /// 2xx per second of its window.
    pub throughput_rps: f64,
    /// Its median latency, µs.
    pub p50_us: u64,
    /// Its 99th percentile latency, µs.
    pub p99_us: u64,
    /// Its CPU time / (CPUs its threads can use × window): 1.0 is fully busy.
    pub cpu_fraction: f64,
    /// Its window's length, s (its own monotonic clock).
    pub window_s: f64,
    /// How much later than the earliest loader its window opened (wall
    /// clocks of the hosts), ms: the start barrier's skew.
    pub window_start_skew_ms: f64,
}

impl Cell {
    /// Whether nothing is left to run: every planned round is in; or the
    /// rounds go on until precise and the cell has its least rounds and is
    /// precise enough, or is rejected (more rounds do not mend that); or
    /// it was excluded before measuring (failed verification).
    pub fn is_complete(&self) -> bool {
        let n = self.rounds.len() as u32;
        let stopped_early = self.rounds_min.is_some_and(|min| n >= min)
            && (self.verdict.status == super::Status::Rejected
                || self.precision.as_ref().is_some_and(Precision::met));
        n >= self.rounds_planned
            || stopped_early
            || (self.rounds.is_empty()
                && self
                    .verdict
                    .reasons
                    .iter()
                    .any(|r| matches!(r, Reason::FailedVerify { .. })))
    }

    /// The rounds asked for: `3`, or `3–12` when they go on until precise.
    pub fn rounds_asked(&self) -> String {
        match self.rounds_min {
            Some(min) => format!("{min}–{}", self.rounds_planned),
            None => self.rounds_planned.to_string(),
        }
    }

    /// Whether round `index` was measured.
    pub fn has_round(&self, index: u32) -> bool {
        self.rounds.iter().any(|r| r.index == index)
    }
}

impl Round {
    /// Failures: the window's errors (lost requests and failed connects)
    /// plus the non-2xx answers to its requests.
    pub fn errors_total(&self) -> u64 {
        self.errors.total() + self.requests.answered.non_2xx()
    }

    /// What could fail: the requests sent in the window, plus the errors
    /// that lost no request (failed connects, resets of idle connections).
    pub fn attempts(&self) -> u64 {
        self.requests.sent
            + self
                .errors
                .total()
                .saturating_sub(self.requests.lost.total())
    }
}

/// One cell: its rounds, their summary and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    /// Coordinates.
    pub key: CellKey,
    /// Rounds the profile asked for: the most a cell takes.
    pub rounds_planned: u32,
    /// When rounds go on only until the cell is precise
    /// (`rounds: {min, max, precision}`): the rounds every cell takes,
    /// `rounds_planned` being the most. Absent for a fixed number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds_min: Option<u32>,
    /// Every round measured so far, raw, in round order.
    pub rounds: Vec<Round>,
    /// Aggregates over the rounds; absent when no round completed.
    pub summary: Option<CellSummary>,
    /// The gates' verdict.
    pub verdict: Verdict,
    /// Where the cell places among the frameworks of its scenario ×
    /// connections (× rate) in this run, at the run's own noise
    /// (`compare::rank`); absent when rejected, short of rounds, or from a
    /// run written before rank groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<RankGroup>,
    /// How precisely the rounds place the cell's headline figure: its 95%
    /// interval (`compare::precision`); absent below 3 clean rounds, for a
    /// rejected cell, or from a run written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
}

/// Where the rounds place a cell's headline figure (req/s in a closed
/// loop, p99 at a fixed rate), and whether that is as precise as the
/// profile asked (`rounds: {precision}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Precision {
    /// The figure: `req/s` or `p99`.
    pub by: String,
    /// Its unit: `req/s` or `µs`.
    pub unit: String,
    /// Confidence of the interval (0.95).
    pub confidence: f64,
    /// Rounds it rests on: the clean ones (rounds on a busy host or a
    /// slowed machine left out).
    pub rounds: u32,
    /// Lower end of the interval, in `unit`.
    pub low: f64,
    /// Upper end, in `unit`.
    pub high: f64,
    /// Half the interval's width relative to its centre (0.02 = ±2%):
    /// Student's t on the logs of the round values, floored by the
    /// per-second windows' spread (docs/results.md).
    pub reached: f64,
    /// The precision the profile asked for; absent for a fixed number of
    /// rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<f64>,
}

/// How precise a run is as a whole, in two figures every output shows: the
/// median width of its cells' intervals and of their rank groups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunPrecision {
    /// Cells measured (rejected ones included).
    pub cells: u32,
    /// Cells with an interval on their headline figure (not rejected, at
    /// least 3 clean rounds): what the median interval is taken over.
    pub with_interval: u32,
    /// Median over those cells of the interval's half-width relative to its
    /// centre (0.03: ±3%); absent when no cell has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_interval: Option<f64>,
    /// Cells with a rank group.
    pub ranked: u32,
    /// Median over those cells of the places their group spans
    /// (`high − low + 1`: 1 is a place of its own); absent when none is
    /// ranked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_rank_width: Option<f64>,
    /// Every ranked cell was ranked on pairs of rounds of the same block.
    pub paired: bool,
}

impl RunPrecision {
    /// `median 95% interval ±4.2% (70 of 75 cells); rank groups 3 places
    /// wide at the median (60 cells ranked)`.
    pub fn sentence(&self) -> String {
        let interval = match self.median_interval {
            Some(m) => format!(
                "median 95% interval ±{:.1}% ({} of {} cells)",
                m * 100.0,
                self.with_interval,
                self.cells
            ),
            None => format!("no interval (no cell of {} has 3 clean rounds)", self.cells),
        };
        let ranks = match self.median_rank_width {
            Some(w) => format!(
                "rank groups {} place{} wide at the median ({} cells ranked{})",
                trim(w),
                if w == 1.0 { "" } else { "s" },
                self.ranked,
                if self.paired {
                    ", by pairs of rounds in the same block"
                } else {
                    ""
                }
            ),
            None => "no rank groups".into(),
        };
        format!("{interval}; {ranks}")
    }
}

/// `3`, or `2.5` for a median between two widths.
fn trim(w: f64) -> String {
    if w.fract() == 0.0 {
        format!("{w:.0}")
    } else {
        format!("{w:.1}")
    }
}

impl Precision {
    /// Whether the interval is as narrow as asked (false when nothing was asked).
    pub fn met(&self) -> bool {
        self.asked.is_some_and(|a| self.reached <= a)
    }

    /// `±1.3%`.
    pub fn label(&self) -> String {
        format!("±{:.1}%", self.reached * 100.0)
    }
}

/// A rank group: the places a cell could take among the `of` frameworks
/// ranked beside it, given how far apart each one's rounds are. Frameworks
/// the rounds cannot tell apart share places ("2–3").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RankGroup {
    /// Best place it could take: 1 + the frameworks clearly better.
    pub low: u32,
    /// Worst place: `of` − the frameworks clearly worse.
    pub high: u32,
    /// Frameworks ranked in the column.
    pub of: u32,
    /// The figure ranked by: `req/s` (closed loop) or `p99` (fixed rate).
    pub by: String,
    /// Confidence of each pair's interval (Bonferroni: 1 − 0.05 / pairs).
    pub pair_confidence: f64,
    /// Every pair of this cell was judged on the ratios of rounds measured
    /// in the same block (the run interleaved its rounds), not on the two
    /// sides' spreads (Welch).
    #[serde(default)]
    pub paired: bool,
}

impl RankGroup {
    /// `#1`, or `#2–3` when it shares places.
    pub fn label(&self) -> String {
        if self.low == self.high {
            format!("#{}", self.low)
        } else {
            format!("#{}–{}", self.low, self.high)
        }
    }
}

/// Aggregates of a cell over its rounds: the speed figures (throughput,
/// latency, CPU per request, memory under load, wire bytes) over the rounds
/// not left out (busy host, slowed machine: the verdict names them), the
/// counts of what went wrong over every round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CellSummary {
    /// Throughput per round, req/s; `median` is the headline figure.
    pub throughput_rps: Aggregate,
    /// p99 latency per round, µs.
    #[serde(default)]
    pub latency_p99_us: Option<Aggregate>,
    /// Latency over all rounds together (merged histogram), µs.
    pub latency: Latency,
    /// Merged histogram of all rounds (values in ns), base64 HdrHistogram V2 + deflate.
    pub histogram: String,
    /// Server CPU time per 2xx response per round, µs.
    pub cpu_us_per_request: Option<Aggregate>,
    /// Median memory under load per round, bytes.
    pub memory_median_bytes: Option<Aggregate>,
    /// Highest memory inside any round's window, bytes.
    pub memory_window_peak_bytes: Option<u64>,
    /// The container's high-water mark over its life, bytes.
    pub memory_lifetime_peak_bytes: Option<u64>,
    /// Memory per connection established per round, bytes
    /// (`ServerUse::memory_per_connection_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_per_connection_bytes: Option<Aggregate>,
    /// Responses by class, summed over rounds.
    pub responses: StatusCounts,
    /// Socket errors by kind, summed over rounds.
    pub errors: ErrorCounts,
    /// (Socket errors + non-2xx) / attempts over all rounds.
    pub error_rate: f64,
    /// Fewest connections established in any round.
    pub connections_established_min: u64,
    /// Fewest connections served (a response inside the window) in any round.
    pub connections_serving_min: u64,
    /// Median over rounds of wire bytes per response.
    pub wire_bytes_per_response: Option<f64>,
    /// Highest loader CPU use over the rounds, fraction of its allotment.
    pub loader_cpu_fraction_max: f64,
}

/// The least of `f` over `rounds`, which must not be empty.
fn least(rounds: &[Round], f: impl Fn(&Round) -> u64) -> u64 {
    rounds.iter().map(f).min().expect("at least one round")
}

impl CellSummary {
    /// Summarise `all` rounds, with the speed figures (req/s, latency, CPU
    /// per request, memory under load, wire bytes) from `kept`, the rounds
    /// not left out; what went wrong (responses, errors, connections, the
    /// loader's peak) counts over every round. With no round kept, every
    /// figure is over `all` (the verdict says why none was clean).
    pub fn of_kept(
        all: &[Round],
        kept: &[Round],
    ) -> Result<Option<CellSummary>, histogram::HistogramError> {
        let Some(mut summary) = CellSummary::of(all)? else {
            return Ok(None);
        };
        if kept.is_empty() || kept.len() == all.len() {
            return Ok(Some(summary));
        }
        let speed = CellSummary::of(kept)?.expect("kept is not empty");
        summary.throughput_rps = speed.throughput_rps;
        summary.latency_p99_us = speed.latency_p99_us;
        summary.latency = speed.latency;
        summary.histogram = speed.histogram;
        summary.cpu_us_per_request = speed.cpu_us_per_request;
        summary.memory_median_bytes = speed.memory_median_bytes;
        summary.memory_per_connection_bytes = speed.memory_per_connection_bytes;
        summary.wire_bytes_per_response = speed.wire_bytes_per_response;
        Ok(Some(summary))
    }

    /// Summarise `rounds`; `None` when there are none.
    pub fn of(rounds: &[Round]) -> Result<Option<CellSummary>, histogram::HistogramError> {
        if rounds.is_empty() {
            return Ok(None);
        }
        let tput: Vec<f64> = rounds.iter().map(|r| r.throughput_rps).collect();
        // Per-round p99s aggregate only when every round has one (a round
        // whose p99 is above the timeout has no number to average).
        let p99: Option<Vec<f64>> = rounds
            .iter()
            .map(|r| r.latency.p99_us.map(|v| v as f64))
            .collect();
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
        let per_conn: Vec<f64> = rounds
            .iter()
            .filter_map(|r| r.server.memory_per_connection_bytes)
            .collect();
        let merged = histogram::merge(rounds.iter().map(|r| r.histogram.as_str()))?;
        let mut responses = StatusCounts::default();
        let mut errors = ErrorCounts::default();
        for r in rounds {
            responses.merge(&r.responses);
            errors.merge(&r.errors);
        }
        let attempts: u64 = rounds.iter().map(Round::attempts).sum();
        let failed: u64 = rounds.iter().map(Round::errors_total).sum();
        Ok(Some(CellSummary {
            // Rounds always carry finite numbers; an empty aggregate would be a bug.
            throughput_rps: stats::aggregate(&tput).unwrap_or_else(|| zero_aggregate(tput.len())),
            latency_p99_us: p99.as_deref().and_then(stats::aggregate),
            latency: Latency::of(
                &merged,
                rounds.iter().map(|r| r.latency.beyond_timeout).sum(),
                rounds.iter().find_map(|r| r.latency.timeout_us),
            ),
            histogram: histogram::encode(&merged)?,
            cpu_us_per_request: stats::aggregate(&cpu),
            memory_median_bytes: stats::aggregate(&mem),
            memory_window_peak_bytes: rounds
                .iter()
                .flat_map(|r| [r.server.memory_window_peak_bytes, r.server.memory_max_bytes])
                .flatten()
                .max(),
            memory_lifetime_peak_bytes: rounds
                .iter()
                .filter_map(|r| r.server.memory_lifetime_peak_bytes)
                .max(),
            memory_per_connection_bytes: stats::aggregate(&per_conn),
            responses,
            errors,
            error_rate: if attempts == 0 {
                0.0
            } else {
                failed as f64 / attempts as f64
            },
            // `rounds` is not empty (checked above): every minimum exists.
            connections_established_min: least(rounds, |r| r.connections.established),
            connections_serving_min: least(rounds, |r| r.connections.serving),
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
