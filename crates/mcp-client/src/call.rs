//! `tools/call` on a connection: bounded, its progress routed to the
//! caller's sink, and `notifications/cancelled` sent when the caller drops
//! the call before its answer.
//!
//! On a stdio server the call goes around rmcp: its line is written into
//! the child's input queue (`input.rs`) with an id of this crate's
//! (`sb-N`, never one of rmcp's numbers), and the tap hands back the
//! answer before rmcp would read it. rmcp's typed request, its task per
//! message written and its decoding of the answer cost more than the rest
//! of a relayed call (`docs/performance.md` §8). Over HTTP, rmcp sends it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CancelledNotificationParam, ClientRequest, CustomRequest, NumberOrString, ProgressToken,
    RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use rmcp::RoleClient;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use switchboard_protocol::ErrorObject;

use crate::connection::Connection;
use crate::handler::CallTag;
use crate::input::{ChildInput, NotQueued};
use crate::progress::{CallRoute, ProgressSink, Route};
use crate::tap::{self, Awaited, DirectAnswer, Watched, WireTap};

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
    /// The server has not read what it was already sent (the input queue's
    /// bound); nothing was sent.
    #[error("the MCP server does not read its input; the call was not sent")]
    Backlogged,
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
        if let Some(input) = &self.inner.input {
            return self.call_around_rmcp(input, call).await;
        }
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
        let mut route = routes.as_mut().map(|routes| {
            routes.insert(handle.progress_token.clone(), route);
            Route {
                routes: self.inner.routes.clone(),
                token: handle.progress_token.clone(),
                linger: route_sink,
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
            let settled = self.inner.routes.settled(&token, seen).await;
            if let Some(route) = route.as_mut() {
                route.linger = !settled;
            }
        }
        match response {
            Ok(typed) => {
                let raw = match awaited.take() {
                    Some(raw) => raw,
                    None => raw_of(&typed).map_err(CallError::Unexpected)?,
                };
                object_result(raw)
            }
            Err(ServiceError::McpError(error)) => Err(CallError::Answered(error_object(error))),
            Err(ServiceError::Timeout { timeout }) => Err(CallError::TimedOut(timeout)),
            Err(error @ ServiceError::TransportClosed) => Err(CallError::Closed(error.to_string())),
            Err(error) => Err(CallError::Lost(error.to_string())),
        }
    }
}

impl Connection {
    /// `call_tool` on a stdio server, written and answered around rmcp.
    async fn call_around_rmcp(
        &self,
        input: &ChildInput,
        call: ToolCall,
    ) -> Result<Box<RawValue>, CallError> {
        let arguments = match call.arguments {
            Value::Object(arguments) => Some(arguments),
            Value::Null => None,
            other => return Err(CallError::NotAnObject(other)),
        };
        let number = self.inner.next_call.fetch_add(1, Ordering::Relaxed);
        let id_text = tap::direct_id(number);
        let id = RequestId::String(id_text.as_str().into());
        // The token is the id, as rmcp makes it: what the server reports or
        // asks naming it is this call's.
        let token = ProgressToken(NumberOrString::String(id_text.as_str().into()));
        let line = call_line(&id_text, &call.name, arguments.as_ref(), call.task.as_ref());
        let tap = &self.inner.tap;
        let wants_progress = call.progress.is_some();
        let route = (call.progress.is_some() || call.tag.is_some()).then(|| CallRoute {
            sink: call.progress,
            tag: call.tag,
            handled: 0,
        });
        // The route and the answer's slot exist before the line is written:
        // nothing the server says about the call can come before them.
        let mut route = match route {
            Some(route) => {
                self.inner.routes.hold().await.insert(token.clone(), route);
                Some(Route {
                    routes: self.inner.routes.clone(),
                    token: token.clone(),
                    linger: wants_progress,
                })
            }
            None => None,
        };
        let watched = wants_progress.then(|| Watched::start(tap.clone(), format!("\"{id_text}\"")));
        if self.is_closed() {
            return Err(CallError::NotSent);
        }
        let Some(answer) = tap.expect_direct(id.clone()) else {
            return Err(CallError::NotSent);
        };
        match input.send_line(&line) {
            Ok(()) => {}
            Err(NotQueued::Closed) => {
                tap.forget_direct(&id);
                return Err(CallError::NotSent);
            }
            Err(NotQueued::Full) => {
                tap.forget_direct(&id);
                return Err(CallError::Backlogged);
            }
        }
        let mut cancel = CancelDirect {
            input,
            tap,
            id: Some(id),
            reason: call.cancel_reason,
        };
        let answer = match call.timeout {
            Some(bound) => match tokio::time::timeout(bound, answer).await {
                Ok(answer) => answer,
                Err(_) => return Err(CallError::TimedOut(bound)),
            },
            None => answer.await,
        };
        cancel.id = None;
        if let Some(watched) = watched {
            let seen = watched.take();
            let settled = self.inner.routes.settled(&token, seen).await;
            if let Some(route) = route.as_mut() {
                route.linger = !settled;
            }
        }
        match answer {
            Ok(DirectAnswer::Result(raw)) => object_result(raw),
            Ok(DirectAnswer::Error(error)) => Err(CallError::Answered(error)),
            Ok(DirectAnswer::Unreadable(reason)) => Err(CallError::Unexpected(reason)),
            Err(_) => Err(CallError::Closed(
                "its output ended before the answer".into(),
            )),
        }
    }
}

/// A `tools/call` answer's result, if it is an object (its shape is the
/// caller's to check).
fn object_result(raw: Box<RawValue>) -> Result<Box<RawValue>, CallError> {
    if raw.get().trim_start().starts_with('{') {
        Ok(raw)
    } else {
        Err(CallError::Unexpected(
            "the MCP server answered tools/call with something other than a CallToolResult".into(),
        ))
    }
}

/// A `tools/call` request as one line, `_meta.progressToken` its id.
fn call_line(
    id: &str,
    name: &str,
    arguments: Option<&Map<String, Value>>,
    task: Option<&Value>,
) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        jsonrpc: &'static str,
        id: &'a str,
        method: &'static str,
        params: Params<'a>,
    }
    #[derive(serde::Serialize)]
    struct Params<'a> {
        name: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        arguments: Option<&'a Map<String, Value>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        task: Option<&'a Value>,
        #[serde(rename = "_meta")]
        meta: Meta<'a>,
    }
    #[derive(serde::Serialize)]
    struct Meta<'a> {
        #[serde(rename = "progressToken")]
        progress_token: &'a str,
    }
    let line = Line {
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: Params {
            name,
            arguments,
            task,
            meta: Meta { progress_token: id },
        },
    };
    let mut bytes = Vec::with_capacity(128);
    // Serializing borrowed strings and a map of JSON values cannot fail.
    let _ = serde_json::to_writer(&mut bytes, &line);
    bytes.push(b'\n');
    bytes
}

/// Tells the server a call written around rmcp is no longer wanted, if the
/// call ends (dropped, or past its timeout) before its answer.
struct CancelDirect<'a> {
    input: &'a ChildInput,
    tap: &'a Arc<WireTap>,
    id: Option<RequestId>,
    reason: &'static str,
}

impl Drop for CancelDirect<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        self.tap.forget_direct(&id);
        let note = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": self.reason},
        });
        let mut line = note.to_string().into_bytes();
        line.push(b'\n');
        // A closed or full input: the server is gone or stuck; it gets no
        // word, as it would get none through rmcp.
        let _ = self.input.send_line(&line);
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
