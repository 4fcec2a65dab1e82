//! `fairground serve` as a child process on 127.0.0.1 and a port the kernel
//! picks, with any extra flags (a protocol, certificates, `--delay`);
//! killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `fairground serve`.
pub struct ServeChild {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl ServeChild {
    /// Start `fairground serve --bind 127.0.0.1 --port 0 --threads 1 ARGS`
    /// and wait (at most 20 s) for the line that says where it listens.
    pub fn start(args: &[&str]) -> ServeChild {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fairground"))
            .args([
                "serve",
                "--bind",
                "127.0.0.1",
                "--port",
                "0",
                "--threads",
                "1",
            ])
            .args(args)
            .env_remove("FAIRGROUND_TLS_CERT")
            .env_remove("FAIRGROUND_TLS_KEY")
            .env_remove("FAIRGROUND_SERVE_DELAY")
            .env_remove("FAIRGROUND_SERVE_DELAY_AFTER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start fairground serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
        // `fairground serve listening on http://127.0.0.1:PORT (h2c, 1 threads)`
        let addr = line
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok());
        match addr {
            Some(addr) => ServeChild { child, addr },
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("fairground serve {args:?} did not say where it listens: {line:?}");
            }
        }
    }
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
