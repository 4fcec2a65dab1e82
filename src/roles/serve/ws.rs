//! The reference server's WebSocket (`GET /ws`, docs/contract.md
//! "WebSocket scenarios"): the upgrade answered through hyper's upgrade
//! mechanism, then an echo written on the contract's codec
//! (`contract::ws`): every data message echoed whole, pings answered,
//! close answered. `--ws-defect` makes it each liar of the contract's
//! table, every other rule kept.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::contract::ws;

/// A known defect of the reference server's WebSocket, for tests that
/// prove fairground catches it (`fairground serve --ws-defect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WsDefect {
    /// A `Sec-WebSocket-Accept` that is not the key's.
    BadAccept,
    /// Every message answered with the first payload the connection saw.
    Fixed,
    /// Payloads echoed as they came, still masked.
    NoUnmask,
    /// Pings never answered.
    NoPong,
    /// A close answered by closing the TCP connection, no close frame.
    NoClose,
}

static WS_DEFECT: std::sync::OnceLock<WsDefect> = std::sync::OnceLock::new();

/// Serve WebSocket with `defect` (once per process, before serving).
pub fn set_ws_defect(defect: WsDefect) {
    let _ = WS_DEFECT.set(defect);
}

static WS_HOLD: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Make every upgraded connection hold `bytes` of resident memory for its
/// life (once per process): a server whose memory per connection is known.
pub fn set_ws_hold(bytes: usize) {
    let _ = WS_HOLD.set(bytes);
}

/// Largest message the server reads; beyond it the connection is closed
/// (1009, too big).
const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// Answers an upgrade request: 101 and the echo spawned on the upgraded
/// connection, or 400 naming what the request lacks.
pub fn upgrade(mut req: Request<Incoming>) -> Response<Full<Bytes>> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let upgrade = header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    let version = header("sec-websocket-version").is_some_and(|v| v.trim() == "13");
    let Some(key) = header("sec-websocket-key").filter(|_| upgrade && version) else {
        return Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .body(Full::new(Bytes::from_static(
                b"a WebSocket upgrade needs Upgrade: websocket, Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key\n",
            )))
            .expect("a valid response");
    };
    let defect = WS_DEFECT.get().copied();
    let accept = if defect == Some(WsDefect::BadAccept) {
        ws::accept_key(&format!("{key}x"))
    } else {
        ws::accept_key(&key)
    };
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        if let Ok(upgraded) = on.await {
            let _ = echo(TokioIo::new(upgraded), defect).await;
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("upgrade", "websocket")
        .header("connection", "Upgrade")
        .header("sec-websocket-accept", accept)
        .body(Full::new(Bytes::new()))
        .expect("a valid response")
}

/// Echoes messages on `io` until the client closes, holding
/// [`set_ws_hold`]'s memory meanwhile.
pub async fn echo<S: AsyncRead + AsyncWrite + Unpin>(
    io: S,
    defect: Option<WsDefect>,
) -> std::io::Result<()> {
    // Written, not only allocated, so every page is resident; kept until
    // the connection ends.
    let held = vec![0xA5u8; WS_HOLD.get().copied().unwrap_or(0)];
    let r = echo_frames(io, defect).await;
    std::hint::black_box(&held);
    r
}

async fn echo_frames<S: AsyncRead + AsyncWrite + Unpin>(
    mut io: S,
    defect: Option<WsDefect>,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut message: Vec<u8> = Vec::new();
    let mut opcode = 0u8;
    let mut first: Option<Vec<u8>> = None;
    let mut out: Vec<u8> = Vec::new();
    loop {
        // One whole frame.
        let (h, payload) = loop {
            match ws::Header::parse(&buf) {
                Ok(Some(h)) if buf.len() as u64 >= h.len as u64 + h.payload => {
                    let end = h.len + h.payload as usize;
                    let mut payload = buf[h.len..end].to_vec();
                    buf.drain(..end);
                    if let (Some(k), false) = (h.mask, defect == Some(WsDefect::NoUnmask)) {
                        ws::apply_mask(&mut payload, k, 0);
                    }
                    break (h, payload);
                }
                Ok(Some(h)) if h.payload as usize > MAX_MESSAGE => {
                    return close_with(&mut io, 1009).await;
                }
                Ok(_) => {}
                Err(_) => return close_with(&mut io, 1002).await,
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = io.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        if h.mask.is_none() {
            // RFC 6455 §5.1: a server closes on an unmasked client frame.
            return close_with(&mut io, 1002).await;
        }
        match h.opcode {
            ws::OP_PING => {
                if defect != Some(WsDefect::NoPong) {
                    io.write_all(&ws::frame(true, ws::OP_PONG, &payload, None))
                        .await?;
                }
            }
            ws::OP_PONG => {}
            ws::OP_CLOSE => {
                if defect != Some(WsDefect::NoClose) {
                    let code = payload.get(..2).unwrap_or(&[]);
                    io.write_all(&ws::frame(true, ws::OP_CLOSE, code, None))
                        .await?;
                }
                io.shutdown().await?;
                return Ok(());
            }
            op => {
                if op != ws::OP_CONT {
                    opcode = op;
                    message.clear();
                }
                message.extend_from_slice(&payload);
                if message.len() > MAX_MESSAGE {
                    return close_with(&mut io, 1009).await;
                }
                if !h.fin {
                    continue;
                }
                if opcode == ws::OP_TEXT
                    && defect != Some(WsDefect::NoUnmask)
                    && std::str::from_utf8(&message).is_err()
                {
                    return close_with(&mut io, 1007).await;
                }
                let answer = match defect {
                    Some(WsDefect::Fixed) => first.get_or_insert_with(|| message.clone()),
                    _ => &message,
                };
                super::wait_delay().await;
                out.clear();
                ws::write_header(&mut out, true, opcode, answer.len(), None);
                out.extend_from_slice(answer);
                io.write_all(&out).await?;
            }
        }
    }
}

async fn close_with<S: AsyncWrite + Unpin>(io: &mut S, code: u16) -> std::io::Result<()> {
    io.write_all(&ws::frame(
        true,
        ws::OP_CLOSE,
        &ws::close_payload(code, ""),
        None,
    ))
    .await?;
    io.shutdown().await
}
