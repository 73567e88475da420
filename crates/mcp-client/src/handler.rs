//! What the caller answers a server's own requests with, and hears of its
//! notifications. Parameters and results are MCP's JSON shapes, so no
//! caller names an rmcp type.
//!
//! Every method has a default: what a client that offers none of these
//! features answers (the answers rmcp gives on its own). A feature a caller
//! implements is also one it must advertise at `initialize`; no caller does
//! yet, so the client's capabilities are empty.
//!
//! Progress is not here: it belongs to one call and goes to that call's
//! [`ProgressSink`](crate::ProgressSink).

use std::future::{ready, Future};
use std::pin::Pin;

use serde_json::{json, Value};
use switchboard_protocol::{ErrorCode, ErrorObject};

/// A boxed future, `Send`, borrowing from the handler.
pub type HandlerFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The lists a server says have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Resources,
    Prompts,
}

/// The caller's side of a connection's server-to-client traffic. One handler
/// serves every connection a [`Supervised`](crate::Supervised) server
/// makes; it runs on the connection's tasks, so it must not wait long.
pub trait Handler: Send + Sync + 'static {
    /// `sampling/createMessage`: `params` as sent, the answer is a
    /// `CreateMessageResult`.
    fn create_message(&self, params: Value) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        let _ = params;
        Box::pin(ready(Err(not_supported("sampling/createMessage"))))
    }

    /// `elicitation/create`: the answer is an `ElicitResult`.
    fn elicit(&self, params: Value) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        let _ = params;
        Box::pin(ready(Ok(json!({"action": "decline"}))))
    }

    /// `roots/list`: the answer is a `ListRootsResult`.
    fn list_roots(&self) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        Box::pin(ready(Ok(json!({"roots": []}))))
    }

    /// `notifications/message` (the server's log).
    fn on_logging_message(&self, params: Value) {
        let _ = params;
    }

    /// `notifications/resources/updated`.
    fn on_resource_updated(&self, params: Value) {
        let _ = params;
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
