//! A scripted OpenAI-compatible Chat Completions server on loopback: a small
//! HTTP/1.1 server that answers `POST /v1/chat/completions` with scripted
//! SSE streams.
//!
//! A script is keyed by the text of the request's last user message (the
//! prompt), and each model call within that prompt's turn takes the next
//! step (the step index is the number of assistant messages after that user
//! message). A step can hold at a named point until the test releases it,
//! which is how tests make turns long and concurrent without sleeping.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use std::sync::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::WAIT;
use crate::support::http_request::read_json_request;

/// How long a hold point waits for its release before giving up (a test
/// that forgets to release still ends).
const HOLD_LIMIT: Duration = Duration::from_secs(60);

/// One piece of a scripted response.
#[derive(Debug, Clone)]
pub enum Act {
    Text(String),
    Reasoning(String),
    Refusal(String),
    /// A whole tool call in one chunk.
    Call {
        id: String,
        name: String,
        arguments: String,
    },
    /// A tool call whose arguments arrive in several chunks.
    CallInParts {
        id: String,
        name: String,
        parts: Vec<String>,
    },
    Finish(&'static str),
    Done,
    /// Waits here until the test releases the hold of this name.
    Hold(String),
    /// Raw bytes of the event stream.
    Raw(String),
    /// Answers with this HTTP status and body instead of a stream (must be
    /// the only act of its step).
    Status(u16, String),
}

pub fn text(text: &str) -> Act {
    Act::Text(text.into())
}

pub fn call(id: &str, name: &str, arguments: Value) -> Act {
    Act::Call {
        id: id.into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

pub fn hold(name: &str) -> Act {
    Act::Hold(name.into())
}

/// A step that says `words` and ends the turn.
pub fn say(words: &str) -> Vec<Act> {
    vec![text(words), Act::Finish("stop"), Act::Done]
}

/// A step that asks for one tool call.
pub fn use_tool(id: &str, name: &str, arguments: Value) -> Vec<Act> {
    vec![
        call(id, name, arguments),
        Act::Finish("tool_calls"),
        Act::Done,
    ]
}

struct HoldState {
    reached: watch::Sender<bool>,
    released: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    scripts: Mutex<HashMap<String, Vec<Vec<Act>>>>,
    holds: Mutex<HashMap<String, Arc<HoldState>>>,
    requests: Mutex<Vec<Value>>,
    request_count: watch::Sender<usize>,
}

impl State {
    fn hold(&self, name: &str) -> Arc<HoldState> {
        self.holds
            .lock()
            .unwrap()
            .entry(name.to_owned())
            .or_insert_with(|| {
                Arc::new(HoldState {
                    reached: watch::Sender::new(false),
                    released: watch::Sender::new(false),
                })
            })
            .clone()
    }
}

/// A hold point, seen from the test.
pub struct Hold {
    state: Arc<HoldState>,
    name: String,
}

impl Hold {
    /// Waits until a response has reached this point.
    pub async fn reached(&self) {
        let mut reached = self.state.reached.subscribe();
        tokio::time::timeout(WAIT, reached.wait_for(|r| *r))
            .await
            .unwrap_or_else(|_| panic!("no response reached hold {:?}", self.name))
            .expect("hold state alive");
    }

    pub fn release(&self) {
        self.state.released.send_replace(true);
    }
}

pub struct ModelServer {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl ModelServer {
    pub async fn start() -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let accepting = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, accepting.clone()));
            }
        });
        ModelServer { addr, state }
    }

    /// The `--model-url` for this server.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The steps answering the model calls of the turn for `prompt`.
    pub fn script(&self, prompt: &str, steps: Vec<Vec<Act>>) {
        self.state
            .scripts
            .lock()
            .unwrap()
            .insert(prompt.to_owned(), steps);
    }

    pub fn hold(&self, name: &str) -> Hold {
        Hold {
            state: self.state.hold(name),
            name: name.to_owned(),
        }
    }

    /// Every request body received so far whose last user message is
    /// `prompt`, in arrival order.
    pub fn requests_for(&self, prompt: &str) -> Vec<Value> {
        self.state
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|body| last_user_text(body).as_deref() == Some(prompt))
            .cloned()
            .collect()
    }

    pub fn request_count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }

    /// Waits until `n` requests for `prompt` have arrived.
    pub async fn wait_requests(&self, prompt: &str, n: usize) -> Vec<Value> {
        let mut count = self.state.request_count.subscribe();
        let waited = tokio::time::timeout(WAIT, async {
            loop {
                let requests = self.requests_for(prompt);
                if requests.len() >= n {
                    return requests;
                }
                count.changed().await.expect("server alive");
            }
        })
        .await;
        waited.unwrap_or_else(|_| panic!("fewer than {n} model requests for {prompt:?}"))
    }
}

/// The text of the last user message.
pub fn last_user_text(body: &Value) -> Option<String> {
    body["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .map(str::to_owned)
}

/// The messages of a request, as `(role, content)` pairs for assertions.
pub fn roles_and_contents(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Which step of the script a request is: the assistant messages after the
/// last user message.
fn step_index(body: &Value) -> usize {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last_user = messages.iter().rposition(|m| m["role"] == "user");
    match last_user {
        Some(position) => messages[position..]
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count(),
        None => 0,
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {body}\n\n")
}

async fn serve(mut stream: TcpStream, state: Arc<State>) {
    let Some(body) = read_json_request(&mut stream).await else {
        return;
    };
    let prompt = last_user_text(&body).unwrap_or_default();
    let step = step_index(&body);
    state.requests.lock().unwrap().push(body);
    state.request_count.send_modify(|n| *n += 1);
    let acts = state
        .scripts
        .lock()
        .unwrap()
        .get(&prompt)
        .and_then(|steps| steps.get(step).cloned());
    let Some(acts) = acts else {
        let message = format!("no script for prompt {prompt:?} step {step}");
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{message}",
                    message.len()
                )
                .as_bytes(),
            )
            .await;
        return;
    };
    if let [Act::Status(status, text)] = acts.as_slice() {
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                )
                .as_bytes(),
            )
            .await;
        return;
    }
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for act in acts {
        let bytes = match act {
            Act::Text(text) => chunk(json!({"role": "assistant", "content": text}), None),
            Act::Reasoning(text) => chunk(json!({"reasoning_content": text}), None),
            Act::Refusal(text) => chunk(json!({"refusal": text}), None),
            Act::Call {
                id,
                name,
                arguments,
            } => chunk(
                json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                    "function": {"name": name, "arguments": arguments}}]}),
                None,
            ),
            Act::CallInParts { id, name, parts } => {
                let mut out = chunk(
                    json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""}}]}),
                    None,
                );
                for part in parts {
                    out.push_str(&chunk(
                        json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                        None,
                    ));
                }
                out
            }
            Act::Finish(reason) => chunk(json!({}), Some(reason)),
            Act::Done => "data: [DONE]\n\n".to_owned(),
            Act::Raw(raw) => raw,
            Act::Hold(name) => {
                let hold = state.hold(&name);
                hold.reached.send_replace(true);
                let mut released = hold.released.subscribe();
                let _ = tokio::time::timeout(HOLD_LIMIT, released.wait_for(|r| *r)).await;
                continue;
            }
            Act::Status(..) => continue,
        };
        if stream.write_all(bytes.as_bytes()).await.is_err() || stream.flush().await.is_err() {
            return;
        }
    }
    let _ = stream.shutdown().await;
}
