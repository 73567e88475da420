//! The gateway's tool index: every tool provider the gateway's principal can
//! discover, with its tools, kept current from the catalog (no polling).
//!
//! One task owns the index. It reads catalog events, starts `tools/list`
//! fetches (each in its own task, so a slow provider delays no event) and
//! applies their results; after each change it rebuilds the table the MCP
//! side reads and, when the table changed, sends `tools/list_changed`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::Tool;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use switchboard_client::{Catalog, CatalogEvent, Client, RequestOptions, ServiceInfo};
use switchboard_protocol::tool_call::{TOOLS_LIST, TOOL_PROVIDER_PROTOCOL};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::Gateway;

/// How long one provider may take to answer `tools/list`.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);
/// The separator between namespace and tool in the names the gateway shows.
pub const SEPARATOR: &str = "__";

/// One tool as the MCP side shows and calls it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExposedTool {
    pub(crate) service_id: String,
    pub(crate) provider_client_id: String,
    pub(crate) namespace: String,
    /// The provider's bare name.
    pub(crate) tool: String,
    pub(crate) schema_pin: Option<String>,
    /// The MCP definition, named `<namespace>__<tool>`.
    pub(crate) definition: Tool,
}

/// What `tools/list` answers, by exposed name.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ToolTable {
    pub(crate) tools: BTreeMap<String, ExposedTool>,
}

impl ToolTable {
    pub(crate) fn definitions(&self) -> Vec<Tool> {
        self.tools.values().map(|t| t.definition.clone()).collect()
    }
}

/// Asks the index to do something outside the catalog's events.
pub(crate) enum IndexCommand {
    /// Fetch this provider's tools again (a call found them stale).
    Refresh { service_id: String },
    /// The hub connection is gone: nothing is reachable until it is back.
    Disconnected,
}

/// One provider as the index knows it.
struct Provider {
    info: ServiceInfo,
    /// When the index first saw it; the earliest claim of a namespace wins.
    arrival: u64,
    tools: Vec<ListedTool>,
}

impl Provider {
    fn namespace(&self) -> &str {
        self.info.metadata["namespace"].as_str().unwrap_or_default()
    }

    fn revision(&self) -> &Value {
        &self.info.metadata["toolsRevision"]
    }
}

/// One entry of a provider's `tools/list` answer.
#[derive(Debug, Clone, Deserialize)]
struct ListedTool {
    name: String,
    #[serde(rename = "schemaPin")]
    schema_pin: Option<String>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize)]
struct Listing {
    tools: Vec<ListedTool>,
}

struct Fetched {
    service_id: String,
    revision: Value,
    tools: Result<Vec<ListedTool>, String>,
}

pub(crate) fn is_provider(service: &ServiceInfo) -> bool {
    service.metadata["protocol"].as_str() == Some(TOOL_PROVIDER_PROTOCOL)
        && service.metadata["version"].as_u64() == Some(1)
        && service.metadata["namespace"]
            .as_str()
            .is_some_and(|ns| !ns.is_empty())
}

pub(crate) struct Index {
    gateway: Arc<Gateway>,
    client: Client,
    providers: HashMap<String, Provider>,
    next_arrival: u64,
    fetches: JoinSet<Fetched>,
    /// (namespace, losing service) pairs already logged.
    reported_clashes: HashSet<(String, String)>,
}

impl Index {
    pub(crate) fn new(gateway: Arc<Gateway>, client: Client) -> Self {
        Index {
            gateway,
            client,
            providers: HashMap::new(),
            next_arrival: 0,
            fetches: JoinSet::new(),
            reported_clashes: HashSet::new(),
        }
    }

    /// Builds the first table (waiting, bounded, for every provider's list),
    /// signals readiness, then follows the catalog until the client is gone.
    pub(crate) async fn run(
        mut self,
        mut catalog: Catalog,
        mut commands: mpsc::UnboundedReceiver<IndexCommand>,
    ) {
        for service in catalog.initial().to_vec() {
            self.add(service);
        }
        while let Some(fetched) = self.fetches.join_next().await {
            if let Ok(fetched) = fetched {
                self.apply(fetched);
            }
        }
        self.publish().await;
        self.gateway.set_ready();
        loop {
            tokio::select! {
                event = catalog.next_event() => {
                    let Some(event) = event else { return };
                    self.on_event(event, &catalog);
                }
                Some(fetched) = self.fetches.join_next(), if !self.fetches.is_empty() => {
                    if let Ok(fetched) = fetched {
                        self.apply(fetched);
                    }
                }
                Some(command) = commands.recv() => match command {
                    IndexCommand::Refresh { service_id } => {
                        if let Some(provider) = self.providers.get(&service_id) {
                            let info = provider.info.clone();
                            self.fetch(&info);
                        }
                    }
                    IndexCommand::Disconnected => {
                        self.providers.clear();
                    }
                },
            }
            self.publish().await;
        }
    }

    fn on_event(&mut self, event: CatalogEvent, catalog: &Catalog) {
        match event {
            CatalogEvent::Added(service) => self.add(service),
            CatalogEvent::Updated(service) => {
                if !is_provider(&service) {
                    self.providers.remove(&service.service_id);
                    return;
                }
                match self.providers.get_mut(&service.service_id) {
                    Some(known) => {
                        let relist = known.info.metadata != service.metadata;
                        known.info = service.clone();
                        if relist {
                            self.fetch(&service);
                        }
                    }
                    None => self.add(service),
                }
            }
            CatalogEvent::Removed { service_id, .. } => {
                self.providers.remove(&service_id);
            }
            CatalogEvent::Resynced => {
                // A new connection: every id of the old one is gone.
                self.providers.clear();
                for service in catalog.services() {
                    self.add(service);
                }
            }
        }
    }

    fn add(&mut self, service: ServiceInfo) {
        if !is_provider(&service) {
            return;
        }
        self.next_arrival += 1;
        self.fetch(&service);
        self.providers.insert(
            service.service_id.clone(),
            Provider {
                info: service,
                arrival: self.next_arrival,
                tools: Vec::new(),
            },
        );
    }

    fn fetch(&mut self, service: &ServiceInfo) {
        let client = self.client.clone();
        let service_id = service.service_id.clone();
        let revision = service.metadata["toolsRevision"].clone();
        self.fetches.spawn(async move {
            let params = RawValue::from_string("{}".into()).expect("{} is JSON");
            let options = RequestOptions {
                timeout: Some(LIST_TIMEOUT),
            };
            let answer = tokio::time::timeout(
                LIST_TIMEOUT + Duration::from_secs(1),
                client.request_raw(&service_id, TOOLS_LIST, Some(&params), options),
            )
            .await;
            let tools = match answer {
                Ok(Ok(raw)) => serde_json::from_str::<Listing>(raw.get())
                    .map(|listing| listing.tools)
                    .map_err(|error| format!("malformed tools/list answer: {error}")),
                Ok(Err(error)) => Err(error.to_string()),
                Err(_) => Err(format!("no tools/list answer within {LIST_TIMEOUT:?}")),
            };
            Fetched {
                service_id,
                revision,
                tools,
            }
        });
    }

    fn apply(&mut self, fetched: Fetched) {
        let Some(provider) = self.providers.get_mut(&fetched.service_id) else {
            return;
        };
        // A list of an older revision: the fetch for the newer one is coming.
        if provider.revision() != &fetched.revision {
            return;
        }
        match fetched.tools {
            Ok(tools) => provider.tools = tools,
            Err(error) => {
                tracing::warn!(service = %fetched.service_id, namespace = provider.namespace(), %error, "cannot list a provider's tools");
                provider.tools.clear();
            }
        }
    }

    /// Rebuilds the table; swaps it in and tells the MCP client if it changed.
    async fn publish(&mut self) {
        let table = self.build();
        if *self.gateway.table.read().as_ref() == table {
            return;
        }
        *self.gateway.table.write() = Arc::new(table);
        self.gateway.tools_changed().await;
    }

    fn build(&mut self) -> ToolTable {
        let mut by_namespace: BTreeMap<&str, Vec<&Provider>> = BTreeMap::new();
        for provider in self.providers.values() {
            by_namespace
                .entry(provider.namespace())
                .or_default()
                .push(provider);
        }
        let mut table = ToolTable::default();
        let mut clashes = Vec::new();
        for (namespace, mut claimants) in by_namespace {
            claimants.sort_by_key(|p| p.arrival);
            let served = claimants[0];
            for loser in &claimants[1..] {
                clashes.push((
                    namespace.to_owned(),
                    loser.info.service_id.clone(),
                    served.info.service_id.clone(),
                ));
            }
            for listed in &served.tools {
                let exposed_name = format!("{namespace}{SEPARATOR}{}", listed.name);
                let mut definition = listed.rest.clone();
                definition.insert("name".into(), Value::String(exposed_name.clone()));
                let definition: Tool = match serde_json::from_value(Value::Object(definition)) {
                    Ok(tool) => tool,
                    Err(error) => {
                        tracing::warn!(tool = %exposed_name, %error, "skipping a tool whose definition MCP cannot carry");
                        continue;
                    }
                };
                table.tools.insert(
                    exposed_name,
                    ExposedTool {
                        service_id: served.info.service_id.clone(),
                        provider_client_id: served.info.client_id.clone(),
                        namespace: namespace.to_owned(),
                        tool: listed.name.clone(),
                        schema_pin: listed.schema_pin.clone(),
                        definition,
                    },
                );
            }
        }
        for (namespace, loser, winner) in clashes {
            if self
                .reported_clashes
                .insert((namespace.clone(), loser.clone()))
            {
                tracing::warn!(
                    namespace,
                    served = %winner,
                    ignored = %loser,
                    "two tool providers claim one namespace; serving the first"
                );
            }
        }
        table
    }
}
