//! HTTP/2 connections (`h2`, `h2c`): the same accounting as HTTP/1.1, with
//! streams in place of pipelined requests.
//!
//! A connection keeps up to `streams` requests in flight as concurrent
//! streams (h2load's `-m`). Each stream is an [`InFlight`] in the
//! connection's [`super::Book`] exactly as a pipelined request is, so the
//! window rules, the drain, the end-of-run settlement, the answer checks
//! and the fixed-rate schedule (a stream is a slot) are the HTTP/1.1
//! code's; only the wire differs. Streams answer out of order, so a
//! finished stream leaves the book by its position, found by its tag in
//! `open`, which holds the streams in the book's order.
//!
//! The frame layer is the `h2` crate (the one hyper uses), driven directly:
//! its connection task runs beside this one on the worker's `LocalSet` and
//! is aborted when the driver returns. Requests are the HTTP/1.1 bytes the
//! generator made, read back with httparse into an HTTP/2 request (method,
//! path, headers, body; the connection-specific headers HTTP/2 forbids left
//! out), so both protocols send the very same random inputs; a fixed
//! request is read back once per connection. This path allocates per
//! request (HPACK and the h2 crate do anyway); the HTTP/1.1 hot path does
//! not know it exists: the protocol is chosen once per connection.
//!
//! What ends a stream or a connection:
//! - an answer (any status; 2xx alone is success), its body read to the end
//!   and its flow-control capacity released as it comes;
//! - RST_STREAM from the server: that request is lost (`read`), the others
//!   go on;
//! - GOAWAY: the streams the server refused are lost (`read`), those it
//!   accepted are answered, no new stream is opened, and once none is left
//!   the connection is made again;
//! - a broken connection (I/O error, or the server's frames are not valid
//!   HTTP/2: `parse`): every stream in flight is lost, then a new
//!   connection;
//! - a timeout: each stream is a timeout at its own deadline (the oldest
//!   stream's deadline is the connection's entry in the thread's timeout
//!   table) and is cancelled (RST_STREAM CANCEL) while the connection goes
//!   on; but when no stream at all has ended since that stream was sent,
//!   the connection is dead or the server stuck on it, and, as HTTP/1.1
//!   does, every stream in flight is a timeout and the connection is made
//!   again.
//!
//! Wire bytes are counted at the socket, under TLS before decryption (the
//! records, as for https): frames, HPACK-compressed headers, SETTINGS,
//! WINDOW_UPDATE and PING included, and under TLS their records' headers
//! and tags. An answer's share is what arrived since the previous answer
//! finished, so the shares add up to what was read.

use std::collections::VecDeque;
use std::rc::Rc;
use std::task::Poll;

use bytes::Bytes;
use futures_util::future::{AbortHandle, Abortable, FutureExt};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};

use super::{ConnEnd, ConnState, Counted, InFlight, Marks, TimeoutWatch, Traffic, Worker};
use crate::host::clock::now_ns;
use crate::roles::load::report::ErrorKind;

/// Flow-control window per stream the loader grants (bytes): large enough
/// that no contract answer waits for a WINDOW_UPDATE.
const STREAM_WINDOW: u32 = 1 << 20;
/// Flow-control window per connection (bytes).
const CONNECTION_WINDOW: u32 = 16 << 20;

/// Aborts the connection task when the driver returns (which closes the
/// socket it owns).
struct AbortOnDrop(tokio::task::JoinHandle<Result<(), h2::Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An HTTP/2 request, made once from HTTP/1.1 bytes.
#[derive(Debug, Clone)]
struct Template {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Option<Bytes>,
}

/// HTTP/2 requests from the HTTP/1.1 requests the generator serialized.
struct Requests {
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    /// The last HTTP/1.1 request read back, and what it became: a fixed
    /// request (plaintext, json, an ad-hoc one) is read back once.
    last: Vec<u8>,
    made: Option<Template>,
}

impl Requests {
    fn new(authority: &str, tls: bool) -> Option<Requests> {
        Some(Requests {
            scheme: if tls {
                http::uri::Scheme::HTTPS
            } else {
                http::uri::Scheme::HTTP
            },
            authority: authority.parse().ok()?,
            last: Vec::new(),
            made: None,
        })
    }

    /// The HTTP/2 request of `wire` and its body; `None` when `wire` is not
    /// a request HTTP/2 can carry.
    fn make(&mut self, wire: &[u8]) -> Option<(http::Request<()>, Option<Bytes>)> {
        if self.made.is_none() || self.last != wire {
            self.made = None;
            self.made = Some(self.read_back(wire)?);
            self.last.clear();
            self.last.extend_from_slice(wire);
        }
        let t = self.made.as_ref()?;
        let mut r = http::Request::new(());
        *r.method_mut() = t.method.clone();
        *r.uri_mut() = t.uri.clone();
        *r.version_mut() = http::Version::HTTP_2;
        *r.headers_mut() = t.headers.clone();
        Some((r, t.body.clone()))
    }

    fn read_back(&self, wire: &[u8]) -> Option<Template> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        let httparse::Status::Complete(head) = req.parse(wire).ok()? else {
            return None;
        };
        let method = http::Method::from_bytes(req.method?.as_bytes()).ok()?;
        let uri = http::Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(req.path?)
            .build()
            .ok()?;
        let mut map = http::HeaderMap::with_capacity(req.headers.len());
        for h in req.headers.iter() {
            // Lower case, as HTTP/2 requires.
            let name = http::HeaderName::from_bytes(h.name.as_bytes()).ok()?;
            if connection_specific(&name) {
                continue;
            }
            map.append(name, http::HeaderValue::from_bytes(h.value).ok()?);
        }
        let body = &wire[head..];
        Some(Template {
            method,
            uri,
            headers: map,
            body: (!body.is_empty()).then(|| Bytes::copy_from_slice(body)),
        })
    }
}

/// Headers HTTP/2 forbids (RFC 9113, 8.2.2); Host is `:authority`.
fn connection_specific(name: &http::HeaderName) -> bool {
    use http::header::{CONNECTION, HOST, TE, TRANSFER_ENCODING, UPGRADE};
    [HOST, CONNECTION, TRANSFER_ENCODING, UPGRADE, TE].contains(name)
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}

/// A stream's answer: status and body (the body only when it is checked).
type Answer = Result<(u16, Vec<u8>), h2::Error>;

/// Wait for a stream's answer and read its body to the end, releasing
/// flow-control capacity as it comes.
async fn answer(response: h2::client::ResponseFuture, keep: bool) -> Answer {
    let resp = response.await?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut kept = Vec::new();
    while let Some(chunk) = body.data().await {
        let data = chunk?;
        let _ = body.flow_control().release_capacity(data.len());
        if keep {
            kept.extend_from_slice(&data);
        }
    }
    Ok((status, kept))
}

/// How an h2 failure counts: from the server (RST_STREAM, GOAWAY) or the
/// socket, a read error; the server's frames found invalid by the h2
/// crate (it reset the stream or closed the connection itself), a parse
/// error.
fn kind_of(e: &h2::Error) -> ErrorKind {
    if e.is_io() || e.is_remote() {
        ErrorKind::Read
    } else {
        ErrorKind::Parse
    }
}

/// Whether `e` ends the whole connection, not just one stream.
fn ends_connection(e: &h2::Error) -> bool {
    e.is_go_away() || e.is_io() || !e.is_reset()
}

/// What woke the driver.
enum Event {
    Answer(u64, Result<Answer, futures_util::future::Aborted>),
    Closed(Result<Result<(), h2::Error>, tokio::task::JoinError>),
    Timeout,
    Wake,
}

impl ConnState {
    /// Serve requests as HTTP/2 streams on `io`, open since `at` (its first
    /// open when `first`), until it ends.
    /// `socket` counts the bytes under `io` when it is TLS (the records);
    /// on plain TCP the frames read and written are the wire.
    pub(super) async fn serve_h2<S>(
        &mut self,
        w: &Worker,
        io: S,
        socket: Option<Rc<Traffic>>,
        first: bool,
        at: u64,
    ) -> ConnEnd
    where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
    {
        w.opened(self.local, first, at);
        self.free_at = now_ns();
        let frames = Rc::new(Traffic::default());
        let io = Counted {
            inner: io,
            traffic: Rc::clone(&frames),
        };
        let traffic = socket.unwrap_or(frames);
        // Sends the connection preface and SETTINGS; the server's SETTINGS
        // come later, read by the connection task.
        let handshake = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .enable_push(false)
            .handshake::<_, Bytes>(io)
            .await;
        let (client, connection) = match handshake {
            Ok(pair) => pair,
            Err(e) => {
                // Nothing was sent yet: no request is lost.
                w.stray_error(kind_of(&e), now_ns());
                return ConnEnd::Reconnect;
            }
        };
        let mut task = AbortOnDrop(tokio::task::spawn_local(connection));
        let mut marks = Marks::new(&traffic);
        let end = self.drive_h2(w, client, &mut task, &mut marks).await;
        marks.count(w, now_ns());
        end
    }

    async fn drive_h2(
        &mut self,
        w: &Worker,
        mut client: h2::client::SendRequest<Bytes>,
        task: &mut AbortOnDrop,
        marks: &mut Marks<'_>,
    ) -> ConnEnd {
        let plan = &*w.plan;
        let streams = plan.streams.max(1);
        let Some(mut requests) = Requests::new(&plan.authority, plan.tls.is_some()) else {
            // Target::parse took it as IP:port; cannot happen.
            w.stray_error(ErrorKind::Write, now_ns());
            return ConnEnd::Finished;
        };
        let mut pending = FuturesUnordered::new();
        // The streams in flight in the book's order: tag, and the handle
        // that cancels the stream.
        let mut open: VecDeque<(u64, AbortHandle)> = VecDeque::with_capacity(streams);
        let mut next_tag = 0u64;
        // The connection takes no new stream (GOAWAY, a broken connection):
        // finish those in flight, then make a new one.
        let mut closing = false;
        // Whether the server's stream limit is known to be checked.
        let mut limit_seen = false;
        // When a stream last ended (answered or refused), ns.
        let mut last_end = 0u64;
        loop {
            // 1. Open the streams that may be opened now.
            let mut pace_deadline = 0u64;
            let mut blocked = false;
            while !closing && self.inflight_len() < streams {
                match std::future::poll_fn(|cx| Poll::Ready(client.poll_ready(cx))).await {
                    Poll::Ready(Ok(())) => {}
                    Poll::Ready(Err(_)) => {
                        closing = true;
                        break;
                    }
                    Poll::Pending => {
                        blocked = true;
                        break;
                    }
                }
                let now = now_ns();
                if w.done(now) {
                    break;
                }
                let (sched, window) = match plan.rate {
                    None => match w.admit(now) {
                        Some(win) => (now, win),
                        None => break,
                    },
                    Some(rate) => {
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
                        let Some(win) = w.admit(intended) else { break };
                        self.k += 1;
                        (intended, win)
                    }
                };
                let made = requests.make(self.gen.next(1));
                let sent = now_ns();
                let f: InFlight = self.record(
                    w,
                    0,
                    if plan.rate.is_some() { sched } else { sent },
                    sent,
                    window,
                );
                let keep = f.check.is_some();
                // Bytes are counted at the socket.
                w.sent(window, 0);
                if window {
                    self.wrote_window_request(w);
                    if plan.rate.is_some() {
                        let mut s = w.stats.borrow_mut();
                        let lag = sent.saturating_sub(sched.max(self.free_at));
                        s.max_lag_ns = s.max_lag_ns.max(lag);
                    }
                }
                self.push(f);
                let opened = match made {
                    None => Err(None),
                    Some((request, body)) => client
                        .send_request(request, body.is_none())
                        .and_then(|(response, mut tx)| {
                            if let Some(b) = body {
                                tx.send_data(b, true)?;
                            }
                            Ok(response)
                        })
                        .map_err(Some::<h2::Error>),
                };
                match opened {
                    Ok(response) => {
                        let (handle, registration) = AbortHandle::new_pair();
                        let tag = next_tag;
                        next_tag += 1;
                        open.push_back((tag, handle));
                        pending.push(
                            Abortable::new(answer(response, keep), registration)
                                .map(move |r| (tag, r)),
                        );
                    }
                    Err(_) => {
                        // This request never left: lost as a write error,
                        // and a connection that refused a stream takes no
                        // more.
                        let f = self.book.borrow_mut().inflight.pop_back();
                        if let Some(f) = f {
                            w.lost(&f, ErrorKind::Write, now_ns());
                        }
                        closing = true;
                        break;
                    }
                }
            }
            if self.inflight_len() == 0 {
                if closing {
                    return ConnEnd::Reconnect;
                }
                if !blocked && pace_deadline == 0 {
                    // Nothing in flight and nothing more may be sent.
                    return ConnEnd::Finished;
                }
            }

            // 2. Wait for an answer, the connection's end, a timeout, a
            // free stream, or the next request's due time.
            let (deadline, pace) = self.arm(w, pace_deadline);
            let event = tokio::select! {
                biased;
                Some((tag, r)) = pending.next(), if !pending.is_empty() => Event::Answer(tag, r),
                r = &mut task.0 => Event::Closed(r),
                () = TimeoutWatch { w, slot: self.local } => Event::Timeout,
                _ = std::future::poll_fn(|cx| client.poll_ready(cx)), if blocked => Event::Wake,
                () = pace => Event::Wake,
            };
            let now = now_ns();
            match event {
                Event::Answer(tag, r) => {
                    marks.count(w, now);
                    if let Some(ends) = self.settle(w, &mut open, tag, r, now, marks) {
                        last_end = now;
                        closing |= ends;
                    }
                    if !limit_seen {
                        limit_seen = true;
                        let limit = client.current_max_send_streams();
                        if limit < streams {
                            let mut s = w.stats.borrow_mut();
                            s.h2_stream_limit =
                                Some(s.h2_stream_limit.map_or(limit, |l| l.min(limit)));
                        }
                    }
                }
                Event::Closed(r) => {
                    // The connection is gone. Answers that completed before
                    // it went count; every other stream is lost with it.
                    while let Some(Some((tag, a))) = pending.next().now_or_never() {
                        self.settle(w, &mut open, tag, a, now, marks);
                    }
                    marks.count(w, now);
                    let failure = match &r {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) if e.reason() == Some(h2::Reason::NO_ERROR) => None,
                        Ok(Err(e)) => Some(kind_of(e)),
                        Err(_) => Some(ErrorKind::Read),
                    };
                    if self.inflight_len() == 0 {
                        // Closing an idle connection is allowed; breaking
                        // it is an error that lost no request.
                        if let Some(kind) = failure {
                            w.stray_error(kind, now);
                        }
                    }
                    open.clear();
                    self.lose_inflight(w, failure.unwrap_or(ErrorKind::Read), now);
                    return ConnEnd::Reconnect;
                }
                Event::Timeout => {
                    if now < deadline {
                        continue;
                    }
                    if last_end < deadline - plan.timeout_ns {
                        // No stream ended since the oldest was sent, a whole
                        // timeout ago: the connection is dead or the server
                        // stuck on it. Make another, as HTTP/1.1 does.
                        for (_, h) in open.drain(..) {
                            h.abort();
                        }
                        self.lose_inflight(w, ErrorKind::Timeout, now);
                        w.disarm_timeout(self.local);
                        return ConnEnd::Reconnect;
                    }
                    // Each stream past its own deadline is a timeout and is
                    // cancelled (RST_STREAM); the others go on.
                    loop {
                        let f = {
                            let mut b = self.book.borrow_mut();
                            match b.inflight.front() {
                                Some(f) if now >= f.sent + plan.timeout_ns => {
                                    b.inflight.pop_front()
                                }
                                _ => None,
                            }
                        };
                        let Some(f) = f else { break };
                        if let Some((_, h)) = open.pop_front() {
                            h.abort();
                        }
                        w.lost(&f, ErrorKind::Timeout, now);
                    }
                }
                Event::Wake => {}
            }
        }
    }

    /// Stream `tag` ended with `r` at `now`: count its answer or its loss.
    /// Returns whether the connection then takes no new stream, or `None`
    /// when the stream was already counted (cancelled at its timeout).
    #[allow(clippy::too_many_arguments)]
    fn settle(
        &mut self,
        w: &Worker,
        open: &mut VecDeque<(u64, AbortHandle)>,
        tag: u64,
        r: Result<Answer, futures_util::future::Aborted>,
        now: u64,
        marks: &mut Marks<'_>,
    ) -> Option<bool> {
        // Not found: cancelled at its timeout, already counted.
        let at = open.iter().position(|&(t, _)| t == tag)?;
        let r = r.ok()?;
        open.remove(at);
        let f = self.book.borrow_mut().inflight.remove(at)?;
        match r {
            Ok((status, body)) => {
                let wire = marks.answered();
                w.answered(self.local, &f, now, status, wire, &body);
                self.free_at = now;
                Some(false)
            }
            Err(e) => {
                w.lost(&f, kind_of(&e), now);
                Some(ends_connection(&e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Protocol;

    #[test]
    fn alpn_must_agree_h2_and_https_takes_http11_or_nothing() {
        use super::super::alpn_refused as refused;
        assert_eq!(refused(Protocol::H2, Some(b"h2")), None);
        assert_eq!(
            refused(Protocol::H2, Some(b"http/1.1")).as_deref(),
            Some("ALPN agreed http/1.1, not h2")
        );
        assert_eq!(
            refused(Protocol::H2, None).as_deref(),
            Some("ALPN agreed no protocol, not h2")
        );
        assert_eq!(refused(Protocol::Https, Some(b"http/1.1")), None);
        assert_eq!(refused(Protocol::Https, None), None);
        assert_eq!(
            refused(Protocol::Https, Some(b"h2")).as_deref(),
            Some("ALPN agreed h2, not http/1.1")
        );
        assert_eq!(refused(Protocol::H2c, None), None);
    }

    #[test]
    fn requests_read_back_into_http2_without_connection_headers() {
        let mut r = Requests::new("127.0.0.1:8080", false).unwrap();
        let wire = b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: keep-alive\r\n\
                     X-Custom: A\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
        let (req, body) = r.make(wire).unwrap();
        assert_eq!(req.method(), http::Method::POST);
        assert_eq!(req.uri().to_string(), "http://127.0.0.1:8080/echo");
        assert_eq!(req.version(), http::Version::HTTP_2);
        assert!(req.headers().get("host").is_none());
        assert!(req.headers().get("connection").is_none());
        assert_eq!(req.headers()["x-custom"], "A");
        assert_eq!(req.headers()["content-length"], "7");
        assert_eq!(body.as_deref(), Some(b"{\"a\":1}".as_slice()));
        // The same bytes again: the same request, read back once.
        let (again, _) = r.make(wire).unwrap();
        assert_eq!(again.uri(), req.uri());
        let (get, none) = r
            .make(b"GET /users/42 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
            .unwrap();
        assert_eq!(get.uri().path(), "/users/42");
        assert!(none.is_none());
        let mut tls = Requests::new("127.0.0.1:8443", true).unwrap();
        let (req, _) = tls.make(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(req.uri().to_string(), "https://127.0.0.1:8443/");
        assert!(tls.make(b"GET / HTTP/1.1\r\nHost").is_none());
    }
}
