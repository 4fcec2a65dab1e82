//! bench-loader-server: the thread-per-connection server of
//! scripts/bench-loader.sh, compiled by that script with plain `rustc -O`
//! (std only, no Cargo project, nothing to download).
//!
//! Owns: answering `Hello, World!` (keep-alive, pipelined requests answered
//! in order) on 127.0.0.1:PORT, one blocking OS thread per connection, so a
//! loader is measured against the other kind of server than nginx's event
//! loop: every request wakes a sleeping thread, which is what makes a
//! loader's per-response cost on such servers high (issue 15).
//!
//! Must not: listen on anything but 127.0.0.1, or run without an end: it
//! exits after the seconds given as its second argument.
//!
//! Usage: bench-loader-server PORT SECONDS

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

const ANSWER: &[u8] =
    b"HTTP/1.1 200 OK\r\nServer: bench\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";

fn serve(mut c: TcpStream) {
    let _ = c.set_nodelay(true);
    let mut buf = vec![0u8; 16 * 1024];
    let mut out = Vec::with_capacity(16 * 1024);
    let (mut start, mut end) = (0usize, 0usize);
    loop {
        if end == buf.len() {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
            if end == buf.len() {
                return; // a request head larger than the buffer: not ours
            }
        }
        match c.read(&mut buf[end..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => end += n,
        }
        // Every complete request head (the loader's GETs carry no body).
        while let Some(i) = buf[start..end].windows(4).position(|w| w == b"\r\n\r\n") {
            start += i + 4;
            out.extend_from_slice(ANSWER);
        }
        if start == end {
            (start, end) = (0, 0);
        }
        if !out.is_empty() {
            if c.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let port: u16 = args
        .next()
        .and_then(|p| p.parse().ok())
        .expect("usage: bench-loader-server PORT SECONDS");
    let seconds: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .expect("usage: bench-loader-server PORT SECONDS");
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind 127.0.0.1:PORT");
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(seconds));
        std::process::exit(0);
    });
    for c in listener.incoming().flatten() {
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || serve(c))
            .expect("spawn a connection thread");
    }
}
