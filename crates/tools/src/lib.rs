//! Tool providers for Switchboard: the SDK side of
//! `docs/reference/tool-calls.md`.
//!
//! ```no_run
//! # async fn demo(client: switchboard_client::Client) -> Result<(), switchboard_tools::ToolsError> {
//! use serde_json::json;
//! use switchboard_tools::{tool_fn, Provider, ToolResult, ToolSpec};
//!
//! let echo = ToolSpec::new("echo", json!({
//!     "type": "object",
//!     "properties": {"text": {"type": "string"}},
//!     "required": ["text"],
//! }))
//! .description("Repeats the text")
//! .read_only(true);
//! let provider = Provider::builder("demo")
//!     .ledger_path("/tmp/demo-ledger.sqlite")
//!     .tool(echo, tool_fn(|call| async move {
//!         Ok(ToolResult::text(call.arguments["text"].as_str().unwrap_or_default()))
//!     }))
//!     .register(&client)
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! - [`Provider`]: registers the `tool-provider` service, serves `tools/list`
//!   and `tools/call`, changes its tools at run time (bumping `toolsRevision`);
//!   with a [`SurfaceHandler`], version 2: the MCP server's capabilities and
//!   list revisions in its metadata, the rest of its surface served
//!   ([`surface`]);
//! - [`ToolSpec`] / [`ToolHandler`] / [`tool_fn`]: declare and run tools;
//! - [`pin`]: schema pins (`tp1:<tool>:<sha256>:<semantics>`);
//! - [`ledger`]: the durable at-most-once fence on `(senderPrincipal, call_key)`;
//! - [`progress`]: progress back to the caller's progress sink;
//! - [`keep_connected`]: reconnect with backoff when the hub goes away;
//! - [`consumer`]: the other side: follow the catalog for tool providers,
//!   name their tools, call them (the MCP gateway and the ACP front).

mod call;
pub mod consumer;
pub mod errors;
pub mod ledger;
pub mod pin;
pub mod progress;
mod provider;
mod reconnect;
pub mod surface;
mod tool;
mod toolset;

pub use ledger::{LedgerCounts, LedgerError, Retention, TaskOwner};
pub use progress::Progress;
pub use provider::{
    validate_namespace, ListRevision, Provider, ProviderBuilder, ProviderStats,
    DEFAULT_CANCEL_GRACE, DEFAULT_DUPLICATE_WAIT, MAX_NAMESPACE_BYTES,
};
pub use reconnect::{keep_connected, retry_with_backoff};
pub use surface::{SurfaceHandler, SurfaceNotification, SurfaceRequest};
pub use tool::{tool_fn, BoxFuture, ToolCall, ToolError, ToolHandler, ToolResult, ToolSpec};
pub use toolset::{check_tool_spec, validate_tool_name, MAX_TOOL_NAME_BYTES};

/// What can go wrong declaring or registering tools.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    #[error("tool name {name:?} is invalid: {reason}")]
    InvalidToolName { name: String, reason: String },
    #[error("namespace {namespace:?} is invalid: {reason}")]
    InvalidNamespace { namespace: String, reason: String },
    #[error("two tools are named {0:?}")]
    DuplicateTool(String),
    #[error("the input schema of tool {tool:?} is invalid: {message}")]
    InvalidSchema { tool: String, message: String },
    #[error("a tool provider needs a ledger path (ProviderBuilder::ledger_path)")]
    NoLedger,
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Hub(#[from] switchboard_client::Error),
}
