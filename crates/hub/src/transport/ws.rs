//! WebSocket connections: one JSON-RPC message per text frame. The HTTP
//! port (`http.rs`) routes `GET /` here; [`upgrade`] checks the handshake,
//! turns the socket's slot into a connection and answers 101, and the
//! connection's task then runs [`read_frames`] and [`write_frames`] on the
//! upgraded socket.
//!
//! fastwebsockets' reader starts with an 8 KiB buffer, grows it to the
//! largest frame it reads and never shrinks it. A reader that has waited
//! [`IDLE_RELEASE`] for bytes, with no part of a frame buffered, is
//! dropped: the connection then waits for the next frame's first byte with
//! no buffer at all ([`ReadAhead`]) and only then takes a fresh reader, so
//! an idle connection holds no read buffer, whatever its traffic grew
//! ([`Tally`] knows when nothing is buffered; `trim.rs` then returns the
//! freed pages to the system).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use fastwebsockets::{Frame, OpCode, Role, WebSocketError, WebSocketRead};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

use crate::admission::Slot;
use crate::conn::{Conn, Transport};
use crate::outbound::Batch;
use crate::session::{Bearer, Flow, Session};
use crate::state::HubState;
use crate::teardown;
use crate::transport::response::{text, text_owned};
use crate::transport::socket::Socket;
use crate::transport::{self, upgrade_token};

/// Whether a request asks for a WebSocket (`Upgrade: websocket`).
pub fn is_upgrade(request: &Request) -> bool {
    header_has_token(request.headers(), header::UPGRADE, "websocket")
}

/// Whether a comma-separated header holds `token` (case-insensitive).
fn header_has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|value| {
        value.to_str().is_ok_and(|value| {
            value
                .split(',')
                .any(|part| part.trim().eq_ignore_ascii_case(token))
        })
    })
}

/// `GET /`: the WebSocket handshake. The connection is admitted (its slot
/// taken from the socket) before 101 is sent; its task starts once hyper
/// hands over the upgraded socket.
pub async fn upgrade(hub: Arc<HubState>, socket: Socket, mut request: Request) -> Response {
    if !is_upgrade(&request) {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    let slot = match socket.slot.lock().take() {
        Some(Slot::Connection(slot)) => slot,
        Some(Slot::Refusal(_)) | None => {
            hub.admission.count_refused();
            let body = format!(
                "the hub already serves {} connections (maxConnections)\n",
                hub.admission.max()
            );
            return text_owned(StatusCode::SERVICE_UNAVAILABLE, body);
        }
    };
    let headers = request.headers();
    let version_13 = headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_some_and(|v| v.as_bytes() == b"13");
    let Some(key) = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .filter(|_| version_13)
    else {
        let mut response = text(
            StatusCode::UPGRADE_REQUIRED,
            "a WebSocket version 13 handshake is required\n",
        );
        response.headers_mut().insert(
            header::SEC_WEBSOCKET_VERSION,
            header::HeaderValue::from_static("13"),
        );
        return response;
    };
    let accept = derive_accept_key(key.as_bytes());
    let bearer = match upgrade_token::check(&hub, &request, socket.remote) {
        Ok(bearer) => bearer,
        Err(refusal) => {
            tracing::info!(peer = ?socket.peer, "refused a WebSocket upgrade: {refusal}");
            return upgrade_token::unauthorized(refusal);
        }
    };
    let transport = if socket.remote {
        Transport::Remote
    } else {
        Transport::WebSocket
    };
    let Ok(conn) = hub.admission.admit(slot, transport, &hub.limits) else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
    };
    let on_upgrade = hyper::upgrade::on(&mut request);
    socket.tasks.spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => serve(hub, conn, upgraded, bearer).await,
            Err(_) => {
                teardown::disconnect(&hub, &conn);
                teardown::release(&hub, &conn);
            }
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "Upgrade")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .body(Body::empty())
        .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "\n"))
}

/// One admitted WebSocket connection, on the socket hyper upgraded. A plain
/// TCP socket is taken back from hyper and split into owned halves (no lock
/// between reader and writer); another (TLS) is split with a lock.
async fn serve(hub: Arc<HubState>, conn: Arc<Conn>, upgraded: Upgraded, bearer: Option<Bearer>) {
    match upgraded.downcast::<TokioIo<TcpStream>>() {
        Ok(parts) => {
            let (read, write) = parts.io.into_inner().into_split();
            // Bytes hyper read past the request head come first.
            let read = std::io::Cursor::new(parts.read_buf).chain(read);
            serve_on(hub, conn, bearer, read, write).await;
        }
        Err(upgraded) => {
            let (read, write) = tokio::io::split(TokioIo::new(upgraded));
            serve_on(hub, conn, bearer, read, write).await;
        }
    }
}

async fn serve_on<R, W>(
    hub: Arc<HubState>,
    conn: Arc<Conn>,
    bearer: Option<Bearer>,
    read: R,
    write: W,
) where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin,
{
    let max = usize::try_from(hub.limits.max_message_bytes).unwrap_or(usize::MAX);
    let writer = Arc::new(tokio::sync::Mutex::new(FrameWriter {
        io: write,
        closed: false,
    }));
    let session = Session::new(hub.clone(), conn.clone(), bearer);
    let read = read_frames(session, read, writer.clone(), max);
    let write = write_frames(conn.clone(), writer);
    transport::run(hub, conn, read, write).await;
}

/// The socket with at most one byte read ahead of fastwebsockets: the
/// first byte of the next frame, read by the connection itself while it
/// idles with no reader (a one-byte read needs no buffer). A reader made
/// afterwards reads that byte first.
struct ReadAhead<R> {
    io: R,
    ahead: Option<u8>,
}

impl<R: AsyncRead + Unpin> ReadAhead<R> {
    /// Waits until the peer sends a byte, and keeps it. The end of the
    /// stream is an error here (`UnexpectedEof`): no frame can follow.
    async fn wait_for_byte(&mut self) -> std::io::Result<()> {
        debug_assert!(self.ahead.is_none());
        let mut byte = [0u8; 1];
        if self.io.read(&mut byte).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.ahead = Some(byte[0]);
        Ok(())
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for ReadAhead<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        match this.ahead.take() {
            // fastwebsockets reads again for the rest of the header.
            Some(byte) if buf.remaining() > 0 => {
                buf.put_slice(&[byte]);
                Poll::Ready(Ok(()))
            }
            ahead => {
                this.ahead = ahead;
                Pin::new(&mut this.io).poll_read(cx, buf)
            }
        }
    }
}

/// fastwebsockets' reader alone, on `socket`: data frames are written by
/// `write_frames` straight from the queue, and the frames the reader owes
/// the peer (pong, close) go through the same `FrameWriter`. Its own writer
/// half is left unused. Pings come back as frames (no automatic pong), so
/// that every byte read is part of a frame [`read_frames`] sees.
fn frame_reader<'a, R: AsyncRead + Unpin>(
    socket: &'a mut R,
    tally: &'a Tally,
    max: usize,
) -> WebSocketRead<Counted<'a, R>> {
    let (mut frames, _) = fastwebsockets::after_handshake_split(
        Counted { io: socket, tally },
        tokio::io::sink(),
        Role::Server,
    );
    // It refuses a frame of `payload_len >= max_message_size`.
    frames.set_max_message_size(max.saturating_add(1));
    frames.set_auto_pong(false);
    frames
}

/// The socket's write half. One writer at a time: the connection's writer
/// task (data frames, a batch per lock) or its reader (a pong or a close
/// reply, rarely), so frames never interleave.
struct FrameWriter<W> {
    io: W,
    /// A close frame went out; nothing may follow it.
    closed: bool,
}

type SharedWriter<W> = Arc<tokio::sync::Mutex<FrameWriter<W>>>;

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.closed {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        self.io.write_all(bytes).await
    }

    /// A control frame (formatted by fastwebsockets): one the reader owes
    /// the peer (a pong, the reply to a close), or the server's close.
    async fn control(&mut self, bytes: &[u8], close: bool) -> std::io::Result<()> {
        self.write(bytes).await?;
        self.closed |= close;
        Ok(())
    }

    /// The server's close (normal closure), unless one went out already.
    async fn close(&mut self) {
        if !self.closed {
            let mut bytes = Vec::new();
            let length = Frame::close(1000, b"").write(&mut bytes).len();
            let _ = self.control(&bytes[..length], true).await;
        }
        let _ = self.io.shutdown().await;
    }
}

async fn read_frames<R, W>(mut session: Session, socket: R, writer: SharedWriter<W>, max: usize)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let conn = session.conn().clone();
    let mut owed = |mut frame: Frame<'_>| {
        // Formatted here: the frame may borrow the read buffer.
        let mut bytes = Vec::new();
        let length = frame.write(&mut bytes).len();
        bytes.truncate(length);
        let close = frame.opcode == OpCode::Close;
        let writer = writer.clone();
        async move { writer.lock().await.control(&bytes, close).await }
    };
    let tally = Tally::default();
    let mut socket = ReadAhead {
        io: socket,
        ahead: None,
    };
    let mut frames = frame_reader(&mut socket, &tally, max);
    // The idle timer lives in this future (no allocation); it is set only
    // once the reader's buffer may have grown.
    let timer = tokio::time::sleep(IDLE_RELEASE);
    tokio::pin!(timer);
    let mut idle = Idle::new(&tally, timer);
    // A message split over several frames, while it is being assembled.
    let mut fragments: Option<Fragments> = None;
    // Made once: a frame is much smaller than a Unix read, and a fresh
    // cancellation future per frame cost ~300 instructions a message.
    let stopped = conn.out.reader_stopped();
    tokio::pin!(stopped);
    // Bytes of the frames read (headers included), and where the next
    // yield is due.
    let mut framed: u64 = 0;
    let mut next_yield = YIELD_BYTES;
    loop {
        // The frame first: a frame already buffered is taken without
        // polling the other two (~270 instructions a message for the stop
        // future: the token's Notify). They are polled, and wake the reader,
        // only when it waits for bytes; between waits the stop is checked
        // every YIELD_BYTES (the Unix reader checks it between turns of at
        // most 4 reads of 64 KiB).
        let frame = tokio::select! {
            biased;
            frame = frames.read_frame(&mut owed) => frame,
            () = &mut stopped => return,
            () = &mut idle => {
                // The reader waits for a frame's first byte with nothing
                // buffered (so dropping its read loses nothing). Without
                // it the connection holds no read buffer while it idles; a
                // fresh one (fastwebsockets' first 8 KiB) is made once the
                // peer sends again.
                drop(frames);
                super::trim::soon();
                let next = tokio::select! {
                    biased;
                    () = &mut stopped => return,
                    next = socket.wait_for_byte() => next,
                };
                if next.is_err() {
                    // The peer closed, or the socket failed, while idle:
                    // what a reader would have read as the end.
                    return;
                }
                frames = frame_reader(&mut socket, &tally, max);
                idle.renewed();
                continue;
            }
        };
        if let Ok(frame) = &frame {
            framed += frame_size(frame);
            tally.framed.store(framed, Ordering::Relaxed);
        }
        let flow = match frame {
            Ok(frame) => match (frame.opcode, frame.fin, &mut fragments) {
                (OpCode::Text, true, None) => {
                    // SAFETY: fastwebsockets hands over a whole text frame
                    // only once its payload passed its UTF-8 check
                    // (`Frame::is_utf8`; otherwise `InvalidUTF8`), so it is
                    // UTF-8. The test
                    // `a_text_frame_that_is_not_utf8_closes_only_its_connection`
                    // holds the reader to it.
                    let text = unsafe { std::str::from_utf8_unchecked(&frame.payload) };
                    session.on_text_frame(text)
                }
                (OpCode::Binary, true, None) => session.on_frame(&frame.payload),
                (OpCode::Text | OpCode::Binary, false, None) => {
                    fragments = Some(Fragments {
                        text: frame.opcode == OpCode::Text,
                        bytes: frame.payload.to_vec(),
                    });
                    Flow::Continue
                }
                (OpCode::Continuation, fin, Some(message)) => {
                    let size = message.bytes.len() + frame.payload.len();
                    if size > max {
                        session.too_large(Some(size))
                    } else {
                        message.bytes.extend_from_slice(&frame.payload);
                        match fin.then(|| fragments.take()).flatten() {
                            // fastwebsockets checks the UTF-8 of whole text
                            // frames only: an assembled text message is
                            // checked here, as a character may straddle two
                            // fragments.
                            Some(Fragments { text: true, bytes }) => {
                                match std::str::from_utf8(&bytes) {
                                    Ok(text) => session.on_text_frame(text),
                                    Err(_) => close_not_utf8(&writer).await,
                                }
                            }
                            Some(Fragments { bytes, .. }) => session.on_frame(&bytes),
                            None => Flow::Continue,
                        }
                    }
                }
                (OpCode::Ping, _, _) => {
                    // Owed as fastwebsockets' automatic pong would be.
                    match owed(Frame::pong(frame.payload)).await {
                        Ok(()) => Flow::Continue,
                        Err(_) => Flow::Close,
                    }
                }
                (OpCode::Pong, _, _) => Flow::Continue,
                // A close, or frames out of order (a new message inside a
                // fragmented one, a continuation of nothing).
                _ => Flow::Close,
            },
            Err(WebSocketError::FrameTooLarge) => session.too_large(None),
            Err(WebSocketError::InvalidUTF8) => close_not_utf8(&writer).await,
            Err(_) => Flow::Close,
        };
        if flow == Flow::Close {
            return;
        }
        // Flow control after every frame, as the Unix reader after every
        // read; the flag spares the call when no destination congested.
        if conn.backlog_noted() {
            transport::let_destinations_drain(&conn).await;
        }
        // Frames already buffered are read without touching the socket, so
        // without tokio's budget: yield after every YIELD_BYTES handled, as
        // the Unix reader does after each bounded read, so the writers this
        // sender fills get to run and one busy sender cannot hold a worker.
        if framed >= next_yield {
            next_yield = framed + YIELD_BYTES;
            if conn.out.reader_stop_requested() {
                return;
            }
            tokio::task::yield_now().await;
        }
    }
}

/// The bytes `frame` took on the wire: its payload and a header of the
/// shortest length encoding, with a mask (RFC 6455 §5.1: a client masks
/// every frame; fastwebsockets does not say whether one was). A peer that
/// encodes a length longer than it needs took more than this, and then
/// [`Tally`] never sees the buffer empty; one that sends a frame unmasked
/// took 4 bytes less, which [`Idle`] notices unless exactly that much of a
/// later frame is buffered when it looks: both only ever touch that peer's
/// own connection.
fn frame_size(frame: &Frame<'_>) -> u64 {
    let length = frame.payload.len() as u64;
    let extended = if length < 126 {
        0
    } else if length <= 0xffff {
        2
    } else {
        8
    };
    2 + extended + 4 + length
}

/// What a reader knows of fastwebsockets' buffer: bytes the socket handed
/// it, bytes of the frames it handed back. Equal, the buffer holds nothing.
/// Atomic only so that the reader's future stays `Send`: one task touches
/// it (the reader's own), with plain loads and stores.
#[derive(Default)]
struct Tally {
    /// Bytes the socket handed fastwebsockets (only [`Counted`] adds).
    read: AtomicU64,
    /// Bytes of whole frames handed back (only `read_frames` adds).
    framed: AtomicU64,
    /// The socket's last read found nothing: fastwebsockets waits for bytes.
    waiting: AtomicBool,
}

impl Tally {
    /// fastwebsockets waits for the first byte of a frame and holds none
    /// of one.
    fn empty_and_waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed)
            && self.read.load(Ordering::Relaxed) == self.framed.load(Ordering::Relaxed)
    }
}

/// The socket as fastwebsockets reads it, counted.
struct Counted<'a, R> {
    io: &'a mut R,
    tally: &'a Tally,
}

impl<R: AsyncRead + Unpin> AsyncRead for Counted<'_, R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut *this.io).poll_read(cx, buf);
        let tally = this.tally;
        match polled {
            Poll::Ready(Ok(())) => {
                let read = (buf.filled().len() - before) as u64;
                let total = tally.read.load(Ordering::Relaxed) + read;
                tally.read.store(total, Ordering::Relaxed);
                tally.waiting.store(false, Ordering::Relaxed);
            }
            Poll::Pending => tally.waiting.store(true, Ordering::Relaxed),
            Poll::Ready(Err(_)) => {}
        }
        polled
    }
}

/// How long a reader waits for bytes before the connection gives back its
/// buffer.
pub const IDLE_RELEASE: Duration = Duration::from_secs(1);

/// Ready once the reader has waited at least [`IDLE_RELEASE`] (at most
/// twice that) with nothing buffered. Polled only while the reader waits for
/// bytes; its timer is set when that first happens, polled (to register the
/// task) only after being set, and set again only when it fires and bytes
/// came meanwhile: a wait costs a few loads, no timer work.
struct Idle<'a> {
    tally: &'a Tally,
    timer: Pin<&'a mut tokio::time::Sleep>,
    /// `tally.read` when the timer was set, if it is set.
    armed_at: Option<u64>,
    /// The timer was polled since it was set: it will wake the task.
    registered: bool,
    /// The count went wrong (a frame sent unmasked): never release.
    off: bool,
}

impl<'a> Idle<'a> {
    fn new(tally: &'a Tally, timer: Pin<&'a mut tokio::time::Sleep>) -> Self {
        Idle {
            tally,
            timer,
            armed_at: None,
            registered: false,
            off: false,
        }
    }

    /// A fresh reader took over.
    fn renewed(&mut self) {
        self.armed_at = None;
    }

    fn arm(&mut self, read: u64) {
        self.armed_at = Some(read);
        self.registered = false;
        self.timer
            .as_mut()
            .reset(tokio::time::Instant::now() + IDLE_RELEASE);
    }
}

impl Future for Idle<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Woken, while it is not ready, with the reader (which waits on the
        // socket) or by its timer.
        let this = self.get_mut();
        let read = this.tally.read.load(Ordering::Relaxed);
        if this.off {
            return Poll::Pending;
        }
        if this.tally.framed.load(Ordering::Relaxed) > read {
            this.off = true;
            return Poll::Pending;
        }
        let Some(armed_at) = this.armed_at else {
            this.arm(read);
            return this.poll_timer(cx);
        };
        if this.registered && !this.timer.is_elapsed() {
            return Poll::Pending;
        }
        if this.timer.is_elapsed() {
            if read == armed_at && this.tally.empty_and_waiting() {
                return Poll::Ready(());
            }
            // Bytes came since (or part of a frame waits): another while.
            this.arm(read);
        }
        this.poll_timer(cx)
    }
}

impl Idle<'_> {
    /// Polls the timer so that it wakes the task (it was just set).
    fn poll_timer(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.registered = true;
        match self.timer.as_mut().poll(cx) {
            // Set a moment ago, it cannot have fired; if it has, the next
            // poll decides.
            Poll::Ready(()) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A message whose first frame was not its last, while it is assembled.
struct Fragments {
    /// It began with a text frame (else binary), so it must be UTF-8.
    text: bool,
    bytes: Vec<u8>,
}

/// RFC 6455 §8.1: a text message that is not UTF-8 fails the connection
/// with 1007 (given at most `FLUSH_GRACE` to go out).
async fn close_not_utf8<W: AsyncWrite + Unpin>(writer: &SharedWriter<W>) -> Flow {
    let close = async {
        let mut bytes = Vec::new();
        let reason = b"a text message must be UTF-8";
        let length = Frame::close(1007, reason).write(&mut bytes).len();
        writer.lock().await.control(&bytes[..length], true).await
    };
    let _ = tokio::time::timeout(transport::FLUSH_GRACE, close).await;
    Flow::Close
}

/// Bytes of frames a reader handles between two yields.
const YIELD_BYTES: u64 = 64 * 1024;

/// Takes each batch of frames off the queue (the queue frames each message
/// as it is pushed: `Framing::WebSocketText`) and writes it with one
/// `write_all`.
async fn write_frames<W: AsyncWrite + Unpin>(conn: Arc<Conn>, writer: SharedWriter<W>) {
    let mut batch = Vec::new();
    loop {
        match conn.out.next_batch(&mut batch).await {
            Batch::Done => break,
            Batch::Write => {}
        }
        let send = async { writer.lock().await.write(&batch).await };
        let sent = tokio::select! {
            sent = send => sent,
            () = conn.out.aborted() => return,
        };
        if sent.is_err() {
            conn.out.abort();
            return;
        }
        conn.out.written(&mut batch);
    }
    let _ = tokio::time::timeout(transport::FLUSH_GRACE, async {
        writer.lock().await.close().await;
    })
    .await;
}
