//! [`HubTools`]: the hub's tools, for a consumer.
//!
//! One task per consumer does the I/O: it reaches the hub (retrying with
//! backoff while none runs), subscribes to the catalog, starts the index
//! task ([`Index`]), then keeps the connection alive ([`keep_connected`]).
//! The index is the only writer of the published table; readers take an
//! `Arc` of it (no lock held while they use it) and may wait for a change.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::RwLock;
use serde_json::value::RawValue;
use switchboard_client::{Catalog, Client, ConnectOptions, Endpoint};
use switchboard_protocol::tool_call::ToolCallRequest;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::call::{call_provider, CallError};
use super::index::{Command, Index};
use super::table::ToolTable;
use super::tool::ToolBackend;
use crate::reconnect::{keep_connected, retry_with_backoff};
use crate::tool::BoxFuture;

/// Where the hub is and how the consumer introduces itself.
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    pub endpoint: Endpoint,
    /// `clientInfo.name`, shown in the hub's logs.
    pub client_name: String,
}

/// Counters of what the index did, for diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumerStats {
    /// `tools/list` answers dropped because a newer fetch of the same
    /// provider was out.
    pub stale_lists_dropped: u64,
}

/// The tools of every tool provider on the hub, kept current from the
/// catalog, under one naming rule ([`naming`](super::naming)); calls go to
/// their provider through [`ExposedTool::call`](super::ExposedTool::call).
///
/// Cloning shares one connection and one index. The index task stops with
/// [`HubTools::close`] or when the last clone is dropped.
#[derive(Clone)]
pub struct HubTools {
    inner: Arc<Inner>,
}

struct Inner {
    caller: Arc<HubCaller>,
    published: Arc<Published>,
    stop: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl HubTools {
    /// Starts following the hub at `options.endpoint`. Returns at once; the
    /// table is empty until the hub is reached.
    pub fn start(options: ConsumerOptions) -> Self {
        Self::start_with(options, |_client| Box::pin(async {}))
    }

    /// Like [`HubTools::start`]; `on_connect` runs once, when the hub is
    /// first reached, before the catalog is followed (to register a service,
    /// such as a progress sink, which [`Client::reconnect`] registers again
    /// after every reconnect).
    pub fn start_with(
        options: ConsumerOptions,
        on_connect: impl FnOnce(Client) -> BoxFuture<()> + Send + 'static,
    ) -> Self {
        let (commands, receiver) = mpsc::unbounded_channel();
        let caller = Arc::new(HubCaller {
            client: RwLock::new(None),
            commands,
        });
        let published = Arc::new(Published {
            table: ArcSwap::from_pointee(ToolTable::default()),
            revision: watch::Sender::new(0),
            ready: watch::Sender::new(false),
            stale_lists_dropped: AtomicU64::new(0),
        });
        let stop = CancellationToken::new();
        tokio::spawn(run(
            caller.clone(),
            published.clone(),
            options,
            on_connect,
            receiver,
            stop.clone(),
        ));
        HubTools {
            inner: Arc::new(Inner {
                caller,
                published,
                stop,
            }),
        }
    }

    /// The tools as of now.
    pub fn tools(&self) -> Arc<ToolTable> {
        self.inner.published.table.load_full()
    }

    /// Changes each time a different table is published; `borrow_and_update`
    /// before reading [`HubTools::tools`] to hear of every later change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.published.revision.subscribe()
    }

    /// Waits, at most `bound`, until the first table is complete: every
    /// provider of the first catalog has answered `tools/list` (or failed),
    /// or the first attempt to reach the hub failed. Whether it is.
    pub async fn wait_ready(&self, bound: Duration) -> bool {
        let mut ready = self.inner.published.ready.subscribe();
        let reached = tokio::time::timeout(bound, ready.wait_for(|ready| *ready)).await;
        matches!(reached, Ok(Ok(_)))
    }

    /// Whether the hub connection is up now.
    pub fn is_connected(&self) -> bool {
        self.client().is_some_and(|client| !client.is_closed())
    }

    /// The hub connection, once it was made (the same one across reconnects).
    pub fn client(&self) -> Option<Client> {
        self.inner.caller.client()
    }

    pub fn stats(&self) -> ConsumerStats {
        ConsumerStats {
            stale_lists_dropped: self
                .inner
                .published
                .stale_lists_dropped
                .load(Ordering::Relaxed),
        }
    }

    /// Stops the index and closes the hub connection.
    pub fn close(&self) {
        self.inner.stop.cancel();
        if let Some(client) = self.inner.caller.client.write().take() {
            client.close();
        }
    }
}

/// The table as the index last published it, and the signals around it.
pub(super) struct Published {
    table: ArcSwap<ToolTable>,
    revision: watch::Sender<u64>,
    ready: watch::Sender<bool>,
    stale_lists_dropped: AtomicU64,
}

impl Published {
    /// Swaps `table` in and signals a change, unless it equals the current one.
    pub(super) fn publish(&self, table: ToolTable) {
        if **self.table.load() == table {
            return;
        }
        tracing::debug!(tools = table.len(), "tool table updated");
        self.table.store(Arc::new(table));
        self.revision.send_modify(|revision| *revision += 1);
    }

    pub(super) fn set_ready(&self) {
        self.ready
            .send_if_modified(|ready| !std::mem::replace(ready, true));
    }

    pub(super) fn count_stale_list(&self) {
        self.stale_lists_dropped.fetch_add(1, Ordering::Relaxed);
    }
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
    fn client(&self) -> Option<Client> {
        self.client.read().clone()
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
                let _ = caller.commands.send(Command::Refresh { service_id });
            }
            answer
        })
    }
}

/// The consumer's I/O task: reach the hub, follow it, stay connected.
async fn run(
    caller: Arc<HubCaller>,
    published: Arc<Published>,
    options: ConsumerOptions,
    on_connect: impl FnOnce(Client) -> BoxFuture<()>,
    commands: mpsc::UnboundedReceiver<Command>,
    stop: CancellationToken,
) {
    let reached = retry_with_backoff(
        &stop,
        || connect(&options),
        |failures, error, delay| {
            if failures == 1 {
                tracing::warn!(%error, "no hub yet: no hub tools until it is reachable");
                // A first prompt or tools/list need not wait for it.
                published.set_ready();
            } else {
                tracing::debug!(%error, ?delay, "cannot reach the hub yet");
            }
        },
    )
    .await;
    let Some((client, catalog)) = reached else {
        published.set_ready();
        return;
    };
    tracing::info!("connected to the hub");
    *caller.client.write() = Some(client.clone());
    if stop.is_cancelled() {
        // `close` ran while connecting and found no client to close.
        client.close();
        return;
    }
    on_connect(client.clone()).await;
    let index = Index::new(caller.clone(), client.clone(), published.clone());
    let following = tokio::spawn(index.run(catalog, commands, stop.clone()));
    let disconnected = caller.commands.clone();
    keep_connected(client, stop, move |up| {
        if !up {
            let _ = disconnected.send(Command::Disconnected);
        }
    })
    .await;
    // `stop` ends the index too; whatever happens, nobody waits for it.
    let _ = following.await;
    published.set_ready();
}

/// One attempt: connect and subscribe to the catalog.
async fn connect(
    options: &ConsumerOptions,
) -> Result<(Client, Catalog), switchboard_client::Error> {
    let client = Client::connect_with(ConnectOptions {
        endpoint: options.endpoint.clone(),
        client_name: options.client_name.clone(),
    })
    .await?;
    match client.catalog().await {
        Ok(catalog) => Ok((client, catalog)),
        Err(error) => {
            client.close();
            Err(error)
        }
    }
}
