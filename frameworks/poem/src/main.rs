//! The fairground contract on poem: `#[handler]` functions with `Path` and
//! `Json` extractors, and a `poem::Middleware` applied N times with
//! `EndpointExt::with` to each `/mw/N` endpoint.

use poem::http::{HeaderName, StatusCode};
use poem::listener::TcpAcceptor;
use poem::web::{Json, Path};
use poem::{
    get, handler, post, Endpoint, EndpointExt, IntoResponse, Middleware, Request, Response, Result,
    Route, Server,
};
use serde::{Deserialize, Serialize};

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

#[handler]
fn plaintext() -> &'static str {
    "Hello, World!"
}

#[handler]
fn json() -> Json<Message> {
    Json(Message {
        message: "Hello, World!",
    })
}

#[handler]
fn user(Path(id): Path<String>) -> Json<User> {
    Json(User { id, name: "ada" })
}

#[handler]
fn echo(Json(value): Json<serde_json::Value>) -> Json<serde_json::Value> {
    Json(value)
}

#[handler]
fn validate(Json(person): Json<Person>) -> Response {
    if person.is_valid() {
        Json(person).into_response()
    } else {
        StatusCode::UNPROCESSABLE_ENTITY.into_response()
    }
}

/// Middleware layer `i`: reads `x-test`, sets `x-mw-{i}` on the response.
struct EchoHeader {
    header: HeaderName,
}

impl<E: Endpoint> Middleware<E> for EchoHeader {
    type Output = EchoHeaderEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        EchoHeaderEndpoint {
            inner,
            header: self.header.clone(),
        }
    }
}

struct EchoHeaderEndpoint<E> {
    inner: E,
    header: HeaderName,
}

impl<E: Endpoint> Endpoint for EchoHeaderEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> Result<Self::Output> {
        let token = req.headers().get("x-test").cloned();
        let mut resp = self.inner.call(req).await?.into_response();
        if let Some(token) = token {
            resp.headers_mut().insert(self.header.clone(), token);
        }
        Ok(resp)
    }
}

/// `/mw/{n}`'s endpoint behind `n` layers: each `with` wraps the previous
/// endpoint, so layers are applied innermost (n) first and layer 1 ends up
/// outermost.
fn chain(n: u16) -> poem::endpoint::BoxEndpoint<'static> {
    let mut ep = get(plaintext).boxed();
    for i in (1..=n).rev() {
        ep = ep
            .with(EchoHeader {
                header: HeaderName::try_from(format!("x-mw-{i}")).unwrap(),
            })
            .boxed();
    }
    ep
}

fn main() -> std::io::Result<()> {
    let workers = std::env::var("FAIRGROUND_CPUS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?
        .block_on(serve())
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

async fn serve() -> std::io::Result<()> {
    let mut app = Route::new()
        .at("/", get(plaintext))
        .at("/json", get(json))
        .at("/users/:id", get(user))
        .at("/echo", post(echo))
        .at("/validate", post(validate));
    for n in 0..=10 {
        app = app.at(format!("/mw/{n}"), chain(n));
    }
    eprintln!("poem listening on 0.0.0.0:8080");
    let acceptor = TcpAcceptor::from_tokio(listener(([0, 0, 0, 0], 8080).into())?)?;
    Server::new_with_acceptor(acceptor).run(app).await
}
