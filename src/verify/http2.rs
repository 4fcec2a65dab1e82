//! The HTTP/2 side of verify: a client connection (hyper's HTTP/2 client
//! over any [`Io`], TLS for h2, TCP for h2c) whose answers become the same
//! [`Response`] the HTTP/1.1 client gives, so every answer check applies
//! unchanged; and a raw look at the connection preface, which tells whether
//! the server speaks HTTP/2 at all and what it announced in SETTINGS.
//!
//! Why hyper here and a hand-written client for HTTP/1.1: HTTP/2's wire
//! (HPACK, frames, flow control) says nothing about the contract that the
//! decoded answer does not, and a well-tested client keeps verify's own
//! protocol mistakes out of the verdict. Only the preface is read by hand,
//! because that is where a server that is not HTTP/2 shows itself, and
//! hyper's client reports it only as an opaque connection error.
//!
//! Every wait is bounded by the connection's timeout, as in `client`.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::contract;

use super::client::{fmt_duration, ClientError, Framing, Io, Response, MAX_BODY};

/// What every HTTP/2 connection starts with (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A request body: whole, or sent piece by piece as the verifier chooses,
/// which holds a stream open (the concurrent-streams check).
pub(crate) enum ReqBody {
    /// The whole body at once (None: no body).
    Full(Option<Bytes>),
    /// `len` bytes, sent as they arrive on `rx`; ends when its sender drops.
    Held {
        /// Pieces of the body.
        rx: tokio::sync::mpsc::UnboundedReceiver<Bytes>,
        /// The whole length (sent as Content-Length).
        len: u64,
    },
}

impl Body for ReqBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ReqBody::Full(body) => Poll::Ready(body.take().map(|b| Ok(Frame::data(b)))),
            ReqBody::Held { rx, .. } => rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ReqBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReqBody::Full(body) => {
                SizeHint::with_exact(body.as_ref().map_or(0, |b| b.len() as u64))
            }
            ReqBody::Held { len, .. } => SizeHint::with_exact(*len),
        }
    }
}

/// One HTTP/2 connection. Requests may run at once on clones of its sender
/// (see [`H2Conn::sender`]); the connection ends when this is dropped.
pub struct H2Conn {
    send: http2::SendRequest<ReqBody>,
    driver: tokio::task::JoinHandle<()>,
    /// `http://host:port` or `https://host:port`: scheme and authority of
    /// every request.
    base: String,
    /// Per-request timeout.
    pub timeout: Duration,
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl H2Conn {
    /// Start HTTP/2 over `io` (TLS that agreed h2, or TCP for h2c);
    /// `base` is `scheme://authority` of the requests; `window`, when
    /// given, is the stream's and the connection's receive window (hyper's
    /// defaults otherwise).
    pub(crate) async fn handshake(
        io: Box<dyn Io>,
        base: String,
        deadline: Instant,
        timeout: Duration,
        window: Option<u32>,
    ) -> Result<H2Conn, ClientError> {
        let mut builder = http2::Builder::new(TokioExecutor::new());
        if let Some(w) = window {
            builder
                .initial_stream_window_size(w)
                .initial_connection_window_size(w);
        }
        let handshake = builder.handshake(TokioIo::new(io));
        let (send, conn) = match tokio::time::timeout_at(deadline, handshake).await {
            Err(_) => {
                return Err(ClientError::Timeout {
                    after: timeout,
                    what: "the HTTP/2 handshake".into(),
                })
            }
            Ok(Err(e)) => return Err(hyper_error(&e, "during the HTTP/2 handshake")),
            Ok(Ok(pair)) => pair,
        };
        // The connection's errors reach the requests in flight; nothing to
        // do with them here.
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(H2Conn {
            send,
            driver,
            base,
            timeout,
        })
    }

    /// Whether new streams may still be opened (no GOAWAY, not closed).
    pub fn is_open(&self) -> bool {
        !self.send.is_closed()
    }

    /// A sender for one more request on this connection, to run several at
    /// once.
    pub(crate) fn sender(&self) -> http2::SendRequest<ReqBody> {
        self.send.clone()
    }

    /// The HTTP/2 request for `req` with `body`.
    pub(crate) fn build(
        &self,
        req: &contract::Request,
        body: ReqBody,
    ) -> Result<hyper::Request<ReqBody>, ClientError> {
        let mut b = hyper::Request::builder()
            .method(req.method)
            .uri(format!("{}{}", self.base, req.path))
            .header("user-agent", "fairground-verify")
            .header("accept", "*/*");
        for (name, value) in &req.headers {
            b = b.header(name.as_str(), value.as_str());
        }
        if let Some(body) = &req.body {
            b = b
                .header("content-type", "application/json")
                .header("content-length", body.len());
        }
        b.body(body).map_err(|e| {
            ClientError::Http2(format!(
                "cannot write {} {} as an HTTP/2 request: {e}",
                req.method, req.path
            ))
        })
    }

    /// Send one request and read its whole answer, within one timeout.
    pub async fn request(&mut self, req: &contract::Request) -> Result<Response, ClientError> {
        let body = ReqBody::Full(req.body.clone().map(Bytes::from));
        let request = self.build(req, body)?;
        exchange(
            self.sender(),
            request,
            Instant::now() + self.timeout,
            self.timeout,
        )
        .await
    }
}

/// Send `request` on `send` and read the whole answer before `deadline`.
pub(crate) async fn exchange(
    mut send: http2::SendRequest<ReqBody>,
    request: hyper::Request<ReqBody>,
    deadline: Instant,
    after: Duration,
) -> Result<Response, ClientError> {
    let what = format!("{} {}", request.method(), request.uri().path());
    let timed_out = |what: String| ClientError::Timeout { after, what };
    match tokio::time::timeout_at(deadline, send.ready()).await {
        Err(_) => return Err(timed_out("the HTTP/2 connection to accept a stream".into())),
        Ok(Err(e)) => return Err(hyper_error(&e, "before the request could be sent")),
        Ok(Ok(())) => {}
    }
    let resp = match tokio::time::timeout_at(deadline, send.send_request(request)).await {
        Err(_) => return Err(timed_out(format!("the answer to {what}"))),
        Ok(Err(e)) => return Err(hyper_error(&e, "while waiting for the answer")),
        Ok(Ok(resp)) => resp,
    };
    let status = resp.status();
    let headers = resp
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let collect = http_body_util::Limited::new(resp.into_body(), MAX_BODY).collect();
    let body = match tokio::time::timeout_at(deadline, collect).await {
        Err(_) => Err(timed_out(format!("the body of the answer to {what}"))),
        Ok(Err(e)) => Err(ClientError::Http2(format!(
            "the body of the answer to {what}: {}",
            chain(&*e)
        ))),
        Ok(Ok(collected)) => Ok(collected),
    }
    .map_err(|source| ClientError::Body {
        status: status.as_u16(),
        source: Box::new(source),
    })?;
    let trailers = body
        .trailers()
        .map(|t| {
            t.iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let body = body.to_bytes();
    Ok(Response {
        status: status.as_u16(),
        reason: status.canonical_reason().unwrap_or("").to_string(),
        minor_version: 1,
        headers,
        body: body.to_vec(),
        framing: Framing::Http2,
        length_and_chunked: false,
        // HPACK-compressed headers in frames: what HTTP/1 calls wire bytes
        // of an answer is not observable through the HTTP/2 client.
        head_bytes: 0,
        wire_bytes: 0,
        trailers,
    })
}

/// A hyper error as a client error: a connection the server ended is
/// `Closed`, anything else a protocol error with its causes.
fn hyper_error(e: &hyper::Error, when: &str) -> ClientError {
    if e.is_closed() || e.is_canceled() {
        ClientError::Closed {
            what: format!("{when} (HTTP/2: {})", chain(e)),
        }
    } else {
        ClientError::Http2(format!("{when}: {}", chain(e)))
    }
}

/// An error and its causes, `a: b: c`.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

/// The parameters of the server's first SETTINGS frame, in its order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSettings {
    /// (identifier, value) pairs.
    pub values: Vec<(u16, u32)>,
}

impl ServerSettings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS, when announced (None: unlimited).
    pub fn max_concurrent_streams(&self) -> Option<u32> {
        self.values
            .iter()
            .rev()
            .find(|(id, _)| *id == 0x3)
            .map(|&(_, v)| v)
    }

    /// `MAX_CONCURRENT_STREAMS 200, INITIAL_WINDOW_SIZE 1048576`.
    pub fn describe(&self) -> String {
        if self.values.is_empty() {
            return "no parameters (every default)".into();
        }
        self.values
            .iter()
            .map(|&(id, v)| match setting_name(id) {
                Some(name) => format!("{name} {v}"),
                None => format!("setting {id:#x} {v}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn setting_name(id: u16) -> Option<&'static str> {
    Some(match id {
        0x1 => "HEADER_TABLE_SIZE",
        0x2 => "ENABLE_PUSH",
        0x3 => "MAX_CONCURRENT_STREAMS",
        0x4 => "INITIAL_WINDOW_SIZE",
        0x5 => "MAX_FRAME_SIZE",
        0x6 => "MAX_HEADER_LIST_SIZE",
        0x8 => "ENABLE_CONNECT_PROTOCOL",
        0x9 => "NO_RFC7540_PRIORITIES",
        _ => return None,
    })
}

fn frame_name(kind: u8) -> &'static str {
    match kind {
        0x0 => "DATA",
        0x1 => "HEADERS",
        0x2 => "PRIORITY",
        0x3 => "RST_STREAM",
        0x4 => "SETTINGS",
        0x5 => "PUSH_PROMISE",
        0x6 => "PING",
        0x7 => "GOAWAY",
        0x8 => "WINDOW_UPDATE",
        0x9 => "CONTINUATION",
        _ => "an unknown frame",
    }
}

/// Send the client connection preface (and an empty SETTINGS) on `io` and
/// read the server's answer, which RFC 9113 §3.4 says must begin with a
/// SETTINGS frame. `how` says how HTTP/2 was chosen (`with prior knowledge`,
/// `after ALPN agreed h2`), for messages. Err names what came instead: an
/// HTTP/1 answer, a close, silence, or another frame.
pub async fn preface(
    io: &mut dyn Io,
    how: &str,
    deadline: Instant,
    after: Duration,
) -> Result<ServerSettings, String> {
    let not_h2 = format!("the server does not speak HTTP/2 {how}");
    let mut hello = PREFACE.to_vec();
    // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
    hello.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
    match tokio::time::timeout_at(deadline, io.write_all(&hello)).await {
        Err(_) => {
            return Err(format!(
                "timed out after {} writing the HTTP/2 connection preface",
                fmt_duration(after)
            ))
        }
        Ok(Err(e)) => return Err(format!("cannot write the HTTP/2 connection preface: {e}")),
        Ok(Ok(())) => {}
    }
    let _ = io.flush().await;
    let mut buf = Vec::with_capacity(1024);
    // Read until `want` bytes are in, or something else settles it.
    async fn fill(
        io: &mut dyn Io,
        buf: &mut Vec<u8>,
        want: usize,
        deadline: Instant,
    ) -> Result<bool, std::io::Error> {
        while buf.len() < want {
            if buf.starts_with(b"HTTP/") && buf.contains(&b'\n') {
                return Ok(true);
            }
            match tokio::time::timeout_at(deadline, io.read_buf(buf)).await {
                Err(_) => return Err(std::io::ErrorKind::TimedOut.into()),
                Ok(Ok(0)) => return Ok(false),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e),
            }
        }
        Ok(true)
    }
    let closed = |buf: &[u8]| {
        if buf.is_empty() {
            format!(
                "the server closed the connection without answering the HTTP/2 connection \
                 preface (as an HTTP/1-only server does): {not_h2}"
            )
        } else {
            format!(
                "the server closed the connection after {} bytes of an answer to the HTTP/2 \
                 connection preface: {not_h2}",
                buf.len()
            )
        }
    };
    let fault = |e: std::io::Error, buf: &[u8]| match e.kind() {
        std::io::ErrorKind::TimedOut => format!(
            "no answer to the HTTP/2 connection preface within {} ({} bytes arrived): {not_h2}",
            fmt_duration(after),
            buf.len()
        ),
        std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::BrokenPipe
        | std::io::ErrorKind::UnexpectedEof => closed(buf),
        _ => format!("reading the answer to the HTTP/2 connection preface: {e}"),
    };
    match fill(io, &mut buf, 9, deadline).await {
        Err(e) => return Err(fault(e, &buf)),
        Ok(false) if !buf.starts_with(b"HTTP/") => return Err(closed(&buf)),
        Ok(_) => {}
    }
    if buf.starts_with(b"HTTP/") {
        let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line).trim_end().to_string();
        return Err(format!(
            "the server answered the HTTP/2 connection preface with HTTP/1 ({}): {not_h2}",
            contract::quote(&line)
        ));
    }
    let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
    let (kind, flags) = (buf[3], buf[4]);
    let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
    if kind != 0x4 {
        return Err(format!(
            "the server's first frame is {} (type {kind:#x}), not SETTINGS as RFC 9113 §3.4 \
             requires: {not_h2}",
            frame_name(kind)
        ));
    }
    if flags & 0x1 != 0 || stream != 0 || len % 6 != 0 || len > 16_384 {
        return Err(format!(
            "the server's first SETTINGS frame is malformed (length {len}, flags {flags:#x}, \
             stream {stream}): {not_h2}"
        ));
    }
    match fill(io, &mut buf, 9 + len, deadline).await {
        Err(e) => return Err(fault(e, &buf)),
        Ok(false) => return Err(closed(&buf)),
        Ok(true) => {}
    }
    let values = buf[9..9 + len]
        .chunks_exact(6)
        .map(|p| {
            (
                u16::from_be_bytes([p[0], p[1]]),
                u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
            )
        })
        .collect();
    Ok(ServerSettings { values })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};

    /// Accepts one connection, reads what comes, writes `reply` and holds
    /// the socket `hold` (or closes at once when `reply` is empty).
    async fn raw_server(reply: &'static [u8], hold: Duration) -> std::net::SocketAddr {
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

    async fn probe(addr: std::net::SocketAddr) -> Result<ServerSettings, String> {
        let after = Duration::from_millis(300);
        let mut s = TcpStream::connect(addr).await.unwrap();
        preface(
            &mut s,
            "with prior knowledge",
            Instant::now() + after,
            after,
        )
        .await
    }

    #[tokio::test]
    async fn reads_the_servers_settings() {
        // SETTINGS (12 bytes): MAX_CONCURRENT_STREAMS 100, INITIAL_WINDOW_SIZE 65535.
        let reply =
            b"\x00\x00\x0c\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64\x00\x04\x00\x00\xff\xff";
        let s = probe(raw_server(reply, Duration::from_millis(200)).await)
            .await
            .unwrap();
        assert_eq!(s.max_concurrent_streams(), Some(100));
        assert_eq!(
            s.describe(),
            "MAX_CONCURRENT_STREAMS 100, INITIAL_WINDOW_SIZE 65535"
        );
    }

    #[tokio::test]
    async fn an_http1_answer_a_close_silence_or_another_frame_is_named() {
        let err = probe(
            raw_server(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
                Duration::from_millis(200),
            )
            .await,
        )
        .await
        .unwrap_err();
        assert_eq!(
            err,
            "the server answered the HTTP/2 connection preface with HTTP/1 (`HTTP/1.1 400 Bad \
             Request`): the server does not speak HTTP/2 with prior knowledge"
        );
        let err = probe(raw_server(b"", Duration::ZERO).await)
            .await
            .unwrap_err();
        assert!(
            err.starts_with("the server closed the connection without answering"),
            "{err}"
        );
        let err = probe(raw_server(b"", Duration::from_secs(2)).await)
            .await
            .unwrap_err();
        assert!(
            err.starts_with("no answer to the HTTP/2 connection preface within 300ms"),
            "{err}"
        );
        // A PING first.
        let err = probe(
            raw_server(
                b"\x00\x00\x08\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
                Duration::from_millis(200),
            )
            .await,
        )
        .await
        .unwrap_err();
        assert!(err.starts_with("the server's first frame is PING"), "{err}");
    }
}
