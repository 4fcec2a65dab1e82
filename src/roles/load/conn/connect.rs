//! One connection slot for the whole run: connect (bounded in time and in
//! connects in flight), TLS and ALPN, reconnect with back-off, and the
//! choice of a driver, once per connection, by the run's protocol.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::super::open::{due_in, intended_ns};
use super::super::report::ErrorKind;
use super::super::request::{RequestGen, RequestSet};
use super::{
    Book, ConnEnd, Counted, InFlight, Traffic, Worker, CHECK_EVERY, FIRST_BACKOFF, MAX_BACKOFF,
    READ_BUF,
};
use crate::contract;
use crate::host::clock::now_ns;

/// The driver a connection speaks its protocol with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Driver {
    /// HTTP/1.1, plain or over TLS ([`super::http1`]).
    Http1,
    /// HTTP/2, h2c or over TLS ([`super::h2`]).
    H2,
    /// WebSocket messages after an HTTP/1.1 upgrade, plain or over TLS
    /// ([`super::ws`]).
    Ws,
}

impl Driver {
    /// The driver of a run: WebSocket for a WebSocket scenario, else the
    /// protocol's.
    fn of(protocol: contract::Protocol, set: &RequestSet) -> Self {
        if matches!(set, RequestSet::Ws { .. }) {
            Driver::Ws
        } else if protocol.is_http2() {
            Driver::H2
        } else {
            Driver::Http1
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
        ws_seq: 0,
        global,
        local,
    };
    let driver = Driver::of(plan.protocol, &plan.set);
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
        let end = match &plan.tls {
            None => {
                backoff = FIRST_BACKOFF;
                conn.serve(driver, &w, stream, None, !established, connected_at)
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
                conn.serve(driver, &w, stream, Some(socket), !established, done_at)
                    .await
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

/// What a connection may do at a fixed rate ([`ConnState::due`]).
pub(super) enum Due {
    /// Send the request due at `intended`, now (`window`: it is one of the
    /// window's).
    Send {
        intended: u64,
        now: u64,
        window: bool,
    },
    /// The next is due at this instant: wait for it, reading meanwhile.
    WaitUntil(u64),
    /// Nothing more may be sent now (requests in flight, or the run is
    /// ending): read what is in flight.
    Full,
    /// Nothing is in flight and nothing more will be sent.
    Finished,
}

pub(super) struct ConnState {
    pub(super) gen: RequestGen,
    pub(super) rbuf: Vec<u8>,
    /// Requests in flight and the window's share (shared with the worker).
    pub(super) book: Rc<RefCell<Book>>,
    /// Fixed rate: index of this connection's next scheduled request on
    /// the current schedule (warm-up's, then the window's).
    pub(super) k: u64,
    /// Fixed rate: when the connection last became able to send.
    pub(super) free_at: u64,
    /// Window requests this connection sent (picks the checked ones).
    pub(super) sent_in_window: u64,
    /// WebSocket: messages this connection slot has sent, over every
    /// connection it made (each message's payload is drawn from its number).
    pub(super) ws_seq: u64,
    pub(super) global: usize,
    pub(super) local: usize,
}

/// Why a TLS connection that agreed `agreed` under ALPN cannot carry
/// `protocol`, if it cannot: h2 needs `h2`; https takes `http/1.1` or
/// nothing (no ALPN at all is HTTP/1.1).
pub(super) fn alpn_refused(protocol: contract::Protocol, agreed: Option<&[u8]>) -> Option<String> {
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
    /// `first`), with `driver`, until it ends. `socket` counts the bytes
    /// under `stream` when it is TLS; on plain TCP the reads and writes are
    /// the wire.
    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        driver: Driver,
        w: &Worker,
        stream: S,
        socket: Option<Rc<Traffic>>,
        first: bool,
        at: u64,
    ) -> ConnEnd {
        match driver {
            Driver::Http1 => self.serve_http1(w, stream, socket, first, at).await,
            Driver::H2 => self.serve_h2(w, stream, socket, first, at).await,
            // Opened once upgraded, not when connected.
            Driver::Ws => self.serve_ws(w, stream, socket, first).await,
        }
    }

    /// Before a wait: put the oldest request's deadline in the thread's
    /// timeout table and return it, with the wait for the next request's
    /// due time `pace_deadline` (a wait that never ends when it is 0).
    #[inline]
    pub(super) fn arm(
        &self,
        w: &Worker,
        pace_deadline: u64,
    ) -> (u64, impl Future<Output = ()> + 'static) {
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
    pub(super) fn lose_inflight(&mut self, w: &Worker, kind: ErrorKind, t: u64) {
        loop {
            let f = self.book.borrow_mut().inflight.pop_front();
            match f {
                Some(f) => w.lost(&f, kind, t),
                None => break,
            }
        }
    }

    pub(super) fn inflight_len(&self) -> usize {
        self.book.borrow().inflight.len()
    }

    pub(super) fn push(&self, f: InFlight) {
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
    /// Fixed rate: what this connection may send now. Waits on the pacer
    /// while it has nothing in flight and its next request is not yet
    /// due; with requests in flight it says until when to wait instead
    /// (reading meanwhile). Counts the slot taken (`k`).
    pub(super) async fn due(&mut self, w: &Worker, rate: f64) -> Due {
        loop {
            let now = now_ns();
            if w.done(now) {
                return if self.inflight_len() == 0 {
                    Due::Finished
                } else {
                    Due::Full
                };
            }
            let intended = self.next_due(w, rate, now);
            if now < intended {
                if self.inflight_len() == 0 {
                    let pacer = w.pacer.as_ref().expect("fixed rate has a pacer");
                    pacer.until(self.local, intended).await;
                    continue;
                }
                return Due::WaitUntil(intended);
            }
            return match w.admit(intended) {
                Some(window) => {
                    self.k += 1;
                    Due::Send {
                        intended,
                        now,
                        window,
                    }
                }
                None if self.inflight_len() == 0 => Due::Finished,
                None => Due::Full,
            };
        }
    }

    /// Fixed rate: the request (or message) just made for the slot `due`
    /// gave, about to be written: recorded, counted as sent (`bytes` of
    /// it, 0 when the socket counts), its send lag kept, put in flight.
    pub(super) fn sent_due(
        &mut self,
        w: &Worker,
        intended: u64,
        now: u64,
        window: bool,
        bytes: u64,
    ) {
        let f = self.record(w, 0, intended, now, window);
        w.sent(window, bytes);
        if window {
            self.wrote_window_request(w);
            let mut s = w.stats.borrow_mut();
            let lag = now.saturating_sub(intended.max(self.free_at));
            s.max_lag_ns = s.max_lag_ns.max(lag);
        }
        self.push(f);
    }

    pub(super) fn next_due(&mut self, w: &Worker, rate: f64, now: u64) -> u64 {
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
    pub(super) fn wrote_window_request(&self, w: &Worker) {
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
    pub(super) fn record(
        &mut self,
        w: &Worker,
        i: usize,
        sched: u64,
        sent: u64,
        window: bool,
    ) -> InFlight {
        let check = if window {
            self.sent_in_window += 1;
            self.sent_in_window % CHECK_EVERY == 1
        } else {
            sched >= w.shared.window_end_ns.load(Ordering::Relaxed)
        };
        // gRPC: every call is checked (its message decides whether it is ok).
        let check = check || w.plan.set.is_grpc();
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
}

/// Write `bytes` and flush them. On plain TCP the flush is free; over TLS it
/// is what sends the records: tokio-rustls returns from a write once the
/// socket reads as not ready (a full send buffer, or the task's cooperative
/// budget used up), leaving the request in its buffer until a flush, so a
/// connection would wait for an answer to a request it never sent.
/// Writes `bytes` ([`write_flushed`]); over TLS the socket's own count of
/// what that put on the wire goes into the window's bytes written when
/// `window` (on plain TCP the caller counted the bytes as it sent them).
pub(super) async fn write_counted<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
    w: &Worker,
    socket: &mut Option<super::Marks<'_>>,
    window: bool,
) -> std::io::Result<()> {
    write_flushed(stream, bytes).await?;
    if let Some(n) = socket.as_mut().map(super::Marks::written) {
        if window {
            w.stats.borrow_mut().bytes_written += n;
        }
    }
    Ok(())
}

pub(super) async fn write_flushed<S: AsyncWrite + Unpin>(
    stream: &mut S,
    bytes: &[u8],
) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}
