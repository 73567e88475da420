//! `tools/call` on a connection: bounded, its progress routed to the
//! caller's sink, and `notifications/cancelled` sent when the caller drops
//! the call before its answer.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use rmcp::RoleClient;
use serde_json::value::RawValue;
use serde_json::Value;
use switchboard_protocol::ErrorObject;

use crate::connection::Connection;
use crate::progress::{ProgressSink, Route};

/// One tool call.
pub struct ToolCall {
    /// The tool's name on the server.
    pub name: String,
    /// An object, or `null` for none.
    pub arguments: Value,
    /// No answer within this: [`CallError::TimedOut`], and the server is
    /// told to stop. `None`: no bound here (the caller cancels by dropping
    /// the call).
    pub timeout: Option<Duration>,
    /// Where the server's progress reports for this call go.
    pub progress: Option<Arc<dyn ProgressSink>>,
    /// The reason `notifications/cancelled` gives when the call is dropped.
    pub cancel_reason: &'static str,
}

impl ToolCall {
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            name: name.into(),
            arguments,
            timeout: None,
            progress: None,
            cancel_reason: "cancelled by the caller",
        }
    }
}

/// How a call ended without a result.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The arguments are not an object; nothing was sent.
    #[error("MCP tools take an object of arguments, not {0}")]
    NotAnObject(Value),
    /// The connection was closed before the call; nothing was sent.
    #[error("the MCP server's connection is closed")]
    NotSent,
    /// The server answered with this JSON-RPC error.
    #[error("{}", .0.message)]
    Answered(ErrorObject),
    /// No answer within the call's timeout; the server was told to stop.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// The connection closed during the call: it may or may not have run.
    #[error("the MCP server stopped answering during the call: {0}")]
    Closed(String),
    /// Another failure of the connection during the call (rmcp's words):
    /// it may or may not have run.
    #[error("the MCP server stopped answering during the call: {0}")]
    Lost(String),
    /// The server answered with something that is no `CallToolResult`.
    #[error("{0}")]
    Unexpected(String),
}

impl Connection {
    /// Calls a tool; the answer is the server's `CallToolResult`, as sent.
    pub async fn call_tool(&self, call: ToolCall) -> Result<Box<RawValue>, CallError> {
        let mut params = CallToolRequestParams::new(call.name);
        match call.arguments {
            Value::Object(arguments) => params = params.with_arguments(arguments),
            Value::Null => {}
            other => return Err(CallError::NotAnObject(other)),
        }
        let mut options = PeerRequestOptions::no_options();
        options.timeout = call.timeout;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let peer = &self.inner.peer;
        // Held while the request is queued when the call wants progress: its
        // route must exist before the server can report.
        let mut routes = match &call.progress {
            Some(_) => Some(self.inner.routes.hold().await),
            None => None,
        };
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|_| CallError::NotSent)?;
        let _route = match (&mut routes, call.progress) {
            (Some(routes), Some(sink)) => {
                routes.insert(handle.progress_token.clone(), sink);
                Some(Route {
                    routes: self.inner.routes.clone(),
                    token: handle.progress_token.clone(),
                })
            }
            _ => None,
        };
        drop(routes);
        let mut cancel = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
            reason: call.cancel_reason,
        };
        let response = handle.await_response().await;
        cancel.id = None;
        match response {
            Ok(ServerResult::CallToolResult(result)) => serde_json::value::to_raw_value(&result)
                .map_err(|error| {
                    CallError::Unexpected(format!("cannot encode the MCP server's result: {error}"))
                }),
            Ok(_) => Err(CallError::Unexpected(
                "the MCP server answered tools/call with something other than a CallToolResult"
                    .into(),
            )),
            Err(ServiceError::McpError(error)) => {
                let mut object = ErrorObject {
                    code: i64::from(error.code.0),
                    message: error.message.into_owned(),
                    data: None,
                };
                if let Some(data) = error.data {
                    object = object.with_data(&data);
                }
                Err(CallError::Answered(object))
            }
            Err(ServiceError::Timeout { timeout }) => Err(CallError::TimedOut(timeout)),
            Err(error @ ServiceError::TransportClosed) => Err(CallError::Closed(error.to_string())),
            Err(error) => Err(CallError::Lost(error.to_string())),
        }
    }
}

/// Tells the server a call is no longer wanted, if the call's future is
/// dropped before its answer.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    reason: &'static str,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let peer = self.peer.clone();
            let note = CancelledNotificationParam::new(Some(id), Some(self.reason.into()));
            tokio::spawn(async move {
                let _ = peer.notify_cancelled(note).await;
            });
        }
    }
}
