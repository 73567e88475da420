//! `switchboard mcp`: an MCP server on stdio in front of the hub's tool
//! providers.
//!
//! - [`index`]: which tools exist, kept current from the catalog;
//! - [`server`]: the MCP `ServerHandler` (`tools/list`, `tools/call`);
//! - [`errors`]: hub and provider errors as MCP answers;
//! - this file: the hub connection (made in the background, kept alive), the
//!   progress sink, and wiring.
//!
//! Stdout carries only MCP messages; logs go to stderr.

mod errors;
mod index;
mod server;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use rmcp::{RoleServer, ServiceExt};
use switchboard_client::{
    handler_fn, method_not_found, Client, ConnectOptions, Endpoint, Notification,
};
use switchboard_tools::keep_connected;
use switchboard_tools::progress::{progress_sink_metadata, ProgressParams, PROGRESS_METHOD};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use index::SEPARATOR;
use index::{Index, IndexCommand, ToolTable};

use crate::Error;

/// How long `switchboard mcp` waits for the hub and the first tool lists
/// before it starts answering MCP (with whatever it has by then).
pub const STARTUP_WAIT: Duration = Duration::from_secs(5);
const CONNECT_FIRST_DELAY: Duration = Duration::from_millis(100);
const CONNECT_MAX_DELAY: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct GatewayOptions {
    pub hub_dir: PathBuf,
}

/// Where a progress token's notifications go, and who may send them.
struct ProgressRoute {
    /// Only the provider the call went to may report its progress.
    provider_client_id: String,
    token: ProgressToken,
    /// The last progress value sent to the MCP client. MCP requires progress
    /// to increase with each notification, but rmcp hands each incoming
    /// notification to its own task (in `provide-mcp`, which reads the
    /// child's), so they can reach the hub out of order; a value that does
    /// not increase is stale and is dropped here, the last hop.
    last_sent: Option<f64>,
}

/// State shared by the MCP side, the index task and the connection task.
pub(crate) struct Gateway {
    /// Set once the hub is reached; never replaced (reconnects keep the Client).
    client: RwLock<Option<Client>>,
    /// Written only by the index task.
    table: RwLock<Arc<ToolTable>>,
    /// The MCP client, once it is initialized.
    peer: RwLock<Option<Peer<RoleServer>>>,
    /// Progress tokens of calls in flight, by the token's JSON text.
    progress: Mutex<HashMap<String, ProgressRoute>>,
    index: RwLock<Option<mpsc::UnboundedSender<IndexCommand>>>,
    ready: watch::Sender<bool>,
}

impl Gateway {
    fn new() -> Arc<Self> {
        Arc::new(Gateway {
            client: RwLock::new(None),
            table: RwLock::new(Arc::new(ToolTable::default())),
            peer: RwLock::new(None),
            progress: Mutex::new(HashMap::new()),
            index: RwLock::new(None),
            ready: watch::channel(false).0,
        })
    }

    pub(crate) fn client(&self) -> Option<Client> {
        self.client.read().clone()
    }

    pub(crate) fn table(&self) -> Arc<ToolTable> {
        self.table.read().clone()
    }

    pub(crate) fn set_ready(&self) {
        self.ready.send_replace(true);
    }

    /// Asks the index to fetch a provider's tools again.
    pub(crate) fn refresh(&self, service_id: &str) {
        if let Some(index) = self.index.read().as_ref() {
            let _ = index.send(IndexCommand::Refresh {
                service_id: service_id.to_owned(),
            });
        }
    }

    pub(crate) async fn tools_changed(&self) {
        let peer = self.peer.read().clone();
        if let Some(peer) = peer {
            if let Err(error) = peer.notify_tool_list_changed().await {
                tracing::debug!(%error, "cannot send tools/list_changed");
            }
        }
    }

    /// Routes progress of the call with `token` from `provider_client_id`
    /// to the MCP client until the returned guard is dropped.
    pub(crate) fn route_progress(
        self: &Arc<Self>,
        token: ProgressToken,
        provider_client_id: String,
    ) -> Option<ProgressGuard> {
        let key = serde_json::to_string(&token).ok()?;
        self.progress.lock().insert(
            key.clone(),
            ProgressRoute {
                provider_client_id,
                token,
                last_sent: None,
            },
        );
        Some(ProgressGuard {
            gateway: self.clone(),
            key,
        })
    }

    async fn on_progress(&self, notification: Notification) {
        if notification.method != PROGRESS_METHOD {
            return;
        }
        let Some(params) = notification.params::<ProgressParams>() else {
            return;
        };
        let token = {
            let mut routes = self.progress.lock();
            match routes.get_mut(params.progress_token.get()) {
                Some(route)
                    if route.provider_client_id == notification.sender_client_id
                        && route.last_sent.is_none_or(|last| params.progress > last) =>
                {
                    route.last_sent = Some(params.progress);
                    route.token.clone()
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
        let peer = self.peer.read().clone();
        if let Some(peer) = peer {
            let _ = peer.notify_progress(note).await;
        }
    }
}

pub(crate) struct ProgressGuard {
    gateway: Arc<Gateway>,
    key: String,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.gateway.progress.lock().remove(&self.key);
    }
}

/// Serves MCP on stdin/stdout until stdin closes.
pub async fn run_gateway(options: GatewayOptions) -> Result<(), Error> {
    let gateway = Gateway::new();
    let stop = CancellationToken::new();
    let connection = tokio::spawn(connect(
        gateway.clone(),
        options.hub_dir.clone(),
        stop.clone(),
    ));
    // Give the hub a moment so the first tools/list is complete; a missing
    // hub is not fatal: the gateway keeps trying and announces tools later.
    let mut ready = gateway.ready.subscribe();
    if tokio::time::timeout(STARTUP_WAIT, ready.wait_for(|ready| *ready))
        .await
        .is_err()
    {
        tracing::warn!(
            hub = %options.hub_dir.display(),
            "no hub yet; serving MCP with no tools until it is reachable"
        );
    }
    let listed_at_start = gateway.table();
    let server = server::GatewayServer(gateway.clone());
    let running = server
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|error| Error::Stdio(error.to_string()))?;
    *gateway.peer.write() = Some(running.peer().clone());
    // The table may have changed while the handshake ran (before the peer
    // was set, so nobody was told).
    if !Arc::ptr_eq(&listed_at_start, &gateway.table()) {
        gateway.tools_changed().await;
    }
    let outcome = running.waiting().await;
    stop.cancel();
    connection.abort();
    if let Some(client) = gateway.client() {
        client.close();
    }
    outcome
        .map(|_| ())
        .map_err(|error| Error::Stdio(error.to_string()))
}

/// Reaches the hub (retrying with backoff), registers the progress sink,
/// starts the index, and keeps the connection alive until `stop`.
async fn connect(gateway: Arc<Gateway>, hub_dir: PathBuf, stop: CancellationToken) {
    let mut delay = CONNECT_FIRST_DELAY;
    let client = loop {
        let options = ConnectOptions {
            endpoint: Endpoint::Dir(Some(hub_dir.clone())),
            client_name: "switchboard mcp".into(),
        };
        match Client::connect_with(options).await {
            Ok(client) => break client,
            Err(error) => {
                tracing::debug!(%error, ?delay, "cannot reach the hub yet");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = stop.cancelled() => return,
                }
                delay = (delay * 2).min(CONNECT_MAX_DELAY);
            }
        }
    };
    let sink_gateway = gateway.clone();
    let sink = handler_fn(|request| async move { Err(method_not_found(&request.method)) })
        .with_notifications(move |notification| {
            let gateway = sink_gateway.clone();
            async move { gateway.on_progress(notification).await }
        });
    if let Err(error) = client.register(&progress_sink_metadata(), sink).await {
        tracing::warn!(%error, "cannot register the progress sink; progress will not be relayed");
    }
    let catalog = match client.catalog().await {
        Ok(catalog) => catalog,
        Err(error) => {
            tracing::error!(%error, "cannot subscribe to the catalog");
            return;
        }
    };
    let (commands, receiver) = mpsc::unbounded_channel();
    *gateway.index.write() = Some(commands.clone());
    *gateway.client.write() = Some(client.clone());
    tokio::spawn(Index::new(gateway.clone(), client.clone()).run(catalog, receiver));
    keep_connected(client, stop, move |up| {
        if !up {
            let _ = commands.send(IndexCommand::Disconnected);
        }
    })
    .await;
}
