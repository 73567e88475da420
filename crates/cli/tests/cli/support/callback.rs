//! A hub client as a version-2 consumer would be one, by hand: it registers
//! a callback service (`{"protocol":"mcp-client","version":1,"callback":true}`)
//! that answers sampling, elicitation and roots as its MCP client would,
//! and keeps everything it is sent, so a test can say who got what.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchboard_client::{
    handler_fn, reply, Client, ConnectOptions, Endpoint, Error, RequestOptions, ServiceHandle,
};
pub use switchboard_testkit::WAIT;
use tokio::sync::Notify;

/// What MCP clients declare that can answer everything.
pub fn every_capability() -> Value {
    json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}})
}

/// One message a callback service was sent.
#[derive(Debug, Clone)]
pub struct Heard {
    pub method: String,
    pub params: Value,
}

pub struct Caller {
    pub name: String,
    pub client: Client,
    pub callback: ServiceHandle,
    pub capabilities: Value,
    heard: Arc<Mutex<Vec<Heard>>>,
    news: Arc<Notify>,
}

/// How a callback service answers elicitation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Elicit {
    Accept,
    /// Never answers (a user who walked away).
    Never,
}

impl Caller {
    /// `name`'s client on `client`, its callback service declaring
    /// `capabilities`.
    pub async fn register(
        name: &str,
        client: Client,
        capabilities: Value,
        elicit: Elicit,
    ) -> Caller {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let news = Arc::new(Notify::new());
        let (on_request, on_note) = ((heard.clone(), news.clone()), (heard.clone(), news.clone()));
        let who = name.to_owned();
        let handler = handler_fn(move |request| {
            let (heard, news) = on_request.clone();
            let who = who.clone();
            async move {
                let params: Value = request.params().unwrap_or(Value::Null);
                let call = params["_meta"]["switchboard/call"]
                    .as_str()
                    .unwrap_or("none")
                    .to_owned();
                heard.lock().unwrap().push(Heard {
                    method: request.method.clone(),
                    params,
                });
                news.notify_waiters();
                match request.method.as_str() {
                    "sampling/createMessage" => reply(&json!({
                        "role": "assistant", "model": "test",
                        "content": {"type": "text", "text": format!("{who} sampled for {call}")},
                    })),
                    "elicitation/create" if elicit == Elicit::Never => {
                        std::future::pending::<()>().await;
                        reply(&json!({}))
                    }
                    "elicitation/create" => {
                        reply(&json!({"action": "accept", "content": {"name": who}}))
                    }
                    "roots/list" => {
                        reply(&json!({"roots": [{"uri": format!("file:///{who}"), "name": who}]}))
                    }
                    other => Err(switchboard_client::method_not_found(other)),
                }
            }
        })
        .with_notifications(move |note| {
            let (heard, news) = on_note.clone();
            async move {
                heard.lock().unwrap().push(Heard {
                    params: note.params::<Value>().unwrap_or(Value::Null),
                    method: note.method,
                });
                news.notify_waiters();
            }
        });
        let callback = client
            .register(
                &json!({"protocol": "mcp-client", "version": 1, "callback": true}),
                handler,
            )
            .await
            .unwrap();
        Caller {
            name: name.to_owned(),
            client,
            callback,
            capabilities,
            heard,
            news,
        }
    }

    /// A client of the named principal whose token is `token`.
    pub async fn connect(socket: &std::path::Path, token: &str) -> Client {
        Client::connect_with(ConnectOptions {
            endpoint: Endpoint::Unix {
                path: socket.to_owned(),
                token: Some(token.to_owned()),
            },
            client_name: token.to_owned(),
        })
        .await
        .unwrap()
    }

    /// The `client` member naming this caller's callback service.
    pub fn client_member(&self) -> Value {
        json!({"service": self.callback.id(), "capabilities": self.capabilities})
    }

    /// `method` with `params` (plus this caller's `client`), the answer.
    pub async fn ask(
        &self,
        service: &str,
        method: &str,
        mut params: Value,
    ) -> Result<Value, Error> {
        params["client"] = self.client_member();
        self.ask_bare(service, method, &params, None).await
    }

    /// `method` with `params` as they are.
    pub async fn ask_bare(
        &self,
        service: &str,
        method: &str,
        params: &Value,
        timeout: Option<Duration>,
    ) -> Result<Value, Error> {
        let params = serde_json::value::to_raw_value(params).unwrap();
        let answer: Box<RawValue> = tokio::time::timeout(
            WAIT * 2,
            self.client
                .request_raw(service, method, Some(&params), RequestOptions { timeout }),
        )
        .await
        .expect("an answer in time")?;
        Ok(serde_json::from_str(answer.get()).unwrap())
    }

    /// `tools/call` of `tool` as call `id`, with this caller's `client`.
    pub async fn call(&self, service: &str, tool: &str, arguments: Value, id: &str) -> Value {
        let body = json!({"name": tool, "arguments": arguments, "tool_call_id": id});
        self.ask(service, "tools/call", body)
            .await
            .unwrap_or_else(|error| panic!("{tool} as {id}: {error}"))
    }

    /// Everything the callback service was sent so far.
    pub fn heard(&self) -> Vec<Heard> {
        self.heard.lock().unwrap().clone()
    }

    pub fn heard_of(&self, method: &str) -> Vec<Heard> {
        self.heard()
            .into_iter()
            .filter(|h| h.method == method)
            .collect()
    }

    /// Waits (bounded) until `count` messages of `method` arrived.
    pub async fn wait_for(&self, method: &str, count: usize) -> Vec<Heard> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let news = self.news.notified();
            let heard = self.heard_of(method);
            if heard.len() >= count {
                return heard;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} heard {} of {count} {method}: {:?}",
                self.name,
                heard.len(),
                self.heard()
            );
            let _ = tokio::time::timeout(Duration::from_millis(100), news).await;
        }
    }
}

/// The text of a tool result's first content block.
pub fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
