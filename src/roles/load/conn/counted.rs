//! Counting the bytes that cross a socket.
//!
//! Under TLS the count is taken below the TLS stream, so wire bytes are TLS
//! records as they cross the socket (record headers, AEAD tags, alerts and
//! session tickets included); on plain TCP it is the bytes themselves.

use std::cell::Cell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::Worker;

/// What crossed a socket: counted by whoever does the I/O (the connection
/// task of HTTP/2, the TLS stream), read by the driver.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    pub(crate) read: Cell<u64>,
    pub(crate) written: Cell<u64>,
}

/// A socket, counting what crosses it.
pub(crate) struct Counted<S> {
    pub(crate) inner: S,
    pub(crate) traffic: Rc<Traffic>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.traffic.read.set(self.traffic.read.get() + n);
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.traffic
                .written
                .set(self.traffic.written.get() + n as u64);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.traffic
                .written
                .set(self.traffic.written.get() + n as u64);
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// What of a [`Traffic`] was already counted: bytes read and written, and
/// where the last answer ended. An answer's share is what was read since
/// the previous answer ended, so the shares add up to what was read
/// (pipelined answers taken from one read share it).
pub(crate) struct Marks<'a> {
    traffic: &'a Traffic,
    read: u64,
    written: u64,
    answered: u64,
}

impl<'a> Marks<'a> {
    pub(crate) fn new(traffic: &'a Traffic) -> Self {
        let (read, written) = (traffic.read.get(), traffic.written.get());
        Marks {
            traffic,
            read,
            written,
            answered: read,
        }
    }

    /// Bytes read since the last call.
    pub(crate) fn read(&mut self) -> u64 {
        let now = self.traffic.read.get();
        now - std::mem::replace(&mut self.read, now)
    }

    /// Bytes written since the last call.
    pub(crate) fn written(&mut self) -> u64 {
        let now = self.traffic.written.get();
        now - std::mem::replace(&mut self.written, now)
    }

    /// An answer ended: its share of what was read.
    pub(crate) fn answered(&mut self) -> u64 {
        let now = self.traffic.read.get();
        now - std::mem::replace(&mut self.answered, now)
    }

    /// Count what was read and written since the last call in the window's
    /// totals when `now` is inside the window.
    pub(crate) fn count(&mut self, w: &Worker, now: u64) {
        let (read, written) = (self.read(), self.written());
        if w.in_window(now).is_some() {
            let mut s = w.stats.borrow_mut();
            s.bytes_read += read;
            s.bytes_written += written;
        }
    }
}
