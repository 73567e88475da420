//! WebSocket connections: one JSON-RPC message per text frame. The HTTP
//! port (`http.rs`) routes `GET /` here; [`upgrade`] checks the handshake,
//! turns the socket's slot into a connection and answers 101, and the
//! connection's task then runs [`read_frames`] and [`write_frames`] on the
//! upgraded socket.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use crate::admission::Slot;
use crate::conn::{Conn, Transport};
use crate::outbound::Batch;
use crate::session::{Bearer, Flow, Session};
use crate::state::HubState;
use crate::teardown;
use crate::transport::http::{self, text, text_owned};
use crate::transport::{self, upgrade_token};

type Socket = WebSocketStream<TokioIo<Upgraded>>;

/// tungstenite's read buffer, which every connection allocates up front and
/// keeps (it is also the most one read takes). The Unix transport reads into
/// a per-thread buffer instead; 4 KiB (tungstenite's own advice for many
/// connections, 20 small messages a read) keeps an idle WebSocket
/// connection near an idle Unix one: `docs/performance.md` has the figures.
const READ_BUFFER: usize = 4 * 1024;

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
pub async fn upgrade(State(hub): State<Arc<HubState>>, mut request: Request) -> Response {
    if !is_upgrade(&request) {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    let Some(socket) = request.extensions().get::<http::Socket>().cloned() else {
        return text(StatusCode::INTERNAL_SERVER_ERROR, "no socket\n");
    };
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

/// One admitted WebSocket connection, on the socket hyper upgraded.
async fn serve(hub: Arc<HubState>, conn: Arc<Conn>, upgraded: Upgraded, bearer: Option<Bearer>) {
    let max = usize::try_from(hub.limits.max_message_bytes).unwrap_or(usize::MAX);
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(64 * 1024)
        .max_message_size(Some(max))
        .max_frame_size(Some(max));
    let socket = Socket::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
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
