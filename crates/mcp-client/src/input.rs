//! A stdio server's input: one task owns the child's stdin and writes what
//! is queued for it, whole lines in order, from two writers: rmcp (through
//! [`InputWriter`], its transport's sink) and the tool calls this crate
//! writes itself (`call.rs`), so that a call's line and its answer never
//! pass through rmcp's typed model.
//!
//! Invariant: only complete lines enter the queue, so lines of the two
//! writers never interleave; the queue holds at most [`MAX_QUEUED_BYTES`]
//! (a server that stops reading its input fails the writes past it
//! instead of growing it).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

/// The most that may wait for the server to read it.
pub(crate) const MAX_QUEUED_BYTES: usize = 64 * 1024 * 1024;

/// The queue in front of a child's stdin; cloning shares it.
#[derive(Clone, Default)]
pub(crate) struct ChildInput {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Woken when lines were queued or the input closed.
    queued: Notify,
}

#[derive(Default)]
struct State {
    lines: Vec<u8>,
    /// No more lines: closed by rmcp's transport, or the pipe broke.
    closed: bool,
}

/// Why a line was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotQueued {
    /// The input is closed (the server is stopping, or gone).
    Closed,
    /// The server has not read [`MAX_QUEUED_BYTES`] of what it was sent.
    Full,
}

impl ChildInput {
    /// Starts the task that writes the queue to `stdin`; it ends (closing
    /// stdin, which is how a stdio server is told to exit) once the input
    /// is closed and drained, or at the first failed write.
    pub(crate) fn start<W: AsyncWrite + Unpin + Send + 'static>(stdin: W) -> ChildInput {
        let input = ChildInput::default();
        tokio::spawn(input.clone().write_to(stdin));
        input
    }

    async fn write_to<W: AsyncWrite + Unpin>(self, mut stdin: W) {
        let mut batch = Vec::new();
        loop {
            let queued = self.shared.queued.notified();
            let closed = {
                let mut state = self.shared.state.lock();
                std::mem::swap(&mut state.lines, &mut batch);
                state.closed
            };
            if batch.is_empty() {
                if closed {
                    break;
                }
                queued.await;
                continue;
            }
            let written = stdin.write_all(&batch).await;
            batch.clear();
            if written.is_err() {
                break;
            }
        }
        self.close();
        let _ = stdin.shutdown().await;
    }

    /// Queues one complete line (its newline included).
    pub(crate) fn send_line(&self, line: &[u8]) -> Result<(), NotQueued> {
        debug_assert!(line.ends_with(b"\n"));
        self.queue(line)
    }

    fn queue(&self, lines: &[u8]) -> Result<(), NotQueued> {
        {
            let mut state = self.shared.state.lock();
            if state.closed {
                return Err(NotQueued::Closed);
            }
            if state.lines.len() + lines.len() > MAX_QUEUED_BYTES {
                return Err(NotQueued::Full);
            }
            state.lines.extend_from_slice(lines);
        }
        self.shared.queued.notify_one();
        Ok(())
    }

    /// No more lines; what is queued is still written.
    pub(crate) fn close(&self) {
        self.shared.state.lock().closed = true;
        self.shared.queued.notify_one();
    }

    /// rmcp's sink into this queue.
    pub(crate) fn writer(&self) -> InputWriter {
        InputWriter {
            input: self.clone(),
            partial: Vec::new(),
        }
    }
}

/// What rmcp's transport writes into: its bytes are queued a complete line
/// at a time (rmcp writes a line whole, then flushes).
pub(crate) struct InputWriter {
    input: ChildInput,
    /// The start of a line not yet complete.
    partial: Vec<u8>,
}

impl AsyncWrite for InputWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let Some(last) = memchr::memrchr(b'\n', bytes) else {
            this.partial.extend_from_slice(bytes);
            return Poll::Ready(Ok(bytes.len()));
        };
        let (complete, rest) = bytes.split_at(last + 1);
        let queued = if this.partial.is_empty() {
            this.input.queue(complete)
        } else {
            this.partial.extend_from_slice(complete);
            let queued = this.input.queue(&this.partial);
            this.partial.clear();
            queued
        };
        this.partial.extend_from_slice(rest);
        match queued {
            Ok(()) => Poll::Ready(Ok(bytes.len())),
            Err(NotQueued::Closed) => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            Err(NotQueued::Full) => Poll::Ready(Err(io::Error::other(
                "the MCP server does not read its input",
            ))),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.input.close();
        Poll::Ready(Ok(()))
    }
}

/// A transport dropped without being closed (a start given up, rmcp's
/// service dropped) closes the input too, so its writer task ends and
/// stdin is closed instead of waiting forever.
impl Drop for InputWriter {
    fn drop(&mut self) {
        self.input.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn lines_of_both_writers_arrive_whole_and_in_order_then_the_end() {
        let (stdin, mut child) = tokio::io::duplex(64);
        let input = ChildInput::start(stdin);
        let mut rmcp = input.writer();
        // rmcp's line in two writes, a call's line between them.
        rmcp.write_all(b"{\"a\":").await.unwrap();
        input.send_line(b"{\"call\":1}\n").unwrap();
        rmcp.write_all(b"1}\n").await.unwrap();
        rmcp.shutdown().await.unwrap();
        assert_eq!(input.send_line(b"{}\n"), Err(NotQueued::Closed));
        let mut seen = String::new();
        child.read_to_string(&mut seen).await.unwrap();
        assert_eq!(seen, "{\"call\":1}\n{\"a\":1}\n");
    }

    #[tokio::test]
    async fn a_server_that_does_not_read_fails_writes_past_the_bound() {
        let (stdin, _child) = tokio::io::duplex(64);
        let input = ChildInput::start(stdin);
        let line = vec![b'x'; MAX_QUEUED_BYTES / 4];
        let mut line = line;
        *line.last_mut().unwrap() = b'\n';
        let mut refused = None;
        for _ in 0..8 {
            if let Err(error) = input.send_line(&line) {
                refused = Some(error);
                break;
            }
        }
        assert_eq!(refused, Some(NotQueued::Full));
    }

    #[tokio::test]
    async fn dropping_rmcps_writer_ends_the_input() {
        let (stdin, mut child) = tokio::io::duplex(64);
        let input = ChildInput::start(stdin);
        drop(input.writer());
        assert_eq!(input.send_line(b"{}\n"), Err(NotQueued::Closed));
        let mut seen = String::new();
        child.read_to_string(&mut seen).await.unwrap();
        assert_eq!(seen, "");
    }

    #[tokio::test]
    async fn a_broken_pipe_closes_the_input() {
        let (stdin, child) = tokio::io::duplex(64);
        let input = ChildInput::start(stdin);
        drop(child);
        input.send_line(b"{}\n").unwrap();
        for _ in 0..100 {
            if input.send_line(b"{}\n") == Err(NotQueued::Closed) {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the input stayed open after its pipe broke");
    }
}
