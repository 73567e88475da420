//! The consumer's callback service (`docs/reference/tool-calls.md`
//! section 9.3) and the registry it routes by.
//!
//! One service per consumer hub connection, metadata
//! `{"protocol":"mcp-client","version":1,"callback":true}`, registered once
//! and registered again by the SDK after every reconnect (under a new id:
//! [`Callbacks::service_id`] is read at each call). Version-2 providers send
//! it their server's requests and notifications during a call, naming the
//! call by `_meta["switchboard/call"]` (progress by the token the call
//! carried); the service ([`service.rs`](service)) hands each to the sink of
//! the front's session that made that call, and refuses or drops (and
//! counts) whatever names no call in flight to a service of the sender's
//! principal.
//!
//! [`Callbacks`] owns the registry: calls in flight ([`CallGuard`], one
//! entry per call, removed when the guard drops), the subscriptions and the
//! log levels of the sessions. Its one lock is never held across an await:
//! each handler takes what it needs (a sink, a copy of an identity) and
//! lets go before it forwards anything.

mod levels;
mod service;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use serde_json::value::RawValue;
use serde_json::Value;
use switchboard_client::ServiceHandle;
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::tool_call::ClientRef;
use tokio_util::sync::CancellationToken;

pub use levels::LogLevel;
pub(super) use service::register;

use super::backend::ProviderIdentity;
use crate::tool::BoxFuture;

/// Where what a provider sends back goes: the front's session (for a call,
/// its session; a front may also give one call a sink of its own, as a
/// stateless MCP request does). Implemented by the front, per session.
pub trait CallSink: Send + Sync + 'static {
    /// A request of the provider's server (`sampling/createMessage`,
    /// `elicitation/create`, `roots/list`) with MCP's params (the
    /// `switchboard/call` key taken out of `_meta`): the MCP client's
    /// answer. The consumer bounds the wait by the call's deadline and drops
    /// the future when the call ends; the sink cancels its own request then.
    fn request(&self, method: &str, params: Value) -> BoxFuture<Result<Value, ErrorObject>>;

    /// A notification (`notifications/progress` under the session's own
    /// token, `notifications/message`, `notifications/resources/updated`).
    fn notify(&self, method: &str, params: Value) -> BoxFuture<()>;
}

/// How long forwarding one notification to a session may take; one slow
/// session never holds the callback service's notifications longer.
pub const NOTIFY_BOUND: Duration = Duration::from_secs(5);

/// How long a call's answer may wait for the reports that arrived before
/// it ([`Callbacks::settle`]): they are normally handled in microseconds;
/// a session stalled on its own client delays others' answers no longer.
const SETTLE_BOUND: Duration = Duration::from_secs(1);

/// The registry of the callback service; owned by the consumer.
#[derive(Default)]
pub struct Callbacks {
    /// The registered service, once the hub is reached.
    service: RwLock<Option<ServiceHandle>>,
    registry: Mutex<Registry>,
    next_call: AtomicU64,
    next_session: AtomicU64,
    refused_requests: AtomicU64,
    dropped_notifications: AtomicU64,
}

#[derive(Default)]
struct Registry {
    /// Calls in flight, by the id they carry (`tool_call_id` and
    /// `_meta["switchboard/call"]`).
    calls: HashMap<String, InFlight>,
    /// The session-level sinks (log messages and resource updates that
    /// belong to no call).
    sessions: HashMap<u64, Arc<dyn CallSink>>,
    /// Subscribed URIs: who subscribed, and at which provider.
    subscriptions: HashMap<String, Subscription>,
    /// Log levels set by sessions, and what each provider was told.
    levels: levels::Levels,
}

/// One call in flight.
struct InFlight {
    sink: Arc<dyn CallSink>,
    /// The provider the call went to: only its principal may send for it.
    provider: ProviderIdentity,
    /// The session's own progress token, put back on the way out.
    progress_token: Option<Value>,
    /// The last progress value forwarded (progress only increases).
    last_progress: Option<f64>,
    /// What no callback of this call waits past.
    deadline: Instant,
    /// Cancelled when the call ends: callbacks still waiting give up.
    ended: CancellationToken,
}

pub(super) struct Subscription {
    pub(super) provider: ProviderIdentity,
    pub(super) sessions: HashSet<u64>,
}

/// What a call of a session needs before it is sent.
pub struct CallStart {
    /// A label for the id (an MCP request id): the id is
    /// `<prefix><n>-<label>`, unique in the consumer whatever the label.
    pub label: String,
    pub provider: ProviderIdentity,
    /// The session's own progress token, if it asked for progress.
    pub progress_token: Option<Value>,
    /// How long the call may run (its timeout within the hub's ceiling).
    pub bound: Duration,
    /// Where its callbacks go; `None`: the session's sink.
    pub sink: Option<Arc<dyn CallSink>>,
}

impl Callbacks {
    /// The callback service's id now; `None` before it is registered (or
    /// when registering it failed: no `client` is sent then).
    pub fn service_id(&self) -> Option<String> {
        self.service.read().as_ref().map(ServiceHandle::id)
    }

    pub(super) fn set_service(&self, service: ServiceHandle) {
        *self.service.write() = Some(service);
    }

    /// Returns once the notifications that reached the callback service
    /// before now went to their sessions (at most [`SETTLE_BOUND`] later).
    /// A call's answer is delivered at once, its progress and log messages
    /// on the service's worker: without this, a report the provider sent
    /// just before its answer could reach the session after the answer,
    /// where MCP drops it.
    pub(super) async fn settle(&self) {
        let Some(service) = self.service.read().clone() else {
            return;
        };
        let _ = tokio::time::timeout(SETTLE_BOUND, service.notifications_handled()).await;
    }

    /// The `client` member for a request of a session whose MCP client
    /// declared `capabilities`.
    pub fn client_ref(&self, capabilities: &Value) -> Option<ClientRef> {
        Some(ClientRef {
            service: self.service_id()?,
            capabilities: capabilities.clone(),
        })
    }

    pub(super) fn open_session(&self, sink: Arc<dyn CallSink>) -> u64 {
        let id = self.next_session.fetch_add(1, Ordering::Relaxed) + 1;
        self.registry.lock().sessions.insert(id, sink);
        id
    }

    /// Forgets `session`: its sink, calls and level. Returns the URIs only
    /// it had subscribed to, with where (the caller unsubscribes them).
    pub(super) fn close_session(&self, session: u64) -> Vec<(String, ProviderIdentity)> {
        let mut registry = self.registry.lock();
        registry.sessions.remove(&session);
        registry.levels.forget(session);
        let mut left = Vec::new();
        registry.subscriptions.retain(|uri, subscription| {
            if subscription.sessions.remove(&session) && subscription.sessions.is_empty() {
                left.push((uri.clone(), subscription.provider.clone()));
                return false;
            }
            true
        });
        left
    }

    /// Registers a call of `session`; it is in flight until the guard drops.
    pub(super) fn begin(self: &Arc<Self>, session: u64, start: CallStart) -> CallGuard {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("sbc{n}-{}", start.label);
        let ended = CancellationToken::new();
        let mut registry = self.registry.lock();
        let Some(sink) = start
            .sink
            .or_else(|| registry.sessions.get(&session).cloned())
        else {
            // A closed session: its call has nowhere to send callbacks.
            return CallGuard::detached(id, ended);
        };
        registry.calls.insert(
            id.clone(),
            InFlight {
                sink,
                provider: start.provider,
                progress_token: start.progress_token,
                last_progress: None,
                deadline: Instant::now() + start.bound,
                ended: ended.clone(),
            },
        );
        CallGuard {
            callbacks: Some(self.clone()),
            id,
            ended,
        }
    }

    /// Moves a call's deadline (a call that became a task lives on).
    pub(super) fn extend(&self, id: &str, bound: Duration) {
        if let Some(call) = self.registry.lock().calls.get_mut(id) {
            call.deadline = Instant::now() + bound;
        }
    }

    /// Records that `session` subscribed to `uri` at `provider`; whether it
    /// is the first subscription of that URI (the provider is then asked).
    pub(super) fn subscribe(&self, session: u64, uri: &str, provider: &ProviderIdentity) -> bool {
        let mut registry = self.registry.lock();
        let subscription = registry
            .subscriptions
            .entry(uri.to_owned())
            .or_insert_with(|| Subscription {
                provider: provider.clone(),
                sessions: HashSet::new(),
            });
        let first = subscription.sessions.is_empty() || subscription.provider != *provider;
        subscription.provider = provider.clone();
        subscription.sessions.insert(session);
        first
    }

    /// Forgets `session`'s subscription to `uri`; the provider to tell when
    /// it was the last one.
    pub(super) fn unsubscribe(&self, session: u64, uri: &str) -> Option<ProviderIdentity> {
        let mut registry = self.registry.lock();
        let subscription = registry.subscriptions.get_mut(uri)?;
        if !subscription.sessions.remove(&session) || !subscription.sessions.is_empty() {
            return None;
        }
        registry
            .subscriptions
            .remove(uri)
            .map(|subscription| subscription.provider)
    }

    /// Records `session`'s log level; the level providers should now have
    /// (the most verbose any session asked for).
    pub(super) fn set_level(&self, session: u64, level: LogLevel) -> LogLevel {
        self.registry.lock().levels.set(session, level)
    }

    /// Records that `provider` was told `level`.
    pub(super) fn level_sent(&self, provider: &ProviderIdentity, level: LogLevel) {
        self.registry.lock().levels.sent(provider, level);
    }

    /// The most verbose level any session asked for, and whether
    /// `provider` was already told it.
    pub(super) fn level_for(&self, provider: &ProviderIdentity) -> Option<(LogLevel, bool)> {
        self.registry.lock().levels.wanted_by(provider)
    }

    /// What the callback service refused and dropped so far.
    pub fn stats(&self) -> CallbackStats {
        CallbackStats {
            refused_requests: self.refused_requests.load(Ordering::Relaxed),
            dropped_notifications: self.dropped_notifications.load(Ordering::Relaxed),
        }
    }

    fn count_refused(&self) {
        self.refused_requests.fetch_add(1, Ordering::Relaxed);
    }

    fn count_dropped(&self) {
        self.dropped_notifications.fetch_add(1, Ordering::Relaxed);
    }

    fn end(&self, id: &str) {
        if let Some(call) = self.registry.lock().calls.remove(id) {
            call.ended.cancel();
        }
    }
}

/// Counters of the callback service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallbackStats {
    /// Requests that named no call in flight to a service of the sender's
    /// principal (answered `-32602` `unknown_call`).
    pub refused_requests: u64,
    /// Notifications dropped for the same reason, or a URI nobody
    /// subscribed to there, or a log message of a provider no level was set on.
    pub dropped_notifications: u64,
}

/// A call in flight: its id, and its registration, removed on drop.
pub struct CallGuard {
    callbacks: Option<Arc<Callbacks>>,
    id: String,
    ended: CancellationToken,
}

impl CallGuard {
    fn detached(id: String, ended: CancellationToken) -> Self {
        CallGuard {
            callbacks: None,
            id,
            ended,
        }
    }

    /// The call's id: its `tool_call_id`, and `_meta["switchboard/call"]`
    /// of a request that is not a tool call.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The progress token to send for a session that gave one: the call's
    /// id (unique in the consumer, unlike the session's own token).
    pub fn progress_token(&self, wanted: bool) -> Option<Box<RawValue>> {
        if !wanted {
            return None;
        }
        serde_json::value::to_raw_value(&self.id).ok()
    }

    /// `{"switchboard/call": <id>}`, the `_meta` of a request that is not a
    /// tool call.
    pub fn meta(&self) -> Value {
        serde_json::json!({ switchboard_protocol::tool_call::callback::CALL_META: self.id })
    }

    /// Cancelled when the call ends.
    pub fn ended(&self) -> CancellationToken {
        self.ended.clone()
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.ended.cancel();
        if let Some(callbacks) = &self.callbacks {
            callbacks.end(&self.id);
        }
    }
}

#[cfg(test)]
mod tests;
