//! What rmcp's `ServerHandler` answers for the gateway: the lifecycle
//! (`initialize`, `server/discover`, `ping`, version checks), the server's
//! capabilities, `subscriptions/listen` (2026-07-28: list changes and
//! resource updates on one stream), and the client's notifications. The
//! methods that carry the hub's tools, resources and prompts are answered
//! by `service.rs`, beside it.

use std::sync::Arc;

use rmcp::model::{
    ErrorData, Implementation, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};

use super::session::Session;

pub(crate) struct GatewayHandler(pub(crate) Arc<Session>);

/// The server capabilities: everything MCP servers offer that the gateway
/// passes on (tasks are added on the wire for 2025-11-25, `wire.rs`).
#[expect(
    deprecated,
    reason = "2026-07-28 deprecates logging (SEP-2577); clients of the older versions use it"
)]
pub(crate) fn capabilities() -> ServerCapabilities {
    ServerCapabilities::builder()
        .enable_logging()
        .enable_completions()
        .enable_prompts()
        .enable_prompts_list_changed()
        .enable_resources()
        .enable_resources_subscribe()
        .enable_resources_list_changed()
        .enable_tools()
        .enable_tool_list_changed()
        .build()
}

impl ServerHandler for GatewayHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(capabilities())
            .with_server_info(Implementation::new(
                "switchboard",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "The tools, prompts and resources of the Switchboard hub's tool providers; tools and prompts are named <namespace>__<name>.",
            )
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    /// One `subscriptions/listen` stream: the list changes it asked for,
    /// and updates of the resources it names (subscribed at their providers
    /// for as long as it lasts).
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let session = &self.0;
        let sink = context.sink().clone();
        let accepted = context.accepted().clone();
        let declared = session.declared(context.request_context());
        let mut tools = session.gateway.tools.changes();
        tools.borrow_and_update();
        let mut surface = session.gateway.tools.surface_changes();
        let mut last = *surface.borrow_and_update();
        session.link.add_listener(sink.clone());
        let uris = accepted.resource_subscriptions.clone().unwrap_or_default();
        for uri in &uris {
            if let Err(error) = session.consumer.subscribe(uri, &declared).await {
                tracing::debug!(%error, %uri, "cannot subscribe to a resource");
            }
        }
        loop {
            tokio::select! {
                () = context.cancelled() => break,
                changed = tools.changed() => {
                    if changed.is_err() { break }
                    let _ = sink.notify_tool_list_changed().await;
                }
                changed = surface.changed() => {
                    if changed.is_err() { break }
                    let now = *surface.borrow_and_update();
                    if now.resources != last.resources {
                        let _ = sink.notify_resource_list_changed().await;
                    }
                    if now.prompts != last.prompts {
                        let _ = sink.notify_prompt_list_changed().await;
                    }
                    last = now;
                }
            }
        }
        session.link.remove_listener(sink.id());
        for uri in &uris {
            let _ = session.consumer.unsubscribe(uri, &declared).await;
        }
        Ok(())
    }

    /// The client's roots changed: every version-2 provider is told.
    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        let declared = self.0.link.declared();
        self.0.consumer.roots_list_changed(&declared).await;
    }

    async fn on_initialized(&self, _context: NotificationContext<RoleServer>) {
        tracing::debug!("MCP client initialized");
    }
}
