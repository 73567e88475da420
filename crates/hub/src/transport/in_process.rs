//! In-process connections: a client of the hub that lives in the hub's own
//! process (the MCP gateway behind `/mcp`, through `endpoint.rs`'s door),
//! connected over an in-memory pipe instead of the Unix socket.
//!
//! Everything else is a client connection like any other: one JSON-RPC
//! message per line, admitted in a `maxConnections` slot, authenticated by
//! the token it presents at `initialize`, served by the same `Session` and
//! torn down the same way. What it saves is the kernel: a message written
//! by the client's task wakes this connection's reader task directly (on
//! the same worker, as a rule), where a socket cost two system calls and
//! often an `epoll` wake-up of the other worker.
//!
//! It has no process of its own for the hub to check, so a module's launch
//! credential is never accepted on it (as on a WebSocket).

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio_util::task::TaskTracker;

use crate::admission::Slot;
use crate::conn::{Conn, Transport};
use crate::session::{Flow, Session};
use crate::state::HubState;
use crate::transport::{self, unix::split_lines};

/// The pipe's capacity each way: a writer that fills it waits for the
/// reader, as on a socket whose buffer is full.
pub const PIPE_BYTES: usize = 64 * 1024;

/// Why an in-process connection was not made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("the hub already serves its maxConnections connections")]
    Full,
    #[error("the hub is shutting down")]
    ShuttingDown,
}

impl From<ConnectError> for io::Error {
    fn from(error: ConnectError) -> Self {
        let kind = match error {
            ConnectError::Full => io::ErrorKind::ConnectionRefused,
            ConnectError::ShuttingDown => io::ErrorKind::ConnectionAborted,
        };
        io::Error::new(kind, error)
    }
}

/// Admits a connection and returns the client's end of its pipe; the hub's
/// end is served on `tasks` until either end closes.
pub fn connect(hub: &Arc<HubState>, tasks: &TaskTracker) -> Result<DuplexStream, ConnectError> {
    let slot = match hub.admission.at_accept() {
        Some(Slot::Connection(slot)) => slot,
        // A refusal slot is for telling a socket's peer why; this caller
        // is told by the error. Counted as a socket's refusal is.
        Some(Slot::Refusal(_)) => {
            hub.admission.count_refused();
            return Err(ConnectError::Full);
        }
        // Counted by `at_accept`.
        None => return Err(ConnectError::Full),
    };
    let conn = hub
        .admission
        .admit(slot, Transport::InProcess, &hub.limits)
        .map_err(|_| ConnectError::ShuttingDown)?;
    let (hub_end, client_end) = tokio::io::duplex(PIPE_BYTES);
    tasks.spawn(serve(hub.clone(), conn, hub_end));
    Ok(client_end)
}

async fn serve(hub: Arc<HubState>, conn: Arc<Conn>, pipe: DuplexStream) {
    let (reader, writer) = tokio::io::split(pipe);
    let session = Session::new(hub.clone(), conn.clone(), None);
    let write = transport::write_batches(conn.clone(), writer);
    let read = read_lines(session, reader);
    transport::run(hub, conn, read, write).await;
}

async fn read_lines(mut session: Session, mut pipe: ReadHalf<DuplexStream>) {
    let max = usize::try_from(session.hub().limits.max_message_bytes).unwrap_or(usize::MAX);
    let conn = session.conn().clone();
    let mut buf = vec![0; PIPE_BYTES];
    let mut partial = Vec::new();
    loop {
        let read = tokio::select! {
            biased;
            () = conn.out.reader_stopped() => return,
            read = pipe.read(&mut buf) => read,
        };
        let n = match read {
            Ok(0) | Err(_) => {
                // EOF. A last message without its newline still counts.
                if !partial.is_empty() {
                    let _ = session.on_message(&partial);
                }
                return;
            }
            Ok(n) => n,
        };
        if split_lines(&buf[..n], &mut partial, &mut session, max) == Flow::Close {
            return;
        }
        transport::let_destinations_drain(&conn).await;
    }
}

impl transport::LineSink for WriteHalf<DuplexStream> {
    async fn write_all(&mut self, batch: &[u8]) -> io::Result<()> {
        AsyncWriteExt::write_all(self, batch).await
    }

    async fn shutdown(&mut self) {
        let _ = AsyncWriteExt::shutdown(self).await;
    }
}
