//! `tools/call` on a connection: bounded, its progress routed to the
//! caller's sink, and `notifications/cancelled` sent when the caller drops
//! the call before its answer.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CancelledNotificationParam, ClientRequest, CustomRequest, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use rmcp::RoleClient;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use switchboard_protocol::ErrorObject;

use crate::connection::Connection;
use crate::handler::CallTag;
use crate::progress::{CallRoute, ProgressSink, Route};
use crate::tap::{Awaited, Watched};

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
    /// MCP's `task` member (`{"ttl": …}`), passed on untouched: the server
    /// answers with a `CreateTaskResult` (`{task}`) instead of the result.
    pub task: Option<Value>,
    /// What the caller calls this call: a server request whose
    /// `_meta.progressToken` is this call's reaches the [`Handler`](crate::Handler)
    /// with [`ServerRequest::call`](crate::ServerRequest) set to it.
    pub tag: Option<CallTag>,
}

impl ToolCall {
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            name: name.into(),
            arguments,
            timeout: None,
            progress: None,
            cancel_reason: "cancelled by the caller",
            task: None,
            tag: None,
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
    /// Calls a tool; the answer is the server's `CallToolResult` (or, for a
    /// call with [`ToolCall::task`], its `CreateTaskResult`), as sent.
    pub async fn call_tool(&self, call: ToolCall) -> Result<Box<RawValue>, CallError> {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(call.name));
        match call.arguments {
            Value::Object(arguments) => {
                params.insert("arguments".into(), Value::Object(arguments));
            }
            Value::Null => {}
            other => return Err(CallError::NotAnObject(other)),
        }
        if let Some(task) = call.task {
            params.insert("task".into(), task);
        }
        let mut options = PeerRequestOptions::no_options();
        options.timeout = call.timeout;
        let request = ClientRequest::CustomRequest(CustomRequest::new(
            "tools/call",
            Some(Value::Object(params)),
        ));
        let peer = &self.inner.peer;
        // Held while the request is queued when the call has a route: it
        // must exist before the server can report or ask.
        let route = CallRoute {
            sink: call.progress,
            tag: call.tag,
            handled: 0,
        };
        let route_sink = route.sink.is_some();
        let mut routes = match (&route.sink, route.tag) {
            (None, None) => None,
            _ => Some(self.inner.routes.hold().await),
        };
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|_| CallError::NotSent)?;
        // rmcp hands each notification to a task of its own, so a report
        // the server wrote just before its answer may be handled after it:
        // the tap counts the call's reports as they are read, and the
        // answer waits (bounded) until as many were handled. Counted from
        // before the route is released, so no report is handled uncounted.
        let watched = route_sink
            .then(|| serde_json::to_string(&handle.progress_token).ok())
            .flatten()
            .map(|token| Watched::start(self.inner.tap.clone(), token));
        let awaited = Awaited {
            tap: Some(self.inner.tap.clone()),
            id: handle.id.clone(),
        };
        let _route = routes.as_mut().map(|routes| {
            routes.insert(handle.progress_token.clone(), route);
            Route {
                routes: self.inner.routes.clone(),
                token: handle.progress_token.clone(),
            }
        });
        drop(routes);
        let token = handle.progress_token.clone();
        let mut cancel = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
            reason: call.cancel_reason,
        };
        let response = handle.await_response().await;
        cancel.id = None;
        if let Some(watched) = watched {
            let seen = watched.take();
            self.inner.routes.settled(&token, seen).await;
        }
        match response {
            Ok(typed) => {
                let raw = match awaited.take() {
                    Some(raw) => raw,
                    None => raw_of(&typed).map_err(CallError::Unexpected)?,
                };
                if raw.get().trim_start().starts_with('{') {
                    Ok(raw)
                } else {
                    Err(CallError::Unexpected(
                        "the MCP server answered tools/call with something other than a CallToolResult"
                            .into(),
                    ))
                }
            }
            Err(ServiceError::McpError(error)) => Err(CallError::Answered(error_object(error))),
            Err(ServiceError::Timeout { timeout }) => Err(CallError::TimedOut(timeout)),
            Err(error @ ServiceError::TransportClosed) => Err(CallError::Closed(error.to_string())),
            Err(error) => Err(CallError::Lost(error.to_string())),
        }
    }
}

/// A typed result as MCP's JSON again (a connection without a wire tap).
pub(crate) fn raw_of(result: &ServerResult) -> Result<Box<RawValue>, String> {
    serde_json::value::to_raw_value(result)
        .map_err(|error| format!("cannot encode the MCP server's result: {error}"))
}

/// rmcp's error answer as a JSON-RPC error object, `data` kept.
pub(crate) fn error_object(error: rmcp::model::ErrorData) -> ErrorObject {
    let mut object = ErrorObject {
        code: i64::from(error.code.0),
        message: error.message.into_owned(),
        data: None,
    };
    if let Some(data) = error.data {
        object = object.with_data(&data);
    }
    object
}

/// Tells the server a call is no longer wanted, if the call's future is
/// dropped before its answer.
pub(crate) struct CancelOnDrop {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) id: Option<RequestId>,
    pub(crate) reason: &'static str,
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
