//! One MCP client of the gateway: its consumer session (shared consumer,
//! own sink), and [`ClientLink`], the sink that hands what providers send
//! back during its calls to that client through rmcp's peer.

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rmcp::model::{
    CancelledNotificationParam, ClientResult, CustomNotification, CustomRequest, RequestId,
    ServerNotification, ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, RequestContext, ServiceError, SubscriptionSink};
use rmcp::RoleServer;
use serde_json::{json, Value};
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::tool_call::callback;
use switchboard_protocol::ErrorCode;
use switchboard_tools::consumer::{CallSink, ConsumerSession};
use switchboard_tools::BoxFuture;

use super::wire::WireState;
use super::Gateway;

/// The `_meta` key of a 2026-07-28 request's client capabilities.
pub(crate) const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";

/// One MCP client.
pub(crate) struct Session {
    pub(crate) gateway: Arc<Gateway>,
    pub(crate) consumer: ConsumerSession,
    pub(crate) link: Arc<ClientLink>,
}

impl Session {
    pub(crate) fn open(gateway: Arc<Gateway>, wire: Arc<WireState>) -> Arc<Session> {
        let link = Arc::new(ClientLink {
            peer: RwLock::new(None),
            wire,
            listeners: Mutex::new(Vec::new()),
        });
        let consumer = gateway.tools.open_session(link.clone());
        Arc::new(Session {
            gateway,
            consumer,
            link,
        })
    }

    /// What the MCP client declared (`ClientCapabilities`) for the request
    /// of `context`: a 2026-07-28 request's own, else what it sent at
    /// `initialize` (as sent), else what rmcp read of it.
    ///
    /// A 2026-07-28 client takes no server-to-client requests (its servers
    /// return `InputRequiredResult` instead, which the gateway does not
    /// bridge), so its sampling, elicitation and roots are not passed on:
    /// providers answer their servers' requests as not supported.
    pub(crate) fn declared(&self, context: &RequestContext<RoleServer>) -> Value {
        if let Some(declared) = context.meta.0 .0.get(CLIENT_CAPABILITIES_META) {
            let mut declared = declared.clone();
            if let Some(declared) = declared.as_object_mut() {
                for capability in ["sampling", "elicitation", "roots"] {
                    declared.remove(capability);
                }
            }
            return declared;
        }
        self.link.declared()
    }

    /// Whether the client of `context` declared tasks (MCP 2025-11-25's
    /// `tasks` capability with `requests.tools.call`).
    pub(crate) fn declares_tasks(&self, context: &RequestContext<RoleServer>) -> bool {
        !self.declared(context)["tasks"]["requests"]["tools"]["call"].is_null()
    }
}

/// The MCP client of a session, as its consumer session's sink.
pub(crate) struct ClientLink {
    /// Set from the first request (and once serving starts).
    peer: RwLock<Option<Peer<RoleServer>>>,
    wire: Arc<WireState>,
    /// `subscriptions/listen` streams open (2026-07-28): resource updates go
    /// through them.
    listeners: Mutex<Vec<SubscriptionSink>>,
}

impl ClientLink {
    pub(crate) fn set_peer(&self, peer: &Peer<RoleServer>) {
        if self.peer.read().is_none() {
            *self.peer.write() = Some(peer.clone());
        }
    }

    pub(crate) fn peer(&self) -> Option<Peer<RoleServer>> {
        self.peer.read().clone()
    }

    /// What the client declared for the session as a whole.
    pub(crate) fn declared(&self) -> Value {
        if let Some(declared) = self.wire.capabilities() {
            return declared;
        }
        self.peer()
            .and_then(|peer| peer.peer_info())
            .and_then(|info| serde_json::to_value(&info.capabilities).ok())
            .unwrap_or_else(|| json!({}))
    }

    pub(crate) fn add_listener(&self, sink: SubscriptionSink) {
        self.listeners.lock().push(sink);
    }

    pub(crate) fn remove_listener(&self, id: &RequestId) {
        self.listeners.lock().retain(|sink| sink.id() != id);
    }
}

/// The capability a server-to-client request needs.
fn needed_capability(method: &str) -> &'static str {
    match method {
        callback::SAMPLING_CREATE_MESSAGE => "sampling",
        callback::ELICITATION_CREATE => "elicitation",
        _ => "roots",
    }
}

pub(crate) fn service_error(error: ServiceError) -> ErrorObject {
    match error {
        ServiceError::McpError(error) => ErrorObject {
            code: i64::from(error.code.0),
            message: error.message.into_owned(),
            data: error
                .data
                .and_then(|data| serde_json::value::to_raw_value(&data).ok()),
        },
        other => ErrorObject::new(
            ErrorCode::InternalError,
            format!("the MCP client could not be asked: {other}"),
        ),
    }
}

/// Sends `notifications/cancelled` for a request to the client unless
/// disarmed (its answer came).
struct CancelOnDrop {
    peer: Peer<RoleServer>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let param = CancelledNotificationParam::new(
                    Some(id),
                    Some("the call it belonged to ended".into()),
                );
                let _ = peer.notify_cancelled(param).await;
            });
        }
    }
}

impl CallSink for ClientLink {
    fn request(&self, method: &str, params: Value) -> BoxFuture<Result<Value, ErrorObject>> {
        let peer = self.peer();
        let declared = self.declared();
        let method = method.to_owned();
        Box::pin(async move {
            let capability = needed_capability(&method);
            if declared.get(capability).is_none_or(Value::is_null) {
                return Err(ErrorObject::new(
                    ErrorCode::MethodNotFound,
                    format!(
                        "the MCP client did not declare {capability}, so it cannot answer {method}"
                    ),
                ));
            }
            let peer = peer.ok_or_else(|| {
                ErrorObject::new(ErrorCode::InternalError, "the MCP client is not connected")
            })?;
            let request = ServerRequest::CustomRequest(CustomRequest::new(&method, Some(params)));
            let handle = peer
                .send_request_with_option(request, PeerRequestOptions::no_options())
                .await
                .map_err(service_error)?;
            let mut cancel = CancelOnDrop {
                peer: peer.clone(),
                id: Some(handle.id.clone()),
            };
            let answer = handle.await_response().await;
            cancel.id = None;
            let answer: ClientResult = answer.map_err(service_error)?;
            serde_json::to_value(answer).map_err(|error| {
                ErrorObject::new(
                    ErrorCode::InternalError,
                    format!("cannot encode the MCP client's answer: {error}"),
                )
            })
        })
    }

    fn notify(&self, method: &str, params: Value) -> BoxFuture<()> {
        let peer = self.peer();
        let listeners: Vec<SubscriptionSink> = if method == callback::RESOURCE_UPDATED {
            self.listeners.lock().clone()
        } else {
            Vec::new()
        };
        let method = method.to_owned();
        Box::pin(async move {
            if !listeners.is_empty() {
                let uri = params["uri"].as_str().unwrap_or_default().to_owned();
                for listener in listeners {
                    let _ = listener.notify_resource_updated(uri.clone()).await;
                }
                return;
            }
            let Some(peer) = peer else { return };
            let notification = ServerNotification::CustomNotification(CustomNotification::new(
                method,
                Some(params),
            ));
            if let Err(error) = peer.send_notification(notification).await {
                tracing::debug!(%error, "cannot send a notification to the MCP client");
            }
        })
    }
}
