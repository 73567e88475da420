//! Failures as MCP answers (the tables are in `docs/tool-calls.md`).
//!
//! For a tool call only an unknown tool is a JSON-RPC error; everything
//! else becomes a `CallToolResult` with `isError: true` and the reason in
//! its text, because MCP clients show a tool result to the model but often
//! hide protocol errors behind a generic message. The other methods have no
//! such result: their failures are JSON-RPC errors, the provider's own
//! passed on as it sent them. Asking the provider for a fresh listing after
//! a stale answer is the consumer layer's job, not this file's.

use rmcp::model::{CallToolResult, ContentBlock, ErrorCode as McpCode, ErrorData};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchboard_client::{ErrorKind, RpcError};
use switchboard_protocol::tool_call::error_codes;
use switchboard_tools::consumer::{CallError, ExposedTool, SurfaceError};

/// A tool result saying what went wrong: `[reason] message`.
pub(crate) fn tool_error(reason: &str, message: &str) -> Value {
    let result = CallToolResult::error(vec![ContentBlock::text(format!("[{reason}] {message}"))]);
    serde_json::to_value(result).unwrap_or_else(|_| json!({"content": [], "isError": true}))
}

/// JSON-RPC `-32602` with `data.code = "unknown_tool"`.
pub(crate) fn unknown_tool(message: &str) -> ErrorData {
    ErrorData::invalid_params(
        message.to_owned(),
        Some(json!({"code": error_codes::UNKNOWN_TOOL})),
    )
}

/// A tool call's answer as MCP's: the provider's result (a
/// `CallToolResult`, or with a task a `CreateTaskResult`) untouched, or
/// what went wrong.
pub(crate) fn answer_to_mcp(
    tool: &ExposedTool,
    answer: Result<Box<RawValue>, CallError>,
) -> Result<Value, ErrorData> {
    let error = match answer {
        Ok(raw) => {
            let result = is_call_tool_result(raw.get())
                .then(|| serde_json::from_str::<Value>(raw.get()).ok())
                .flatten();
            return Ok(result.unwrap_or_else(|| {
                tool_error(
                    "malformed_result",
                    &format!(
                        "the provider of {:?} answered with something that is not a CallToolResult",
                        tool.namespace
                    ),
                )
            }));
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
        (kind, None) => hub_reason(&kind).unwrap_or_else(|| format!("error {}", rpc.code)),
    };
    Ok(tool_error(&reason, &rpc.message))
}

/// Whether a provider's answer to `tools/call` is one to pass on: a
/// `CreateTaskResult` (a `task` object), or a `CallToolResult` as rmcp
/// reads one (an object with at least one of `content`, `structuredContent`
/// and `isError`; `content` an array of blocks whose `type` MCP defines,
/// `isError` a boolean, `resultType`, if any, `"complete"`). The blocks'
/// own members are the client's to read: checking them would cost a full
/// decode of every result, and a provider's result comes from an MCP
/// server's answer as it sent it.
pub(crate) fn is_call_tool_result(raw: &str) -> bool {
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(rename = "type", borrow)]
        kind: &'a str,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Shape<'a> {
        #[serde(default, borrow)]
        task: Option<&'a RawValue>,
        #[serde(default, borrow)]
        content: Option<Vec<Block<'a>>>,
        #[serde(default, borrow, deserialize_with = "present")]
        structured_content: Option<&'a RawValue>,
        #[serde(default)]
        is_error: Option<bool>,
        #[serde(default, borrow)]
        result_type: Option<&'a str>,
    }
    /// `null` counts as present, as rmcp counts it.
    fn present<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<&'de RawValue>, D::Error> {
        <&RawValue>::deserialize(deserializer).map(Some)
    }
    const BLOCK_TYPES: [&str; 5] = ["text", "image", "audio", "resource", "resource_link"];
    let Ok(shape) = serde_json::from_str::<Shape<'_>>(raw) else {
        return false;
    };
    if shape.task.is_some_and(|task| task.get().starts_with('{')) {
        return true;
    }
    let blocks_known = shape
        .content
        .as_ref()
        .is_none_or(|blocks| blocks.iter().all(|block| BLOCK_TYPES.contains(&block.kind)));
    let any_member =
        shape.content.is_some() || shape.structured_content.is_some() || shape.is_error.is_some();
    blocks_known && any_member && shape.result_type.is_none_or(|kind| kind == "complete")
}

/// A result as a client before 2026-07-28 reads it: 2026-07-28's
/// `resultType: "complete"` left out (both the fast path and rmcp's).
pub(crate) fn without_complete_result_type(result: &mut Value) {
    if let Some(object) = result.as_object_mut() {
        if object.get("resultType").and_then(Value::as_str) == Some("complete") {
            object.remove("resultType");
        }
    }
}

/// The reason word of a hub error of `kind`, if it is one.
fn hub_reason(kind: &ErrorKind) -> Option<String> {
    Some(
        match kind {
            ErrorKind::NotFound | ErrorKind::ServiceGone { .. } => "provider_gone",
            ErrorKind::Timeout { .. } => "timeout",
            ErrorKind::LimitExceeded { .. } => "limit_exceeded",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::Cancelled => "cancelled",
            _ => return None,
        }
        .to_owned(),
    )
}

/// A failure of the other methods as a JSON-RPC error: the provider's own
/// error passed on; the hub's and the gateway's as `-32603` with
/// `data.code` naming the reason.
pub(crate) fn surface_error(error: SurfaceError) -> ErrorData {
    match error {
        SurfaceError::UnknownResource(uri) => ErrorData::resource_not_found(
            format!("no provider serves the resource {uri:?}"),
            Some(json!({"uri": uri})),
        ),
        SurfaceError::UnknownPrompt(name) => ErrorData::invalid_params(
            format!("unknown prompt {name:?}"),
            Some(json!({"code": "unknown_prompt"})),
        ),
        SurfaceError::UnknownTask(task) => ErrorData::invalid_params(
            format!("unknown task {task:?}"),
            Some(json!({"code": "unknown_task"})),
        ),
        SurfaceError::InvalidParams(message) => ErrorData::invalid_params(message, None),
        SurfaceError::Call(CallError::Answered(rpc)) => answered(rpc),
        SurfaceError::Call(CallError::NotConnected) => internal(
            "hub_unavailable",
            "the gateway is not connected to the hub (it is reconnecting)".into(),
        ),
        SurfaceError::Call(CallError::ConnectionLost) => internal(
            "hub_unavailable",
            "the gateway lost its connection to the hub (it is reconnecting)".into(),
        ),
        SurfaceError::Call(CallError::TimedOut(wait)) => {
            internal("timeout", format!("no answer within {wait:?}"))
        }
        SurfaceError::Call(CallError::Failed(message)) => internal("hub_error", message),
    }
}

fn internal(reason: &str, message: String) -> ErrorData {
    ErrorData::internal_error(message, Some(json!({"code": reason})))
}

/// An error answer: the hub's own (its codes mean nothing to an MCP
/// client) as `-32603` with its reason; a provider's as it sent it.
fn answered(rpc: RpcError) -> ErrorData {
    if let Some(reason) = hub_reason(&rpc.kind()) {
        return internal(&reason, rpc.message);
    }
    let data = rpc.data();
    let code = i32::try_from(rpc.code).unwrap_or(McpCode::INTERNAL_ERROR.0);
    ErrorData::new(McpCode(code), rpc.message, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_client_is_not_shown_a_complete_result_type() {
        let mut complete = json!({"content": [], "resultType": "complete"});
        without_complete_result_type(&mut complete);
        assert_eq!(complete, json!({"content": []}));
        // Any other kind stays: the shape check turns it into an error.
        let mut other = json!({"content": [], "resultType": "input_required"});
        without_complete_result_type(&mut other);
        assert_eq!(other["resultType"], "input_required");
    }

    /// The shallow check agrees with rmcp's full decode on the shapes that
    /// matter, and passes a task's answer.
    #[test]
    fn a_call_tool_result_is_what_rmcp_would_read_as_one() {
        let cases = [
            r#"{"content":[{"type":"text","text":"hi"}]}"#,
            r#"{"content":[],"isError":true}"#,
            r#"{"structuredContent":{"a":1}}"#,
            r#"{"structuredContent":null}"#,
            r#"{"isError":false,"_meta":{"x":1}}"#,
            r#"{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}],"resultType":"complete"}"#,
            r#"{"content":[{"type":"resource_link","uri":"a:b","name":"b"}]}"#,
            r#"{}"#,
            r#"{"_meta":{}}"#,
            r#"{"content":[{"type":"video"}]}"#,
            r#"{"content":"text"}"#,
            r#"{"isError":"yes"}"#,
            r#"{"content":[],"resultType":"input_required"}"#,
            r#"[]"#,
            r#""text""#,
        ];
        for case in cases {
            let rmcp = serde_json::from_str::<CallToolResult>(case).is_ok();
            assert_eq!(is_call_tool_result(case), rmcp, "{case}");
        }
        assert!(is_call_tool_result(
            r#"{"task":{"taskId":"t","status":"working"}}"#
        ));
    }
}
