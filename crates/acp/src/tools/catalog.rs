//! The link to the hub: one client connection, and the tool set kept current
//! from its live catalog.
//!
//! One supervisor task owns all of it. It connects (and reconnects, with
//! backoff, if the hub is not running or goes away), follows catalog events,
//! fetches `tools/list` from each tool provider in spawned tasks whose results
//! come back to it, and publishes an immutable [`ToolSet`] after every
//! change. A fetch result is applied only if it belongs to the provider's
//! latest fetch, so a slow, stale answer never overwrites a newer one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::RwLock;
use serde::Deserialize;
use serde_json::{json, Value};
use switchboard_client::{CatalogEvent, Client, ConnectOptions, Endpoint, ServiceInfo};
use switchboard_protocol::tool_call::{TOOLS_LIST, TOOL_PROVIDER_PROTOCOL, TOOL_PROVIDER_VERSION};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{HubTool, ToolSet};

/// How long one `tools/list` may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// OpenAI's rule for function names; other servers are no looser.
const MAX_TOOL_NAME: usize = 64;

/// The shared view of the hub; the supervisor task is its only writer.
pub struct HubLink {
    client: RwLock<Option<Client>>,
    tools: ArcSwap<ToolSet>,
    /// `true` once the first catalog is loaded (or the hub was unreachable),
    /// so a first prompt right after start sees the hub's tools.
    ready: watch::Sender<bool>,
    refresh: mpsc::UnboundedSender<String>,
    stop: CancellationToken,
}

impl HubLink {
    /// Starts the supervisor for the hub in `hub_dir`.
    pub fn start(hub_dir: PathBuf) -> Arc<HubLink> {
        let (refresh, refresh_requests) = mpsc::unbounded_channel();
        let link = Arc::new(HubLink {
            client: RwLock::new(None),
            tools: ArcSwap::from_pointee(ToolSet::default()),
            ready: watch::Sender::new(false),
            refresh,
            stop: CancellationToken::new(),
        });
        tokio::spawn(supervise(link.clone(), hub_dir, refresh_requests));
        link
    }

    /// The tools as of now.
    pub fn tools(&self) -> Arc<ToolSet> {
        self.tools.load_full()
    }

    /// The current hub connection, if any.
    pub fn client(&self) -> Option<Client> {
        self.client.read().clone()
    }

    /// Waits (at most `bound`) for the first catalog.
    pub async fn wait_ready(&self, bound: Duration) {
        let mut ready = self.ready.subscribe();
        let _ = tokio::time::timeout(bound, ready.wait_for(|r| *r)).await;
    }

    /// Asks for a provider's tool list again (after `tool_schema_changed`).
    pub fn refresh(&self, service_id: &str) {
        let _ = self.refresh.send(service_id.to_owned());
    }

    /// Stops the supervisor and closes the hub connection.
    pub fn close(&self) {
        self.stop.cancel();
        if let Some(client) = self.client.write().take() {
            client.close();
        }
    }
}

async fn supervise(
    link: Arc<HubLink>,
    hub_dir: PathBuf,
    mut refresh: mpsc::UnboundedReceiver<String>,
) {
    let mut backoff = Duration::from_millis(500);
    let mut warned = false;
    loop {
        let connecting = Client::connect_with(ConnectOptions {
            endpoint: Endpoint::Dir(Some(hub_dir.clone())),
            client_name: "switchboard acp".into(),
        });
        let connected = tokio::select! {
            _ = link.stop.cancelled() => return,
            connected = connecting => connected,
        };
        match connected {
            Ok(client) => {
                tracing::info!(hub = %hub_dir.display(), "connected to the hub");
                warned = false;
                backoff = Duration::from_millis(500);
                *link.client.write() = Some(client.clone());
                if let Err(error) = follow_catalog(&link, &client, &mut refresh).await {
                    tracing::warn!(%error, "lost the hub catalog");
                }
                // Whatever happened, a waiting first turn goes ahead.
                link.ready.send_replace(true);
                link.client.write().take();
                link.tools.store(Arc::new(ToolSet::default()));
                client.close();
            }
            Err(error) => {
                if !warned {
                    tracing::warn!(%error, "no hub; running with the built-in tools only until it appears");
                    warned = true;
                }
                link.ready.send_replace(true);
            }
        }
        tokio::select! {
            _ = link.stop.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// A provider as the watcher tracks it.
struct Provider {
    /// When it was first seen: on a name collision the earlier one wins.
    seen: u64,
    namespace: String,
    /// Bumped on every fetch; only the latest fetch's answer is applied.
    generation: u64,
    tools: Vec<HubTool>,
}

struct Fetched {
    service_id: String,
    generation: u64,
    tools: Result<Vec<HubTool>, String>,
}

async fn follow_catalog(
    link: &HubLink,
    client: &Client,
    refresh: &mut mpsc::UnboundedReceiver<String>,
) -> Result<(), switchboard_client::Error> {
    let mut catalog = client.catalog().await?;
    let (fetched_tx, mut fetched) = mpsc::unbounded_channel::<Fetched>();
    let mut providers: BTreeMap<String, Provider> = BTreeMap::new();
    let mut seen = 0u64;
    // Fetches of the first snapshot not yet answered; `ready` waits for them.
    let mut initial: Vec<(String, u64)> = Vec::new();

    let fetch = |providers: &mut BTreeMap<String, Provider>, service_id: &str| {
        let provider = providers.get_mut(service_id)?;
        provider.generation += 1;
        let generation = provider.generation;
        let (client, service_id, namespace) = (
            client.clone(),
            service_id.to_owned(),
            provider.namespace.clone(),
        );
        let results = fetched_tx.clone();
        tokio::spawn(async move {
            let tools = list_tools(&client, &service_id, &namespace).await;
            let _ = results.send(Fetched {
                service_id,
                generation,
                tools,
            });
        });
        Some(generation)
    };

    let mut track = |providers: &mut BTreeMap<String, Provider>, info: &ServiceInfo| -> bool {
        match provider_namespace(info) {
            Some(namespace) => {
                let provider = providers.entry(info.service_id.clone()).or_insert_with(|| {
                    seen += 1;
                    Provider {
                        seen,
                        namespace: namespace.clone(),
                        generation: 0,
                        tools: Vec::new(),
                    }
                });
                provider.namespace = namespace;
                true
            }
            None => providers.remove(&info.service_id).is_some(),
        }
    };

    for info in catalog.initial().to_vec() {
        if track(&mut providers, &info) {
            if let Some(generation) = fetch(&mut providers, &info.service_id) {
                initial.push((info.service_id.clone(), generation));
            }
        }
    }
    if initial.is_empty() {
        link.ready.send_replace(true);
    }

    loop {
        tokio::select! {
            _ = link.stop.cancelled() => return Ok(()),
            _ = client.closed() => return Ok(()),
            event = catalog.next_event() => {
                let Some(event) = event else { return Ok(()) };
                match event {
                    CatalogEvent::Added(info) | CatalogEvent::Updated(info) => {
                        let was_provider = providers.contains_key(&info.service_id);
                        if track(&mut providers, &info) {
                            fetch(&mut providers, &info.service_id);
                        } else if was_provider {
                            publish(link, &providers);
                        }
                    }
                    CatalogEvent::Removed { service_id, .. } => {
                        if providers.remove(&service_id).is_some() {
                            publish(link, &providers);
                        }
                    }
                    CatalogEvent::Resynced => {
                        providers.clear();
                        for info in catalog.services() {
                            if track(&mut providers, &info) {
                                fetch(&mut providers, &info.service_id);
                            }
                        }
                        publish(link, &providers);
                    }
                }
            }
            Some(result) = fetched.recv() => {
                initial.retain(|(id, generation)| !(id == &result.service_id && *generation == result.generation));
                if let Some(provider) = providers.get_mut(&result.service_id) {
                    if provider.generation == result.generation {
                        match result.tools {
                            Ok(tools) => provider.tools = tools,
                            Err(error) => {
                                tracing::warn!(service = %result.service_id, namespace = %provider.namespace, %error, "cannot list a provider's tools");
                                provider.tools.clear();
                            }
                        }
                        publish(link, &providers);
                    }
                }
                if initial.is_empty() {
                    link.ready.send_replace(true);
                }
            }
            Some(service_id) = refresh.recv() => {
                fetch(&mut providers, &service_id);
            }
        }
    }
}

/// The namespace of a tool provider service; `None` for any other service.
fn provider_namespace(info: &ServiceInfo) -> Option<String> {
    let metadata = &info.metadata;
    if metadata.get("protocol").and_then(Value::as_str) != Some(TOOL_PROVIDER_PROTOCOL) {
        return None;
    }
    if metadata.get("version").and_then(Value::as_u64) != Some(TOOL_PROVIDER_VERSION) {
        tracing::warn!(service = %info.service_id, "ignoring a tool provider of an unknown version");
        return None;
    }
    match metadata.get("namespace").and_then(Value::as_str) {
        Some(namespace) if !namespace.is_empty() => Some(namespace.to_owned()),
        _ => {
            tracing::warn!(service = %info.service_id, "ignoring a tool provider without a namespace");
            None
        }
    }
}

#[derive(Deserialize)]
struct ToolsList {
    tools: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedTool {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    input_schema: Option<Value>,
    #[serde(default)]
    annotations: Option<Value>,
    #[serde(default)]
    schema_pin: Option<String>,
}

async fn list_tools(
    client: &Client,
    service_id: &str,
    namespace: &str,
) -> Result<Vec<HubTool>, String> {
    let answer = tokio::time::timeout(
        LIST_TIMEOUT,
        client.request::<ToolsList>(service_id, TOOLS_LIST, &json!({})),
    )
    .await
    .map_err(|_| format!("tools/list took longer than {LIST_TIMEOUT:?}"))?
    .map_err(|error| error.to_string())?;
    let mut tools = Vec::new();
    for entry in answer.tools {
        match serde_json::from_value::<ListedTool>(entry) {
            Ok(listed) if !listed.name.is_empty() => {
                let read_only = listed
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("readOnlyHint"))
                    .and_then(Value::as_bool)
                    == Some(true);
                tools.push(HubTool {
                    exposed_name: exposed_name(namespace, &listed.name),
                    service_id: service_id.to_owned(),
                    namespace: namespace.to_owned(),
                    name: listed.name,
                    description: listed.description,
                    input_schema: listed
                        .input_schema
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({"type": "object"})),
                    read_only,
                    schema_pin: listed.schema_pin,
                });
            }
            Ok(_) => tracing::warn!(namespace, "skipping a tool with an empty name"),
            Err(error) => tracing::warn!(namespace, %error, "skipping a malformed tool entry"),
        }
    }
    Ok(tools)
}

/// `<namespace>__<tool>`, with every character a function name may not hold
/// replaced by `_`.
pub fn exposed_name(namespace: &str, tool: &str) -> String {
    let clean = |text: &str| -> String {
        text.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("{}__{}", clean(namespace), clean(tool))
}

/// Rebuilds and publishes the tool set. Providers seen first win a name.
fn publish(link: &HubLink, providers: &BTreeMap<String, Provider>) {
    let mut ordered: Vec<&Provider> = providers.values().collect();
    ordered.sort_by_key(|provider| provider.seen);
    let mut set = ToolSet::default();
    for provider in ordered {
        for tool in &provider.tools {
            if tool.exposed_name.len() > MAX_TOOL_NAME {
                tracing::warn!(tool = %tool.exposed_name, "skipping a tool whose name is over {MAX_TOOL_NAME} characters");
                continue;
            }
            if set.hub.contains_key(&tool.exposed_name)
                || super::builtin::Builtin::from_name(&tool.exposed_name).is_some()
            {
                tracing::warn!(tool = %tool.exposed_name, service = %tool.service_id, "skipping a tool whose name is already taken");
                continue;
            }
            set.hub
                .insert(tool.exposed_name.clone(), Arc::new(tool.clone()));
        }
    }
    tracing::debug!(tools = set.hub.len(), "hub tool set updated");
    link.tools.store(Arc::new(set));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_names_are_valid_function_names() {
        assert_eq!(exposed_name("git", "log"), "git__log");
        assert_eq!(exposed_name("my.ns", "do it"), "my_ns__do_it");
    }
}
