//! The MCP gateway over Streamable HTTP, served by the hub itself at
//! `/mcp` on its HTTP port (and on the remote TLS listener when it runs):
//! an add-on that enters the hub through `endpoint.rs`'s one door.
//!
//! - Authentication: `Authorization: Bearer <token>`, checked by the hub
//!   as at `initialize` (its own token on loopback only, a named
//!   principal's anywhere). Without one, or with a wrong one: 401 with
//!   `WWW-Authenticate` naming the protected-resource metadata
//!   ([`METADATA_PATH`], RFC 9728). A foreign `Origin` gets the port's 403
//!   before any of this runs.
//! - Sessions, both styles: `initialize` opens one and its answer carries
//!   `Mcp-Session-Id` (2025-03-26 to 2025-11-25); a POST without a session
//!   id that is not `initialize` is served by a session of its own that
//!   ends with it (2026-07-28, stateless). GET opens the session's stream
//!   for what the server says outside a call; DELETE ends it. An unknown
//!   or another principal's session id: 404.
//! - Each session is one `Gateway::serve` session (`session.rs`) on a
//!   gateway shared by the sessions of one principal and profile
//!   (`consumers.rs`), a client of the hub in the hub's own process (the
//!   door's in-process connection, no socket) with the caller's token: the
//!   caller's grants hold, and what a provider sends back during a call
//!   reaches the session that made it, and no other.
//! - Profiles: `?profile=NAME`, or the one `[principals.X] profile` binds
//!   the principal to, which it cannot leave (403).
//!
//! Bounded: a body by the hub's `maxMessageBytes` (413), sessions by
//! [`MAX_SESSIONS`] (503), a session unused for [`SESSION_IDLE`] with no
//! stream open is closed, each stream's queue and the backlog.

mod consumers;
mod session;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde_json::{json, Value};
use switchboard_hub::endpoint::{mint_token, Bearer, Endpoint, EndpointDoor};
use switchboard_tools::consumer::Profile;
use tokio_util::task::TaskTracker;

use consumers::{ConsumerKey, Consumers};
use session::{Frame, HttpSession, PostStream, Refused};

/// Where the gateway is served.
pub const MCP_PATH: &str = "/mcp";
/// Its protected-resource metadata (RFC 9728), named by every 401.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource/mcp";
/// MCP sessions over HTTP held at once (stateless requests not counted).
pub const MAX_SESSIONS: usize = 256;
/// A session with no stream open and no request for this long is closed.
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
const SWEEP_EVERY: Duration = Duration::from_secs(30);
const SESSION_HEADER: &str = "mcp-session-id";

/// The `/mcp` endpoint for the hub behind `door`.
pub fn attach(door: EndpointDoor, tasks: &TaskTracker) -> Endpoint {
    let front = Arc::new(Front {
        door,
        consumers: Consumers::default(),
        sessions: Mutex::new(HashMap::new()),
    });
    tasks.spawn(sweep(front.clone()));
    let routes = Router::new()
        .route(
            MCP_PATH,
            axum::routing::post(post_messages)
                .get(open_stream)
                .delete(end_session),
        )
        .route(METADATA_PATH, get(metadata))
        .with_state(front);
    Endpoint {
        routes,
        remote_paths: vec![MCP_PATH, METADATA_PATH],
        mcp_path: Some(MCP_PATH),
        // An MCP client makes many requests: each need not pay a connect.
        keep_alive_paths: vec![MCP_PATH],
    }
}

struct Front {
    door: EndpointDoor,
    consumers: Consumers,
    /// By `Mcp-Session-Id`.
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
}

/// Who called, and through which profile.
struct Caller {
    bearer: Bearer,
    token: String,
    profile: Option<String>,
}

impl Front {
    /// The caller of a request, or the answer that refuses it.
    fn caller(&self, parts: &Parts) -> Result<Caller, Refusal> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let (scheme, token) = value.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|token| !token.is_empty());
        let Some(token) = token else {
            return Err(unauthorized(
                parts,
                "an Authorization: Bearer token is needed",
            ));
        };
        let Some(bearer) = self.door.authenticate(token, &parts.extensions) else {
            tracing::info!(
                "refused an MCP request over HTTP: its token authenticates no principal here"
            );
            return Err(unauthorized(
                parts,
                "the token authenticates no principal here (the hub's own token works on loopback only)",
            ));
        };
        let asked = parts.uri.query().and_then(|query| {
            url::form_urlencoded::parse(query.as_bytes())
                .find(|(key, _)| key == "profile")
                .map(|(_, value)| value.into_owned())
        });
        let profile = match (&bearer.profile, asked) {
            (Some(bound), Some(asked)) if *bound != asked => {
                return Err(rpc_error(
                    StatusCode::FORBIDDEN,
                    -32600,
                    &format!(
                        "principal {} is held to profile {bound:?}; it cannot choose {asked:?}",
                        bearer.principal
                    ),
                ))
            }
            (Some(bound), _) => Some(bound.clone()),
            (None, asked) => asked,
        };
        Ok(Caller {
            bearer,
            token: token.to_owned(),
            profile,
        })
    }

    /// A session of `caller`'s by id; another principal's is not found.
    fn find(&self, headers: &HeaderMap, caller: &Caller) -> Result<Arc<HttpSession>, Refusal> {
        let id = headers
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("");
        self.sessions
            .lock()
            .get(id)
            .filter(|session| session.principal == caller.bearer.principal && !session.is_closed())
            .cloned()
            .ok_or_else(session_not_found)
    }

    /// Opens a session: with an id (`initialize`), or a stateless one.
    async fn open(
        self: &Arc<Self>,
        caller: &Caller,
        keep: bool,
    ) -> Result<Arc<HttpSession>, Refusal> {
        if keep && self.sessions.lock().len() >= MAX_SESSIONS {
            return Err(too_many_sessions());
        }
        let profile = match &caller.profile {
            None => None,
            Some(name) => {
                let Some(file) = self.door.config_file() else {
                    return Err(rpc_error(
                        StatusCode::BAD_REQUEST,
                        -32600,
                        &format!("profile {name:?}: the hub runs without a config file, so it has no profiles"),
                    ));
                };
                Some(Profile::load(&file, name).map_err(|error| {
                    rpc_error(StatusCode::BAD_REQUEST, -32600, &error.to_string())
                })?)
            }
        };
        let key = ConsumerKey {
            principal: caller.bearer.principal.clone(),
            profile: caller.profile.clone(),
            reloads: self.door.reloads(),
        };
        // Counted as a session of the gateway from here; if this request
        // is dropped before the session exists (its client went away
        // while the gateway started), the count is given back.
        let held = Held {
            front: self,
            key: Some(key.clone()),
        };
        let gateway = self
            .consumers
            .acquire(&key, &self.door, &caller.token, profile)
            .await;
        held.hand_over();
        let id = keep.then(mint_token);
        let front = Arc::downgrade(self);
        let on_close = {
            let id = id.clone();
            Box::new(move || released(&front, id.as_deref(), &key))
        };
        let session = HttpSession::open(
            gateway,
            id.clone(),
            caller.bearer.principal.clone(),
            on_close,
        );
        if let Some(id) = id {
            let inserted = {
                let mut sessions = self.sessions.lock();
                let room = sessions.len() < MAX_SESSIONS;
                if room {
                    sessions.insert(id, session.clone());
                }
                room
            };
            if !inserted {
                session.close().await;
                return Err(too_many_sessions());
            }
        }
        Ok(session)
    }
}

/// A gateway session counted before its HTTP session exists.
struct Held<'a> {
    front: &'a Front,
    key: Option<ConsumerKey>,
}

impl Held<'_> {
    /// The session exists now: its close gives the count back.
    fn hand_over(mut self) {
        self.key = None;
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.front.consumers.release(&key);
        }
    }
}

/// A session ended: it leaves the table and its gateway's count.
fn released(front: &Weak<Front>, id: Option<&str>, key: &ConsumerKey) {
    if let Some(front) = front.upgrade() {
        if let Some(id) = id {
            front.sessions.lock().remove(id);
        }
        front.consumers.release(key);
    }
}

/// `POST /mcp`: one JSON-RPC message (or a batch) from the client.
async fn post_messages(
    State(front): State<Arc<Front>>,
    request: Request,
) -> Result<Response, Refusal> {
    let (parts, body) = request.into_parts();
    let caller = front.caller(&parts)?;
    let limit = front.door.max_message_bytes();
    let body = axum::body::to_bytes(body, limit).await.map_err(|error| {
        let too_large = std::error::Error::source(&error)
            .is_some_and(|cause| cause.is::<http_body_util::LengthLimitError>());
        if too_large {
            rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                &format!("the body is larger than the hub's maxMessageBytes ({limit} bytes)"),
            )
        } else {
            rpc_error(
                StatusCode::BAD_REQUEST,
                -32700,
                "the body could not be read",
            )
        }
    })?;
    let batch = Batch::parse(&body)
        .map_err(|(code, message)| rpc_error(StatusCode::BAD_REQUEST, code, &message))?;
    let has_session = parts.headers.contains_key(SESSION_HEADER);
    let session = match (has_session, batch.initialize) {
        (true, true) => {
            return Err(rpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                "initialize opens a session; send it without Mcp-Session-Id",
            ))
        }
        (true, false) => front.find(&parts.headers, &caller)?,
        (false, true) if batch.messages.len() > 1 => {
            return Err(rpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                "initialize must be sent alone",
            ))
        }
        (false, initialize) => front.open(&caller, initialize).await?,
    };
    let lines = batch.lines();
    if batch.requests.is_empty() {
        let written = session.write(lines).await;
        if session.id.is_none() {
            session.close().await;
        }
        written.map_err(|_| session_not_found())?;
        return Ok(StatusCode::ACCEPTED.into_response());
    }
    let sse = accepts(&parts.headers, "text/event-stream")
        || !accepts(&parts.headers, "application/json");
    let stream =
        session
            .post(&batch.requests, lines, sse)
            .await
            .map_err(|refused| match refused {
                Refused::DuplicateId(_) => {
                    rpc_error(StatusCode::BAD_REQUEST, -32600, &refused.to_string())
                }
                Refused::Closed => session_not_found(),
            })?;
    let mut response = if sse {
        event_stream(stream.map(|frame| frame.line))
    } else {
        json_answer(stream, batch.is_array).await
    };
    if let (true, Some(id)) = (batch.initialize, &session.id) {
        if let Ok(value) = HeaderValue::from_str(id) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
    }
    Ok(response)
}

/// `GET /mcp`: the session's stream of what the server says outside a call.
async fn open_stream(
    State(front): State<Arc<Front>>,
    request: Request,
) -> Result<Response, Refusal> {
    let (parts, _) = request.into_parts();
    let caller = front.caller(&parts)?;
    if !parts.headers.contains_key(SESSION_HEADER) {
        return Err(rpc_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "GET /mcp needs the Mcp-Session-Id of an open session (a stateless client listens with subscriptions/listen)",
        ));
    }
    let session = front.find(&parts.headers, &caller)?;
    if !accepts(&parts.headers, "text/event-stream") {
        return Err(rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            -32600,
            "GET /mcp answers with text/event-stream only",
        ));
    }
    let frames = session.listen();
    let lines = futures_util::stream::unfold(frames, |mut frames| async move {
        frames.recv().await.map(|frame: Frame| (frame.line, frames))
    });
    Ok(event_stream(lines))
}

/// `DELETE /mcp`: the client ends its session.
async fn end_session(
    State(front): State<Arc<Front>>,
    request: Request,
) -> Result<StatusCode, Refusal> {
    let (parts, _) = request.into_parts();
    let caller = front.caller(&parts)?;
    front.find(&parts.headers, &caller)?.close().await;
    Ok(StatusCode::NO_CONTENT)
}

/// The protected-resource metadata (RFC 9728): which resource this is and
/// how to present a token. No authorization server issues them: a token
/// is a principal's, from the hub's config file.
async fn metadata(request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let body = json!({
        "resource": format!("{}{MCP_PATH}", base_url(&parts)),
        "authorization_servers": [],
        "bearer_methods_supported": ["header"],
        "resource_name": "Switchboard hub MCP gateway",
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Closes idle sessions and gateways, and everything once the hub stops.
async fn sweep(front: Arc<Front>) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = front.door.stopping() => break,
        }
        let idle: Vec<_> = front
            .sessions
            .lock()
            .values()
            .filter(|session| session.idle_for().is_some_and(|idle| idle >= SESSION_IDLE))
            .cloned()
            .collect();
        for session in idle {
            tracing::info!("closing an MCP session over HTTP unused for {SESSION_IDLE:?}");
            session.close().await;
        }
        front.consumers.sweep(front.door.reloads(), false);
    }
    let open: Vec<_> = front.sessions.lock().values().cloned().collect();
    for session in open {
        session.close().await;
    }
    front.consumers.sweep(0, true);
}

/// A POST body, checked as JSON-RPC 2.0.
struct Batch {
    messages: Vec<Value>,
    /// Sent as an array (2025-03-26's batches): answered as one.
    is_array: bool,
    /// Its requests: id as JSON text, and the progress token it names.
    requests: Vec<(String, Option<String>)>,
    initialize: bool,
}

impl Batch {
    fn parse(body: &[u8]) -> Result<Batch, (i64, String)> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|error| (-32700, format!("the body is not JSON: {error}")))?;
        let (messages, is_array) = match value {
            Value::Array(items) if items.is_empty() => {
                return Err((-32600, "the body is an empty batch".into()))
            }
            Value::Array(items) => (items, true),
            value => (vec![value], false),
        };
        let mut requests = Vec::new();
        let mut initialize = false;
        for message in &messages {
            let valid = message.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
            let method = message.get("method");
            let id = message
                .get("id")
                .filter(|id| id.is_string() || id.is_number());
            let answer = message.get("result").is_some() || message.get("error").is_some();
            match (valid, method, id) {
                (true, Some(Value::String(method)), Some(id)) => {
                    initialize |= method == "initialize";
                    let token = message
                        .pointer("/params/_meta/progressToken")
                        .map(Value::to_string);
                    requests.push((id.to_string(), token));
                }
                (true, Some(Value::String(_)), None) if message.get("id").is_none() => {}
                (true, None, Some(_)) if answer => {}
                _ => {
                    return Err((
                        -32600,
                        "each message must be a JSON-RPC 2.0 request, notification or response \
                         (\"jsonrpc\": \"2.0\", a string method, a string or number id)"
                            .into(),
                    ))
                }
            }
        }
        Ok(Batch {
            messages,
            is_array,
            requests,
            initialize,
        })
    }

    /// Each message as one line for the gateway.
    fn lines(&self) -> Vec<Vec<u8>> {
        self.messages
            .iter()
            .map(|message| serde_json::to_vec(message).unwrap_or_default())
            .collect()
    }
}

/// An answer of one or more JSON-RPC messages as `application/json`.
async fn json_answer(mut stream: PostStream, is_array: bool) -> Response {
    let mut answers = Vec::new();
    while let Some(frame) = stream.next().await {
        if frame.answers {
            answers.push(frame.line);
        }
    }
    let mut body = BytesMut::new();
    if is_array {
        body.put_u8(b'[');
        for (index, answer) in answers.iter().enumerate() {
            if index > 0 {
                body.put_u8(b',');
            }
            body.put_slice(answer);
        }
        body.put_u8(b']');
    } else if let Some(answer) = answers.first() {
        body.put_slice(answer);
    }
    ([(header::CONTENT_TYPE, "application/json")], body.freeze()).into_response()
}

/// Messages as server-sent events, one `message` event each.
fn event_stream(lines: impl futures_util::Stream<Item = Bytes> + Send + 'static) -> Response {
    let events = lines.map(|line| {
        let mut event = BytesMut::with_capacity(line.len() + 24);
        event.put_slice(b"event: message\ndata: ");
        event.put_slice(&line);
        event.put_slice(b"\n\n");
        Ok::<_, Infallible>(event.freeze())
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(events),
    )
        .into_response()
}

fn accepts(headers: &HeaderMap, media: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| {
            value
                .split(',')
                .any(|item| item.trim().starts_with(media) || item.trim().starts_with("*/*"))
        })
}

/// `http(s)://HOST` as the client named it.
fn base_url(parts: &Parts) -> String {
    let scheme = if EndpointDoor::is_remote(&parts.extensions) {
        "https"
    } else {
        "http"
    };
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("{scheme}://{host}")
}

/// 401 with where to learn how to authenticate (MCP authorization).
fn unauthorized(parts: &Parts, why: &str) -> Refusal {
    Refusal {
        challenge: Some(format!(
            "Bearer resource_metadata=\"{}{METADATA_PATH}\"",
            base_url(parts)
        )),
        ..rpc_error(StatusCode::UNAUTHORIZED, -32001, why)
    }
}

fn session_not_found() -> Refusal {
    rpc_error(
        StatusCode::NOT_FOUND,
        -32001,
        "no such MCP session (it ended, or the hub restarted): initialize again",
    )
}

fn too_many_sessions() -> Refusal {
    rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        -32000,
        &format!("the hub holds {MAX_SESSIONS} MCP sessions over HTTP already; end one (DELETE /mcp) first"),
    )
}

/// An HTTP refusal: its status and a JSON-RPC error body (and, for a 401,
/// where to learn how to authenticate).
struct Refusal {
    status: StatusCode,
    code: i64,
    message: String,
    challenge: Option<String>,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": self.code, "message": self.message}});
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
        if let Some(value) = self.challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

fn rpc_error(status: StatusCode, code: i64, message: &str) -> Refusal {
    Refusal {
        status,
        code,
        message: message.to_owned(),
        challenge: None,
    }
}
