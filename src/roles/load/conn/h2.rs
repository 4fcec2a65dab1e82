//! HTTP/2 connections (`h2`, `h2c`): the same accounting as HTTP/1.1, with
//! streams in place of pipelined requests.
//!
//! A connection keeps up to `streams` requests in flight as concurrent
//! streams (h2load's `-m`). Each stream is an [`InFlight`] in the
//! connection's [`super::Book`] exactly as a pipelined request is, so the
//! window rules, the drain, the end-of-run settlement, the answer checks
//! and the fixed-rate schedule (a stream is a slot) are the HTTP/1.1
//! code's; only the wire differs. Streams answer out of order, so a
//! finished stream leaves the book by its position, found by its id in
//! `open`, which holds the streams in the book's order (ids rise, so the
//! search is a binary one).
//!
//! The frame layer is this module's own, written for a client that only
//! loads: one task per connection, one read buffer, one write buffer
//! flushed once per turn, no allocation per request (a request body held
//! back by flow control is the exception), HPACK from [`super::hpack`].
//! The `h2` crate did the same work at 1.2× h2load's CPU per response
//! (its connection task, stream store and per-request futures);
//! docs/loader.md has the figures. Requests are the HTTP/1.1 bytes the
//! generator made, read back with httparse into an HTTP/2 request (method,
//! path, headers, body; the connection-specific headers HTTP/2 forbids left
//! out), so both protocols send the very same random inputs; a fixed
//! request is read back once per connection. The HTTP/1.1 hot path does not
//! know this module exists: the protocol is chosen once per connection.
//!
//! What it does of RFC 9113, as a client: the preface and SETTINGS
//! (push off, 1 MiB per stream and 16 MiB per connection of receive
//! window, given back as it is read), the server's SETTINGS obeyed and
//! acknowledged (stream limit, initial window, frame size, header table
//! size), PING answered, request bodies sent within the server's flow
//! control windows (held back until a WINDOW_UPDATE when they do not fit),
//! header blocks split into CONTINUATION frames above the server's frame
//! size, padding and priority fields skipped, interim (1xx) heads and
//! trailers read.
//!
//! What ends a stream or a connection:
//! - an answer (any status; 2xx alone is success): its head, then its body
//!   to END_STREAM;
//! - RST_STREAM from the server: that request is lost (`read`), the others
//!   go on;
//! - GOAWAY: the streams the server refused (above its last stream id) are
//!   lost (`read`), those it accepted are answered, no new stream is
//!   opened, and once none is left the connection is made again;
//! - a broken connection (I/O error, the server closing it with streams in
//!   flight: `read`; frames that are not valid HTTP/2 or HPACK: `parse`):
//!   every stream in flight is lost, then a new connection;
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

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use super::book::Outcome as Answer;
use super::hpack;
use super::{write_flushed, ConnEnd, ConnState, Counted, Marks, TimeoutWatch, Traffic, Worker};
use crate::host::clock::now_ns;
use crate::roles::load::report::ErrorKind;

/// Flow-control window per stream the loader grants (bytes): large enough
/// that no contract answer waits for a WINDOW_UPDATE.
const STREAM_WINDOW: u32 = 1 << 20;
/// Flow-control window per connection (bytes).
const CONNECTION_WINDOW: u32 = 16 << 20;
/// A window's initial size before SETTINGS say otherwise (RFC 9113, 6.9.2).
const DEFAULT_WINDOW: i64 = 65_535;
/// The largest frame payload the loader accepts: the default
/// SETTINGS_MAX_FRAME_SIZE, which it does not change.
const MAX_FRAME: usize = 16_384;
/// The highest stream id a client may open.
const LAST_ID: u32 = (1 << 31) - 1;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types (RFC 9113, 6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

// Flags.
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// Error code CANCEL (RFC 9113, 7).
const CANCEL: u32 = 0x8;

/// An HTTP/2 request, made from the HTTP/1.1 bytes of one.
#[derive(Debug, Default)]
struct Template {
    method: Vec<u8>,
    path: Vec<u8>,
    /// Lower-case names, connection-specific headers left out.
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
}

/// HTTP/2 requests from the HTTP/1.1 requests the generator serialized.
struct Requests {
    /// The last HTTP/1.1 request read back, and what it became: a fixed
    /// request (plaintext, json, an ad-hoc one) is read back once; others
    /// reuse the template's buffers.
    last: Vec<u8>,
    made: Option<Template>,
}

impl Requests {
    fn new() -> Requests {
        Requests {
            last: Vec::new(),
            made: None,
        }
    }

    /// The HTTP/2 request of `wire`; `None` when `wire` is not a request
    /// HTTP/2 can carry.
    fn make(&mut self, wire: &[u8]) -> Option<&Template> {
        if self.made.is_none() || self.last != wire {
            let mut t = self.made.take().unwrap_or_default();
            read_back(&mut t, wire)?;
            self.made = Some(t);
            self.last.clear();
            self.last.extend_from_slice(wire);
        }
        self.made.as_ref()
    }
}

/// Read the HTTP/1.1 request `wire` into `t`, reusing its buffers.
fn read_back(t: &mut Template, wire: &[u8]) -> Option<()> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(head) = req.parse(wire).ok()? else {
        return None;
    };
    refill(&mut t.method, req.method?.as_bytes());
    refill(&mut t.path, req.path?.as_bytes());
    let mut n = 0;
    for h in req.headers.iter() {
        if connection_specific(h.name, h.value) {
            continue;
        }
        if n == t.headers.len() {
            t.headers.push(Default::default());
        }
        let (name, value) = &mut t.headers[n];
        refill(name, h.name.as_bytes());
        name.make_ascii_lowercase();
        refill(value, h.value);
        n += 1;
    }
    t.headers.truncate(n);
    refill(&mut t.body, &wire[head..]);
    Some(())
}

fn refill(buf: &mut Vec<u8>, with: &[u8]) {
    buf.clear();
    buf.extend_from_slice(with);
}

/// Headers HTTP/2 forbids (RFC 9113, 8.2.2); Host is `:authority`. `te`
/// is allowed with the value `trailers` alone, which gRPC requires (a
/// gRPC server refuses a call without it).
fn connection_specific(name: &str, value: &[u8]) -> bool {
    if name.eq_ignore_ascii_case("te") {
        return !value.eq_ignore_ascii_case(b"trailers");
    }
    [
        "host",
        "connection",
        "transfer-encoding",
        "upgrade",
        "te",
        "keep-alive",
        "proxy-connection",
    ]
    .iter()
    .any(|c| name.eq_ignore_ascii_case(c))
}

/// A stream in flight.
struct Stream {
    id: u32,
    /// The final status, once the head arrived (0 before).
    status: u16,
    /// The `grpc-status` its trailers (or a trailers-only head) carried.
    grpc: Option<u32>,
    /// Its body is kept (the answer is checked).
    keep: bool,
    body: Vec<u8>,
    /// DATA read and not yet given back by a WINDOW_UPDATE.
    unacked: u32,
    /// What it may still send (its send window).
    window: i64,
    /// Body bytes flow control held back, or the whole body of a queued
    /// stream (rare; allocated only then).
    rest: Vec<u8>,
    /// A queued stream's frames, written when the server's limit allows
    /// (empty once written).
    head: Vec<u8>,
}

/// What the server's SETTINGS said.
struct Peer {
    max_streams: usize,
    initial_window: i64,
    max_frame: usize,
}

/// Why a connection ends.
struct Broken(ErrorKind);

/// One HTTP/2 connection's wire state.
struct Wire {
    /// Frames to write, flushed once per turn.
    out: Vec<u8>,
    peer: Peer,
    /// The server's first SETTINGS arrived.
    settled: bool,
    /// What the connection may still send.
    send_window: i64,
    /// DATA read on the connection and not yet given back.
    unacked: u32,
    next_id: u32,
    encoder: hpack::Encoder,
    decoder: hpack::Decoder,
    /// A header block awaiting its CONTINUATION frames: its stream and
    /// whether it ends it.
    block_of: Option<(u32, bool)>,
    /// That block's fragments so far.
    block: Vec<u8>,
    /// Scratch for one request's header block.
    scratch: Vec<u8>,
    /// The streams in flight, in the book's order (ids rising).
    open: VecDeque<Stream>,
    /// Streams waiting for the server's stream limit: the last ones in
    /// `open`.
    queued: usize,
    /// GOAWAY arrived, or no stream id is left: open no more streams.
    closing: bool,
}

fn frame_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, id: u32) {
    let len = len as u32;
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&id.to_be_bytes());
}

/// Write the HEADERS frame (and CONTINUATION frames, above `max_frame`)
/// of header block `block` for stream `id`.
fn head_frames(out: &mut Vec<u8>, block: &[u8], id: u32, end_stream: bool, max_frame: usize) {
    let mut block = block;
    let mut kind = HEADERS;
    loop {
        let n = block.len().min(max_frame);
        let last = n == block.len();
        let mut flags = if last { END_HEADERS } else { 0 };
        if kind == HEADERS && end_stream {
            flags |= END_STREAM;
        }
        frame_head(out, n, kind, flags, id);
        out.extend_from_slice(&block[..n]);
        block = &block[n..];
        kind = CONTINUATION;
        if last {
            break;
        }
    }
}

/// Write DATA frames of `body` for stream `s` within its window and the
/// connection's (`window`), in frames of at most `max_frame`; the bytes
/// written. The frame that ends the body ends the stream.
fn send_data(
    out: &mut Vec<u8>,
    window: &mut i64,
    max_frame: usize,
    s: &mut Stream,
    body: &[u8],
) -> usize {
    let mut sent = 0;
    while sent < body.len() {
        let room = (*window).min(s.window).max(0) as usize;
        let n = (body.len() - sent).min(max_frame).min(room);
        if n == 0 {
            break;
        }
        let flags = if sent + n == body.len() {
            END_STREAM
        } else {
            0
        };
        frame_head(out, n, DATA, flags, s.id);
        out.extend_from_slice(&body[sent..sent + n]);
        *window -= n as i64;
        s.window -= n as i64;
        sent += n;
    }
    sent
}

/// Send what is left of `s`'s body (as [`send_data`]).
fn send_rest(out: &mut Vec<u8>, window: &mut i64, max_frame: usize, s: &mut Stream) {
    let rest = std::mem::take(&mut s.rest);
    let sent = send_data(out, window, max_frame, s, &rest);
    s.rest = rest;
    s.rest.drain(..sent);
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl Wire {
    fn new() -> Self {
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(PREFACE);
        // SETTINGS: ENABLE_PUSH 0, INITIAL_WINDOW_SIZE.
        frame_head(&mut out, 12, SETTINGS, 0, 0);
        out.extend_from_slice(&[0, 2, 0, 0, 0, 0, 0, 4]);
        out.extend_from_slice(&STREAM_WINDOW.to_be_bytes());
        frame_head(&mut out, 4, WINDOW_UPDATE, 0, 0);
        out.extend_from_slice(&(CONNECTION_WINDOW - DEFAULT_WINDOW as u32).to_be_bytes());
        Wire {
            out,
            peer: Peer {
                max_streams: usize::MAX,
                initial_window: DEFAULT_WINDOW,
                max_frame: MAX_FRAME,
            },
            settled: false,
            send_window: DEFAULT_WINDOW,
            unacked: 0,
            next_id: 1,
            encoder: hpack::Encoder::new(),
            decoder: hpack::Decoder::new(),
            block_of: None,
            block: Vec::new(),
            scratch: Vec::with_capacity(256),
            open: VecDeque::new(),
            queued: 0,
            closing: false,
        }
    }

    /// Open a stream for request `t`: write its frames, its body as far
    /// as flow control lets it go. Above the server's stream limit the
    /// stream waits in this connection's queue, its frames made (HPACK's
    /// order is the order of encoding) and written once a stream ends.
    fn open_stream(&mut self, t: &Template, https: bool, authority: &[u8], keep: bool) {
        let id = self.next_id;
        self.next_id += 2;
        if self.next_id > LAST_ID {
            self.closing = true;
        }
        self.scratch.clear();
        self.encoder.encode(
            &mut self.scratch,
            &t.method,
            https,
            authority,
            &t.path,
            &t.headers,
        );
        let mut s = Stream {
            id,
            status: 0,
            grpc: None,
            keep,
            body: Vec::new(),
            unacked: 0,
            window: self.peer.initial_window,
            rest: Vec::new(),
            head: Vec::new(),
        };
        let end = t.body.is_empty();
        if self.queued > 0 || self.open.len() >= self.peer.max_streams {
            head_frames(&mut s.head, &self.scratch, id, end, self.peer.max_frame);
            s.rest.extend_from_slice(&t.body);
            self.queued += 1;
            self.open.push_back(s);
            return;
        }
        head_frames(&mut self.out, &self.scratch, id, end, self.peer.max_frame);
        let sent = send_data(
            &mut self.out,
            &mut self.send_window,
            self.peer.max_frame,
            &mut s,
            &t.body,
        );
        s.rest.extend_from_slice(&t.body[sent..]);
        self.open.push_back(s);
    }

    /// Write the queued streams' frames while the server's limit has room.
    fn promote(&mut self) {
        while self.queued > 0 && self.open.len() - self.queued < self.peer.max_streams {
            let i = self.open.len() - self.queued;
            self.queued -= 1;
            let s = &mut self.open[i];
            self.out.extend_from_slice(&s.head);
            s.head = Vec::new();
            send_rest(&mut self.out, &mut self.send_window, self.peer.max_frame, s);
        }
    }

    /// Take the stream at position `i` out of `open`, keeping the counts.
    fn take(&mut self, i: usize) -> Stream {
        let s = self.open.remove(i).expect("a position in open");
        if !s.head.is_empty() {
            self.queued -= 1;
        }
        s
    }

    /// Send what flow control held back, now that a window grew (the
    /// queued streams wait for `promote`).
    fn send_held(&mut self) {
        for s in self.open.iter_mut() {
            if !s.rest.is_empty() && s.head.is_empty() {
                send_rest(&mut self.out, &mut self.send_window, self.peer.max_frame, s);
            }
        }
    }

    fn position(&self, id: u32) -> Option<usize> {
        self.open.binary_search_by_key(&id, |s| s.id).ok()
    }

    fn rst(&mut self, id: u32, code: u32) {
        frame_head(&mut self.out, 4, RST_STREAM, 0, id);
        self.out.extend_from_slice(&code.to_be_bytes());
    }

    fn window_update(&mut self, id: u32, n: u32) {
        frame_head(&mut self.out, 4, WINDOW_UPDATE, 0, id);
        self.out.extend_from_slice(&n.to_be_bytes());
    }
}

/// What a frame did to the streams in flight.
enum Outcome {
    Nothing,
    /// The stream at this position is answered.
    Answered(usize),
    /// The stream at this position is lost (RST_STREAM).
    Reset(usize),
    /// GOAWAY: streams above this id are refused.
    GoAway(u32),
}

/// The payload of a frame whose flags say it is padded, without the padding.
fn unpad(flags: u8, p: &[u8]) -> Result<&[u8], Broken> {
    if flags & PADDED == 0 {
        return Ok(p);
    }
    let pad = *p.first().ok_or(Broken(ErrorKind::Parse))? as usize;
    if pad + 1 > p.len() {
        return Err(Broken(ErrorKind::Parse));
    }
    Ok(&p[1..p.len() - pad])
}

impl Wire {
    /// Take one frame from the server.
    fn frame(&mut self, kind: u8, flags: u8, id: u32, p: &[u8]) -> Result<Outcome, Broken> {
        let parse = Broken(ErrorKind::Parse);
        if !self.settled && kind != SETTINGS {
            // The server's preface is a SETTINGS frame.
            return Err(parse);
        }
        if self.block_of.is_some() && kind != CONTINUATION {
            return Err(parse);
        }
        match kind {
            DATA => {
                if id == 0 {
                    return Err(parse);
                }
                self.unacked += p.len() as u32;
                if self.unacked >= CONNECTION_WINDOW / 2 {
                    let n = std::mem::take(&mut self.unacked);
                    self.window_update(0, n);
                }
                let data = unpad(flags, p)?;
                let Some(i) = self.position(id) else {
                    return Ok(Outcome::Nothing);
                };
                let s = &mut self.open[i];
                if s.status == 0 {
                    // DATA before a head.
                    return Err(parse);
                }
                if s.keep {
                    s.body.extend_from_slice(data);
                }
                if flags & END_STREAM != 0 {
                    return Ok(Outcome::Answered(i));
                }
                s.unacked += p.len() as u32;
                if s.unacked >= STREAM_WINDOW / 2 {
                    let n = std::mem::take(&mut s.unacked);
                    self.window_update(id, n);
                }
                Ok(Outcome::Nothing)
            }
            HEADERS => {
                if id == 0 {
                    return Err(parse);
                }
                let mut b = unpad(flags, p)?;
                if flags & PRIORITY != 0 {
                    b = b.get(5..).ok_or(Broken(ErrorKind::Parse))?;
                }
                let end = flags & END_STREAM != 0;
                if flags & END_HEADERS == 0 {
                    self.block_of = Some((id, end));
                    self.block.clear();
                    self.block.extend_from_slice(b);
                    return Ok(Outcome::Nothing);
                }
                let status = self
                    .decoder
                    .decode(b)
                    .map_err(|_| Broken(ErrorKind::Parse))?;
                let grpc = self.decoder.grpc_status();
                self.head(id, status, grpc, end)
            }
            CONTINUATION => {
                let Some((of, end)) = self.block_of else {
                    return Err(parse);
                };
                if of != id {
                    return Err(parse);
                }
                self.block.extend_from_slice(p);
                if flags & END_HEADERS == 0 {
                    return Ok(Outcome::Nothing);
                }
                self.block_of = None;
                let block = std::mem::take(&mut self.block);
                let status = self.decoder.decode(&block);
                self.block = block;
                let status = status.map_err(|_| Broken(ErrorKind::Parse))?;
                let grpc = self.decoder.grpc_status();
                self.head(id, status, grpc, end)
            }
            RST_STREAM => {
                if id == 0 || p.len() != 4 {
                    return Err(parse);
                }
                Ok(self.position(id).map_or(Outcome::Nothing, Outcome::Reset))
            }
            SETTINGS => {
                if id != 0 || (flags & ACK != 0 && !p.is_empty()) || p.len() % 6 != 0 {
                    return Err(parse);
                }
                if flags & ACK != 0 {
                    return Ok(Outcome::Nothing);
                }
                for s in p.chunks_exact(6) {
                    let value = u32_at(&s[2..]);
                    match u16::from_be_bytes([s[0], s[1]]) {
                        // HEADER_TABLE_SIZE: the loader's encoder needs no
                        // more than 4,096.
                        1 => self.encoder.set_max(value as usize),
                        3 => self.peer.max_streams = value as usize,
                        4 => {
                            if value > LAST_ID {
                                return Err(parse);
                            }
                            let delta = value as i64 - self.peer.initial_window;
                            self.peer.initial_window = value as i64;
                            for s in &mut self.open {
                                s.window += delta;
                            }
                        }
                        5 => {
                            if !(MAX_FRAME as u32..=(1 << 24) - 1).contains(&value) {
                                return Err(parse);
                            }
                            self.peer.max_frame = value as usize;
                        }
                        _ => {}
                    }
                }
                self.settled = true;
                frame_head(&mut self.out, 0, SETTINGS, ACK, 0);
                self.send_held();
                Ok(Outcome::Nothing)
            }
            PUSH_PROMISE => Err(parse), // push is off
            PING => {
                if id != 0 || p.len() != 8 {
                    return Err(parse);
                }
                if flags & ACK == 0 {
                    frame_head(&mut self.out, 8, PING, ACK, 0);
                    self.out.extend_from_slice(p);
                }
                Ok(Outcome::Nothing)
            }
            GOAWAY => {
                if id != 0 || p.len() < 8 {
                    return Err(parse);
                }
                self.closing = true;
                Ok(Outcome::GoAway(u32_at(p) & LAST_ID))
            }
            WINDOW_UPDATE => {
                if p.len() != 4 {
                    return Err(parse);
                }
                let n = (u32_at(p) & LAST_ID) as i64;
                if id == 0 {
                    if n == 0 {
                        return Err(parse);
                    }
                    self.send_window += n;
                } else if let Some(i) = self.position(id) {
                    self.open[i].window += n;
                }
                self.send_held();
                Ok(Outcome::Nothing)
            }
            // PRIORITY, and types this client does not know, are ignored.
            _ => Ok(Outcome::Nothing),
        }
    }

    /// A header block for stream `id` was read: a head (final or interim)
    /// or trailers, with the `grpc-status` it carried.
    fn head(
        &mut self,
        id: u32,
        status: hpack::Status,
        grpc: Option<u32>,
        end: bool,
    ) -> Result<Outcome, Broken> {
        let Some(i) = self.position(id) else {
            return Ok(Outcome::Nothing);
        };
        let s = &mut self.open[i];
        if grpc.is_some() {
            s.grpc = grpc;
        }
        match status {
            // Interim (1xx): the final head is still to come.
            Some(code) if code < 200 => {}
            Some(code) if s.status == 0 => s.status = code,
            // A second status, or trailers before a head.
            Some(_) => return Err(Broken(ErrorKind::Parse)),
            None if s.status == 0 => return Err(Broken(ErrorKind::Parse)),
            None => {}
        }
        if end {
            if s.status == 0 {
                return Err(Broken(ErrorKind::Parse));
            }
            return Ok(Outcome::Answered(i));
        }
        Ok(Outcome::Nothing)
    }
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
        S: AsyncRead + AsyncWrite + Unpin,
    {
        w.opened(self.local, first, at);
        self.free_at = now_ns();
        let frames = Rc::new(Traffic::default());
        let io = Counted {
            inner: io,
            traffic: Rc::clone(&frames),
        };
        let traffic = socket.unwrap_or(frames);
        let mut marks = Marks::new(&traffic);
        let mut rbuf = std::mem::take(&mut self.rbuf);
        let end = self.drive_h2(w, io, &mut rbuf, &mut marks).await;
        self.rbuf = rbuf;
        marks.count(w, now_ns());
        end
    }

    async fn drive_h2<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        w: &Worker,
        mut io: S,
        rbuf: &mut Vec<u8>,
        marks: &mut Marks<'_>,
    ) -> ConnEnd {
        let plan = &*w.plan;
        let streams = plan.streams.max(1);
        let https = plan.tls.is_some();
        // gRPC: every answer is judged by its grpc-status and its message.
        let grpc = plan.set.is_grpc();
        let mut requests = Requests::new();
        let mut c = Wire::new();
        let (mut start, mut end) = (0usize, 0usize);
        // When a stream last ended (answered or refused), ns.
        let mut last_end = 0u64;
        // The server's SETTINGS must come within the connect timeout.
        let settle_by = tokio::time::Instant::now() + plan.connect_timeout;
        loop {
            // 1. Write the queued streams the server's limit now takes,
            // and open the streams that may be opened now.
            c.promote();
            let mut pace_deadline = 0u64;
            while c.settled && !c.closing && self.inflight_len() < streams {
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
                                if !c.out.is_empty() {
                                    // Nothing may wait in the buffer while
                                    // the connection paces.
                                    if write_flushed(&mut io, &c.out).await.is_err() {
                                        w.stray_error(ErrorKind::Write, now_ns());
                                        return ConnEnd::Reconnect;
                                    }
                                    c.out.clear();
                                }
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
                // Made before the record, which describes the request just
                // generated when it is checked.
                let made = requests.make(self.gen.next(1)).is_some();
                let sent = now_ns();
                let f = self.record(
                    w,
                    0,
                    if plan.rate.is_some() { sched } else { sent },
                    sent,
                    window,
                );
                let keep = f.check.is_some() || grpc;
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
                match requests.made.as_ref().filter(|_| made) {
                    Some(t) => {
                        self.push(f);
                        c.open_stream(t, https, plan.authority.as_bytes(), keep);
                    }
                    None => {
                        // Not a request HTTP/2 can carry: lost as a write
                        // error, never sent.
                        w.lost(&f, ErrorKind::Write, now_ns());
                    }
                }
            }
            if !c.out.is_empty() {
                if write_flushed(&mut io, &c.out).await.is_err() {
                    let now = now_ns();
                    if self.inflight_len() == 0 {
                        w.stray_error(ErrorKind::Write, now);
                    }
                    self.lose_inflight(w, ErrorKind::Write, now);
                    return ConnEnd::Reconnect;
                }
                c.out.clear();
            }
            if c.settled && self.inflight_len() == 0 {
                if c.closing {
                    return ConnEnd::Reconnect;
                }
                if pace_deadline == 0 {
                    // Nothing in flight and nothing more may be sent.
                    return ConnEnd::Finished;
                }
            }

            // 2. Wait for bytes, the next request's due time, or a timeout.
            if start > 0 && (end == rbuf.len() || start == end) {
                rbuf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            if end == rbuf.len() {
                // A frame larger than the buffer: room for the largest.
                rbuf.resize((rbuf.len() * 2).min(MAX_FRAME + 9).max(rbuf.len() + 1), 0);
            }
            let (deadline, pace) = self.arm(w, pace_deadline);
            // Made lazily: select! builds every branch's future on every
            // turn, and a Sleep built per read would cost the hot path.
            let unsettled = !c.settled;
            let settle = async move {
                if unsettled {
                    tokio::time::sleep_until(settle_by).await
                } else {
                    std::future::pending().await
                }
            };
            let read = tokio::select! {
                biased;
                r = io.read(&mut rbuf[end..]) => r,
                () = TimeoutWatch { w, slot: self.local } => {
                    let now = now_ns();
                    if now < deadline {
                        continue;
                    }
                    if last_end < deadline - plan.timeout_ns {
                        // No stream ended since the oldest was sent, a whole
                        // timeout ago: the connection is dead or the server
                        // stuck on it. Make another, as HTTP/1.1 does.
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
                                Some(f) if now >= f.sent + plan.timeout_ns => b.inflight.pop_front(),
                                _ => None,
                            }
                        };
                        let Some(f) = f else { break };
                        if !c.open.is_empty() {
                            let s = c.take(0);
                            if s.head.is_empty() {
                                // Sent: cancel it. (A queued one never was.)
                                c.rst(s.id, CANCEL);
                            }
                        }
                        w.lost(&f, ErrorKind::Timeout, now);
                    }
                    continue;
                }
                () = pace => continue,
                () = settle => {
                    // No SETTINGS: the server does not speak HTTP/2 here.
                    w.stray_error(ErrorKind::Read, now_ns());
                    return ConnEnd::Reconnect;
                }
            };
            let now = now_ns();
            match read {
                Ok(0) => {
                    // Closed. Closing an idle connection is allowed;
                    // closing it on streams in flight loses them.
                    marks.count(w, now);
                    self.lose_inflight(w, ErrorKind::Read, now);
                    return ConnEnd::Reconnect;
                }
                Ok(n) => end += n,
                Err(_) => {
                    if self.inflight_len() == 0 {
                        w.stray_error(ErrorKind::Read, now);
                    }
                    self.lose_inflight(w, ErrorKind::Read, now);
                    return ConnEnd::Reconnect;
                }
            }

            // 3. Take every complete frame in the buffer.
            while end - start >= 9 {
                let h = &rbuf[start..start + 9];
                let len = (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize;
                if len > MAX_FRAME {
                    self.lose_inflight(w, ErrorKind::Parse, now);
                    return ConnEnd::Reconnect;
                }
                if end - start < 9 + len {
                    break;
                }
                let (kind, flags, id) = (h[3], h[4], u32_at(&h[5..]) & LAST_ID);
                let p = &rbuf[start + 9..start + 9 + len];
                start += 9 + len;
                match c.frame(kind, flags, id, p) {
                    Ok(Outcome::Nothing) => {}
                    Ok(Outcome::Answered(i)) => {
                        let s = c.take(i);
                        if !s.rest.is_empty() {
                            // Answered before its whole body was sent.
                            c.rst(s.id, 0);
                        }
                        let f = self.book.borrow_mut().inflight.remove(i);
                        if let Some(f) = f {
                            let outcome = if grpc {
                                Answer::Rpc {
                                    status: s.status,
                                    grpc_status: s.grpc,
                                    body: &s.body,
                                }
                            } else {
                                Answer::Http {
                                    status: s.status,
                                    body: &s.body,
                                }
                            };
                            w.settled(self.local, &f, now, outcome, marks.answered());
                            self.free_at = now;
                        }
                        last_end = now;
                    }
                    Ok(Outcome::Reset(i)) => {
                        c.take(i);
                        let f = self.book.borrow_mut().inflight.remove(i);
                        if let Some(f) = f {
                            w.lost(&f, ErrorKind::Read, now);
                        }
                        last_end = now;
                    }
                    Ok(Outcome::GoAway(last)) => {
                        // The streams above `last` were never processed.
                        while c.open.back().is_some_and(|s| s.id > last) {
                            c.take(c.open.len() - 1);
                            let f = self.book.borrow_mut().inflight.pop_back();
                            if let Some(f) = f {
                                w.lost(&f, ErrorKind::Read, now);
                            }
                            last_end = now;
                        }
                    }
                    Err(Broken(kind)) => {
                        marks.count(w, now);
                        if self.inflight_len() == 0 {
                            w.stray_error(kind, now);
                        }
                        self.lose_inflight(w, kind, now);
                        return ConnEnd::Reconnect;
                    }
                }
            }
            if c.settled && c.peer.max_streams < streams {
                let mut s = w.stats.borrow_mut();
                let limit = c.peer.max_streams;
                s.h2_stream_limit = Some(s.h2_stream_limit.map_or(limit, |l| l.min(limit)));
            }
            marks.count(w, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Protocol;

    #[test]
    fn alpn_must_agree_h2_and_https_takes_http11_or_nothing() {
        use super::super::connect::alpn_refused as refused;
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
        let mut r = Requests::new();
        let wire = b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: keep-alive\r\n\
                     X-Custom: A\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
        let t = r.make(wire).unwrap();
        assert_eq!(t.method, b"POST");
        assert_eq!(t.path, b"/echo");
        let names: Vec<&[u8]> = t.headers.iter().map(|(n, _)| n.as_slice()).collect();
        assert_eq!(
            names,
            [&b"x-custom"[..], b"content-type", b"content-length"]
        );
        assert_eq!(t.headers[0].1, b"A");
        assert_eq!(t.body, b"{\"a\":1}");
        // The same bytes again: the same request, read back once.
        assert_eq!(r.make(wire).unwrap().path, b"/echo");
        let get = r
            .make(b"GET /users/42 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
            .unwrap();
        assert_eq!(get.path, b"/users/42");
        assert!(get.headers.is_empty() && get.body.is_empty());
        assert!(r.make(b"GET / HTTP/1.1\r\nHost").is_none());
        // `te: trailers` stays (gRPC requires it); any other te goes.
        let call = r
            .make(b"POST /s/M HTTP/1.1\r\nTE: trailers\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert_eq!(call.headers[0], (b"te".to_vec(), b"trailers".to_vec()));
        let other = r
            .make(b"POST /s/M HTTP/1.1\r\nTE: gzip\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        assert!(other.headers.iter().all(|(n, _)| n != b"te"));
    }

    /// The frames of one connection, as a server would read them.
    fn frames(mut b: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        let mut out = Vec::new();
        while b.len() >= 9 {
            let len = (b[0] as usize) << 16 | (b[1] as usize) << 8 | b[2] as usize;
            out.push((b[3], b[4], u32_at(&b[5..]), b[9..9 + len].to_vec()));
            b = &b[9 + len..];
        }
        assert!(b.is_empty());
        out
    }

    fn settled() -> Wire {
        let mut c = Wire::new();
        assert!(c.out.starts_with(PREFACE));
        c.out.clear();
        assert!(matches!(c.frame(SETTINGS, 0, 0, &[]), Ok(Outcome::Nothing)));
        assert_eq!(frames(&c.out), [(SETTINGS, ACK, 0, vec![])]);
        c.out.clear();
        c
    }

    #[test]
    fn bodies_wait_for_flow_control_and_blocks_split_at_the_frame_size() {
        let mut c = settled();
        let body = vec![b'x'; 70_000];
        let t = Template {
            method: b"POST".to_vec(),
            path: b"/echo".to_vec(),
            headers: vec![(b"x-long".to_vec(), vec![b'v'; 20_000])],
            body: body.clone(),
        };
        c.open_stream(&t, false, b"a:1", false);
        let f = frames(&c.out);
        // HEADERS without END_HEADERS, one CONTINUATION, then 65,535 bytes
        // of DATA in frames of 16,384 (the default window) and no more.
        assert_eq!((f[0].0, f[0].1, f[0].2), (HEADERS, 0, 1));
        assert_eq!((f[1].0, f[1].1), (CONTINUATION, END_HEADERS));
        let data: Vec<_> = f[2..].iter().map(|x| (x.0, x.1, x.3.len())).collect();
        assert_eq!(
            data,
            [
                (DATA, 0, 16_384),
                (DATA, 0, 16_384),
                (DATA, 0, 16_384),
                (DATA, 0, 16_383)
            ]
        );
        assert_eq!(c.open[0].rest.len(), 70_000 - 65_535);
        c.out.clear();
        // The connection's window grows: still the stream's holds it back.
        c.frame(WINDOW_UPDATE, 0, 0, &100_000u32.to_be_bytes())
            .ok()
            .unwrap();
        assert!(c.out.is_empty());
        c.frame(WINDOW_UPDATE, 0, 1, &100_000u32.to_be_bytes())
            .ok()
            .unwrap();
        let f = frames(&c.out);
        assert_eq!(
            (f[0].0, f[0].1, f[0].3.len()),
            (DATA, END_STREAM, 70_000 - 65_535)
        );
        assert!(c.open[0].rest.is_empty());
    }

    #[test]
    fn streams_above_the_servers_limit_wait_their_turn_in_order() {
        let mut c = Wire::new();
        c.out.clear();
        // SETTINGS_MAX_CONCURRENT_STREAMS = 1.
        c.frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 1]).ok().unwrap();
        c.out.clear();
        let t = Template {
            method: b"POST".to_vec(),
            path: b"/echo".to_vec(),
            headers: vec![(b"x-a".to_vec(), b"b".to_vec())],
            body: b"{}".to_vec(),
        };
        for _ in 0..3 {
            c.open_stream(&t, false, b"a:1", false);
        }
        let f = frames(&c.out);
        assert_eq!(
            f.iter().map(|x| (x.0, x.2)).collect::<Vec<_>>(),
            [(HEADERS, 1), (DATA, 1)]
        );
        assert_eq!(c.queued, 2);
        c.out.clear();
        // Stream 1 ends: stream 3 goes out, its header block the second
        // one encoded (the table's entries are indexed, not repeated).
        c.frame(HEADERS, END_HEADERS | END_STREAM, 1, &[0x88])
            .ok()
            .unwrap();
        c.take(0);
        c.promote();
        let f = frames(&c.out);
        assert_eq!(
            f.iter().map(|x| (x.0, x.1, x.2)).collect::<Vec<_>>(),
            [(HEADERS, END_HEADERS, 3), (DATA, END_STREAM, 3)]
        );
        assert_eq!(
            &f[0].3[..],
            [
                0x83,
                0x86,
                0x04,
                5,
                b'/',
                b'e',
                b'c',
                b'h',
                b'o',
                0x80 | 63,
                0x80 | 62
            ]
        );
        assert_eq!(c.queued, 1);
        // A queued stream that times out leaves without a RST_STREAM.
        c.out.clear();
        let s = c.take(1);
        assert!(!s.head.is_empty());
        assert_eq!(c.queued, 0);
    }

    #[test]
    fn answers_resets_goaway_and_protocol_errors() {
        let mut c = settled();
        let t = Template {
            method: b"GET".to_vec(),
            path: b"/".to_vec(),
            ..Template::default()
        };
        for _ in 0..3 {
            c.open_stream(&t, false, b"a:1", true);
        }
        c.out.clear();
        // Stream 3: an interim head, the final one, DATA, END_STREAM.
        assert!(matches!(
            c.frame(HEADERS, END_HEADERS, 3, &[0x08, 0x03, b'1', b'0', b'3']),
            Ok(Outcome::Nothing)
        ));
        assert!(matches!(
            c.frame(HEADERS, END_HEADERS, 3, &[0x88]),
            Ok(Outcome::Nothing)
        ));
        // Padded DATA: one byte of padding length, two of padding.
        assert!(matches!(
            c.frame(DATA, PADDED, 3, &[2, b'h', b'i', 0, 0]),
            Ok(Outcome::Nothing)
        ));
        assert!(matches!(
            c.frame(DATA, END_STREAM, 3, b"!"),
            Ok(Outcome::Answered(1))
        ));
        assert_eq!(c.open[1].body, b"hi!");
        assert_eq!(c.open[1].status, 200);
        c.open.remove(1);
        // Stream 1 reset; stream 5 refused by GOAWAY (last id 1).
        assert!(matches!(
            c.frame(RST_STREAM, 0, 1, &[0, 0, 0, 2]),
            Ok(Outcome::Reset(0))
        ));
        let mut goaway = 1u32.to_be_bytes().to_vec();
        goaway.extend_from_slice(&[0; 4]);
        assert!(matches!(
            c.frame(GOAWAY, 0, 0, &goaway),
            Ok(Outcome::GoAway(1))
        ));
        assert!(c.closing);
        // A PING is answered; DATA before a head, or a frame between a
        // HEADERS and its CONTINUATION, breaks the connection.
        c.frame(PING, 0, 0, b"12345678").ok().unwrap();
        assert_eq!(frames(&c.out), [(PING, ACK, 0, b"12345678".to_vec())]);
        assert!(matches!(
            c.frame(DATA, 0, 5, b"x"),
            Err(Broken(ErrorKind::Parse))
        ));
        assert!(matches!(
            c.frame(HEADERS, 0, 5, &[0x88]),
            Ok(Outcome::Nothing)
        ));
        assert!(matches!(
            c.frame(PING, 0, 0, b"12345678"),
            Err(Broken(ErrorKind::Parse))
        ));
        // The server's first frame must be SETTINGS.
        assert!(matches!(
            Wire::new().frame(PING, 0, 0, b"12345678"),
            Err(Broken(ErrorKind::Parse))
        ));
    }
}
