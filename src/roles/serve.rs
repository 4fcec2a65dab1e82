//! `fairground serve`: the reference server.
//!
//! A small, fast hyper server that answers the whole endpoint contract. It is
//! the target of fairground's own tests and the yardstick for the loader's own
//! ceiling, so it must be correct first and quick second. It owns nothing but
//! HTTP serving; every body and rule comes from `contract`.
//!
//! Shape: one OS thread per `--threads`, each with a current-thread tokio
//! runtime and its own `SO_REUSEPORT` listener, so the kernel spreads
//! connections across threads and no task ever crosses a thread.
//!
//! It speaks every [`Protocol`]: HTTP/1.1, HTTP/2 with prior knowledge
//! (h2c), and TLS (rustls) followed by what ALPN agreed: HTTP/2 for `h2`,
//! HTTP/1.1 otherwise.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::contract::{self, Protocol, Scenario};

const TEXT_PLAIN: &str = "text/plain; charset=utf-8";
const APPLICATION_JSON: &str = "application/json";

/// A running reference server (for tests and in-process use).
pub struct Server {
    /// The address it listens on.
    pub addr: SocketAddr,
    threads: Vec<std::thread::JoinHandle<()>>,
    shutdown: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Server {
    /// Stop accepting and join the worker threads.
    pub fn stop(mut self) {
        for tx in self.shutdown.drain(..) {
            let _ = tx.send(());
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// How the server speaks on its listeners.
#[derive(Clone)]
pub enum Wire {
    /// HTTP/1.1 on plain TCP.
    Http1,
    /// HTTP/2 with prior knowledge on plain TCP.
    H2c,
    /// TLS with this configuration (its ALPN list says what is offered),
    /// then HTTP/2 when ALPN agreed `h2`, HTTP/1.1 otherwise.
    Tls(Arc<rustls::ServerConfig>),
}

impl Wire {
    /// The wire of `protocol`; TLS ones need the server's configuration.
    pub fn of(protocol: Protocol, tls: Option<Arc<rustls::ServerConfig>>) -> anyhow::Result<Wire> {
        Ok(match (protocol, tls) {
            (Protocol::Http1, _) => Wire::Http1,
            (Protocol::H2c, _) => Wire::H2c,
            (Protocol::Https | Protocol::H2, Some(config)) => Wire::Tls(config),
            (p, None) => anyhow::bail!("{p} needs a certificate and its key"),
        })
    }
}

/// Start an HTTP/1.1 server on `threads` threads; returns once every
/// listener is bound.
pub fn start(bind: std::net::IpAddr, port: u16, threads: usize) -> anyhow::Result<Server> {
    start_with(bind, port, threads, Wire::Http1)
}

/// Start the server speaking `wire` on `threads` threads; returns once
/// every listener is bound.
pub fn start_with(
    bind: std::net::IpAddr,
    port: u16,
    threads: usize,
    wire: Wire,
) -> anyhow::Result<Server> {
    let threads = threads.max(1);
    // Bind the first listener to learn the port when 0 was asked for, then
    // bind the others to the same port with SO_REUSEPORT.
    let first = bind_reuseport(SocketAddr::new(bind, port))
        .with_context(|| format!("cannot listen on {bind}:{port}"))?;
    let addr = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..threads {
        listeners.push(bind_reuseport(addr).with_context(|| format!("cannot listen on {addr}"))?);
    }
    let mut handles = Vec::new();
    let mut shutdown = Vec::new();
    for (i, std_listener) in listeners.into_iter().enumerate() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        shutdown.push(tx);
        let wire = wire.clone();
        let handle = std::thread::Builder::new()
            .name(format!("serve-{i}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                rt.block_on(accept_loop(std_listener, rx, wire));
            })?;
        handles.push(handle);
    }
    Ok(Server {
        addr,
        threads: handles,
        shutdown,
    })
}

fn bind_reuseport(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    // A deep accept queue: high-concurrency tests open thousands of
    // connections at once; the kernel caps this at net.core.somaxconn.
    socket.listen(65_535)?;
    Ok(socket.into())
}

async fn accept_loop(
    listener: std::net::TcpListener,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    wire: Wire,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("listener into tokio");
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.keep_alive(true).pipeline_flush(true);
    let mut http2 = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    let acceptor = match &wire {
        Wire::Tls(config) => Some(tokio_rustls::TlsAcceptor::from(config.clone())),
        Wire::Http1 | Wire::H2c => None,
    };
    let h2c = matches!(wire, Wire::H2c);
    let defect = H2_DEFECT.get().copied();
    match defect {
        Some(H2Defect::Serial) => {
            http2.max_concurrent_streams(SERIAL_MAX_STREAMS);
        }
        Some(H2Defect::Limit4) => {
            http2.max_concurrent_streams(LIMITED_STREAMS);
        }
        None => {}
    }
    // One lock per HTTP/2 connection under `--h2-defect serial`: its
    // streams then take turns, as a server that serves a connection's
    // streams one at a time does.
    let gate =
        move || (defect == Some(H2Defect::Serial)).then(|| Arc::new(tokio::sync::Mutex::new(())));
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(s) => s,
                    // EMFILE and friends: keep serving the connections we have.
                    Err(_) => { tokio::time::sleep(std::time::Duration::from_millis(5)).await; continue; }
                };
                let _ = stream.set_nodelay(true);
                let service = |gate: Option<Arc<tokio::sync::Mutex<()>>>| {
                    hyper::service::service_fn(move |req| answer(req, gate.clone()))
                };
                // On a current-thread runtime every task stays on this thread.
                match &acceptor {
                    Some(acceptor) => {
                        let (acceptor, http1, http2) = (acceptor.clone(), http1.clone(), http2.clone());
                        let gate = gate();
                        tokio::spawn(async move {
                            // A failed handshake is the client's to report.
                            let Ok(tls) = acceptor.accept(stream).await else { return };
                            if tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice()) {
                                let _ = http2.serve_connection(TokioIo::new(tls), service(gate)).await;
                            } else {
                                let _ = http1.serve_connection(TokioIo::new(tls), service(None)).with_upgrades().await;
                            }
                        });
                    }
                    None if h2c => {
                        tokio::spawn(http2.serve_connection(TokioIo::new(stream), service(gate())));
                    }
                    None => {
                        tokio::spawn(http1.serve_connection(TokioIo::new(stream), service(None)).with_upgrades());
                    }
                }
            }
        }
    }
}

/// How long every answer waits before it is sent ([`set_delay`]); none by
/// default. A server whose answers take a known time is how the loader's
/// figures are proven: C connections × S streams / D per second.
static DELAY: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();

/// Answers given before the delay starts ([`set_delay`]).
static DELAY_AFTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Make every answer of this process after the first `after` wait `delay`
/// (once per process: the first call wins). `after` lets contract
/// verification, which sends hundreds of requests one at a time, run at
/// full speed before the load that measures the delay.
pub fn set_delay(delay: std::time::Duration, after: u64) {
    if !delay.is_zero() && DELAY.set(delay).is_ok() {
        DELAY_AFTER.store(after, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Waits [`set_delay`]'s delay, unless this is one of the answers given
/// before it starts.
async fn wait_delay() {
    if let Some(d) = DELAY.get() {
        use std::sync::atomic::Ordering;
        // Count down the undelayed answers; once at 0, every answer waits.
        let early = DELAY_AFTER
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if !early {
            tokio::time::sleep(*d).await;
        }
    }
}

/// A known defect of the reference server's HTTP/2, for tests that prove
/// fairground catches it (`fairground serve --h2-defect`). Every answer is
/// still right; only how streams are served differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum H2Defect {
    /// The streams of a connection are answered one at a time, each after
    /// [`SERIAL_STREAM_COST`], behind a SETTINGS_MAX_CONCURRENT_STREAMS of
    /// [`SERIAL_MAX_STREAMS`]: a client sees every stream accepted and
    /// every answer right, only late.
    Serial,
    /// SETTINGS_MAX_CONCURRENT_STREAMS is [`LIMITED_STREAMS`]: lawful
    /// HTTP/2, and below what a profile's `load.streams` usually asks.
    Limit4,
}

/// What each stream of a serial connection waits for its turn's work
/// ([`H2Defect::Serial`]): the liar of issue 36, 2 ms each.
pub const SERIAL_STREAM_COST: std::time::Duration = std::time::Duration::from_millis(2);
/// The stream limit a serial connection announces: high, so nothing but
/// timing tells it apart.
pub const SERIAL_MAX_STREAMS: u32 = 1000;
/// The stream limit of [`H2Defect::Limit4`].
pub const LIMITED_STREAMS: u32 = 4;

static H2_DEFECT: std::sync::OnceLock<H2Defect> = std::sync::OnceLock::new();

/// Serve HTTP/2 with `defect` (once per process, before [`start_with`]).
pub fn set_h2_defect(defect: H2Defect) {
    let _ = H2_DEFECT.set(defect);
}

/// [`handle`], one at a time per connection when it has a `gate`
/// ([`H2Defect::Serial`]).
async fn answer(
    req: Request<Incoming>,
    gate: Option<Arc<tokio::sync::Mutex<()>>>,
) -> Result<Response<grpc::AnyBody>, Infallible> {
    let _turn = match &gate {
        Some(gate) => {
            let turn = gate.lock().await;
            tokio::time::sleep(SERIAL_STREAM_COST).await;
            Some(turn)
        }
        None => None,
    };
    if grpc::is_call(&req) {
        return Ok(grpc::call(req, wait_delay()).await);
    }
    let resp = handle(req).await?;
    Ok(resp.map(http_body_util::Either::Left))
}

/// Answer one request according to the contract.
async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() == Method::GET && req.uri().path() == contract::ws::PATH {
        // The upgrade is answered at once; the delay is per message.
        return Ok(ws::upgrade(req));
    }
    wait_delay().await;
    let path = req.uri().path();
    let resp = match (req.method(), path) {
        (&Method::GET, "/") => text(StatusCode::OK, contract::PLAINTEXT_BODY),
        (&Method::GET, "/json") => json(
            StatusCode::OK,
            Bytes::from_static(contract::JSON_BODY.as_bytes()),
        ),
        (&Method::GET, p) if p.starts_with("/users/") => {
            let id = &p["/users/".len()..];
            if id.is_empty() || id.contains('/') {
                not_found()
            } else {
                json_value(StatusCode::OK, &contract::param_response(id))
            }
        }
        (&Method::GET, p) if p.starts_with("/mw/") => match p["/mw/".len()..].parse::<u16>() {
            Ok(n) if n <= contract::MAX_MIDDLEWARE => middleware_chain(n, &req),
            _ => not_found(),
        },
        (&Method::GET, contract::db::DB_PATH) => db::answer(db::Ask::Db, req.uri().query()).await,
        (&Method::GET, contract::db::QUERIES_PATH) => {
            db::answer(db::Ask::Queries, req.uri().query()).await
        }
        (&Method::GET, contract::db::FORTUNES_PATH) => {
            db::answer(db::Ask::Fortunes, req.uri().query()).await
        }
        (&Method::GET, contract::db::UPDATES_PATH) => {
            db::answer(db::Ask::Updates, req.uri().query()).await
        }
        (&Method::POST, "/echo") => match read_body(req).await {
            Ok(body) => match serde_json::from_slice::<serde_json::Value>(&body) {
                // Parse and re-serialize: the same work a framework's JSON
                // handler does, and proof that the body really was JSON.
                Ok(v) => json_value(StatusCode::OK, &v),
                Err(e) => text(StatusCode::BAD_REQUEST, &format!("invalid JSON: {e}")),
            },
            Err(resp) => resp,
        },
        (&Method::POST, "/validate") => match read_body(req).await {
            Ok(body) => match serde_json::from_slice::<serde_json::Value>(&body) {
                Ok(v) => match contract::validate(&v) {
                    Ok(valid) => json_value(StatusCode::OK, &valid),
                    Err(why) => json_value(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        &serde_json::json!({ "error": why }),
                    ),
                },
                Err(e) => json_value(
                    StatusCode::BAD_REQUEST,
                    &serde_json::json!({ "error": format!("invalid JSON: {e}") }),
                ),
            },
            Err(resp) => resp,
        },
        _ => not_found(),
    };
    Ok(resp)
}

/// Run a chain of `n` layers, each reading `x-test` and setting `x-mw-{i}`.
/// Written as a real loop over layers so every layer does its own header read
/// and write: the same work per layer that a framework's middleware does.
fn middleware_chain(n: u16, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let mut resp = text(StatusCode::OK, contract::PLAINTEXT_BODY);
    for i in 1..=n {
        let value = req
            .headers()
            .get(contract::MW_REQUEST_HEADER)
            .cloned()
            .unwrap_or_else(|| HeaderValue::from_static(""));
        let name = hyper::header::HeaderName::from_bytes(contract::middleware_header(i).as_bytes())
            .expect("x-mw-N is a valid header name");
        resp.headers_mut().insert(name, value);
    }
    resp
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, Response<Full<Bytes>>> {
    match Limited::new(req.into_body(), contract::MAX_ECHO_BODY * 2)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(_) => Err(text(StatusCode::PAYLOAD_TOO_LARGE, "body too large")),
    }
}

mod db;
mod grpc;
mod ws;

pub use db::{set_db_defect, DbDefect};
pub use grpc::{set_grpc_defect, GrpcDefect};
pub use ws::{set_ws_defect, set_ws_hold, WsDefect};

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::copy_from_slice(body.as_bytes())));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_PLAIN));
    resp
}

fn json(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON));
    resp
}

fn json_value(status: StatusCode, value: &serde_json::Value) -> Response<Full<Bytes>> {
    json(
        status,
        Bytes::from(serde_json::to_vec(value).expect("JSON values serialize")),
    )
}

fn not_found() -> Response<Full<Bytes>> {
    text(StatusCode::NOT_FOUND, "Not Found")
}

/// Every scenario this server answers, for `fairground serve --help` and
/// tests; the database ones only with a database to read
/// ([`contract::db::DB_HOST_ENV`]).
pub fn supported_scenarios() -> Vec<Scenario> {
    let mut all = Scenario::FIXED.to_vec();
    all.extend((0..=contract::MAX_MIDDLEWARE).map(Scenario::Middleware));
    all
}
