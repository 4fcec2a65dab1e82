//! Accounting and timeouts: the book every driver reports to.
//!
//! A [`Worker`] is one thread's share of the run. Its accounting API, the
//! same for every wire protocol:
//! - [`Worker::admit`]: may a request scheduled now be sent, and does it
//!   belong to the window (`--requests` may say no more);
//! - [`Worker::sent`]: it was written (its [`InFlight`] record goes on the
//!   connection's [`Book`], oldest first);
//! - [`Worker::answered`]: an answer came for it (its latency, the
//!   per-second series, and the answer's check against the contract);
//! - [`Worker::lost`]: it will get no answer (a timeout, a broken
//!   connection, an unparsable answer), by kind; [`Worker::stray_error`]:
//!   an error that lost no request;
//! - [`Worker::settle_accounts`]: at the end, what is still in flight is a
//!   timeout or "in flight when the drain ended", and at a fixed rate what
//!   was due and never sent is unsent.
//!
//! Timeouts: a connection stores the deadline of its oldest request in
//! flight in its slot of the thread's table ([`Worker::arm_timeout`]); the
//! sweeper ([`Worker::timeout_sweeper`]) wakes it through a
//! [`TimeoutWatch`].

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::super::open::{due_in, Pacer};
use super::super::report::{ErrorKind, StatusCounts};
use super::{LiveCounters, LoadPlan, Shared, ThreadStats, CONNECTS_IN_FLIGHT, DONE_POLL};
use crate::contract::{self, Scenario};
use crate::host::clock::now_ns;

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
    pub(super) permits_total: u64,
    /// Global index of each local connection.
    pub(super) globals: Vec<usize>,
    /// Progress counters.
    pub live: Arc<LiveCounters>,
    /// Cross-thread counters and the run's phases.
    pub shared: Arc<Shared>,
    /// Bounds connects in flight.
    pub connect_sem: tokio::sync::Semaphore,
    /// Fixed-rate pacer (None in closed loop).
    pub pacer: Option<Rc<Pacer>>,
    /// Window requests of this thread sent and not answered or lost yet.
    pub(super) outstanding: Cell<u64>,
    /// Fixed rate: local connections that still owe window requests (due
    /// inside the window, not written yet). The thread does not stop early
    /// while one does, so a backlog is sent (or counted unsent) in the drain.
    pub(super) backlog: Cell<u64>,
    /// Per local connection: its requests in flight and its share of the
    /// window's schedule. Shared with the connection's task so the end of
    /// the run can count what is still in flight from the queues themselves.
    pub(super) books: Vec<Rc<RefCell<Book>>>,
    /// Per local connection: deadline of its oldest request in flight.
    pub(super) timeouts: RefCell<Vec<TimeoutSlot>>,
    /// The start gate is open: connections may send.
    pub(super) gate_open: Cell<bool>,
    pub(super) gate: tokio::sync::Notify,
    pub(super) base_instant: tokio::time::Instant,
    pub(super) base_ns: u64,
    /// Fault injection done (tests only).
    #[cfg(test)]
    pub(super) dropped: Cell<bool>,
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
                super::super::bursts::bins(plan.duration_ns),
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
    pub(super) fn done(&self, now: u64) -> bool {
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
    pub(super) fn permits_bounded(&self) -> bool {
        self.permits_total != u64::MAX
    }

    /// Global index of local connection `local` (connection i belongs to
    /// thread i mod T, see `load::run`).
    pub(super) fn global_of(&self, local: usize) -> usize {
        self.globals[local]
    }

    /// Connection `local` no longer owes window requests.
    pub(super) fn backlog_done(&self) {
        self.backlog.set(self.backlog.get().saturating_sub(1));
    }

    /// Set the timeout deadline of local connection `slot` (`u64::MAX`:
    /// nothing in flight).
    #[inline]
    pub(super) fn arm_timeout(&self, slot: usize, deadline: u64) {
        let mut t = self.timeouts.borrow_mut();
        let s = &mut t[slot];
        if s.deadline != deadline {
            s.deadline = deadline;
            s.expired = false;
        }
    }

    pub(super) fn disarm_timeout(&self, slot: usize) {
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

    pub(super) async fn wait_for_gate(&self) {
        if !self.gate_open.get() {
            // Single-threaded: the keeper cannot run between this check and
            // the first poll of `notified`, so no wake-up is missed.
            self.gate.notified().await;
        }
    }

    /// Whether `t` is inside the window, and the window's start.
    #[inline]
    pub(super) fn in_window(&self, t: u64) -> Option<u64> {
        let (start, end) = self.shared.window();
        (t >= start && t < end).then_some(start)
    }

    /// Whether a request scheduled at `sched` belongs to the window, taking
    /// a permit for it when `--requests` bounds the window's requests.
    /// `None`: the window's permits are used up, send nothing.
    #[inline]
    pub(super) fn admit(&self, sched: u64) -> Option<bool> {
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

    /// Closed loop: admits a batch of up to `depth` requests sent at
    /// `now`, all in the window or all outside it (`--requests` may cut it
    /// short): how many, and whether they are the window's.
    #[inline]
    pub(super) fn admit_batch(&self, now: u64, depth: usize) -> (usize, bool) {
        let (mut n, mut window) = (0, false);
        while n < depth {
            match self.admit(now) {
                Some(win) => (window, n) = (win, n + 1),
                None => break,
            }
        }
        (n, window)
    }

    /// A request was sent at `sent` (due at `sched`) with `bytes` of it.
    #[inline]
    pub(super) fn sent(&self, window: bool, bytes: u64) {
        if window {
            self.outstanding.set(self.outstanding.get() + 1);
            let mut s = self.stats.borrow_mut();
            s.requests.sent += 1;
            s.bytes_written += bytes;
        }
    }

    /// Count an error that lost no request (a failed connect, a reset or
    /// an answer nobody asked for on an idle connection), seen at `t`.
    pub(super) fn stray_error(&self, kind: ErrorKind, t: u64) {
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
    pub(super) fn lost(&self, f: &InFlight, kind: ErrorKind, t: u64) {
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
    pub(super) fn answered(
        &self,
        slot: usize,
        f: &InFlight,
        done: u64,
        status: u16,
        wire_bytes: u64,
        body: &[u8],
    ) {
        self.settled(slot, f, done, Outcome::Http { status, body }, wire_bytes);
    }

    /// Request (or message) `f` on local connection `slot` got its answer
    /// at `done`: what the answer was is the driver's to say ([`Outcome`]),
    /// everything counted of it is here.
    #[inline]
    pub(super) fn settled(
        &self,
        slot: usize,
        f: &InFlight,
        done: u64,
        outcome: Outcome<'_>,
        wire_bytes: u64,
    ) {
        // A gRPC call answered OK counts only when its message is right:
        // every one is checked (the driver checks every call).
        let wrong_rpc = match outcome {
            Outcome::Rpc { body, .. } if outcome.ok() => f
                .check
                .as_ref()
                .and_then(|c| contract::check_answer(c.0, &c.1, 200, body).err()),
            _ => None,
        };
        let ok = outcome.ok() && wrong_rpc.is_none();
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
            outcome.count(ok, &mut s.responses);
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
            outcome.count(ok, &mut s.requests.answered);
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
        match outcome {
            Outcome::Http { status, body } => {
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
            Outcome::Rpc { .. } => {
                // A wrong reply is only ever found on a call answered OK.
                if f.check.is_some() && outcome.ok() {
                    s.answers.checked += 1;
                }
                if let Some(why) = wrong_rpc {
                    s.answers.wrong += 1;
                    s.answers.example.get_or_insert(why);
                }
            }
            // Every echo is compared with its message as it arrives.
            Outcome::Echo { wrong } => {
                s.answers.checked += 1;
                if let Some(why) = wrong {
                    s.answers.wrong += 1;
                    s.answers.example.get_or_insert_with(|| why.to_string());
                }
            }
        }
    }

    pub(super) fn opened(&self, slot: usize, first: bool, t: u64) {
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

    pub(super) fn closed(&self) {
        self.shared.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// A TLS handshake took `ns` and agreed what `conn` says.
    pub(super) fn handshake_done(&self, ns: u64, conn: &rustls::ClientConnection) {
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

    /// A WebSocket upgrade was refused or answered wrong at `t`: a wrong
    /// answer (to the upgrade request), named, and a parse error.
    pub(super) fn upgrade_failed(&self, t: u64, why: String) {
        {
            let mut s = self.stats.borrow_mut();
            s.answers.checked += 1;
            s.answers.wrong += 1;
            s.answers.example.get_or_insert(why);
        }
        self.stray_error(ErrorKind::Parse, t);
    }

    /// A TLS handshake failed at `t` with `why`.
    pub(super) fn handshake_failed(&self, t: u64, why: String) {
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
pub(super) struct TimeoutSlot {
    pub(super) deadline: u64,
    pub(super) expired: bool,
    pub(super) waker: Option<Waker>,
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
pub(super) struct TimeoutWatch<'a> {
    pub(super) w: &'a Worker,
    pub(super) slot: usize,
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
pub(super) enum ConnEnd {
    /// No more requests to send: the connection's work is done.
    Finished,
    /// The connection broke or was closed: open a new one.
    Reconnect,
}

/// A request in flight.
#[derive(Debug)]
pub(super) struct InFlight {
    /// When it was due (fixed rate) or sent (closed loop), ns.
    pub(super) sched: u64,
    /// When it was written, ns.
    pub(super) sent: u64,
    /// It belongs to the window: its answer or loss is counted.
    pub(super) window: bool,
    /// What it asked, when its answer is checked against the contract.
    pub(super) check: Option<Box<(Scenario, contract::Request)>>,
}

/// One connection slot's requests in flight and its share of the window's
/// fixed-rate schedule, kept across reconnects.
#[derive(Debug)]
pub struct Book {
    /// Requests written and not yet answered or lost, oldest first.
    pub(super) inflight: VecDeque<InFlight>,
    /// Fixed rate: the connection follows the window's schedule (origin:
    /// the window's start), no longer the warm-up's (origin: the gate).
    pub(super) window_epoch: bool,
    /// Fixed rate: window requests this connection owes (due inside the
    /// window), known once it enters the window's schedule.
    pub(super) window_due: u64,
    /// Window requests this connection has written.
    pub(super) window_sent: u64,
}

impl Book {
    pub(super) fn new(pipeline: usize) -> Self {
        Self {
            inflight: VecDeque::with_capacity(pipeline),
            window_epoch: false,
            window_due: 0,
            window_sent: 0,
        }
    }
}

/// What an answer was, as its driver judged it: the one place a protocol
/// says what "ok" means. Throughput, the gates and the reports read only
/// the counts this makes (`StatusCounts`: ok answers in `status_2xx`,
/// answers that failed in the other classes).
#[derive(Debug, Clone, Copy)]
pub(super) enum Outcome<'a> {
    /// An HTTP response: ok when 2xx; `body` is the captured body of a
    /// checked answer (empty otherwise), checked against the contract.
    Http { status: u16, body: &'a [u8] },
    /// A WebSocket echo: ok when it is the message sent, byte for byte;
    /// otherwise `wrong` says how it differed.
    Echo { wrong: Option<&'a str> },
    /// A gRPC call's answer: ok when its HTTP status is 200, its
    /// `grpc-status` 0 and its message the contract's (every one is
    /// checked, `body` its length-prefixed messages). A call answered with
    /// another `grpc-status` (or none) is an error answer, counted outside
    /// every HTTP class; one answered OK with a wrong message is a wrong
    /// answer.
    Rpc {
        status: u16,
        grpc_status: Option<u32>,
        body: &'a [u8],
    },
}

impl Outcome<'_> {
    #[inline]
    fn ok(&self) -> bool {
        match self {
            Outcome::Http { status, .. } => (200..300).contains(status),
            Outcome::Echo { wrong } => wrong.is_none(),
            Outcome::Rpc {
                status,
                grpc_status,
                ..
            } => *status == 200 && *grpc_status == Some(crate::contract::grpc::OK),
        }
    }

    /// Counts the answer in `counts`: HTTP by its status class; an echo or
    /// a gRPC answer as ok (`ok`), or as an answer outside every HTTP class.
    #[inline]
    fn count(&self, ok: bool, counts: &mut StatusCounts) {
        match self {
            Outcome::Http { status, .. } => counts.add_status(*status),
            Outcome::Echo { .. } | Outcome::Rpc { .. } if ok => counts.status_2xx += 1,
            Outcome::Echo { .. } | Outcome::Rpc { .. } => counts.status_other += 1,
        }
    }
}
