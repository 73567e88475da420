//! The child MCP server as the provider's tools: each hub call relayed to
//! its current connection, with the caller's progress and cancellation.

use std::sync::Arc;

use serde_json::Value;
use switchboard_mcp_client::{
    CallError, Connection, HandlerFuture, ProgressSink, ProgressUpdate, Supervised,
};
use switchboard_protocol::{ErrorCode, ErrorObject};
use switchboard_tools::errors::tool_unavailable;
use switchboard_tools::{BoxFuture, Progress, ToolCall, ToolError, ToolHandler, ToolResult};

/// Every tool of the child is served by this one handler.
pub(crate) struct RelayHandler {
    namespace: String,
    server: Supervised,
}

impl RelayHandler {
    pub(crate) fn new(namespace: &str, server: Supervised) -> Self {
        RelayHandler {
            namespace: namespace.to_owned(),
            server,
        }
    }

    fn unavailable(&self) -> ToolError {
        ToolError::NotRun(tool_unavailable(format!(
            "the MCP server of namespace {:?} is not running (it exited and is being restarted); nothing ran",
            self.namespace
        )))
    }
}

impl ToolHandler for RelayHandler {
    fn call(&self, call: ToolCall) -> BoxFuture<Result<ToolResult, ToolError>> {
        let unavailable = self.unavailable();
        match self.server.connection() {
            Some(connection) => Box::pin(relay(connection, call, unavailable)),
            None => Box::pin(std::future::ready(Err(unavailable))),
        }
    }
}

async fn relay(
    connection: Connection,
    call: ToolCall,
    unavailable: ToolError,
) -> Result<ToolResult, ToolError> {
    let mut request = switchboard_mcp_client::ToolCall::new(call.tool, call.arguments);
    if call.progress.is_enabled() {
        request.progress = Some(Arc::new(ProgressRelay(call.progress)));
    }
    // Dropping the call on cancel sends the child `notifications/cancelled`.
    let answer = tokio::select! {
        answer = connection.call_tool(request) => answer,
        () = call.cancelled.cancelled() => {
            return Err(ToolError::OutcomeUnknown(
                "cancelled by the caller; the MCP server was told to stop".into(),
            ))
        }
    };
    match answer {
        Ok(result) => serde_json::from_str::<Value>(result.get())
            .map_err(|error| failed(format!("cannot read the MCP server's result: {error}")))
            .and_then(ToolResult::from_value),
        Err(error @ CallError::NotAnObject(_)) => Err(ToolError::Failed(ErrorObject::new(
            ErrorCode::InvalidParams,
            error.to_string(),
        ))),
        // Never sent: the child is gone.
        Err(CallError::NotSent) => Err(unavailable),
        Err(CallError::Answered(error)) => Err(ToolError::Failed(error)),
        Err(CallError::Unexpected(message)) => Err(failed(message)),
        Err(error) => Err(ToolError::OutcomeUnknown(error.to_string())),
    }
}

fn failed(message: String) -> ToolError {
    ToolError::Failed(ErrorObject::new(ErrorCode::InternalError, message))
}

/// The child's progress for one call, to the hub caller's sink.
struct ProgressRelay(Progress);

impl ProgressSink for ProgressRelay {
    fn report(&self, update: ProgressUpdate) -> HandlerFuture<'_, ()> {
        Box::pin(self.0.report(update.progress, update.total, update.message))
    }
}
