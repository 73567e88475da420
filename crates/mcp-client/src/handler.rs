//! What the caller answers a server's own requests with, and hears of its
//! notifications. Parameters and results are MCP's JSON, as the server sent
//! them (`_meta` included), so no caller names an rmcp type.
//!
//! Every method has a default: what a client that offers none of these
//! features answers (the answers rmcp gives on its own). A feature a caller
//! implements is one it declares at `initialize`
//! ([`Handler::capabilities`]); the default declares none.
//!
//! Progress is not here: it belongs to one call and goes to that call's
//! [`ProgressSink`](crate::ProgressSink).

use std::future::{ready, Future};
use std::pin::Pin;

use serde_json::{json, Value};
use switchboard_protocol::{ErrorCode, ErrorObject};
use tokio_util::sync::CancellationToken;

/// A boxed future, `Send`, borrowing from the handler.
pub type HandlerFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a caller calls one of its calls ([`ToolCall::tag`](crate::ToolCall)),
/// so that a server's request naming that call's progress token can be told
/// apart from another's.
pub type CallTag = u64;

/// The lists a server says have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Resources,
    Prompts,
}

/// One request of the server to its client.
#[derive(Debug, Clone)]
pub struct ServerRequest {
    /// `sampling/createMessage`, `elicitation/create` or `roots/list`.
    pub method: String,
    /// As the server sent them (`{}` when it sent none).
    pub params: Value,
    /// The call in flight on this connection whose progress token the
    /// request's `_meta.progressToken` carries, if any.
    pub call: Option<CallTag>,
    /// Cancelled when the server cancels the request or the connection ends.
    pub cancelled: CancellationToken,
}

/// One notification of the server that is not about progress or a list.
#[derive(Debug, Clone)]
pub struct ServerNotification {
    /// `notifications/message` or `notifications/resources/updated`.
    pub method: String,
    /// As the server sent them.
    pub params: Value,
    /// The call in flight whose progress token `_meta.progressToken`
    /// carries, if any.
    pub call: Option<CallTag>,
}

/// The caller's side of a connection's server-to-client traffic. One handler
/// serves every connection a [`Supervised`](crate::Supervised) server
/// makes. Requests run on a task each; notification methods run on the
/// connection's tasks, so they must not wait.
pub trait Handler: Send + Sync + 'static {
    /// The `ClientCapabilities` declared at `initialize` (MCP's JSON:
    /// `{"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots":
    /// {"listChanged": true}}`). The default declares nothing.
    fn capabilities(&self) -> Value {
        json!({})
    }

    /// `sampling/createMessage`: the answer is a `CreateMessageResult`.
    fn create_message(
        &self,
        request: ServerRequest,
    ) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        let _ = request;
        Box::pin(ready(Err(not_supported("sampling/createMessage"))))
    }

    /// `elicitation/create`: the answer is an `ElicitResult`.
    fn elicit(&self, request: ServerRequest) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        let _ = request;
        Box::pin(ready(Ok(json!({"action": "decline"}))))
    }

    /// `roots/list`: the answer is a `ListRootsResult`.
    fn list_roots(&self, request: ServerRequest) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        let _ = request;
        Box::pin(ready(Ok(json!({"roots": []}))))
    }

    /// `notifications/message` (the server's log).
    fn on_logging_message(&self, notification: ServerNotification) {
        let _ = notification;
    }

    /// `notifications/resources/updated`.
    fn on_resource_updated(&self, notification: ServerNotification) {
        let _ = notification;
    }

    /// `notifications/{tools,resources,prompts}/list_changed`. (A
    /// [`Supervised`](crate::Supervised) server lists its tools again on
    /// its own; this is for whoever wants to know besides.)
    fn on_list_changed(&self, list: ListKind) {
        let _ = list;
    }
}

/// The default answers to everything.
impl Handler for () {}

/// `-32601` naming `method`, as rmcp words it.
fn not_supported(method: &str) -> ErrorObject {
    ErrorObject::new(ErrorCode::MethodNotFound, method)
}
