//! The loader's report: what `fairground load --json` prints and what
//! `load::run` returns, plus the human summary (like wrk's).
//!
//! Owns: the report types (their JSON shape is the contract with the
//! orchestrator, described by docs/load-report.schema.json) and their
//! rendering. Must not: measure anything.

use std::io::Write;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::histogram::LatencySummary;

/// Version of the report's JSON shape; bump on any incompatible change.
pub const SCHEMA_VERSION: u32 = 3;

/// Kinds of errors the loader counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A connection could not be opened (refused, unreachable, timed out).
    Connect,
    /// Reading failed, or the server closed with requests outstanding.
    Read,
    /// Writing a request failed.
    Write,
    /// A request was still unanswered `--timeout` after it was sent.
    Timeout,
    /// The response could not be parsed as HTTP/1.1, or (HTTP/2) the
    /// server's frames or header blocks were not valid HTTP/2 or HPACK.
    Parse,
    /// The TLS handshake failed (a certificate the run's CA did not sign,
    /// no protocol in common, a handshake that timed out).
    Tls,
}

/// Error counts by kind. Read, write, timeout and parse errors count lost
/// requests (each request in flight on a connection that fails is one),
/// placed by when the request was sent; connect errors count failed
/// connection attempts, placed by when they failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorCounts {
    /// Failed connection attempts (refused, unreachable, connect timeout).
    pub connect: u64,
    /// Requests lost to a read error or to the server closing the
    /// connection; over HTTP/2 also a stream the server reset (RST_STREAM)
    /// or refused (GOAWAY).
    pub read: u64,
    /// Requests that could not be written.
    pub write: u64,
    /// Requests unanswered `--timeout` after they were sent (the connection
    /// is then closed and reopened; over HTTP/2 the stream is cancelled,
    /// and the connection reopened only when no stream ended in that
    /// time), and requests of the window still unanswered when the drain
    /// after it ended.
    pub timeout: u64,
    /// Requests lost to a response that is not valid HTTP/1.1 (or, over
    /// HTTP/2, frames or header blocks that are not valid HTTP/2 or HPACK).
    pub parse: u64,
    /// Failed TLS handshakes (https and h2): connection attempts, like
    /// `connect`, placed by when they failed; a handshake whose ALPN did
    /// not agree the protocol asked is one. Left out when 0, so plain
    /// HTTP reports and results read as they always did.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ErrorCounts {
    /// Add `n` errors of `kind`.
    #[inline]
    pub fn add(&mut self, kind: ErrorKind, n: u64) {
        match kind {
            ErrorKind::Connect => self.connect += n,
            ErrorKind::Read => self.read += n,
            ErrorKind::Write => self.write += n,
            ErrorKind::Timeout => self.timeout += n,
            ErrorKind::Parse => self.parse += n,
            ErrorKind::Tls => self.tls += n,
        }
    }

    /// All errors of every kind.
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.parse + self.tls
    }

    /// Sum of two counts.
    pub fn merge(&mut self, o: &ErrorCounts) {
        self.connect += o.connect;
        self.read += o.read;
        self.write += o.write;
        self.timeout += o.timeout;
        self.parse += o.parse;
        self.tls += o.tls;
    }
}

/// Whether the run was closed loop (wrk) or fixed rate (wrk2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Each connection sends its next request (batch) when the previous
    /// answer is complete.
    Closed,
    /// Requests are sent on a fixed schedule; latency from intended times.
    FixedRate,
}

/// The settings the run used (after limits were applied).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunSettings {
    /// Target URL as given.
    pub url: String,
    /// Contract scenario, or null for an ad-hoc request.
    pub scenario: Option<String>,
    /// HTTP method of the (first) request.
    pub method: String,
    /// Closed loop or fixed rate.
    pub mode: Mode,
    /// Worker threads.
    pub threads: usize,
    /// Requests in flight per connection (batch size in closed loop).
    pub pipeline: usize,
    /// The protocol spoken; absent for http1.
    #[serde(default, skip_serializing_if = "crate::contract::Protocol::is_http1")]
    pub protocol: crate::contract::Protocol,
    /// Concurrent streams per HTTP/2 connection, what `pipeline` is to
    /// HTTP/1.1: a closed loop holds connections × streams requests in
    /// flight. Absent when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub streams: usize,
    /// Warmup before measuring, seconds.
    pub warmup_s: f64,
    /// Measured duration asked for, seconds.
    pub duration_s: f64,
    /// Per-request timeout, milliseconds.
    pub timeout_ms: u64,
    /// Connect timeout, milliseconds.
    pub connect_timeout_ms: u64,
    /// Target rate (fixed-rate mode), requests per second.
    pub rate_rps: Option<f64>,
    /// Bound on measured requests (`--requests`), if any.
    pub max_requests: Option<u64>,
    /// Warm-up until stable: the window length and CV it was asked for
    /// (`warmup_s` is then its longest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_stable: Option<StableSettings>,
}

impl RunSettings {
    /// Requests a closed loop keeps in flight per connection: `streams`
    /// over HTTP/2, `pipeline` over HTTP/1.1 (Little's law: answers/s ×
    /// mean latency = connections served × this).
    pub fn in_flight_per_connection(&self) -> usize {
        if self.protocol.is_http2() {
            self.streams
        } else {
            self.pipeline
        }
    }
}

/// What `--warmup-until-stable` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StableSettings {
    /// Length of each warm-up window compared, seconds.
    pub window_s: f64,
    /// Largest CV of the last three windows that counts as stable.
    pub max_cv: f64,
}

/// Responses by status class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StatusCounts {
    /// 2xx responses: the only ones throughput counts.
    pub status_2xx: u64,
    /// 3xx responses.
    pub status_3xx: u64,
    /// 4xx responses.
    pub status_4xx: u64,
    /// 5xx responses.
    pub status_5xx: u64,
    /// Responses with a status outside 200-599 (1xx, or not a number).
    #[serde(default)]
    pub status_other: u64,
}

impl StatusCounts {
    /// Count one response of `status`.
    #[inline]
    pub fn add_status(&mut self, status: u16) {
        match status {
            200..=299 => self.status_2xx += 1,
            300..=399 => self.status_3xx += 1,
            400..=499 => self.status_4xx += 1,
            500..=599 => self.status_5xx += 1,
            _ => self.status_other += 1,
        }
    }

    /// Responses of any class.
    pub fn total(&self) -> u64 {
        self.status_2xx + self.status_3xx + self.status_4xx + self.status_5xx + self.status_other
    }

    /// Responses that were not 2xx.
    pub fn non_2xx(&self) -> u64 {
        self.total() - self.status_2xx
    }

    /// Sum of two counts.
    pub fn merge(&mut self, o: &StatusCounts) {
        self.status_2xx += o.status_2xx;
        self.status_3xx += o.status_3xx;
        self.status_4xx += o.status_4xx;
        self.status_5xx += o.status_5xx;
        self.status_other += o.status_other;
    }
}

/// Every request of the measured window, accounted for from counters kept
/// where each thing happens: `sent` where a request is written, `answered`
/// where its response is parsed, each `lost` kind where the loss happens
/// (a timeout at its own deadline), `in_flight_at_end` from the
/// connections' queues when the drain ended, `unsent` (fixed rate) from
/// each connection's schedule. Then
/// `sent + unsent == answered + lost + in_flight_at_end + unsent` is a check
/// that can fail ([`RequestAccounting::balanced`]): a record dropped by a bug
/// shows as a gap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RequestAccounting {
    /// Window requests written: sent inside the window (closed loop), or
    /// due inside it and written, possibly late (fixed rate).
    pub sent: u64,
    /// Their answers, by status class.
    pub answered: StatusCounts,
    /// Those lost: to a read, write or parse error, or unanswered at their
    /// own `--timeout` deadline (`connect` is always 0 here).
    pub lost: ErrorCounts,
    /// Sent, but neither answered nor past their own deadline when the
    /// drain ended: 0 whenever the drain was long enough. Their latency is
    /// at least the drain's length past the window.
    #[serde(default)]
    pub in_flight_at_end: u64,
    /// Fixed rate: requests due inside the window that were never written
    /// (the connection was still busy with earlier ones when the run
    /// ended): a server past its capacity. Their latency from the intended
    /// time is at least the drain's length.
    #[serde(default)]
    pub unsent: u64,
}

impl RequestAccounting {
    /// Whether every request sent is answered, lost or still in flight,
    /// none missing (`unsent` are counted apart: they were never sent).
    pub fn balanced(&self) -> bool {
        self.sent == self.answered.total() + self.lost.total() + self.in_flight_at_end
    }

    /// Window requests in all: written or due (`sent + unsent`).
    pub fn due(&self) -> u64 {
        self.sent + self.unsent
    }

    /// Window requests whose latency is known to exceed the timeout: timed
    /// out, still in flight when the drain (one timeout long) ended, or
    /// never sent. Percentiles count them as "more than the timeout".
    pub fn beyond_timeout(&self) -> u64 {
        self.lost.timeout + self.in_flight_at_end + self.unsent
    }

    /// Sum of two accountings.
    pub fn merge(&mut self, o: &RequestAccounting) {
        self.sent += o.sent;
        self.answered.merge(&o.answered);
        self.lost.merge(&o.lost);
        self.in_flight_at_end += o.in_flight_at_end;
        self.unsent += o.unsent;
    }
}

/// What happened to the connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Connections {
    /// Connections asked for (`-c`).
    pub requested: u64,
    /// Connections the loader tried to hold (less than `requested` only when
    /// a limit said so before the run; see `warnings`).
    pub attempted: u64,
    /// Connection slots connected (TCP handshake done) before the window
    /// opened. A server that never calls accept() still completes
    /// handshakes from its backlog: this is not proof of service.
    pub established: u64,
    /// Connection slots that got at least one response inside the window:
    /// the connections really served.
    #[serde(default)]
    pub serving: u64,
    /// Most connections open at the same moment.
    pub peak_open: u64,
    /// Connections re-established inside the window after a close or an
    /// error.
    pub reconnects: u64,
    /// Reconnects over the whole run, warm-up and drain included.
    #[serde(default)]
    pub reconnects_whole_run: u64,
}

impl Connections {
    /// `n` connections requested, every one established and served, none
    /// re-opened: what a clean round looks like.
    pub fn all_served(n: u64) -> Connections {
        Connections {
            requested: n,
            attempted: n,
            established: n,
            serving: n,
            peak_open: n,
            reconnects: 0,
            reconnects_whole_run: 0,
        }
    }
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// TLS as the loader saw it, over the whole run (https and h2 only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TlsReport {
    /// Handshakes completed that agreed the protocol asked under ALPN.
    pub handshakes: u64,
    /// Handshakes that failed (each also counted in `errors_whole_run.tls`).
    pub failed: u64,
    /// Time from the TCP connection to the end of the TLS handshake, one
    /// sample per connection made.
    pub handshake: LatencySummary,
    /// TLS version the server agreed (the last handshake's).
    pub version: Option<String>,
    /// Cipher suite it agreed.
    pub cipher_suite: Option<String>,
    /// Protocol it agreed under ALPN, if any.
    pub alpn: Option<String>,
    /// The last failed handshake, in rustls's words, or the ALPN protocol
    /// agreed when it was not the one asked ("ALPN agreed http/1.1, not
    /// h2").
    pub last_error: Option<String>,
}

/// Bytes on the wire during the measured period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WireBytes {
    /// Bytes read from the server.
    pub read: u64,
    /// Bytes written to the server.
    pub written: u64,
    /// Mean bytes per answer to a request of the window, status line and
    /// headers included.
    pub mean_response_bytes: f64,
}

/// Fixed-rate accounting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RateReport {
    /// Requests per second asked for.
    pub target_rps: f64,
    /// Responses (any status) completed per second of the window.
    pub achieved_rps: f64,
    /// `achieved_rps / target_rps`; below ~0.98 the target was not met.
    pub ratio: f64,
    /// Largest delay, µs, between when the loader could and should have sent
    /// a request and when it did (waiting for a slow server excluded): large
    /// values mean the loader itself could not keep up.
    pub max_schedule_lag_us: u64,
}

/// The loader's own resource use, so a saturated loader is visible.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoaderUsage {
    /// User CPU time of the whole loader process during the measured period, µs.
    pub user_cpu_us: u64,
    /// System CPU time of the whole loader process during the measured period, µs.
    pub sys_cpu_us: u64,
    /// (user + sys) per completed measured response, µs.
    pub cpu_us_per_response: f64,
    /// Peak resident set size of the loader process, KiB.
    pub peak_rss_kib: u64,
    /// CPU-quota throttling of the loader's cgroup during the measured
    /// period; absent when the loader runs without a quota it can read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttling: Option<Throttling>,
}

/// CFS quota enforcement periods during the measured period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Throttling {
    /// Scheduler periods (100 ms by default) in which the loader ran.
    pub periods: u64,
    /// Periods in which the loader used up its quota and had to wait: a
    /// loader that wanted more CPU than it was given.
    pub throttled_periods: u64,
}

impl Throttling {
    /// The periods between an earlier reading of the counters and this one;
    /// `None` when no period passed (no quota, or nothing ran).
    pub fn since(self, earlier: Throttling) -> Option<Throttling> {
        let periods = self.periods.saturating_sub(earlier.periods);
        (periods > 0).then(|| Throttling {
            periods,
            throttled_periods: self
                .throttled_periods
                .saturating_sub(earlier.throttled_periods),
        })
    }

    /// Share of periods throttled, 0 when there were none.
    pub fn fraction(&self) -> f64 {
        if self.periods == 0 {
            0.0
        } else {
            self.throttled_periods as f64 / self.periods as f64
        }
    }
}

/// One second of the measured window, by when responses completed and
/// errors were seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    /// Start of the window, whole seconds from the start of measurement.
    pub t_s: u64,
    /// 2xx responses completed in the window.
    pub ok: u64,
    /// Errors (any kind) in the window.
    pub errors: u64,
    /// Mean latency (µs, corrected at a fixed rate) of the window requests
    /// answered in this second; `None` when none was. At a fixed rate past the
    /// server's capacity it rises second by second with the backlog.
    #[serde(default)]
    pub latency_mean_us: Option<f64>,
}

/// The instants the measured window opened and closed, on both clocks, so
/// an observer (the orchestrator reading a cgroup, another host) can cover
/// exactly the same time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WindowTimes {
    /// When the loader began to connect, CLOCK_MONOTONIC ns: the server had
    /// no load of this run before it.
    #[serde(default)]
    pub connects_mono_ns: u64,
    /// Opened, CLOCK_MONOTONIC ns (same clock on every container of a host).
    pub start_mono_ns: u64,
    /// Closed, CLOCK_MONOTONIC ns.
    pub end_mono_ns: u64,
    /// Opened, Unix time ns (CLOCK_REALTIME).
    pub start_unix_ns: u64,
    /// Closed, Unix time ns.
    pub end_unix_ns: u64,
}

/// The warm-up before the window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct WarmupReport {
    /// Time from the moment every connection was open (or the connect
    /// timeout passed) to the window, seconds.
    pub seconds: f64,
    /// Until-stable only: whether the warm-up windows became stable (false:
    /// the window opened because the warm-up's longest time ran out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable: Option<bool>,
    /// 2xx responses completed in each second of the warm-up.
    pub windows_ok: Vec<u64>,
}

/// Answers checked against the contract under load: one in
/// [`crate::roles::load::conn::CHECK_EVERY`] answers to window requests, and every
/// answer during the drain.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct AnswerChecks {
    /// Answers checked.
    pub checked: u64,
    /// Answers that were not what the contract says for their request.
    pub wrong: u64,
    /// The first wrong answer, with what was expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

/// Everything one `fairground load` run saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadReport {
    /// Version of this JSON shape ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The settings the run used.
    pub settings: RunSettings,
    /// When the measured window opened and closed.
    pub window: WindowTimes,
    /// Length of the window, seconds (shorter than asked when `--requests`
    /// finished first).
    pub measured_s: f64,
    /// The warm-up before it.
    pub warmup: WarmupReport,
    /// Responses completed inside the window (whenever their request was
    /// sent), by status class: what throughput counts.
    pub responses: StatusCounts,
    /// 2xx responses completed per second of the window. With N
    /// connections each waiting L for every answer this is N/L, whatever L
    /// is next to the window. When the answers came in waves (`bursts`),
    /// read over whole waves (`bursts.rate_rps`) so the window's phase
    /// among them does not move it.
    pub throughput_rps: f64,
    /// The waves the answers came in, when they came in waves a period
    /// apart (found in 2xx completions per 10 ms of the window); absent
    /// when they came steadily.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bursts: Option<super::bursts::Bursts>,
    /// Every request sent inside the window, answered or lost.
    pub requests: RequestAccounting,
    /// Errors of the window: the requests it lost (by when they were sent,
    /// timeouts found in the drain included) and the connects that failed
    /// inside it.
    pub errors: ErrorCounts,
    /// Errors over the whole run: connection setup, warm-up, window, drain.
    pub errors_whole_run: ErrorCounts,
    /// How long the drain after the window took (at most `--timeout`):
    /// requests of the window still in flight were answered or timed out.
    pub drain_s: f64,
    /// Connection accounting.
    pub connections: Connections,
    /// Bytes on the wire (window).
    pub bytes: WireBytes,
    /// Latency of the answers to requests sent inside the window, the drain
    /// included so a slow answer is never dropped for being slow, µs. Fixed
    /// rate: from the intended send time (corrected for coordinated
    /// omission); closed loop: from the send time of the request's batch.
    pub latency: LatencySummary,
    /// Fixed rate only: latency from the actual send time (uncorrected).
    pub uncorrected_latency: Option<LatencySummary>,
    /// Fixed rate only: target vs achieved rate and schedule lag.
    pub rate: Option<RateReport>,
    /// https and h2 only: handshakes, their time, and what the server
    /// agreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsReport>,
    /// HTTP/2: the lowest SETTINGS_MAX_CONCURRENT_STREAMS a server
    /// announced, when it was below `--streams` (the streams beyond it
    /// waited in the loader's queue, their wait counted in the latency);
    /// absent when every connection could open `--streams` streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2_stream_limit: Option<u64>,
    /// Answers checked against the contract under load.
    pub answers: AnswerChecks,
    /// CPU and memory of the loader itself (window).
    pub loader: LoaderUsage,
    /// Per-second windows of the measured window.
    pub windows: Vec<Window>,
    /// Things the user must know about this run (limits that capped
    /// connections, a missed rate, ...).
    pub warnings: Vec<String>,
}

impl LoadReport {
    /// The human summary, in wrk's spirit.
    pub fn write_human(&self, mut w: impl Write) -> std::io::Result<()> {
        let s = &self.settings;
        let what = match &s.scenario {
            Some(sc) => format!("scenario {sc}"),
            None => format!("{} request", s.method),
        };
        let mode = match s.mode {
            Mode::Closed => "closed loop".to_string(),
            Mode::FixedRate => format!("fixed rate {:.0} req/s", s.rate_rps.unwrap_or(0.0)),
        };
        let protocol = if s.protocol.is_http2() {
            format!(", {} with {} streams per connection", s.protocol, s.streams)
        } else if s.protocol.is_http1() {
            String::new()
        } else {
            format!(", {}", s.protocol)
        };
        writeln!(
            w,
            "Running {:.1}s test @ {} ({what}, {mode}{protocol})",
            s.duration_s, s.url
        )?;
        let c = &self.connections;
        writeln!(
            w,
            "  {} threads and {} connections ({} established, {} served in the window, peak {} open, {} reconnects)",
            s.threads, c.requested, c.established, c.serving, c.peak_open, c.reconnects
        )?;
        if s.pipeline > 1 {
            writeln!(w, "  pipeline depth {}", s.pipeline)?;
        }
        let l = &self.latency;
        writeln!(w, "  Latency      Avg       Stdev     Max")?;
        writeln!(
            w,
            "             {:>9} {:>9} {:>9}",
            crate::units::micros(l.mean_us),
            crate::units::micros(l.stdev_us),
            crate::units::micros(l.max_us as f64)
        )?;
        writeln!(w, "  Latency distribution")?;
        for (p, v) in [
            ("50%", l.p50_us),
            ("75%", l.p75_us),
            ("90%", l.p90_us),
            ("99%", l.p99_us),
            ("99.9%", l.p99_9_us),
            ("99.99%", l.p99_99_us),
        ] {
            let unc = self
                .uncorrected_latency
                .as_ref()
                .map(|u| {
                    let v = match p {
                        "50%" => u.p50_us,
                        "75%" => u.p75_us,
                        "90%" => u.p90_us,
                        "99%" => u.p99_us,
                        "99.9%" => u.p99_9_us,
                        _ => u.p99_99_us,
                    };
                    format!("   (uncorrected {})", crate::units::micros(v as f64))
                })
                .unwrap_or_default();
            writeln!(w, "    {p:>7} {:>9}{unc}", crate::units::micros(v as f64))?;
        }
        // What an answer is: a WebSocket scenario's are echoed messages.
        let scenario = s
            .scenario
            .as_deref()
            .and_then(|n| n.parse::<crate::contract::Scenario>().ok());
        let (answers, answer, sent, per_s) = if scenario.is_some_and(|sc| sc.is_websocket()) {
            (
                "echoes",
                "echo",
                "Messages",
                "Messages/sec (echoed exactly)",
            )
        } else if scenario.is_some_and(|sc| sc.is_grpc()) {
            (
                "answers",
                "answer",
                "Calls",
                "Calls/sec (grpc-status 0, reply checked)",
            )
        } else {
            ("responses", "response", "Requests", "Requests/sec (2xx)")
        };
        let r = &self.responses;
        writeln!(
            w,
            "  {} {answers} in {:.2}s, {} read, {} written ({:.0} B/{answer})",
            r.total(),
            self.measured_s,
            crate::units::bytes(self.bytes.read as f64),
            crate::units::bytes(self.bytes.written as f64),
            self.bytes.mean_response_bytes
        )?;
        if scenario.is_some_and(|sc| sc.is_websocket()) {
            writeln!(w, "  Echoes: {} exact, {} wrong", r.status_2xx, r.non_2xx())?;
        } else if scenario.is_some_and(|sc| sc.is_grpc()) {
            writeln!(
                w,
                "  Calls: {} OK with the right reply, {} not (another grpc-status, none, or a wrong reply)",
                r.status_2xx,
                r.non_2xx()
            )?;
        } else {
            writeln!(
                w,
                "  Status: 2xx {}, 3xx {}, 4xx {}, 5xx {}, other {}",
                r.status_2xx, r.status_3xx, r.status_4xx, r.status_5xx, r.status_other
            )?;
        }
        let e = &self.errors;
        writeln!(
            w,
            "  Errors: connect {}, read {}, write {}, timeout {}, parse {}, tls {}",
            e.connect, e.read, e.write, e.timeout, e.parse, e.tls
        )?;
        if let Some(t) = &self.tls {
            writeln!(
                w,
                "  TLS: {} handshakes ({} failed), p50 {} p99 {}; {} {} ALPN {}{}",
                t.handshakes,
                t.failed,
                crate::units::micros(t.handshake.p50_us as f64),
                crate::units::micros(t.handshake.p99_us as f64),
                t.version.as_deref().unwrap_or("?"),
                t.cipher_suite.as_deref().unwrap_or("?"),
                t.alpn.as_deref().unwrap_or("none"),
                t.last_error
                    .as_deref()
                    .map(|e| format!("; last failure: {e}"))
                    .unwrap_or_default()
            )?;
        }
        let q = &self.requests;
        writeln!(
            w,
            "  {sent} sent in the window: {} = {} answered + {} lost (drain {:.2}s)",
            q.sent,
            q.answered.total(),
            q.lost.total(),
            self.drain_s
        )?;
        if self.answers.wrong > 0 {
            writeln!(
                w,
                "  WRONG ANSWERS: {} of {} checked; first: {}",
                self.answers.wrong,
                self.answers.checked,
                self.answers.example.as_deref().unwrap_or("?")
            )?;
        }
        writeln!(w, "{per_s}: {:.2}", self.throughput_rps)?;
        if let Some(b) = &self.bursts {
            writeln!(
                w,
                "  {}: read over whole waves ({:.2} answers/s counted over the window)",
                b.describe(),
                b.window_rps
            )?;
        }
        if let Some(rate) = &self.rate {
            writeln!(
                w,
                "Rate: target {:.0}, achieved {:.0} ({:.1}%), max schedule lag {}",
                rate.target_rps,
                rate.achieved_rps,
                rate.ratio * 100.0,
                crate::units::micros(rate.max_schedule_lag_us as f64)
            )?;
        }
        let u = &self.loader;
        writeln!(
            w,
            "Loader: user {:.2}s, sys {:.2}s ({:.2} µs CPU/{answer}), peak RSS {:.1} MiB",
            u.user_cpu_us as f64 / 1e6,
            u.sys_cpu_us as f64 / 1e6,
            u.cpu_us_per_response,
            u.peak_rss_kib as f64 / 1024.0
        )?;
        if let Some(t) = u.throttling.filter(|t| t.throttled_periods > 0) {
            writeln!(
                w,
                "Loader throttled by its CPU quota in {} of {} scheduler periods ({:.0}%)",
                t.throttled_periods,
                t.periods,
                t.fraction() * 100.0
            )?;
        }
        for warning in &self.warnings {
            writeln!(w, "warning: {warning}")?;
        }
        Ok(())
    }
}

/// The JSON Schema of [`LoadReport`] (committed as docs/load-report.schema.json).
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(LoadReport)).expect("schema serializes")
}

/// One line of `--progress` output on stderr: JSON, one object per line.
/// The orchestrator starts its server probe on [`Progress::Measure`] and
/// shows the ticks as live req/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Progress {
    /// The measured window opens now.
    Measure {
        /// Seconds since the loader started.
        t: f64,
        /// The instant, CLOCK_MONOTONIC ns.
        #[serde(default)]
        mono_ns: u64,
    },
    /// The measured window closes now; the drain begins.
    Drain {
        /// Seconds since the loader started.
        t: f64,
        /// The instant, CLOCK_MONOTONIC ns.
        mono_ns: u64,
    },
    /// One second of traffic.
    Tick {
        /// Seconds since the loader started.
        t: f64,
        /// Whether the second was warm-up or measured.
        phase: Phase,
        /// Responses completed in the second.
        ok: u64,
        /// Errors in the second.
        errors: u64,
    },
}

/// The part of a run a progress tick belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Before the measured window.
    Warmup,
    /// Inside it.
    Measure,
    /// After it: requests of the window being answered.
    Drain,
}

impl Progress {
    /// Parse one stderr line; `None` for anything that is not progress.
    pub fn parse(line: &str) -> Option<Progress> {
        serde_json::from_str(line.trim()).ok()
    }

    /// The line as printed.
    pub fn line(&self) -> String {
        serde_json::to_string(self).expect("progress serializes")
    }
}
