//! A scripted OpenAI Responses API (`POST /v1/responses`, streamed as
//! server-sent events) on loopback, for Codex as a real MCP host.
//!
//! The script plays a model that uses one MCP tool. Codex (0.171) offers an
//! MCP server's tools as one `namespace` tool (`mcp__<server>`) holding a
//! function per tool, and expects the call back with that `namespace`.
//! When the tool is offered the model calls it with
//! [`ScriptedResponses::ARGUMENT`]; when its output comes back it answers
//! `done: <the output's text>`; anything else gets `ok`. Every request body
//! is kept for the test.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use super::http_request::read_json_request;

pub struct ScriptedResponses {
    port: u16,
    requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

/// The tool the model calls: Codex's namespace for the MCP server and the
/// tool's name in it.
#[derive(Clone)]
struct Tool {
    namespace: String,
    name: String,
}

impl ScriptedResponses {
    /// The text the model passes to the tool (as its `message`).
    pub const ARGUMENT: &'static str = "hello from the model";

    /// A model that calls `name` of the MCP server Codex knows as `server`.
    pub async fn start(server: &str, name: &str) -> ScriptedResponses {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let tool = Tool {
            namespace: format!("mcp__{server}"),
            name: name.to_owned(),
        };
        let task = tokio::spawn({
            let requests = requests.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve(stream, tool.clone(), requests.clone()));
                }
            }
        });
        ScriptedResponses {
            port,
            requests,
            task,
        }
    }

    /// The provider's `base_url` for Codex.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The texts of the tool outputs that came back to the model.
    pub fn tool_outputs(&self) -> Vec<String> {
        let mut texts: Vec<String> = self
            .requests
            .lock()
            .unwrap()
            .iter()
            .flat_map(|body| outputs(body).collect::<Vec<_>>())
            .collect();
        texts.dedup();
        texts
    }
}

impl Drop for ScriptedResponses {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The texts of the request's `function_call_output` items of the model's
/// calls, without the `Wall time` line Codex puts before a tool's content.
fn outputs(body: &Value) -> impl Iterator<Item = String> + '_ {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "function_call_output")
        .filter(|item| {
            item["call_id"]
                .as_str()
                .is_some_and(|id| id.starts_with(CALL_PREFIX))
        })
        .map(|item| match &item["output"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .filter(|text| !text.starts_with("Wall time:"))
                .collect(),
            _ => String::new(),
        })
}

const CALL_PREFIX: &str = "call_scripted_";

fn offered(body: &Value, tool: &Tool) -> bool {
    body["tools"].as_array().into_iter().flatten().any(|t| {
        t["type"] == "namespace"
            && t["name"] == tool.namespace.as_str()
            && t["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|f| f["name"] == tool.name.as_str()))
    })
}

/// The events of the model's answer after `response.created`.
fn decide(body: &Value, tool: &Tool) -> Vec<Value> {
    if let Some(output) = outputs(body).next() {
        return message(&format!("done: {output}"));
    }
    if !offered(body, tool) {
        return message("ok");
    }
    let call_id = format!("{CALL_PREFIX}1");
    let arguments = json!({"message": ScriptedResponses::ARGUMENT}).to_string();
    let item = json!({"type": "function_call", "id": "fc_scripted", "call_id": call_id,
        "name": tool.name, "namespace": tool.namespace, "arguments": arguments,
        "status": "completed"});
    vec![
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ]
}

fn message(text: &str) -> Vec<Value> {
    let item = json!({"type": "message", "id": "msg_scripted", "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]});
    vec![
        json!({"type": "response.output_text.delta", "output_index": 0,
            "item_id": "msg_scripted", "content_index": 0, "delta": text}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ]
}

async fn serve(mut stream: TcpStream, tool: Tool, requests: Arc<Mutex<Vec<Value>>>) {
    let Some(body) = read_json_request(&mut stream).await else {
        return;
    };
    let mut events = vec![json!({"type": "response.created",
        "response": {"id": "resp_scripted", "status": "in_progress", "output": []}})];
    events.extend(decide(&body, &tool));
    events.push(json!({"type": "response.completed", "response": {
        "id": "resp_scripted", "status": "completed", "output": [],
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15}}}));
    requests.lock().unwrap().push(body);
    let mut answer = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         Connection: close\r\n\r\n",
    );
    for event in events {
        answer += &format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap_or("")
        );
    }
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}
