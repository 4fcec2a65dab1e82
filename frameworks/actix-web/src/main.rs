//! The fairground contract on actix-web 4: `web::Path` / `web::Json`
//! extractors and a classic `Transform` middleware wrapped N times around
//! each `/mw/N` resource. One `App` factory behind three listeners:
//! HTTP/1.1 on 8080, HTTP/1.1 and HTTP/2 over TLS on 8443 (rustls 0.23,
//! ALPN), and HTTP/2 with prior knowledge (h2c) on 8082.

use std::future::{ready, Future, Ready};
use std::pin::Pin;

use actix_web::dev::{forward_ready, Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::HeaderName;
use actix_web::{web, App, Error, HttpRequest, HttpResponse, HttpServer, Responder};
use actix_ws::{AggregatedMessage, AggregatedMessageStream, Session};
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

async fn plaintext() -> impl Responder {
    HttpResponse::Ok()
        .content_type("text/plain")
        .body("Hello, World!")
}

async fn json() -> impl Responder {
    web::Json(Message {
        message: "Hello, World!",
    })
}

async fn user(id: web::Path<String>) -> impl Responder {
    web::Json(User {
        id: id.into_inner(),
        name: "ada",
    })
}

async fn echo(body: web::Json<serde_json::Value>) -> impl Responder {
    body
}

async fn validate(person: web::Json<Person>) -> HttpResponse {
    if person.is_valid() {
        HttpResponse::Ok().json(person.into_inner())
    } else {
        HttpResponse::UnprocessableEntity()
            .content_type("text/plain")
            .body("invalid person")
    }
}

/// `GET /ws` (ws-echo): the handshake with `actix_ws::handle` (no
/// extension), then the echo loop spawned on this worker's runtime, as
/// actix-ws's docs do. Frames up to 1 MiB (actix-ws's default is 64 KiB)
/// and fragmented messages aggregated up to 1 MiB (its default).
async fn ws(req: HttpRequest, body: web::Payload) -> Result<HttpResponse, Error> {
    let (response, session, stream) = actix_ws::handle(&req, body)?;
    let stream = stream
        .max_frame_size(1 << 20)
        .aggregate_continuations()
        .max_continuation_size(1 << 20);
    actix_web::rt::spawn(ws_echo(session, stream));
    Ok(response)
}

/// Echoes every data message as it came, text as text, binary as binary;
/// answers a ping with a pong of its payload (actix-ws leaves that to the
/// app) and a close with a close carrying the client's reason, which ends
/// the response body and so the connection.
async fn ws_echo(mut session: Session, mut stream: AggregatedMessageStream) {
    while let Some(Ok(msg)) = stream.recv().await {
        let sent = match msg {
            AggregatedMessage::Text(text) => session.text(text).await,
            AggregatedMessage::Binary(bytes) => session.binary(bytes).await,
            AggregatedMessage::Ping(bytes) => session.pong(&bytes).await,
            AggregatedMessage::Pong(_) => Ok(()),
            AggregatedMessage::Close(reason) => {
                let _ = session.close(reason).await;
                return;
            }
        };
        if sent.is_err() {
            return;
        }
    }
    let _ = session.close(None).await;
}

/// Middleware layer `i`: reads `x-test`, sets `x-mw-{i}` on the response.
struct EchoHeader {
    header: HeaderName,
}

impl EchoHeader {
    fn new(i: u16) -> Self {
        EchoHeader {
            header: HeaderName::try_from(format!("x-mw-{i}")).unwrap(),
        }
    }
}

impl<S, B> Transform<S, ServiceRequest> for EchoHeader
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
    S::Future: 'static,
    B: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = Error;
    type InitError = ();
    type Transform = EchoHeaderMiddleware<S>;
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(EchoHeaderMiddleware {
            service,
            header: self.header.clone(),
        }))
    }
}

struct EchoHeaderMiddleware<S> {
    service: S,
    header: HeaderName,
}

impl<S, B> Service<ServiceRequest> for EchoHeaderMiddleware<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
    S::Future: 'static,
    B: 'static,
{
    type Response = ServiceResponse<B>;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>>>>;

    forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let token = req.headers().get("x-test").cloned();
        let header = self.header.clone();
        let fut = self.service.call(req);
        Box::pin(async move {
            let mut res = fut.await?;
            if let Some(token) = token {
                res.headers_mut().insert(header, token);
            }
            Ok(res)
        })
    }
}

/// `/mw/N` behind the listed layers. In actix the last `wrap` is the
/// outermost, so layers are listed innermost (N) first.
macro_rules! mw_resource {
    ($n:literal $(, $i:literal)*) => {
        web::resource(concat!("/mw/", $n))
            $(.wrap(EchoHeader::new($i)))*
            .route(web::get().to(plaintext))
    };
}

/// The listen backlog: the kernel's own cap, net.core.somaxconn (the
/// profile's server.sysctls), the rule every framework here follows; 1024,
/// actix-web's default, when it cannot be read. actix-web's docs,
/// `HttpServer::backlog`: "Sets the maximum number of pending connections.
/// This refers to the number of clients that can be waiting to be served.
/// Exceeding this number results in the client getting an error when
/// attempting to connect." It must be set before `bind`.
fn listen_backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1024)
}

/// A port from the environment variable `name`, or `default`.
fn port_env(name: &str, default: u16) -> u16 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The rustls configuration for https and h2 (docs/contract.md, "Protocols")
/// when fairground handed the server a certificate: the chain (server
/// certificate, then the CA) from `FAIRGROUND_TLS_CERT`, the PKCS#8 key
/// from `FAIRGROUND_TLS_KEY`; ring provider, TLS 1.2 and 1.3.
/// `bind_rustls_0_23` adds ALPN `h2` and `http/1.1` itself.
fn tls_config() -> Option<rustls::ServerConfig> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};

    let cert_path = std::env::var_os("FAIRGROUND_TLS_CERT")?;
    let key_path = std::env::var_os("FAIRGROUND_TLS_KEY").expect("FAIRGROUND_TLS_KEY");
    let chain = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .expect("read FAIRGROUND_TLS_CERT");
    let key = PrivateKeyDer::from_pem_file(&key_path).expect("read FAIRGROUND_TLS_KEY");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Some(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("certificate and key"),
    )
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let workers = std::env::var("FAIRGROUND_CPUS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1);
    eprintln!("actix-web listening on 0.0.0.0:8080 with {workers} workers");
    // The database, only when fairground gave the server one: a pool per
    // worker (db.rs), FAIRGROUND_DB_POOL connections divided among them.
    let db = db::Settings::from_env(workers);
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(web::JsonConfig::default().limit(1 << 20))
            .app_data(web::Data::new(db::worker_pool(&db)))
            .configure(db::routes)
            .route("/", web::get().to(plaintext))
            .route("/json", web::get().to(json))
            .route("/users/{id}", web::get().to(user))
            .route("/echo", web::post().to(echo))
            .route("/validate", web::post().to(validate))
            .route("/ws", web::get().to(ws))
            .service(mw_resource!(0))
            .service(mw_resource!(1, 1))
            .service(mw_resource!(2, 2, 1))
            .service(mw_resource!(3, 3, 2, 1))
            .service(mw_resource!(4, 4, 3, 2, 1))
            .service(mw_resource!(5, 5, 4, 3, 2, 1))
            .service(mw_resource!(10, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1))
    })
    .workers(workers)
    .backlog(listen_backlog())
    .bind(("0.0.0.0", 8080))?;
    // h2c: actix-web's `bind_auto_h2c` serves HTTP/2 with prior knowledge
    // (and HTTP/1.1) on plain TCP, on the same workers.
    let h2c_port = port_env("FAIRGROUND_H2C_PORT", 8082);
    server = server.bind_auto_h2c(("0.0.0.0", h2c_port))?;
    eprintln!("actix-web h2c listening on 0.0.0.0:{h2c_port}");
    // https and h2 only when fairground mounted a certificate.
    if let Some(config) = tls_config() {
        let tls_port = port_env("FAIRGROUND_TLS_PORT", 8443);
        server = server.bind_rustls_0_23(("0.0.0.0", tls_port), config)?;
        eprintln!("actix-web https/h2 listening on 0.0.0.0:{tls_port}");
    }
    server.run().await
}
