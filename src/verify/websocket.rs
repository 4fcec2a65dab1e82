//! The checks of a WebSocket scenario (docs/contract.md, "WebSocket
//! scenarios"), each named, each on what RFC 6455 says:
//!
//! - `ws-upgrade`: `GET /ws` with a random key answered 101 with the key's
//!   `Sec-WebSocket-Accept`, no extension agreed that was not offered;
//! - `ws-echo`: random text (with multi-byte UTF-8) and binary messages of
//!   1 B to 64 KiB, across the three length encodings, echoed exactly and
//!   in order, text as valid UTF-8 text, binary as binary, never masked;
//! - `ws-unmask`: no echo is the payload as it came (still masked);
//! - `ws-fragments`: a text message sent in three frames, a ping between
//!   the second and third, echoed whole;
//! - `ws-ping`: a ping answered by a pong carrying its payload;
//! - `ws-close`: a close answered with a close frame, then the TCP
//!   connection closed.
//!
//! Each later check runs on a fresh upgraded connection, so one broken
//! rule does not hide another. Bound: each read waits at most the
//! endpoint's timeout, and each check makes at most one connection.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::contract::{ws, Scenario};

use super::client::Io;
use super::report::{names, ContractCheck};
use super::scenario::ScenarioOutcome;
use super::Endpoint;

/// Message sizes `ws-echo` sends: each length encoding and its edges, up
/// to the contract's largest message.
const TEXT_SIZES: [usize; 6] = [1, 125, 126, 1000, 65_535, 65_536];
const BINARY_SIZES: [usize; 3] = [1, 200, 65_536];

/// One upgraded connection, read frame by frame.
struct WsConn {
    io: Box<dyn Io>,
    buf: Vec<u8>,
    timeout: Duration,
}

/// A whole message and the pongs that arrived before it.
struct Message {
    opcode: u8,
    payload: Vec<u8>,
    pongs: Vec<Vec<u8>>,
}

impl WsConn {
    /// Connects and upgrades: `Err` says why the upgrade failed.
    async fn open(target: &Endpoint, rng: &mut StdRng) -> Result<WsConn, String> {
        let deadline = tokio::time::Instant::now() + target.timeout;
        let mut io = target
            .stream(deadline)
            .await
            .map_err(|e| format!("could not connect: {e}"))?;
        let mut key = [0u8; 16];
        rng.fill(&mut key);
        let key = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, key);
        io.write_all(&ws::upgrade_request(ws::PATH, &target.host, &key))
            .await
            .map_err(|e| format!("sending the upgrade: {e}"))?;
        let mut buf = Vec::with_capacity(4096);
        let used = tokio::time::timeout_at(deadline, async {
            loop {
                let mut chunk = [0u8; 4096];
                let n = io
                    .read(&mut chunk)
                    .await
                    .map_err(|e| format!("reading the upgrade's answer: {e}"))?;
                if n == 0 {
                    return Err("the server closed the connection on the upgrade".to_string());
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(used) = ws::read_upgrade(&buf, &key).map_err(|e| e.to_string())? {
                    return Ok(used);
                }
                if buf.len() > 64 * 1024 {
                    return Err("the upgrade's answer has a head over 64 KiB".to_string());
                }
            }
        })
        .await
        .map_err(|_| format!("no answer to the upgrade within {:?}", target.timeout))??;
        buf.drain(..used);
        Ok(WsConn {
            io,
            buf,
            timeout: target.timeout,
        })
    }

    async fn send(
        &mut self,
        fin: bool,
        opcode: u8,
        payload: &[u8],
        mask: [u8; 4],
    ) -> Result<(), String> {
        self.io
            .write_all(&ws::frame(fin, opcode, payload, Some(mask)))
            .await
            .map_err(|e| format!("sending a frame: {e}"))
    }

    /// The next frame; `Ok(None)` when the server closed the connection.
    async fn frame(&mut self) -> Result<Option<(ws::Header, Vec<u8>)>, String> {
        let wait = async {
            loop {
                match ws::Header::parse(&self.buf) {
                    Ok(Some(h)) if self.buf.len() as u64 >= h.len as u64 + h.payload => {
                        if h.mask.is_some() {
                            return Err(
                                "the server masked a frame (RFC 6455 §5.1: a server must not)"
                                    .to_string(),
                            );
                        }
                        let end = h.len + h.payload as usize;
                        let payload = self.buf[h.len..end].to_vec();
                        self.buf.drain(..end);
                        return Ok(Some((h, payload)));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        return Err(format!(
                            "the server sent a frame that is not WebSocket: {e}"
                        ))
                    }
                }
                let mut chunk = [0u8; 16 * 1024];
                match self.io.read(&mut chunk).await {
                    Ok(0) => return Ok(None),
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                    Err(e) => return Err(format!("reading: {e}")),
                }
            }
        };
        tokio::time::timeout(self.timeout, wait)
            .await
            .map_err(|_| format!("nothing within {:?}", self.timeout))?
    }

    /// The next whole data message (fragments joined), with the pongs
    /// that came first; a close or the end of the connection is an error.
    async fn message(&mut self) -> Result<Message, String> {
        let mut m = Message {
            opcode: 0,
            payload: Vec::new(),
            pongs: Vec::new(),
        };
        loop {
            let Some((h, payload)) = self.frame().await? else {
                return Err("the server closed the connection instead of answering".into());
            };
            match h.opcode {
                ws::OP_PONG => m.pongs.push(payload),
                ws::OP_PING => {
                    let pong = ws::frame(true, ws::OP_PONG, &payload, Some([7, 7, 7, 7]));
                    self.io.write_all(&pong).await.map_err(|e| e.to_string())?;
                }
                ws::OP_CLOSE => {
                    return Err(format!(
                        "the server sent a close frame ({}) instead of answering",
                        close_code(&payload)
                    ))
                }
                ws::OP_CONT if m.opcode == 0 => {
                    return Err("a continuation frame that continues no message".into())
                }
                op => {
                    if op != ws::OP_CONT {
                        if m.opcode != 0 {
                            return Err("a new message began inside a fragmented one".into());
                        }
                        m.opcode = op;
                    }
                    m.payload.extend_from_slice(&payload);
                    if h.fin {
                        return Ok(m);
                    }
                }
            }
        }
    }
}

fn close_code(payload: &[u8]) -> String {
    match payload {
        [a, b, rest @ ..] => {
            let code = u16::from_be_bytes([*a, *b]);
            if rest.is_empty() {
                format!("code {code}")
            } else {
                format!("code {code}, {:?}", String::from_utf8_lossy(rest))
            }
        }
        _ => "no code".to_string(),
    }
}

/// Random text of `len` bytes: printable ASCII with two- and three-byte
/// UTF-8 characters mixed in.
fn random_text(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut s = String::with_capacity(len);
    while s.len() < len {
        let left = len - s.len();
        let c = match rng.random_range(0..10) {
            0 if left >= 3 => '€',
            1 if left >= 2 => 'é',
            _ => rng.random_range(b' '..=b'~') as char,
        };
        s.push(c);
    }
    s.into_bytes()
}

fn describe(opcode: u8, len: usize) -> String {
    let kind = if opcode == ws::OP_TEXT {
        "text"
    } else {
        "binary"
    };
    format!("a {len} B {kind} message")
}

/// Every check of a WebSocket scenario against `target`.
pub(crate) async fn check(
    target: &Endpoint,
    scenario: Scenario,
    rng: &mut StdRng,
) -> ScenarioOutcome {
    let mut checks = Vec::new();
    let conn = if target.protocol.is_http2() {
        Err(format!(
            "not tried: WebSocket runs over an HTTP/1.1 upgrade (http1, https), not {}",
            target.protocol
        ))
    } else {
        WsConn::open(target, rng).await
    };
    let upgraded = conn.is_ok();
    checks.push(ContractCheck::required(
        names::WS_UPGRADE,
        conn.as_ref()
            .map(|_| "101 with the key's Sec-WebSocket-Accept, no extension".to_string())
            .map_err(Clone::clone),
    ));
    if let Ok(mut conn) = conn {
        let (echo, unmask) = echo(&mut conn, rng).await;
        checks.push(ContractCheck::required(names::WS_ECHO, echo));
        checks.push(ContractCheck::required(names::WS_UNMASK, unmask));
        checks.push(ContractCheck::required(
            names::WS_FRAGMENTS,
            on_fresh(target, rng, fragments).await,
        ));
        checks.push(ContractCheck::required(
            names::WS_PING,
            on_fresh(target, rng, ping).await,
        ));
        checks.push(ContractCheck::required(
            names::WS_CLOSE,
            on_fresh(target, rng, close).await,
        ));
    }
    ScenarioOutcome::of(scenario, checks, upgraded)
}

type Check = Result<String, String>;

/// Runs `f` on a freshly upgraded connection.
async fn on_fresh<F>(target: &Endpoint, rng: &mut StdRng, f: F) -> Check
where
    F: AsyncFnOnce(&mut WsConn, &mut StdRng) -> Check,
{
    let mut conn = WsConn::open(target, rng)
        .await
        .map_err(|e| format!("not tried: the upgrade failed: {e}"))?;
    f(&mut conn, rng).await
}

/// `ws-echo` and `ws-unmask`: random messages of every length encoding,
/// one at a time.
async fn echo(conn: &mut WsConn, rng: &mut StdRng) -> (Check, Check) {
    let mut sent = 0usize;
    let mut unmask: Check = Ok("no echo was the payload still masked".into());
    let mut earlier: Vec<Vec<u8>> = Vec::new();
    let messages: Vec<(u8, usize)> = TEXT_SIZES
        .iter()
        .map(|&n| (ws::OP_TEXT, n))
        .chain(BINARY_SIZES.iter().map(|&n| (ws::OP_BINARY, n)))
        .collect();
    for (opcode, len) in messages {
        let payload = if opcode == ws::OP_TEXT {
            random_text(rng, len)
        } else {
            let mut b = vec![0u8; len];
            rng.fill(&mut b[..]);
            b
        };
        let mask: [u8; 4] = rng.random();
        if let Err(e) = conn.send(true, opcode, &payload, mask).await {
            return (Err(e), unmask);
        }
        let what = describe(opcode, len);
        let m = match conn.message().await {
            Ok(m) => m,
            Err(e) => return (Err(format!("{what}: {e}")), unmask),
        };
        if m.payload != payload {
            let mut masked = payload.clone();
            ws::apply_mask(&mut masked, mask, 0);
            let why = if m.payload == masked {
                unmask = Err(format!("{what} was echoed as it came, still masked"));
                "the payload still masked".to_string()
            } else if earlier.contains(&m.payload) {
                "the payload of an earlier message".to_string()
            } else if m.payload.len() != payload.len() {
                format!("{} B", m.payload.len())
            } else {
                let at = m
                    .payload
                    .iter()
                    .zip(&payload)
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                format!("a payload that differs from byte {at}")
            };
            return (Err(format!("{what} was echoed as {why}")), unmask);
        }
        if m.opcode != opcode {
            return (
                Err(format!("{what} was echoed as {}", describe(m.opcode, len))),
                unmask,
            );
        }
        if opcode == ws::OP_TEXT && std::str::from_utf8(&m.payload).is_err() {
            return (
                Err(format!("{what} was echoed as text that is not UTF-8")),
                unmask,
            );
        }
        earlier.push(payload);
        sent += 1;
    }
    (
        Ok(format!(
            "{sent} random messages of 1 B to 64 KiB, text and binary, echoed exactly"
        )),
        unmask,
    )
}

/// `ws-fragments`: one text message in three frames, a ping between the
/// second and the third.
async fn fragments(conn: &mut WsConn, rng: &mut StdRng) -> Check {
    let text = random_text(rng, 300);
    let (a, rest) = text.split_at(100);
    let (b, c) = rest.split_at(100);
    conn.send(false, ws::OP_TEXT, a, rng.random()).await?;
    conn.send(false, ws::OP_CONT, b, rng.random()).await?;
    conn.send(true, ws::OP_PING, b"between", rng.random())
        .await?;
    conn.send(true, ws::OP_CONT, c, rng.random()).await?;
    let m = conn.message().await?;
    if m.payload != text {
        return Err(format!(
            "a 300 B text message in three frames was echoed as {} B{}",
            m.payload.len(),
            if m.payload.as_slice() == a {
                " (its first frame alone)"
            } else {
                ""
            }
        ));
    }
    Ok("a 300 B text message in three frames, a ping between them, echoed whole".into())
}

/// `ws-ping`: a ping with a random payload answered by a pong carrying it.
async fn ping(conn: &mut WsConn, rng: &mut StdRng) -> Check {
    let payload = random_text(rng, 16);
    conn.send(true, ws::OP_PING, &payload, rng.random()).await?;
    loop {
        let Some((h, got)) = conn
            .frame()
            .await
            .map_err(|e| format!("after a ping: {e}"))?
        else {
            return Err("the server closed the connection instead of answering a ping".into());
        };
        match h.opcode {
            ws::OP_PONG if got == payload => {
                return Ok("a ping answered by a pong with its payload".into())
            }
            ws::OP_PONG => {
                return Err(format!(
                    "a ping of {:?} answered by a pong of {:?}",
                    String::from_utf8_lossy(&payload),
                    String::from_utf8_lossy(&got)
                ))
            }
            ws::OP_PING => {}
            op => {
                return Err(format!(
                    "a ping answered by a frame of opcode {op:#x}, not a pong"
                ))
            }
        }
    }
}

/// `ws-close`: a close (1000) answered with a close frame, then the TCP
/// connection closed.
async fn close(conn: &mut WsConn, rng: &mut StdRng) -> Check {
    conn.send(
        true,
        ws::OP_CLOSE,
        &ws::close_payload(1000, "done"),
        rng.random(),
    )
    .await?;
    loop {
        match conn.frame().await {
            Ok(Some((h, payload))) if h.opcode == ws::OP_CLOSE => {
                // After its close the server closes the connection.
                return match conn.frame().await {
                    Ok(None) => Ok(format!(
                        "a close answered with a close ({}), then the connection closed",
                        close_code(&payload)
                    )),
                    Err(e) if e.starts_with("reading") => Ok(format!(
                        "a close answered with a close ({}), then the connection reset",
                        close_code(&payload)
                    )),
                    Err(e) if e.starts_with("nothing within") => Err(format!(
                        "the server answered the close but kept the connection open ({e})"
                    )),
                    Err(e) => Err(format!("after its close: {e}")),
                    Ok(Some((h, _))) => Err(format!(
                        "the server sent a frame of opcode {:#x} after its close",
                        h.opcode
                    )),
                };
            }
            Ok(Some((h, _))) if h.opcode == ws::OP_PING || h.opcode == ws::OP_PONG => {}
            Ok(Some((h, _))) => {
                return Err(format!(
                    "a close answered by a frame of opcode {:#x}",
                    h.opcode
                ))
            }
            Ok(None) => return Err("the server closed the connection without a close frame".into()),
            Err(e) if e.starts_with("reading") => {
                return Err(format!(
                    "the server dropped the connection without a close frame ({e})"
                ))
            }
            Err(e) => return Err(format!("after a close: {e}")),
        }
    }
}
