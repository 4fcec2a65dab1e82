//! One worker thread's state and one connection's state machine: the hot path.
//!
//! Owns: connecting (bounded in time and in connects in flight), writing
//! pre-serialized requests, framing responses out of a reused buffer,
//! timeouts, reconnects, and per-thread counting. Per request there is no
//! allocation, no lock, no channel and no atomic read-modify-write: counters
//! live in the thread's `RefCell`, the histograms are per thread, and the
//! live progress counters are plain stores to a cache line only this thread
//! writes.
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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::histogram::new_histogram;
use super::limits::now_ns;
use super::open::{intended_ns, Pacer};
use super::parse::{Parsed, ResponseParser};
use super::report::{ErrorCounts, ErrorKind};
use super::request::{RequestGen, RequestSet};

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

/// The run's parameters, shared read-only by every thread.
#[derive(Debug)]
pub struct LoadPlan {
    /// Server address.
    pub addr: SocketAddr,
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
    /// Start of measurement (end of warmup).
    pub measure_start_ns: u64,
    /// End of measurement and of the run.
    pub measure_end_ns: u64,
    /// Per-request timeout, ns.
    pub timeout_ns: u64,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Seed for per-connection randomness.
    pub seed: u64,
}

/// Counters shared by all threads, touched only on connect and close.
#[derive(Debug, Default)]
pub struct Shared {
    /// Connections open right now.
    pub open: AtomicU64,
    /// Most connections open at once.
    pub peak_open: AtomicU64,
    /// Connection slots whose first connect attempt has ended (either way).
    pub settled: AtomicU64,
}

/// Live counters for `--progress`, written by one worker thread only.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct LiveCounters {
    /// 2xx responses so far (whole run).
    pub ok: AtomicU64,
    /// Errors so far (whole run).
    pub errors: AtomicU64,
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
    /// Measured responses by `status / 100` (index 0: outside 100-599).
    pub status: [u64; 6],
    /// Errors in the measured period.
    pub errors: ErrorCounts,
    /// Errors over the whole run.
    pub errors_whole_run: ErrorCounts,
    /// Bytes read in the measured period.
    pub bytes_read: u64,
    /// Bytes written in the measured period.
    pub bytes_written: u64,
    /// Wire bytes of measured responses.
    pub response_bytes: u64,
    /// Connection slots established at least once.
    pub established: u64,
    /// Re-established connections.
    pub reconnects: u64,
    /// 2xx per second of the measured period.
    pub windows_ok: Vec<u64>,
    /// Errors per second of the measured period.
    pub windows_err: Vec<u64>,
    /// Latency (µs) from the scheduled time.
    pub hist: Histogram<u64>,
    /// Fixed rate: latency (µs) from the actual send time.
    pub hist_uncorrected: Histogram<u64>,
    /// Fixed rate: largest loader-caused send delay, ns.
    pub max_lag_ns: u64,
    /// When this thread's connections all finished (ns), if before the end.
    pub finished_ns: Option<u64>,
}

impl ThreadStats {
    /// Empty stats with `windows` one-second windows.
    pub fn new(windows: usize) -> Self {
        Self {
            status: [0; 6],
            errors: ErrorCounts::default(),
            errors_whole_run: ErrorCounts::default(),
            bytes_read: 0,
            bytes_written: 0,
            response_bytes: 0,
            established: 0,
            reconnects: 0,
            windows_ok: vec![0; windows],
            windows_err: vec![0; windows],
            hist: new_histogram(),
            hist_uncorrected: new_histogram(),
            max_lag_ns: 0,
            finished_ns: None,
        }
    }
}

/// One worker thread: its share of the plan, counters and pacer.
pub struct Worker {
    /// The run's parameters.
    pub plan: Arc<LoadPlan>,
    /// This thread's counters.
    pub stats: RefCell<ThreadStats>,
    /// Measured requests this thread may still send (`--requests`).
    pub permits: Cell<u64>,
    /// Progress counters.
    pub live: Arc<LiveCounters>,
    /// Cross-thread connection counters.
    pub shared: Arc<Shared>,
    /// Bounds connects in flight.
    pub connect_sem: tokio::sync::Semaphore,
    /// Fixed-rate pacer (None in closed loop).
    pub pacer: Option<Rc<Pacer>>,
    /// Per local connection: deadline of its oldest request in flight.
    timeouts: RefCell<Vec<TimeoutSlot>>,
    /// The start gate is open: connections may send.
    gate_open: Cell<bool>,
    gate: tokio::sync::Notify,
    base_instant: tokio::time::Instant,
    base_ns: u64,
}

impl Worker {
    /// A worker for `local_connections` connections; call inside a runtime.
    pub fn new(
        plan: Arc<LoadPlan>,
        local_connections: usize,
        permits: u64,
        live: Arc<LiveCounters>,
        shared: Arc<Shared>,
    ) -> std::io::Result<Self> {
        let pacer = match plan.rate {
            Some(_) => Some(Pacer::new(local_connections)?),
            None => None,
        };
        let windows =
            (plan.measure_end_ns - plan.measure_start_ns).div_ceil(1_000_000_000) as usize;
        Ok(Self {
            stats: RefCell::new(ThreadStats::new(windows.max(1))),
            permits: Cell::new(permits),
            live,
            shared,
            connect_sem: tokio::sync::Semaphore::new(CONNECTS_IN_FLIGHT),
            pacer,
            timeouts: RefCell::new(
                (0..local_connections)
                    .map(|_| TimeoutSlot::default())
                    .collect(),
            ),
            gate_open: Cell::new(false),
            gate: tokio::sync::Notify::new(),
            base_instant: tokio::time::Instant::now(),
            base_ns: now_ns(),
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
    /// per thread polls the shared count every millisecond.
    pub async fn gate_keeper(self: Rc<Self>) {
        let patience = (self.plan.connect_timeout.as_nanos() as u64)
            .max(self.plan.measure_start_ns - self.plan.start_ns);
        let deadline = self.plan.start_ns + patience;
        loop {
            let settled = self.shared.settled.load(Ordering::Relaxed);
            if settled >= self.plan.connections as u64 || now_ns() >= deadline {
                self.gate_open.set(true);
                self.gate.notify_waiters();
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
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
        let period = Duration::from_nanos(self.plan.timeout_ns / 20)
            .clamp(Duration::from_millis(1), Duration::from_millis(50));
        let mut tick = tokio::time::interval(period);
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

    #[inline]
    fn measuring(&self, t: u64) -> bool {
        t >= self.plan.measure_start_ns && t < self.plan.measure_end_ns
    }

    /// Take up to `want` permits for requests scheduled at `sched`; requests
    /// scheduled before measurement (warmup) are free.
    #[inline]
    fn take_permits(&self, want: usize, sched: u64) -> usize {
        if sched < self.plan.measure_start_ns {
            return want;
        }
        let left = self.permits.get();
        let n = left.min(want as u64);
        self.permits.set(left - n);
        n as usize
    }

    /// Count `n` errors of `kind` that happened at `t`.
    #[inline]
    pub fn error(&self, kind: ErrorKind, n: u64, t: u64) {
        if n == 0 {
            return;
        }
        let mut s = self.stats.borrow_mut();
        s.errors_whole_run.add(kind, n);
        if self.measuring(t) {
            s.errors.add(kind, n);
            let i = ((t - self.plan.measure_start_ns) / 1_000_000_000) as usize;
            if let Some(w) = s.windows_err.get_mut(i) {
                *w += n;
            }
        }
        LiveCounters::bump(&self.live.errors, n);
    }

    #[inline]
    fn response(&self, sched: u64, sent: u64, done: u64, status: u16, wire_bytes: u64) {
        let ok = (200..300).contains(&status);
        if ok {
            LiveCounters::bump(&self.live.ok, 1);
        }
        if !self.measuring(sched) || done >= self.plan.measure_end_ns {
            return;
        }
        let mut s = self.stats.borrow_mut();
        let class = if (100..600).contains(&status) {
            status as usize / 100
        } else {
            0
        };
        s.status[class] += 1;
        s.response_bytes += wire_bytes;
        if ok {
            let i = ((done - self.plan.measure_start_ns) / 1_000_000_000) as usize;
            if let Some(w) = s.windows_ok.get_mut(i) {
                *w += 1;
            }
        }
        // Microseconds, at least 1: the histogram's lowest value.
        s.hist.saturating_record(((done - sched) / 1000).max(1));
        if self.plan.rate.is_some() {
            s.hist_uncorrected
                .saturating_record(((done - sent) / 1000).max(1));
        }
    }

    fn opened(&self, first: bool) {
        {
            let mut s = self.stats.borrow_mut();
            if first {
                s.established += 1;
            } else {
                s.reconnects += 1;
            }
        }
        let now = self.shared.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.shared.peak_open.fetch_max(now, Ordering::Relaxed);
    }

    fn closed(&self) {
        self.shared.open.fetch_sub(1, Ordering::Relaxed);
    }
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

/// A request in flight: when it was scheduled and when it was written.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    sched: u64,
    sent: u64,
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
        inflight: VecDeque::with_capacity(plan.pipeline),
        k: 0,
        free_at: 0,
        global,
        local,
    };
    let mut established = false;
    let mut settled = false;
    let mut backoff = FIRST_BACKOFF;
    loop {
        let permit = w
            .connect_sem
            .acquire()
            .await
            .expect("semaphore is never closed");
        let connected =
            tokio::time::timeout(plan.connect_timeout, TcpStream::connect(plan.addr)).await;
        drop(permit);
        if !settled {
            settled = true;
            w.shared.settled.fetch_add(1, Ordering::Relaxed);
            w.wait_for_gate().await;
        }
        let stream = match connected {
            Ok(Ok(s)) => s,
            Ok(Err(_)) | Err(_) => {
                w.error(ErrorKind::Connect, 1, now_ns());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = FIRST_BACKOFF;
        // Requests are written whole; Nagle would only delay them.
        let _ = stream.set_nodelay(true);
        w.opened(!established);
        established = true;
        conn.free_at = now_ns();
        let outcome = conn.drive(&w, stream).await;
        w.disarm_timeout(local);
        w.closed();
        if outcome == ConnEnd::Finished {
            return;
        }
    }
}

struct ConnState {
    gen: RequestGen,
    rbuf: Vec<u8>,
    inflight: VecDeque<InFlight>,
    /// Fixed rate: index of this connection's next scheduled request.
    k: u64,
    /// Fixed rate: when the connection last became able to send.
    free_at: u64,
    global: usize,
    local: usize,
}

impl ConnState {
    /// Lose every request in flight to an error of `kind` at `t`.
    fn lose_inflight(&mut self, w: &Worker, kind: ErrorKind, t: u64) {
        w.error(kind, self.inflight.len() as u64, t);
        self.inflight.clear();
    }

    async fn drive(&mut self, w: &Worker, mut stream: TcpStream) -> ConnEnd {
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
                    if self.inflight.is_empty() {
                        let now = if read_at != 0 { read_at } else { now_ns() };
                        read_at = 0;
                        if now >= plan.measure_end_ns {
                            // The run is over: nothing sent now could count.
                            return ConnEnd::Finished;
                        }
                        let n = w.take_permits(plan.pipeline, now);
                        if n == 0 {
                            return ConnEnd::Finished;
                        }
                        let bytes = self.gen.next(n);
                        let len = bytes.len() as u64;
                        if stream.write_all(bytes).await.is_err() {
                            w.error(ErrorKind::Write, n as u64, now_ns());
                            return ConnEnd::Reconnect;
                        }
                        if w.measuring(now) {
                            w.stats.borrow_mut().bytes_written += len;
                        }
                        for _ in 0..n {
                            self.inflight.push_back(InFlight {
                                sched: now,
                                sent: now,
                            });
                        }
                    }
                }
                Some(rate) => {
                    while self.inflight.len() < plan.pipeline {
                        let intended =
                            intended_ns(plan.start_ns, self.global, plan.connections, rate, self.k);
                        if intended >= plan.measure_end_ns {
                            if self.inflight.is_empty() {
                                return ConnEnd::Finished;
                            }
                            break;
                        }
                        let now = now_ns();
                        if now < intended {
                            if self.inflight.is_empty() {
                                let pacer = w.pacer.as_ref().expect("fixed rate has a pacer");
                                pacer.until(self.local, intended).await;
                                continue;
                            }
                            pace_deadline = intended;
                            break;
                        }
                        if w.take_permits(1, intended) == 0 {
                            if self.inflight.is_empty() {
                                return ConnEnd::Finished;
                            }
                            break;
                        }
                        self.k += 1;
                        let bytes = self.gen.next(1);
                        let len = bytes.len() as u64;
                        if stream.write_all(bytes).await.is_err() {
                            let t = now_ns();
                            w.error(ErrorKind::Write, 1, t);
                            self.lose_inflight(w, ErrorKind::Write, t);
                            return ConnEnd::Reconnect;
                        }
                        if w.measuring(intended) {
                            let mut s = w.stats.borrow_mut();
                            s.bytes_written += len;
                            let lag = now.saturating_sub(intended.max(self.free_at));
                            s.max_lag_ns = s.max_lag_ns.max(lag);
                        }
                        self.inflight.push_back(InFlight {
                            sched: intended,
                            sent: now,
                        });
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
            let deadline = self
                .inflight
                .front()
                .map_or(u64::MAX, |f| f.sent + plan.timeout_ns);
            w.arm_timeout(self.local, deadline);
            let pacer = w.pacer.clone();
            let local = self.local;
            let pace = async move {
                match pacer {
                    Some(p) if pace_deadline != 0 => p.until(local, pace_deadline).await,
                    _ => std::future::pending::<()>().await,
                }
            };
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
                        self.complete(w, status, bytes, now);
                    }
                    // Closing an idle connection is allowed; closing on
                    // outstanding requests loses them.
                    self.lose_inflight(w, ErrorKind::Read, now);
                    return ConnEnd::Reconnect;
                }
                Ok(n) => {
                    end += n;
                    if w.measuring(now) {
                        w.stats.borrow_mut().bytes_read += n as u64;
                    }
                }
                Err(_) => {
                    if self.inflight.is_empty() {
                        w.error(ErrorKind::Read, 1, now);
                    }
                    self.lose_inflight(w, ErrorKind::Read, now);
                    return ConnEnd::Reconnect;
                }
            }

            // 3. Frame every complete response in the buffer.
            loop {
                match parser.feed(&self.rbuf[start..end], head) {
                    Ok(Parsed::Complete {
                        used,
                        status,
                        wire_bytes,
                        close,
                    }) => {
                        start += used;
                        if self.inflight.is_empty() {
                            // An answer nobody asked for.
                            w.error(ErrorKind::Parse, 1, now);
                            return ConnEnd::Reconnect;
                        }
                        self.complete(w, status, wire_bytes, now);
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
                        if self.inflight.is_empty() {
                            w.error(ErrorKind::Parse, 1, now);
                        }
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
    fn complete(&mut self, w: &Worker, status: u16, wire_bytes: u64, now: u64) {
        if let Some(f) = self.inflight.pop_front() {
            w.response(f.sched, f.sent, now, status, wire_bytes);
            self.free_at = now;
        }
    }
}
