//! Progress of gateway calls to version-1 providers: the progress sink the
//! gateway registers on the hub, and the relay of each provider's
//! `notifications/progress` to the MCP client that made the call, under the
//! client's own token. (Version-2 providers send progress to the callback
//! service instead.) The token sent to a provider is minted here, so two
//! sessions using the same token never mix.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::Value;
use switchboard_client::{handler_fn, method_not_found, Client, Notification};
use switchboard_tools::progress::{progress_sink_metadata, ProgressParams, PROGRESS_METHOD};

/// Where a progress token's notifications go, and who may send them.
struct ProgressRoute {
    /// Only the provider the call went to may report its progress.
    provider_client_id: String,
    /// The MCP client's own token, and the client.
    token: ProgressToken,
    peer: Peer<RoleServer>,
    /// The last progress value sent to the MCP client. MCP requires progress
    /// to increase with each notification, but rmcp hands each incoming
    /// notification to its own task (in `provide-mcp`, which reads the
    /// child's), so they can reach the hub out of order; a value that does
    /// not increase is stale and is dropped here, the last hop.
    last_sent: Option<f64>,
}

/// The routes of calls in flight.
#[derive(Default)]
pub(crate) struct ProgressRelay {
    /// By the JSON text of the token sent to the provider.
    routes: Mutex<HashMap<String, ProgressRoute>>,
    next_token: AtomicU64,
}

impl ProgressRelay {
    /// Registers the progress sink on `client` (it is registered again after
    /// every reconnect by the client itself).
    pub(crate) async fn register_sink(self: Arc<Self>, client: Client) {
        let sink = handler_fn(|request| async move { Err(method_not_found(&request.method)) })
            .with_notifications(move |notification| {
                let relay = self.clone();
                async move { relay.on_progress(notification).await }
            });
        if let Err(error) = client.register(&progress_sink_metadata(), sink).await {
            tracing::warn!(%error, "cannot register the progress sink; progress will not be relayed");
        }
    }

    /// Routes progress of a call from `provider_client_id` to `peer` under
    /// its `token` until the returned guard is dropped; the token to send
    /// the provider.
    pub(crate) fn route(
        self: &Arc<Self>,
        token: ProgressToken,
        provider_client_id: String,
        peer: Peer<RoleServer>,
    ) -> (ProgressGuard, Value) {
        let n = self.next_token.fetch_add(1, Ordering::Relaxed) + 1;
        let sent = Value::String(format!("sbp{n}"));
        let key = sent.to_string();
        self.routes.lock().insert(
            key.clone(),
            ProgressRoute {
                provider_client_id,
                token,
                peer,
                last_sent: None,
            },
        );
        let guard = ProgressGuard {
            relay: self.clone(),
            key,
        };
        (guard, sent)
    }

    async fn on_progress(&self, notification: Notification) {
        if notification.method != PROGRESS_METHOD {
            return;
        }
        let Some(params) = notification.params::<ProgressParams>() else {
            return;
        };
        let (token, peer) = {
            let mut routes = self.routes.lock();
            match routes.get_mut(params.progress_token.get()) {
                Some(route)
                    if route.provider_client_id == notification.sender_client_id
                        && route.last_sent.is_none_or(|last| params.progress > last) =>
                {
                    route.last_sent = Some(params.progress);
                    (route.token.clone(), route.peer.clone())
                }
                _ => return,
            }
        };
        let mut note = ProgressNotificationParam::new(token, params.progress);
        if let Some(total) = params.total {
            note = note.with_total(total);
        }
        if let Some(message) = params.message {
            note = note.with_message(message);
        }
        let _ = peer.notify_progress(note).await;
    }
}

pub(crate) struct ProgressGuard {
    relay: Arc<ProgressRelay>,
    key: String,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.relay.routes.lock().remove(&self.key);
    }
}
