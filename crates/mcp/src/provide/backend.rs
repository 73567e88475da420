//! The child MCP server as the provider's tools: each hub call relayed to
//! its current connection, with the caller's progress, cancellation and
//! `task`, and registered among the calls in flight while it runs, so that
//! what the server asks during it reaches the caller (`calls.rs`).

use std::sync::Arc;

use switchboard_mcp_client::{CallError, Connection, HandlerFuture, ProgressSink, ProgressUpdate};
use switchboard_protocol::{ErrorCode, ErrorObject};
use switchboard_tools::errors::tool_unavailable;
use switchboard_tools::{BoxFuture, Progress, ToolCall, ToolError, ToolHandler, ToolResult};

use super::calls::CallEntry;
use super::relay::Relay;

/// Every tool of the child is served by this one handler.
pub(crate) struct RelayHandler {
    relay: Arc<Relay>,
}

impl RelayHandler {
    pub(crate) fn new(relay: Arc<Relay>) -> Self {
        RelayHandler { relay }
    }
}

/// The answer to a call the server never got: it is not running.
fn unavailable(namespace: &str) -> ToolError {
    ToolError::NotRun(tool_unavailable(format!(
        "the MCP server of namespace {namespace:?} is not running (it exited and is being restarted); nothing ran"
    )))
}

impl ToolHandler for RelayHandler {
    fn call(&self, call: ToolCall) -> BoxFuture<Result<ToolResult, ToolError>> {
        match self.relay.connection() {
            Some(connection) => Box::pin(relay(self.relay.clone(), connection, call)),
            None => Box::pin(std::future::ready(Err(unavailable(&self.relay.namespace)))),
        }
    }
}

async fn relay(
    relay: Arc<Relay>,
    connection: Connection,
    call: ToolCall,
) -> Result<ToolResult, ToolError> {
    let in_flight = relay.calls.begin(CallEntry {
        client: call.client.clone(),
        tool_call_id: call.tool_call_id.clone(),
        ended: Some(call.cancelled.clone()),
    });
    let mut request = switchboard_mcp_client::ToolCall::new(call.tool, call.arguments);
    // Every call carries a progress token of its own (rmcp's), and the tag
    // that token stands for: what the server asks naming it is this call's.
    request.tag = Some(in_flight.tag);
    request.task = call.task;
    let asks_task = request.task.is_some();
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
    let result = match answer {
        Ok(result) => ToolResult::from_raw(result)?,
        Err(error @ CallError::NotAnObject(_)) => {
            return Err(ToolError::Failed(ErrorObject::new(
                ErrorCode::InvalidParams,
                error.to_string(),
            )))
        }
        // Never sent: the child is gone.
        Err(CallError::NotSent) => return Err(unavailable(&relay.namespace)),
        // Never sent: the child has not read what it was sent before.
        Err(error @ CallError::Backlogged) => {
            return Err(ToolError::NotRun(tool_unavailable(error.to_string())))
        }
        Err(CallError::Answered(error)) => return Err(ToolError::Failed(error)),
        Err(CallError::Unexpected(message)) => return Err(failed(message)),
        Err(error) => return Err(ToolError::OutcomeUnknown(error.to_string())),
    };
    if asks_task {
        if let Some(task_id) = result.to_value()["task"]["taskId"].as_str() {
            relay.calls.remember_task(task_id, &in_flight.entry);
        }
    }
    Ok(result)
}

fn failed(message: String) -> ToolError {
    ToolError::Failed(ErrorObject::new(ErrorCode::InternalError, message))
}

/// The child's progress for one call, to the hub caller (its callback
/// service, or for a version-1 caller its progress sink).
struct ProgressRelay(Progress);

impl ProgressSink for ProgressRelay {
    fn report(&self, update: ProgressUpdate) -> HandlerFuture<'_, ()> {
        Box::pin(self.0.report(update.progress, update.total, update.message))
    }
}
