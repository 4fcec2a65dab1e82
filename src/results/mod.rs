//! The results model: everything one run measured and decided, as written to
//! `results.json` (versioned by [`SCHEMA_VERSION`]; JSON Schema in
//! docs/results.schema.json, prose in docs/results.md).
//!
//! This module owns the data types and the derived summaries (aggregates over
//! rounds, merged histograms). It does no I/O (that is `bench::store` and
//! `report`) and passes no judgement (that is `bench::gates`).
//!
//! Units are in the field names: `_us` microseconds, `_ms` milliseconds,
//! `_bytes` bytes, `_rps` responses per second, `_s` seconds; fractions are
//! plain numbers from 0 to 1.

pub mod histogram;
pub mod verdict;

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::contract::Scenario;
use crate::stats::{self, Aggregate};
pub use histogram::Latency;
pub use verdict::{Exclusion, Reason, Status, Thresholds, Verdict};

/// Version of the results.json layout. Bump on any change a reader of an
/// older file would misread; readers refuse versions they do not know.
pub const SCHEMA_VERSION: u32 = 1;

/// File name of the results inside a run directory.
pub const RESULTS_FILE: &str = "results.json";

/// One run: what was asked, where it ran, and every cell measured so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Results {
    /// Layout version of this file ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// Version of fairground that wrote the file.
    pub fairground_version: String,
    /// Identifier of the run; every Docker object of the run carries the
    /// label `fairground.run=<run_id>`.
    pub run_id: String,
    /// Name of the profile that was run.
    pub profile_name: String,
    /// The profile as resolved (defaults filled in), exactly as it was run.
    pub profile: serde_json::Value,
    /// When the run started (UTC).
    #[schemars(with = "String")]
    pub started_at: DateTime<Utc>,
    /// When the run finished (UTC); absent while running or if it was cut short.
    #[schemars(with = "Option<String>")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Whether the run was interrupted (Ctrl-C) before every planned cell ran.
    pub interrupted: bool,
    /// The environment as preflight found it, and whether it was accepted.
    pub environment: Environment,
    /// The thresholds the gates applied.
    pub thresholds: Thresholds,
    /// Every cell the plan contains, in run order (measured or not).
    pub plan: Vec<CellKey>,
    /// Facts about each framework of the run.
    pub frameworks: Vec<FrameworkFacts>,
    /// Combinations not run, with the reason.
    pub skipped: Vec<Skipped>,
    /// Every cell measured so far (a cell is stored again after each of its
    /// rounds), in the order they were first stored.
    pub cells: Vec<Cell>,
    /// Things that went wrong during the run and were recorded, in order.
    #[serde(default)]
    pub incidents: Vec<Incident>,
}

/// Something that went wrong during the run (a framework that would not
/// start, a round the loader could not measure, a server that died), kept so
/// the report can say why a number is missing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Incident {
    /// When it happened (UTC).
    #[schemars(with = "String")]
    pub at: DateTime<Utc>,
    /// Framework it concerns.
    pub framework: String,
    /// Cell it concerns, if any.
    pub cell: Option<CellKey>,
    /// Round (0-based) it concerns, if any.
    pub round: Option<u32>,
    /// What happened, with the error's own words.
    pub what: String,
}

impl Results {
    /// The cell with `key`, if it was measured.
    pub fn cell(&self, key: &CellKey) -> Option<&Cell> {
        self.cells.iter().find(|c| &c.key == key)
    }

    /// Facts about framework `name`, if recorded.
    pub fn framework(&self, name: &str) -> Option<&FrameworkFacts> {
        self.frameworks.iter().find(|f| f.name == name)
    }

    /// Facts about framework `name`, created empty when missing.
    pub fn framework_mut(&mut self, name: &str) -> &mut FrameworkFacts {
        if let Some(i) = self.frameworks.iter().position(|f| f.name == name) {
            return &mut self.frameworks[i];
        }
        self.frameworks.push(FrameworkFacts::named(name));
        self.frameworks.last_mut().expect("just pushed")
    }

    /// Planned cells not complete yet (missing or with rounds to go), in
    /// plan order.
    pub fn remaining(&self) -> Vec<CellKey> {
        self.plan
            .iter()
            .filter(|k| !self.cell(k).is_some_and(Cell::is_complete))
            .cloned()
            .collect()
    }

    /// Scenarios in plan order, without repeats.
    pub fn scenarios(&self) -> Vec<Scenario> {
        let mut out = Vec::new();
        for k in self.plan.iter().chain(self.cells.iter().map(|c| &c.key)) {
            if !out.contains(&k.scenario) {
                out.push(k.scenario);
            }
        }
        out
    }
}

/// The environment verdict and the whole preflight report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Environment {
    /// Overall preflight outcome: the worst check.
    pub status: CheckStatus,
    /// Whether preflight failed and the run went ahead with `--accept-env`;
    /// every cell of such a run is flagged.
    pub forced: bool,
    /// One line per check.
    pub checks: Vec<EnvCheck>,
    /// The preflight report as preflight wrote it (kept whole, unparsed).
    pub report: serde_json::Value,
}

impl Environment {
    /// Whether the results stand on an environment that passed (pass or warn).
    pub fn accepted(&self) -> bool {
        self.status != CheckStatus::Fail
    }
}

/// Outcome of one check.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Within the threshold.
    #[default]
    Pass,
    /// Worth knowing; does not void results.
    Warn,
    /// Voids results unless forced.
    Fail,
}

impl fmt::Display for CheckStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "fail",
        })
    }
}

/// One preflight check as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EnvCheck {
    /// Check name, e.g. `hypervisor`, `nic-driver`, `load-average`.
    pub name: String,
    /// Outcome.
    pub status: CheckStatus,
    /// What was measured, with its unit.
    pub measured: String,
    /// The threshold it was held to.
    pub threshold: String,
    /// What to do about a warning or failure.
    pub remedy: Option<String>,
}

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

/// A combination the run did not measure, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skipped {
    /// Framework name.
    pub framework: String,
    /// Scenario skipped; absent when the whole framework was skipped.
    pub scenario: Option<Scenario>,
    /// Why, in words (e.g. "not declared in framework.yaml").
    pub reason: String,
}

/// Facts about one framework, measured or read during the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FrameworkFacts {
    /// Framework name (folder under frameworks/).
    pub name: String,
    /// Implementation language.
    pub language: String,
    /// Human name, e.g. `FastAPI on Uvicorn`.
    pub display_name: String,
    /// How the server uses its CPUs (workers, threads), from the manifest.
    pub workers: String,
    /// Component versions read from the image (/fairground/versions.txt).
    pub versions: BTreeMap<String, String>,
    /// Docker image id.
    pub image_id: Option<String>,
    /// Image size, bytes (as reported by the Docker daemon).
    pub image_size_bytes: Option<u64>,
    /// Size of the server binary or app bundle, bytes.
    pub binary_size_bytes: Option<u64>,
    /// Non-blank, non-comment lines of the app's own source.
    pub app_lines_of_code: Option<u64>,
    /// Limits as the daemon reports them on the running container.
    pub limits: Option<AppliedLimits>,
    /// Container start to first 200 on the readiness path, ms; one per start.
    pub cold_start_ms: Vec<f64>,
    /// How many of `cold_start_ms` are upper bounds: the first readiness
    /// probe already got its 200, so the server may have been ready sooner.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cold_start_upper_bounds: u32,
    /// Memory in use after the settle period, before any load, bytes
    /// (cgroup memory.current, or memory.usage_in_bytes on cgroup v1).
    pub idle_memory_bytes: Option<u64>,
    /// Contract verification outcome; absent if verification did not run.
    pub verify: Option<VerifyOutcome>,
    /// Why the framework produced no cells at all (build or start failure).
    pub failure: Option<String>,
}

impl FrameworkFacts {
    /// Empty facts for framework `name`.
    pub fn named(name: &str) -> FrameworkFacts {
        FrameworkFacts {
            name: name.to_string(),
            ..FrameworkFacts::default()
        }
    }
}

/// Container limits read back from the daemon after start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppliedLimits {
    /// CPU quota in CPUs (NanoCPUs / 1e9, or quota / period).
    pub cpus: f64,
    /// CPUs the container is pinned to (cpuset), if pinned.
    pub cpuset: Option<String>,
    /// Memory limit, bytes.
    pub memory_bytes: u64,
    /// Memory + swap limit, bytes (equal to memory_bytes: no swap).
    pub memory_swap_bytes: Option<i64>,
    /// Open-files soft limit (RLIMIT_NOFILE).
    pub nofile: u64,
}

/// What contract verification found for one framework.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VerifyOutcome {
    /// Checks performed.
    pub checks: u64,
    /// Checks failed.
    pub failed: u64,
    /// Scenarios that passed and were measured.
    pub passed: Vec<Scenario>,
    /// Scenarios excluded from measurement, with what verify found.
    pub excluded: Vec<Exclusion>,
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

/// Socket-level errors by kind (no response was read).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ErrorCounts {
    /// Connection could not be opened (refused, reset on connect, no fd).
    pub connect: u64,
    /// Reading the response failed (reset, EOF mid-response).
    pub read: u64,
    /// Writing the request failed.
    pub write: u64,
    /// No complete response within the request timeout.
    pub timeout: u64,
    /// The response was not valid HTTP/1.1.
    pub parse: u64,
}

impl ErrorCounts {
    /// All socket errors.
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.parse
    }

    fn add(&mut self, o: &ErrorCounts) {
        self.connect += o.connect;
        self.read += o.read;
        self.write += o.write;
        self.timeout += o.timeout;
        self.parse += o.parse;
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
            errors.add(&r.errors);
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

/// The JSON Schema of results.json (committed as docs/results.schema.json).
pub fn schema() -> schemars::Schema {
    schemars::schema_for!(Results)
}

/// Why a results.json could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file is not JSON of the expected shape.
    #[error("{path}: not a fairground results file: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// The file was written with a layout this version does not know.
    #[error("{path}: schema_version {found} is not supported (this fairground reads {SCHEMA_VERSION}); use the fairground version that wrote it")]
    Version {
        /// The file.
        path: String,
        /// The version found.
        found: u64,
    },
}

/// Parse results.json text; `path` is only used in errors.
pub fn from_json(text: &str, path: &str) -> Result<Results, ReadError> {
    // Check the version first so an old layout gets the right message.
    let raw: serde_json::Value = serde_json::from_str(text).map_err(|source| ReadError::Parse {
        path: path.to_string(),
        source,
    })?;
    let found = raw
        .get("schema_version")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    if found != u64::from(SCHEMA_VERSION) {
        return Err(ReadError::Version {
            path: path.to_string(),
            found,
        });
    }
    serde_json::from_value(raw).map_err(|source| ReadError::Parse {
        path: path.to_string(),
        source,
    })
}

#[cfg(test)]
pub(crate) mod testdata;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_merges_rounds_and_counts_only_2xx_as_success() {
        let r = testdata::sample_results();
        let cell = &r.cells[0];
        let s = cell.summary.as_ref().unwrap();
        assert_eq!(s.throughput_rps.n, cell.rounds.len());
        let total: u64 = cell.rounds.iter().map(|r| r.latency.count).sum();
        assert_eq!(s.latency.count, total);
        assert!(s.error_rate >= 0.0 && s.error_rate < 1.0);
    }

    #[test]
    fn reads_back_what_it_writes_and_refuses_other_versions() {
        let r = testdata::sample_results();
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            from_json(&text, "x").unwrap() == r,
            "results changed in a JSON round trip"
        );
        let old = text.replace("\"schema_version\":1", "\"schema_version\":99");
        let err = from_json(&old, "old/results.json").unwrap_err();
        assert!(err.to_string().contains("schema_version 99"), "{err}");
    }

    #[test]
    fn remaining_lists_planned_cells_not_measured() {
        let mut r = testdata::sample_results();
        assert!(r.remaining().is_empty());
        let gone = r.cells.remove(3).key;
        assert_eq!(r.remaining(), vec![gone]);
    }
}
