//! A real tool provider on the hub, registered through the SDK and serving
//! `tools/list` and `tools/call` as docs/reference/tool-calls.md says.
//!
//! - `echo` (read-only): answers `echo: <text>`;
//! - `write_note` (not read-only): answers `noted <text>`;
//! - `slow` (read-only): runs until the caller cancels it, and counts that.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use std::sync::Mutex;
use switchboard_client::protocol::jsonrpc::ErrorObject;
use switchboard_client::protocol::{ErrorCode, ToolCallRequest};
use switchboard_client::{handler_fn, reply, Client, ServiceHandle};
use tokio::sync::watch;

use super::WAIT;

pub const NAMESPACE: &str = "testtools";

/// The schema pin the provider lists for `tool`.
pub fn pin(tool: &str) -> String {
    format!("tp1:{tool}:{}:0", "ab".repeat(32))
}

pub struct Provider {
    _client: Client,
    _service: ServiceHandle,
    calls: Arc<Mutex<Vec<ToolCallRequest>>>,
    call_count: watch::Sender<usize>,
    cancelled: watch::Sender<usize>,
}

fn tools() -> Value {
    let text_schema = json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"]
    });
    json!({"tools": [
        {"name": "echo", "description": "Echo the text.", "inputSchema": text_schema,
         "annotations": {"readOnlyHint": true}, "schemaPin": pin("echo")},
        {"name": "write_note", "description": "Write a note.", "inputSchema": text_schema,
         "annotations": {"readOnlyHint": false}, "schemaPin": pin("write_note")},
        {"name": "slow", "description": "Take a long time.", "inputSchema": {"type": "object"},
         "annotations": {"readOnlyHint": true}, "schemaPin": pin("slow")},
    ]})
}

impl Provider {
    pub async fn register(client: Client) -> Provider {
        let calls: Arc<Mutex<Vec<ToolCallRequest>>> = Arc::default();
        let cancelled = watch::Sender::new(0usize);
        let call_count = watch::Sender::new(0usize);
        let (seen, counted, cancel_count) = (calls.clone(), call_count.clone(), cancelled.clone());
        let handler = handler_fn(move |request| {
            let (seen, counted, cancel_count) =
                (seen.clone(), counted.clone(), cancel_count.clone());
            async move {
                match request.method.as_str() {
                    "tools/list" => reply(&tools()),
                    "tools/call" => {
                        let call: ToolCallRequest = request.params()?;
                        seen.lock().unwrap().push(call.clone());
                        counted.send_modify(|n| *n += 1);
                        let arguments: Value =
                            serde_json::from_str(call.arguments.get()).unwrap_or(Value::Null);
                        let text = arguments["text"].as_str().unwrap_or_default().to_owned();
                        match call.name.as_str() {
                            "echo" => reply(
                                &json!({"content": [{"type": "text", "text": format!("echo: {text}")}]}),
                            ),
                            "write_note" => reply(
                                &json!({"content": [{"type": "text", "text": format!("noted {text}")}]}),
                            ),
                            "slow" => {
                                tokio::select! {
                                    _ = request.cancelled.cancelled() => {
                                        cancel_count.send_modify(|n| *n += 1);
                                        Err(ErrorObject::new(ErrorCode::RequestCancelled, "cancelled"))
                                    }
                                    _ = tokio::time::sleep(Duration::from_secs(60)) => {
                                        reply(&json!({"content": [{"type": "text", "text": "slow done"}]}))
                                    }
                                }
                            }
                            other => Err(ErrorObject::new(
                                ErrorCode::InvalidParams,
                                format!("unknown tool {other}"),
                            )),
                        }
                    }
                    other => Err(switchboard_client::method_not_found(other)),
                }
            }
        });
        let service = client
            .register(
                &json!({"protocol": "tool-provider", "version": 1, "namespace": NAMESPACE}),
                handler,
            )
            .await
            .expect("register the provider");
        Provider {
            _client: client,
            _service: service,
            calls,
            call_count,
            cancelled,
        }
    }

    /// Every `tools/call` received, in order.
    pub fn calls(&self) -> Vec<ToolCallRequest> {
        self.calls.lock().unwrap().clone()
    }

    /// Waits until `n` calls have arrived.
    pub async fn wait_calls(&self, n: usize) {
        let mut count = self.call_count.subscribe();
        tokio::time::timeout(WAIT, count.wait_for(|c| *c >= n))
            .await
            .expect("the provider got fewer calls")
            .expect("provider alive");
    }

    /// Waits until `n` calls of `slow` have seen their caller cancel.
    pub async fn wait_cancelled(&self, n: usize) {
        let mut count = self.cancelled.subscribe();
        tokio::time::timeout(WAIT, count.wait_for(|c| *c >= n))
            .await
            .expect("the provider saw no cancellation")
            .expect("provider alive");
    }
}

/// A second provider with one read-only tool, `ping`, answering `pong`.
pub async fn register_ping(client: &Client, namespace: &str) -> ServiceHandle {
    let handler = handler_fn(|request| async move {
        match request.method.as_str() {
            "tools/list" => reply(&json!({"tools": [{
                "name": "ping", "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true}, "schemaPin": pin("ping"),
            }]})),
            "tools/call" => reply(&json!({"content": [{"type": "text", "text": "pong"}]})),
            other => Err(switchboard_client::method_not_found(other)),
        }
    });
    client
        .register(
            &json!({"protocol": "tool-provider", "version": 1, "namespace": namespace}),
            handler,
        )
        .await
        .expect("register the ping provider")
}
