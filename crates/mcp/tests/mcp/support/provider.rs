//! A version-2 tool provider written with the SDK in the test
//! (`docs/reference/tool-calls.md` section 9): a real hub service answering
//! the version-2 methods from what the test gave it, recording what it was
//! sent, and talking back to the caller's callback service as `provide-mcp`
//! would for its server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use switchboard_client::{
    handler_fn, method_not_found, reply, Client, Endpoint, Error, Notification, Reply, Request,
    RequestOptions, ServiceHandle,
};
use switchboard_protocol::tool_call::ToolCallRequest;
use switchboard_protocol::{ErrorCode, ErrorObject, Principal};
use tokio::sync::Notify;

/// What a provider serves besides its tools.
#[derive(Clone, Default)]
pub struct Serves {
    pub resources: Vec<Value>,
    pub templates: Vec<Value>,
    pub prompts: Vec<Value>,
    /// `prompts/list` answers something that does not parse.
    pub broken_prompts: bool,
}

/// One request the provider got.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub params: Value,
    pub sender: Principal,
}

/// What the provider saw, and what its tools' callbacks were answered.
#[derive(Default)]
pub struct Seen {
    pub requests: Mutex<Vec<Received>>,
    /// Each callback a tool sent and the answer (or `error <code> <data.code>`).
    pub callbacks: Mutex<Vec<(String, String)>>,
    pub changed: Notify,
}

impl Seen {
    /// The params of every request of `method`.
    pub fn of(&self, method: &str) -> Vec<Value> {
        self.requests
            .lock()
            .iter()
            .filter(|received| received.method == method)
            .map(|received| received.params.clone())
            .collect()
    }
}

pub struct TestProvider {
    pub namespace: String,
    pub client: Client,
    pub service: ServiceHandle,
    pub seen: Arc<Seen>,
    pub serves: Arc<Mutex<Serves>>,
    revision: AtomicU64,
}

fn tools() -> Value {
    let object = json!({"type": "object"});
    json!([
        {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
        {"name": "sample", "inputSchema": object},
        {"name": "elicit", "inputSchema": object},
        {"name": "roots", "inputSchema": object},
        {"name": "progress", "inputSchema": object},
        {"name": "log", "inputSchema": object},
        {"name": "long", "inputSchema": object, "execution": {"taskSupport": "required"}},
        {"name": "maybe_long", "inputSchema": object, "execution": {"taskSupport": "optional"}},
    ])
}

pub fn metadata(namespace: &str, revision: u64) -> Value {
    json!({
        "protocol": "tool-provider", "version": 2, "namespace": namespace,
        "capabilities": {
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true}, "completions": {}, "logging": {},
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
        },
        "toolsRevision": 1, "resourcesRevision": revision, "promptsRevision": revision,
    })
}

fn invalid(message: String) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, message)
}

/// The answer to a callback, or how it failed, as one line.
fn outcome(answer: Result<Value, Error>) -> String {
    match answer {
        Ok(value) => value.to_string(),
        Err(Error::Rpc(error)) => {
            let code = error
                .data()
                .and_then(|data| data["code"].as_str().map(str::to_owned))
                .unwrap_or_default();
            format!("error {} {code}", error.code)
        }
        Err(other) => format!("failed {other}"),
    }
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

impl TestProvider {
    /// Registers provider `namespace` on the hub at `endpoint`.
    pub async fn start(endpoint: Endpoint, namespace: &str, serves: Serves) -> TestProvider {
        let client = Client::connect_with(switchboard_client::ConnectOptions {
            endpoint,
            client_name: format!("provider {namespace}"),
        })
        .await
        .expect("the provider connects");
        let seen = Arc::new(Seen::default());
        let serves = Arc::new(Mutex::new(serves));
        let state = Handling {
            namespace: namespace.to_owned(),
            client: client.clone(),
            seen: seen.clone(),
            serves: serves.clone(),
            tasks: Arc::new(AtomicU64::new(0)),
        };
        let noted = seen.clone();
        let handler = handler_fn(move |request| {
            let state = state.clone();
            async move { state.handle(request).await }
        })
        .with_notifications(move |notification: Notification| {
            let noted = noted.clone();
            async move {
                noted.requests.lock().push(Received {
                    params: notification.params().unwrap_or(Value::Null),
                    method: notification.method,
                    sender: notification.sender_principal,
                });
                noted.changed.notify_waiters();
            }
        });
        let service = client
            .register(&metadata(namespace, 1), handler)
            .await
            .expect("the provider registers");
        TestProvider {
            namespace: namespace.to_owned(),
            client,
            service,
            seen,
            serves,
            revision: AtomicU64::new(1),
        }
    }

    /// Changes what it serves and bumps its revisions.
    pub async fn change(&self, serves: Serves) {
        *self.serves.lock() = serves;
        let revision = self.revision.fetch_add(1, Ordering::Relaxed) + 1;
        self.service
            .update(&metadata(&self.namespace, revision))
            .await
            .unwrap();
    }

    /// Sends `method` with `params` to the callback service `service`.
    pub async fn notify(&self, service: &str, method: &str, params: Value) {
        self.client.notify(service, method, &params).await.unwrap();
    }

    /// The callback service a request of `method` named in `client.service`.
    pub fn callback_service(&self, method: &str) -> String {
        self.seen.of(method)[0]["client"]["service"]
            .as_str()
            .expect("a client member")
            .to_owned()
    }
}

#[derive(Clone)]
struct Handling {
    namespace: String,
    client: Client,
    seen: Arc<Seen>,
    serves: Arc<Mutex<Serves>>,
    tasks: Arc<AtomicU64>,
}

impl Handling {
    async fn handle(&self, request: Request) -> Reply {
        let params: Value = request.params().unwrap_or(Value::Null);
        self.seen.requests.lock().push(Received {
            method: request.method.clone(),
            params: params.clone(),
            sender: request.sender_principal.clone(),
        });
        self.seen.changed.notify_waiters();
        let ns = &self.namespace;
        let serves = self.serves.lock().clone();
        let answer = match request.method.as_str() {
            "tools/list" => json!({"tools": tools()}),
            "tools/call" => return self.call(request.params()?).await,
            "resources/list" => json!({"resources": serves.resources}),
            "resources/templates/list" => json!({"resourceTemplates": serves.templates}),
            "prompts/list" if serves.broken_prompts => json!({"prompts": "not a list"}),
            "prompts/list" => json!({"prompts": serves.prompts}),
            "resources/read" => {
                let uri = params["uri"].as_str().unwrap_or_default();
                json!({"contents": [{"uri": uri, "text": format!("{ns} read {uri}")}]})
            }
            "prompts/get" => {
                let name = params["name"].as_str().unwrap_or_default();
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": format!("{ns} prompt {name}")}}]})
            }
            "completion/complete" => {
                json!({"completion": {"values": [format!("{ns} completes")], "hasMore": false}})
            }
            "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => json!({}),
            "tasks/get" | "tasks/cancel" => {
                let id = params["taskId"].as_str().unwrap_or_default();
                let status = if request.method == "tasks/get" {
                    "completed"
                } else {
                    "cancelled"
                };
                json!({"taskId": id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
                       "lastUpdatedAt": "2026-01-01T00:00:01Z", "ttl": 60000})
            }
            "tasks/result" => text_result(&format!(
                "{ns} result of {}",
                params["taskId"].as_str().unwrap_or_default()
            )),
            "tasks/list" => {
                let made = self.tasks.load(Ordering::Relaxed);
                let tasks: Vec<Value> = (1..=made)
                    .map(|n| json!({"taskId": format!("{ns}-task-{n}"), "status": "working",
                                    "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000}))
                    .collect();
                json!({"tasks": tasks})
            }
            other => return Err(method_not_found(other)),
        };
        reply(&answer)
    }

    /// A callback to the caller's callback service, named by the call.
    async fn callback(&self, call: &ToolCallRequest, method: &str, mut params: Value) -> String {
        let Some(client) = &call.client else {
            return "no client".into();
        };
        params["_meta"] = json!({"switchboard/call": call.tool_call_id});
        let raw = serde_json::value::to_raw_value(&params).unwrap();
        // The hub's ceiling, as provide-mcp asks: a longer one is refused.
        let ceiling = self.client.limits().max_request_timeout_ms;
        let options = RequestOptions {
            timeout: Some(Duration::from_millis(ceiling)),
        };
        // In a task of its own, so that its outcome is recorded even when
        // the call is cancelled first and the SDK drops this handler: the
        // hub's cancel and the callback's own end may come in either order.
        let (hub, seen) = (self.client.clone(), self.seen.clone());
        let (service, method) = (client.service.clone(), method.to_owned());
        let asked = tokio::spawn(async move {
            let answer = hub
                .request_raw(&service, &method, Some(&raw), options)
                .await
                .and_then(|raw| serde_json::from_str(raw.get()).map_err(Error::Decode));
            let outcome = outcome(answer);
            seen.callbacks.lock().push((method, outcome.clone()));
            seen.changed.notify_waiters();
            outcome
        });
        asked.await.expect("the callback task")
    }

    async fn call(&self, call: ToolCallRequest) -> Reply {
        let arguments: Value = serde_json::from_str(call.arguments.get()).unwrap_or(Value::Null);
        let text = arguments["text"].as_str().unwrap_or_default().to_owned();
        let result = match call.name.as_str() {
            "echo" => text_result(&text),
            "sample" => {
                let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": 10});
                text_result(&self.callback(&call, "sampling/createMessage", params).await)
            }
            "elicit" => {
                let params = json!({"message": text, "requestedSchema": {"type": "object", "properties": {}}});
                text_result(&self.callback(&call, "elicitation/create", params).await)
            }
            "roots" => text_result(&self.callback(&call, "roots/list", json!({})).await),
            "progress" => {
                let service = call.client.as_ref().map(|client| client.service.clone());
                if let (Some(service), Some(token)) = (service, &call.progress_token) {
                    let token: Value = serde_json::from_str(token.get()).unwrap();
                    for step in [1, 3, 2] {
                        let params = json!({"progressToken": token, "progress": step, "total": 3});
                        let _ = self
                            .client
                            .notify(&service, "notifications/progress", &params)
                            .await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                text_result("done")
            }
            "log" => {
                if let Some(client) = &call.client {
                    let params = json!({"level": "info", "data": text, "_meta": {"switchboard/call": call.tool_call_id}});
                    let _ = self
                        .client
                        .notify(&client.service, "notifications/message", &params)
                        .await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                text_result("logged")
            }
            "long" | "maybe_long" if call.task.is_some() => {
                let n = self.tasks.fetch_add(1, Ordering::Relaxed) + 1;
                json!({"task": {"taskId": format!("{}-task-{n}", self.namespace), "status": "working",
                                "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000}})
            }
            "long" => return Err(invalid("long needs a task".into())),
            "maybe_long" => text_result("ran at once"),
            other => {
                return Err(invalid(format!("unknown tool {other}"))
                    .with_data(&json!({"code": "unknown_tool", "tool": other})))
            }
        };
        reply(&result)
    }
}
