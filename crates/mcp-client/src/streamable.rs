//! A Streamable HTTP server as a line stream, so that it goes through the
//! same [`WireTap`] as a stdio server: rmcp's own HTTP client decodes every
//! message into its model before anyone sees it, which drops what the
//! model does not know (a tool's `execution`, the `tasks` capability, a
//! task's `ttl`), and a provider would then list a task-required tool to
//! clients that cannot call it.
//!
//! rmcp writes JSON-RPC lines into a pipe and reads lines from another, as
//! over a child's stdio. The pump in between (MCP 2025-11-25, "Streamable
//! HTTP"):
//! - POSTs each line rmcp writes, on a task of its own (a long call never
//!   holds up the next message), with the session's `Mcp-Session-Id` and
//!   `MCP-Protocol-Version` once `initialize` has answered them;
//! - turns each answer into lines: a JSON body (one message, or a batch),
//!   or every event of an SSE stream; an HTTP failure of a request becomes
//!   that request's JSON-RPC error, so its caller hears why at once;
//! - keeps the GET stream open for what the server sends outside any
//!   request (list changes, resource updates, log messages), reopened
//!   after a pause when it ends;
//! - ends the session with DELETE when the transport closes.
//!
//! One task writes the pipe: every answer reaches it through a bounded
//! channel, so a server that streams faster than rmcp reads waits.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use parking_lot::Mutex;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::sync::CancellationToken;

use crate::tap::{TappedWire, WireTap};
use crate::upstream::{BearerError, BearerSource};

/// The longest message, either way (rmcp's stdio bound).
const MAX_LINE: usize = 16 * 1024 * 1024;
/// The pipes between rmcp and the pump.
const PIPE_BYTES: usize = 256 * 1024;
/// Lines on their way to rmcp, at most.
const INBOX_LINES: usize = 64;
/// The pause before the GET stream is opened again.
const REOPEN_PAUSE: Duration = Duration::from_secs(1);
/// How long closing waits for the server to hear of it.
const DELETE_WAIT: Duration = Duration::from_secs(2);

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";

pub(crate) struct HttpTransport {
    wire: TappedWire<ReadHalf<DuplexStream>, WriteHalf<DuplexStream>>,
    endpoint: Arc<Endpoint>,
    /// Ends the pump, its POSTs, SSE readers and GET stream when the
    /// transport goes (each task ends on its own when its work is done:
    /// nothing is kept per message).
    stop: CancellationToken,
}

/// Where the server is and what every request carries.
struct Endpoint {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    /// Asked before every request: an OAuth token changes while the
    /// session lives.
    bearer: Option<Arc<dyn BearerSource>>,
    /// `Mcp-Session-Id` and `MCP-Protocol-Version`, once `initialize` has
    /// given them.
    session: Mutex<Session>,
}

#[derive(Default, Clone)]
struct Session {
    id: Option<HeaderValue>,
    version: Option<HeaderValue>,
}

impl HttpTransport {
    pub(crate) fn connect(
        client: reqwest::Client,
        url: String,
        headers: HeaderMap,
        bearer: Option<Arc<dyn BearerSource>>,
        tap: Arc<WireTap>,
    ) -> HttpTransport {
        let (rmcp_end, pump_end) = tokio::io::duplex(PIPE_BYTES);
        let (rmcp_reads, rmcp_writes) = tokio::io::split(rmcp_end);
        let (pump_reads, pump_writes) = tokio::io::split(pump_end);
        let endpoint = Arc::new(Endpoint {
            client,
            url,
            headers,
            bearer,
            session: Mutex::new(Session::default()),
        });
        let stop = CancellationToken::new();
        let (inbox, lines) = mpsc::channel(INBOX_LINES);
        spawn(&stop, write_lines(lines, pump_writes));
        spawn(
            &stop,
            pump(pump_reads, endpoint.clone(), inbox, stop.clone()),
        );
        HttpTransport {
            wire: TappedWire::new(rmcp_reads, rmcp_writes, tap),
            endpoint,
            stop,
        }
    }

    async fn shut_down(&mut self) -> std::io::Result<()> {
        let _ = self.wire.close().await;
        self.stop.cancel();
        let session = self.endpoint.session.lock().clone();
        if session.id.is_some() {
            let endpoint = self.endpoint.clone();
            let delete = async move {
                if let Ok(authorized) = endpoint.request(reqwest::Method::DELETE).await {
                    let _ = authorized.request.send().await;
                }
            };
            let _ = tokio::time::timeout(DELETE_WAIT, delete).await;
        }
        Ok(())
    }
}

impl Drop for HttpTransport {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Transport<RoleClient> for HttpTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.wire.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.wire.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shut_down()
    }
}

/// A request with every header it needs, and the bearer token it carries
/// (to be named if the server refuses it).
struct Authorized {
    request: reqwest::RequestBuilder,
    token: Option<String>,
}

impl Endpoint {
    async fn request(&self, method: reqwest::Method) -> Result<Authorized, BearerError> {
        let token = match &self.bearer {
            Some(bearer) => Some(bearer.token().await?),
            None => None,
        };
        let session = self.session.lock().clone();
        let mut request = self
            .client
            .request(method, &self.url)
            .headers(self.headers.clone());
        if let Some(token) = &token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| BearerError("the bearer token is not one HTTP can carry".into()))?;
            // Kept out of reqwest's debug output.
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        if let Some(id) = session.id {
            request = request.header(SESSION_ID, id);
        }
        if let Some(version) = session.version {
            request = request.header(PROTOCOL_VERSION, version);
        }
        Ok(Authorized { request, token })
    }

    /// The server answered 401 to a request that carried `token`.
    fn refused(&self, token: Option<&str>) {
        if let (Some(bearer), Some(token)) = (&self.bearer, token) {
            bearer.rejected(token);
        }
    }
}

/// Runs `work` until it ends or `stop` is cancelled.
fn spawn(stop: &CancellationToken, work: impl Future<Output = ()> + Send + 'static) {
    let stop = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = stop.cancelled() => {}
            () = work => {}
        }
    });
}

/// The one writer of rmcp's pipe.
async fn write_lines(mut lines: mpsc::Receiver<String>, mut pipe: WriteHalf<DuplexStream>) {
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        if pipe.write_all(line.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// What the pump reads of a message rmcp sends.
#[derive(Deserialize)]
struct Outgoing<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<&'a str>,
}

/// POSTs every line rmcp writes until rmcp closes its end.
async fn pump(
    reader: ReadHalf<DuplexStream>,
    endpoint: Arc<Endpoint>,
    inbox: mpsc::Sender<String>,
    stop: CancellationToken,
) {
    let mut lines = FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_LINE));
    while let Some(Ok(line)) = lines.next().await {
        let Ok(outgoing) = serde_json::from_str::<Outgoing<'_>>(&line) else {
            continue;
        };
        // A request's id, to answer it with an error if HTTP fails it.
        let request_id = match (outgoing.id, outgoing.method) {
            (Some(id), Some(_)) => Some(id.get().to_owned()),
            _ => None,
        };
        let initialize = outgoing.method == Some("initialize");
        let exchange = post(
            endpoint.clone(),
            line,
            request_id,
            initialize,
            inbox.clone(),
            stop.clone(),
        );
        spawn(&stop, exchange);
    }
}

/// One message POSTed, and its answer handed to rmcp.
async fn post(
    endpoint: Arc<Endpoint>,
    body: String,
    request_id: Option<String>,
    initialize: bool,
    inbox: mpsc::Sender<String>,
    stop: CancellationToken,
) {
    let failure = match send_post(&endpoint, body).await {
        Err(failure) => failure,
        Ok(response) => {
            let status = response.status();
            if initialize && status.is_success() {
                if let Some(id) = response.headers().get(SESSION_ID) {
                    endpoint.session.lock().id = Some(id.clone());
                }
            }
            match (status.as_u16(), content_type(&response)) {
                (202 | 204, _) => return,
                (200..=299, Kind::Json) => match response.bytes().await {
                    Ok(bytes) => {
                        let lines = json_lines(&bytes);
                        if initialize {
                            learn_version(&endpoint, &lines);
                            open_get_stream(&endpoint, &inbox, &stop);
                        }
                        for line in lines {
                            if inbox.send(line).await.is_err() {
                                return;
                            }
                        }
                        return;
                    }
                    Err(error) => {
                        format!("the MCP server's answer broke off: {}", without_url(error))
                    }
                },
                (200..=299, Kind::EventStream) => {
                    if initialize {
                        // The version is learned from the first event.
                        let mut events = sse_lines(response);
                        if let Some(first) = events.next().await {
                            learn_version(&endpoint, std::slice::from_ref(&first));
                            open_get_stream(&endpoint, &inbox, &stop);
                            if inbox.send(first).await.is_err() {
                                return;
                            }
                        }
                        forward(events, &inbox).await;
                    } else {
                        forward(sse_lines(response), &inbox).await;
                    }
                    return;
                }
                (200..=299, Kind::Other(kind)) => {
                    format!("the MCP server answered {kind}, not JSON or an event stream")
                }
                (401, _) if endpoint.bearer.is_some() => {
                    format!("the MCP server refused a fresh access token too ({status})")
                }
                (401 | 403, _) => format!(
                    "the MCP server refused the request ({status}): check its token or headers (a server behind OAuth: oauth = true in its module, then `switchboard mcp login NAME`)"
                ),
                (404, _) if endpoint.session.lock().id.is_some() => {
                    "the MCP server no longer knows this session (404)".to_owned()
                }
                _ => format!("the MCP server answered {status}"),
            }
        }
    };
    fail(request_id, &failure, &inbox).await;
}

/// POSTs `body`. With a bearer source, a 401 is answered once with a fresh
/// token and the same body (the server refused it unread); the copy is
/// kept only then.
async fn send_post(endpoint: &Endpoint, body: String) -> Result<reqwest::Response, String> {
    let mut again = endpoint.bearer.is_some().then(|| body.clone());
    let mut body = body;
    loop {
        // No token to send: the bearer source says why.
        let authorized = endpoint
            .request(reqwest::Method::POST)
            .await
            .map_err(|error| error.0)?;
        let response = authorized
            .request
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|error| format!("cannot reach the MCP server: {}", without_url(error)))?;
        if response.status() == reqwest::StatusCode::UNAUTHORIZED {
            endpoint.refused(authorized.token.as_deref());
            if let Some(retry) = again.take() {
                body = retry;
                continue;
            }
        }
        return Ok(response);
    }
}

/// A message that could not be delivered: its request, if it was one, is
/// answered with `failure`.
async fn fail(request_id: Option<String>, failure: &str, inbox: &mpsc::Sender<String>) {
    tracing::debug!(%failure, "a message to the MCP server failed");
    if let Some(id) = request_id {
        let _ = inbox.send(error_line(&id, failure)).await;
    }
}

/// A JSON-RPC error answering the request whose id is `id` (its JSON text,
/// so that a number stays a number).
fn error_line(id: &str, message: &str) -> String {
    let id: Value = serde_json::from_str(id).unwrap_or(Value::Null);
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}}).to_string()
}

/// The GET stream: what the server sends outside any request. A server
/// without one says 405; one that ends it is asked again after a pause.
fn open_get_stream(
    endpoint: &Arc<Endpoint>,
    inbox: &mpsc::Sender<String>,
    stop: &CancellationToken,
) {
    let endpoint = endpoint.clone();
    let inbox = inbox.clone();
    spawn(stop, async move {
        loop {
            let response = match endpoint.request(reqwest::Method::GET).await {
                Ok(authorized) => {
                    let token = authorized.token;
                    let response = authorized
                        .request
                        .header(ACCEPT, "text/event-stream")
                        .send()
                        .await;
                    if matches!(&response, Ok(r) if r.status().as_u16() == 401) {
                        endpoint.refused(token.as_deref());
                    }
                    response
                }
                Err(_) => {
                    if inbox.is_closed() {
                        return;
                    }
                    tokio::time::sleep(REOPEN_PAUSE).await;
                    continue;
                }
            };
            match response {
                Ok(response)
                    if response.status().is_success()
                        && matches!(content_type(&response), Kind::EventStream) =>
                {
                    forward(sse_lines(response), &inbox).await;
                }
                Ok(response) if matches!(response.status().as_u16(), 404 | 405) => return,
                Ok(_) | Err(_) => {}
            }
            if inbox.is_closed() {
                return;
            }
            tokio::time::sleep(REOPEN_PAUSE).await;
        }
    });
}

async fn forward(
    mut events: impl futures_util::Stream<Item = String> + Unpin,
    inbox: &mpsc::Sender<String>,
) {
    while let Some(line) = events.next().await {
        if inbox.send(line).await.is_err() {
            return;
        }
    }
}

enum Kind {
    Json,
    EventStream,
    Other(String),
}

fn content_type(response: &reqwest::Response) -> Kind {
    let value = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("no content type");
    let essence = value.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Kind::Json
    } else if essence.eq_ignore_ascii_case("text/event-stream") {
        Kind::EventStream
    } else {
        Kind::Other(essence.to_owned())
    }
}

/// A JSON body as lines: one message, or each of a batch.
fn json_lines(body: &[u8]) -> Vec<String> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Array(batch)) => batch.iter().map(Value::to_string).collect(),
        Ok(message) => vec![message.to_string()],
        Err(_) => Vec::new(),
    }
}

/// Every SSE event's data that is a message, as a line (one without data,
/// a priming event, is skipped).
fn sse_lines(response: reqwest::Response) -> impl futures_util::Stream<Item = String> + Unpin {
    sse_stream::SseStream::from_bytes_stream(response.bytes_stream())
        .take_while(|event| std::future::ready(event.is_ok()))
        .filter_map(|event| {
            let data = event.ok().and_then(|event| event.data);
            std::future::ready(data.and_then(|data| {
                // SSE data may span lines; a JSON-RPC line may not.
                let data = data.trim();
                (!data.is_empty()).then(|| data.replace('\n', ""))
            }))
        })
        .boxed()
}

/// The protocol version `initialize` agreed, sent with every later request.
fn learn_version(endpoint: &Endpoint, lines: &[String]) {
    for line in lines {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(version) = message["result"]["protocolVersion"].as_str() {
            if let Ok(version) = HeaderValue::from_str(version) {
                endpoint.session.lock().version = Some(version);
            }
        }
    }
}

/// reqwest's message without the URL (its query may hold a secret).
fn without_url(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_one_line_per_message() {
        let pretty = json_lines(b"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1, \"result\": {}\n}");
        assert_eq!(pretty.len(), 1);
        assert!(!pretty[0].contains('\n'));
        assert_eq!(
            serde_json::from_str::<Value>(&pretty[0]).unwrap(),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}})
        );
        assert_eq!(
            json_lines(br#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]"#).len(),
            2
        );
        assert!(json_lines(b"<html></html>").is_empty());
    }

    #[test]
    fn an_http_failure_answers_the_request_by_its_own_id() {
        let number: Value = serde_json::from_str(&error_line("7", "refused")).unwrap();
        assert_eq!(number["id"], 7);
        assert_eq!(number["error"]["message"], "refused");
        let text: Value = serde_json::from_str(&error_line("\"a-1\"", "x")).unwrap();
        assert_eq!(text["id"], "a-1");
    }
}
