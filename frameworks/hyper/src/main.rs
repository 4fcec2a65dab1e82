//! The fairground contract on plain hyper 1: a hand-written router and
//! middleware as nested `hyper::service::Service` wrappers, the way a hyper
//! user composes services without a framework. HTTP/1.1 on 8080, HTTP/1.1
//! and HTTP/2 over TLS (rustls, ALPN) on 8443, HTTP/2 with prior knowledge
//! (h2c) on 8082, all through the same router and middleware.

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
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use serde::{Deserialize, Serialize};

mod db;

pub(crate) type Resp = Response<Full<Bytes>>;
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

pub(crate) fn json<T: Serialize>(value: &T) -> Resp {
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
    /// The database, when fairground gave the server one (db.rs).
    db: Option<db::Db>,
}

impl App {
    async fn route(self: Arc<Self>, req: Request<Incoming>) -> Result<Resp, Infallible> {
        if req.method() == Method::GET {
            let uri = req.uri().clone();
            if let Some(resp) = db::route(self.db.as_ref(), uri.path(), uri.query()).await {
                return Ok(resp);
            }
        }
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

/// A port from the environment variable `name`, or `default`.
fn port_env(name: &str, default: u16) -> u16 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The TLS acceptor for https and h2 (docs/contract.md, "Protocols"), when
/// fairground handed the server a certificate: the chain (server certificate,
/// then the CA) from `FAIRGROUND_TLS_CERT` and the PKCS#8 key from
/// `FAIRGROUND_TLS_KEY`. rustls with the ring provider, TLS 1.2 and 1.3,
/// ALPN `h2` then `http/1.1` (the client asks for exactly one).
fn tls_acceptor() -> Option<tokio_rustls::TlsAcceptor> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    use tokio_rustls::rustls::{self, ServerConfig};

    let cert_path = std::env::var_os("FAIRGROUND_TLS_CERT")?;
    let key_path = std::env::var_os("FAIRGROUND_TLS_KEY").expect("FAIRGROUND_TLS_KEY");
    let chain = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .expect("read FAIRGROUND_TLS_CERT");
    let key = PrivateKeyDer::from_pem_file(&key_path).expect("read FAIRGROUND_TLS_KEY");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("certificate and key");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Serves one connection with hyper's HTTP/1.1 server, as on port 8080.
async fn serve_http1<I>(io: I, app: Arc<App>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req| app.clone().route(req));
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(io), svc)
        .await;
}

/// Serves one connection with hyper's HTTP/2 server (streams are tasks on the
/// same runtime).
async fn serve_http2<I>(io: I, app: Arc<App>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |req| app.clone().route(req));
    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(io), svc)
        .await;
}

/// `https` and `h2` on one TLS listener: the protocol ALPN agreed picks
/// hyper's HTTP/2 or HTTP/1.1 server.
async fn serve_tls(listener: tokio::net::TcpListener, acceptor: tokio_rustls::TlsAcceptor, app: Arc<App>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                serve_http2(tls, app).await;
            } else {
                serve_http1(tls, app).await;
            }
        });
    }
}

/// `h2c`: HTTP/2 with prior knowledge on plain TCP.
async fn serve_h2c(listener: tokio::net::TcpListener, app: Arc<App>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve_http2(stream, app.clone()));
    }
}

async fn serve() {
    let app = Arc::new(App {
        chains: (0..=10).map(chain).collect(),
        db: db::Db::from_env(),
    });
    if app.db.is_some() {
        let app = app.clone();
        tokio::spawn(async move { app.db.as_ref().unwrap().open().await });
    }
    // h2c on its own port (FAIRGROUND_H2C_PORT, 8082); it needs no files, so
    // it is always open.
    let h2c_addr = SocketAddr::from(([0, 0, 0, 0], port_env("FAIRGROUND_H2C_PORT", 8082)));
    let h2c = listener(h2c_addr).expect("bind the h2c port");
    tokio::spawn(serve_h2c(h2c, app.clone()));
    eprintln!("hyper h2c listening on {h2c_addr}");
    // https and h2 only when fairground gave the server a certificate.
    if let Some(acceptor) = tls_acceptor() {
        let tls_addr = SocketAddr::from(([0, 0, 0, 0], port_env("FAIRGROUND_TLS_PORT", 8443)));
        let tls = listener(tls_addr).expect("bind the TLS port");
        tokio::spawn(serve_tls(tls, acceptor, app.clone()));
        eprintln!("hyper https/h2 listening on {tls_addr}");
    }
    let addr = SocketAddr::from(([0, 0, 0, 0], 8080));
    let listener = listener(addr).expect("bind 0.0.0.0:8080");
    eprintln!("hyper listening on {addr}");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve_http1(stream, app.clone()));
    }
}
