//! The WebSocket driver: the upgrade (RFC 6455 §4), then messages written
//! as masked text frames and their echoes read frame by frame out of the
//! reused read buffer, each compared with the message sent as its bytes
//! arrive ([`Messages::matches`]: nothing stored per message) and reported
//! to the book as an [`Outcome::Echo`].
//!
//! A message is what HTTP calls a request: `--pipeline` messages in flight
//! per connection in closed loop (the next batch is sent when the last echo
//! of the previous one arrives), one per due time at a fixed rate, timed
//! and timed out exactly like requests. The upgrade is part of connecting:
//! a connection counts as opened once its 101 is read, and an upgrade
//! refused or answered wrong is a wrong answer named in the report.
//!
//! Frames from the server may be fragmented (an echo arrives whole only
//! with its last frame) and interleaved with control frames: a ping is
//! answered with a pong, a close ends the connection (its messages in
//! flight lost, as a closed HTTP connection loses its requests).

use std::rc::Rc;

use rand::{Rng, SeedableRng};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use super::super::report::ErrorKind;
use super::super::request::{Messages, RequestSet};
use super::book::Outcome;
use super::{
    write_counted, write_flushed, ConnEnd, ConnState, Due, Marks, TimeoutWatch, Traffic, Worker,
    FIRST_BACKOFF,
};
use crate::contract::ws;
use crate::host::clock::now_ns;

/// Where the reader is in the server's frames.
#[derive(Default)]
struct Reader {
    /// The frame being read and the bytes of its payload still to come.
    frame: Option<(ws::Header, u64)>,
    /// The current message's type (text or binary); 0 between messages.
    opcode: u8,
    /// Bytes of the current message compared so far.
    at: usize,
    /// How the current message differs from the one sent, once it does.
    wrong: Option<String>,
    /// Wire bytes of the current message (headers and payloads).
    wire: u64,
    /// A control frame's payload (a ping's is sent back in the pong).
    control: Vec<u8>,
}

impl ConnState {
    /// Upgrade `stream` and echo messages on it until it ends (see
    /// `ConnState::serve`).
    pub(super) async fn serve_ws<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        w: &Worker,
        mut stream: S,
        socket: Option<Rc<Traffic>>,
        first: bool,
    ) -> ConnEnd {
        let plan = &*w.plan;
        let RequestSet::Ws {
            path, authority, ..
        } = &plan.set
        else {
            unreachable!("the WebSocket driver runs WebSocket scenarios only")
        };
        let mut rng = rand::rngs::SmallRng::seed_from_u64(
            plan.seed ^ (self.global as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407) ^ self.ws_seq,
        );
        let msgs = Messages::of(&plan.set, rng.random()).expect("a WebSocket set");

        // The upgrade.
        let key = ws::new_key(&mut rng);
        let upgrade = ws::upgrade_request(path, authority, &key);
        if write_flushed(&mut stream, &upgrade).await.is_err() {
            w.stray_error(ErrorKind::Write, now_ns());
            return ConnEnd::Reconnect;
        }
        let mut end = 0usize;
        let read_head = async {
            loop {
                if end == self.rbuf.len() {
                    return Err("the answer to the upgrade has a head over 8 KiB".to_string());
                }
                match stream.read(&mut self.rbuf[end..]).await {
                    Ok(0) => return Err("the server closed the connection on the upgrade".into()),
                    Ok(n) => end += n,
                    Err(e) => return Err(format!("reading the upgrade's answer: {e}")),
                }
                match ws::read_upgrade(&self.rbuf[..end], &key) {
                    Ok(None) => continue,
                    Ok(Some(used)) => return Ok(used),
                    Err(e) => return Err(format!("{} {path}: {e}", "GET")),
                }
            }
        };
        let head = match tokio::time::timeout(plan.connect_timeout, read_head).await {
            Ok(Ok(used)) => used,
            Ok(Err(why)) => {
                w.upgrade_failed(now_ns(), why);
                tokio::time::sleep(FIRST_BACKOFF).await;
                return ConnEnd::Reconnect;
            }
            // No answer in time: a connection that could not be made (as a
            // connect that times out), not a wrong answer.
            Err(_) => {
                w.stray_error(ErrorKind::Connect, now_ns());
                return ConnEnd::Reconnect;
            }
        };
        let now = now_ns();
        w.opened(self.local, first, now);
        self.free_at = now;
        self.rbuf.copy_within(head..end, 0);
        let end = end - head;
        let mut socket = socket.as_deref().map(Marks::new);
        self.echo(w, stream, &msgs, &mut rng, &mut socket, end)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn echo<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        w: &Worker,
        mut stream: S,
        msgs: &Messages,
        rng: &mut rand::rngs::SmallRng,
        socket: &mut Option<Marks<'_>>,
        end: usize,
    ) -> ConnEnd {
        let plan = &*w.plan;
        let size = msgs.size();
        let mut wbuf: Vec<u8> = Vec::with_capacity((ws::MAX_HEADER + size) * plan.pipeline.max(1));
        // Messages sent and echoes read on this connection: the next echo
        // is message `recv` (echoes come in order).
        let mut sent = self.ws_seq;
        let mut recv = sent;
        let mut r = Reader::default();
        let mut read_at = 0u64;
        // Bytes that came with the 101 are frames already.
        let mut carry = match self
            .frames(
                w,
                &mut stream,
                msgs,
                rng,
                socket,
                &mut r,
                &mut recv,
                now_ns(),
                0,
                end,
            )
            .await
        {
            Ok(carry) => carry,
            Err(e) => return e,
        };
        let idle = msgs.idle();
        let opcode = if idle { ws::OP_PING } else { ws::OP_TEXT };
        // ws-idle: when this connection pings next (its first ping at a
        // random point of the first interval), and until when it waits.
        let interval = ws::IDLE_PING_INTERVAL.as_nanos() as u64;
        let mut next_ping = now_ns() + rng.random_range(0..interval);
        let frame = |seq: u64, wbuf: &mut Vec<u8>, rng: &mut rand::rngs::SmallRng| {
            let mask: [u8; 4] = rng.random();
            ws::write_header(wbuf, true, opcode, size, Some(mask));
            let at = wbuf.len();
            msgs.write(seq, wbuf);
            ws::apply_mask(&mut wbuf[at..], mask, 0);
        };
        loop {
            // 1. Send what may be sent now.
            let mut pace_deadline = 0u64;
            let mut idle_until = 0u64;
            match plan.rate {
                None => 'send: {
                    if self.inflight_len() == 0 {
                        let now = if read_at != 0 { read_at } else { now_ns() };
                        read_at = 0;
                        if w.done(now) {
                            close(&mut stream, rng).await;
                            return ConnEnd::Finished;
                        }
                        if idle {
                            if now < next_ping {
                                idle_until = next_ping;
                                break 'send;
                            }
                            next_ping = now + interval;
                        }
                        // ws-idle pings one at a time.
                        let depth = if idle { 1 } else { plan.pipeline };
                        let (n, window) = w.admit_batch(now, depth);
                        if n == 0 {
                            close(&mut stream, rng).await;
                            return ConnEnd::Finished;
                        }
                        wbuf.clear();
                        for i in 0..n {
                            frame(sent, &mut wbuf, rng);
                            sent += 1;
                            self.ws_seq = sent;
                            let f = self.record(w, i, now, now, window);
                            let bytes = if socket.is_none() {
                                (wbuf.len() / n) as u64
                            } else {
                                0
                            };
                            w.sent(window, bytes);
                            if window {
                                self.wrote_window_request(w);
                            }
                            self.push(f);
                        }
                        if write_counted(&mut stream, &wbuf, w, socket, window)
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
                            Due::Finished => {
                                close(&mut stream, rng).await;
                                return ConnEnd::Finished;
                            }
                        };
                        wbuf.clear();
                        frame(sent, &mut wbuf, rng);
                        sent += 1;
                        self.ws_seq = sent;
                        let bytes = if socket.is_none() {
                            wbuf.len() as u64
                        } else {
                            0
                        };
                        self.sent_due(w, intended, now, window, bytes);
                        if write_counted(&mut stream, &wbuf, w, socket, window)
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
            if carry == self.rbuf.len() {
                self.lose_inflight(w, ErrorKind::Parse, now_ns());
                return ConnEnd::Reconnect;
            }
            let (deadline, pace) = self.arm(w, pace_deadline);
            let wait = async {
                if idle_until == 0 {
                    std::future::pending::<()>().await
                }
                let now = now_ns();
                tokio::time::sleep(std::time::Duration::from_nanos(
                    idle_until.saturating_sub(now),
                ))
                .await
            };
            let read = tokio::select! {
                biased;
                r = stream.read(&mut self.rbuf[carry..]) => r,
                () = wait => continue,
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
            let end = match read {
                Ok(0) => {
                    self.lose_inflight(w, ErrorKind::Read, now);
                    return ConnEnd::Reconnect;
                }
                Ok(n) => {
                    let wire = match socket {
                        Some(m) => m.read(),
                        None => n as u64,
                    };
                    if w.in_window(now).is_some() {
                        w.stats.borrow_mut().bytes_read += wire;
                    }
                    carry + n
                }
                Err(_) => {
                    if self.inflight_len() == 0 {
                        w.stray_error(ErrorKind::Read, now);
                    }
                    self.lose_inflight(w, ErrorKind::Read, now);
                    return ConnEnd::Reconnect;
                }
            };

            // 3. Frame what was read.
            carry = match self
                .frames(
                    w,
                    &mut stream,
                    msgs,
                    rng,
                    socket,
                    &mut r,
                    &mut recv,
                    now,
                    0,
                    end,
                )
                .await
            {
                Ok(carry) => carry,
                Err(e) => return e,
            };
            self.ws_seq = sent;
        }
    }

    /// Reads the frames in `rbuf[start..end]`, read at `now`: echoes
    /// compared and settled, pings answered. `Ok` with the bytes of a frame
    /// header left at the buffer's start for the next read to complete;
    /// `Err` with how the connection ends.
    #[allow(clippy::too_many_arguments)]
    async fn frames<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        w: &Worker,
        stream: &mut S,
        msgs: &Messages,
        rng: &mut rand::rngs::SmallRng,
        socket: &mut Option<Marks<'_>>,
        r: &mut Reader,
        recv: &mut u64,
        now: u64,
        mut start: usize,
        end: usize,
    ) -> Result<usize, ConnEnd> {
        loop {
            let Some((h, remaining)) = r.frame else {
                if start == end {
                    return Ok(0);
                }
                let h = match ws::Header::parse(&self.rbuf[start..end]) {
                    Ok(Some(h)) => h,
                    Ok(None) => {
                        // A header split across reads: keep its start for
                        // the next read to complete.
                        self.rbuf.copy_within(start..end, 0);
                        return Ok(end - start);
                    }
                    Err(_) => {
                        self.lose_inflight(w, ErrorKind::Parse, now);
                        return Err(ConnEnd::Reconnect);
                    }
                };
                let fits = match h.opcode {
                    ws::OP_TEXT | ws::OP_BINARY => r.opcode == 0,
                    ws::OP_CONT => r.opcode != 0,
                    _ => true,
                };
                if h.mask.is_some() || !fits {
                    // A masked server frame, or a message begun inside
                    // another: not WebSocket as RFC 6455 frames it.
                    self.lose_inflight(w, ErrorKind::Parse, now);
                    return Err(ConnEnd::Reconnect);
                }
                if h.opcode == ws::OP_TEXT || h.opcode == ws::OP_BINARY {
                    r.opcode = h.opcode;
                }
                if h.opcode >= ws::OP_CLOSE {
                    r.control.clear();
                } else {
                    r.wire += h.len as u64;
                }
                start += h.len;
                r.frame = Some((h, h.payload));
                continue;
            };
            let n = (remaining as usize).min(end - start);
            let data = &self.rbuf[start..start + n];
            if h.opcode >= ws::OP_CLOSE {
                r.control.extend_from_slice(data);
            } else {
                if self.inflight_len() == 0 {
                    // An echo of nothing sent.
                    w.stray_error(ErrorKind::Parse, now);
                    return Err(ConnEnd::Reconnect);
                }
                if r.wrong.is_none() && !msgs.matches(*recv, r.at, data) {
                    r.wrong = Some(if r.at + n > msgs.size() {
                        format!("an echo longer than the {} B message sent", msgs.size())
                    } else {
                        format!(
                            "an echo that differs from the {} B message sent, from byte {}",
                            msgs.size(),
                            r.at
                        )
                    });
                }
                r.at += n;
                r.wire += n as u64;
            }
            start += n;
            let remaining = remaining - n as u64;
            if remaining > 0 {
                r.frame = Some((h, remaining));
                return Ok(0);
            }
            r.frame = None;
            match h.opcode {
                ws::OP_PING => {
                    let pong = ws::frame(true, ws::OP_PONG, &r.control, Some(rng.random()));
                    if write_flushed(stream, &pong).await.is_err() {
                        self.lose_inflight(w, ErrorKind::Write, now_ns());
                        return Err(ConnEnd::Reconnect);
                    }
                }
                // ws-idle: the pong is the answer to the ping in flight
                // (an unsolicited pong, a heartbeat, answers nothing).
                ws::OP_PONG if msgs.idle() && self.inflight_len() > 0 => {
                    let wrong = (r.control.len() != msgs.size()
                        || !msgs.matches(*recv, 0, &r.control))
                    .then(|| {
                        format!(
                            "a ping of {} B answered by a pong of {} B that is not its payload",
                            msgs.size(),
                            r.control.len()
                        )
                    });
                    let wire = match socket {
                        Some(m) => m.answered(),
                        None => (2 + r.control.len()) as u64,
                    };
                    self.answered(w, now, wrong.as_deref(), wire);
                    *recv += 1;
                }
                ws::OP_PONG => {}
                ws::OP_CLOSE => {
                    self.lose_inflight(w, ErrorKind::Read, now);
                    return Err(ConnEnd::Reconnect);
                }
                _ if h.fin => {
                    let mut wrong = r.wrong.take();
                    if wrong.is_none() && r.at != msgs.size() {
                        wrong = Some(format!(
                            "an echo of {} B for a {} B message",
                            r.at,
                            msgs.size()
                        ));
                    }
                    if wrong.is_none() && r.opcode != ws::OP_TEXT {
                        wrong = Some("a text message echoed as binary".to_string());
                    }
                    let wire = match socket {
                        Some(m) => m.answered(),
                        None => r.wire,
                    };
                    self.answered(w, now, wrong.as_deref(), wire);
                    *recv += 1;
                    (r.opcode, r.at, r.wire) = (0, 0, 0);
                }
                _ => {}
            }
        }
    }
}

impl ConnState {
    /// The oldest message in flight got its answer at `now`: settled in
    /// the book as an echo, `wrong` saying how it differed, if it did.
    fn answered(&mut self, w: &Worker, now: u64, wrong: Option<&str>, wire: u64) {
        let f = self.book.borrow_mut().inflight.pop_front();
        if let Some(f) = f {
            w.settled(self.local, &f, now, Outcome::Echo { wrong }, wire);
            self.free_at = now;
        }
    }
}

/// Ends a connection the client's way: a close frame (1000), not waited on.
async fn close<S: AsyncWrite + Unpin>(stream: &mut S, rng: &mut rand::rngs::SmallRng) {
    let f = ws::frame(
        true,
        ws::OP_CLOSE,
        &ws::close_payload(1000, ""),
        Some(rng.random()),
    );
    let _ = write_flushed(stream, &f).await;
}
