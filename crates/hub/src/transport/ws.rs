//! The WebSocket listener: one JSON-RPC message per text frame, plus
//! `GET /metrics` and `GET /healthz` on the same port.
//!
//! Bounded before any work: the accept loop takes a connection slot (or a
//! refusal slot, see `admission.rs`) before it spawns the task that reads
//! the HTTP head, so a socket that never sends its head holds a slot, not
//! an unbounded task. A socket in a refusal slot is still served `/metrics`
//! and `/healthz`; its upgrade gets 503.
//!
//! Browser defences, first thing after the head: an `Origin` header not in
//! the allow-list gets 403 (web pages always send one; other clients do
//! not), and on a loopback listener a `Host` that is not a loopback name gets
//! 403 too (DNS rebinding). No response carries CORS headers.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;
use tokio_util::task::TaskTracker;

use crate::admission::{ConnectionSlot, Slot};
use crate::conn::{Conn, Transport};
use crate::outbound::Batch;
use crate::session::{Bearer, Flow, Session};
use crate::state::HubState;
use crate::teardown;
use crate::transport::{self, http, AcceptBackoff};

type Socket = WebSocketStream<TcpStream>;

/// tungstenite's read buffer, which every connection allocates up front and
/// keeps (it is also the most one read takes). The Unix transport reads into
/// a per-thread buffer instead; 4 KiB (tungstenite's own advice for many
/// connections, 20 small messages a read) keeps an idle WebSocket
/// connection near an idle Unix one: `docs/performance.md` has the figures.
const READ_BUFFER: usize = 4 * 1024;

/// Accepts until shutdown begins. Each socket takes a slot before a task is
/// spawned for it; with neither a connection nor a refusal slot free it is
/// closed at once.
pub async fn accept_loop(hub: Arc<HubState>, listener: TcpListener, tasks: TaskTracker) {
    let loopback = listener.local_addr().is_ok_and(|a| a.ip().is_loopback());
    let mut backoff = AcceptBackoff::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = hub.stopping() => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                backoff.succeeded();
                accepted
            }
            Err(error) => {
                let delay = backoff.failed();
                tracing::warn!(%error, ?delay, "accept failed on the WebSocket listener");
                tokio::time::sleep(delay).await;
                continue;
            }
        };
        let Some(slot) = hub.admission.at_accept() else {
            continue; // closed by the drop
        };
        let _ = stream.set_nodelay(true);
        tasks.spawn(handle(hub.clone(), stream, peer, loopback, slot));
    }
}

/// One HTTP request on the WebSocket port, within the slot it was accepted
/// in (held until this returns, or handed to the connection by `upgrade`).
async fn handle(
    hub: Arc<HubState>,
    mut stream: TcpStream,
    peer: SocketAddr,
    loopback: bool,
    slot: Slot,
) {
    let head = match tokio::time::timeout(http::HEAD_TIMEOUT, http::read_head(&mut stream)).await {
        Ok(Ok(Some(head))) => head,
        _ => return,
    };
    if loopback && !head.header("host").is_some_and(http::is_loopback_host) {
        tracing::info!(%peer, host = head.header("host").unwrap_or(""), "refused a request for a non-loopback Host");
        return http::text(
            &mut stream,
            403,
            "Forbidden",
            "Host is not a loopback name\n",
        )
        .await;
    }
    if let Some(origin) = head.header("origin") {
        if !hub.registry.policy().origin_allowed(origin) {
            tracing::info!(%peer, origin, "refused a request from a web origin that is not allowed");
            return http::text(&mut stream, 403, "Forbidden", "Origin not allowed\n").await;
        }
    }
    let path = head.path.split('?').next().unwrap_or_default();
    if head.header_has_token("upgrade", "websocket") {
        if head.method != "GET" || path != "/" {
            return http::text(
                &mut stream,
                404,
                "Not Found",
                "the WebSocket endpoint is /\n",
            )
            .await;
        }
        return match slot {
            Slot::Connection(slot) => upgrade(hub, stream, head, slot).await,
            Slot::Refusal(_) => {
                hub.admission.count_refused();
                let body = format!(
                    "the hub already serves {} connections (maxConnections)\n",
                    hub.admission.max()
                );
                http::text(&mut stream, 503, "Service Unavailable", &body).await
            }
        };
    }
    serve_http(&hub, &mut stream, &head.method, path).await
}

/// A plain HTTP request: `/healthz`, `/metrics`, or a refusal.
async fn serve_http(hub: &HubState, stream: &mut TcpStream, method: &str, path: &str) {
    match (method, path) {
        ("GET", "/healthz") if !hub.is_stopping() => http::text(stream, 200, "OK", "ok\n").await,
        ("GET", "/healthz") => {
            http::text(stream, 503, "Service Unavailable", "shutting down\n").await
        }
        ("GET", "/metrics") => {
            let body = hub.metrics_text();
            http::respond(
                stream,
                200,
                "OK",
                "text/plain; version=0.0.4; charset=utf-8",
                "",
                body.as_bytes(),
            )
            .await
        }
        ("GET", _) => http::text(stream, 404, "Not Found", "not found\n").await,
        _ => {
            http::respond(
                stream,
                405,
                "Method Not Allowed",
                "text/plain",
                "Allow: GET\r\n",
                b"",
            )
            .await
        }
    }
}

async fn upgrade(
    hub: Arc<HubState>,
    mut stream: TcpStream,
    head: http::Head,
    slot: ConnectionSlot,
) {
    let Some(key) = head
        .header("sec-websocket-key")
        .filter(|_| head.header("sec-websocket-version") == Some("13"))
    else {
        return http::respond(
            &mut stream,
            426,
            "Upgrade Required",
            "text/plain",
            "Sec-WebSocket-Version: 13\r\n",
            b"a WebSocket version 13 handshake is required\n",
        )
        .await;
    };
    let bearer = head.header("authorization").map(|value| {
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim);
        match token.and_then(|t| hub.registry.policy().authenticate(Some(t))) {
            Some(authenticated) => Bearer::Valid(authenticated),
            None => Bearer::Invalid,
        }
    });
    let Ok(conn) = hub.admission.admit(slot, Transport::WebSocket, &hub.limits) else {
        return http::text(&mut stream, 503, "Service Unavailable", "shutting down\n").await;
    };
    let accept = derive_accept_key(key.as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    if tokio::io::AsyncWriteExt::write_all(&mut stream, response.as_bytes())
        .await
        .is_err()
    {
        teardown::disconnect(&hub, &conn);
        teardown::release(&hub, &conn);
        return;
    }
    let max = usize::try_from(hub.limits.max_message_bytes).unwrap_or(usize::MAX);
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(64 * 1024)
        .max_message_size(Some(max))
        .max_frame_size(Some(max));
    let socket =
        Socket::from_partially_read(stream, head.leftover, Role::Server, Some(config)).await;
    let (sink, frames) = socket.split();
    let session = Session::new(hub.clone(), conn.clone(), bearer);
    let read = read_frames(session, frames);
    let write = write_frames(conn.clone(), sink);
    transport::run(hub, conn, read, write).await;
}

async fn read_frames(mut session: Session, mut frames: SplitStream<Socket>) {
    let conn = session.conn().clone();
    loop {
        let frame = tokio::select! {
            biased;
            () = conn.out.reader_stopped() => return,
            frame = frames.next() => frame,
        };
        let flow = match frame {
            None | Some(Ok(Message::Close(_))) => Flow::Close,
            Some(Ok(Message::Text(text))) => on_frame(&mut session, text.as_bytes()),
            Some(Ok(Message::Binary(bytes))) => on_frame(&mut session, &bytes),
            Some(Ok(_)) => Flow::Continue, // ping, pong: tungstenite answers pings
            Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, .. }))) => {
                session.too_large(Some(size))
            }
            Some(Err(_)) => Flow::Close,
        };
        if flow == Flow::Close {
            return;
        }
        transport::let_destinations_drain(&conn).await;
    }
}

/// Outbound queues separate messages with `\n`, which JSON text only holds as
/// whitespace; a frame that has some gets it replaced by spaces so its payload
/// can be spliced into line-framed messages unchanged in meaning.
fn on_frame(session: &mut Session, bytes: &[u8]) -> Flow {
    if memchr::memchr(b'\n', bytes).is_none() {
        return session.on_message(bytes);
    }
    let flattened: Vec<u8> = bytes
        .iter()
        .map(|&b| if b == b'\n' { b' ' } else { b })
        .collect();
    session.on_message(&flattened)
}

async fn write_frames(conn: Arc<Conn>, mut sink: SplitSink<Socket, Message>) {
    let mut batch = Vec::new();
    loop {
        match conn.out.next_batch(&mut batch).await {
            Batch::Done => break,
            Batch::Write => {}
        }
        // One allocation per batch; each frame is a slice of it.
        let shared = Bytes::copy_from_slice(&batch);
        let send = async {
            let mut start = 0;
            for end in memchr::memchr_iter(b'\n', &shared) {
                let text = Utf8Bytes::try_from(shared.slice(start..end))
                    .map_err(|_| WsError::Utf8(String::from("outbound message is not UTF-8")))?;
                sink.feed(Message::Text(text)).await?;
                start = end + 1;
            }
            sink.flush().await
        };
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
    let _ = tokio::time::timeout(transport::FLUSH_GRACE, sink.close()).await;
}
