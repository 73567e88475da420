//! Everything but tools and tasks: resources (a text one, a blob one, one
//! per `add_resource`; listed one per page, so a client must follow
//! `nextCursor`), the template `test://items/{id}`, subscriptions, prompts
//! (`greet {name}`, `plain`, one per `add_prompt`), completion of `greet`'s
//! `name` and the template's `id`, and logging.

use serde_json::{json, Map, Value};

use crate::wire::RpcError;
use crate::Server;

/// MCP's logging levels, least severe first.
const LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

const NAMES: &[&str] = &["alice", "albert", "bob"];
const ITEM_IDS: &[&str] = &["1", "2", "7"];

fn severity(level: &str) -> Option<usize> {
    LEVELS.iter().position(|known| *known == level)
}

impl Server {
    /// The method's answer, or `None` for a method this server does not have.
    pub fn surface(&self, method: &str, params: &Value) -> Option<Result<Value, RpcError>> {
        Some(match method {
            "resources/list" => Ok(self.resources_page(params)),
            "resources/templates/list" => Ok(json!({"resourceTemplates": [{
                "uriTemplate": "test://items/{id}", "name": "item", "mimeType": "text/plain",
                "description": "An item by id",
            }]})),
            "resources/read" => self.read(params["uri"].as_str().unwrap_or_default()),
            "resources/subscribe" | "resources/unsubscribe" => {
                let uri = params["uri"].as_str().unwrap_or_default().to_owned();
                if method == "resources/subscribe" {
                    self.subscriptions.lock().insert(uri);
                } else {
                    self.subscriptions.lock().remove(&uri);
                }
                Ok(json!({}))
            }
            "prompts/list" => Ok(json!({"prompts": self.prompts()})),
            "prompts/get" => self.prompt(params),
            "completion/complete" => Ok(complete(params)),
            "logging/setLevel" => match params["level"].as_str() {
                Some(level) if severity(level).is_some() => {
                    *self.level.lock() = Some(level.to_owned());
                    Ok(json!({}))
                }
                _ => Err(RpcError::invalid_params("unknown logging level")),
            },
            _ => return None,
        })
    }

    fn resources(&self) -> Vec<Value> {
        let mut resources = vec![
            json!({"uri": "test://text", "name": "text", "title": "A text", "mimeType": "text/plain"}),
            json!({"uri": "test://blob", "name": "blob", "mimeType": "application/octet-stream", "size": 4}),
        ];
        for uri in self.extra_resources.lock().iter() {
            resources.push(json!({"uri": uri, "name": uri, "mimeType": "text/plain"}));
        }
        resources
    }

    /// One resource per page; the cursor is the next one's index.
    fn resources_page(&self, params: &Value) -> Value {
        let resources = self.resources();
        let at = params["cursor"]
            .as_str()
            .and_then(|cursor| cursor.parse::<usize>().ok())
            .unwrap_or(0);
        let mut page = json!({"resources": resources.get(at).into_iter().collect::<Vec<_>>()});
        if at + 1 < resources.len() {
            page["nextCursor"] = json!((at + 1).to_string());
        }
        page
    }

    fn read(&self, uri: &str) -> Result<Value, RpcError> {
        let content = match uri {
            "test://text" => {
                json!({"uri": uri, "mimeType": "text/plain", "text": "hello, resources"})
            }
            // The bytes 0, 1, 2, 3.
            "test://blob" => {
                json!({"uri": uri, "mimeType": "application/octet-stream", "blob": "AAECAw=="})
            }
            _ => match uri.strip_prefix("test://items/") {
                Some(id) => {
                    json!({"uri": uri, "mimeType": "text/plain", "text": format!("item {id}")})
                }
                None if self.extra_resources.lock().contains(uri) => {
                    json!({"uri": uri, "mimeType": "text/plain", "text": uri})
                }
                None => {
                    let mut error = RpcError::new(-32002, "Resource not found");
                    error.data = Some(json!({"uri": uri}));
                    return Err(error);
                }
            },
        };
        Ok(json!({"contents": [content]}))
    }

    fn prompts(&self) -> Vec<Value> {
        let mut prompts = vec![
            json!({"name": "greet", "title": "Greeting", "description": "Greets someone",
                   "arguments": [{"name": "name", "description": "Who", "required": true}]}),
            json!({"name": "plain", "description": "No arguments"}),
        ];
        for name in self.extra_prompts.lock().iter() {
            prompts.push(json!({"name": name}));
        }
        prompts
    }

    fn prompt(&self, params: &Value) -> Result<Value, RpcError> {
        let name = params["name"].as_str().unwrap_or_default();
        let arguments = params["arguments"].as_object().cloned().unwrap_or_default();
        let text = match name {
            "greet" => match arguments.get("name").and_then(Value::as_str) {
                Some(who) => format!("Hello, {who}!"),
                None => return Err(RpcError::invalid_params("greet needs the argument name")),
            },
            "plain" => "Plain.".to_owned(),
            other if self.extra_prompts.lock().contains(other) => other.to_owned(),
            other => {
                return Err(RpcError::invalid_params(format!(
                    "unknown prompt {other:?}"
                )))
            }
        };
        Ok(json!({
            "description": format!("the prompt {name}"),
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        }))
    }

    /// Sends `notifications/message` unless `level` is below the level set;
    /// whether it was sent.
    pub fn log(&self, level: &str, data: Value, meta: Map<String, Value>) -> bool {
        let threshold = self.level.lock().as_deref().and_then(severity).unwrap_or(0);
        if severity(level).is_none_or(|severity| severity < threshold) {
            return false;
        }
        let mut params = json!({"level": level, "logger": "mcp-test-server", "data": data});
        if !meta.is_empty() {
            params["_meta"] = Value::Object(meta);
        }
        self.peer.notify("notifications/message", params);
        true
    }
}

fn complete(params: &Value) -> Value {
    let prefix = params["argument"]["value"].as_str().unwrap_or_default();
    let reference = &params["ref"];
    let candidates: &[&str] = match (
        reference["type"].as_str(),
        params["argument"]["name"].as_str(),
    ) {
        (Some("ref/prompt"), Some("name")) if reference["name"] == "greet" => NAMES,
        (Some("ref/resource"), Some("id")) if reference["uri"] == "test://items/{id}" => ITEM_IDS,
        _ => &[],
    };
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|value| value.starts_with(prefix))
        .collect();
    json!({"completion": {"values": values, "total": values.len(), "hasMore": false}})
}
