//! MCP's stdio wire, by hand: one JSON-RPC message per line each way. The
//! reader dispatches requests (each on a task of its own, cancelled by
//! `notifications/cancelled`), notifications and the answers to this
//! server's own requests; one writer task owns stdout.
//!
//! By hand rather than on rmcp because this server must speak exactly the
//! 2025-11-25 wire, tasks included, and choose what `_meta` its own
//! requests carry; rmcp's server follows newer drafts there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// How long this server waits for its client to answer one of its requests.
const CLIENT_ANSWER_WAIT: Duration = Duration::from_secs(120);

/// A JSON-RPC error object.
#[derive(Debug, Clone)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(-32602, message)
    }

    fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }

    fn from_json(error: &Value) -> Self {
        RpcError {
            code: error["code"].as_i64().unwrap_or(-32603),
            message: error["message"].as_str().unwrap_or_default().to_owned(),
            data: error.get("data").cloned(),
        }
    }
}

/// The client, as this server talks to it.
pub struct Peer {
    out: mpsc::UnboundedSender<String>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>,
    /// The client's requests in flight, by the text of their id.
    inflight: Mutex<HashMap<String, CancellationToken>>,
}

impl Peer {
    fn send(&self, message: Value) {
        let _ = self.out.send(message.to_string());
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Asks the client; its error answer is `Err`, as is no answer in time.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.pending.lock().insert(id, answer);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        match tokio::time::timeout(CLIENT_ANSWER_WAIT, answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(RpcError::new(-32603, "the connection ended")),
            Err(_) => {
                self.pending.lock().remove(&id);
                Err(RpcError::new(
                    -32603,
                    format!("no answer to {method} in time"),
                ))
            }
        }
    }
}

/// What the server does with the client's messages.
pub trait Dispatch: Send + Sync + 'static {
    /// A request; `None` answers nothing (it was cancelled).
    fn request(
        self: Arc<Self>,
        method: String,
        params: Value,
        cancelled: CancellationToken,
    ) -> impl std::future::Future<Output = Option<Result<Value, RpcError>>> + Send;

    fn notification(&self, method: &str, params: &Value);
}

/// Serves stdin and stdout until stdin closes.
pub async fn serve<D: Dispatch>(make: impl FnOnce(Arc<Peer>) -> Arc<D>) {
    let (out, mut outgoing) = mpsc::unbounded_channel::<String>();
    let peer = Arc::new(Peer {
        out,
        next_id: AtomicU64::new(1),
        pending: Mutex::new(HashMap::new()),
        inflight: Mutex::new(HashMap::new()),
    });
    let server = make(peer.clone());
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut line) = outgoing.recv().await {
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").cloned();
        match (method, id) {
            (Some(method), Some(id)) => {
                let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
                let cancelled = CancellationToken::new();
                peer.inflight
                    .lock()
                    .insert(id.to_string(), cancelled.clone());
                let (peer, server, method) = (peer.clone(), server.clone(), method.to_owned());
                tokio::spawn(async move {
                    let answer = server.request(method, params, cancelled.clone()).await;
                    peer.inflight.lock().remove(&id.to_string());
                    let message = match answer {
                        _ if cancelled.is_cancelled() => return,
                        None => return,
                        Some(Ok(result)) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                        Some(Err(error)) => {
                            json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()})
                        }
                    };
                    peer.send(message);
                });
            }
            (Some(method), None) => {
                let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
                if method == "notifications/cancelled" {
                    let id = params["requestId"].to_string();
                    if let Some(cancelled) = peer.inflight.lock().get(&id) {
                        cancelled.cancel();
                    }
                }
                server.notification(method, &params);
            }
            (None, Some(id)) => {
                let Some(id) = id.as_u64() else { continue };
                let Some(answer) = peer.pending.lock().remove(&id) else {
                    continue;
                };
                let _ = answer.send(match message.get("error") {
                    Some(error) => Err(RpcError::from_json(error)),
                    None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                });
            }
            (None, None) => {}
        }
    }
    drop(peer);
    drop(server);
    writer.abort();
}
