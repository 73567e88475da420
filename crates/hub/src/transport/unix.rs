//! The Unix socket: one JSON-RPC message per line.
//!
//! Reads go into a per-thread 64 KiB buffer and complete lines are handled
//! straight from it, so an idle connection holds no read buffer at all; only
//! a line split across reads is copied, into the connection's own `partial`.
//! Writes take the whole outbound queue at once. The socket is registered
//! for readable only (the `socket` crate).

use std::cell::RefCell;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::task::TaskTracker;

use crate::admission::Slot;
use crate::conn::{Conn, Transport};
use crate::session::{Flow, Session};
use crate::state::HubState;
use crate::transport::{self, AcceptBackoff};
use crate::wire;
use switchboard_socket::{ReadOutcome, ReadableStream, Writer};

const READ_CHUNK: usize = 64 * 1024;
/// Reads (of up to `READ_CHUNK`) handled before the reader yields.
const READS_PER_TURN: usize = 4;
/// A split line's buffer above this size is freed once the line is handled.
const KEEP_PARTIAL: usize = 64 * 1024;

thread_local! {
    static READ_BUF: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_CHUNK].into_boxed_slice());
}

/// Binds the socket (mode 0600: the directory is 0700 already; this is belt
/// and braces for a directory someone loosened).
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Accepts until shutdown begins. Each socket takes a connection slot (or a
/// refusal slot) before a task is spawned for it (`admission.rs`).
pub async fn accept_loop(hub: Arc<HubState>, listener: UnixListener, tasks: TaskTracker) {
    let mut backoff = AcceptBackoff::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = hub.stopping() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff.succeeded();
                stream
            }
            Err(error) => {
                // Out of descriptors or similar: back off instead of spinning.
                let delay = backoff.failed();
                tracing::warn!(%error, ?delay, "accept failed on the Unix socket");
                tokio::time::sleep(delay).await;
                continue;
            }
        };
        match hub.admission.at_accept() {
            Some(Slot::Connection(slot)) => {
                if let Ok(conn) = hub.admission.admit(slot, Transport::Unix, &hub.limits) {
                    tasks.spawn(serve(hub.clone(), conn, stream));
                }
            }
            Some(Slot::Refusal(permit)) => {
                hub.admission.count_refused();
                let max = hub.admission.max();
                tasks.spawn(async move {
                    refuse(stream, max).await;
                    drop(permit);
                });
            }
            None => drop(stream),
        }
    }
}

/// Tells a connection over `maxConnections` why, then closes it.
async fn refuse(mut stream: UnixStream, max: u64) {
    let error = crate::reply::limit(
        switchboard_protocol::limits::names::MAX_CONNECTIONS,
        max,
        format!("the hub already serves {max} connections (maxConnections)"),
    );
    let mut buf = Vec::new();
    wire::error(&mut buf, None, &error);
    let _ = tokio::time::timeout(transport::FLUSH_GRACE, async {
        let _ = stream.write_all(&buf).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

async fn serve(hub: Arc<HubState>, conn: Arc<Conn>, stream: UnixStream) {
    // The peer's pid, for a module's launch credential (one getsockopt).
    let peer_pid = stream
        .peer_cred()
        .ok()
        .and_then(|cred| cred.pid())
        .and_then(|pid| u32::try_from(pid).ok());
    let stream = match ReadableStream::new(stream) {
        Ok(stream) => stream,
        Err(error) => {
            tracing::warn!(%error, "cannot register a Unix connection");
            return;
        }
    };
    let session = Session::new(hub.clone(), conn.clone(), None).with_peer_pid(peer_pid);
    let write = transport::write_batches(conn.clone(), stream.writer());
    let read = read_lines(session, stream);
    transport::run(hub, conn, read, write).await;
}

async fn read_lines(mut session: Session, socket: ReadableStream) {
    let max = usize::try_from(session.hub().limits.max_message_bytes).unwrap_or(usize::MAX);
    let conn = session.conn().clone();
    let mut partial: Vec<u8> = Vec::new();
    // Bytes read since the reader last yielded.
    let mut since_yield = 0;
    loop {
        let turn = std::future::poll_fn(|cx| {
            READ_BUF
                .with_borrow_mut(|buf| poll_turn(cx, &socket, buf, &mut partial, &mut session, max))
        });
        let turn = tokio::select! {
            biased;
            () = conn.out.reader_stopped() => return,
            turn = turn => turn,
        };
        let read = match turn {
            Turn::Closed => return,
            Turn::Read(read) => read,
        };
        transport::let_destinations_drain(&conn).await;
        // Yield once YIELD_BYTES were read, so the writers this sender
        // fills get to run (the yield also has tokio poll for I/O, which is
        // how a writer learns its socket is writable again: yielding only
        // every 256 KiB, 16 busy senders into one receiver shed up to 70 %
        // on this VM), and one busy sender
        // cannot hold a worker thread. Not after every turn: a turn of one
        // small message (a request, an answer) is where latency is spent,
        // and the yield cost a non-blocking `epoll_wait` per wake-up.
        since_yield += read;
        if since_yield >= YIELD_BYTES {
            since_yield = 0;
            tokio::task::yield_now().await;
        }
    }
}

/// Bytes read between two yields of a reader.
const YIELD_BYTES: usize = 8 * 1024;

/// How one turn of reads ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// This many bytes were read and their complete lines handled.
    Read(usize),
    /// End of stream, a read error, or a message that closes the connection.
    Closed,
}

/// Reads what the socket has (at most `READS_PER_TURN` chunks) and handles
/// every complete line; `Pending` only when nothing was read.
///
/// A short read is taken as proof that the socket is drained (its
/// readiness is cleared), so the turn ends without the extra read that
/// would only say `EAGAIN` (one system call per wake-up).
fn poll_turn(
    cx: &mut Context<'_>,
    socket: &ReadableStream,
    buf: &mut [u8],
    partial: &mut Vec<u8>,
    session: &mut Session,
    max: usize,
) -> Poll<Turn> {
    let mut read_total = 0;
    for _ in 0..READS_PER_TURN {
        let n = match socket.poll_read(cx, buf) {
            Poll::Pending if read_total > 0 => return Poll::Ready(Turn::Read(read_total)),
            Poll::Pending => return Poll::Pending,
            Poll::Ready(ReadOutcome::Bytes(n)) => n,
            Poll::Ready(ReadOutcome::Closed) => {
                // EOF. A last message without its newline still counts.
                if !partial.is_empty() {
                    let _ = session.on_message(partial);
                }
                return Poll::Ready(Turn::Closed);
            }
        };
        read_total += n;
        if split_lines(&buf[..n], partial, session, max) == Flow::Close {
            return Poll::Ready(Turn::Closed);
        }
        if n < buf.len() {
            // A short read: the socket is empty for now.
            break;
        }
    }
    Poll::Ready(Turn::Read(read_total))
}

/// Frames `chunk` into lines, handling each complete one; keeps the tail.
pub(crate) fn split_lines(
    chunk: &[u8],
    partial: &mut Vec<u8>,
    session: &mut Session,
    max: usize,
) -> Flow {
    let mut rest = chunk;
    while let Some(end) = memchr::memchr(b'\n', rest) {
        let line = &rest[..end];
        rest = &rest[end + 1..];
        let flow = if partial.is_empty() {
            if line.len() > max {
                return session.too_large(Some(line.len()));
            }
            session.on_message(line)
        } else {
            let size = partial.len() + line.len();
            if size > max {
                return session.too_large(Some(size));
            }
            partial.extend_from_slice(line);
            let flow = session.on_message(partial);
            partial.clear();
            if partial.capacity() > KEEP_PARTIAL {
                *partial = Vec::new();
            }
            flow
        };
        if flow == Flow::Close {
            return Flow::Close;
        }
    }
    if !rest.is_empty() {
        if partial.len() + rest.len() > max {
            return session.too_large(None);
        }
        partial.extend_from_slice(rest);
    }
    Flow::Continue
}

impl transport::LineSink for Writer {
    async fn write_all(&mut self, batch: &[u8]) -> io::Result<()> {
        Writer::write_all(self, batch).await
    }

    async fn shutdown(&mut self) {
        Writer::shutdown(self);
    }
}
