//! The Chat Completions wire format: the request body, and the streamed
//! chunks decoded into [`ModelEvent`]s.
//!
//! Decoding is tolerant in the way OpenAI-compatible servers need: unknown
//! members are ignored, `reasoning_content` (DeepSeek, llama.cpp) and
//! `reasoning` (Ollama, OpenRouter) are both thought deltas, and only the
//! first choice is read.

use serde::Deserialize;
use serde_json::{json, Value};

use super::ModelError;

/// A tool as the model is told about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// A JSON Schema object for the arguments.
    pub parameters: Value,
}

/// One increment of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    Text(String),
    Reasoning(String),
    Refusal(String),
    /// A fragment of tool call number `index`: the id and name usually come
    /// first, the arguments in pieces.
    ToolCallDelta {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: Option<String>,
    },
    Finish(FinishReason),
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    fn parse(text: &str) -> Self {
        match text {
            "stop" | "end_turn" | "eos" => FinishReason::Stop,
            "length" | "max_tokens" => FinishReason::Length,
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "content_filter" | "refusal" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

/// The request body for one streamed completion.
pub fn request_body(model: &str, messages: &[Value], tools: &[ToolDefinition]) -> Value {
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
    });
    // Some servers refuse an empty `tools` array, so it is left out instead.
    if !tools.is_empty() {
        body["tools"] = tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    }
                })
            })
            .collect();
    }
    body
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    /// Streamed chunks carry `delta`; a non-streamed answer carries `message`.
    #[serde(default, alias = "message")]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    /// Usually a string; some servers send an object in a non-streamed answer.
    #[serde(default)]
    arguments: Option<Value>,
}

/// Decodes one SSE `data` payload (or a whole non-streamed answer).
pub fn decode_chunk(data: &str) -> Result<Vec<ModelEvent>, ModelError> {
    let chunk: Chunk = serde_json::from_str(data).map_err(|error| ModelError::BadChunk {
        error: error.to_string(),
        excerpt: excerpt(data),
    })?;
    if let Some(error) = chunk.error {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| error.to_string());
        return Err(ModelError::Remote(message));
    }
    let mut events = Vec::new();
    let Some(choice) = chunk.choices.into_iter().find(|c| c.index == 0) else {
        return Ok(events);
    };
    let delta = choice.delta.unwrap_or_default();
    let reasoning = delta.reasoning_content.or(delta.reasoning);
    if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
        events.push(ModelEvent::Reasoning(text));
    }
    if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
        events.push(ModelEvent::Text(text));
    }
    if let Some(text) = delta.refusal.filter(|t| !t.is_empty()) {
        events.push(ModelEvent::Refusal(text));
    }
    for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
        let (name, arguments) = match call.function {
            Some(function) => (
                function.name,
                function.arguments.map(|a| match a {
                    Value::String(text) => text,
                    other => other.to_string(),
                }),
            ),
            None => (None, None),
        };
        events.push(ModelEvent::ToolCallDelta {
            index: call.index.unwrap_or(position),
            id: call.id,
            name,
            arguments,
        });
    }
    if let Some(reason) = choice.finish_reason {
        events.push(ModelEvent::Finish(FinishReason::parse(&reason)));
    }
    Ok(events)
}

/// The first 200 characters of `text`, for error messages.
pub fn excerpt(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_of_every_kind_decode_in_order() {
        let events = decode_chunk(
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm","content":"Hi",
                "tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"ns__t","arguments":"{\"a\""}}]},
                "finish_reason":null}],"extra":1}"#,
        )
        .unwrap();
        assert_eq!(
            events,
            vec![
                ModelEvent::Reasoning("hmm".into()),
                ModelEvent::Text("Hi".into()),
                ModelEvent::ToolCallDelta {
                    index: 1,
                    id: Some("call_1".into()),
                    name: Some("ns__t".into()),
                    arguments: Some("{\"a\"".into()),
                },
            ]
        );
        assert_eq!(
            decode_chunk(r#"{"choices":[{"delta":{"reasoning":"r"},"finish_reason":"length"}]}"#)
                .unwrap(),
            vec![
                ModelEvent::Reasoning("r".into()),
                ModelEvent::Finish(FinishReason::Length)
            ]
        );
    }

    #[test]
    fn bad_json_and_inline_errors_are_model_errors() {
        assert!(matches!(
            decode_chunk("{not json"),
            Err(ModelError::BadChunk { .. })
        ));
        match decode_chunk(r#"{"error":{"message":"rate limited"}}"#) {
            Err(ModelError::Remote(message)) => assert_eq!(message, "rate limited"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn an_empty_tool_list_is_left_out_of_the_request() {
        let body = request_body("m", &[json!({"role": "user", "content": "x"})], &[]);
        assert!(body.get("tools").is_none());
        assert_eq!(body["stream"], true);
    }
}
