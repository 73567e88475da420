//! A Unix connection registered with the runtime for readable only.
//!
//! tokio registers its sockets for both edges, and a Unix socket signals
//! writable every time its peer reads what was written to it: with both
//! registered, every message a process sends wakes it a second time, for an
//! event no one waits on (measured on the MCP gateway's path,
//! `docs/performance.md` §8: 4.0 voluntary context switches per call in the
//! hub instead of 2, and the same in the gateway and `provide-mcp` through
//! the SDK). Writes go straight to the socket, which almost always takes
//! them whole; only a write that would block registers a second descriptor
//! of the same socket for writable, kept while the peer lags.
//!
//! The hub's Unix connections (`hub/src/transport/unix.rs`) and the SDK's
//! connection to the hub (`client/src/transport.rs`) both use it.
//!
//! Invariant: the reader and the writer share the socket; only the reader
//! waits for readable and only the writer for writable.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// One connection's socket, shared by its reader and its writer.
#[derive(Clone)]
pub struct ReadableStream {
    socket: Arc<AsyncFd<StdUnixStream>>,
}

/// What a read gave.
pub enum ReadOutcome {
    /// This many bytes; fewer than asked for means the socket is drained
    /// for now (its readiness is cleared, so the next poll waits).
    Bytes(usize),
    /// End of stream or an error.
    Closed,
}

impl ReadableStream {
    /// Takes over `stream` (a tokio stream: its registration is dropped
    /// first).
    pub fn new(stream: tokio::net::UnixStream) -> io::Result<Self> {
        let stream = stream.into_std()?;
        stream.set_nonblocking(true)?;
        // SAFETY: the `AsyncFd` owns `stream`, so its descriptor stays open
        // and names the same socket until the `AsyncFd` is dropped.
        let socket = unsafe { AsyncFd::register_with_interest(stream, Interest::READABLE) }
            .map_err(|error| error.into_parts().1)?;
        Ok(ReadableStream {
            socket: Arc::new(socket),
        })
    }

    /// Reads into `buf` once the socket is readable.
    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<ReadOutcome> {
        loop {
            let mut ready = match self.socket.poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(ready)) => ready,
                Poll::Ready(Err(_)) => return Poll::Ready(ReadOutcome::Closed),
            };
            match ready.try_io(|socket| socket.get_ref().read(buf)) {
                Ok(Ok(0)) => return Poll::Ready(ReadOutcome::Closed),
                Ok(Ok(n)) => {
                    // A short read drained the socket: no read that would
                    // only say EAGAIN before the next wake-up.
                    if n < buf.len() {
                        ready.clear_ready();
                    }
                    return Poll::Ready(ReadOutcome::Bytes(n));
                }
                Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(_)) => return Poll::Ready(ReadOutcome::Closed),
                // EAGAIN: readiness was cleared; wait again.
                Err(_would_block) => {}
            }
        }
    }

    /// The writing side of the socket.
    pub fn writer(&self) -> Writer {
        Writer {
            socket: self.socket.clone(),
            writable: None,
        }
    }
}

/// Writes to a [`ReadableStream`]'s socket.
pub struct Writer {
    socket: Arc<AsyncFd<StdUnixStream>>,
    /// A second descriptor of the socket, registered for writable while
    /// the peer lags (created at the first write that would block).
    writable: Option<AsyncFd<OwnedFd>>,
}

impl Writer {
    /// Writes all of `bytes`, waiting for the peer to read when the socket
    /// is full.
    pub async fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let mut blocked = false;
        while !bytes.is_empty() {
            match self.socket.get_ref().write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = &bytes[n..],
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    blocked = true;
                    // Boxed: the wait's state would otherwise be part of
                    // every connection's task, idle ones included.
                    Box::pin(self.wait_writable()).await?;
                }
                Err(error) => return Err(error),
            }
        }
        if !blocked {
            // The peer keeps up: its reads need not wake anyone.
            self.writable = None;
        }
        Ok(())
    }

    async fn wait_writable(&mut self) -> io::Result<()> {
        if self.writable.is_none() {
            let fd = self.socket.get_ref().as_fd().try_clone_to_owned()?;
            // SAFETY: the `AsyncFd` owns `fd`, a descriptor of its own
            // (a dup), open until the `AsyncFd` is dropped.
            let registered = unsafe { AsyncFd::register_with_interest(fd, Interest::WRITABLE) }
                .map_err(|error| error.into_parts().1)?;
            self.writable = Some(registered);
        }
        let Some(writable) = &self.writable else {
            return Ok(());
        };
        // Freshly registered, it reports writable at once if it is: the
        // write that follows says EAGAIN again otherwise, and this waits.
        writable.writable().await?.clear_ready();
        Ok(())
    }

    /// No more writes: the peer reads the end of stream.
    pub fn shutdown(&self) {
        let _ = self.socket.get_ref().shutdown(Shutdown::Write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn reads_what_the_peer_writes_and_sees_its_end() {
        let (ours, mut theirs) = tokio::net::UnixStream::pair().unwrap();
        let stream = ReadableStream::new(ours).unwrap();
        theirs.write_all(b"hello\n").await.unwrap();
        let mut buf = [0u8; 64];
        let read = std::future::poll_fn(|cx| stream.poll_read(cx, &mut buf)).await;
        assert!(matches!(read, ReadOutcome::Bytes(6)));
        assert_eq!(&buf[..6], b"hello\n");
        drop(theirs);
        let read = std::future::poll_fn(|cx| stream.poll_read(cx, &mut buf)).await;
        assert!(matches!(read, ReadOutcome::Closed));
    }

    /// More than the socket holds: the writer waits for the peer, which
    /// reads it all, then the end.
    #[tokio::test]
    async fn a_write_larger_than_the_socket_waits_for_the_peer() {
        let (ours, mut theirs) = tokio::net::UnixStream::pair().unwrap();
        let stream = ReadableStream::new(ours).unwrap();
        let mut writer = stream.writer();
        let sent: Vec<u8> = (0..8 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
        let expected = sent.clone();
        let reader = tokio::spawn(async move {
            // Let the writer fill the socket first.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let mut got = Vec::new();
            theirs.read_to_end(&mut got).await.unwrap();
            got
        });
        writer.write_all(&sent).await.unwrap();
        assert!(writer.writable.is_some(), "the write had to wait");
        writer.write_all(b"").await.unwrap();
        assert!(writer.writable.is_none(), "no lag, no registration");
        writer.shutdown();
        assert_eq!(reader.await.unwrap(), expected);
    }
}
