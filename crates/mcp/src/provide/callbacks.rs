//! The hosted server's own traffic, back to the callers it belongs to
//! (`docs/reference/tool-calls.md` section 9.4): its sampling, elicitation
//! and roots requests to the callback service of the call they are
//! attributed to, its log messages and resource updates to whoever
//! listens, its list changes to the main loop. This is the MCP client
//! layer's [`Handler`] of every connection to the server.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_client::{ErrorKind, RequestOptions};
use switchboard_mcp_client::{Handler, HandlerFuture, ListKind, ServerNotification, ServerRequest};
use switchboard_protocol::tool_call::callback;
use switchboard_protocol::{ErrorCode, ErrorObject};

use super::calls::{Attribution, CallEntry};
use super::listeners::severity;
use super::relay::{Counted, Relay};

/// The capabilities declared to the server: everything a caller's MCP
/// client may offer, since the server is shared by all of them; a caller
/// whose client lacks one is refused per request.
fn declared() -> Value {
    json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}})
}

pub(crate) struct Callbacks(pub(crate) Arc<Relay>);

impl Handler for Callbacks {
    fn capabilities(&self) -> Value {
        declared()
    }

    fn create_message(
        &self,
        request: ServerRequest,
    ) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        Box::pin(self.0.clone().ask_caller(request))
    }

    fn elicit(&self, request: ServerRequest) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        Box::pin(self.0.clone().ask_caller(request))
    }

    fn list_roots(&self, request: ServerRequest) -> HandlerFuture<'_, Result<Value, ErrorObject>> {
        Box::pin(self.0.clone().ask_caller(request))
    }

    fn on_logging_message(&self, notification: ServerNotification) {
        self.0.log_message(notification);
    }

    fn on_resource_updated(&self, notification: ServerNotification) {
        self.0.resource_updated(notification);
    }

    fn on_list_changed(&self, list: ListKind) {
        // Tools are listed again by the supervisor itself.
        if list != ListKind::Tools {
            let _ = self.0.changes.send(list);
        }
    }
}

/// The capability a request needs of the caller's MCP client, in words.
fn needs(request: &ServerRequest) -> (&'static str, &'static str) {
    match request.method.as_str() {
        callback::SAMPLING_CREATE_MESSAGE => ("sampling", "sampling"),
        callback::ELICITATION_CREATE if request.params["mode"] == "url" => {
            ("elicitation", "URL elicitation")
        }
        callback::ELICITATION_CREATE => ("elicitation", "elicitation"),
        _ => ("roots", "roots"),
    }
}

fn declares(entry: &CallEntry, request: &ServerRequest) -> bool {
    let Some(client) = &entry.client else {
        return false;
    };
    match needs(request) {
        (_, "URL elicitation") => client.capabilities["elicitation"]
            .get("url")
            .is_some_and(|url| !url.is_null()),
        (capability, _) => client.declares(capability),
    }
}

fn unsupported(what: &str) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::MethodNotFound,
        format!("the client does not support {what}"),
    )
}

/// `params` with `_meta["switchboard/call"]` naming the call.
fn naming_call(mut params: Value, tool_call_id: &str) -> Value {
    if !params.is_object() {
        params = json!({});
    }
    if !params["_meta"].is_object() {
        params["_meta"] = json!({});
    }
    params["_meta"][callback::CALL_META] = json!(tool_call_id);
    params
}

impl Relay {
    /// A server's request during a call, to that call's client.
    async fn ask_caller(self: Arc<Self>, request: ServerRequest) -> Result<Value, ErrorObject> {
        let method = request.method.clone();
        let entry = match self.calls.attribute_request(&request.params, request.call) {
            Attribution::Call(entry) => entry,
            // Roots too: an empty list would be taken for the caller's
            // roots, and servers that keep the first answer (the
            // reference server does) would never ask during a call.
            Attribution::NoCall => {
                self.count(
                    Counted::NoCall,
                    &method,
                    "a request of the server during no call",
                );
                return Err(unsupported(needs(&request).1));
            }
            Attribution::Ambiguous { in_flight } => {
                self.count(
                    Counted::Ambiguous,
                    &method,
                    &format!("{in_flight} calls in flight and the request names none"),
                );
                return Err(ErrorObject::new(
                    ErrorCode::InternalError,
                    "several calls are in flight and the request names none of them",
                ));
            }
        };
        let client = match (&entry.client, declares(&entry, &request)) {
            (Some(client), true) => client.clone(),
            _ => {
                self.count(
                    Counted::Undeclared,
                    &method,
                    "the call's client does not declare it",
                );
                return Err(unsupported(needs(&request).1));
            }
        };
        let Some(hub) = self.hub.get().cloned() else {
            return Err(unreachable("the hub is not connected yet"));
        };
        let params = naming_call(request.params, &entry.tool_call_id);
        let params = serde_json::value::to_raw_value(&params)
            .map_err(|error| ErrorObject::new(ErrorCode::InternalError, error.to_string()))?;
        let bound = Duration::from_millis(hub.limits().max_request_timeout_ms);
        let options = RequestOptions {
            timeout: Some(bound),
        };
        let asked = hub.request_raw(&client.service, &method, Some(&params), options);
        let ended = async {
            match &entry.ended {
                Some(ended) => ended.cancelled().await,
                None => std::future::pending().await,
            }
        };
        // Bounded by the call: when the hub gives up on it, so does this.
        let answer = tokio::select! {
            answer = asked => answer,
            () = ended => return Err(unreachable("the call ended before its client answered")),
            () = request.cancelled.cancelled() => {
                return Err(ErrorObject::new(ErrorCode::RequestCancelled, "cancelled by the server"))
            }
        };
        match answer {
            Ok(raw) => serde_json::from_str::<Value>(raw.get()).map_err(|error| {
                ErrorObject::new(
                    ErrorCode::InternalError,
                    format!("the client's answer is not JSON: {error}"),
                )
            }),
            Err(switchboard_client::Error::Rpc(error)) => match error.kind() {
                ErrorKind::Application { .. }
                | ErrorKind::MethodNotFound
                | ErrorKind::InvalidParams { .. }
                | ErrorKind::InvalidRequest { .. }
                | ErrorKind::Internal => Err(ErrorObject {
                    code: error.code,
                    message: error.message,
                    data: error.data,
                }),
                _ => Err(unreachable(&error.to_string())),
            },
            Err(error) => Err(unreachable(&error.to_string())),
        }
    }

    /// `notifications/message`: a call's to its client (if the level it
    /// set lets it through), else to every client that set a level it
    /// passes.
    fn log_message(&self, notification: ServerNotification) {
        let method = callback::LOGGING_MESSAGE;
        let level = notification.params["level"].as_str().and_then(severity);
        let Some(level) = level else {
            self.count(Counted::Dropped, method, "a log message of no known level");
            return;
        };
        let entry = self
            .calls
            .attribute_notification(&notification.params, notification.call);
        let targets: Vec<(String, Value)> = match &entry {
            Some(entry) => {
                let listeners = self.listeners.lock();
                entry
                    .client
                    .as_ref()
                    .filter(|client| {
                        listeners
                            .level_of(&client.service)
                            .is_none_or(|wanted| wanted <= level)
                    })
                    .map(|client| {
                        let params = naming_call(notification.params.clone(), &entry.tool_call_id);
                        (client.service.clone(), params)
                    })
                    .into_iter()
                    .collect()
            }
            None => self
                .listeners
                .lock()
                .log_listeners(level)
                .into_iter()
                .map(|service| (service, notification.params.clone()))
                .collect(),
        };
        if targets.is_empty() {
            self.count(Counted::Dropped, method, "a log message nobody listens to");
        }
        for (service, params) in targets {
            self.send(service, method, params);
        }
    }

    /// `notifications/resources/updated`: to every subscriber of the URI.
    fn resource_updated(&self, notification: ServerNotification) {
        let method = callback::RESOURCE_UPDATED;
        let uri = notification.params["uri"].as_str().unwrap_or_default();
        let subscribers = self.listeners.lock().subscribers(uri);
        if subscribers.is_empty() {
            self.count(
                Counted::Dropped,
                method,
                "an update of a resource nobody subscribed to",
            );
        }
        for service in subscribers {
            self.send(service, method, notification.params.clone());
        }
    }
}

/// The caller could not be reached: only this request fails.
fn unreachable(why: &str) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::InternalError,
        format!("the client of this call cannot be reached: {why}"),
    )
}
