//! The callback service itself: what it answers a provider's request, and
//! where it sends a provider's notification (section 9.3's table).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use switchboard_client::{method_not_found, reply, Client, Handler, Notification, Reply, Request};
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::tool_call::callback;
use switchboard_protocol::{ErrorCode, Principal};

use super::{CallSink, Callbacks, LogLevel, NOTIFY_BOUND};
use crate::tool::BoxFuture;

/// How long past its call's deadline a question to the client stays open.
/// The call's end (its answer, or the hub's timeout answer, whose timer
/// starts a little after the deadline here was taken) voids the question
/// first; the deadline is only a backstop for an end that never arrives.
/// Without the grace, the question would be answered "no answer" just
/// before the call's timeout, and the provider could turn that into a
/// result the caller takes for the call's own.
const PAST_DEADLINE: Duration = Duration::from_secs(2);

/// Registers the callback service on `client` (the SDK registers it again
/// after each reconnect). A failure leaves the consumer without one: no
/// `client` member is sent, and providers answer their servers' requests as
/// not supported.
pub(crate) async fn register(callbacks: &Arc<Callbacks>, client: &Client) {
    let metadata = json!({
        "protocol": callback::PROTOCOL,
        "version": callback::VERSION,
        "callback": true,
    });
    let service = CallbackService {
        callbacks: Arc::downgrade(callbacks),
    };
    match client.register(&metadata, service).await {
        Ok(handle) => callbacks.set_service(handle),
        Err(error) => {
            tracing::warn!(%error, "cannot register the callback service; providers' requests to MCP clients will be refused")
        }
    }
}

/// The hub-side handler. Holds the registry weakly: the client keeps its
/// handlers for its whole life, and the registry holds the client's handle.
struct CallbackService {
    callbacks: Weak<Callbacks>,
}

impl Handler for CallbackService {
    fn request(&self, request: Request) -> BoxFuture<Reply> {
        let callbacks = self.callbacks.clone();
        Box::pin(async move {
            match callbacks.upgrade() {
                Some(callbacks) => callbacks.on_request(request).await,
                None => Err(ErrorObject::new(
                    ErrorCode::InternalError,
                    "the consumer is closing",
                )),
            }
        })
    }

    fn notification(&self, notification: Notification) -> BoxFuture<()> {
        let callbacks = self.callbacks.clone();
        Box::pin(async move {
            if let Some(callbacks) = callbacks.upgrade() {
                callbacks.on_notification(notification).await;
            }
        })
    }
}

/// Takes `_meta["switchboard/call"]` out of `params` (and `_meta` itself
/// when nothing else is left in it).
fn take_call(params: &mut Map<String, Value>) -> Option<String> {
    let meta = params.get_mut("_meta")?.as_object_mut()?;
    let call = meta.remove(callback::CALL_META);
    if meta.is_empty() {
        params.remove("_meta");
    }
    match call? {
        Value::String(call) => Some(call),
        _ => None,
    }
}

fn unknown_call(method: &str, call: Option<&str>) -> ErrorObject {
    let message = match call {
        Some(call) => format!("{method} names the call {call:?}, which is not in flight to a service of the sender's principal"),
        None => format!("{method} names no call (_meta[\"{}\"])", callback::CALL_META),
    };
    ErrorObject::new(ErrorCode::InvalidParams, message)
        .with_data(&json!({"code": callback::UNKNOWN_CALL, "call": call}))
}

/// The params of a message as an object (`None` when they are not one).
fn object_params(params: Option<&serde_json::value::RawValue>) -> Option<Map<String, Value>> {
    match params {
        None => Some(Map::new()),
        Some(raw) => serde_json::from_str(raw.get()).ok(),
    }
}

impl Callbacks {
    pub(super) async fn on_request(&self, request: Request) -> Reply {
        let method = request.method.as_str();
        if ![
            callback::SAMPLING_CREATE_MESSAGE,
            callback::ELICITATION_CREATE,
            callback::ROOTS_LIST,
        ]
        .contains(&method)
        {
            return Err(method_not_found(method));
        }
        let Some(mut params) = object_params(request.params.as_deref()) else {
            return Err(ErrorObject::new(
                ErrorCode::InvalidParams,
                format!("the params of {method} are not an object"),
            ));
        };
        let call = take_call(&mut params);
        let found = call.as_deref().and_then(|call| {
            let registry = self.registry.lock();
            let in_flight = registry.calls.get(call)?;
            (in_flight.provider.principal == request.sender_principal).then(|| {
                (
                    in_flight.sink.clone(),
                    in_flight.deadline,
                    in_flight.ended.clone(),
                )
            })
        });
        let Some((sink, deadline, ended)) = found else {
            self.count_refused();
            tracing::warn!(method, call = ?call, sender = %request.sender_principal, "refusing a callback that names no call in flight");
            return Err(unknown_call(method, call.as_deref()));
        };
        let wait = deadline.saturating_duration_since(Instant::now()) + PAST_DEADLINE;
        tokio::select! {
            answer = tokio::time::timeout(wait, sink.request(method, Value::Object(params))) => match answer {
                Ok(Ok(result)) => reply(&result),
                Ok(Err(error)) => Err(error),
                Err(_) => Err(ErrorObject::new(
                    ErrorCode::InternalError,
                    format!("the MCP client did not answer {method} before the call's deadline ({wait:?})"),
                ).with_data(&json!({"code": "no_answer"}))),
            },
            () = ended.cancelled() => Err(ErrorObject::new(
                ErrorCode::InternalError,
                format!("the call {method} belongs to has ended"),
            ).with_data(&json!({"code": "call_ended"}))),
            // The hub answered the provider already; nothing is sent.
            () = request.cancelled.cancelled() => Err(ErrorObject::new(ErrorCode::RequestCancelled, "cancelled")),
        }
    }

    pub(super) async fn on_notification(&self, notification: Notification) {
        let method = notification.method.as_str();
        let targets = object_params(notification.params.as_deref())
            .and_then(|mut params| {
                let call = take_call(&mut params);
                let sender = &notification.sender_principal;
                match method {
                    callback::PROGRESS => self.progress_target(call, params, sender),
                    callback::LOGGING_MESSAGE => self.log_targets(call, params, sender),
                    callback::RESOURCE_UPDATED => self.updated_targets(params, sender),
                    _ => None,
                }
            })
            .filter(|targets| !targets.is_empty());
        let Some(targets) = targets else {
            self.count_dropped();
            tracing::debug!(method, sender = %notification.sender_principal, "dropping a callback notification that belongs to nothing in flight");
            return;
        };
        for (sink, params) in targets {
            if tokio::time::timeout(NOTIFY_BOUND, sink.notify(method, params))
                .await
                .is_err()
            {
                tracing::debug!(method, "a session took too long to take a notification");
            }
        }
    }

    /// Progress of a call: named by the token the call carried (its id) or
    /// by `_meta`; only increasing; under the session's own token.
    fn progress_target(
        &self,
        call: Option<String>,
        mut params: Map<String, Value>,
        sender: &Principal,
    ) -> Option<Vec<(Arc<dyn CallSink>, Value)>> {
        let call = call.or_else(|| params.get("progressToken")?.as_str().map(str::to_owned))?;
        let progress = params.get("progress")?.as_f64()?;
        let mut registry = self.registry.lock();
        let in_flight = registry.calls.get_mut(&call)?;
        if in_flight.provider.principal != *sender
            || in_flight.last_progress.is_some_and(|last| progress <= last)
        {
            return None;
        }
        let token = in_flight.progress_token.clone()?;
        in_flight.last_progress = Some(progress);
        params.insert("progressToken".into(), token);
        Some(vec![(in_flight.sink.clone(), Value::Object(params))])
    }

    /// A log message of a call goes to that call's session; one of no call
    /// to every session whose level it meets, if a provider of the sender's
    /// principal was told a level.
    fn log_targets(
        &self,
        call: Option<String>,
        params: Map<String, Value>,
        sender: &Principal,
    ) -> Option<Vec<(Arc<dyn CallSink>, Value)>> {
        let registry = self.registry.lock();
        if let Some(call) = call {
            let in_flight = registry.calls.get(&call)?;
            return (in_flight.provider.principal == *sender)
                .then(|| vec![(in_flight.sink.clone(), Value::Object(params))]);
        }
        if !registry.levels.told_a_provider_of(sender) {
            return None;
        }
        let level = LogLevel::parse(params.get("level")?.as_str()?)?;
        let params = Value::Object(params);
        Some(
            registry
                .levels
                .sessions_for(level)
                .into_iter()
                .filter_map(|session| registry.sessions.get(&session).cloned())
                .map(|sink| (sink, params.clone()))
                .collect(),
        )
    }

    /// A resource update goes to the sessions subscribed to that URI at a
    /// provider of the sender's principal.
    fn updated_targets(
        &self,
        params: Map<String, Value>,
        sender: &Principal,
    ) -> Option<Vec<(Arc<dyn CallSink>, Value)>> {
        let uri = params.get("uri")?.as_str()?;
        let registry = self.registry.lock();
        let subscription = registry.subscriptions.get(uri)?;
        if subscription.provider.principal != *sender {
            return None;
        }
        let params = Value::Object(params);
        Some(
            subscription
                .sessions
                .iter()
                .filter_map(|session| registry.sessions.get(session).cloned())
                .map(|sink| (sink, params.clone()))
                .collect(),
        )
    }
}
