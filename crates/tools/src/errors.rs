//! The JSON-RPC errors a provider answers `tools/call` with
//! (`docs/reference/tool-calls.md`), plus the few this SDK adds where the
//! contract is silent (documented in `docs/tool-calls.md`).

use serde_json::json;
use switchboard_protocol::tool_call::error_codes;
use switchboard_protocol::{ErrorCode, ErrorObject};

use crate::pin::PinMismatch;

/// `data.code` values this SDK adds to the contract's.
pub mod extra_codes {
    /// The arguments do not match the tool's `inputSchema`.
    pub const INVALID_ARGUMENTS: &str = "invalid_arguments";
    /// A duplicate of a call still running waited longer than its bound.
    pub const CALL_IN_PROGRESS: &str = "call_in_progress";
    /// The provider cannot run tools right now (e.g. its backend restarts);
    /// nothing ran, so the same `call_key` may be sent again.
    pub const TOOL_UNAVAILABLE: &str = "tool_unavailable";
    /// The fence ledger failed; the call did not run.
    pub const LEDGER_UNAVAILABLE: &str = "ledger_unavailable";
    /// `tasks/*` naming a task this provider did not create for the
    /// caller's principal (the contract's, section 9.2).
    pub const UNKNOWN_TASK: &str = "unknown_task";
}

pub fn unknown_tool(name: &str) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, format!("unknown tool {name:?}"))
        .with_data(&json!({"code": error_codes::UNKNOWN_TOOL, "tool": name}))
}

/// A `tools/call` body that is not a `ToolCallRequest`.
pub fn malformed_call(detail: &str) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::InvalidParams,
        format!("params of tools/call are not a ToolCallRequest: {detail}"),
    )
    .with_data(
        &json!({"code": error_codes::INVALID_REQUEST, "field": "params", "reason": "malformed"}),
    )
}

pub fn pin_mismatch(
    tool: &str,
    caller_pin: &str,
    current_pin: &str,
    mismatch: &PinMismatch,
) -> ErrorObject {
    match mismatch {
        PinMismatch::Malformed => ErrorObject::new(
            ErrorCode::InvalidParams,
            "schema_pin is not of the form tp1:<tool>:<sha256 hex>:<semantics>",
        )
        .with_data(&json!({
            "code": error_codes::INVALID_REQUEST,
            "field": "schema_pin",
            "reason": "malformed",
        })),
        PinMismatch::OtherTool { pinned_tool } => ErrorObject::new(
            ErrorCode::InvalidParams,
            format!("schema_pin names tool {pinned_tool:?}, not {tool:?}"),
        )
        .with_data(&json!({
            "code": error_codes::INVALID_REQUEST,
            "field": "schema_pin",
            "reason": "other_tool",
        })),
        PinMismatch::Changed => ErrorObject::new(
            ErrorCode::InvalidParams,
            format!("the schema of tool {tool:?} changed since the caller pinned it; the tool did not run"),
        )
        .with_data(&json!({
            "code": error_codes::TOOL_SCHEMA_CHANGED,
            "tool": tool,
            "expected": caller_pin,
            "current": current_pin,
        })),
    }
}

/// One schema violation: where in the arguments, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArgumentError {
    /// JSON Pointer into the arguments (`""` for the whole value).
    pub path: String,
    pub message: String,
}

/// At most this many violations are reported in `data.errors`.
pub const MAX_ARGUMENT_ERRORS: usize = 16;

pub fn invalid_arguments(tool: &str, errors: &[ArgumentError]) -> ErrorObject {
    let first = errors.first().map_or_else(String::new, |e| {
        if e.path.is_empty() {
            format!(": {}", e.message)
        } else {
            format!(": at {}: {}", e.path, e.message)
        }
    });
    ErrorObject::new(
        ErrorCode::InvalidParams,
        format!("arguments do not match the input schema of tool {tool:?}{first}"),
    )
    .with_data(&json!({
        "code": extra_codes::INVALID_ARGUMENTS,
        "tool": tool,
        "errors": errors,
    }))
}

pub fn call_key_reused(call_key: &str, stored_tool: &str, tool: &str) -> ErrorObject {
    let detail = if stored_tool == tool {
        format!("with other arguments to tool {tool:?}")
    } else {
        format!("for tool {stored_tool:?}, not {tool:?}")
    };
    ErrorObject::new(
        ErrorCode::InvalidParams,
        format!("call_key {call_key:?} was already used {detail}; nothing ran"),
    )
    .with_data(&json!({"code": error_codes::CALL_KEY_REUSED, "call_key": call_key}))
}

/// `-32603 outcome_unknown`: the call may or may not have taken effect, and
/// it is never run again.
pub fn outcome_unknown(call_key: Option<&str>) -> ErrorObject {
    let message = match call_key {
        Some(key) => format!(
            "the outcome of call {key:?} is unknown: it was interrupted while running and is never run again"
        ),
        None => "the outcome of the call is unknown: it was interrupted while running".to_owned(),
    };
    let data = match call_key {
        Some(key) => json!({"code": error_codes::OUTCOME_UNKNOWN, "call_key": key}),
        None => json!({"code": error_codes::OUTCOME_UNKNOWN}),
    };
    ErrorObject::new(ErrorCode::InternalError, message).with_data(&data)
}

pub fn call_in_progress(call_key: &str, waited_ms: u128) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::InternalError,
        format!(
            "call {call_key:?} is still running after waiting {waited_ms} ms for it; ask again later"
        ),
    )
    .with_data(&json!({"code": extra_codes::CALL_IN_PROGRESS, "call_key": call_key}))
}

pub fn ledger_unavailable(detail: &str) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::InternalError,
        format!("the call ledger is unavailable, so the call did not run: {detail}"),
    )
    .with_data(&json!({"code": extra_codes::LEDGER_UNAVAILABLE}))
}

/// For providers whose backend is down: nothing ran.
pub fn tool_unavailable(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::InternalError, message)
        .with_data(&json!({"code": extra_codes::TOOL_UNAVAILABLE}))
}

/// `-32602 unknown_task`: a task this provider did not create for a call of
/// the caller's principal, answered as if it did not exist.
pub fn unknown_task(task_id: &str) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::InvalidParams,
        format!("unknown task {task_id:?}"),
    )
    .with_data(&json!({"code": extra_codes::UNKNOWN_TASK, "taskId": task_id}))
}

/// `-32602 invalid_request` naming a member of a version-2 request.
pub fn invalid_member(field: &str, detail: &str) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, format!("{field} {detail}")).with_data(&json!({
        "code": error_codes::INVALID_REQUEST,
        "field": field,
        "reason": "malformed",
    }))
}
