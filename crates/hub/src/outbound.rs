//! One connection's outbound queue: the only place bytes wait to be written.
//!
//! Any task may [`Outbound::push`] a message; it appends to a byte buffer
//! under a short lock and never waits for the peer. The connection's writer
//! takes the whole buffer at once ([`Outbound::next_batch`]) and writes it
//! with one syscall where it can, so writes are batched by construction:
//! everything pushed while a write is under way goes out in the next one.
//!
//! Flow control, before any shedding: a push that leaves the queue above a
//! soft watermark answers [`Pushed::Congested`], and the connection whose
//! message it was lets this queue drain (bounded) before it reads on (see
//! `transport::let_destinations_drain`). A queue that does not drain within
//! that bound is marked *stalled*, and pushes to it stop asking senders to
//! wait until it drains: one slow receiver costs each sender one bounded
//! pause, not a standing brake.
//!
//! Overload policy (spec section 8), decided here and nowhere else:
//! - a notification is shed when the queue already holds more than
//!   `notifyShedBytes`;
//! - anything that makes the queue exceed `slowConsumerBytes` aborts the
//!   connection (requests, responses and catalog actions are never shed).
//!
//! Bytes are queued as the writer will write them ([`Framing`]): `\n`-ended
//! lines for a Unix socket, whole text frames for a WebSocket. A message is
//! framed once, where it is written into the queue, and a batch goes to the
//! socket as it is, with no second pass to split or copy it.
//!
//! Invariant: the lock is held only to append or swap buffers; no `await`
//! happens under it, so a slow peer can only ever fill its own queue.

use fastwebsockets::{Frame, Payload};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Buffers larger than this are freed after use instead of kept for reuse,
/// so one burst does not pin memory on an idle connection.
const KEEP_CAPACITY: usize = 64 * 1024;

/// Whether a message may be shed under load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A forwarded notification: dropped when the queue is over `notifyShedBytes`.
    Sheddable,
    /// Responses, hub requests, catalog actions: queued or the connection dies.
    Essential,
}

/// How messages lie in the queue, which is how the writer writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Each message followed by `\n` (Unix sockets, hub links, the
    /// dashboard's stream).
    Lines,
    /// Each message one unmasked WebSocket text frame, the header formatted
    /// by fastwebsockets (a server's frames are never masked).
    WebSocketText,
}

/// Room left for a frame header before the message is written: the header
/// of a payload of 126 to 65535 bytes, the common size. Other sizes move the
/// payload once (by 2 bytes back for a short one, 6 forward for a long one).
const HEAD_ROOM: usize = 4;

impl Framing {
    /// Appends the message `write` produces (one message and its `\n`),
    /// framed.
    fn append(self, buf: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        match self {
            Framing::Lines => write(buf),
            Framing::WebSocketText => {
                let head_at = buf.len();
                buf.resize(head_at + HEAD_ROOM, 0);
                write(buf);
                // A frame carries the message without the line's `\n`.
                let newline = buf.pop();
                debug_assert_eq!(newline, Some(b'\n'));
                let payload_at = head_at + HEAD_ROOM;
                let mut head = [0u8; 10];
                let head_len =
                    Frame::text(Payload::Borrowed(&buf[payload_at..])).fmt_head(&mut head);
                match head_len {
                    HEAD_ROOM => {}
                    shorter if shorter < HEAD_ROOM => {
                        buf.copy_within(payload_at.., head_at + shorter);
                        buf.truncate(buf.len() - (HEAD_ROOM - shorter));
                    }
                    longer => {
                        let end = buf.len();
                        buf.resize(end + (longer - HEAD_ROOM), 0);
                        buf.copy_within(payload_at..end, head_at + longer);
                    }
                }
                // Byte by byte: at most 10, and a copy of a length known only
                // here was a call into libc's memcpy per message.
                for (slot, &byte) in buf[head_at..].iter_mut().zip(&head[..head_len]) {
                    *slot = byte;
                }
            }
        }
    }
}

/// What became of a pushed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Pushed {
    Queued,
    /// Queued, and the queue is above its soft watermark: the sender should
    /// let it drain before reading more.
    Congested,
    /// Dropped by the overload policy (notifications only).
    Shed,
    /// The connection is closing or closed; the message was dropped.
    Closed,
    /// The message made the queue exceed `slowConsumerBytes`; the connection
    /// is being aborted.
    SlowConsumer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Open,
    /// Write what is queued, then close.
    Draining,
    /// Close now; queued bytes are discarded.
    Aborted,
}

struct State {
    buf: Vec<u8>,
    /// Bytes in `buf` plus bytes the writer has taken but not yet written.
    queued: usize,
    status: Status,
    /// The abort was the overload policy's (for metrics and logs).
    slow_consumer: bool,
    /// A sender waited for this queue to drain and gave up; cleared once it
    /// drains below the soft watermark.
    stalled: bool,
    /// Messages queued and bytes written, for the dashboard: counted here,
    /// under the lock every push and write takes anyway, so the count costs
    /// no atomic of its own.
    sent: Sent,
}

/// What a queue has taken and written so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    /// Messages queued (every push that was not refused).
    pub messages: u64,
    /// Bytes the writer wrote.
    pub bytes: u64,
}

pub struct Outbound {
    state: Mutex<State>,
    writer_wake: Notify,
    /// Signalled when the writer brings the queue down to `soft_bytes`.
    drained: Notify,
    /// Cancelled when the connection should stop reading (drain or abort).
    stop: CancellationToken,
    /// Cancelled when the connection is aborted: a write under way is abandoned.
    abort: CancellationToken,
    soft_bytes: usize,
    shed_bytes: usize,
    slow_bytes: usize,
    framing: Framing,
}

/// The soft watermark: a quarter of `notifyShedBytes`, at most 1 MiB, so a
/// sender is slowed down well before anything is shed.
fn soft_watermark(shed_bytes: usize) -> usize {
    (shed_bytes / 4).min(1024 * 1024)
}

/// What the writer should do next.
pub enum Batch {
    /// `buf` holds bytes to write; call [`Outbound::written`] after.
    Write,
    /// Nothing more will come: close the socket.
    Done,
}

impl Outbound {
    /// A queue whose notifications shed above `shed_bytes` and whose
    /// connection is aborted above `slow_bytes` (both counted in queued
    /// bytes as framed).
    pub fn new(shed_bytes: u64, slow_bytes: u64, framing: Framing) -> Self {
        Outbound {
            state: Mutex::new(State {
                buf: Vec::new(),
                queued: 0,
                status: Status::Open,
                slow_consumer: false,
                stalled: false,
                sent: Sent::default(),
            }),
            writer_wake: Notify::new(),
            drained: Notify::new(),
            stop: CancellationToken::new(),
            abort: CancellationToken::new(),
            soft_bytes: soft_watermark(usize::try_from(shed_bytes).unwrap_or(usize::MAX)),
            shed_bytes: usize::try_from(shed_bytes).unwrap_or(usize::MAX),
            slow_bytes: usize::try_from(slow_bytes).unwrap_or(usize::MAX),
            framing,
        }
    }

    /// Appends one message written by `write`, which must append exactly one
    /// complete message followed by `\n`; the queue frames it (see
    /// [`Framing`]).
    pub fn push(&self, class: Class, write: impl FnOnce(&mut Vec<u8>)) -> Pushed {
        self.push_if(class, || true, write)
    }

    /// Like [`Outbound::push`], but first evaluates `still_wanted` under the
    /// queue lock and drops the message when it says no. Lets a sender order a
    /// message against state changes that are published through this queue
    /// (see the notify path in `router.rs`).
    pub fn push_if(
        &self,
        class: Class,
        still_wanted: impl FnOnce() -> bool,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Pushed {
        let mut state = self.state.lock();
        if state.status != Status::Open || !still_wanted() {
            return Pushed::Closed;
        }
        if class == Class::Sheddable && state.queued > self.shed_bytes {
            return Pushed::Shed;
        }
        let before = state.buf.len();
        self.framing.append(&mut state.buf, write);
        let added = state.buf.len() - before;
        state.queued += added;
        state.sent.messages += 1;
        if state.queued > self.slow_bytes {
            state.status = Status::Aborted;
            state.slow_consumer = true;
            state.buf = Vec::new();
            drop(state);
            self.abort.cancel();
            self.stop.cancel();
            self.writer_wake.notify_one();
            self.drained.notify_waiters();
            return Pushed::SlowConsumer;
        }
        let was_idle = before == 0;
        let congested = state.queued > self.soft_bytes && !state.stalled;
        drop(state);
        if was_idle {
            // One wake-up per batch, not per message: a non-empty buffer
            // means the writer has already been told.
            self.writer_wake.notify_one();
        }
        if congested {
            Pushed::Congested
        } else {
            Pushed::Queued
        }
    }

    /// Resolves once the queue is at or below its soft watermark, or the
    /// connection is closing (callers bound the wait).
    pub async fn drained(&self) {
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            {
                let state = self.state.lock();
                if state.queued <= self.soft_bytes || state.status != Status::Open {
                    return;
                }
            }
            drained.await;
        }
    }

    /// A sender gave up waiting for this queue: stop asking senders to wait
    /// until it drains.
    pub fn mark_stalled(&self) {
        self.state.lock().stalled = true;
    }

    /// Stop accepting messages; the writer drains what is queued, then closes.
    pub fn drain_and_close(&self) {
        let mut state = self.state.lock();
        if state.status == Status::Open {
            state.status = Status::Draining;
        }
        drop(state);
        self.stop.cancel();
        self.writer_wake.notify_one();
        self.drained.notify_waiters();
    }

    /// Close now, discarding queued bytes.
    pub fn abort(&self) {
        let mut state = self.state.lock();
        state.status = Status::Aborted;
        state.buf = Vec::new();
        drop(state);
        self.drained.notify_waiters();
        self.abort.cancel();
        self.stop.cancel();
        self.writer_wake.notify_one();
    }

    pub fn is_open(&self) -> bool {
        self.state.lock().status == Status::Open
    }

    pub fn was_slow_consumer(&self) -> bool {
        self.state.lock().slow_consumer
    }

    pub fn is_aborted(&self) -> bool {
        self.state.lock().status == Status::Aborted
    }

    /// Bytes waiting to be written (for metrics).
    pub fn queued_bytes(&self) -> usize {
        self.state.lock().queued
    }

    /// Messages queued and bytes written so far, with the bytes waiting.
    pub fn sent(&self) -> (Sent, usize) {
        let state = self.state.lock();
        (state.sent, state.queued)
    }

    /// Resolves once the connection should stop reading.
    pub async fn reader_stopped(&self) {
        self.stop.cancelled().await
    }

    /// Whether the connection should stop reading, without waiting: for a
    /// reader that handles many buffered messages between two waits (the
    /// WebSocket reader checks it every 64 KiB of frames).
    pub fn reader_stop_requested(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Resolves once the connection is aborted (interrupts a stuck write).
    pub async fn aborted(&self) {
        self.abort.cancelled().await
    }

    /// Everything queued, taken at once (for the fuzzing harness, which has
    /// no writer task).
    #[cfg(feature = "fuzzing")]
    pub fn take_queued(&self) -> Vec<u8> {
        let mut state = self.state.lock();
        state.queued = 0;
        std::mem::take(&mut state.buf)
    }

    /// Waits for bytes (or the end) and swaps them into `buf`, which must be
    /// empty. Only the connection's writer calls this.
    pub async fn next_batch(&self, buf: &mut Vec<u8>) -> Batch {
        debug_assert!(buf.is_empty());
        loop {
            {
                let mut state = self.state.lock();
                match state.status {
                    Status::Aborted => return Batch::Done,
                    _ if !state.buf.is_empty() => {
                        std::mem::swap(&mut state.buf, buf);
                        return Batch::Write;
                    }
                    Status::Draining => return Batch::Done,
                    Status::Open => {}
                }
            }
            self.writer_wake.notified().await;
        }
    }

    /// The writer wrote `buf`; clears it for reuse.
    pub fn written(&self, buf: &mut Vec<u8>) {
        self.written_len(buf.len());
        buf.clear();
        if buf.capacity() > KEEP_CAPACITY {
            *buf = Vec::new();
        }
    }

    /// The writer wrote the `len` bytes of the batch it took, and kept
    /// their buffer (handed on without a copy).
    pub fn written_len(&self, len: usize) {
        let mut state = self.state.lock();
        state.queued = state.queued.saturating_sub(len);
        state.sent.bytes += len as u64;
        let drained = state.queued <= self.soft_bytes;
        if drained {
            state.stalled = false;
        }
        drop(state);
        if drained {
            self.drained.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn congestion_clears_when_the_writer_drains_or_a_sender_gives_up() {
        let out = Outbound::new(4 * 8, 1000, Framing::Lines); // soft watermark: 8 bytes
        assert_eq!(out.push(Class::Essential, line("1234567")), Pushed::Queued); // 8: at it
        assert_eq!(out.push(Class::Essential, line("")), Pushed::Congested); // 9: above
                                                                             // A sender that gives up marks the queue stalled: no more waiting on it.
        out.mark_stalled();
        assert_eq!(out.push(Class::Essential, line("")), Pushed::Queued);
        let mut buf = Vec::new();
        assert!(matches!(out.next_batch(&mut buf).await, Batch::Write));
        let drained = out.drained();
        out.written(&mut buf);
        drained.await;
        // Drained: the stall is forgotten, congestion is reported again.
        assert_eq!(
            out.push(Class::Essential, line("12345678")),
            Pushed::Congested
        );
    }

    fn line(text: &str) -> impl FnOnce(&mut Vec<u8>) + '_ {
        move |buf| {
            buf.extend_from_slice(text.as_bytes());
            buf.push(b'\n');
        }
    }

    #[tokio::test]
    async fn batches_everything_pushed_before_the_writer_runs() {
        let out = Outbound::new(1 << 20, 1 << 21, Framing::Lines);
        assert_eq!(out.push(Class::Essential, line("a")), Pushed::Queued);
        assert_eq!(out.push(Class::Sheddable, line("b")), Pushed::Queued);
        let mut buf = Vec::new();
        assert!(matches!(out.next_batch(&mut buf).await, Batch::Write));
        assert_eq!(buf, b"a\nb\n");
        assert_eq!(out.queued_bytes(), 4);
        out.written(&mut buf);
        assert_eq!(out.queued_bytes(), 0);
        let sent = Sent {
            messages: 2,
            bytes: 4,
        };
        assert_eq!(out.sent(), (sent, 0));
    }

    #[tokio::test]
    async fn notifications_shed_at_the_threshold_but_essentials_queue() {
        let out = Outbound::new(4, 100, Framing::Lines);
        // Over the soft watermark (a quarter of the shed bound) the sender is
        // asked to wait; shedding starts above the shed bound itself.
        assert_eq!(out.push(Class::Sheddable, line("abc")), Pushed::Congested); // 4 bytes: at the bound
        assert_eq!(out.push(Class::Sheddable, line("y")), Pushed::Congested); // 6 bytes: above it
        assert_eq!(out.push(Class::Sheddable, line("x")), Pushed::Shed);
        assert_eq!(out.push(Class::Essential, line("resp")), Pushed::Congested);
        assert_eq!(out.queued_bytes(), 11);
    }

    #[tokio::test]
    async fn exceeding_the_slow_consumer_bound_aborts() {
        let out = Outbound::new(4, 10, Framing::Lines);
        assert_eq!(
            out.push(Class::Essential, line("123456789")),
            Pushed::Congested
        ); // 10 bytes: at the bound
        assert_eq!(out.push(Class::Essential, line("")), Pushed::SlowConsumer);
        assert!(out.is_aborted());
        assert_eq!(out.push(Class::Essential, line("late")), Pushed::Closed);
        let mut buf = Vec::new();
        assert!(matches!(out.next_batch(&mut buf).await, Batch::Done));
        out.reader_stopped().await;
    }

    #[tokio::test]
    async fn draining_writes_what_is_queued_then_ends() {
        let out = Outbound::new(100, 100, Framing::Lines);
        assert_eq!(out.push(Class::Essential, line("bye")), Pushed::Queued);
        out.drain_and_close();
        assert_eq!(out.push(Class::Essential, line("late")), Pushed::Closed);
        let mut buf = Vec::new();
        assert!(matches!(out.next_batch(&mut buf).await, Batch::Write));
        assert_eq!(buf, b"bye\n");
        out.written(&mut buf);
        assert!(matches!(out.next_batch(&mut buf).await, Batch::Done));
    }

    /// Every header size fastwebsockets may choose (2, 4 and 10 bytes, at
    /// both edges of each), queued back to back and read back by
    /// fastwebsockets as a client would: the same messages, one text frame
    /// each.
    #[tokio::test]
    async fn websocket_framing_writes_frames_a_client_reads_back() {
        let sizes = [0, 1, 125, 126, 127, 65_535, 65_536, 70_000];
        let out = Outbound::new(1 << 30, 1 << 30, Framing::WebSocketText);
        let messages: Vec<Vec<u8>> = sizes
            .iter()
            .map(|&size| (0..size).map(|i| b'a' + (i % 26) as u8).collect())
            .collect();
        for message in &messages {
            let pushed = out.push(Class::Essential, |buf| {
                buf.extend_from_slice(message);
                buf.push(b'\n');
            });
            assert_eq!(pushed, Pushed::Queued);
        }
        let mut batch = Vec::new();
        assert!(matches!(out.next_batch(&mut batch).await, Batch::Write));
        let heads: usize = sizes
            .iter()
            .map(|&size| match size {
                0..=125 => 2,
                126..=65_535 => 4,
                _ => 10,
            })
            .sum();
        assert_eq!(batch.len(), heads + sizes.iter().sum::<usize>());
        assert_eq!(out.queued_bytes(), batch.len());

        let (mut frames, _) = fastwebsockets::after_handshake_split(
            std::io::Cursor::new(batch),
            tokio::io::sink(),
            fastwebsockets::Role::Client,
        );
        let mut owed = |_| async { Ok::<_, fastwebsockets::WebSocketError>(()) };
        for message in &messages {
            let frame = frames.read_frame(&mut owed).await.expect("a frame");
            assert_eq!(frame.opcode, fastwebsockets::OpCode::Text);
            assert!(frame.fin);
            assert_eq!(&frame.payload[..], &message[..]);
        }
    }
}
