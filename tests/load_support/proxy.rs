//! A TCP proxy on 127.0.0.1 in front of a test server: it counts the bytes
//! each way, as the server's side of the connection sees them, and can hold
//! the server's first flight (for TLS: its ServerHello and certificate) for
//! a fixed time, a server slow to complete its handshake.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A running proxy; stops accepting when dropped.
pub struct Proxy {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Bytes the server wrote to clients.
    pub down: Arc<AtomicU64>,
    /// Bytes clients wrote to the server.
    pub up: Arc<AtomicU64>,
    open: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// Proxy to `target`, holding each connection's first bytes from the
    /// server for `hold`.
    pub fn start(target: SocketAddr, hold: Duration) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (down, up) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let open = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (d, u, o, st) = (
            Arc::clone(&down),
            Arc::clone(&up),
            Arc::clone(&open),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                o.fetch_add(2, Ordering::SeqCst);
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (u, o2) = (Arc::clone(&u), Arc::clone(&o));
                std::thread::spawn(move || pipe(c2, s2, Duration::ZERO, &u, &o2));
                let (d, o3) = (Arc::clone(&d), Arc::clone(&o));
                std::thread::spawn(move || pipe(server, client, hold, &d, &o3));
            }
        });
        Proxy {
            addr,
            down,
            up,
            open,
            stop,
        }
    }

    /// Wait (at most 5 s) until every connection through the proxy has
    /// closed both ways, so the counts are final.
    pub fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.open.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            self.open.load(Ordering::SeqCst),
            0,
            "connections through the proxy still open after 5 s"
        );
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copy `from` to `to`, counting, the first read held back `hold`; when
/// `from` ends, end `to`'s writing side.
fn pipe(
    mut from: TcpStream,
    mut to: TcpStream,
    hold: Duration,
    count: &AtomicU64,
    open: &AtomicU64,
) {
    let mut buf = [0u8; 16 * 1024];
    let mut first = true;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if first && !hold.is_zero() {
            std::thread::sleep(hold);
        }
        first = false;
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        count.fetch_add(n as u64, Ordering::SeqCst);
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
    open.fetch_sub(1, Ordering::SeqCst);
}
