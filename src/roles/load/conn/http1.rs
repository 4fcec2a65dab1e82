//! The HTTP/1.1 driver: pipelined requests written whole, responses framed
//! out of a reused buffer ([`super::super::parse`]), each reported to the
//! book (`Worker::answered` / `Worker::lost`).

use std::rc::Rc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use super::super::parse::{Parsed, ResponseParser};
use super::super::report::ErrorKind;
use super::{
    write_counted, ConnEnd, ConnState, Due, Marks, TimeoutWatch, Traffic, Worker, MAX_HEAD,
};
use crate::host::clock::now_ns;

impl ConnState {
    /// Serve HTTP/1.1 requests on `stream` until it ends (see
    /// `ConnState::serve`).
    pub(super) async fn serve_http1<S: AsyncRead + AsyncWrite + Unpin>(
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
                        let (n, window) = w.admit_batch(now, plan.pipeline);
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
                        if write_counted(&mut stream, self.gen.current(), w, &mut socket, window)
                            .await
                            .is_err()
                        {
                            self.lose_inflight(w, ErrorKind::Write, now_ns());
                            return ConnEnd::Reconnect;
                        }
                    }
                }
                Some(rate) => {
                    while self.inflight_len() < plan.pipeline {
                        let (intended, now, window) = match self.due(w, rate).await {
                            Due::Send {
                                intended,
                                now,
                                window,
                            } => (intended, now, window),
                            Due::WaitUntil(at) => {
                                pace_deadline = at;
                                break;
                            }
                            Due::Full => break,
                            Due::Finished => return ConnEnd::Finished,
                        };
                        let len = self.gen.next(1).len() as u64;
                        let bytes = if socket.is_none() { len } else { 0 };
                        self.sent_due(w, intended, now, window, bytes);
                        if write_counted(&mut stream, self.gen.current(), w, &mut socket, window)
                            .await
                            .is_err()
                        {
                            self.lose_inflight(w, ErrorKind::Write, now_ns());
                            return ConnEnd::Reconnect;
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
