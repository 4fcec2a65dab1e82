//! The loader's hot path, one worker thread and its connections, in four
//! parts (docs/loader.md):
//!
//! - this file: the run's plan ([`LoadPlan`]), what threads share
//!   ([`Shared`], [`LiveCounters`]) and what one thread counts
//!   ([`ThreadStats`]);
//! - [`book`]: accounting and timeouts. A [`Worker`] keeps the book every
//!   wire protocol reports to: a request is *admitted* (in the window or
//!   not), *sent*, then *answered* or *lost* (by kind), or still *in
//!   flight* when the run ends; at a fixed rate each connection also owes
//!   the requests *due* in the window. Timeouts, the start gate and the end
//!   of the run live here;
//! - [`connect`]: one connection slot for the whole run: connecting
//!   (bounded in time and in connects in flight), TLS and ALPN, reconnects,
//!   and the choice of a driver, once per connection, by the protocol;
//! - a driver per wire protocol: [`http1`] (pipelined HTTP/1.1 requests
//!   framed out of a reused buffer), [`h2`] (HTTP/2 streams) and [`ws`]
//!   (WebSocket messages after an upgrade). A driver writes requests (or
//!   messages), reads answers and reports each to the book with its
//!   outcome (`book::Outcome`: what "ok" means is the driver's to say).
//!
//! Per request there is no allocation, no lock, no channel and no atomic
//! read-modify-write: counters live in the thread's `RefCell`, the
//! histograms are per thread, the window's edges are two relaxed loads, and
//! the live progress counters are plain stores to a cache line only this
//! thread writes. (Answers checked against the contract, one in
//! [`CHECK_EVERY`], allocate; they are rare on purpose.)
//!
//! Accounting: a request belongs to the window when it was sent (closed
//! loop) or due (fixed rate) inside it; its answer is recorded whenever it
//! comes, the drain after the window included, and a request that never
//! gets one is a timeout. Throughput counts the answers that complete
//! inside the window, whenever their request was sent: with N connections
//! each waiting L per answer that is N/L, whatever L is next to the window.
//! The window's edges are set by the main thread ([`Shared`]); this module
//! only reads them.
//!
//! Timeouts cost no timer operation per request: a connection only stores
//! the deadline of its oldest request in flight in its slot of the thread's
//! timeout table; one sweeper task per thread scans the table every
//! `--timeout`/20 (1 ms to 50 ms) and wakes the connections whose deadline
//! has passed. (A tokio `Sleep` per connection, even re-armed lazily, was
//! the loader's top user-space cost at 1,000 connections: it is polled
//! every time a connection waits.) A timeout is thus counted within one
//! sweep period after it expires.
//!
//! Must not: print, aggregate across threads, or decide the run's phases.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use super::histogram::new_histogram;
use super::report::{AnswerChecks, ErrorCounts, RequestAccounting, StatusCounts};
use super::request::RequestSet;

mod book;
mod connect;
mod counted;
mod h2;
mod hpack;
mod http1;
mod ws;

pub use book::{sweep_period, Worker};
use book::{Book, ConnEnd, InFlight, TimeoutWatch};
pub use connect::connection;
use connect::{write_counted, write_flushed, ConnState, Due};
use counted::{Counted, Marks, Traffic};

/// Initial read buffer per connection; grows (rarely) for larger heads.
pub const READ_BUF: usize = 8 * 1024;
/// Largest response head accepted; beyond it the response is a parse error.
pub const MAX_HEAD: usize = 1024 * 1024;
/// Connects in flight per worker thread, so 10,000 connections do not SYN
/// flood the server's accept queue all at once.
pub const CONNECTS_IN_FLIGHT: usize = 128;
/// First retry delay after a failed connect; doubles up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// Longest retry delay after repeated connect failures.
pub const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// One answer to a window request in this many (per connection) is checked
/// against the contract: often enough that a server that starts lying under
/// load is caught within the first few thousand answers, rarely enough that
/// the copy and the JSON parse cost nothing measurable. Every answer that
/// completes in the drain is checked too.
pub const CHECK_EVERY: u64 = 1000;
/// How often a worker thread looks whether its part of the run is over.
const DONE_POLL: Duration = Duration::from_millis(2);

/// The run's parameters, shared read-only by every thread.
#[derive(Debug)]
pub struct LoadPlan {
    /// Fixed warm-up from the gate's opening to the window, ns; `None` when
    /// the main thread ends the warm-up once it is stable.
    pub fixed_warmup_ns: Option<u64>,
    /// The window's length, ns.
    pub duration_ns: u64,
    /// Server address.
    pub addr: SocketAddr,
    /// `host:port` as the URL wrote it (HTTP/2's :authority).
    pub authority: String,
    /// Requests to send.
    pub set: RequestSet,
    /// Connections actually opened (across all threads).
    pub connections: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// Fixed rate (req/s), or closed loop.
    pub rate: Option<f64>,
    /// Run start (ns, CLOCK_MONOTONIC): connects and the schedule begin here.
    pub start_ns: u64,
    /// Per-request timeout, ns.
    pub timeout_ns: u64,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Seed for per-connection randomness.
    pub seed: u64,
    /// Seconds the window lasts, rounded up: the per-second windows.
    pub window_seconds: usize,
    /// Width of a bin of the fine completion series, ns (see `bursts`).
    pub fine_bin_ns: u64,
    /// https: the client configuration and the name the server's
    /// certificate must carry; `None` for plain HTTP.
    pub tls: Option<super::config::TlsClient>,
    /// The protocol spoken on every connection.
    pub protocol: crate::contract::Protocol,
    /// Concurrent streams per HTTP/2 connection (1 for HTTP/1).
    pub streams: usize,
    /// Fault injection (tests only): drop one answered window request
    /// without counting it, to prove the accounting check can fail.
    #[cfg(test)]
    pub drop_one_record: bool,
}

/// Counters and the run's phases, shared by all threads. Connection counts
/// are touched only on connect and close; the phase instants are written by
/// the main thread (a few times per run) and read by everyone.
#[derive(Debug)]
pub struct Shared {
    /// Connections open right now.
    pub open: AtomicU64,
    /// Most connections open at once.
    pub peak_open: AtomicU64,
    /// Connection slots whose first connect attempt has ended (either way).
    pub settled: AtomicU64,
    /// When the start gate opened (ns), 0 before.
    pub gate_ns: AtomicU64,
    /// The window's start (ns); `u64::MAX` until it opens.
    pub window_start_ns: AtomicU64,
    /// The window's end (ns); `u64::MAX` until it is known.
    pub window_end_ns: AtomicU64,
    /// When every thread must stop, the drain included (ns).
    pub stop_ns: AtomicU64,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            open: AtomicU64::new(0),
            peak_open: AtomicU64::new(0),
            settled: AtomicU64::new(0),
            gate_ns: AtomicU64::new(0),
            window_start_ns: AtomicU64::new(u64::MAX),
            window_end_ns: AtomicU64::new(u64::MAX),
            stop_ns: AtomicU64::new(u64::MAX),
        }
    }
}

impl Shared {
    /// Open the window at `start` for `duration_ns`: the end is stored
    /// before the start, so a reader that sees the start sees the end.
    pub fn open_window(&self, start: u64, duration_ns: u64) {
        self.window_end_ns
            .store(start + duration_ns, Ordering::Release);
        self.window_start_ns.store(start, Ordering::Release);
    }

    /// The window's `(start, end)`; `u64::MAX` for what is not known yet.
    #[inline]
    pub fn window(&self) -> (u64, u64) {
        (
            self.window_start_ns.load(Ordering::Acquire),
            self.window_end_ns.load(Ordering::Acquire),
        )
    }
}

/// Live counters for `--progress` and the until-stable warm-up, written by
/// one worker thread only.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct LiveCounters {
    /// 2xx responses so far (whole run).
    pub ok: AtomicU64,
    /// Errors so far (whole run).
    pub errors: AtomicU64,
    /// Sum of the latencies of every answer so far, µs.
    pub latency_us: AtomicU64,
    /// Answers whose latency is in `latency_us`.
    pub answers: AtomicU64,
}

impl LiveCounters {
    #[inline]
    pub(super) fn bump(counter: &AtomicU64, n: u64) {
        // Single writer: a load and a store, no locked instruction.
        counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }
}

/// What one worker thread counted.
#[derive(Debug)]
pub struct ThreadStats {
    /// Responses completed inside the window, by status class.
    pub responses: StatusCounts,
    /// Requests sent inside the window, answered or lost.
    pub requests: RequestAccounting,
    /// Errors of the window (lost requests by send time, connects by time).
    pub errors: ErrorCounts,
    /// Errors over the whole run.
    pub errors_whole_run: ErrorCounts,
    /// Bytes read inside the window.
    pub bytes_read: u64,
    /// Bytes of the requests sent inside the window.
    pub bytes_written: u64,
    /// Wire bytes of the answers to window requests.
    pub response_bytes: u64,
    /// Per local connection: when it first connected (ns), 0 if never.
    pub first_connect_ns: Vec<u64>,
    /// Per local connection: whether a response completed on it inside the
    /// window.
    pub served: Vec<bool>,
    /// Re-established connections inside the window.
    pub reconnects: u64,
    /// Re-established connections over the whole run.
    pub reconnects_whole_run: u64,
    /// 2xx completed per second of the window.
    pub windows_ok: Vec<u64>,
    /// 2xx completed per bin of `LoadPlan::fine_bin_ns`: the series waves
    /// are found in. Allocated once; the hot path only adds.
    pub fine_ok: Vec<u64>,
    /// Errors seen per second of the window.
    pub windows_err: Vec<u64>,
    /// Sum of the latencies (ns) of answered window requests, by the
    /// second of the window their answer completed in.
    pub windows_latency_ns: Vec<u64>,
    /// How many answered window requests each of those sums holds.
    pub windows_latency_n: Vec<u64>,
    /// Latency (ns) of answers to window requests, from the scheduled time.
    pub hist: Histogram<u64>,
    /// Fixed rate: latency (ns) from the actual send time.
    pub hist_uncorrected: Histogram<u64>,
    /// Fixed rate: largest loader-caused send delay, ns.
    pub max_lag_ns: u64,
    /// Answers checked against the contract.
    pub answers: AnswerChecks,
    /// When this thread's connections all finished (ns), if they did.
    pub finished_ns: Option<u64>,
    /// https: time (ns) from each TCP connection to its TLS handshake's end.
    pub handshakes: Histogram<u64>,
    /// https: handshakes that failed over the whole run.
    pub tls_failed: u64,
    /// https: the last failed handshake's error.
    pub tls_last_error: Option<String>,
    /// https: what the last completed handshake agreed: TLS version,
    /// cipher suite, ALPN protocol.
    pub tls_agreed: Option<(String, String, Option<String>)>,
    /// HTTP/2: the lowest SETTINGS_MAX_CONCURRENT_STREAMS a server sent
    /// when it was below `--streams` (the streams beyond it waited in the
    /// connection's queue, their wait counted in latency).
    pub h2_stream_limit: Option<usize>,
}

impl ThreadStats {
    /// Empty stats for `local` connections, `windows` one-second windows
    /// and `fine` bins of the fine completion series.
    pub fn new(local: usize, windows: usize, fine: usize) -> Self {
        Self {
            responses: StatusCounts::default(),
            requests: RequestAccounting::default(),
            errors: ErrorCounts::default(),
            errors_whole_run: ErrorCounts::default(),
            bytes_read: 0,
            bytes_written: 0,
            response_bytes: 0,
            first_connect_ns: vec![0; local],
            served: vec![false; local],
            reconnects: 0,
            reconnects_whole_run: 0,
            windows_ok: vec![0; windows],
            fine_ok: vec![0; fine],
            windows_err: vec![0; windows],
            windows_latency_ns: vec![0; windows],
            windows_latency_n: vec![0; windows],
            hist: new_histogram(),
            hist_uncorrected: new_histogram(),
            max_lag_ns: 0,
            answers: AnswerChecks::default(),
            finished_ns: None,
            handshakes: new_histogram(),
            tls_failed: 0,
            tls_last_error: None,
            tls_agreed: None,
            h2_stream_limit: None,
        }
    }
}
