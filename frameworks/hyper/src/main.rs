//! The fairground contract on plain hyper 1: a hand-written router and
//! middleware as nested `hyper::service::Service` wrappers, the way a hyper
//! user composes services without a framework.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::service::Service;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::{Deserialize, Serialize};

type Resp = Response<Full<Bytes>>;
type BoxFut = Pin<Box<dyn Future<Output = Result<Resp, Infallible>> + Send>>;

/// Largest request body accepted (the contract sends at most 64 KiB).
const BODY_LIMIT: usize = 1 << 20;

const TEXT: HeaderValue = HeaderValue::from_static("text/plain");
const JSON: HeaderValue = HeaderValue::from_static("application/json");

fn text(status: StatusCode, body: &'static str) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, TEXT);
    r
}

fn json<T: Serialize>(value: &T) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(serde_json::to_vec(value).unwrap())));
    r.headers_mut().insert(CONTENT_TYPE, JSON);
    r
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

#[derive(Serialize)]
struct User<'a> {
    id: &'a str,
    name: &'static str,
}

#[derive(Deserialize, Serialize)]
struct Person {
    name: String,
    age: i64,
    email: String,
}

impl Person {
    fn is_valid(&self) -> bool {
        let name_len = self.name.chars().count();
        (1..=64).contains(&name_len)
            && (0..=150).contains(&self.age)
            && (3..=254).contains(&self.email.len())
            && self.email.contains('@')
            && !self.email.starts_with('@')
            && !self.email.ends_with('@')
    }
}

async fn read_body(req: Request<Incoming>) -> Option<Bytes> {
    Limited::new(req.into_body(), BODY_LIMIT)
        .collect()
        .await
        .ok()
        .map(|b| b.to_bytes())
}

/// The innermost service of every middleware chain.
#[derive(Clone, Copy)]
struct Hello;

impl Service<Request<Incoming>> for Hello {
    type Response = Resp;
    type Error = Infallible;
    type Future = BoxFut;

    fn call(&self, _req: Request<Incoming>) -> Self::Future {
        Box::pin(async { Ok(text(StatusCode::OK, "Hello, World!")) })
    }
}

/// One middleware layer: reads `x-test` from the request, calls the inner
/// service, then sets `x-mw-{i}` on the response.
struct EchoHeader<S> {
    header: HeaderName,
    inner: S,
}

impl<S> Service<Request<Incoming>> for EchoHeader<S>
where
    S: Service<Request<Incoming>, Response = Resp, Error = Infallible, Future = BoxFut>,
{
    type Response = Resp;
    type Error = Infallible;
    type Future = BoxFut;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let token = req.headers().get("x-test").cloned();
        let header = self.header.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let mut resp = fut.await?;
            if let Some(token) = token {
                resp.headers_mut().insert(header, token);
            }
            Ok(resp)
        })
    }
}

type DynService = Box<
    dyn Service<Request<Incoming>, Response = Resp, Error = Infallible, Future = BoxFut>
        + Send
        + Sync,
>;

/// Builds the chain of `n` layers, layer 1 outermost.
fn chain(n: u16) -> DynService {
    let mut svc: DynService = Box::new(Hello);
    for i in (1..=n).rev() {
        svc = Box::new(EchoHeader {
            header: HeaderName::try_from(format!("x-mw-{i}")).unwrap(),
            inner: svc,
        });
    }
    svc
}

/// The application: routes requests to handlers and middleware chains.
struct App {
    /// Middleware chains by length, index = N (0 to 10).
    chains: Vec<DynService>,
}

impl App {
    async fn route(self: Arc<Self>, req: Request<Incoming>) -> Result<Resp, Infallible> {
        let path = req.uri().path();
        let resp = match (req.method(), path) {
            (&Method::GET, "/") => text(StatusCode::OK, "Hello, World!"),
            (&Method::GET, "/json") => json(&Message {
                message: "Hello, World!",
            }),
            (&Method::GET, p) if p.starts_with("/users/") => {
                let id = &p["/users/".len()..];
                if id.is_empty() || id.contains('/') {
                    not_found()
                } else {
                    json(&User { id, name: "ada" })
                }
            }
            (&Method::GET, p) if p.starts_with("/mw/") => {
                match p["/mw/".len()..].parse::<usize>() {
                    Ok(n) if n < self.chains.len() => return self.chains[n].call(req).await,
                    _ => not_found(),
                }
            }
            (&Method::POST, "/echo") => match read_body(req).await {
                Some(body) => match serde_json::from_slice::<serde_json::Value>(&body) {
                    Ok(value) => json(&value),
                    Err(_) => text(StatusCode::BAD_REQUEST, "invalid JSON"),
                },
                None => text(StatusCode::PAYLOAD_TOO_LARGE, "body too large"),
            },
            (&Method::POST, "/validate") => match read_body(req).await {
                Some(body) => match serde_json::from_slice::<Person>(&body) {
                    Ok(p) if p.is_valid() => json(&p),
                    _ => text(StatusCode::UNPROCESSABLE_ENTITY, "invalid person"),
                },
                None => text(StatusCode::PAYLOAD_TOO_LARGE, "body too large"),
            },
            _ => not_found(),
        };
        Ok(resp)
    }
}

fn not_found() -> Resp {
    text(StatusCode::NOT_FOUND, "Not Found")
}

fn main() {
    let workers = std::env::var("FAIRGROUND_CPUS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(serve());
}

/// The listen backlog: the kernel's own cap, net.core.somaxconn (the
/// profile's server.sysctls), as Go's net package uses; 1024 when it cannot
/// be read. tokio's `TcpListener::bind` listens with 128 (mio, like the
/// standard library): a burst of 10,000 connects overflowed it (512 listen
/// overflows, connections established late, docs/frameworks.md).
/// `TcpSocket::listen(backlog)` is tokio's documented way to choose one.
fn listen_backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1024)
}

/// A listener on `addr` as `TcpListener::bind` makes it (SO_REUSEADDR),
/// with the backlog above. Call from inside the runtime.
fn listener(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(listen_backlog())
}

async fn serve() {
    let app = Arc::new(App {
        chains: (0..=10).map(chain).collect(),
    });
    let addr = SocketAddr::from(([0, 0, 0, 0], 8080));
    let listener = listener(addr).expect("bind 0.0.0.0:8080");
    eprintln!("hyper listening on {addr}");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| app.clone().route(req));
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
