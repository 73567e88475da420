//! A scripted Anthropic Messages API (`POST /v1/messages`, streamed as
//! server-sent events) on loopback, for Claude Code as a real MCP host.
//!
//! The script plays a model that uses one MCP tool: when the tool is
//! offered it calls it with [`ScriptedClaude::ARGUMENT`]; when the tool's
//! result comes back it answers `done: <the result's text>`. Claude Code
//! (2.1) offers MCP tools behind its `ToolSearch` tool (their names in the
//! system prompt only), so when the tool is named but not offered the
//! script first loads it with `ToolSearch` `select:<tool>`. Anything else
//! (a side request) gets `ok`. Every request body is kept for the test.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use super::http_request::read_json_request;

pub struct ScriptedClaude {
    port: u16,
    tool: String,
    requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedClaude {
    /// The text the model passes to the tool (as its `message`).
    pub const ARGUMENT: &'static str = "hello from the model";

    /// A model that calls `tool` (Claude Code's name for it,
    /// `mcp__<server>__<tool>`).
    pub async fn start(tool: &str) -> ScriptedClaude {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let requests = requests.clone();
            let tool = tool.to_owned();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve(stream, tool.clone(), requests.clone()));
                }
            }
        });
        ScriptedClaude {
            port,
            tool: tool.to_owned(),
            requests,
            task,
        }
    }

    /// `ANTHROPIC_BASE_URL` for Claude Code.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// The texts of the results of [`Self::start`]'s tool that came back to
    /// the model.
    pub fn tool_results(&self) -> Vec<String> {
        let mut texts = Vec::new();
        for body in self.requests() {
            let used = tool_uses(&body);
            for result in blocks(&body, "tool_result") {
                let id = result["tool_use_id"].as_str().unwrap_or_default();
                if used
                    .iter()
                    .any(|(used, name)| used == id && *name == self.tool)
                {
                    texts.push(result_text(result));
                }
            }
        }
        texts.dedup();
        texts
    }
}

impl Drop for ScriptedClaude {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every content block of type `kind` in the request's messages.
fn blocks<'a>(body: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|message| message["content"].as_array())
        .flatten()
        .filter(move |block| block["type"] == kind)
}

/// The model's earlier tool calls: (id, tool name).
fn tool_uses(body: &Value) -> Vec<(String, String)> {
    blocks(body, "tool_use")
        .map(|block| {
            let field = |name: &str| block[name].as_str().unwrap_or_default().to_owned();
            (field("id"), field("name"))
        })
        .collect()
}

fn result_text(result: &Value) -> String {
    match &result["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|part| part["type"] == "text")
            .filter_map(|part| part["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

/// What the model says next: content blocks and the stop reason.
fn decide(body: &Value, tool: &str) -> (Vec<Value>, &'static str) {
    let used = tool_uses(body);
    let called = |name: &str| used.iter().any(|(_, used)| used == name);
    for result in blocks(body, "tool_result") {
        let id = result["tool_use_id"].as_str().unwrap_or_default();
        if used.iter().any(|(used, name)| used == id && name == tool) {
            let prefix = if result["is_error"] == true {
                "done (error): "
            } else {
                "done: "
            };
            let text = format!("{prefix}{}", result_text(result));
            return (vec![json!({"type": "text", "text": text})], "end_turn");
        }
    }
    let offered = |name: &str| {
        body["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == name))
    };
    if offered(tool) && !called(tool) {
        let call = tool_use(tool, json!({"message": ScriptedClaude::ARGUMENT}));
        return (vec![call], "tool_use");
    }
    let named = body.to_string().contains(tool);
    if named && offered("ToolSearch") && !called("ToolSearch") {
        let search = tool_use("ToolSearch", json!({"query": format!("select:{tool}")}));
        return (vec![search], "tool_use");
    }
    (vec![json!({"type": "text", "text": "ok"})], "end_turn")
}

fn tool_use(name: &str, input: Value) -> Value {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    json!({"type": "tool_use", "id": format!("toolu_scripted_{n}"), "name": name, "input": input})
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The answer as the Messages API streams it.
fn event_stream(blocks: &[Value], stop: &str) -> String {
    let usage = json!({"input_tokens": 10, "output_tokens": 5});
    let mut out = event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_scripted", "type": "message", "role": "assistant",
            "model": "scripted", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": usage}}),
    );
    for (index, block) in blocks.iter().enumerate() {
        let (start, delta) = if block["type"] == "text" {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            )
        } else {
            (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            )
        };
        out += &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        out += &event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
        out += &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    out += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 5}}),
    );
    out + &event("message_stop", json!({"type": "message_stop"}))
}

async fn serve(mut stream: TcpStream, tool: String, requests: Arc<Mutex<Vec<Value>>>) {
    let Some(body) = read_json_request(&mut stream).await else {
        return;
    };
    let (blocks, stop) = decide(&body, &tool);
    let streamed = body["stream"] == true;
    requests.lock().unwrap().push(body);
    let answer = if streamed {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
             Connection: close\r\n\r\n{}",
            event_stream(&blocks, stop)
        )
    } else {
        let message = json!({"id": "msg_scripted", "type": "message", "role": "assistant",
            "model": "scripted", "content": blocks, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5}})
        .to_string();
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{message}",
            message.len()
        )
    };
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}
