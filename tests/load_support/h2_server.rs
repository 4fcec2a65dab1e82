//! A scripted HTTP/2 server with prior knowledge (h2c), on the h2 crate's
//! server side, for the loader's HTTP/2 error paths: what happens to the
//! `n`-th request (0-based, counted across connections) is the script's
//! choice, and a connection can be limited in concurrent streams or sent
//! away (GOAWAY) after a number of requests. A test double, not a server.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

/// What the server does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H2Action {
    /// Answer 200 with a small body after this long.
    Answer(Duration),
    /// Never answer; the stream stays open until the client resets it.
    Stall,
    /// Reset the stream at once (RST_STREAM REFUSED_STREAM).
    Reset,
}

/// How every connection behaves.
#[derive(Debug, Clone, Copy, Default)]
pub struct H2Options {
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub max_streams: Option<u32>,
    /// Shut the connection down gracefully (GOAWAY) after this many
    /// requests on it, as nginx does after `http2_max_requests`.
    pub goaway_after: Option<u64>,
}

/// The running server; it lives as long as the test process.
pub struct H2Server {
    pub addr: SocketAddr,
    /// Requests received (streams accepted).
    pub received: Arc<AtomicU64>,
    /// Connections accepted.
    pub connections: Arc<AtomicU64>,
}

impl H2Server {
    pub fn start(
        options: H2Options,
        script: impl Fn(u64) -> H2Action + Send + Sync + 'static,
    ) -> H2Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let script: Arc<dyn Fn(u64) -> H2Action + Send + Sync> = Arc::new(script);
        let (rx, conns) = (Arc::clone(&received), Arc::clone(&connections));
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((sock, _)) = listener.accept().await else {
                        continue;
                    };
                    let _ = sock.set_nodelay(true);
                    conns.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(serve(sock, options, Arc::clone(&script), Arc::clone(&rx)));
                }
            });
        });
        H2Server {
            addr,
            received,
            connections,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

async fn serve(
    sock: tokio::net::TcpStream,
    options: H2Options,
    script: Arc<dyn Fn(u64) -> H2Action + Send + Sync>,
    received: Arc<AtomicU64>,
) {
    let mut builder = h2::server::Builder::new();
    if let Some(n) = options.max_streams {
        builder.max_concurrent_streams(n);
    }
    let Ok(mut conn) = builder.handshake::<_, Bytes>(sock).await else {
        return;
    };
    let mut served = 0u64;
    // accept() also drives the connection: keep calling it until it ends.
    while let Some(next) = conn.accept().await {
        let Ok((req, mut respond)) = next else { break };
        let action = script(received.fetch_add(1, Ordering::SeqCst));
        served += 1;
        tokio::spawn(async move {
            let mut body = req.into_body();
            while let Some(Ok(data)) = body.data().await {
                let _ = body.flow_control().release_capacity(data.len());
            }
            match action {
                H2Action::Answer(after) => {
                    tokio::time::sleep(after).await;
                    let head = http::Response::builder()
                        .status(200)
                        .header("content-type", "text/plain")
                        .body(())
                        .unwrap();
                    if let Ok(mut tx) = respond.send_response(head, false) {
                        let _ = tx.send_data(Bytes::from_static(b"Hello, World!"), true);
                    }
                }
                H2Action::Stall => {
                    let _ = std::future::poll_fn(|cx| respond.poll_reset(cx)).await;
                }
                H2Action::Reset => respond.send_reset(h2::Reason::REFUSED_STREAM),
            }
        });
        if options.goaway_after == Some(served) {
            conn.graceful_shutdown();
        }
    }
}
