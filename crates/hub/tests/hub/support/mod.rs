//! Shared setup for the hub's integration tests: a real hub on a fresh
//! directory ([`TestHub`], started by `switchboard_testkit`) with a
//! config it can reload, and a raw line-based JSON-RPC client over its real
//! sockets ([`RawClient`]), which records every byte so tests can assert what
//! arrives and what does not.
//!
//! Every wait is bounded ([`WAIT`]); a test that would hang fails instead,
//! naming the client and what it was waiting for.

#![allow(dead_code)] // each test file uses a different part of this module

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchboard_hub::config::ConfigError;
use switchboard_hub::{Bookkeeping, Hub};
use switchboard_protocol::hub::ReloadResult;
use switchboard_testkit::http;
pub use switchboard_testkit::{metric_value, WAIT};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

/// How long "nothing arrives" is watched.
pub const SILENCE: Duration = Duration::from_millis(300);

pub const CATALOG: &str = "ahp-client-services://";

pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    pub const UNSUPPORTED_VERSION: i64 = -32005;
    pub const AUTH_REQUIRED: i64 = -32007;
    pub const NOT_FOUND: i64 = -32008;
    pub const PERMISSION_DENIED: i64 = -32009;
    pub const LIMIT_EXCEEDED: i64 = -32050;
    pub const REQUEST_TIMEOUT: i64 = -32051;
    pub const SERVICE_GONE: i64 = -32052;
    pub const REQUEST_CANCELLED: i64 = -32800;
}

// ---------------------------------------------------------------------------
// The hub
// ---------------------------------------------------------------------------

/// An in-process hub on a fresh temporary directory, with a config file it
/// can reload. Dropping it stops the hub and removes the directory.
pub struct TestHub {
    hub: switchboard_testkit::TestHub,
    /// Principals declared in the config file (each token is [`token_of`]).
    principals: Vec<String>,
    pub dir: PathBuf,
    pub socket: PathBuf,
    /// `ws://127.0.0.1:PORT/`
    pub ws: String,
    /// The `direct` principal's token (from `hub.json`).
    pub token: String,
}

/// The token the test config gives a named principal.
pub fn token_of(principal: &str) -> String {
    format!("{principal}-token-for-tests")
}

fn config_text(principals: &[String], config: &str) -> String {
    let mut text = String::new();
    for name in principals {
        text.push_str(&format!(
            "[principals.{name}]\ntoken = \"{}\"\n\n",
            token_of(name)
        ));
    }
    text.push_str(config);
    text.push('\n');
    text
}

impl TestHub {
    /// A hub with the default config.
    pub async fn start() -> TestHub {
        Self::with_principals(&[], "").await
    }

    /// A hub whose config file holds `config` (TOML).
    pub async fn with_config(config: &str) -> TestHub {
        Self::with_principals(&[], config).await
    }

    /// A hub whose config declares `principals` (tokens from [`token_of`])
    /// followed by `config` (grants, limits, `[hub]`).
    pub async fn with_principals(principals: &[&str], config: &str) -> TestHub {
        let principals: Vec<String> = principals.iter().map(|p| p.to_string()).collect();
        let hub = switchboard_testkit::TestHub::builder()
            .config(&config_text(&principals, config))
            .start()
            .await;
        let info = hub.info().clone();
        TestHub {
            principals,
            dir: hub.dir().to_owned(),
            socket: info.socket,
            ws: info.ws.expect("a WebSocket listener"),
            token: info.token,
            hub,
        }
    }

    pub fn hub(&self) -> &Hub {
        self.hub.hub()
    }

    /// A Unix-socket connection that has not sent `initialize`.
    pub async fn connect(&self, label: &str) -> RawClient {
        let stream = within(WAIT, label, "connect", UnixStream::connect(&self.socket))
            .await
            .expect("connect to the hub socket");
        RawClient::unix(label, stream)
    }

    /// An initialized Unix-socket client of the `direct` principal.
    pub async fn client(&self, label: &str) -> RawClient {
        let mut client = self.connect(label).await;
        client.initialize_ok(Some(&self.token)).await;
        client
    }

    /// The endpoint door an add-on holds.
    pub fn door(&self) -> switchboard_hub::endpoint::EndpointDoor {
        self.hub.door()
    }

    /// An in-process connection (not initialized), through the endpoint
    /// door.
    pub fn connect_in_process(&self, label: &str) -> RawClient {
        let pipe = self
            .door()
            .connect()
            .unwrap_or_else(|error| panic!("{label}: no in-process connection: {error}"));
        RawClient::in_process(label, pipe)
    }

    /// An initialized Unix-socket client of a named principal.
    pub async fn client_as(&self, principal: &str) -> RawClient {
        let mut client = self.connect(principal).await;
        client.initialize_ok(Some(&token_of(principal))).await;
        client
    }

    /// A WebSocket connection (not initialized) without extra headers.
    pub async fn ws_connect(&self, label: &str) -> RawClient {
        self.ws_connect_with(label, &[])
            .await
            .unwrap_or_else(|status| panic!("{label}: WebSocket upgrade refused with {status}"))
    }

    /// A WebSocket upgrade with extra headers; `Err(status)` if the hub
    /// answered with an HTTP status instead of 101.
    pub async fn ws_connect_with(
        &self,
        label: &str,
        headers: &[(&str, &str)],
    ) -> Result<RawClient, u16> {
        let mut request = self.ws.as_str().into_client_request().unwrap();
        for (name, value) in headers {
            request.headers_mut().insert(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        match within(
            WAIT,
            label,
            "WebSocket upgrade",
            tokio_tungstenite::connect_async(request),
        )
        .await
        {
            Ok((socket, _response)) => Ok(RawClient::websocket(label, socket)),
            Err(WsError::Http(response)) => Err(response.status().as_u16()),
            Err(error) => panic!("{label}: WebSocket upgrade failed: {error}"),
        }
    }

    /// `GET path` on the WebSocket port; returns the status and the body.
    /// The exchange blocks, so it runs on a blocking thread while this
    /// runtime keeps serving the hub.
    pub async fn http_get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let response = self.http_response(path, headers).await;
        (response.status, response.body)
    }

    /// `GET path` on the WebSocket port: the whole response, head and body.
    pub async fn http_response(&self, path: &str, headers: &[(&str, &str)]) -> http::HttpResponse {
        let address = http::address_of(&self.ws);
        let path = path.to_owned();
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        tokio::task::spawn_blocking(move || {
            let headers: Vec<(&str, &str)> = headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect();
            http::get(&address, &path, &headers)
        })
        .await
        .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))
    }

    /// Rewrites the config file (same principals) and reloads it.
    pub fn reload_with(&self, config: &str) -> Result<ReloadResult, ConfigError> {
        let principals: Vec<&str> = self.principals.iter().map(String::as_str).collect();
        self.reload_with_principals(&principals, config)
    }

    /// Rewrites the config file with other principals and reloads it.
    pub fn reload_with_principals(
        &self,
        principals: &[&str],
        config: &str,
    ) -> Result<ReloadResult, ConfigError> {
        let principals: Vec<String> = principals.iter().map(|p| p.to_string()).collect();
        self.write_config(&config_text(&principals, config));
        self.hub().reload()
    }

    /// Replaces the config file's text without reloading.
    pub fn write_config(&self, text: &str) {
        std::fs::write(self.hub.config_path(), text).expect("write config");
    }

    pub fn bookkeeping(&self) -> Bookkeeping {
        self.hub().state().bookkeeping()
    }

    /// Waits until no request is in flight anywhere in the hub: every
    /// pending entry, caller index entry and deadline has been released.
    pub async fn assert_bookkeeping_released(&self) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let sizes = self.bookkeeping();
            if sizes == Bookkeeping::default() {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("request bookkeeping not released after {WAIT:?}: {sizes:?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Prometheus text, as `GET /metrics` serves it.
    pub fn metrics(&self) -> String {
        self.hub.metrics()
    }

    /// The value of one sample, e.g.
    /// `switchboard_notifications_dropped_total{reason="shed"}`.
    pub fn metric(&self, sample: &str) -> u64 {
        self.hub.metric(sample)
    }

    /// Polls until `condition` holds on the hub (for effects that happen
    /// after the last message a test can observe, such as a closed
    /// connection leaving the connection table).
    pub async fn eventually(&self, what: &str, condition: impl Fn(&TestHub) -> bool) {
        switchboard_testkit::eventually(what, || condition(self)).await
    }
}

/// Checks that the hub still routes between two fresh clients.
pub async fn assert_hub_routes(hub: &TestHub) {
    let mut owner = hub.client("bystander-owner").await;
    let mut caller = hub.client("bystander-caller").await;
    let service = owner.register(json!({})).await;
    caller.notify_service(&service, "note", json!(0)).await;
    let id = caller.request_service(&service, "m", json!(1)).await;
    let note = owner.next().await;
    assert_eq!(note["params"]["params"], json!(0), "{note:?}");
    let handle = owner.handle_request().await;
    owner.respond(&handle["id"], json!(2)).await;
    assert_eq!(expect_result(&caller.response(&id).await), json!(2));
}

async fn within<T>(limit: Duration, label: &str, what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| panic!("{label}: {what} did not finish within {limit:?}"))
}

// ---------------------------------------------------------------------------
// The raw client
// ---------------------------------------------------------------------------

/// One message the client received: its exact bytes and its value.
#[derive(Clone)]
pub struct Msg {
    /// The line (Unix socket) or frame (WebSocket), without the newline.
    pub raw: String,
    pub value: Value,
}

impl Deref for Msg {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.value
    }
}

impl fmt::Debug for Msg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

enum Event {
    Bytes(Vec<u8>),
    Closed,
}

type WsSocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

enum Writer {
    /// Lines: the Unix socket, or an in-process connection's pipe.
    Lines(Box<dyn AsyncWrite + Send + Unpin>),
    WebSocket(futures_util::stream::SplitSink<WsSocket, WsMessage>),
}

/// A JSON-RPC client that writes exactly the bytes it is given and keeps
/// every message the hub sends, in order, until a test consumes it.
///
/// A background task reads the socket and hands over raw bytes; nothing is
/// parsed there, so "silence" means no byte at all arrived.
pub struct RawClient {
    pub label: String,
    /// The hub-minted id (empty before `initialize` succeeds).
    pub client_id: String,
    /// The `initialize` result.
    pub init: Value,
    writer: Writer,
    events: mpsc::UnboundedReceiver<Event>,
    /// Bytes of a message whose end has not arrived yet.
    partial: Vec<u8>,
    inbox: VecDeque<Msg>,
    closed: bool,
    next_id: u64,
    /// `false` pauses the background reader (a consumer that does not read).
    reading: watch::Sender<bool>,
}

impl RawClient {
    fn unix(label: &str, stream: UnixStream) -> Self {
        let (read, write) = stream.into_split();
        Self::lines(label, read, write)
    }

    /// A connection in the hub's own process, through its endpoint door.
    pub fn in_process(label: &str, pipe: DuplexStream) -> Self {
        let (read, write) = tokio::io::split(pipe);
        Self::lines(label, read, write)
    }

    fn lines(
        label: &str,
        mut read: impl AsyncRead + Send + Unpin + 'static,
        write: impl AsyncWrite + Send + Unpin + 'static,
    ) -> Self {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (reading, mut gate) = watch::channel(true);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                if gate.wait_for(|reading| *reading).await.is_err() {
                    return;
                }
                match read.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        let _ = events_tx.send(Event::Closed);
                        return;
                    }
                    Ok(n) => {
                        if events_tx.send(Event::Bytes(buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Self::new(label, Writer::Lines(Box::new(write)), events, reading)
    }

    fn websocket(label: &str, socket: WsSocket) -> Self {
        let (sink, mut frames) = socket.split();
        let (events_tx, events) = mpsc::unbounded_channel();
        let (reading, mut gate) = watch::channel(true);
        tokio::spawn(async move {
            loop {
                if gate.wait_for(|reading| *reading).await.is_err() {
                    return;
                }
                let bytes = match frames.next().await {
                    Some(Ok(WsMessage::Text(text))) => text.as_bytes().to_vec(),
                    Some(Ok(WsMessage::Binary(bytes))) => bytes.to_vec(),
                    Some(Ok(WsMessage::Ping(_) | WsMessage::Pong(_) | WsMessage::Frame(_))) => {
                        continue
                    }
                    Some(Ok(WsMessage::Close(_)) | Err(_)) | None => {
                        let _ = events_tx.send(Event::Closed);
                        return;
                    }
                };
                // One frame is one message: frame it like a line.
                let mut line = bytes;
                line.push(b'\n');
                if events_tx.send(Event::Bytes(line)).is_err() {
                    return;
                }
            }
        });
        Self::new(label, Writer::WebSocket(sink), events, reading)
    }

    fn new(
        label: &str,
        writer: Writer,
        events: mpsc::UnboundedReceiver<Event>,
        reading: watch::Sender<bool>,
    ) -> Self {
        RawClient {
            label: label.to_owned(),
            client_id: String::new(),
            init: Value::Null,
            writer,
            events,
            partial: Vec::new(),
            inbox: VecDeque::new(),
            closed: false,
            next_id: 1,
            reading,
        }
    }

    // ---- sending ----------------------------------------------------------

    /// Writes exactly `bytes` (Unix socket), or sends them as one text frame
    /// (WebSocket).
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let label = self.label.clone();
        let sent = match &mut self.writer {
            Writer::Lines(write) => within(WAIT, &label, "write", write.write_all(bytes))
                .await
                .map_err(|e| e.to_string()),
            Writer::WebSocket(sink) => {
                let text = String::from_utf8(bytes.to_vec()).expect("a text frame is UTF-8");
                within(WAIT, &label, "send frame", sink.send(WsMessage::text(text)))
                    .await
                    .map_err(|e| e.to_string())
            }
        };
        if let Err(error) = sent {
            panic!("{label}: cannot send: {error}");
        }
    }

    /// Sends one message: a line on the Unix socket, a frame on a WebSocket.
    pub async fn send_line(&mut self, text: &str) {
        match self.writer {
            Writer::Lines(_) => {
                let mut line = text.as_bytes().to_vec();
                line.push(b'\n');
                self.send_raw(&line).await
            }
            Writer::WebSocket(_) => self.send_raw(text.as_bytes()).await,
        }
    }

    /// Sends one binary frame (WebSocket only).
    pub async fn send_binary(&mut self, bytes: &[u8]) {
        let label = self.label.clone();
        let Writer::WebSocket(sink) = &mut self.writer else {
            panic!("{label}: binary frames need a WebSocket");
        };
        within(
            WAIT,
            &label,
            "send frame",
            sink.send(WsMessage::binary(bytes.to_vec())),
        )
        .await
        .unwrap_or_else(|e| panic!("{label}: cannot send: {e}"));
    }

    /// Sends one raw frame: a text fragment (`fin` false) or continuation
    /// (`continuation` true), or a ping (WebSocket only).
    pub async fn send_frame(
        &mut self,
        frame: tokio_tungstenite::tungstenite::protocol::frame::Frame,
    ) {
        let label = self.label.clone();
        let Writer::WebSocket(sink) = &mut self.writer else {
            panic!("{label}: frames need a WebSocket");
        };
        within(
            WAIT,
            &label,
            "send frame",
            sink.send(WsMessage::Frame(frame)),
        )
        .await
        .unwrap_or_else(|e| panic!("{label}: cannot send: {e}"));
    }

    pub async fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string()).await
    }

    /// Sends a request with the next free numeric id; returns the id.
    pub async fn send_request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send_request_with_id(id.clone(), method, params).await;
        id
    }

    pub async fn send_request_with_id(&mut self, id: Value, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Sends a request and returns the whole response (result or error).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        self.response(&id).await
    }

    /// Sends a request and returns its result; fails on an error response.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params).await;
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{}: {method} failed: {response}", self.label),
        }
    }

    /// Sends a response to a request the hub forwarded (`id` as received).
    pub async fn respond(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await
    }

    // ---- protocol shortcuts --------------------------------------------------

    pub async fn initialize(&mut self, token: Option<&str>) -> Value {
        let mut params = json!({
            "protocolVersions": ["1.0.0"],
            "clientInfo": {"name": self.label},
        });
        if let Some(token) = token {
            params["authToken"] = json!(token);
        }
        self.initialize_with(params).await
    }

    /// Sends `initialize` with exactly `params`; on success records the
    /// client id and result.
    pub async fn initialize_with(&mut self, params: Value) -> Value {
        let response = self.request("initialize", params).await;
        if let Some(result) = response.get("result") {
            self.client_id = result["clientId"].as_str().unwrap_or_default().to_owned();
            self.init = result.clone();
        }
        response
    }

    pub async fn initialize_ok(&mut self, token: Option<&str>) -> Value {
        let response = self.initialize(token).await;
        assert!(
            response.get("result").is_some(),
            "{}: initialize failed: {response}",
            self.label
        );
        response["result"].clone()
    }

    /// Registers a service; returns its id.
    pub async fn register(&mut self, metadata: Value) -> String {
        let result = self
            .call("client/registerService", json!({"metadata": metadata}))
            .await;
        result["serviceId"]
            .as_str()
            .unwrap_or_else(|| panic!("registerService result: {result}"))
            .to_owned()
    }

    /// Subscribes to the catalog; returns the snapshot.
    pub async fn subscribe(&mut self) -> Value {
        let result = self.call("subscribe", json!({"channel": CATALOG})).await;
        result["snapshot"].clone()
    }

    /// Sends `clientService/notify`.
    pub async fn notify_service(&mut self, service: &str, method: &str, params: Value) {
        self.notify(
            "clientService/notify",
            json!({"serviceId": service, "method": method, "params": params}),
        )
        .await
    }

    /// Sends `clientService/request`; returns the id it used.
    pub async fn request_service(&mut self, service: &str, method: &str, params: Value) -> Value {
        self.send_request(
            "clientService/request",
            json!({"serviceId": service, "method": method, "params": params}),
        )
        .await
    }

    /// The next `clientService/handleRequest` the hub forwards to this owner.
    pub async fn handle_request(&mut self) -> Msg {
        self.receive(is_method("clientService/handleRequest"), WAIT)
            .await
    }

    /// The next catalog action of `action_type`.
    pub async fn action(&mut self, action_type: &str) -> Msg {
        let action_type = action_type.to_owned();
        self.receive(
            move |m| {
                m["method"] == "action" && m["params"]["action"]["type"] == action_type.as_str()
            },
            WAIT,
        )
        .await
    }

    // ---- receiving ---------------------------------------------------------

    /// Waits for the response to `id` (other messages stay in the inbox).
    pub async fn response(&mut self, id: &Value) -> Value {
        let id = id.clone();
        self.receive(move |m| is_response(m) && m["id"] == id, WAIT)
            .await
            .value
    }

    /// Takes the first message (received or arriving within `limit`) that
    /// `matching` accepts; earlier messages stay in the inbox, in order.
    pub async fn receive(&mut self, matching: impl Fn(&Value) -> bool, limit: Duration) -> Msg {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(index) = self.inbox.iter().position(|m| matching(&m.value)) {
                return self.inbox.remove(index).expect("position is in range");
            }
            if self.closed {
                panic!(
                    "{}: connection closed before the expected message arrived; inbox: {:?}",
                    self.label, self.inbox
                );
            }
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(event)) => self.absorb(event),
                Ok(None) => self.closed = true,
                Err(_) => panic!(
                    "{}: the expected message did not arrive within {limit:?}; inbox: {:?}",
                    self.label, self.inbox
                ),
            }
        }
    }

    /// The next message, whatever it is.
    pub async fn next(&mut self) -> Msg {
        self.receive(|_| true, WAIT).await
    }

    /// Fails if any byte is waiting or arrives within `duration` (or the
    /// connection closes).
    pub async fn expect_silence(&mut self, duration: Duration) {
        self.drain_ready();
        assert!(
            self.inbox.is_empty() && self.partial.is_empty(),
            "{}: expected silence, but holds {:?} and partial {:?}",
            self.label,
            self.inbox,
            String::from_utf8_lossy(&self.partial)
        );
        assert!(
            !self.closed,
            "{}: expected silence, but the connection is closed",
            self.label
        );
        if let Ok(event) = tokio::time::timeout(duration, self.events.recv()).await {
            match event {
                Some(Event::Bytes(bytes)) => panic!(
                    "{}: expected silence, received {:?}",
                    self.label,
                    String::from_utf8_lossy(&bytes)
                ),
                Some(Event::Closed) | None => {
                    panic!(
                        "{}: expected silence, but the connection closed",
                        self.label
                    )
                }
            }
        }
    }

    /// Waits until the hub closes the connection; messages that arrive
    /// before stay in the inbox.
    pub async fn wait_closed(&mut self) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !self.closed {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(event)) => self.absorb(event),
                Ok(None) => self.closed = true,
                Err(_) => panic!("{}: still open after {WAIT:?}", self.label),
            }
        }
    }

    pub fn is_closed(&mut self) -> bool {
        self.drain_ready();
        self.closed
    }

    /// Messages received so far and not consumed.
    pub fn take_inbox(&mut self) -> Vec<Msg> {
        self.drain_ready();
        self.inbox.drain(..).collect()
    }

    /// Stops reading the socket: the hub's writes back up into its queue.
    pub fn stop_reading(&mut self) {
        let _ = self.reading.send(false);
    }

    pub fn resume_reading(&mut self) {
        let _ = self.reading.send(true);
    }

    /// Closes the connection: shuts down the write side (Unix socket) or
    /// sends a Close frame (WebSocket); the hub sees the end of the stream.
    pub async fn close(mut self) {
        let label = self.label.clone();
        match &mut self.writer {
            Writer::Lines(write) => {
                let _ = within(WAIT, &label, "shutdown", write.shutdown()).await;
            }
            Writer::WebSocket(sink) => {
                let _ = within(WAIT, &label, "close", sink.close()).await;
            }
        }
    }

    fn drain_ready(&mut self) {
        while let Ok(event) = self.events.try_recv() {
            self.absorb(event);
        }
    }

    fn absorb(&mut self, event: Event) {
        let bytes = match event {
            Event::Bytes(bytes) => bytes,
            Event::Closed => {
                self.closed = true;
                return;
            }
        };
        self.partial.extend_from_slice(&bytes);
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let raw = String::from_utf8(line[..end].to_vec())
                .unwrap_or_else(|_| panic!("{}: received a line that is not UTF-8", self.label));
            let value = serde_json::from_str(&raw).unwrap_or_else(|e| {
                panic!(
                    "{}: received a line that is not JSON ({e}): {raw}",
                    self.label
                )
            });
            self.inbox.push_back(Msg { raw, value });
        }
    }
}

/// [`RawClient::expect_silence`] on several clients at once.
pub async fn expect_all_silent<'a>(clients: impl IntoIterator<Item = &'a mut RawClient>) {
    futures_util::future::join_all(clients.into_iter().map(|c| c.expect_silence(SILENCE))).await;
}

// ---------------------------------------------------------------------------
// Matching and checking messages
// ---------------------------------------------------------------------------

pub fn is_method(method: &str) -> impl Fn(&Value) -> bool {
    let method = method.to_owned();
    move |m| m["method"] == method.as_str()
}

pub fn is_response(m: &Value) -> bool {
    m.get("method").is_none() && (m.get("result").is_some() || m.get("error").is_some())
}

/// The error object of a response, checked to carry `code`.
#[track_caller]
pub fn expect_error(response: &Value, code: i64) -> Value {
    let error = response
        .get("error")
        .unwrap_or_else(|| panic!("expected error {code}, got {response}"));
    assert_eq!(error["code"], code, "unexpected error code in {response}");
    assert!(
        error["message"].is_string(),
        "error without a message: {response}"
    );
    error.clone()
}

#[track_caller]
pub fn expect_result(response: &Value) -> Value {
    response
        .get("result")
        .unwrap_or_else(|| panic!("expected a result, got {response}"))
        .clone()
}

/// The exact text of a member, reached through nested objects: e.g.
/// `raw_member(line, &["params", "params"])`.
pub fn raw_member(text: &str, path: &[&str]) -> String {
    let mut current = text.to_owned();
    for key in path {
        let object: HashMap<String, Box<RawValue>> = serde_json::from_str(&current)
            .unwrap_or_else(|e| panic!("not an object ({e}): {current}"));
        current = object
            .get(*key)
            .unwrap_or_else(|| panic!("no member {key:?} in {current}"))
            .get()
            .to_owned();
    }
    current
}

/// A service as the catalog lists it, keyed by id.
pub type ServiceSet = HashMap<String, Value>;

/// The services of a snapshot (`{resource, state: {services}, fromSeq}`).
pub fn snapshot_services(snapshot: &Value) -> ServiceSet {
    assert_eq!(snapshot["resource"], CATALOG, "snapshot: {snapshot}");
    snapshot["state"]["services"]
        .as_array()
        .unwrap_or_else(|| panic!("snapshot without services: {snapshot}"))
        .iter()
        .map(|s| (s["serviceId"].as_str().unwrap().to_owned(), s.clone()))
        .collect()
}

/// Applies one catalog action to a set of services, failing on an action
/// that does not fit the set (a duplicate `added`, an unknown `removed`).
pub fn apply_action(services: &mut ServiceSet, action: &Value) {
    match action["type"].as_str() {
        Some("clientServices/added") => {
            let service = action["service"].clone();
            let id = service["serviceId"].as_str().unwrap().to_owned();
            assert!(
                services.insert(id.clone(), service).is_none(),
                "added a service already present: {id}"
            );
        }
        Some("clientServices/removed") => {
            let id = action["serviceId"].as_str().unwrap();
            assert!(
                services.remove(id).is_some(),
                "removed an unknown service: {id}"
            );
        }
        Some("clientServices/updated") => {
            let id = action["serviceId"].as_str().unwrap();
            let service = services
                .get_mut(id)
                .unwrap_or_else(|| panic!("updated an unknown service: {id}"));
            service["metadata"] = action["metadata"].clone();
        }
        _ => panic!("unknown action {action}"),
    }
}
