//! The fairground contract on axum: typed extractors, `Json`, and
//! `middleware::from_fn_with_state` layers for the middleware chains.

use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

mod db;

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

#[derive(Serialize)]
struct User {
    id: String,
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

async fn plaintext() -> &'static str {
    "Hello, World!"
}

async fn json() -> Json<Message> {
    Json(Message {
        message: "Hello, World!",
    })
}

async fn user(Path(id): Path<String>) -> Json<User> {
    Json(User { id, name: "ada" })
}

async fn echo(Json(value): Json<serde_json::Value>) -> Json<serde_json::Value> {
    Json(value)
}

async fn validate(Json(person): Json<Person>) -> Response {
    if person.is_valid() {
        Json(person).into_response()
    } else {
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid person").into_response()
    }
}

/// `GET /ws` (ws-echo): upgraded with axum's `WebSocketUpgrade` and its
/// defaults (tokio-tungstenite underneath, no extension, 64 MiB messages).
async fn ws(upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(ws_echo)
}

/// Echoes every data message as it came, text as text, binary as binary;
/// fragmented messages arrive whole. Pings and closes are tungstenite's:
/// it queues the pong (or the close reply) when it reads them and writes it
/// on the next `recv`, so the loop keeps reading until the stream ends
/// (after the close reply went out), then the TCP connection is dropped.
async fn ws_echo(mut socket: WebSocket) {
    while let Some(Ok(msg)) = socket.recv().await {
        if matches!(msg, WsMessage::Text(_) | WsMessage::Binary(_))
            && socket.send(msg).await.is_err()
        {
            return;
        }
    }
}

/// One middleware layer: reads `x-test`, runs the rest of the chain, sets
/// this layer's `x-mw-{i}` header on the way out.
async fn echo_header(State(header): State<HeaderName>, req: Request, next: Next) -> Response {
    let token = req.headers().get("x-test").cloned();
    let mut resp = next.run(req).await;
    if let Some(token) = token {
        resp.headers_mut().insert(header, token);
    }
    resp
}

/// `/mw/{n}` behind `n` layers. In axum the last `.layer` is the outermost,
/// so layers are added innermost (n) first.
fn chain(n: u16) -> Router {
    let mut route = get(plaintext);
    for i in (1..=n).rev() {
        let header = HeaderName::try_from(format!("x-mw-{i}")).unwrap();
        route = route.layer(middleware::from_fn_with_state(header, echo_header));
    }
    Router::new().route(&format!("/mw/{n}"), route)
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
    let mut app = Router::new()
        .route("/", get(plaintext))
        .route("/json", get(json))
        .route("/users/{id}", get(user))
        .route("/echo", post(echo))
        .route("/validate", post(validate))
        .route("/ws", get(ws));
    for n in 0..=10 {
        app = app.merge(chain(n));
    }
    app = app.merge(db::routes(db::pool()));
    // h2c: axum::serve with the http2 feature answers HTTP/2 with prior
    // knowledge (and HTTP/1.1) on its own port.
    let h2c_port = port_env("FAIRGROUND_H2C_PORT", 8082);
    let h2c = listener(([0, 0, 0, 0], h2c_port).into()).expect("bind the h2c port");
    let h2c_app = app.clone();
    tokio::spawn(async move { axum::serve(h2c, h2c_app).await.expect("axum h2c server") });
    eprintln!("axum h2c listening on 0.0.0.0:{h2c_port}");
    // https and h2 only when fairground gave the server a certificate.
    if let Some(acceptor) = tls_acceptor() {
        let tls_port = port_env("FAIRGROUND_TLS_PORT", 8443);
        let tls = listener(([0, 0, 0, 0], tls_port).into()).expect("bind the TLS port");
        tokio::spawn(serve_tls(tls, acceptor, app.clone()));
        eprintln!("axum https/h2 listening on 0.0.0.0:{tls_port}");
    }
    let listener = listener(([0, 0, 0, 0], 8080).into()).expect("bind 0.0.0.0:8080");
    eprintln!("axum listening on 0.0.0.0:8080");
    axum::serve(listener, app).await.expect("axum server");
}

/// A port from the environment variable `name`, or `default`.
fn port_env(name: &str, default: u16) -> u16 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The TLS acceptor for https and h2 (docs/contract.md, "Protocols"), when
/// fairground handed the server a certificate: the chain from
/// `FAIRGROUND_TLS_CERT`, the PKCS#8 key from `FAIRGROUND_TLS_KEY`; ring
/// provider, TLS 1.2 and 1.3, ALPN `h2` then `http/1.1`.
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
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("certificate and key");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Some(tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)))
}

/// https and h2 on one TLS listener, as axum's low-level-rustls example
/// serves a Router: hyper-util's auto builder speaks whichever protocol
/// ALPN agreed; `serve_connection_with_upgrades` (as `axum::serve` does)
/// so that `GET /ws` upgrades over TLS too (wss).
async fn serve_tls(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    app: Router,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
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
            let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                tower_service::Service::call(&mut app.clone(), req)
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(tls), svc)
                .await;
        });
    }
}
