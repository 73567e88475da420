//! A tool provider on the hub as the [`ToolBackend`] of its tools, and what
//! it shares with the consumer: the connection, and the way to ask the index
//! for a fresh listing.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::value::RawValue;
use switchboard_client::Client;
use switchboard_protocol::tool_call::ToolCallRequest;
use tokio::sync::mpsc;

use super::call::{call_provider, CallError};
use super::tool::ToolBackend;
use crate::tool::BoxFuture;

/// What the index is asked to do besides following the catalog.
#[derive(Debug)]
pub(super) enum Command {
    /// List this provider's tools again (a call found the listing stale).
    Refresh { service_id: String },
    /// The hub connection is gone: nothing is reachable until it is back.
    Disconnected,
}

/// What a hub provider's backend needs: the connection, and the way to ask
/// the index for a fresh listing. Holds no table, so tools in a table can
/// hold it without a cycle.
pub(super) struct HubCaller {
    /// Set once the hub is reached; the same `Client` across reconnects.
    client: RwLock<Option<Client>>,
    commands: mpsc::UnboundedSender<Command>,
}

impl HubCaller {
    pub(super) fn new(commands: mpsc::UnboundedSender<Command>) -> Self {
        HubCaller {
            client: RwLock::new(None),
            commands,
        }
    }

    pub(super) fn client(&self) -> Option<Client> {
        self.client.read().clone()
    }

    pub(super) fn set_client(&self, client: Client) {
        *self.client.write() = Some(client);
    }

    pub(super) fn take_client(&self) -> Option<Client> {
        self.client.write().take()
    }

    /// Asks the index for something; it is gone only when the consumer is.
    pub(super) fn command(&self, command: Command) {
        let _ = self.commands.send(command);
    }

    /// A caller with no connection, and the commands it would send.
    #[cfg(test)]
    pub(super) fn detached() -> (Arc<HubCaller>, mpsc::UnboundedReceiver<Command>) {
        let (commands, receiver) = mpsc::unbounded_channel();
        let caller = HubCaller {
            client: RwLock::new(None),
            commands,
        };
        (Arc::new(caller), receiver)
    }
}

/// One tool provider on the hub, as the backend of its tools.
pub(super) struct HubProvider {
    caller: Arc<HubCaller>,
    service_id: String,
    client_id: String,
}

impl HubProvider {
    pub(super) fn new(caller: Arc<HubCaller>, service_id: String, client_id: String) -> Self {
        HubProvider {
            caller,
            service_id,
            client_id,
        }
    }
}

impl ToolBackend for HubProvider {
    fn id(&self) -> &str {
        &self.service_id
    }

    fn progress_client_id(&self) -> Option<&str> {
        Some(&self.client_id)
    }

    fn call(
        &self,
        request: ToolCallRequest,
        timeout: Option<Duration>,
    ) -> BoxFuture<Result<Box<RawValue>, CallError>> {
        let caller = self.caller.clone();
        let service_id = self.service_id.clone();
        Box::pin(async move {
            let client = caller.client().ok_or(CallError::NotConnected)?;
            let answer = call_provider(&client, &service_id, &request, timeout).await;
            if answer.as_ref().is_err_and(CallError::is_stale_listing) {
                caller.command(Command::Refresh { service_id });
            }
            answer
        })
    }
}
