//! A deliberately broken HTTP/2 (h2c) contract server for verify's protocol
//! tests: it answers plaintext, param and echo correctly, but gets
//! concurrency wrong in the way [`H2Fault`] says. hyper's HTTP/2 server, so
//! the framing is right and only the fault differs from a correct server.
//! A test double, not a framework.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use fairground::contract;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::Mutex;

/// What the server gets wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H2Fault {
    /// Streams are answered one at a time (each holds a lock from its
    /// HEADERS until its answer), though any number may be open.
    OneStreamAtATime,
    /// SETTINGS_MAX_CONCURRENT_STREAMS is this (streams beyond it wait).
    MaxStreams(u32),
    /// Nothing wrong: streams served concurrently, each answer after
    /// 0 to 7.5 ms (the n-th request's n mod 16 halves of a millisecond),
    /// so the answers of one connection leave in separate writes, which
    /// Nagle (never turned off here) holds for the client's ACK.
    Staggered,
}

/// Start the server on 127.0.0.1 (a port the kernel picks) in a thread of
/// its own; it lives as long as the test process.
pub fn spawn(fault: H2Fault) -> SocketAddr {
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
            let lock = Arc::new(Mutex::new(()));
            let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            if let H2Fault::MaxStreams(n) = fault {
                http2.max_concurrent_streams(n);
            }
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let lock = lock.clone();
                let service = hyper::service::service_fn(move |req| {
                    let lock = (fault == H2Fault::OneStreamAtATime).then(|| lock.clone());
                    handle(req, lock, fault == H2Fault::Staggered)
                });
                tokio::spawn(http2.serve_connection(TokioIo::new(stream), service));
            }
        });
    });
    addr
}

async fn handle(
    req: Request<Incoming>,
    lock: Option<Arc<Mutex<()>>>,
    staggered: bool,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if staggered {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 16;
        tokio::time::sleep(std::time::Duration::from_micros(500 * n)).await;
    }
    // Held from the request's HEADERS until its answer: one stream at a time.
    let _turn = match lock {
        Some(lock) => Some(lock.lock_owned().await),
        None => None,
    };
    let path = req.uri().path().to_string();
    let answer = match (req.method().as_str(), path.as_str()) {
        ("GET", "/") => (
            StatusCode::OK,
            "text/plain",
            Bytes::from_static(contract::PLAINTEXT_BODY.as_bytes()),
        ),
        ("GET", p) if p.starts_with("/users/") => (
            StatusCode::OK,
            "application/json",
            Bytes::from(
                serde_json::to_vec(&contract::param_response(&p["/users/".len()..])).unwrap(),
            ),
        ),
        ("POST", "/echo") => {
            let body = req.into_body().collect().await.map(|b| b.to_bytes());
            match body
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            {
                Some(v) => (
                    StatusCode::OK,
                    "application/json",
                    Bytes::from(serde_json::to_vec(&v).unwrap()),
                ),
                None => (
                    StatusCode::BAD_REQUEST,
                    "text/plain",
                    Bytes::from_static(b"bad"),
                ),
            }
        }
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            Bytes::from_static(b"Not Found"),
        ),
    };
    let (status, media, body) = answer;
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(hyper::header::CONTENT_TYPE, media.parse().unwrap());
    Ok(resp)
}
