//! Incremental HTTP/1.1 response framing for the loader's hot path.
//!
//! Owns: finding where each response ends in a byte stream (status line and
//! headers via `httparse`, then a Content-Length body, a chunked body, or a
//! body that runs to connection close) without copying or allocating. Bodies
//! are skipped as they arrive, never buffered: only an incomplete head or an
//! incomplete chunk-size line has to stay in the caller's buffer. The one
//! exception is a response the caller asks to capture ([`ResponseParser::
//! capture_next`]): its body is copied aside so the caller can check it.
//!
//! Must not: do I/O, keep statistics, or judge body contents.

use std::mem::MaybeUninit;

/// Most headers a response may carry. middleware-64 answers carry 64 `x-mw-*`
/// headers plus the usual few, so this leaves headroom; more is a parse error.
pub const MAX_HEADERS: usize = 128;

/// Why a response could not be framed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("malformed response head: {0}")]
    Head(httparse::Error),
    #[error("response has no status code")]
    NoStatus,
    #[error("invalid Content-Length header")]
    ContentLength,
    #[error("invalid chunk size line")]
    ChunkSize,
    #[error("invalid chunk terminator")]
    ChunkTerminator,
}

/// One step of framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// `used` bytes were consumed and a response ended with them.
    Complete {
        /// Bytes consumed from the slice given to [`ResponseParser::feed`].
        used: usize,
        /// HTTP status code.
        status: u16,
        /// Bytes of the whole response on the wire (head, body, framing).
        wire_bytes: u64,
        /// The server said it will close the connection after this response.
        close: bool,
    },
    /// `used` bytes were consumed; the response is not finished. Bytes past
    /// `used` must be kept and fed again together with more data.
    NeedMore {
        /// Bytes consumed from the slice given to [`ResponseParser::feed`].
        used: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    /// Fixed-length body: bytes still to skip.
    Body(u64),
    /// Waiting for a chunk-size line.
    ChunkSize,
    /// Inside a chunk: data bytes plus its CRLF still to skip.
    ChunkData(u64),
    /// After the last chunk: trailer lines until an empty one.
    Trailers,
    /// No length given: the body ends when the server closes.
    UntilClose,
}

/// Framing state of the response currently arriving on one connection.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    state: State,
    status: u16,
    close: bool,
    wire_bytes: u64,
    /// Copy the body of the response being parsed into `body`.
    capture: bool,
    /// The captured body (decoded from chunks), kept until the next capture.
    body: Vec<u8>,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseParser {
    /// A parser waiting for the first byte of a response.
    pub fn new() -> Self {
        Self {
            state: State::Head,
            status: 0,
            close: false,
            wire_bytes: 0,
            capture: false,
            body: Vec::new(),
        }
    }

    /// Copy the body of the next response aside (call between responses,
    /// when [`Self::in_progress`] is false); read it with [`Self::body`]
    /// once that response is complete.
    #[inline]
    pub fn capture_next(&mut self, on: bool) {
        self.capture = on;
        if on {
            self.body.clear();
        }
    }

    /// The body of the last captured response.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Reset to wait for a new response, keeping the capture buffer.
    fn reset(&mut self) {
        self.state = State::Head;
        self.status = 0;
        self.close = false;
        self.wire_bytes = 0;
        self.capture = false;
    }

    /// Whether a response has begun but not ended.
    pub fn in_progress(&self) -> bool {
        self.state != State::Head || self.wire_bytes != 0
    }

    /// Whether the current response ends only when the server closes.
    pub fn reads_until_close(&self) -> bool {
        self.state == State::UntilClose
    }

    /// The server closed the connection: end a close-delimited body. Returns
    /// the finished response's status and size, or `None` if the close cut
    /// a response short (a read error for the caller).
    pub fn finish_on_close(&mut self) -> Option<(u16, u64)> {
        if self.state == State::UntilClose {
            let done = (self.status, self.wire_bytes);
            self.reset();
            Some(done)
        } else {
            None
        }
    }

    /// Consume as much of `buf` as possible. `head_request` says the request
    /// was HEAD (its answer has no body whatever the headers say).
    pub fn feed(&mut self, buf: &[u8], head_request: bool) -> Result<Parsed, ParseError> {
        let mut used = 0usize;
        loop {
            let rest = &buf[used..];
            match self.state {
                State::Head => {
                    if rest.is_empty() {
                        return Ok(Parsed::NeedMore { used });
                    }
                    let mut headers: [MaybeUninit<httparse::Header<'_>>; MAX_HEADERS] =
                        [const { MaybeUninit::uninit() }; MAX_HEADERS];
                    let mut resp = httparse::Response::new(&mut []);
                    let n = match httparse::ParserConfig::default()
                        .parse_response_with_uninit_headers(&mut resp, rest, &mut headers)
                    {
                        Ok(httparse::Status::Complete(n)) => n,
                        Ok(httparse::Status::Partial) => return Ok(Parsed::NeedMore { used }),
                        Err(e) => return Err(ParseError::Head(e)),
                    };
                    let status = resp.code.ok_or(ParseError::NoStatus)?;
                    let mut content_length: Option<u64> = None;
                    let mut chunked = false;
                    // HTTP/1.0 closes unless it says otherwise; we never ask it to.
                    let mut close = resp.version == Some(0);
                    for h in resp.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            let v = std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|s| s.trim().parse::<u64>().ok())
                                .ok_or(ParseError::ContentLength)?;
                            if content_length.is_some_and(|c| c != v) {
                                return Err(ParseError::ContentLength);
                            }
                            content_length = Some(v);
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = ends_with_chunked(h.value);
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            close = contains_token(h.value, b"close");
                        }
                    }
                    used += n;
                    self.wire_bytes += n as u64;
                    if (100..200).contains(&status) {
                        // Interim response (100 Continue): not the answer.
                        self.wire_bytes = 0;
                        continue;
                    }
                    self.status = status;
                    self.close = close;
                    let bodiless = head_request || status == 204 || status == 304;
                    self.state = if bodiless {
                        State::Body(0)
                    } else if chunked {
                        State::ChunkSize
                    } else if let Some(len) = content_length {
                        State::Body(len)
                    } else {
                        State::UntilClose
                    };
                }
                State::Body(remaining) => {
                    let take = remaining.min(rest.len() as u64);
                    if self.capture {
                        self.body.extend_from_slice(&rest[..take as usize]);
                    }
                    used += take as usize;
                    self.wire_bytes += take;
                    if take == remaining {
                        return Ok(self.complete(used));
                    }
                    self.state = State::Body(remaining - take);
                    return Ok(Parsed::NeedMore { used });
                }
                State::ChunkSize => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((n, size))) => {
                        used += n;
                        self.wire_bytes += n as u64;
                        self.state = if size == 0 {
                            State::Trailers
                        } else {
                            State::ChunkData(size.checked_add(2).ok_or(ParseError::ChunkSize)?)
                        };
                    }
                    Ok(httparse::Status::Partial) => return Ok(Parsed::NeedMore { used }),
                    Err(_) => return Err(ParseError::ChunkSize),
                },
                State::ChunkData(remaining) => {
                    if remaining <= 2 {
                        // The CRLF after the data: check it rather than trust it.
                        let need = remaining as usize;
                        let want = &b"\r\n"[2 - need..];
                        let have = rest.len().min(need);
                        if rest[..have] != want[..have] {
                            return Err(ParseError::ChunkTerminator);
                        }
                        used += have;
                        self.wire_bytes += have as u64;
                        if have < need {
                            self.state = State::ChunkData((need - have) as u64);
                            return Ok(Parsed::NeedMore { used });
                        }
                        self.state = State::ChunkSize;
                        continue;
                    }
                    let take = (remaining - 2).min(rest.len() as u64);
                    if self.capture {
                        self.body.extend_from_slice(&rest[..take as usize]);
                    }
                    used += take as usize;
                    self.wire_bytes += take;
                    self.state = State::ChunkData(remaining - take);
                    if take as usize == rest.len() {
                        return Ok(Parsed::NeedMore { used });
                    }
                }
                State::Trailers => match memchr_crlf(rest) {
                    Some(i) => {
                        used += i + 2;
                        self.wire_bytes += i as u64 + 2;
                        if i == 0 {
                            return Ok(self.complete(used));
                        }
                    }
                    None => return Ok(Parsed::NeedMore { used }),
                },
                State::UntilClose => {
                    if self.capture {
                        self.body.extend_from_slice(rest);
                    }
                    used += rest.len();
                    self.wire_bytes += rest.len() as u64;
                    return Ok(Parsed::NeedMore { used });
                }
            }
        }
    }

    fn complete(&mut self, used: usize) -> Parsed {
        let step = Parsed::Complete {
            used,
            status: self.status,
            wire_bytes: self.wire_bytes,
            close: self.close,
        };
        self.reset();
        step
    }
}

fn memchr_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

fn ends_with_chunked(value: &[u8]) -> bool {
    value
        .rsplit(|&b| b == b',')
        .next()
        .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `input` in pieces of `step` bytes, keeping unconsumed bytes the
    /// way the connection does; returns every completed (status, wire bytes).
    fn frame(input: &[u8], step: usize) -> Result<Vec<(u16, u64)>, ParseError> {
        let mut p = ResponseParser::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            pending.extend_from_slice(piece);
            let mut start = 0;
            loop {
                match p.feed(&pending[start..], false)? {
                    Parsed::Complete {
                        used,
                        status,
                        wire_bytes,
                        ..
                    } => {
                        start += used;
                        out.push((status, wire_bytes));
                    }
                    Parsed::NeedMore { used } => {
                        start += used;
                        break;
                    }
                }
            }
            pending.drain(..start);
        }
        Ok(out)
    }

    #[test]
    fn frames_content_length_responses_split_at_every_byte() {
        let one = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";
        let two = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        let input = [&one[..], &two[..]].concat();
        for step in 1..input.len() {
            let got = frame(&input, step).unwrap();
            let want = vec![(200, one.len() as u64), (404, two.len() as u64)];
            assert_eq!(got, want, "step {step}");
        }
    }

    #[test]
    fn frames_chunked_bodies_with_trailers_split_at_every_byte() {
        let first: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHello\r\n8;ext=1\r\n, World!\r\n0\r\nX-T: 1\r\n\r\n";
        let second: &[u8] =
            b"HTTP/1.1 201 Created\r\ntransfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n";
        let input = [first, second].concat();
        for step in 1..input.len() {
            let got = frame(&input, step).unwrap();
            let want = vec![(200, first.len() as u64), (201, second.len() as u64)];
            assert_eq!(got, want, "step {step}");
        }
    }

    #[test]
    fn rejects_bad_chunk_terminator_and_bad_status_line() {
        let bad_chunk = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY";
        assert_eq!(frame(bad_chunk, 64), Err(ParseError::ChunkTerminator));
        assert!(matches!(
            frame(b"HTTP/1.1 abc OK\r\n\r\n", 64),
            Err(ParseError::Head(_))
        ));
        assert_eq!(
            frame(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 64),
            Err(ParseError::ContentLength)
        );
    }

    #[test]
    fn skips_interim_responses_and_honours_connection_close() {
        let mut p = ResponseParser::new();
        let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
        match p.feed(input, false).unwrap() {
            Parsed::Complete {
                used,
                status,
                close,
                wire_bytes,
            } => {
                assert_eq!((used, status, close), (input.len(), 200, true));
                assert_eq!(wire_bytes, (input.len() - 25) as u64);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn close_delimited_body_ends_at_close_and_head_has_no_body() {
        let mut p = ResponseParser::new();
        let input = b"HTTP/1.1 200 OK\r\n\r\nsome body";
        assert_eq!(
            p.feed(input, false).unwrap(),
            Parsed::NeedMore { used: input.len() }
        );
        assert_eq!(p.finish_on_close(), Some((200, input.len() as u64)));
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";
        assert!(matches!(
            ResponseParser::new().feed(head, true).unwrap(),
            Parsed::Complete { status: 200, .. }
        ));
    }

    #[test]
    fn captures_the_body_only_when_asked_chunked_or_not() {
        let mut p = ResponseParser::new();
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert!(matches!(p.feed(plain, false), Ok(Parsed::Complete { .. })));
        assert!(p.body().is_empty());
        p.capture_next(true);
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert!(matches!(
            p.feed(chunked, false),
            Ok(Parsed::Complete { .. })
        ));
        assert_eq!(p.body(), b"abcde");
        // Split over two reads.
        p.capture_next(true);
        let Ok(Parsed::NeedMore { used }) = p.feed(&plain[..40], false) else {
            panic!("a partial body needs more")
        };
        assert!(matches!(
            p.feed(&plain[used..], false),
            Ok(Parsed::Complete { .. })
        ));
        assert_eq!(p.body(), b"hello");
    }
}
