//! A small raw HTTP/1.1 client for contract checks.
//!
//! Why raw and not hyper's client: verify must see what a framework really put
//! on the wire (status line, header order and spelling, Content-Length versus
//! the bytes that followed, chunked framing, bytes per response) and must be
//! able to pipeline, which hyper's client never does. So this client writes
//! request bytes itself and parses answers with `httparse`.
//!
//! Every read and write is bounded by a deadline; a server that hangs yields
//! [`ClientError::Timeout`] naming what was awaited, never a hung verifier.
//! This module only speaks HTTP; judging answers is `verify::checks`' job.
//!
//! One responsibility, one file: a strict HTTP/1.1 client that reports
//! exactly what came over the wire; its tests sit beside it. The wire is any
//! byte stream ([`Io`]): plain TCP for `http1`, a TLS stream for `https`
//! (opened by `verify::tls`). HTTP/2 answers are converted into the same
//! [`Response`] by `verify::h2`, so one set of judgements serves every
//! protocol.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::contract;

/// Largest response head accepted; anything bigger is not a sane answer.
const MAX_HEAD: usize = 64 * 1024;
/// Largest response body accepted (echo answers are at most 64 KiB; leave room).
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;
/// Most header lines parsed in one response (middleware-64 needs 64 + a few).
const MAX_HEADERS: usize = 256;

/// A byte stream a connection runs over: TCP, or TLS over TCP.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Why a request got no complete answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TCP connection could not be opened.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// Address tried.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The deadline passed while waiting for `what`.
    #[error("timed out after {} waiting for {what}", fmt_duration(*.after))]
    Timeout {
        /// The per-request timeout that elapsed.
        after: Duration,
        /// What was awaited, with the progress so far.
        what: String,
    },
    /// The server closed the connection before a complete answer.
    #[error("the server closed the connection {what}")]
    Closed {
        /// At which point (and how many bytes had arrived).
        what: String,
    },
    /// The bytes received are not a valid HTTP/1.x response.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// The head arrived (with `status`) but the body did not come as framed.
    #[error("{source}")]
    Body {
        /// Status code of the head that did arrive.
        status: u16,
        /// What went wrong reading the body.
        source: Box<ClientError>,
    },
    /// The TLS handshake failed (certificate, ALPN, or not TLS at all);
    /// `why` names the cause.
    #[error("TLS handshake with {addr} failed: {why}")]
    Tls {
        /// Address of the server.
        addr: SocketAddr,
        /// The cause, explained.
        why: String,
    },
    /// The server does not speak HTTP/2 as asked, or broke the HTTP/2
    /// protocol (a connection or stream error).
    #[error("HTTP/2: {0}")]
    Http2(String),
    /// Any other socket error.
    #[error("I/O error {what}: {source}")]
    Io {
        /// At which point.
        what: &'static str,
        /// What the OS said.
        source: std::io::Error,
    },
}

impl ClientError {
    /// Whether this is a timeout (the server hung).
    pub fn is_timeout(&self) -> bool {
        match self {
            ClientError::Timeout { .. } => true,
            ClientError::Body { source, .. } => source.is_timeout(),
            _ => false,
        }
    }

    /// Whether the head arrived and only the body's framing went wrong.
    pub fn is_framing(&self) -> bool {
        matches!(self, ClientError::Body { .. })
    }
}

/// Durations in messages: `500ms`, `5s`, `1.5s`.
pub fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// How the body of a response was delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framing {
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body runs until the server closes the connection.
    Close,
    /// No body by definition (1xx, 204, 304).
    Empty,
    /// HTTP/2: DATA frames ended by END_STREAM. The HTTP/2 client checks a
    /// Content-Length, when sent, against the DATA received (RFC 9113
    /// §8.1.1) and fails the stream when they differ.
    Http2,
}

impl fmt::Display for Framing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Framing::Length(n) => write!(f, "Content-Length {n}"),
            Framing::Chunked => f.write_str("chunked"),
            Framing::Close => f.write_str("close-delimited"),
            Framing::Empty => f.write_str("no body"),
            Framing::Http2 => f.write_str("HTTP/2 DATA frames"),
        }
    }
}

/// One complete response as it came off the wire.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Reason phrase as sent.
    pub reason: String,
    /// `1` for HTTP/1.1, `0` for HTTP/1.0; `1` for HTTP/2 answers too,
    /// which [`Response::is_http2`] tells apart.
    pub minor_version: u8,
    /// Header lines in wire order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body after de-chunking.
    pub body: Vec<u8>,
    /// How the body was delimited.
    pub framing: Framing,
    /// Whether the response carried both Content-Length and chunked encoding
    /// (forbidden by RFC 9112 §6.3: a request-smuggling hazard).
    pub length_and_chunked: bool,
    /// Bytes of the status line and headers, final blank line included.
    pub head_bytes: usize,
    /// Bytes of the whole response on the wire (head + framed body).
    pub wire_bytes: usize,
    /// HTTP/2 trailers (gRPC's `grpc-status`), names lower-case; empty
    /// over HTTP/1.1, whose chunked trailers the verifier does not keep.
    pub trailers: Vec<(String, String)>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of header `name` (case-insensitive), in wire order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Whether this answer came over HTTP/2.
    pub fn is_http2(&self) -> bool {
        self.framing == Framing::Http2
    }

    /// Whether the server announced it will close the connection. Never for
    /// HTTP/2, which has no Connection header: a server ends an HTTP/2
    /// connection with GOAWAY, which the next request sees as an error.
    pub fn closes(&self) -> bool {
        if self.is_http2() {
            return false;
        }
        let conn = self.header_all("connection").join(",").to_ascii_lowercase();
        let says_close = conn.split(',').any(|t| t.trim() == "close");
        let says_keep = conn.split(',').any(|t| t.trim() == "keep-alive");
        says_close || (self.minor_version == 0 && !says_keep) || self.framing == Framing::Close
    }

    /// The body as text (lossy), for messages.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The bytes of `req` as sent to `host` (the Host header value).
/// `close` adds `Connection: close`.
pub fn encode(req: &contract::Request, host: &str, close: bool) -> Vec<u8> {
    let mut out = format!(
        "{} {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: fairground-verify\r\nAccept: */*\r\n",
        req.method, req.path
    );
    for (name, value) in &req.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = &req.body {
        out.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    if close {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    if let Some(body) = &req.body {
        bytes.extend_from_slice(body);
    }
    bytes
}

/// One client connection; responses are read in order, so several requests
/// may be written before the first answer is read (pipelining).
pub struct Conn {
    stream: Box<dyn Io>,
    buf: Vec<u8>,
    eof: bool,
    host: String,
    /// Per-request timeout: each `request`, `send` + `read_response` pair and
    /// connect is bounded by it.
    pub timeout: Duration,
}

impl Conn {
    /// Open a connection to `addr`; `host` is the Host header to send.
    pub async fn connect(
        addr: SocketAddr,
        host: &str,
        timeout: Duration,
    ) -> Result<Conn, ClientError> {
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Err(_) => {
                return Err(ClientError::Timeout {
                    after: timeout,
                    what: format!("a TCP connection to {addr}"),
                })
            }
            Ok(Err(source)) => return Err(ClientError::Connect { addr, source }),
            Ok(Ok(s)) => s,
        };
        let _ = stream.set_nodelay(true);
        Ok(Conn::over(Box::new(stream), host, timeout))
    }

    /// A connection over a stream already open (a TLS stream for https);
    /// `host` is the Host header to send.
    pub fn over(stream: Box<dyn Io>, host: &str, timeout: Duration) -> Conn {
        Conn {
            stream,
            buf: Vec::with_capacity(8 * 1024),
            eof: false,
            host: host.to_string(),
            timeout,
        }
    }

    /// The Host header value this connection sends.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Write raw bytes (one or several encoded requests) and flush them.
    ///
    /// The flush matters for TLS: tokio-rustls accepts the plaintext and
    /// returns as soon as the socket reads as not ready (a full send buffer,
    /// or the task's cooperative budget used up), leaving the records in its
    /// buffer: it behaves as a `BufWriter` (tokio-rustls' docs, "Why do I
    /// need to call poll_flush?"). Without the flush that request is never
    /// sent and the verifier waits for an answer to it.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        let deadline = Instant::now() + self.timeout;
        let write = async {
            self.stream.write_all(bytes).await?;
            self.stream.flush().await
        };
        match tokio::time::timeout_at(deadline, write).await {
            Err(_) => Err(ClientError::Timeout {
                after: self.timeout,
                what: "the server to accept the request bytes".into(),
            }),
            Ok(Err(e)) if is_reset(&e) => Err(ClientError::Closed {
                what: "while the request was being written".into(),
            }),
            Ok(Err(source)) => Err(ClientError::Io {
                what: "writing the request",
                source,
            }),
            Ok(Ok(())) => Ok(()),
        }
    }

    /// Send one request and read its answer.
    pub async fn request(
        &mut self,
        req: &contract::Request,
        close: bool,
    ) -> Result<Response, ClientError> {
        let bytes = encode(req, &self.host, close);
        self.send_raw(&bytes).await?;
        self.read_response(req.method == "HEAD").await
    }

    /// Whether the server has closed its side (seen on an earlier read).
    pub fn peer_closed(&self) -> bool {
        self.eof
    }

    /// Wait up to `grace` for bytes nobody asked for (after a complete
    /// answer); returns how many were buffered. Used to catch a body longer
    /// than its Content-Length.
    pub async fn unsolicited_bytes(&mut self, grace: Duration) -> usize {
        if self.buf.is_empty() && !self.eof {
            let deadline = Instant::now() + grace;
            let _ = self.read_more(deadline, grace, String::new).await;
        }
        self.buf.len()
    }

    /// Read one more chunk into the buffer; `Ok(0)` at end of stream.
    async fn read_more(
        &mut self,
        deadline: Instant,
        after: Duration,
        what: impl FnOnce() -> String,
    ) -> Result<usize, ClientError> {
        if self.eof {
            return Ok(0);
        }
        self.buf.reserve(16 * 1024);
        match tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.buf)).await {
            Err(_) => Err(ClientError::Timeout {
                after,
                what: what(),
            }),
            Ok(Ok(0)) => {
                self.eof = true;
                Ok(0)
            }
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) if is_reset(&e) => {
                self.eof = true;
                Ok(0)
            }
            Ok(Err(source)) => Err(ClientError::Io {
                what: "reading the response",
                source,
            }),
        }
    }

    /// Read the next complete response from the connection, within one
    /// timeout. `head_request`: the request was HEAD (no body follows).
    pub async fn read_response(&mut self, head_request: bool) -> Result<Response, ClientError> {
        let after = self.timeout;
        let deadline = Instant::now() + after;
        loop {
            let resp = self.read_one(deadline, after, head_request).await?;
            // Interim answers (100 Continue, 103 Early Hints) precede the real one.
            if !(100..200).contains(&resp.status) {
                return Ok(resp);
            }
        }
    }

    async fn read_one(
        &mut self,
        deadline: Instant,
        after: Duration,
        head_request: bool,
    ) -> Result<Response, ClientError> {
        // 1. The head.
        let (head_len, status, reason, minor_version, headers) = loop {
            let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut slots);
            match parsed.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let headers = parsed
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_string(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect::<Vec<_>>();
                    break (
                        n,
                        parsed.code.unwrap_or(0),
                        parsed.reason.unwrap_or("").to_string(),
                        parsed.version.unwrap_or(1),
                        headers,
                    );
                }
                Ok(httparse::Status::Partial) => {}
                Err(e) => {
                    return Err(ClientError::Malformed(format!(
                        "{e} in the response head (starts {:?})",
                        preview(&self.buf)
                    )))
                }
            }
            if self.buf.len() > MAX_HEAD {
                return Err(ClientError::Malformed(format!(
                    "response head longer than {MAX_HEAD} bytes"
                )));
            }
            let have = self.buf.len();
            let n = self
                .read_more(deadline, after, || {
                    if have == 0 {
                        "the response (no byte arrived)".to_string()
                    } else {
                        format!("the end of the response head ({have} bytes arrived)")
                    }
                })
                .await?;
            if n == 0 {
                return Err(ClientError::Closed {
                    what: if have == 0 {
                        "without answering".to_string()
                    } else {
                        format!("in the middle of the response head ({have} bytes arrived)")
                    },
                });
            }
        };

        // 2. How the body is delimited.
        let chunked = headers.iter().any(|(n, v)| {
            n.eq_ignore_ascii_case("transfer-encoding")
                && v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("chunked"))
        });
        let mut lengths = headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| {
                v.trim().parse::<u64>().map_err(|_| {
                    ClientError::Malformed(format!("Content-Length `{v}` is not a number"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        lengths.dedup();
        if lengths.len() > 1 {
            return Err(ClientError::Malformed(format!(
                "conflicting Content-Length headers: {lengths:?}"
            )));
        }
        let no_body =
            head_request || status == 204 || status == 304 || (100..200).contains(&status);
        let framing = if no_body {
            Framing::Empty
        } else if chunked {
            Framing::Chunked
        } else if let Some(&n) = lengths.first() {
            Framing::Length(n)
        } else {
            Framing::Close
        };

        // 3. The body. Errors from here on are about framing: the head was fine.
        let body = match framing {
            Framing::Empty => Ok((Vec::new(), head_len)),
            Framing::Length(n) => self.read_length(head_len, n, deadline, after).await,
            Framing::Close => self.read_to_close(head_len, deadline, after).await,
            Framing::Chunked => self.read_chunked(head_len, deadline, after).await,
            Framing::Http2 => unreachable!("an HTTP/1 head never frames as HTTP/2"),
        };
        let (body, consumed) = body.map_err(|source| ClientError::Body {
            status,
            source: Box::new(source),
        })?;
        self.buf.drain(..consumed);
        Ok(Response {
            status,
            reason,
            minor_version,
            headers,
            body,
            framing,
            length_and_chunked: chunked && !lengths.is_empty(),
            trailers: Vec::new(),
            head_bytes: head_len,
            wire_bytes: consumed,
        })
    }

    async fn read_length(
        &mut self,
        head_len: usize,
        n: u64,
        deadline: Instant,
        after: Duration,
    ) -> Result<(Vec<u8>, usize), ClientError> {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        if n > MAX_BODY {
            return Err(ClientError::Malformed(format!(
                "Content-Length {n} is larger than any contract answer ({MAX_BODY} bytes)"
            )));
        }
        while self.buf.len() - head_len < n {
            let got = self.buf.len() - head_len;
            let read = self
                .read_more(deadline, after, || {
                    format!("the body: Content-Length says {n} bytes, {got} arrived")
                })
                .await?;
            if read == 0 {
                return Err(ClientError::Closed {
                    what: format!("after {got} body bytes, but Content-Length says {n}"),
                });
            }
        }
        Ok((self.buf[head_len..head_len + n].to_vec(), head_len + n))
    }

    async fn read_to_close(
        &mut self,
        head_len: usize,
        deadline: Instant,
        after: Duration,
    ) -> Result<(Vec<u8>, usize), ClientError> {
        loop {
            let got = self.buf.len() - head_len;
            if got > MAX_BODY {
                return Err(ClientError::Malformed(format!(
                    "close-delimited body longer than {MAX_BODY} bytes"
                )));
            }
            let read = self
                .read_more(deadline, after, || {
                    format!("the server to close the connection to end a body that has no Content-Length ({got} bytes arrived)")
                })
                .await?;
            if read == 0 {
                return Ok((self.buf[head_len..].to_vec(), self.buf.len()));
            }
        }
    }

    /// Decode a chunked body that starts at `start` in the buffer; returns the
    /// body and the buffer offset just past the final CRLF.
    async fn read_chunked(
        &mut self,
        start: usize,
        deadline: Instant,
        after: Duration,
    ) -> Result<(Vec<u8>, usize), ClientError> {
        let mut body = Vec::new();
        let mut pos = start;
        loop {
            // Chunk size line.
            let (size, line_len) = loop {
                match httparse::parse_chunk_size(&self.buf[pos..]) {
                    Ok(httparse::Status::Complete((n, size))) => break (size, n),
                    Ok(httparse::Status::Partial) => {}
                    Err(_) => {
                        return Err(ClientError::Malformed(format!(
                            "bad chunk size line {:?}",
                            preview(&self.buf[pos..])
                        )))
                    }
                }
                self.need(deadline, after, "a chunk size line").await?;
            };
            pos += line_len;
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            if size > MAX_BODY || body.len() + size > MAX_BODY {
                return Err(ClientError::Malformed(format!(
                    "chunked body larger than {MAX_BODY} bytes"
                )));
            }
            if size == 0 {
                // Trailer section: header lines until an empty line.
                loop {
                    match find_crlf(&self.buf[pos..]) {
                        Some(0) => return Ok((body, pos + 2)),
                        Some(i) => pos += i + 2,
                        None => {
                            self.need(deadline, after, "the end of the chunked body")
                                .await?
                        }
                    }
                }
            }
            while self.buf.len() < pos + size + 2 {
                self.need(deadline, after, "a chunk of the body").await?;
            }
            body.extend_from_slice(&self.buf[pos..pos + size]);
            if &self.buf[pos + size..pos + size + 2] != b"\r\n" {
                return Err(ClientError::Malformed(
                    "chunk data not followed by CRLF (chunk size wrong)".into(),
                ));
            }
            pos += size + 2;
        }
    }

    async fn need(
        &mut self,
        deadline: Instant,
        after: Duration,
        what: &str,
    ) -> Result<(), ClientError> {
        let n = self.read_more(deadline, after, || what.to_string()).await?;
        if n == 0 {
            return Err(ClientError::Closed {
                what: format!("while waiting for {what}"),
            });
        }
        Ok(())
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// A peer that went away. Over TLS a close without close_notify reads as
/// `UnexpectedEof`: for a reader of HTTP/1 answers that is a close too (a
/// truncated body shows as a short body, whatever the TLS layer says).
fn is_reset(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::UnexpectedEof
    )
}

fn preview(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(60)]).into_owned()
}

/// One GET of `path` on a fresh connection to `addr`, bounded by `timeout`;
/// returns the status code. This is the single probe a readiness loop
/// repeats (`fairground ready` owns the loop and the overall deadline).
pub async fn probe(addr: SocketAddr, path: &str, timeout: Duration) -> Result<u16, ClientError> {
    let deadline = Instant::now() + timeout;
    let mut conn = Conn::connect(addr, &addr.to_string(), timeout).await?;
    // Whatever is left of the budget after connecting.
    conn.timeout = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let req = contract::Request {
        method: "GET",
        path: path.to_string(),
        headers: Vec::new(),
        body: None,
    };
    Ok(conn.request(&req, true).await?.status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A one-shot raw server: accepts one connection, reads the request head,
    /// writes `reply`, then keeps the socket open for `hold`.
    async fn raw_server(reply: &'static [u8], hold: Duration) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(reply).await;
            tokio::time::sleep(hold).await;
        });
        addr
    }

    fn get(path: &str) -> contract::Request {
        contract::Request {
            method: "GET",
            path: path.into(),
            headers: vec![],
            body: None,
        }
    }

    /// A stream that buffers writes until flushed, as a TLS stream does
    /// whenever the socket reads as not ready: a request must be flushed or
    /// it is never sent, and its answer never comes.
    #[tokio::test]
    async fn a_request_over_a_buffering_stream_is_flushed() {
        let (near, mut far) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            for _ in 0..3 {
                if far.read(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
                let _ = far
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .await;
            }
        });
        let buffered = tokio::io::BufStream::new(near);
        let mut c = Conn::over(Box::new(buffered), "x", Duration::from_secs(1));
        for _ in 0..3 {
            let r = c.request(&get("/"), false).await.unwrap();
            assert_eq!(r.body, b"ok");
        }
    }

    #[tokio::test]
    async fn decodes_chunked_body_and_counts_wire_bytes() {
        let reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHello\r\n8\r\n, World!\r\n0\r\n\r\n";
        let addr = raw_server(reply, Duration::from_millis(200)).await;
        let mut c = Conn::connect(addr, "x", Duration::from_secs(2))
            .await
            .unwrap();
        let r = c.request(&get("/"), false).await.unwrap();
        assert_eq!(r.body, b"Hello, World!");
        assert_eq!(r.framing, Framing::Chunked);
        assert_eq!(r.wire_bytes, reply.len());
    }

    #[tokio::test]
    async fn short_body_times_out_naming_the_content_length() {
        let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nHello, World!";
        let addr = raw_server(reply, Duration::from_secs(2)).await;
        let mut c = Conn::connect(addr, "x", Duration::from_millis(200))
            .await
            .unwrap();
        let err = c.request(&get("/"), false).await.unwrap_err();
        assert!(err.is_timeout());
        assert_eq!(
            err.to_string(),
            "timed out after 200ms waiting for the body: Content-Length says 20 bytes, 13 arrived"
        );
    }

    #[tokio::test]
    async fn long_body_leaves_unsolicited_bytes() {
        let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nHello, World!";
        let addr = raw_server(reply, Duration::from_millis(500)).await;
        let mut c = Conn::connect(addr, "x", Duration::from_secs(1))
            .await
            .unwrap();
        let r = c.request(&get("/"), false).await.unwrap();
        assert_eq!(r.body, b"Hello, Wor");
        assert_eq!(c.unsolicited_bytes(Duration::from_millis(100)).await, 3);
    }

    #[tokio::test]
    async fn probe_reports_status_and_refused_connections() {
        let addr = raw_server(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
            Duration::from_millis(100),
        )
        .await;
        assert_eq!(probe(addr, "/", Duration::from_secs(1)).await.unwrap(), 503);
        // Nothing listens on the port of a listener we just dropped.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = l.local_addr().unwrap();
        drop(l);
        let err = probe(closed, "/", Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::Connect { .. }), "{err}");
    }

    #[test]
    fn encodes_body_and_close() {
        let req = contract::Request {
            method: "POST",
            path: "/echo".into(),
            headers: vec![("x-test".into(), "abc".into())],
            body: Some(b"{}".to_vec()),
        };
        let text = String::from_utf8(encode(&req, "h:1", true)).unwrap();
        assert!(text.starts_with("POST /echo HTTP/1.1\r\nHost: h:1\r\n"));
        assert!(text.contains("x-test: abc\r\n"));
        assert!(text.contains("Content-Length: 2\r\n"));
        assert!(text.ends_with("Connection: close\r\n\r\n{}"));
    }
}
