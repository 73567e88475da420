//! Call failures as MCP answers (the table is in `docs/tool-calls.md`).
//!
//! Only an unknown tool is a JSON-RPC error; everything else becomes a
//! `CallToolResult` with `isError: true` and the reason in its text, because
//! MCP clients show a tool result to the model but often hide protocol
//! errors behind a generic message. Asking the provider for a fresh listing
//! after a stale answer is the consumer layer's job, not this file's.

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, ErrorData};
use serde_json::json;
use serde_json::value::RawValue;
use switchboard_client::ErrorKind;
use switchboard_protocol::tool_call::error_codes;
use switchboard_tools::consumer::{CallError, ExposedTool};

/// A tool result saying what went wrong: `[reason] message`.
pub(crate) fn tool_error(reason: &str, message: &str) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(format!(
        "[{reason}] {message}"
    ))]))
}

/// JSON-RPC `-32602` with `data.code = "unknown_tool"`.
pub(crate) fn unknown_tool(message: &str) -> ErrorData {
    ErrorData::invalid_params(
        message.to_owned(),
        Some(json!({"code": error_codes::UNKNOWN_TOOL})),
    )
}

pub(crate) fn answer_to_mcp(
    tool: &ExposedTool,
    answer: Result<Box<RawValue>, CallError>,
) -> Result<CallToolResponse, ErrorData> {
    let error = match answer {
        Ok(raw) => {
            return Ok(match serde_json::from_str::<CallToolResult>(raw.get()) {
                Ok(result) => CallToolResponse::Complete(result),
                Err(error) => tool_error(
                    "malformed_result",
                    &format!("the provider of {:?} answered with something that is not a CallToolResult: {error}", tool.namespace),
                ),
            })
        }
        Err(error) => error,
    };
    let code = error.code();
    let rpc = match error {
        CallError::Answered(rpc) => rpc,
        CallError::NotConnected => {
            return Ok(tool_error(
                "hub_unavailable",
                "the gateway is not connected to the hub (it is reconnecting); nothing ran",
            ))
        }
        CallError::ConnectionLost => {
            return Ok(tool_error(
                "hub_unavailable",
                "the gateway lost its connection to the hub (it is reconnecting); the call may or may not have run",
            ))
        }
        CallError::TimedOut(wait) => {
            return Ok(tool_error(
                "timeout",
                &format!("no answer within {wait:?}; the call may or may not have run"),
            ))
        }
        CallError::Failed(message) => return Ok(tool_error("hub_error", &message)),
    };
    let reason = match (rpc.kind(), code.as_deref()) {
        (_, Some(error_codes::UNKNOWN_TOOL)) => {
            tracing::debug!(tool = %tool.name, "the provider does not know a listed tool");
            return Err(unknown_tool(&format!("unknown tool: {}", rpc.message)));
        }
        (_, Some(error_codes::TOOL_SCHEMA_CHANGED)) => {
            return Ok(tool_error(
                error_codes::TOOL_SCHEMA_CHANGED,
                "the tool's input schema changed since it was listed, so it did not run; list the tools again and retry",
            ));
        }
        (_, Some(code)) => code.to_owned(),
        (ErrorKind::NotFound | ErrorKind::ServiceGone { .. }, None) => {
            return Ok(tool_error(
                "provider_gone",
                &format!(
                    "the provider of namespace {:?} is gone ({}); the call may or may not have run",
                    tool.namespace, rpc.message
                ),
            ));
        }
        (ErrorKind::Timeout { .. }, None) => "timeout".to_owned(),
        (ErrorKind::LimitExceeded { .. }, None) => "limit_exceeded".to_owned(),
        (ErrorKind::PermissionDenied, None) => "permission_denied".to_owned(),
        (ErrorKind::Cancelled, None) => "cancelled".to_owned(),
        (_, None) => format!("error {}", rpc.code),
    };
    Ok(tool_error(&reason, &rpc.message))
}
