//! A tool provider: a hub service with `tool-provider` metadata that serves
//! `tools/list` and `tools/call`, and changes its tool set at run time.
//! With a [`SurfaceHandler`] it is a version-2 provider
//! (`docs/reference/tool-calls.md` section 9): its metadata adds the MCP
//! server's `capabilities` and the `resourcesRevision` and
//! `promptsRevision` of its lists, and it serves the rest of the surface
//! (`surface.rs`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::{json, Map, Value};
use switchboard_client::{
    method_not_found, BoxFuture, Client, Handler, Notification, Reply, Request, ServiceHandle,
};
use switchboard_protocol::tool_call::{
    TOOLS_CALL, TOOLS_LIST, TOOL_PROVIDER_PROTOCOL, TOOL_PROVIDER_VERSION, TOOL_PROVIDER_VERSION_2,
};

use crate::ledger::{Ledger, LedgerCounts, Retention};
use crate::progress::SinkDirectory;
use crate::surface::{self, SurfaceHandler};
use crate::tool::{ToolHandler, ToolSpec};
use crate::toolset::ToolSet;
use crate::ToolsError;

/// How long a duplicate of a running call waits for the first by default
/// (the hub's longest request timeout: a caller never waits longer anyway).
pub const DEFAULT_DUPLICATE_WAIT: Duration = Duration::from_secs(600);
/// How long a cancelled tool may take to stop before it is dropped.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(5);
/// The longest namespace, in bytes.
pub const MAX_NAMESPACE_BYTES: usize = 64;

/// Counters a provider keeps (all since it started).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProviderStats {
    /// Calls that came without `tool_call_id`, for which a fallback was made up.
    pub fallback_tool_call_ids: u64,
    /// Calls whose tool ran.
    pub calls_run: u64,
    /// Calls answered from the ledger without running.
    pub replays: u64,
    /// Duplicates that waited for a call still running.
    pub duplicates_waited: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) fallback_tool_call_ids: AtomicU64,
    pub(crate) calls_run: AtomicU64,
    pub(crate) replays: AtomicU64,
    pub(crate) duplicates_waited: AtomicU64,
}

/// State shared by the hub handler and the [`Provider`] handle.
pub(crate) struct Shared {
    pub(crate) namespace: String,
    pub(crate) client: Client,
    /// Swapped whole on every change; a call works on the set it started with.
    pub(crate) tools: RwLock<Arc<ToolSet>>,
    pub(crate) ledger: Ledger,
    pub(crate) sinks: Arc<SinkDirectory>,
    pub(crate) counters: Counters,
    pub(crate) duplicate_wait: Duration,
    pub(crate) cancel_grace: Duration,
    extra_metadata: Map<String, Value>,
    /// Version 2: the rest of the MCP surface; `None` for version 1.
    pub(crate) surface: Option<Arc<dyn SurfaceHandler>>,
    /// Version 2's metadata beyond the tools; written under `updating`.
    lists: parking_lot::Mutex<Lists>,
    /// One change at a time (tools, capabilities, revisions), so revisions
    /// and metadata updates reach the hub in order.
    updating: tokio::sync::Mutex<()>,
}

/// A version-2 provider's metadata beyond `toolsRevision`.
#[derive(Debug, Clone, PartialEq)]
struct Lists {
    /// MCP's `ServerCapabilities`, as the server declared them.
    capabilities: Value,
    resources_revision: u64,
    prompts_revision: u64,
}

/// The lists of a version-2 provider whose revisions it bumps itself (the
/// tools' is bumped by [`Provider::set_tools`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListRevision {
    Resources,
    Prompts,
}

impl Shared {
    fn metadata(&self, revision: u64) -> Value {
        let mut metadata = self.extra_metadata.clone();
        metadata.insert("protocol".into(), json!(TOOL_PROVIDER_PROTOCOL));
        metadata.insert("namespace".into(), json!(self.namespace));
        metadata.insert("toolsRevision".into(), json!(revision));
        if self.surface.is_some() {
            let lists = self.lists.lock().clone();
            metadata.insert("version".into(), json!(TOOL_PROVIDER_VERSION_2));
            let has_tools = !self.tools.read().is_empty();
            metadata.insert(
                "capabilities".into(),
                declared_capabilities(lists.capabilities, has_tools),
            );
            metadata.insert("resourcesRevision".into(), json!(lists.resources_revision));
            metadata.insert("promptsRevision".into(), json!(lists.prompts_revision));
        } else {
            metadata.insert("version".into(), json!(TOOL_PROVIDER_VERSION));
        }
        Value::Object(metadata)
    }
}

/// The capabilities a version-2 provider's metadata declares: those it was
/// given, and `tools` when it has tools and they do not say so. It answers
/// `tools/list` whatever it declared, but a consumer lists a version-2
/// provider's tools only when `tools` is declared (or nothing is), so a
/// provider that declared `{"resources": {}}` beside its tools would have
/// them silently hidden.
fn declared_capabilities(mut capabilities: Value, has_tools: bool) -> Value {
    if let (true, Some(declared)) = (has_tools, capabilities.as_object_mut()) {
        if declared.get("tools").is_none_or(Value::is_null) {
            declared.insert("tools".into(), json!({}));
        }
    }
    capabilities
}

/// Builds and registers a [`Provider`].
pub struct ProviderBuilder {
    namespace: String,
    ledger_path: Option<PathBuf>,
    retention: Retention,
    tools: Vec<(ToolSpec, Arc<dyn ToolHandler>)>,
    extra_metadata: Map<String, Value>,
    duplicate_wait: Duration,
    cancel_grace: Duration,
    surface: Option<Arc<dyn SurfaceHandler>>,
    capabilities: Value,
}

impl ProviderBuilder {
    /// The ledger file (SQLite). Required: the fence must survive a restart.
    pub fn ledger_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.ledger_path = Some(path.into());
        self
    }

    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    pub fn tool(mut self, spec: ToolSpec, handler: Arc<dyn ToolHandler>) -> Self {
        self.tools.push((spec, handler));
        self
    }

    pub fn tools(mut self, tools: Vec<(ToolSpec, Arc<dyn ToolHandler>)>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// An extra metadata member (e.g. `"title"`); the contract's members win.
    pub fn metadata(mut self, key: &str, value: Value) -> Self {
        self.extra_metadata.insert(key.to_owned(), value);
        self
    }

    /// How long a duplicate of a running call waits for it.
    pub fn duplicate_wait(mut self, wait: Duration) -> Self {
        self.duplicate_wait = wait;
        self
    }

    /// How long a cancelled tool may take to stop.
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }

    /// Makes it a version-2 provider: the rest of the MCP surface
    /// (resources, prompts, completion, logging, tasks) is served by
    /// `handler`.
    pub fn surface(mut self, handler: Arc<dyn SurfaceHandler>) -> Self {
        self.surface = Some(handler);
        self
    }

    /// A version-2 provider's `capabilities` (MCP's `ServerCapabilities`);
    /// `{}` unless set.
    pub fn capabilities(mut self, capabilities: Value) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Opens the ledger and registers the service on `client`'s hub.
    pub async fn register(self, client: &Client) -> Result<Provider, ToolsError> {
        validate_namespace(&self.namespace)?;
        let ledger_path = self.ledger_path.ok_or(ToolsError::NoLedger)?;
        let tools = ToolSet::compile(self.tools, 1)?;
        let ledger = Ledger::open(ledger_path, self.retention).await?;
        let catalog = client.catalog().await?;
        let shared = Arc::new(Shared {
            namespace: self.namespace,
            client: client.clone(),
            tools: RwLock::new(Arc::new(tools)),
            ledger,
            sinks: SinkDirectory::follow(catalog),
            counters: Counters::default(),
            duplicate_wait: self.duplicate_wait,
            cancel_grace: self.cancel_grace,
            extra_metadata: self.extra_metadata,
            surface: self.surface,
            lists: parking_lot::Mutex::new(Lists {
                capabilities: self.capabilities,
                resources_revision: 1,
                prompts_revision: 1,
            }),
            updating: tokio::sync::Mutex::new(()),
        });
        let metadata = shared.metadata(1);
        let service = client
            .register(&metadata, ProviderHandler(shared.clone()))
            .await?;
        tracing::info!(namespace = %shared.namespace, service = %service.id(), "tool provider registered");
        Ok(Provider { shared, service })
    }
}

/// `[A-Za-z0-9_.-]`, 1 to 64 bytes, not starting with `.`: the namespace
/// becomes part of MCP tool names (`<namespace>__<tool>`) and of file names.
pub fn validate_namespace(namespace: &str) -> Result<(), ToolsError> {
    let invalid = |reason: String| ToolsError::InvalidNamespace {
        namespace: namespace.to_owned(),
        reason,
    };
    if namespace.is_empty() {
        return Err(invalid("it is empty".into()));
    }
    if namespace.len() > MAX_NAMESPACE_BYTES {
        return Err(invalid(format!(
            "it is {} bytes; at most {MAX_NAMESPACE_BYTES} are allowed",
            namespace.len()
        )));
    }
    if namespace.starts_with('.') {
        return Err(invalid("it starts with '.'".into()));
    }
    if let Some(index) = namespace
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.'))
    {
        return Err(invalid(format!(
            "byte {index} is not a letter, digit, '_', '-' or '.'"
        )));
    }
    Ok(())
}

/// A registered tool provider. Clones share it.
#[derive(Clone)]
pub struct Provider {
    shared: Arc<Shared>,
    service: ServiceHandle,
}

impl Provider {
    /// Starts building a provider for `namespace`.
    pub fn builder(namespace: impl Into<String>) -> ProviderBuilder {
        ProviderBuilder {
            namespace: namespace.into(),
            ledger_path: None,
            retention: Retention::default(),
            tools: Vec::new(),
            extra_metadata: Map::new(),
            duplicate_wait: DEFAULT_DUPLICATE_WAIT,
            cancel_grace: DEFAULT_CANCEL_GRACE,
            surface: None,
            capabilities: json!({}),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.shared.namespace
    }

    /// The service's id (a new one after the client reconnects).
    pub fn service_id(&self) -> String {
        self.service.id()
    }

    pub fn tools_revision(&self) -> u64 {
        self.shared.tools.read().revision
    }

    /// 2 with a surface, else 1.
    pub fn version(&self) -> u64 {
        match self.shared.surface {
            Some(_) => TOOL_PROVIDER_VERSION_2,
            None => TOOL_PROVIDER_VERSION,
        }
    }

    /// A version-2 provider's `capabilities`.
    pub fn capabilities(&self) -> Value {
        self.shared.lists.lock().capabilities.clone()
    }

    /// A version-2 provider's revision of `list`.
    pub fn revision(&self, list: ListRevision) -> u64 {
        let lists = self.shared.lists.lock();
        match list {
            ListRevision::Resources => lists.resources_revision,
            ListRevision::Prompts => lists.prompts_revision,
        }
    }

    /// Replaces a version-2 provider's `capabilities`; the metadata is
    /// updated when they differ. Returns whether they did.
    pub async fn set_capabilities(&self, capabilities: Value) -> Result<bool, ToolsError> {
        self.change_lists(|lists| {
            let changed = lists.capabilities != capabilities;
            lists.capabilities = capabilities;
            changed
        })
        .await
    }

    /// Says a version-2 provider's `list` may answer differently: its
    /// revision grows by one and the metadata is updated, so consumers list
    /// it again.
    pub async fn bump_revision(&self, list: ListRevision) -> Result<(), ToolsError> {
        self.change_lists(|lists| {
            match list {
                ListRevision::Resources => lists.resources_revision += 1,
                ListRevision::Prompts => lists.prompts_revision += 1,
            }
            true
        })
        .await
        .map(|_| ())
    }

    async fn change_lists(
        &self,
        change: impl FnOnce(&mut Lists) -> bool,
    ) -> Result<bool, ToolsError> {
        if self.shared.surface.is_none() {
            return Ok(false);
        }
        let _one_change_at_a_time = self.shared.updating.lock().await;
        let changed = change(&mut self.shared.lists.lock());
        if changed {
            let revision = self.shared.tools.read().revision;
            self.service.update(&self.shared.metadata(revision)).await?;
            tracing::debug!(namespace = %self.shared.namespace, "the provider's metadata changed");
        }
        Ok(changed)
    }

    /// Each tool's name and current `schemaPin`, in declaration order.
    pub fn pins(&self) -> Vec<(String, String)> {
        self.shared.tools.read().pins()
    }

    pub fn stats(&self) -> ProviderStats {
        let counters = &self.shared.counters;
        ProviderStats {
            fallback_tool_call_ids: counters.fallback_tool_call_ids.load(Ordering::Relaxed),
            calls_run: counters.calls_run.load(Ordering::Relaxed),
            replays: counters.replays.load(Ordering::Relaxed),
            duplicates_waited: counters.duplicates_waited.load(Ordering::Relaxed),
        }
    }

    pub fn ledger(&self) -> &Ledger {
        &self.shared.ledger
    }

    pub async fn ledger_counts(&self) -> Result<LedgerCounts, ToolsError> {
        Ok(self.shared.ledger.counts().await?)
    }

    /// Replaces the whole tool set. When `tools/list` would answer
    /// differently, `toolsRevision` is bumped and the service metadata
    /// updated (consumers see it in the catalog); returns whether it was.
    pub async fn set_tools(
        &self,
        tools: Vec<(ToolSpec, Arc<dyn ToolHandler>)>,
    ) -> Result<bool, ToolsError> {
        let _one_change_at_a_time = self.shared.updating.lock().await;
        let current = self.shared.tools.read().clone();
        let mut next = ToolSet::compile(tools, current.revision)?;
        let changed = !next.lists_like(&current);
        if changed {
            next.revision = current.revision + 1;
        }
        let revision = next.revision;
        // Swapped before the metadata update, so a consumer that re-lists on
        // seeing the new revision gets the new list.
        *self.shared.tools.write() = Arc::new(next);
        if changed {
            self.service.update(&self.shared.metadata(revision)).await?;
            tracing::info!(namespace = %self.shared.namespace, revision, "tool list changed");
        }
        Ok(changed)
    }

    /// Adds a tool, or replaces the one of the same name.
    pub async fn add_tool(
        &self,
        spec: ToolSpec,
        handler: Arc<dyn ToolHandler>,
    ) -> Result<bool, ToolsError> {
        let mut tools = self.shared.tools.read().specs();
        match tools
            .iter_mut()
            .find(|(existing, _)| existing.name == spec.name)
        {
            Some(slot) => *slot = (spec, handler),
            None => tools.push((spec, handler)),
        }
        self.set_tools(tools).await
    }

    /// Removes a tool; returns whether the list changed.
    pub async fn remove_tool(&self, name: &str) -> Result<bool, ToolsError> {
        let mut tools = self.shared.tools.read().specs();
        tools.retain(|(spec, _)| spec.name != name);
        self.set_tools(tools).await
    }

    /// Removes the service from the hub.
    pub async fn unregister(self) -> Result<(), ToolsError> {
        Ok(self.service.unregister().await?)
    }
}

/// The hub-facing side: one handler for the provider's service.
struct ProviderHandler(Arc<Shared>);

impl Handler for ProviderHandler {
    fn request(&self, request: Request) -> BoxFuture<Reply> {
        let shared = self.0.clone();
        Box::pin(async move {
            match request.method.as_str() {
                TOOLS_LIST => Ok(shared.tools.read().listing().to_owned()),
                // Polled to its end even when the caller cancels
                // (`finishes_when_cancelled`): the tool must get to stop (or
                // finish) and its outcome must reach the ledger.
                TOOLS_CALL => shared.handle_call(request).await,
                _ => match shared.surface.clone() {
                    Some(surface) => {
                        surface::handle_request(&shared.ledger, &shared.namespace, surface, request)
                            .await
                    }
                    None => Err(method_not_found(&request.method)),
                },
            }
        })
    }

    fn finishes_when_cancelled(&self, method: &str) -> bool {
        method == TOOLS_CALL
    }

    fn notification(&self, notification: Notification) -> BoxFuture<()> {
        let surface = self.0.surface.clone();
        Box::pin(async move {
            if let Some(surface) = surface {
                surface::handle_notification(surface, notification).await;
            }
        })
    }
}
