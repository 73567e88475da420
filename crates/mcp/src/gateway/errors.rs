//! Hub and provider errors as MCP answers (the table is in
//! `docs/tool-calls.md`).
//!
//! Only an unknown tool is a JSON-RPC error; everything else becomes a
//! `CallToolResult` with `isError: true` and the reason in its text, because
//! MCP clients show a tool result to the model but often hide protocol
//! errors behind a generic message.

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, ErrorData};
use serde_json::json;
use serde_json::value::RawValue;
use switchboard_client::{Error, ErrorKind};

use super::index::ExposedTool;
use super::Gateway;

/// A tool result saying what went wrong: `[reason] message`.
pub(crate) fn tool_error(reason: &str, message: &str) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(format!(
        "[{reason}] {message}"
    ))]))
}

pub(crate) fn answer_to_mcp(
    gateway: &Gateway,
    entry: &ExposedTool,
    answer: Result<Box<RawValue>, Error>,
) -> Result<CallToolResponse, ErrorData> {
    let error = match answer {
        Ok(raw) => {
            return Ok(match serde_json::from_str::<CallToolResult>(raw.get()) {
                Ok(result) => CallToolResponse::Complete(result),
                Err(error) => tool_error(
                    "malformed_result",
                    &format!("the provider of {:?} answered with something that is not a CallToolResult: {error}", entry.namespace),
                ),
            })
        }
        Err(error) => error,
    };
    let rpc = match error {
        Error::Rpc(rpc) => rpc,
        Error::Closed => {
            return Ok(tool_error(
                "hub_unavailable",
                "the gateway lost its connection to the hub (it is reconnecting); the call may or may not have run",
            ))
        }
        Error::LocalTimeout(wait) => {
            return Ok(tool_error(
                "timeout",
                &format!("no answer within {wait:?}; the call may or may not have run"),
            ))
        }
        other => return Ok(tool_error("hub_error", &other.to_string())),
    };
    let code = rpc
        .data()
        .and_then(|data| data["code"].as_str().map(str::to_owned));
    let reason = match (rpc.kind(), code.as_deref()) {
        (_, Some("unknown_tool")) => {
            gateway.refresh(&entry.service_id);
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {}", rpc.message),
                Some(json!({"code": "unknown_tool"})),
            ));
        }
        (_, Some("tool_schema_changed")) => {
            gateway.refresh(&entry.service_id);
            return Ok(tool_error(
                "tool_schema_changed",
                "the tool's input schema changed since it was listed, so it did not run; list the tools again and retry",
            ));
        }
        (_, Some(code)) => code.to_owned(),
        (ErrorKind::NotFound | ErrorKind::ServiceGone { .. }, None) => {
            gateway.refresh(&entry.service_id);
            return Ok(tool_error(
                "provider_gone",
                &format!(
                    "the provider of namespace {:?} is gone ({}); the call may or may not have run",
                    entry.namespace, rpc.message
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
