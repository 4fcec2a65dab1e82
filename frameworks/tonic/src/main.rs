//! fairground's gRPC service (bench.proto) on tonic, the way tonic's own
//! examples serve one: the `Bench` trait that tonic-prost-build generated
//! from bench.proto at build time (build.rs), implemented on a unit struct
//! and added to `tonic::transport::Server`. gRPC over HTTP/2 with prior
//! knowledge (h2c) on 8082, and over TLS (ALPN h2) on 8443 when fairground
//! gives a certificate. HTTP/1.1 on 8080 is a bare hyper server for
//! fairground's readiness probe only (no scenario is declared there): gRPC
//! needs HTTP/2.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio_stream::Stream;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

pub mod pb {
    tonic::include_proto!("fairground.bench");
}

use pb::bench_server::{Bench, BenchServer};
use pb::{EchoReply, EchoRequest, StreamReply, StreamRequest, SumReply, SumRequest};

/// The service. A method bench.proto does not define never reaches it:
/// tonic's router answers it UNIMPLEMENTED (grpc-status 12) itself.
#[derive(Debug, Default)]
struct BenchService;

#[tonic::async_trait]
impl Bench for BenchService {
    /// The request's id and payload, unchanged.
    async fn echo(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let EchoRequest { id, payload } = request.into_inner();
        Ok(Response::new(EchoReply { id, payload }))
    }

    /// The sum of the values, two's complement, wrapping on overflow.
    async fn sum(&self, request: Request<SumRequest>) -> Result<Response<SumReply>, Status> {
        let sum = request
            .into_inner()
            .values
            .iter()
            .fold(0i64, |acc, &v| acc.wrapping_add(v));
        Ok(Response::new(SumReply { sum }))
    }

    /// A server stream, as tonic's streaming example types it.
    type StreamStream = Pin<Box<dyn Stream<Item = Result<StreamReply, Status>> + Send>>;

    /// `count` replies, in order, each with the request's id and its index;
    /// produced lazily, as HTTP/2 flow control lets them out. tonic bounds
    /// the handler's future by `grpc-timeout`, not the stream it returns
    /// (which outlives it), so the stream asks the deadline before each
    /// reply and, past it, ends with DEADLINE_EXCEEDED (tonic sends an
    /// `Err` item as the call's status).
    async fn stream(
        &self,
        request: Request<StreamRequest>,
    ) -> Result<Response<Self::StreamStream>, Status> {
        let deadline = request
            .metadata()
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .and_then(grpc_timeout)
            .map(|d| Instant::now() + d);
        let StreamRequest { id, count } = request.into_inner();
        let replies = tokio_stream::iter((0..count).map(move |index| match deadline {
            Some(d) if Instant::now() >= d => Err(Status::deadline_exceeded("deadline exceeded")),
            _ => Ok(StreamReply { id, index }),
        }));
        Ok(Response::new(Box::pin(replies)))
    }
}

/// A `grpc-timeout` value (gRPC's HTTP/2 protocol document: up to 8
/// digits and a unit) as a duration.
fn grpc_timeout(v: &str) -> Option<Duration> {
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
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
        .block_on(serve(workers));
}

async fn serve(workers: usize) {
    // gRPC with prior knowledge on plain TCP: tonic's Server with its
    // defaults (hyper's HTTP/2 server, TCP_NODELAY on).
    let h2c_port = port_env("FAIRGROUND_H2C_PORT", 8082);
    let h2c_addr = SocketAddr::from(([0, 0, 0, 0], h2c_port));
    let h2c = Server::builder()
        .add_service(BenchServer::new(BenchService))
        .serve(h2c_addr);
    tokio::spawn(async move { h2c.await.expect("tonic h2c server") });
    eprintln!("tonic (h2c) listening on {h2c_addr}");

    // gRPC over TLS only when fairground mounted a certificate: tonic's
    // ServerTlsConfig (tokio-rustls, ring provider, ALPN h2 only).
    if let Some(identity) = tls_identity() {
        let tls_port = port_env("FAIRGROUND_TLS_PORT", 8443);
        let tls_addr = SocketAddr::from(([0, 0, 0, 0], tls_port));
        let tls = Server::builder()
            .tls_config(ServerTlsConfig::new().identity(identity))
            .expect("tonic TLS configuration")
            .add_service(BenchServer::new(BenchService))
            .serve(tls_addr);
        tokio::spawn(async move { tls.await.expect("tonic TLS server") });
        eprintln!("tonic (TLS, h2) listening on {tls_addr}");
    }

    eprintln!("hyper (readiness) listening on 0.0.0.0:8080 with {workers} worker thread(s)");
    readiness(SocketAddr::from(([0, 0, 0, 0], 8080))).await;
}

/// The certificate chain (`FAIRGROUND_TLS_CERT`) and PKCS#8 key
/// (`FAIRGROUND_TLS_KEY`), PEM, when fairground handed the server them.
fn tls_identity() -> Option<Identity> {
    let cert_path = std::env::var_os("FAIRGROUND_TLS_CERT")?;
    let key_path = std::env::var_os("FAIRGROUND_TLS_KEY").expect("FAIRGROUND_TLS_KEY");
    let cert = std::fs::read(&cert_path).expect("read FAIRGROUND_TLS_CERT");
    let key = std::fs::read(&key_path).expect("read FAIRGROUND_TLS_KEY");
    Some(Identity::from_pem(cert, key))
}

/// A port from the environment variable `name`, or `default`.
fn port_env(name: &str, default: u16) -> u16 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// HTTP/1.1 for the readiness probe: `GET /` answers `Hello, World!`,
/// anything else 404. hyper is tonic's own HTTP stack.
async fn readiness(addr: SocketAddr) {
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper::{Method, StatusCode};
    use hyper_util::rt::TokioIo;

    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("bind the readiness port");
    let hello = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
        let resp = if req.method() == Method::GET && req.uri().path() == "/" {
            hyper::Response::builder()
                .header("content-type", "text/plain")
                .body(String::from("Hello, World!"))
        } else {
            hyper::Response::builder()
                .status(StatusCode::NOT_FOUND)
                .body(String::new())
        };
        Ok::<_, Infallible>(resp.expect("a valid response"))
    });
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), hello)
                .await;
        });
    }
}
