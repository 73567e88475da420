//! The test server's tools (listed in `main.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::wire::RpcError;
use crate::{append, Server};

fn tool(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "description": description, "inputSchema": schema})
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn text(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

/// A result whose content is `value`'s JSON text and whose structured
/// content is `value`.
fn structured(value: Value) -> Value {
    json!({"content": [{"type": "text", "text": value.to_string()}], "structuredContent": value})
}

/// The client's error answer as a result the model reads.
fn refused(error: &RpcError) -> Value {
    json!({
        "content": [{"type": "text", "text": format!("error {}: {}", error.code, error.message)}],
        "isError": true,
    })
}

fn string_arg<'a>(arguments: &'a Map<String, Value>, name: &str) -> Result<&'a str, RpcError> {
    arguments
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("missing string argument {name:?}")))
}

/// `_meta` for a request of this server during a call: the call's progress
/// token when the caller asked for a link (`link: "token"`).
fn link_meta(arguments: &Map<String, Value>, call_meta: &Value) -> Map<String, Value> {
    let mut meta = Map::new();
    if arguments.get("link").and_then(Value::as_str) == Some("token") {
        if let Some(token) = call_meta.get("progressToken") {
            meta.insert("progressToken".into(), token.clone());
        }
    }
    meta
}

fn with_meta(mut params: Value, meta: Map<String, Value>) -> Value {
    if !meta.is_empty() {
        params["_meta"] = Value::Object(meta);
    }
    params
}

impl Server {
    pub fn tools(&self) -> Vec<Value> {
        let link = json!({"type": "string", "enum": ["token", "none"]});
        let mut tools = vec![
            tool(
                "echo",
                "Returns the text (`times` times over: a long answer from a short call)",
                object(
                    json!({"text": {"type": "string"}, "times": {"type": "integer", "minimum": 1}}),
                    &["text"],
                ),
            ),
            tool(
                "slow",
                "Waits until cancelled",
                object(
                    json!({"marker": {"type": "string"}, "seconds": {"type": "number"}}),
                    &[],
                ),
            ),
            tool(
                "counter",
                "Increments the number in a file",
                object(json!({"path": {"type": "string"}}), &["path"]),
            ),
            tool(
                "progress",
                "Reports progress",
                object(
                    json!({"steps": {"type": "integer", "minimum": 0}, "release": {"type": "string"}}),
                    &[],
                ),
            ),
            tool(
                "add_tool",
                "Adds a tool",
                object(json!({"name": {"type": "string"}}), &["name"]),
            ),
            tool("exit", "Exits the process", json!({"type": "object"})),
            tool(
                "remove_tool",
                "Removes a tool",
                object(json!({"name": {"type": "string"}}), &["name"]),
            ),
            tool(
                "add_resource",
                "Adds a resource",
                object(json!({"uri": {"type": "string"}}), &["uri"]),
            ),
            tool(
                "add_prompt",
                "Adds a prompt",
                object(json!({"name": {"type": "string"}}), &["name"]),
            ),
            tool(
                "sample",
                "Asks the client's model",
                object(json!({"prompt": {"type": "string"}, "link": link}), &[]),
            ),
            tool(
                "elicit",
                "Asks the client's user",
                object(
                    json!({"message": {"type": "string"}, "mode": {"type": "string", "enum": ["form", "url"]}, "link": link}),
                    &[],
                ),
            ),
            tool(
                "roots",
                "Asks the client's roots",
                object(json!({"link": link}), &[]),
            ),
            tool(
                "log",
                "Logs a message",
                object(
                    json!({"level": {"type": "string"}, "text": {"type": "string"}, "link": link}),
                    &["level", "text"],
                ),
            ),
            tool("level", "The logging level set", json!({"type": "object"})),
            tool(
                "touch",
                "Says a resource was updated",
                object(json!({"uri": {"type": "string"}}), &["uri"]),
            ),
            tool(
                "roots_changes",
                "How often the roots changed",
                json!({"type": "object"}),
            ),
            tool(
                "client",
                "The client's initialize params",
                json!({"type": "object"}),
            ),
        ];
        let mut research = tool(
            "research",
            "Researches a topic, as a task",
            object(
                json!({"topic": {"type": "string"}, "seconds": {"type": "number"}, "ask": {"type": "string", "enum": ["sampling"]}}),
                &[],
            ),
        );
        research["execution"] = json!({"taskSupport": "required"});
        research["title"] = json!("Research");
        tools.push(research);
        for name in self.extra_tools.lock().iter() {
            tools.push(tool(name, "An added tool", json!({"type": "object"})));
        }
        tools
    }

    /// `tools/call`; `None`: cancelled, nothing is answered.
    pub async fn call_tool(
        self: Arc<Self>,
        params: Value,
        cancelled: CancellationToken,
    ) -> Option<Result<Value, RpcError>> {
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        let arguments = params["arguments"].as_object().cloned().unwrap_or_default();
        let meta = params.get("_meta").cloned().unwrap_or(Value::Null);
        if let Ok(log) = std::env::var("MCP_TEST_SERVER_LOG") {
            append(&log, &name);
        }
        if name == "research" {
            // `delay`: the task is created only after this many seconds.
            let delay = arguments
                .get("delay")
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            if delay > 0.0 {
                tokio::select! {
                    () = cancelled.cancelled() => return None,
                    () = tokio::time::sleep(Duration::from_secs_f64(delay.min(3600.0))) => {}
                }
            }
            return Some(match params.get("task") {
                Some(task) => Ok(self.tasks.start_research(&self, arguments, task)),
                None => Err(RpcError::new(
                    -32601,
                    "tool \"research\" must be called as a task",
                )),
            });
        }
        let answer = match name.as_str() {
            "echo" => string_arg(&arguments, "text").map(|said| {
                let times = arguments.get("times").and_then(Value::as_u64).unwrap_or(1);
                text(said.repeat(usize::try_from(times).unwrap_or(1)))
            }),
            "slow" => {
                let marker = arguments.get("marker").and_then(Value::as_str);
                let seconds = arguments
                    .get("seconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(30.0);
                if let Some(marker) = marker {
                    append(marker, "started");
                }
                tokio::select! {
                    () = cancelled.cancelled() => {
                        if let Some(marker) = marker {
                            append(marker, "cancelled");
                        }
                        return None;
                    }
                    () = tokio::time::sleep(Duration::from_secs_f64(seconds.clamp(0.0, 3600.0))) => Ok(text("done")),
                }
            }
            "counter" => counter(&arguments),
            "progress" => {
                let steps = arguments.get("steps").and_then(Value::as_u64).unwrap_or(3);
                if let Some(token) = meta.get("progressToken") {
                    for step in 1..=steps {
                        self.peer.notify(
                            "notifications/progress",
                            json!({"progressToken": token, "progress": step, "total": steps, "message": format!("step {step}")}),
                        );
                    }
                }
                if let Some(release) = arguments.get("release").and_then(Value::as_str) {
                    for _ in 0..3000 {
                        if std::path::Path::new(release).exists() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                Ok(text("done"))
            }
            "add_tool" | "remove_tool" => string_arg(&arguments, "name").map(|added| {
                if name == "add_tool" {
                    self.extra_tools.lock().insert(added.to_owned());
                } else {
                    self.extra_tools.lock().remove(added);
                }
                self.peer
                    .notify("notifications/tools/list_changed", json!({}));
                text("ok")
            }),
            "add_resource" => string_arg(&arguments, "uri").map(|uri| {
                self.extra_resources.lock().insert(uri.to_owned());
                self.peer
                    .notify("notifications/resources/list_changed", json!({}));
                text("ok")
            }),
            "add_prompt" => string_arg(&arguments, "name").map(|prompt| {
                self.extra_prompts.lock().insert(prompt.to_owned());
                self.peer
                    .notify("notifications/prompts/list_changed", json!({}));
                text("ok")
            }),
            "exit" => std::process::exit(3),
            "sample" => {
                let prompt = arguments
                    .get("prompt")
                    .and_then(Value::as_str)
                    .unwrap_or("hello");
                let params = json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": 100,
                });
                let params = with_meta(params, link_meta(&arguments, &meta));
                Ok(self
                    .ask("sampling/createMessage", params, &cancelled)
                    .await?)
            }
            "elicit" => {
                let message = arguments
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("Who are you?");
                let params = match arguments.get("mode").and_then(Value::as_str) {
                    Some("url") => json!({
                        "mode": "url", "message": message,
                        "url": "https://example.com/consent", "elicitationId": "elicitation-1",
                    }),
                    _ => json!({
                        "mode": "form", "message": message,
                        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                    }),
                };
                let params = with_meta(params, link_meta(&arguments, &meta));
                Ok(self.ask("elicitation/create", params, &cancelled).await?)
            }
            "roots" => {
                let params = with_meta(json!({}), link_meta(&arguments, &meta));
                Ok(self.ask("roots/list", params, &cancelled).await?)
            }
            "log" => string_arg(&arguments, "level").and_then(|level| {
                let data = string_arg(&arguments, "text")?;
                let sent = self.log(level, json!(data), link_meta(&arguments, &meta));
                Ok(text(if sent { "logged" } else { "below the level" }))
            }),
            "level" => Ok(text(
                self.level.lock().clone().unwrap_or_else(|| "unset".into()),
            )),
            "touch" => string_arg(&arguments, "uri").map(|uri| {
                if self.subscriptions.lock().contains(uri) {
                    self.peer
                        .notify("notifications/resources/updated", json!({"uri": uri}));
                    text("touched")
                } else {
                    text("not subscribed")
                }
            }),
            "roots_changes" => Ok(text(self.roots_changes.load(Ordering::Relaxed).to_string())),
            "client" => Ok(structured(self.client.lock().clone())),
            other if self.extra_tools.lock().contains(other) => Ok(text(format!("{other} ran"))),
            other => Err(RpcError::invalid_params(format!("unknown tool {other:?}"))),
        };
        Some(answer)
    }

    /// Asks the client; its answer as a tool result, `None` once the call
    /// is cancelled.
    async fn ask(
        &self,
        method: &str,
        params: Value,
        cancelled: &CancellationToken,
    ) -> Option<Value> {
        let answer = tokio::select! {
            answer = self.peer.request(method, params) => answer,
            () = cancelled.cancelled() => return None,
        };
        Some(match answer {
            Ok(result) => structured(result),
            Err(error) => refused(&error),
        })
    }
}

fn counter(arguments: &Map<String, Value>) -> Result<Value, RpcError> {
    let path = string_arg(arguments, "path")?;
    let count = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    std::fs::write(path, count.to_string()).map_err(|e| RpcError::new(-32603, e.to_string()))?;
    Ok(structured(json!({"count": count})))
}
