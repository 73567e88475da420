//! [`HubTools`]: the hub's tools, for a consumer.
//!
//! One task per consumer does the I/O: it reaches the hub (retrying with
//! backoff while none runs), subscribes to the catalog, starts the index
//! task ([`Index`]), then keeps the connection alive ([`keep_connected`]).
//! The index is the only writer of the published table; readers take an
//! `Arc` of it (no lock held while they use it) and may wait for a change.

use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchboard_client::{Catalog, Client, ConnectOptions, Endpoint};
use switchboard_protocol::tool_call::v2;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::backend::{Command, HubCaller, HubProvider, ProviderIdentity};
use super::call::{list_timeout, request_provider, CallError};
use super::callback::{self, CallbackStats, Callbacks};
use super::index::Index;
use super::published::{Published, SurfaceRevisions};
use super::surface::Surface;
use super::table::ToolTable;
use super::tasks::Tasks;
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
    /// List answers dropped because a newer fetch of the same list of the
    /// same provider was out.
    pub stale_lists_dropped: u64,
    /// Lists that failed (no answer, an error, an answer that does not
    /// parse): the provider offers nothing of that kind until a retry
    /// (after 1 s, doubling to 30 s) or its next change lists it.
    pub lists_failed: u64,
    /// Resource URIs listed by two providers (each collision counted once
    /// for as long as it lasts; the first by namespace order serves it).
    pub resource_collisions: u64,
    /// What the callback service refused and dropped.
    pub callbacks: CallbackStats,
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
    /// The callback service's registry (a service only with
    /// [`HubTools::start_with_callbacks`]).
    callbacks: Arc<Callbacks>,
    tasks: Tasks,
    stop: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl HubTools {
    /// Starts following the hub at `options.endpoint` (on the current Tokio
    /// runtime). Returns at once; the table is empty until the hub is reached.
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
        Self::start_inner(options, false, on_connect)
    }

    /// Like [`HubTools::start_with`], and registers the consumer's callback
    /// service (`docs/reference/tool-calls.md` section 9.3) before
    /// `on_connect` runs: what version-2 providers send back during calls
    /// of its sessions ([`HubTools::open_session`]) reaches them.
    pub fn start_with_callbacks(
        options: ConsumerOptions,
        on_connect: impl FnOnce(Client) -> BoxFuture<()> + Send + 'static,
    ) -> Self {
        Self::start_inner(options, true, on_connect)
    }

    fn start_inner(
        options: ConsumerOptions,
        with_callbacks: bool,
        on_connect: impl FnOnce(Client) -> BoxFuture<()> + Send + 'static,
    ) -> Self {
        let (commands, receiver) = mpsc::unbounded_channel();
        let caller = Arc::new(HubCaller::new(commands));
        let published = Arc::new(Published::new());
        let callbacks = Arc::new(Callbacks::default());
        let stop = CancellationToken::new();
        let hub = HubTools {
            inner: Arc::new(Inner {
                caller: caller.clone(),
                published: published.clone(),
                callbacks: callbacks.clone(),
                tasks: Tasks::default(),
                stop: stop.clone(),
            }),
        };
        let callbacks = with_callbacks.then_some(callbacks);
        if with_callbacks {
            tokio::spawn(keep_levels(
                hub.downgrade(),
                published.surface_changes(),
                stop.clone(),
            ));
        }
        tokio::spawn(run(
            caller, published, callbacks, options, on_connect, receiver, stop,
        ));
        hub
    }

    fn downgrade(&self) -> std::sync::Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    pub(super) fn callbacks(&self) -> &Arc<Callbacks> {
        &self.inner.callbacks
    }

    pub(super) fn tasks(&self) -> &Tasks {
        &self.inner.tasks
    }

    /// The callback service's id now (`None` before it is registered, and
    /// for a consumer started without one).
    pub fn callback_service_id(&self) -> Option<String> {
        self.inner.callbacks.service_id()
    }

    /// `method` with `params` to `provider`, bounded by [`list_timeout`]
    /// (subscriptions and levels: answered at once).
    pub(super) async fn send(
        &self,
        provider: &HubProvider,
        method: &'static str,
        params: &Value,
    ) -> Result<Box<RawValue>, CallError> {
        self.send_to(provider.identity(), method, params).await
    }

    pub(super) async fn send_to(
        &self,
        provider: &ProviderIdentity,
        method: &'static str,
        params: &Value,
    ) -> Result<Box<RawValue>, CallError> {
        let client = self.client().ok_or(CallError::NotConnected)?;
        let params = serde_json::value::to_raw_value(params)
            .map_err(|error| CallError::Failed(format!("cannot encode {method}: {error}")))?;
        request_provider(
            &client,
            &provider.service_id,
            method,
            &params,
            Some(list_timeout(&client)),
        )
        .await
    }

    /// Tells every version-2 provider that declared logging the level the
    /// sessions want, unless it was told already.
    pub(super) async fn sync_levels(&self, capabilities: &Value) {
        for provider in self.surface().providers() {
            if !provider.declares("logging") {
                continue;
            }
            let identity = provider.backend.identity();
            let Some((level, told)) = self.inner.callbacks.level_for(identity) else {
                return;
            };
            if told {
                continue;
            }
            let params = json!({
                "level": level.as_str(),
                "client": self.inner.callbacks.client_ref(capabilities),
            });
            match self
                .send(&provider.backend, v2::LOGGING_SET_LEVEL, &params)
                .await
            {
                Ok(_) => self.inner.callbacks.level_sent(identity, level),
                Err(error) => {
                    tracing::debug!(%error, namespace = %provider.namespace, "cannot set a provider's log level")
                }
            }
        }
    }

    /// The tools as of now.
    pub fn tools(&self) -> Arc<ToolTable> {
        self.inner.published.table()
    }

    /// Changes each time a different table is published; `borrow_and_update`
    /// before reading [`HubTools::tools`] to hear of every later change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.published.changes()
    }

    /// The prompts, resources, templates and version-2 providers as of now.
    pub fn surface(&self) -> Arc<Surface> {
        self.inner.published.surface()
    }

    /// Moves each time a part of the [`Surface`] changes (per part).
    pub fn surface_changes(&self) -> watch::Receiver<SurfaceRevisions> {
        self.inner.published.surface_changes()
    }

    /// Waits, at most `bound`, until the first table is complete: every
    /// provider of the first catalog has answered `tools/list` (or failed),
    /// or the first attempt to reach the hub failed. Whether it is.
    pub async fn wait_ready(&self, bound: Duration) -> bool {
        let mut ready = self.inner.published.ready();
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
        let published = &self.inner.published;
        ConsumerStats {
            stale_lists_dropped: published.stale_lists_dropped(),
            lists_failed: published.lists_failed(),
            resource_collisions: published.resource_collisions(),
            callbacks: self.inner.callbacks.stats(),
        }
    }

    /// Stops the index and closes the hub connection.
    pub fn close(&self) {
        self.inner.stop.cancel();
        if let Some(client) = self.inner.caller.take_client() {
            client.close();
        }
    }
}

/// Tells providers that join (or come back) the log level the sessions
/// want, until `stop` or the consumer is gone.
async fn keep_levels(
    inner: std::sync::Weak<Inner>,
    mut changes: watch::Receiver<SurfaceRevisions>,
    stop: CancellationToken,
) {
    let mut providers = changes.borrow_and_update().providers;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
        let now = changes.borrow_and_update().providers;
        if now == providers {
            continue;
        }
        providers = now;
        let Some(inner) = inner.upgrade() else { return };
        HubTools { inner }.sync_levels(&json!({})).await;
    }
}

/// The consumer's I/O task: reach the hub, follow it, stay connected.
async fn run(
    caller: Arc<HubCaller>,
    published: Arc<Published>,
    callbacks: Option<Arc<Callbacks>>,
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
    caller.set_client(client.clone());
    if stop.is_cancelled() {
        // `close` ran while connecting and found no client to close.
        client.close();
        return;
    }
    if let Some(callbacks) = &callbacks {
        callback::register(callbacks, &client).await;
    }
    on_connect(client.clone()).await;
    let index = Index::new(caller.clone(), client.clone(), published.clone());
    let following = tokio::spawn(index.run(catalog, commands, stop.clone()));
    let disconnected = caller.clone();
    keep_connected(client, stop, move |up| {
        if !up {
            disconnected.command(Command::Disconnected);
        }
    })
    .await;
    // Only `stop` ends `keep_connected`, and the index with it.
    let _ = following.await;
    published.set_ready();
    if let Some(client) = caller.take_client() {
        client.close();
    }
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
