//! What a provider declares (a [`ToolSpec`] and a [`ToolHandler`]) and what
//! a handler receives and returns.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use switchboard_protocol::tool_call::ClientRef;
use switchboard_protocol::{CallOrigin, ErrorObject, Principal};
use tokio_util::sync::CancellationToken;

use crate::progress::Progress;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A tool's declaration: what `tools/list` shows, plus its semantics number.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The bare name (no namespace): printable ASCII without space, 1 to 128 bytes.
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// A JSON Schema object the arguments must match.
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    /// MCP tool annotations (`readOnlyHint`, `destructiveHint`, …).
    pub annotations: Option<Map<String, Value>>,
    /// Bumped by the provider when behaviour changes without a schema change;
    /// the last part of the tool's `schemaPin`.
    pub semantics: u64,
    /// Other MCP members `tools/list` shows as they are (`execution`,
    /// `icons`, `_meta`, ...); the members above win over one of the same
    /// name here.
    pub extra: Map<String, Value>,
}

impl ToolSpec {
    pub fn new(name: impl Into<String>, input_schema: Value) -> Self {
        ToolSpec {
            name: name.into(),
            title: None,
            description: None,
            input_schema,
            output_schema: None,
            annotations: None,
            semantics: 0,
            extra: Map::new(),
        }
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    pub fn semantics(mut self, semantics: u64) -> Self {
        self.semantics = semantics;
        self
    }

    /// Sets one annotation, e.g. `("readOnlyHint", true)`.
    pub fn annotation(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.annotations
            .get_or_insert_with(Map::new)
            .insert(key.to_owned(), value.into());
        self
    }

    /// `readOnlyHint`: the tool does not modify its environment.
    pub fn read_only(self, read_only: bool) -> Self {
        self.annotation("readOnlyHint", read_only)
    }

    /// `destructiveHint`: the tool may perform destructive updates.
    pub fn destructive(self, destructive: bool) -> Self {
        self.annotation("destructiveHint", destructive)
    }

    /// `idempotentHint`: repeating a call with the same arguments has no further effect.
    pub fn idempotent(self, idempotent: bool) -> Self {
        self.annotation("idempotentHint", idempotent)
    }

    /// `openWorldHint`: the tool interacts with an open world of external entities.
    pub fn open_world(self, open_world: bool) -> Self {
        self.annotation("openWorldHint", open_world)
    }

    /// Another MCP member of the tool's listing, e.g. `("execution",
    /// {"taskSupport": "optional"})`.
    pub fn member(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }
}

/// An MCP `CallToolResult`: `{content: [...], structuredContent?, isError?}`.
///
/// Kept as raw JSON so a provider that relays another server's result (as
/// `provide-mcp` does) passes it through unchanged.
#[derive(Debug, Clone)]
pub struct ToolResult(Box<RawValue>);

impl ToolResult {
    /// One text content block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_json(&json!({"content": [{"type": "text", "text": text.into()}]}))
    }

    /// One text content block with `isError: true`: the tool ran and failed
    /// in a way the model should read.
    pub fn error_text(text: impl Into<String>) -> Self {
        Self::from_json(&json!({
            "content": [{"type": "text", "text": text.into()}],
            "isError": true,
        }))
    }

    /// Structured content with its JSON text as the content block.
    pub fn structured(value: Value) -> Self {
        Self::from_json(&json!({
            "content": [{"type": "text", "text": value.to_string()}],
            "structuredContent": value,
        }))
    }

    /// A whole `CallToolResult` object.
    pub fn from_value(value: Value) -> Result<Self, ToolError> {
        if !value.is_object() {
            return Err(ToolError::Failed(ErrorObject::new(
                switchboard_protocol::ErrorCode::InternalError,
                "a tool result must be a JSON object (an MCP CallToolResult)",
            )));
        }
        Ok(Self::from_json(&value))
    }

    /// A whole `CallToolResult` object as JSON text, kept as it is (a
    /// relayed server's result: no decode and encode again).
    pub fn from_raw(raw: Box<RawValue>) -> Result<Self, ToolError> {
        if !raw.get().trim_start().starts_with('{') {
            return Err(ToolError::Failed(ErrorObject::new(
                switchboard_protocol::ErrorCode::InternalError,
                "a tool result must be a JSON object (an MCP CallToolResult)",
            )));
        }
        Ok(ToolResult(raw))
    }

    fn from_json(value: &Value) -> Self {
        // A `Value` always serializes.
        ToolResult(
            serde_json::value::to_raw_value(value)
                .unwrap_or_else(|_| RawValue::from_string("{}".into()).expect("{} is JSON")),
        )
    }

    pub fn raw(&self) -> &RawValue {
        &self.0
    }

    pub fn into_raw(self) -> Box<RawValue> {
        self.0
    }

    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }
}

/// How a tool call failed, which decides what the fence records for a call
/// with a `call_key`.
#[derive(Debug, Clone)]
pub enum ToolError {
    /// The tool ran (or started) and failed with this JSON-RPC error. Recorded:
    /// a repeat of the key gets the same error.
    Failed(ErrorObject),
    /// Nothing ran (e.g. the backend is restarting). Not recorded: the same
    /// key may be sent again and then runs.
    NotRun(ErrorObject),
    /// The tool may or may not have taken effect (its backend died mid-call,
    /// or it was cancelled). Recorded as `outcome_unknown`, never rerun.
    OutcomeUnknown(String),
}

/// One `tools/call`, as the handler sees it.
#[derive(Debug)]
pub struct ToolCall {
    /// The bare tool name.
    pub tool: String,
    /// Already checked against the tool's `inputSchema`.
    pub arguments: Value,
    /// The caller's `tool_call_id`, or a fallback this SDK made up (then
    /// `tool_call_id_is_fallback` is set, and the fallback was counted).
    pub tool_call_id: String,
    pub tool_call_id_is_fallback: bool,
    pub call_key: Option<String>,
    /// Attribution only: never a reason to allow or refuse anything.
    pub origin: Option<CallOrigin>,
    /// The authority, stamped by the hub.
    pub sender_principal: Principal,
    pub sender_client_id: String,
    /// Reports progress to the caller when it asked for it (to its callback
    /// service when the call names one, else to its progress sink).
    pub progress: Progress,
    /// Version 2: the caller's callback service and what its MCP client
    /// declared; `None`: the caller takes no requests back.
    pub client: Option<ClientRef>,
    /// Version 2: MCP's `task` member; the handler answers with MCP's
    /// `CreateTaskResult` (`{task}`), which the fence keeps as the call's
    /// result.
    pub task: Option<Value>,
    /// Cancelled when the caller cancels, times out or leaves. A handler that
    /// watches it can stop early; the SDK waits a bounded grace period after
    /// cancellation, then records the outcome as unknown.
    pub cancelled: CancellationToken,
}

/// Runs one tool.
pub trait ToolHandler: Send + Sync + 'static {
    fn call(&self, call: ToolCall) -> BoxFuture<Result<ToolResult, ToolError>>;
}

/// A handler from an async closure.
pub struct FnToolHandler<F>(F);

pub fn tool_fn<F, Fut>(handler: F) -> Arc<dyn ToolHandler>
where
    F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    Arc::new(FnToolHandler(handler))
}

impl<F, Fut> ToolHandler for FnToolHandler<F>
where
    F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    fn call(&self, call: ToolCall) -> BoxFuture<Result<ToolResult, ToolError>> {
        Box::pin((self.0)(call))
    }
}
