//! A hub tool's call as the editor and the model see it: the call itself
//! (the `ToolCallRequest`, its timeout, cancellation, and a fresh listing
//! after a stale answer) is the shared consumer layer's
//! ([`ExposedTool::call`]); this file maps its answer.
//!
//! Dropping the future returned by [`call`] drops the hub request, which
//! sends `$/cancelRequest` to the hub: that is how a cancelled turn cancels
//! its in-flight tool call.

use std::time::Duration;

use agent_client_protocol::v1::schema::{ContentBlock, ToolCallContent};
use serde_json::value::RawValue;
use serde_json::Value;
use switchboard_tools::consumer::{CallError, ExposedTool, Invocation};

use super::ToolOutcome;

/// Calls `tool` with the model's raw `arguments`, waiting at most `timeout`
/// (clamped to the hub's `maxRequestTimeoutMs`).
pub async fn call(
    tool: &ExposedTool,
    arguments: Box<RawValue>,
    tool_call_id: &str,
    call_key: String,
    timeout: Duration,
) -> ToolOutcome {
    let invocation = Invocation {
        arguments,
        tool_call_id: Some(tool_call_id.to_owned()),
        progress_token: None,
        call_key: Some(call_key),
        timeout: Some(timeout),
        client: None,
        task: None,
    };
    match tool.call(invocation).await {
        Ok(raw) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(result) => outcome_of(result),
            Err(error) => {
                ToolOutcome::failure(format!("the provider's answer is not JSON: {error}"))
            }
        },
        Err(CallError::Answered(error)) => {
            let mut message = format!("{} ({})", error.message, error.code);
            if let Some(data) = error.data() {
                message.push_str(&format!("; data: {data}"));
            }
            ToolOutcome::failure(message)
        }
        Err(error) => ToolOutcome::failure(error.to_string()),
    }
}

/// Maps an MCP `CallToolResult` (`{content, structuredContent?, isError?}`).
fn outcome_of(result: Value) -> ToolOutcome {
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let mut texts = Vec::new();
    let mut content = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = match block.get("type").and_then(Value::as_str) {
            Some("text") => block
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            Some("resource") => block
                .pointer("/resource/text")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| {
                    block
                        .pointer("/resource/uri")
                        .and_then(Value::as_str)
                        .map(|uri| format!("[resource {uri}]"))
                })
                .unwrap_or_default(),
            Some("resource_link") => format!(
                "[resource {}]",
                block.get("uri").and_then(Value::as_str).unwrap_or_default()
            ),
            Some(other) => format!("[{other} content]"),
            None => continue,
        };
        content.push(ToolCallContent::from(ContentBlock::from(text.clone())));
        texts.push(text);
    }
    let mut text_for_model = texts.join("\n");
    if text_for_model.is_empty() {
        text_for_model = match result.get("structuredContent") {
            Some(structured) => structured.to_string(),
            None => "(no output)".to_owned(),
        };
    }
    if is_error {
        text_for_model = format!("error: {text_for_model}");
    }
    ToolOutcome {
        succeeded: !is_error,
        text_for_model,
        content,
        raw_output: Some(result),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_map_to_text_and_status() {
        let ok = outcome_of(
            json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
        );
        assert!(ok.succeeded);
        assert_eq!(ok.text_for_model, "a\nb");
        let structured = outcome_of(json!({"content": [], "structuredContent": {"n": 1}}));
        assert_eq!(structured.text_for_model, r#"{"n":1}"#);
        let failed =
            outcome_of(json!({"content": [{"type": "text", "text": "boom"}], "isError": true}));
        assert!(!failed.succeeded);
        assert_eq!(failed.text_for_model, "error: boom");
    }
}
