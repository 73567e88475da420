//! The model: an OpenAI-compatible Chat Completions endpoint, streamed over
//! server-sent events.

mod wire;

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};
use serde_json::Value;

pub use wire::{FinishReason, ModelEvent, ToolDefinition};

use crate::options::ModelOptions;

/// How much of an error response body is quoted back.
const ERROR_BODY_BYTES: usize = 4096;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot build the HTTP client: {0}")]
    Client(reqwest::Error),
    #[error("cannot reach the model endpoint {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("the model endpoint answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the model stream broke: {0}")]
    Stream(String),
    #[error("the model stream ended before the answer was complete")]
    Truncated,
    #[error("the model sent a chunk that is not valid JSON ({error}): {excerpt}")]
    BadChunk { error: String, excerpt: String },
    #[error("the model endpoint reported an error: {0}")]
    Remote(String),
}

/// A client for one endpoint and model. Cheap to clone.
#[derive(Clone)]
pub struct ModelClient {
    http: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
}

impl ModelClient {
    pub fn new(options: &ModelOptions) -> Result<Self, ModelError> {
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(options.read_timeout)
            .build()
            .map_err(ModelError::Client)?;
        Ok(ModelClient {
            http,
            url: format!(
                "{}/chat/completions",
                options.base_url.trim_end_matches('/')
            ),
            model: options.model.clone(),
            api_key: options.api_key.clone(),
        })
    }

    /// Starts one streamed completion.
    pub async fn stream(
        &self,
        messages: &[Value],
        tools: &[ToolDefinition],
    ) -> Result<ModelStream, ModelError> {
        let body = wire::request_body(&self.model, messages, tools);
        let mut request = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body.to_string());
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|error| ModelError::Connect {
            url: self.url.clone(),
            reason: with_causes(&error),
        })?;
        let status = response.status();
        if !status.is_success() {
            let body = read_prefix(response, ERROR_BODY_BYTES).await;
            return Err(ModelError::Status {
                status: status.as_u16(),
                body: wire::excerpt(body.trim()),
            });
        }
        let is_event_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if is_event_stream {
            Ok(ModelStream::events(response))
        } else {
            // A server that ignored `stream: true` answers with one JSON
            // completion; it is replayed as the same events.
            let text = response
                .text()
                .await
                .map_err(|error| ModelError::Stream(error.to_string()))?;
            let mut events = wire::decode_chunk(&text)?;
            if !events.iter().any(|e| matches!(e, ModelEvent::Finish(_))) {
                events.push(ModelEvent::Finish(FinishReason::Stop));
            }
            Ok(ModelStream::ready(events))
        }
    }
}

/// An error and its causes, `: `-separated (reqwest's own message leaves out
/// the part that says what went wrong, such as "connection refused").
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let message = inner.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        cause = inner.source();
    }
    text
}

/// rustls needs a process-wide crypto provider; ring is the lighter one to
/// build. Installing twice is harmless (the second attempt is refused).
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

async fn read_prefix(response: reqwest::Response, limit: usize) -> String {
    let mut bytes = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        bytes.extend_from_slice(&chunk);
        if bytes.len() >= limit {
            bytes.truncate(limit);
            break;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

type SseStream = Pin<
    Box<
        dyn Stream<
                Item = Result<
                    eventsource_stream::Event,
                    eventsource_stream::EventStreamError<reqwest::Error>,
                >,
            > + Send,
    >,
>;

/// The events of one completion, in order. `None` once it is complete.
pub struct ModelStream {
    sse: Option<SseStream>,
    pending: VecDeque<ModelEvent>,
    saw_finish: bool,
    done: bool,
}

impl ModelStream {
    fn events(response: reqwest::Response) -> Self {
        ModelStream {
            sse: Some(Box::pin(response.bytes_stream().eventsource())),
            pending: VecDeque::new(),
            saw_finish: false,
            done: false,
        }
    }

    fn ready(events: Vec<ModelEvent>) -> Self {
        ModelStream {
            sse: None,
            pending: events.into(),
            saw_finish: true,
            done: true,
        }
    }

    /// The next event; `None` after `[DONE]` (or a clean end after a finish
    /// reason, which some servers send instead of `[DONE]`).
    pub async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            let sse = self.sse.as_mut()?;
            match sse.next().await {
                None => {
                    self.done = true;
                    return (!self.saw_finish).then_some(Err(ModelError::Truncated));
                }
                Some(Err(error)) => {
                    self.done = true;
                    return Some(Err(ModelError::Stream(with_causes(&error))));
                }
                Some(Ok(event)) => {
                    let data = event.data.trim();
                    if data == "[DONE]" {
                        self.done = true;
                        return None;
                    }
                    if data.is_empty() {
                        continue;
                    }
                    match wire::decode_chunk(data) {
                        Ok(events) => {
                            self.saw_finish |=
                                events.iter().any(|e| matches!(e, ModelEvent::Finish(_)));
                            self.pending.extend(events);
                        }
                        Err(error) => {
                            self.done = true;
                            return Some(Err(error));
                        }
                    }
                }
            }
        }
    }
}
