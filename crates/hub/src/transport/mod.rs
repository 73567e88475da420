//! Listeners and the per-connection task, one module per transport.
//!
//! Every connection runs as one task that polls its reader and writer
//! together ([`run`]). The reader decodes messages and hands each to the
//! connection's `Session`; the writer drains the connection's `Outbound`.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use crate::conn::Conn;
use crate::outbound::Batch;
use crate::state::HubState;
use crate::teardown;

pub mod http;
pub mod in_process;
mod response;
pub(crate) mod socket;
pub mod tls;
mod trim;
pub mod unix;
pub(crate) mod upgrade_token;
pub mod ws;

/// How long a closing connection may take to flush what is queued for it.
pub const FLUSH_GRACE: Duration = Duration::from_secs(5);

/// The longest a reader pauses for the queues it congested (flow control).
pub const STALL_BOUND: Duration = Duration::from_millis(20);

/// How long an accept loop sleeps after a failed accept (out of descriptors,
/// out of memory): doubling from 5 ms up to 1 s while accepts keep failing,
/// back to the start after one succeeds. Retrying at once would spin a core
/// while the cause lasts; a fixed long sleep would leave the listen queue
/// unserved after a blip.
pub struct AcceptBackoff {
    next: Duration,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);

    pub fn new() -> Self {
        AcceptBackoff { next: Self::FIRST }
    }

    /// An accept failed: how long to sleep before the next.
    pub fn failed(&mut self) -> Duration {
        let delay = self.next;
        self.next = (delay * 2).min(Self::MAX);
        delay
    }

    /// An accept succeeded.
    pub fn succeeded(&mut self) {
        self.next = Self::FIRST;
    }
}

/// Flow control, between two reads: waits for every queue this connection's
/// messages pushed past its soft watermark to drain, at most [`STALL_BOUND`]
/// in all. A queue that does not drain in time is marked stalled, so no
/// sender waits on it again until it drains (see `outbound.rs`).
///
/// Only this connection's own reading pauses; nothing it queued is delayed,
/// and no other connection waits.
pub async fn let_destinations_drain(conn: &Conn) {
    let backlog = conn.take_backlog();
    if backlog.is_empty() {
        return;
    }
    let deadline = tokio::time::Instant::now() + STALL_BOUND;
    for destination in backlog {
        if tokio::time::timeout_at(deadline, destination.out.drained())
            .await
            .is_err()
        {
            destination.out.mark_stalled();
        }
    }
}

/// Runs one connection to its end: read until EOF, error or a stop signal;
/// tear down (services, pending requests, subscription); give the writer at
/// most [`FLUSH_GRACE`] to flush; forget the connection.
pub async fn run(
    hub: Arc<HubState>,
    conn: Arc<Conn>,
    read: impl Future<Output = ()>,
    write: impl Future<Output = ()>,
) {
    let reader = async {
        read.await;
        teardown::disconnect(&hub, &conn);
    };
    let mut reader = pin!(reader);
    let mut writer = pin!(write);
    tokio::select! {
        () = &mut reader => {
            let _ = tokio::time::timeout(FLUSH_GRACE, &mut writer).await;
        }
        () = &mut writer => {
            // The writer ends first only when the connection is aborted or
            // its socket failed; both stop the reader promptly.
            conn.out.abort();
            reader.await;
        }
    }
    teardown::release(&hub, &conn);
}

/// Where a line-framed connection's writer puts its batches: the Unix
/// socket (`unix.rs`) or an in-process pipe (`in_process.rs`).
pub(crate) trait LineSink {
    async fn write_all(&mut self, batch: &[u8]) -> io::Result<()>;
    /// The end of the stream, once the queue is done.
    async fn shutdown(&mut self);
}

/// Drains `conn`'s queue into `sink`, a whole batch per write, until the
/// queue is done (then ends the stream), the connection is aborted, or a
/// write fails (then aborts it).
pub(crate) async fn write_batches(conn: Arc<Conn>, mut sink: impl LineSink) {
    let mut batch = Vec::new();
    loop {
        match conn.out.next_batch(&mut batch).await {
            Batch::Done => break,
            Batch::Write => {}
        }
        let written = tokio::select! {
            written = sink.write_all(&batch) => written,
            () = conn.out.aborted() => return,
        };
        if written.is_err() {
            conn.out.abort();
            return;
        }
        conn.out.written(&mut batch);
    }
    sink.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_backoff_doubles_to_its_bound_and_resets_on_success() {
        let mut backoff = AcceptBackoff::new();
        let delays: Vec<u128> = (0..10).map(|_| backoff.failed().as_millis()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        backoff.succeeded();
        assert_eq!(backoff.failed().as_millis(), 5);
    }
}
