//! One worker thread's state and one connection's state machine: the hot path.
//!
//! Owns: connecting (bounded in time and in connects in flight), writing
//! pre-serialized requests, framing responses out of a reused buffer,
//! timeouts, reconnects, and per-thread counting. Per request there is no
//! allocation, no lock, no channel and no atomic read-modify-write: counters
//! live in the thread's `RefCell`, the histograms are per thread, the
//! window's edges are two relaxed loads, and the live progress counters are
//! plain stores to a cache line only this thread writes. (Answers checked
//! against the contract, one in [`CHECK_EVERY`], allocate; they are rare on
//! purpose.)
//!
//! Accounting (docs/loader.md): a request belongs to the window when it was
//! sent (closed loop) or due (fixed rate) inside it; its answer is recorded
//! whenever it comes, the drain after the window included, and a request
//! that never gets one is a timeout. Throughput counts the answers that
//! complete inside the window, whenever their request was sent: with N
//! connections each waiting L per answer that is N/L, whatever L is next to
//! the window. The window's edges are set by the main thread ([`Shared`]);
//! this module only reads them.
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
//!
//! One file on purpose: the hot path is read and measured as a whole
//! (docs/loader.md); splitting it would scatter what must stay together.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::histogram::new_histogram;
use super::open::{due_in, intended_ns, Pacer};
use super::parse::{Parsed, ResponseParser};
use super::report::{AnswerChecks, ErrorCounts, ErrorKind, RequestAccounting, StatusCounts};
use super::request::{RequestGen, RequestSet};
use crate::contract::{self, Scenario};
use crate::host::clock::now_ns;

mod counted;
mod h2;
mod hpack;

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
    fn bump(counter: &AtomicU64, n: u64) {
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

/// One worker thread: its share of the plan, counters and pacer.
pub struct Worker {
    /// The run's parameters.
    pub plan: Arc<LoadPlan>,
    /// This thread's counters.
    pub stats: RefCell<ThreadStats>,
    /// Window requests this thread may still send (`--requests`).
    pub permits: Cell<u64>,
    /// Window requests this thread could send at the start (`u64::MAX`:
    /// unbounded).
    permits_total: u64,
    /// Global index of each local connection.
    globals: Vec<usize>,
    /// Progress counters.
    pub live: Arc<LiveCounters>,
    /// Cross-thread counters and the run's phases.
    pub shared: Arc<Shared>,
    /// Bounds connects in flight.
    pub connect_sem: tokio::sync::Semaphore,
    /// Fixed-rate pacer (None in closed loop).
    pub pacer: Option<Rc<Pacer>>,
    /// Window requests of this thread sent and not answered or lost yet.
    outstanding: Cell<u64>,
    /// Fixed rate: local connections that still owe window requests (due
    /// inside the window, not written yet). The thread does not stop early
    /// while one does, so a backlog is sent (or counted unsent) in the drain.
    backlog: Cell<u64>,
    /// Per local connection: its requests in flight and its share of the
    /// window's schedule. Shared with the connection's task so the end of
    /// the run can count what is still in flight from the queues themselves.
    books: Vec<Rc<RefCell<Book>>>,
    /// Per local connection: deadline of its oldest request in flight.
    timeouts: RefCell<Vec<TimeoutSlot>>,
    /// The start gate is open: connections may send.
    gate_open: Cell<bool>,
    gate: tokio::sync::Notify,
    base_instant: tokio::time::Instant,
    base_ns: u64,
    /// Fault injection done (tests only).
    #[cfg(test)]
    dropped: Cell<bool>,
}

impl Worker {
    /// A worker for `local_connections` connections; call inside a runtime.
    pub fn new(
        plan: Arc<LoadPlan>,
        globals: Vec<usize>,
        permits: u64,
        live: Arc<LiveCounters>,
        shared: Arc<Shared>,
    ) -> std::io::Result<Self> {
        let local_connections = globals.len();
        let pacer = match plan.rate {
            Some(_) => Some(Pacer::new(local_connections)?),
            None => None,
        };
        Ok(Self {
            stats: RefCell::new(ThreadStats::new(
                local_connections,
                plan.window_seconds.max(1),
                super::bursts::bins(plan.duration_ns),
            )),
            permits: Cell::new(permits),
            permits_total: permits,
            globals,
            live,
            shared,
            connect_sem: tokio::sync::Semaphore::new(CONNECTS_IN_FLIGHT),
            pacer,
            outstanding: Cell::new(0),
            backlog: Cell::new(if plan.rate.is_some() {
                local_connections as u64
            } else {
                0
            }),
            books: (0..local_connections)
                .map(|_| Rc::new(RefCell::new(Book::new(plan.pipeline.max(plan.streams)))))
                .collect(),
            timeouts: RefCell::new(
                (0..local_connections)
                    .map(|_| TimeoutSlot::default())
                    .collect(),
            ),
            gate_open: Cell::new(false),
            gate: tokio::sync::Notify::new(),
            base_instant: tokio::time::Instant::now(),
            base_ns: now_ns(),
            #[cfg(test)]
            dropped: Cell::new(false),
            plan,
        })
    }

    /// The tokio instant of a CLOCK_MONOTONIC time in ns.
    pub fn instant_at(&self, ns: u64) -> tokio::time::Instant {
        if ns >= self.base_ns {
            self.base_instant + Duration::from_nanos(ns - self.base_ns)
        } else {
            self.base_instant
        }
    }

    /// The start gate: requests wait until every connection slot's first
    /// connect has ended (so a high connection count is really held before
    /// load starts, and a server busy answering the first connections does
    /// not starve the accept queue of the last ones), or until the connect
    /// timeout has passed since the start, whichever comes first. One task
    /// per thread polls the shared count every millisecond; the first
    /// thread to open records when (the warm-up counts from there) and,
    /// with a fixed warm-up, sets the window: every thread knows it before
    /// it begins, so no request near its start is misfiled.
    pub async fn gate_keeper(self: Rc<Self>) {
        let deadline = self.plan.start_ns + self.plan.connect_timeout.as_nanos() as u64;
        loop {
            let settled = self.shared.settled.load(Ordering::Relaxed);
            let now = now_ns();
            if settled >= self.plan.connections as u64 || now >= deadline {
                let first = self
                    .shared
                    .gate_ns
                    .compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok();
                if let (true, Some(warmup)) = (first, self.plan.fixed_warmup_ns) {
                    self.shared.open_window(now + warmup, self.plan.duration_ns);
                }
                self.gate_open.set(true);
                self.gate.notify_waiters();
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Whether this thread's part of the run is over: the stop instant has
    /// passed, or the window has closed and every request this thread sent
    /// inside it has been answered or lost.
    #[inline]
    fn done(&self, now: u64) -> bool {
        now >= self.shared.stop_ns.load(Ordering::Relaxed)
            || (now >= self.shared.window_end_ns.load(Ordering::Relaxed)
                && self.outstanding.get() == 0
                && self.backlog.get() == 0)
    }

    /// Resolves when [`Self::done`] (polled every [`DONE_POLL`]).
    pub async fn until_done(self: Rc<Self>) {
        while !self.done(now_ns()) {
            tokio::time::sleep(DONE_POLL).await;
        }
    }

    /// The end of the run, from the connections' own queues and schedules
    /// (not from the running `outstanding` counter, so a record lost by a
    /// bug shows as an accounting gap instead of being papered over): a
    /// window request still in flight is a timeout when its own deadline
    /// has passed, otherwise "in flight when the drain ended"; at a fixed
    /// rate, a window request that was due but never written is unsent.
    pub fn settle_accounts(&self, now: u64) {
        let plan = &*self.plan;
        let (ws, we) = self.shared.window();
        let bounded = self.permits_bounded();
        let mut s = self.stats.borrow_mut();
        for (local, book) in self.books.iter().enumerate() {
            let b = book.borrow();
            for f in b.inflight.iter().filter(|f| f.window) {
                if now >= f.sent + plan.timeout_ns {
                    s.requests.lost.timeout += 1;
                    s.errors.timeout += 1;
                    s.errors_whole_run.timeout += 1;
                } else {
                    s.requests.in_flight_at_end += 1;
                }
            }
            if let (Some(rate), false, true) =
                (plan.rate, bounded, ws != u64::MAX && we != u64::MAX)
            {
                let due = if b.window_epoch {
                    b.window_due
                } else {
                    due_in(ws, we, self.global_of(local), plan.connections, rate)
                };
                s.requests.unsent += due.saturating_sub(b.window_sent);
            }
        }
    }

    /// Whether `--requests` bounds the window (then the schedule's window
    /// share is not owed: the run ends when the permits are used up).
    fn permits_bounded(&self) -> bool {
        self.permits_total != u64::MAX
    }

    /// Global index of local connection `local` (connection i belongs to
    /// thread i mod T, see `load::run`).
    fn global_of(&self, local: usize) -> usize {
        self.globals[local]
    }

    /// Connection `local` no longer owes window requests.
    fn backlog_done(&self) {
        self.backlog.set(self.backlog.get().saturating_sub(1));
    }

    /// Set the timeout deadline of local connection `slot` (`u64::MAX`:
    /// nothing in flight).
    #[inline]
    fn arm_timeout(&self, slot: usize, deadline: u64) {
        let mut t = self.timeouts.borrow_mut();
        let s = &mut t[slot];
        if s.deadline != deadline {
            s.deadline = deadline;
            s.expired = false;
        }
    }

    fn disarm_timeout(&self, slot: usize) {
        self.arm_timeout(slot, u64::MAX);
    }

    /// The timeout sweeper: wake connections whose deadline has passed.
    pub async fn timeout_sweeper(self: Rc<Self>) {
        let mut tick = tokio::time::interval(sweep_period(self.plan.timeout_ns));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = now_ns();
            for s in self.timeouts.borrow_mut().iter_mut() {
                if !s.expired && now >= s.deadline {
                    s.expired = true;
                    if let Some(waker) = s.waker.take() {
                        waker.wake();
                    }
                }
            }
        }
    }

    async fn wait_for_gate(&self) {
        if !self.gate_open.get() {
            // Single-threaded: the keeper cannot run between this check and
            // the first poll of `notified`, so no wake-up is missed.
            self.gate.notified().await;
        }
    }

    /// Whether `t` is inside the window, and the window's start.
    #[inline]
    fn in_window(&self, t: u64) -> Option<u64> {
        let (start, end) = self.shared.window();
        (t >= start && t < end).then_some(start)
    }

    /// Whether a request scheduled at `sched` belongs to the window, taking
    /// a permit for it when `--requests` bounds the window's requests.
    /// `None`: the window's permits are used up, send nothing.
    #[inline]
    fn admit(&self, sched: u64) -> Option<bool> {
        if self.in_window(sched).is_none() {
            return Some(false);
        }
        let left = self.permits.get();
        if left == 0 {
            return None;
        }
        self.permits.set(left - 1);
        Some(true)
    }

    /// A request was sent at `sent` (due at `sched`) with `bytes` of it.
    #[inline]
    fn sent(&self, window: bool, bytes: u64) {
        if window {
            self.outstanding.set(self.outstanding.get() + 1);
            let mut s = self.stats.borrow_mut();
            s.requests.sent += 1;
            s.bytes_written += bytes;
        }
    }

    /// Count an error that lost no request (a failed connect, a reset or
    /// an answer nobody asked for on an idle connection), seen at `t`.
    fn stray_error(&self, kind: ErrorKind, t: u64) {
        let mut s = self.stats.borrow_mut();
        s.errors_whole_run.add(kind, 1);
        if let Some(start) = self.in_window(t) {
            s.errors.add(kind, 1);
            let i = ((t - start) / 1_000_000_000) as usize;
            if let Some(w) = s.windows_err.get_mut(i) {
                *w += 1;
            }
        }
        LiveCounters::bump(&self.live.errors, 1);
    }

    /// Request `f` was lost to `kind`, seen at `t`.
    fn lost(&self, f: &InFlight, kind: ErrorKind, t: u64) {
        let mut s = self.stats.borrow_mut();
        s.errors_whole_run.add(kind, 1);
        if f.window {
            s.requests.lost.add(kind, 1);
            s.errors.add(kind, 1);
            self.outstanding.set(self.outstanding.get() - 1);
        }
        if let Some(start) = self.in_window(t) {
            let i = ((t - start) / 1_000_000_000) as usize;
            if let Some(w) = s.windows_err.get_mut(i) {
                *w += 1;
            }
        }
        LiveCounters::bump(&self.live.errors, 1);
    }

    /// Request `f` on local connection `slot` was answered with `status`
    /// at `done`; `body` is the captured body when `f` is checked.
    #[inline]
    fn answered(
        &self,
        slot: usize,
        f: &InFlight,
        done: u64,
        status: u16,
        wire_bytes: u64,
        body: &[u8],
    ) {
        let ok = (200..300).contains(&status);
        let latency_ns = (done - f.sched).max(1);
        let latency_us = latency_ns / 1000;
        if ok {
            LiveCounters::bump(&self.live.ok, 1);
        }
        LiveCounters::bump(&self.live.latency_us, latency_us);
        LiveCounters::bump(&self.live.answers, 1);
        let mut s = self.stats.borrow_mut();
        let in_window = self.in_window(done);
        if let Some(start) = in_window {
            s.responses.add_status(status);
            s.served[slot] = true;
            if ok {
                let i = ((done - start) / 1_000_000_000) as usize;
                if let Some(w) = s.windows_ok.get_mut(i) {
                    *w += 1;
                }
                let i = ((done - start) / self.plan.fine_bin_ns) as usize;
                if let Some(b) = s.fine_ok.get_mut(i) {
                    *b += 1;
                }
            }
        }
        if f.window {
            self.outstanding.set(self.outstanding.get() - 1);
            s.requests.answered.add_status(status);
            s.response_bytes += wire_bytes;
            // By the second of the window the answer completed in (the
            // window's start read once above, not again).
            if let Some(start) = in_window {
                let i = ((done - start) / 1_000_000_000) as usize;
                if let Some(sum) = s.windows_latency_ns.get_mut(i) {
                    *sum += latency_ns;
                    s.windows_latency_n[i] += 1;
                }
            }
            // Nanoseconds, at least 1: the histogram's lowest value.
            s.hist.saturating_record(latency_ns);
            if self.plan.rate.is_some() {
                s.hist_uncorrected.saturating_record((done - f.sent).max(1));
            }
        }
        if let Some(check) = &f.check {
            // 2xx only: an error status is already counted as one.
            if ok {
                s.answers.checked += 1;
                if let Err(why) = contract::check_answer(check.0, &check.1, status, body) {
                    s.answers.wrong += 1;
                    s.answers.example.get_or_insert(why);
                }
            }
        }
    }

    fn opened(&self, slot: usize, first: bool, t: u64) {
        {
            let mut s = self.stats.borrow_mut();
            if first {
                s.first_connect_ns[slot] = t;
            } else {
                s.reconnects_whole_run += 1;
                if self.in_window(t).is_some() {
                    s.reconnects += 1;
                }
            }
        }
        let now = self.shared.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.shared.peak_open.fetch_max(now, Ordering::Relaxed);
    }

    fn closed(&self) {
        self.shared.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// A TLS handshake took `ns` and agreed what `conn` says.
    fn handshake_done(&self, ns: u64, conn: &rustls::ClientConnection) {
        let mut s = self.stats.borrow_mut();
        let _ = s.handshakes.record(ns.max(1));
        s.tls_agreed = Some((
            conn.protocol_version()
                .map_or_else(|| "?".into(), |v| format!("{v:?}")),
            conn.negotiated_cipher_suite()
                .map_or_else(|| "?".into(), |c| format!("{:?}", c.suite())),
            conn.alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
        ));
    }

    /// A TLS handshake failed at `t` with `why`.
    fn handshake_failed(&self, t: u64, why: String) {
        {
            let mut s = self.stats.borrow_mut();
            s.tls_failed += 1;
            s.tls_last_error = Some(why);
        }
        self.stray_error(ErrorKind::Tls, t);
    }
}

/// How often the timeout sweeper looks: `timeout`/20, from 1 ms to 50 ms.
pub fn sweep_period(timeout_ns: u64) -> Duration {
    Duration::from_nanos(timeout_ns / 20).clamp(Duration::from_millis(1), Duration::from_millis(50))
}

/// One connection's entry in the thread's timeout table.
#[derive(Debug)]
struct TimeoutSlot {
    deadline: u64,
    expired: bool,
    waker: Option<Waker>,
}

impl Default for TimeoutSlot {
    fn default() -> Self {
        Self {
            deadline: u64::MAX,
            expired: false,
            waker: None,
        }
    }
}

/// Resolves when the sweeper has found the connection's deadline passed.
struct TimeoutWatch<'a> {
    w: &'a Worker,
    slot: usize,
}

impl Future for TimeoutWatch<'_> {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut t = self.w.timeouts.borrow_mut();
        let s = &mut t[self.slot];
        if s.expired {
            return Poll::Ready(());
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnEnd {
    /// No more requests to send: the connection's work is done.
    Finished,
    /// The connection broke or was closed: open a new one.
    Reconnect,
}

/// A request in flight.
#[derive(Debug)]
struct InFlight {
    /// When it was due (fixed rate) or sent (closed loop), ns.
    sched: u64,
    /// When it was written, ns.
    sent: u64,
    /// It belongs to the window: its answer or loss is counted.
    window: bool,
    /// What it asked, when its answer is checked against the contract.
    check: Option<Box<(Scenario, contract::Request)>>,
}

/// One connection slot's requests in flight and its share of the window's
/// fixed-rate schedule, kept across reconnects.
#[derive(Debug)]
pub struct Book {
    /// Requests written and not yet answered or lost, oldest first.
    inflight: VecDeque<InFlight>,
    /// Fixed rate: the connection follows the window's schedule (origin:
    /// the window's start), no longer the warm-up's (origin: the gate).
    window_epoch: bool,
    /// Fixed rate: window requests this connection owes (due inside the
    /// window), known once it enters the window's schedule.
    window_due: u64,
    /// Window requests this connection has written.
    window_sent: u64,
}

impl Book {
    fn new(pipeline: usize) -> Self {
        Self {
            inflight: VecDeque::with_capacity(pipeline),
            window_epoch: false,
            window_due: 0,
            window_sent: 0,
        }
    }
}

/// One connection slot for the whole run: connect, drive, reconnect.
pub async fn connection(w: Rc<Worker>, global: usize, local: usize) {
    let plan = Arc::clone(&w.plan);
    let mut conn = ConnState {
        gen: RequestGen::new(
            plan.set.clone(),
            plan.seed ^ (global as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        ),
        rbuf: vec![0u8; READ_BUF],
        book: Rc::clone(&w.books[local]),
        k: 0,
        free_at: 0,
        sent_in_window: 0,
        global,
        local,
    };
    let mut established = false;
    let mut settled = false;
    let mut backoff = FIRST_BACKOFF;
    loop {
        if w.done(now_ns()) {
            return;
        }
        let permit = w
            .connect_sem
            .acquire()
            .await
            .expect("semaphore is never closed");
        let connected =
            tokio::time::timeout(plan.connect_timeout, TcpStream::connect(plan.addr)).await;
        let connected_at = now_ns();
        drop(permit);
        if !settled {
            settled = true;
            w.shared.settled.fetch_add(1, Ordering::Relaxed);
            w.wait_for_gate().await;
        }
        let stream = match connected {
            Ok(Ok(s)) => s,
            Ok(Err(_)) | Err(_) => {
                w.stray_error(ErrorKind::Connect, now_ns());
                back_off(&mut backoff).await;
                continue;
            }
        };
        // Requests are written whole; Nagle would only delay them.
        let _ = stream.set_nodelay(true);
        let http2 = plan.protocol.is_http2();
        let end = match &plan.tls {
            None if http2 => {
                backoff = FIRST_BACKOFF;
                conn.serve_h2(&w, stream, None, !established, connected_at)
                    .await
            }
            None => {
                backoff = FIRST_BACKOFF;
                conn.serve(&w, stream, None, !established, connected_at)
                    .await
            }
            Some(tls) => {
                // The connection counts as open once it can carry a
                // request: after its handshake. From here: the first
                // attempt waited for the gate above.
                let shake_start = now_ns();
                // Counted below TLS: wire bytes are the records.
                let socket = Rc::new(Traffic::default());
                let stream = Counted {
                    inner: stream,
                    traffic: Rc::clone(&socket),
                };
                let shaken = tokio::time::timeout(
                    plan.connect_timeout,
                    tokio_rustls::TlsConnector::from(Arc::clone(&tls.config))
                        .connect(tls.name.clone(), stream),
                )
                .await
                .map_err(|_| "the TLS handshake timed out".to_string())
                .and_then(|r| {
                    r.map_err(|e| {
                        let e = e.to_string();
                        if e.contains("NoApplicationProtocol") {
                            let asked: Vec<_> = tls
                                .config
                                .alpn_protocols
                                .iter()
                                .map(|p| String::from_utf8_lossy(p))
                                .collect();
                            format!(
                                "no protocol in common under ALPN ({} asked): {e}",
                                asked.join(", ")
                            )
                        } else {
                            e
                        }
                    })
                });
                let done_at = now_ns();
                let stream = match shaken {
                    Ok(s) => s,
                    Err(why) => {
                        w.handshake_failed(done_at, why);
                        back_off(&mut backoff).await;
                        continue;
                    }
                };
                // ALPN must agree the protocol asked: h2 is never silently
                // HTTP/1.1. (https takes a server that agreed nothing: TLS
                // without ALPN is HTTP/1.1.)
                if let Some(why) = alpn_refused(plan.protocol, stream.get_ref().1.alpn_protocol()) {
                    w.handshake_failed(done_at, why);
                    back_off(&mut backoff).await;
                    continue;
                }
                backoff = FIRST_BACKOFF;
                w.handshake_done(done_at.saturating_sub(shake_start), stream.get_ref().1);
                if http2 {
                    conn.serve_h2(&w, stream, Some(socket), !established, done_at)
                        .await
                } else {
                    conn.serve(&w, stream, Some(socket), !established, done_at)
                        .await
                }
            }
        };
        established = true;
        w.disarm_timeout(local);
        w.closed();
        if end == ConnEnd::Finished {
            return;
        }
    }
}

struct ConnState {
    gen: RequestGen,
    rbuf: Vec<u8>,
    /// Requests in flight and the window's share (shared with the worker).
    book: Rc<RefCell<Book>>,
    /// Fixed rate: index of this connection's next scheduled request on
    /// the current schedule (warm-up's, then the window's).
    k: u64,
    /// Fixed rate: when the connection last became able to send.
    free_at: u64,
    /// Window requests this connection sent (picks the checked ones).
    sent_in_window: u64,
    global: usize,
    local: usize,
}

/// Why a TLS connection that agreed `agreed` under ALPN cannot carry
/// `protocol`, if it cannot: h2 needs `h2`; https takes `http/1.1` or
/// nothing (no ALPN at all is HTTP/1.1).
fn alpn_refused(protocol: contract::Protocol, agreed: Option<&[u8]>) -> Option<String> {
    let want = protocol.alpn()?;
    let fits = match protocol {
        contract::Protocol::H2 => agreed == Some(want),
        _ => agreed.is_none_or(|a| a == want),
    };
    (!fits).then(|| {
        format!(
            "ALPN agreed {}, not {}",
            agreed.map_or_else(
                || "no protocol".to_string(),
                |p| String::from_utf8_lossy(p).into_owned()
            ),
            String::from_utf8_lossy(want)
        )
    })
}

/// Wait `backoff` after a failed attempt, then double it (up to
/// [`MAX_BACKOFF`]).
async fn back_off(backoff: &mut Duration) {
    tokio::time::sleep(*backoff).await;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
}

impl ConnState {
    /// Serve requests on `stream`, open since `at` (its first open when
    /// `first`), until it ends. `socket` counts the bytes under `stream`
    /// when it is TLS; on plain TCP the reads and writes are the wire.
    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        w: &Worker,
        stream: S,
        socket: Option<Rc<Traffic>>,
        first: bool,
        at: u64,
    ) -> ConnEnd {
        w.opened(self.local, first, at);
        self.free_at = now_ns();
        self.drive(w, stream, socket.as_deref().map(Marks::new))
            .await
    }

    /// Before a wait: put the oldest request's deadline in the thread's
    /// timeout table and return it, with the wait for the next request's
    /// due time `pace_deadline` (a wait that never ends when it is 0).
    #[inline]
    fn arm(&self, w: &Worker, pace_deadline: u64) -> (u64, impl Future<Output = ()> + 'static) {
        let deadline = self
            .book
            .borrow()
            .inflight
            .front()
            .map_or(u64::MAX, |f| f.sent + w.plan.timeout_ns);
        w.arm_timeout(self.local, deadline);
        let pacer = w.pacer.clone();
        let local = self.local;
        let pace = async move {
            match pacer {
                Some(p) if pace_deadline != 0 => p.until(local, pace_deadline).await,
                _ => std::future::pending::<()>().await,
            }
        };
        (deadline, pace)
    }

    /// Lose every request in flight to an error of `kind` at `t`.
    fn lose_inflight(&mut self, w: &Worker, kind: ErrorKind, t: u64) {
        loop {
            let f = self.book.borrow_mut().inflight.pop_front();
            match f {
                Some(f) => w.lost(&f, kind, t),
                None => break,
            }
        }
    }

    fn inflight_len(&self) -> usize {
        self.book.borrow().inflight.len()
    }

    fn push(&self, f: InFlight) {
        self.book.borrow_mut().inflight.push_back(f);
    }

    /// Fixed rate: when this connection's next request is due. Warm-up
    /// requests follow a schedule from the gate; once the window's start is
    /// known and reached (by the schedule or by the clock: a connection
    /// behind on its warm-up backlog drops it, since warm-up requests are
    /// not counted), the connection switches to the window's own schedule,
    /// whose origin is the window's start. So every request due inside the
    /// window is a window request, and a warm-up backlog can never push
    /// window requests out of sight.
    fn next_due(&mut self, w: &Worker, rate: f64, now: u64) -> u64 {
        let plan = &*w.plan;
        let (ws, we) = w.shared.window();
        let mut b = self.book.borrow_mut();
        if !b.window_epoch {
            let gate = w.shared.gate_ns.load(Ordering::Relaxed);
            let warm = intended_ns(gate, self.global, plan.connections, rate, self.k);
            if ws == u64::MAX || (warm < ws && now < ws) {
                return warm;
            }
            b.window_epoch = true;
            self.k = 0;
            b.window_due = if w.permits_bounded() {
                0
            } else {
                due_in(ws, we, self.global, plan.connections, rate)
            };
            if b.window_due == 0 {
                w.backlog_done();
            }
        }
        intended_ns(ws, self.global, plan.connections, rate, self.k)
    }

    /// A window request was written on this connection.
    fn wrote_window_request(&self, w: &Worker) {
        let mut b = self.book.borrow_mut();
        b.window_sent += 1;
        if b.window_epoch && b.window_sent == b.window_due {
            w.backlog_done();
        }
    }

    /// The in-flight record of the `i`-th request of the batch just
    /// generated, sent at `sent` and due at `sched`. After the window (in
    /// the drain) every answer is checked; inside it, one in
    /// [`CHECK_EVERY`].
    fn record(&mut self, w: &Worker, i: usize, sched: u64, sent: u64, window: bool) -> InFlight {
        let check = if window {
            self.sent_in_window += 1;
            self.sent_in_window % CHECK_EVERY == 1
        } else {
            sched >= w.shared.window_end_ns.load(Ordering::Relaxed)
        };
        InFlight {
            sched,
            sent,
            window,
            check: if check {
                self.gen.describe(i).map(Box::new)
            } else {
                None
            },
        }
    }

    async fn drive<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        w: &Worker,
        mut stream: S,
        mut socket: Option<Marks<'_>>,
    ) -> ConnEnd {
        let plan = &*w.plan;
        let head = plan.set.is_head();
        let mut parser = ResponseParser::new();
        let (mut start, mut end) = (0usize, 0usize);
        // Time of the last read, reused as the send time of a closed-loop
        // batch written right after it (saves a clock read per request; the
        // send time is then early by the parse time, so latency errs high
        // by well under a microsecond, never low).
        let mut read_at = 0u64;
        loop {
            // 1. Send what may be sent now.
            let mut pace_deadline = 0u64;
            match plan.rate {
                None => {
                    if self.inflight_len() == 0 {
                        let now = if read_at != 0 { read_at } else { now_ns() };
                        read_at = 0;
                        if w.done(now) {
                            return ConnEnd::Finished;
                        }
                        // A batch of `pipeline` requests, all in the window
                        // or all outside it; `--requests` may cut it short.
                        let (mut n, mut window) = (0, false);
                        while n < plan.pipeline {
                            match w.admit(now) {
                                Some(win) => (window, n) = (win, n + 1),
                                None => break,
                            }
                        }
                        if n == 0 {
                            return ConnEnd::Finished;
                        }
                        let len = self.gen.next(n).len() as u64;
                        for i in 0..n {
                            let f = self.record(w, i, now, now, window);
                            let bytes = if i == 0 && socket.is_none() { len } else { 0 };
                            w.sent(window, bytes);
                            if window {
                                self.wrote_window_request(w);
                            }
                            self.push(f);
                        }
                        if write_flushed(&mut stream, self.gen.current())
                            .await
                            .is_err()
                        {
                            self.lose_inflight(w, ErrorKind::Write, now_ns());
                            return ConnEnd::Reconnect;
                        }
                        if let Some(n) = socket.as_mut().map(Marks::written) {
                            if window {
                                w.stats.borrow_mut().bytes_written += n;
                            }
                        }
                    }
                }
                Some(rate) => {
                    while self.inflight_len() < plan.pipeline {
                        let now = now_ns();
                        if w.done(now) {
                            if self.inflight_len() == 0 {
                                return ConnEnd::Finished;
                            }
                            break;
                        }
                        let intended = self.next_due(w, rate, now);
                        if now < intended {
                            if self.inflight_len() == 0 {
                                let pacer = w.pacer.as_ref().expect("fixed rate has a pacer");
                                pacer.until(self.local, intended).await;
                                continue;
                            }
                            pace_deadline = intended;
                            break;
                        }
                        let Some(window) = w.admit(intended) else {
                            if self.inflight_len() == 0 {
                                return ConnEnd::Finished;
                            }
                            break;
                        };
                        self.k += 1;
                        let len = self.gen.next(1).len() as u64;
                        let f = self.record(w, 0, intended, now, window);
                        w.sent(window, if socket.is_none() { len } else { 0 });
                        if window {
                            self.wrote_window_request(w);
                            let mut s = w.stats.borrow_mut();
                            let lag = now.saturating_sub(intended.max(self.free_at));
                            s.max_lag_ns = s.max_lag_ns.max(lag);
                        }
                        self.push(f);
                        if write_flushed(&mut stream, self.gen.current())
                            .await
                            .is_err()
                        {
                            self.lose_inflight(w, ErrorKind::Write, now_ns());
                            return ConnEnd::Reconnect;
                        }
                        if let Some(n) = socket.as_mut().map(Marks::written) {
                            if window {
                                w.stats.borrow_mut().bytes_written += n;
                            }
                        }
                    }
                }
            }

            // 2. Wait for bytes, a pacing deadline, or a timeout.
            if end == self.rbuf.len() {
                if start > 0 {
                    self.rbuf.copy_within(start..end, 0);
                    end -= start;
                    start = 0;
                } else if self.rbuf.len() < MAX_HEAD {
                    let grown = (self.rbuf.len() * 2).min(MAX_HEAD);
                    self.rbuf.resize(grown, 0);
                } else {
                    self.lose_inflight(w, ErrorKind::Parse, now_ns());
                    return ConnEnd::Reconnect;
                }
            }
            let (deadline, pace) = self.arm(w, pace_deadline);
            let read = tokio::select! {
                biased;
                r = stream.read(&mut self.rbuf[end..]) => r,
                () = TimeoutWatch { w, slot: self.local } => {
                    let now = now_ns();
                    if now >= deadline {
                        self.lose_inflight(w, ErrorKind::Timeout, now);
                        w.disarm_timeout(self.local);
                        return ConnEnd::Reconnect;
                    }
                    continue;
                }
                () = pace => continue,
            };
            let now = now_ns();
            read_at = now;
            match read {
                Ok(0) => {
                    if let Some((status, bytes)) = parser.finish_on_close() {
                        self.complete(w, &parser, status, bytes, now);
                    }
                    // Closing an idle connection is allowed; closing on
                    // outstanding requests loses them.
                    self.lose_inflight(w, ErrorKind::Read, now);
                    return ConnEnd::Reconnect;
                }
                Ok(n) => {
                    end += n;
                    let wire = match &mut socket {
                        Some(m) => m.read(),
                        None => n as u64,
                    };
                    if w.in_window(now).is_some() {
                        w.stats.borrow_mut().bytes_read += wire;
                    }
                }
                Err(_) => {
                    if self.inflight_len() == 0 {
                        w.stray_error(ErrorKind::Read, now);
                    }
                    self.lose_inflight(w, ErrorKind::Read, now);
                    return ConnEnd::Reconnect;
                }
            }

            // 3. Frame every complete response in the buffer.
            loop {
                if !parser.in_progress() {
                    let checked = self
                        .book
                        .borrow()
                        .inflight
                        .front()
                        .is_some_and(|f| f.check.is_some());
                    parser.capture_next(checked);
                }
                match parser.feed(&self.rbuf[start..end], head) {
                    Ok(Parsed::Complete {
                        used,
                        status,
                        wire_bytes,
                        close,
                    }) => {
                        start += used;
                        if self.inflight_len() == 0 {
                            // An answer nobody asked for.
                            w.stray_error(ErrorKind::Parse, now);
                            return ConnEnd::Reconnect;
                        }
                        let wire_bytes = match &mut socket {
                            Some(m) => m.answered(),
                            None => wire_bytes,
                        };
                        self.complete(w, &parser, status, wire_bytes, now);
                        if close {
                            self.lose_inflight(w, ErrorKind::Read, now);
                            return ConnEnd::Reconnect;
                        }
                    }
                    Ok(Parsed::NeedMore { used }) => {
                        start += used;
                        break;
                    }
                    Err(_) => {
                        self.lose_inflight(w, ErrorKind::Parse, now);
                        return ConnEnd::Reconnect;
                    }
                }
            }
            if start == end {
                start = 0;
                end = 0;
            }
        }
    }

    #[inline]
    fn complete(&mut self, w: &Worker, parser: &ResponseParser, status: u16, wire: u64, now: u64) {
        let f = self.book.borrow_mut().inflight.pop_front();
        #[cfg(test)]
        if w.plan.drop_one_record && f.as_ref().is_some_and(|f| f.window) && !w.dropped.get() {
            // The bug this simulates: a record leaves the queue uncounted.
            w.dropped.set(true);
            return;
        }
        if let Some(f) = f {
            w.answered(self.local, &f, now, status, wire, parser.body());
            self.free_at = now;
        }
    }
}

/// Write `bytes` and flush them. On plain TCP the flush is free; over TLS it
/// is what sends the records: tokio-rustls returns from a write once the
/// socket reads as not ready (a full send buffer, or the task's cooperative
/// budget used up), leaving the request in its buffer until a flush, so a
/// connection would wait for an answer to a request it never sent.
async fn write_flushed<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}
