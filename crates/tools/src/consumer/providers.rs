//! The providers the index knows and what they listed, without any I/O:
//! which service is a tool provider (of version 1 or 2), which lists to
//! fetch when its metadata changes, which answer counts, and the tables
//! built from it all ([`Providers::build`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;
use switchboard_client::ServiceInfo;
use switchboard_protocol::tool_call::{
    TOOL_PROVIDER_PROTOCOL, TOOL_PROVIDER_VERSION, TOOL_PROVIDER_VERSION_2,
};

use super::backend::{HubCaller, HubProvider, ProviderIdentity};
use super::call::CallError;
use super::listing::{ListKind, ListedItem, Listing};
use super::surface::{ServingProvider, Surface, SurfaceBuilder, SurfaceConflict};
use super::table::{Conflict, TableBuilder, ToolTable};
use super::tool::{ExposedTool, ToolBackend};

/// The namespace of a tool provider service (version 1 or 2); `None` for
/// any other service.
pub fn provider_namespace(service: &ServiceInfo) -> Option<&str> {
    provider_of(service).map(|(namespace, _)| namespace)
}

/// The namespace and contract version of a tool provider service.
fn provider_of(service: &ServiceInfo) -> Option<(&str, u64)> {
    let metadata = &service.metadata;
    if metadata["protocol"].as_str() != Some(TOOL_PROVIDER_PROTOCOL) {
        return None;
    }
    let version = metadata["version"]
        .as_u64()
        .filter(|version| [TOOL_PROVIDER_VERSION, TOOL_PROVIDER_VERSION_2].contains(version))?;
    let namespace = metadata["namespace"].as_str().filter(|ns| !ns.is_empty())?;
    Some((namespace, version))
}

/// A list to fetch: fetches are numbered for the whole index, so an answer
/// is applied only if it is its provider's latest fetch of that kind, even
/// across a reconnect that brings the same service id back.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fetch {
    pub(super) service_id: String,
    pub(super) kind: ListKind,
    pub(super) number: u64,
}

/// The answer to a [`Fetch`].
#[derive(Debug)]
pub(super) struct Fetched {
    pub(super) fetch: Fetch,
    pub(super) listing: Result<Listing, CallError>,
}

/// What became of an answer.
#[derive(Debug, PartialEq)]
pub(super) enum Applied {
    /// It is the provider's latest list.
    Current,
    /// It is the provider's latest, and a failure: the list is empty.
    Failed,
    /// A newer fetch is out (or done): this answer is dropped.
    Stale,
    /// The provider (or its list of that kind) is gone.
    Gone,
}

/// One list of a provider: the fetch that counts, and what it answered.
#[derive(Default)]
struct KindList {
    latest_fetch: u64,
    tools: Vec<Arc<ExposedTool>>,
    items: Vec<ListedItem>,
}

struct Tracked {
    info: ServiceInfo,
    namespace: String,
    version: u64,
    /// When the index first saw it: the earliest claim of a name wins.
    arrival: u64,
    backend: Arc<HubProvider>,
    /// A version-2 provider as the target of the other methods.
    serving: Option<Arc<ServingProvider>>,
    lists: BTreeMap<ListKind, KindList>,
}

impl Tracked {
    fn capabilities(&self) -> &Value {
        &self.info.metadata["capabilities"]
    }

    fn items(&self, kind: ListKind) -> &[ListedItem] {
        self.lists.get(&kind).map_or(&[], |list| &list.items)
    }
}

/// The providers the index knows, their lists, and which fetch counts.
pub(super) struct Providers {
    caller: Arc<HubCaller>,
    tracked: HashMap<String, Tracked>,
    next_arrival: u64,
    next_fetch: u64,
    /// Whether anything the tables are built from changed since the last
    /// [`Providers::take_changed`]: most catalog events concern other
    /// services and need no new table.
    changed: bool,
}

impl Providers {
    pub(super) fn new(caller: Arc<HubCaller>) -> Self {
        Providers {
            caller,
            tracked: HashMap::new(),
            next_arrival: 0,
            next_fetch: 0,
            changed: false,
        }
    }

    pub(super) fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Numbers a fetch of `kind` and records it as that list's latest.
    fn fetch(&mut self, service_id: &str, kind: ListKind) -> Option<Fetch> {
        self.next_fetch += 1;
        let number = self.next_fetch;
        let provider = self.tracked.get_mut(service_id)?;
        provider.lists.entry(kind).or_default().latest_fetch = number;
        Some(Fetch {
            service_id: service_id.to_owned(),
            kind,
            number,
        })
    }

    /// A service seen in a snapshot or an `added`/`updated` event. Returns
    /// the fetches to start: every list of a new provider, and for a known
    /// one each list whose revision (or capability) changed; for a
    /// version-1 provider any change of its metadata re-lists its tools.
    pub(super) fn saw(&mut self, info: ServiceInfo) -> Vec<Fetch> {
        let Some((namespace, version)) = provider_of(&info).map(|(ns, v)| (ns.to_owned(), v))
        else {
            self.removed(&info.service_id);
            return Vec::new();
        };
        let service_id = info.service_id.clone();
        let kinds = match self.tracked.get_mut(&service_id) {
            Some(known) if known.info.metadata == info.metadata => return Vec::new(),
            Some(known) if known.namespace == namespace && known.version == version => {
                let old = std::mem::replace(&mut known.info, info);
                let (before, now) = (&old.metadata, &known.info.metadata);
                if before["capabilities"] != now["capabilities"] {
                    known.serving = serving(&known.namespace, version, now, &known.backend);
                    self.changed = true;
                }
                let mut kinds = Vec::new();
                for kind in ListKind::ALL {
                    if !kind.served(version, &now["capabilities"]) {
                        self.changed |= known.lists.remove(&kind).is_some();
                        continue;
                    }
                    let capability = kind.capability();
                    if version == TOOL_PROVIDER_VERSION
                        || !known.lists.contains_key(&kind)
                        || before[kind.revision()] != now[kind.revision()]
                        || before["capabilities"][capability] != now["capabilities"][capability]
                    {
                        kinds.push(kind);
                    }
                }
                kinds
            }
            Some(known) => {
                // A new namespace or version: its lists were named after the
                // old one, and its backend speaks the old version.
                known.lists.clear();
                known.namespace = namespace;
                known.version = version;
                known.backend = backend(&self.caller, &info, version);
                known.serving = serving(&known.namespace, version, &info.metadata, &known.backend);
                known.info = info;
                self.changed = true;
                served_kinds(version, known.capabilities())
            }
            None => {
                self.next_arrival += 1;
                let backend = backend(&self.caller, &info, version);
                let kinds = served_kinds(version, &info.metadata["capabilities"]);
                self.changed = true;
                let serving = serving(&namespace, version, &info.metadata, &backend);
                self.tracked.insert(
                    service_id.clone(),
                    Tracked {
                        info,
                        namespace,
                        version,
                        arrival: self.next_arrival,
                        backend,
                        serving,
                        lists: BTreeMap::new(),
                    },
                );
                kinds
            }
        };
        kinds
            .into_iter()
            .filter_map(|kind| self.fetch(&service_id, kind))
            .collect()
    }

    pub(super) fn removed(&mut self, service_id: &str) {
        self.changed |= self.tracked.remove(service_id).is_some();
    }

    pub(super) fn clear(&mut self) {
        self.changed |= !self.tracked.is_empty();
        self.tracked.clear();
    }

    /// A fetch of a known provider's list of `kind` again.
    pub(super) fn refresh(&mut self, service_id: &str, kind: ListKind) -> Option<Fetch> {
        let provider = self.tracked.get(service_id)?;
        kind.served(provider.version, provider.capabilities())
            .then_some(())?;
        self.fetch(service_id, kind)
    }

    pub(super) fn apply(&mut self, fetched: Fetched) -> Applied {
        let Fetched { fetch, listing } = fetched;
        let Some(provider) = self.tracked.get_mut(&fetch.service_id) else {
            return Applied::Gone;
        };
        let Some(list) = provider.lists.get_mut(&fetch.kind) else {
            return Applied::Gone;
        };
        if list.latest_fetch != fetch.number {
            return Applied::Stale;
        }
        self.changed = true;
        let (listing, applied) = match listing {
            Ok(listing) => (listing, Applied::Current),
            Err(error @ (CallError::ConnectionLost | CallError::NotConnected)) => {
                // The index hears of the lost connection on its own.
                tracing::debug!(service = %fetch.service_id, %error, list = fetch.kind.method(), "a list was cut off");
                (Listing::empty(fetch.kind), Applied::Failed)
            }
            Err(error) => {
                tracing::warn!(service = %fetch.service_id, namespace = %provider.namespace, %error, list = fetch.kind.method(), "cannot list what a provider serves");
                (Listing::empty(fetch.kind), Applied::Failed)
            }
        };
        match listing {
            Listing::Tools(listed) => {
                list.tools = listed
                    .into_iter()
                    .map(|listed| {
                        let backend: Arc<dyn ToolBackend> = provider.backend.clone();
                        Arc::new(ExposedTool::new(&provider.namespace, listed, backend))
                    })
                    .collect();
            }
            Listing::Items(items) => list.items = items,
        }
        applied
    }

    /// The tables: providers in arrival order, each claiming its namespace,
    /// its tools and its prompts; then the namespace holders of version 2
    /// in namespace order with their resources and templates.
    pub(super) fn build(&self) -> Built {
        let mut ordered: Vec<&Tracked> = self.tracked.values().collect();
        ordered.sort_by_key(|provider| provider.arrival);
        let mut tools = TableBuilder::new();
        let mut surface = SurfaceBuilder::default();
        let mut holders = Vec::new();
        for provider in ordered {
            let listed = provider
                .lists
                .get(&ListKind::Tools)
                .map(|list| list.tools.clone())
                .unwrap_or_default();
            if !tools.add_group(&provider.info.service_id, &provider.namespace, listed) {
                continue;
            }
            if let Some(serving) = &provider.serving {
                surface.add_prompts(serving, provider.items(ListKind::Prompts));
                holders.push((provider, serving));
            }
        }
        holders.sort_by(|(a, _), (b, _)| a.namespace.cmp(&b.namespace));
        for (provider, serving) in holders {
            surface.add_resources(
                serving,
                provider.items(ListKind::Resources),
                provider.items(ListKind::Templates),
            );
        }
        let (table, conflicts) = tools.finish();
        let (surface, surface_conflicts) = surface.finish();
        Built {
            table,
            surface,
            conflicts,
            surface_conflicts,
        }
    }
}

/// What [`Providers::build`] makes.
pub(super) struct Built {
    pub(super) table: ToolTable,
    pub(super) surface: Surface,
    pub(super) conflicts: Vec<Conflict>,
    pub(super) surface_conflicts: Vec<SurfaceConflict>,
}

fn backend(caller: &Arc<HubCaller>, info: &ServiceInfo, version: u64) -> Arc<HubProvider> {
    Arc::new(HubProvider::new(
        caller.clone(),
        ProviderIdentity {
            service_id: info.service_id.clone(),
            client_id: info.client_id.clone(),
            principal: info.principal.clone(),
            version,
        },
    ))
}

fn served_kinds(version: u64, capabilities: &Value) -> Vec<ListKind> {
    ListKind::ALL
        .into_iter()
        .filter(|kind| kind.served(version, capabilities))
        .collect()
}

fn serving(
    namespace: &str,
    version: u64,
    metadata: &Value,
    backend: &Arc<HubProvider>,
) -> Option<Arc<ServingProvider>> {
    (version == TOOL_PROVIDER_VERSION_2).then(|| {
        Arc::new(ServingProvider {
            namespace: namespace.to_owned(),
            capabilities: metadata["capabilities"].clone(),
            backend: backend.clone(),
        })
    })
}

#[cfg(test)]
#[path = "providers_tests.rs"]
mod tests;
