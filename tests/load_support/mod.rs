//! Shared helpers for the loader's integration tests: run the real binary,
//! and small blocking test servers that misbehave on purpose.
#![allow(dead_code)]

pub mod burst_server;
pub mod h2_server;
pub mod proxy;
pub mod serve_child;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairground::roles::load::LoadReport;

/// Run `fairground load --json ARGS` and parse its report.
pub fn load(args: &[&str]) -> LoadReport {
    load_with(Command::new(env!("CARGO_BIN_EXE_fairground")), args)
}

/// Like [`load`] with a prepared command (e.g. with lowered limits).
pub fn load_with(mut cmd: Command, args: &[&str]) -> LoadReport {
    let out = cmd
        .arg("load")
        .arg("--json")
        .args(args)
        .output()
        .expect("run fairground load");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "fairground load {args:?} failed: {stderr}"
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "report is not JSON ({e}): {}\nstderr: {stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// What a scripted server does with the `n`-th request (0-based, counted
/// across all connections).
#[derive(Debug, Clone)]
pub enum Action {
    /// Write these bytes and keep the connection.
    Reply(Vec<u8>),
    /// Sleep, then write these bytes.
    SleepThenReply(Duration, Vec<u8>),
    /// Write these bytes, then close the connection.
    ReplyAndClose(Vec<u8>),
    /// Never answer; keep the connection open.
    Stall,
}

/// A 200 with a small body.
pub fn ok_response() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()
}

/// A blocking thread-per-connection server whose answers are scripted.
pub struct ScriptedServer {
    pub addr: SocketAddr,
    /// Complete request heads received (requests have no bodies).
    pub received: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl ScriptedServer {
    pub fn start(script: impl Fn(u64) -> Action + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(script);
        let (rx, st) = (Arc::clone(&received), Arc::clone(&stop));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (rx, st, script) = (Arc::clone(&rx), Arc::clone(&st), Arc::clone(&script));
                std::thread::spawn(move || serve_conn(conn, &rx, &st, &*script));
            }
        });
        Self {
            addr,
            received,
            stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve_conn(
    mut conn: TcpStream,
    received: &AtomicU64,
    stop: &AtomicBool,
    script: &dyn Fn(u64) -> Action,
) {
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 16 * 1024];
    // Last bytes of the previous read, so a "\r\n\r\n" split across reads counts.
    let mut tail: Vec<u8> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let n = match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        };
        tail.extend_from_slice(&buf[..n]);
        let mut heads = 0;
        let mut consumed = 0;
        while let Some(i) = tail[consumed..].windows(4).position(|w| w == b"\r\n\r\n") {
            heads += 1;
            consumed += i + 4;
        }
        tail.drain(..consumed);
        for _ in 0..heads {
            let n = received.fetch_add(1, Ordering::SeqCst);
            match script(n) {
                Action::Reply(bytes) => {
                    if conn.write_all(&bytes).is_err() {
                        return;
                    }
                }
                Action::SleepThenReply(d, bytes) => {
                    std::thread::sleep(d);
                    if conn.write_all(&bytes).is_err() {
                        return;
                    }
                }
                Action::ReplyAndClose(bytes) => {
                    let _ = conn.write_all(&bytes);
                    return;
                }
                Action::Stall => {
                    while !stop.load(Ordering::SeqCst) {
                        // Keep reading so the client's writes never block.
                        match conn.read(&mut buf) {
                            Ok(0) => return,
                            Ok(_) => {}
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => return,
                        }
                    }
                    return;
                }
            }
        }
    }
}

/// Raise this process's soft nofile limit to its hard limit; returns it.
pub fn raise_nofile() -> u64 {
    fairground::roles::load::limits::raise_nofile()
}
