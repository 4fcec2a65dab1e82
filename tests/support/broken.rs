//! A deliberately broken contract server for verify's tests.
//!
//! A raw-TCP HTTP/1.1 server that answers the whole contract correctly
//! (answers come from `fairground::contract`) except for one fault chosen by
//! [`Fault`]. Raw rather than hyper because several faults (wrong
//! Content-Length, answers out of order, ignoring pipelined requests) are
//! things hyper will not let a server do. Lives under tests/, never in
//! frameworks/: it is a test double, not a framework.

use std::net::SocketAddr;
use std::time::Duration;

use fairground::contract::{self, ExpectedBody, Request, Scenario};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The one thing the server gets wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing: a correct server (proves the double itself is sound).
    None,
    /// Not a fault: every body is sent chunked, which is as correct as
    /// Content-Length (proves verify accepts both framings).
    Chunked,
    /// param answers id "42" whatever the path says.
    HardCodedId,
    /// param is not routed: 404 for every id.
    ParamNotFound,
    /// plaintext is sent as text/html.
    WrongContentType,
    /// plaintext declares Content-Length 20 for its 13 bytes.
    LongContentLength,
    /// plaintext declares Content-Length 10 for its 13 bytes.
    ShortContentLength,
    /// echo answers one fixed body whatever was sent.
    FixedEcho,
    /// Every answer carries Connection: close and the socket is closed.
    NoKeepAlive,
    /// Unknown paths are answered 200 Hello, World!.
    OkForUnknownPaths,
    /// No Date header.
    NoDate,
    /// Requests that arrive together are answered in reverse order.
    PipelineOutOfOrder,
    /// Only the first of the requests that arrive together is answered; the
    /// rest are dropped (the connection stays open).
    PipelineIgnored,
    /// Accepts connections and never answers.
    Hang,
    /// middleware-N leaves out the last layer's header.
    MwMissingLayer,
    /// middleware-N headers carry a constant instead of x-test.
    MwConstant,
}

/// Start the server on a thread of its own (its own runtime, so sync and
/// async tests alike can use it); it lives until the test process ends.
pub fn spawn(fault: Fault) -> SocketAddr {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(serve_conn(stream, fault));
            }
        });
    });
    addr
}

struct Parsed {
    req: Request,
    close: bool,
}

/// Parse every complete request at the front of `buf`, removing them.
fn parse_all(buf: &mut Vec<u8>) -> Vec<Parsed> {
    let mut out = Vec::new();
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        let Ok(httparse::Status::Complete(head)) = req.parse(buf) else {
            return out;
        };
        let mut len = 0usize;
        let mut close = false;
        let mut extra = Vec::new();
        for h in req.headers.iter() {
            let value = String::from_utf8_lossy(h.value).to_string();
            if h.name.eq_ignore_ascii_case("content-length") {
                len = value.trim().parse().unwrap_or(0);
            } else if h.name.eq_ignore_ascii_case("connection") {
                close = value.eq_ignore_ascii_case("close");
            } else if h.name.eq_ignore_ascii_case(contract::MW_REQUEST_HEADER) {
                extra.push((contract::MW_REQUEST_HEADER.to_string(), value));
            }
        }
        if buf.len() < head + len {
            return out;
        }
        let method = if req.method == Some("POST") {
            "POST"
        } else {
            "GET"
        };
        let parsed = Parsed {
            req: Request {
                method,
                path: req.path.unwrap_or("/").to_string(),
                headers: extra,
                body: (len > 0).then(|| buf[head..head + len].to_vec()),
            },
            close,
        };
        buf.drain(..head + len);
        out.push(parsed);
    }
}

fn scenario_of(req: &Request) -> Option<Scenario> {
    match (req.method, req.path.as_str()) {
        ("GET", "/") => Some(Scenario::Plaintext),
        ("GET", "/json") => Some(Scenario::Json),
        ("GET", p) if p.starts_with("/users/") => Some(Scenario::Param),
        ("GET", p) if p.starts_with("/mw/") => p[4..].parse().ok().map(Scenario::Middleware),
        ("POST", "/echo") => Some(Scenario::Echo),
        ("POST", "/validate") => Some(Scenario::Validate),
        _ => None,
    }
}

/// The bytes of the answer to `req`, with `fault` applied.
fn answer(req: &Request, fault: Fault) -> Vec<u8> {
    let mut headers: Vec<(String, String)> = Vec::new();
    let scenario = match scenario_of(req) {
        Some(Scenario::Param) if fault == Fault::ParamNotFound => None,
        s => s,
    };
    let (status, mut ctype, mut body) = match scenario {
        None if fault == Fault::OkForUnknownPaths => (
            200,
            "text/plain",
            contract::PLAINTEXT_BODY.as_bytes().to_vec(),
        ),
        None => (404, "text/plain", b"Not Found".to_vec()),
        Some(s) => {
            let (status, expected) = contract::expected_response(s, req);
            let body = match expected {
                ExpectedBody::Exact(t) => t.as_bytes().to_vec(),
                ExpectedBody::Json(serde_json::Value::Null) if s == Scenario::Validate => {
                    br#"{"error":"invalid"}"#.to_vec()
                }
                ExpectedBody::Json(v) => serde_json::to_vec(&v).unwrap(),
                // The broken server has no database: it never routes one.
                ExpectedBody::World(_) | ExpectedBody::Fortunes => {
                    unreachable!("no database scenario is routed here")
                }
                ExpectedBody::Upgrade => unreachable!("no WebSocket scenario is routed here"),
                ExpectedBody::GrpcEcho(_) | ExpectedBody::GrpcStream(_) => {
                    unreachable!("no gRPC scenario is routed here")
                }
            };
            let status = if status == 400 { 422 } else { status };
            if let Scenario::Middleware(n) = s {
                let token = req
                    .headers
                    .iter()
                    .find(|(k, _)| k == contract::MW_REQUEST_HEADER)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                let layers = if fault == Fault::MwMissingLayer {
                    n.saturating_sub(1)
                } else {
                    n
                };
                for i in 1..=layers {
                    let value = if fault == Fault::MwConstant {
                        "constant".to_string()
                    } else {
                        token.clone()
                    };
                    headers.push((contract::middleware_header(i), value));
                }
            }
            (status, contract::expected_content_type(s), body)
        }
    };
    let mut length = body.len();
    match (fault, scenario_of(req)) {
        (Fault::HardCodedId, Some(Scenario::Param)) => {
            body = serde_json::to_vec(&contract::param_response("42")).unwrap();
            length = body.len();
        }
        (Fault::WrongContentType, Some(Scenario::Plaintext)) => ctype = "text/html",
        (Fault::LongContentLength, Some(Scenario::Plaintext)) => length = body.len() + 7,
        (Fault::ShortContentLength, Some(Scenario::Plaintext)) => length = body.len() - 3,
        (Fault::FixedEcho, Some(Scenario::Echo)) => {
            body = br#"{"items":[],"count":0}"#.to_vec();
            length = body.len();
        }
        _ => {}
    }
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Unprocessable Entity",
    };
    let framing = if fault == Fault::Chunked {
        "Transfer-Encoding: chunked".to_string()
    } else {
        format!("Content-Length: {length}")
    };
    let mut head = format!("HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n{framing}\r\n");
    if fault != Fault::NoDate {
        let now = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT");
        head.push_str(&format!("Date: {now}\r\n"));
    }
    if fault == Fault::NoKeepAlive {
        head.push_str("Connection: close\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if fault == Fault::Chunked {
        // Two chunks, so a decoder that stops after the first is caught.
        let (a, b) = body.split_at(body.len() / 2);
        for part in [a, b] {
            if !part.is_empty() {
                out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                out.extend_from_slice(part);
                out.extend_from_slice(b"\r\n");
            }
        }
        out.extend_from_slice(b"0\r\n\r\n");
    } else {
        out.extend_from_slice(&body);
    }
    out
}

async fn serve_conn(mut stream: TcpStream, fault: Fault) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if fault == Fault::Hang {
            continue;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut batch = parse_all(&mut buf);
        if batch.is_empty() {
            continue;
        }
        match fault {
            Fault::PipelineOutOfOrder => batch.reverse(),
            Fault::PipelineIgnored => batch.truncate(1),
            _ => {}
        }
        let mut close = fault == Fault::NoKeepAlive;
        let mut out = Vec::new();
        for p in &batch {
            out.extend(answer(&p.req, fault));
            close |= p.close;
            if close {
                break;
            }
        }
        if stream.write_all(&out).await.is_err() {
            return;
        }
        if close {
            let _ = stream.shutdown().await;
            // Let the client read everything before the socket goes.
            tokio::time::sleep(Duration::from_millis(20)).await;
            return;
        }
    }
}
