//! A server that answers in waves: every request is held until the next
//! tick of a fixed period, so each tick releases one answer per connection
//! at once (what an event loop that sweeps every connection once per tick
//! looks like from the client).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ok_response;

/// Thread per connection; all connections share one clock of ticks.
pub struct BurstServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl BurstServer {
    /// Answer every request at the first tick of `period` after it arrived.
    pub fn start(period: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let st = Arc::clone(&stop);
        let epoch = Instant::now();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let st = Arc::clone(&st);
                std::thread::spawn(move || serve(conn, epoch, period, &st));
            }
        });
        Self { addr, stop }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for BurstServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(mut conn: TcpStream, epoch: Instant, period: Duration, stop: &AtomicBool) {
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 4096];
    let mut pending: Vec<u8> = Vec::new();
    let response = ok_response();
    while !stop.load(Ordering::SeqCst) {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
        while let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..i + 4);
            // The next tick strictly after now.
            let p = period.as_nanos();
            let next = (epoch.elapsed().as_nanos() / p + 1) * p;
            let at = epoch + Duration::from_nanos(next as u64);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            if conn.write_all(&response).is_err() {
                return;
            }
        }
    }
}
