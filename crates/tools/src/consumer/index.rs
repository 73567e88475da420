//! The hub's tool index: every tool provider this client may discover, with
//! its tools, kept current from the catalog (no polling).
//!
//! One task owns it ([`Index::run`]). It reads catalog events, starts
//! `tools/list` fetches (each in a task of its own, so a slow provider
//! delays no event) and applies their answers; after each change it builds a
//! [`ToolTable`] and publishes it if it differs from the last one.
//! [`Providers`] is the state it keeps, without any I/O.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use switchboard_client::{Catalog, CatalogEvent, Client, ServiceInfo};
use switchboard_protocol::tool_call::{TOOL_PROVIDER_PROTOCOL, TOOL_PROVIDER_VERSION};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::backend::{Command, HubCaller, HubProvider};
use super::call::{list_provider, CallError};
use super::table::{Conflict, TableBuilder, ToolTable};
use super::tool::{ExposedTool, ListedTool};

/// The namespace of a tool provider service; `None` for any other service.
pub fn provider_namespace(service: &ServiceInfo) -> Option<&str> {
    let metadata = &service.metadata;
    if metadata["protocol"].as_str() != Some(TOOL_PROVIDER_PROTOCOL)
        || metadata["version"].as_u64() != Some(TOOL_PROVIDER_VERSION)
    {
        return None;
    }
    metadata["namespace"].as_str().filter(|ns| !ns.is_empty())
}

/// A `tools/list` to start: fetches are numbered for the whole index, so an
/// answer is applied only if it is its provider's latest fetch, even across
/// a reconnect that brings the same service id back.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fetch {
    pub(super) service_id: String,
    pub(super) number: u64,
}

/// The answer to a [`Fetch`].
#[derive(Debug)]
pub(super) struct Fetched {
    pub(super) fetch: Fetch,
    pub(super) tools: Result<Vec<ListedTool>, CallError>,
}

/// What became of an answer.
#[derive(Debug, PartialEq)]
pub(super) enum Applied {
    /// It is the provider's latest list (or why it has none).
    Current,
    /// A newer fetch is out (or done): this answer is dropped.
    Stale,
    /// The provider is gone.
    Gone,
}

struct Tracked {
    info: ServiceInfo,
    namespace: String,
    /// When the index first saw it: the earliest claim of a name wins.
    arrival: u64,
    latest_fetch: u64,
    backend: Arc<HubProvider>,
    tools: Vec<Arc<ExposedTool>>,
}

/// The providers the index knows, their tools, and which fetch counts.
pub(super) struct Providers {
    caller: Arc<HubCaller>,
    tracked: HashMap<String, Tracked>,
    next_arrival: u64,
    next_fetch: u64,
    /// Whether anything the table is built from changed since the last
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

    fn next_fetch(&mut self, service_id: &str) -> Fetch {
        self.next_fetch += 1;
        Fetch {
            service_id: service_id.to_owned(),
            number: self.next_fetch,
        }
    }

    /// A service seen in a snapshot or an `added`/`updated` event. Returns
    /// the fetch to start: for a new provider, or one whose metadata changed
    /// (a new `toolsRevision`).
    pub(super) fn saw(&mut self, info: ServiceInfo) -> Option<Fetch> {
        let Some(namespace) = provider_namespace(&info).map(str::to_owned) else {
            self.removed(&info.service_id);
            return None;
        };
        if let Some(known) = self.tracked.get(&info.service_id) {
            if known.info.metadata == info.metadata {
                return None;
            }
        }
        let fetch = self.next_fetch(&info.service_id);
        match self.tracked.get_mut(&info.service_id) {
            Some(known) => {
                if known.namespace != namespace {
                    // Its tools are named after the old namespace.
                    known.tools.clear();
                    known.namespace = namespace;
                    self.changed = true;
                }
                known.info = info;
                known.latest_fetch = fetch.number;
            }
            None => {
                self.next_arrival += 1;
                let backend = Arc::new(HubProvider::new(
                    self.caller.clone(),
                    info.service_id.clone(),
                    info.client_id.clone(),
                ));
                self.changed = true;
                self.tracked.insert(
                    info.service_id.clone(),
                    Tracked {
                        info,
                        namespace,
                        arrival: self.next_arrival,
                        latest_fetch: fetch.number,
                        backend,
                        tools: Vec::new(),
                    },
                );
            }
        }
        Some(fetch)
    }

    pub(super) fn removed(&mut self, service_id: &str) {
        self.changed |= self.tracked.remove(service_id).is_some();
    }

    pub(super) fn clear(&mut self) {
        self.changed |= !self.tracked.is_empty();
        self.tracked.clear();
    }

    /// A fetch of a known provider's list again.
    pub(super) fn refresh(&mut self, service_id: &str) -> Option<Fetch> {
        self.tracked.contains_key(service_id).then_some(())?;
        let fetch = self.next_fetch(service_id);
        self.tracked.get_mut(service_id)?.latest_fetch = fetch.number;
        Some(fetch)
    }

    pub(super) fn apply(&mut self, fetched: Fetched) -> Applied {
        let Some(provider) = self.tracked.get_mut(&fetched.fetch.service_id) else {
            return Applied::Gone;
        };
        if provider.latest_fetch != fetched.fetch.number {
            return Applied::Stale;
        }
        self.changed = true;
        provider.tools = match fetched.tools {
            Ok(listed) => listed
                .into_iter()
                .map(|listed| {
                    Arc::new(ExposedTool::new(
                        &provider.namespace,
                        listed,
                        provider.backend.clone(),
                    ))
                })
                .collect(),
            Err(error @ (CallError::ConnectionLost | CallError::NotConnected)) => {
                // The index hears of the lost connection on its own.
                tracing::debug!(service = %fetched.fetch.service_id, %error, "a tools/list was cut off");
                Vec::new()
            }
            Err(error) => {
                tracing::warn!(service = %fetched.fetch.service_id, namespace = %provider.namespace, %error, "cannot list a provider's tools");
                Vec::new()
            }
        };
        Applied::Current
    }

    /// The table: providers in arrival order, each claiming its namespace.
    pub(super) fn build(&self) -> (ToolTable, Vec<Conflict>) {
        let mut ordered: Vec<&Tracked> = self.tracked.values().collect();
        ordered.sort_by_key(|provider| provider.arrival);
        let mut builder = TableBuilder::new();
        for provider in ordered {
            builder.add_group(
                &provider.info.service_id,
                &provider.namespace,
                provider.tools.iter().cloned(),
            );
        }
        builder.finish()
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
    pub(super) fn new() -> Self {
        Published {
            table: ArcSwap::from_pointee(ToolTable::default()),
            revision: watch::Sender::new(0),
            ready: watch::Sender::new(false),
            stale_lists_dropped: AtomicU64::new(0),
        }
    }

    pub(super) fn table(&self) -> Arc<ToolTable> {
        self.table.load_full()
    }

    pub(super) fn changes(&self) -> watch::Receiver<u64> {
        self.revision.subscribe()
    }

    pub(super) fn ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    pub(super) fn stale_lists_dropped(&self) -> u64 {
        self.stale_lists_dropped.load(Ordering::Relaxed)
    }

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

/// The task that owns [`Providers`].
pub(super) struct Index {
    providers: Providers,
    client: Client,
    published: Arc<Published>,
    fetches: JoinSet<Fetched>,
    /// Fetches of the first snapshot not yet answered; readiness waits for them.
    initial: HashSet<u64>,
    /// Conflicts already logged.
    reported: HashSet<Conflict>,
}

impl Index {
    pub(super) fn new(caller: Arc<HubCaller>, client: Client, published: Arc<Published>) -> Self {
        Index {
            providers: Providers::new(caller),
            client,
            published,
            fetches: JoinSet::new(),
            initial: HashSet::new(),
            reported: HashSet::new(),
        }
    }

    /// Follows the catalog until `stop` (or the client is gone). Readiness is
    /// signalled once every provider of the first snapshot has answered.
    pub(super) async fn run(
        mut self,
        mut catalog: Catalog,
        mut commands: mpsc::UnboundedReceiver<Command>,
        stop: CancellationToken,
    ) {
        for service in catalog.initial().to_vec() {
            if let Some(fetch) = self.providers.saw(service) {
                self.initial.insert(fetch.number);
                self.start(fetch);
            }
        }
        self.publish();
        loop {
            if self.initial.is_empty() {
                self.published.set_ready();
            }
            tokio::select! {
                () = stop.cancelled() => return,
                event = catalog.next_event() => {
                    let Some(event) = event else { return };
                    self.on_event(event, &catalog);
                }
                Some(fetched) = self.fetches.join_next(), if !self.fetches.is_empty() => {
                    // A fetch task only ends by returning (none is aborted
                    // while the index runs).
                    if let Ok(fetched) = fetched {
                        self.initial.remove(&fetched.fetch.number);
                        if self.providers.apply(fetched) == Applied::Stale {
                            self.published.count_stale_list();
                        }
                    }
                }
                Some(command) = commands.recv() => match command {
                    Command::Refresh { service_id } => {
                        if let Some(fetch) = self.providers.refresh(&service_id) {
                            self.start(fetch);
                        }
                    }
                    Command::Disconnected => self.providers.clear(),
                },
            }
            self.publish();
        }
    }

    fn on_event(&mut self, event: CatalogEvent, catalog: &Catalog) {
        match event {
            CatalogEvent::Added(service) | CatalogEvent::Updated(service) => {
                if let Some(fetch) = self.providers.saw(service) {
                    self.start(fetch);
                }
            }
            CatalogEvent::Removed { service_id, .. } => self.providers.removed(&service_id),
            CatalogEvent::Resynced => {
                // A new connection: services of the old one's era are gone.
                self.providers.clear();
                for service in catalog.services() {
                    if let Some(fetch) = self.providers.saw(service) {
                        self.start(fetch);
                    }
                }
            }
        }
    }

    fn start(&mut self, fetch: Fetch) {
        let client = self.client.clone();
        self.fetches.spawn(async move {
            let tools = list_provider(&client, &fetch.service_id)
                .await
                .and_then(|answer| {
                    ListedTool::from_answer(&answer, &fetch.service_id).map_err(CallError::Failed)
                });
            Fetched { fetch, tools }
        });
    }

    /// Builds the table, if anything it is built from changed, and swaps it
    /// in if it differs. Each conflict is logged once for as long as it lasts.
    fn publish(&mut self) {
        if !self.providers.take_changed() {
            return;
        }
        let (table, conflicts) = self.providers.build();
        let conflicts: HashSet<Conflict> = conflicts.into_iter().collect();
        for conflict in conflicts.difference(&self.reported) {
            tracing::warn!("{conflict}");
        }
        self.reported = conflicts;
        self.published.publish(table);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};
    use switchboard_protocol::Principal;

    use super::*;

    fn service(id: &str, metadata: Value) -> ServiceInfo {
        ServiceInfo {
            service_id: id.into(),
            client_id: format!("client-of-{id}"),
            principal: Principal::Direct,
            metadata,
        }
    }

    fn provider(id: &str, namespace: &str, revision: u64) -> ServiceInfo {
        service(
            id,
            json!({"protocol": "tool-provider", "version": 1, "namespace": namespace, "toolsRevision": revision}),
        )
    }

    fn listing(names: &[&str]) -> Result<Vec<ListedTool>, CallError> {
        Ok(names
            .iter()
            .map(|name| ListedTool::from_entry(json!({"name": name, "inputSchema": {}})).unwrap())
            .collect())
    }

    fn providers() -> Providers {
        let (caller, _commands) = HubCaller::detached();
        Providers::new(caller)
    }

    /// Applies the answer `names` to `fetch`.
    fn answer(providers: &mut Providers, fetch: Fetch, names: &[&str]) -> Applied {
        providers.apply(Fetched {
            fetch,
            tools: listing(names),
        })
    }

    fn exposed(providers: &Providers) -> Vec<String> {
        let (table, _) = providers.build();
        table.tools().map(|tool| tool.name.clone()).collect()
    }

    #[test]
    fn only_tool_providers_of_version_one_with_a_namespace_count() {
        assert_eq!(provider_namespace(&provider("s", "git", 1)), Some("git"));
        for metadata in [
            json!({"protocol": "tool-provider", "version": 2, "namespace": "git"}),
            json!({"protocol": "tool-provider", "version": 1, "namespace": ""}),
            json!({"protocol": "tool-provider", "version": 1}),
            json!({"protocol": "tool-progress", "version": 1, "namespace": "git"}),
        ] {
            assert_eq!(
                provider_namespace(&service("s", metadata.clone())),
                None,
                "{metadata}"
            );
        }
    }

    #[test]
    fn only_changes_to_providers_ask_for_a_new_table() {
        let mut providers = providers();
        assert_eq!(
            providers.saw(service("other", json!({"protocol": "x"}))),
            None
        );
        assert!(!providers.take_changed());
        let fetch = providers.saw(provider("svc", "ns", 1)).unwrap();
        assert!(providers.take_changed());
        // A new revision: the table changes when its list arrives.
        let newer = providers.saw(provider("svc", "ns", 2)).unwrap();
        assert!(!providers.take_changed());
        assert_eq!(answer(&mut providers, fetch, &["old"]), Applied::Stale);
        assert!(!providers.take_changed());
        answer(&mut providers, newer, &["a"]);
        assert!(providers.take_changed());
        providers.removed("svc");
        assert!(providers.take_changed());
        providers.removed("svc");
        providers.clear();
        assert!(!providers.take_changed());
    }

    #[test]
    fn a_slow_old_list_never_overwrites_a_newer_one() {
        let mut providers = providers();
        let old = providers.saw(provider("svc", "ns", 1)).unwrap();
        let new = providers.saw(provider("svc", "ns", 2)).unwrap();
        assert!(new.number > old.number);
        let applied = answer(&mut providers, new, &["new"]);
        assert_eq!(applied, Applied::Current);
        let applied = answer(&mut providers, old, &["old"]);
        assert_eq!(applied, Applied::Stale);
        assert_eq!(exposed(&providers), ["ns__new"]);
    }

    #[test]
    fn an_answer_from_before_a_reconnect_is_stale_for_the_same_service_id() {
        let mut providers = providers();
        let before = providers.saw(provider("svc", "ns", 1)).unwrap();
        providers.clear();
        let after = providers.saw(provider("svc", "ns", 1)).unwrap();
        assert_eq!(answer(&mut providers, before, &["old"]), Applied::Stale);
        assert_eq!(answer(&mut providers, after, &["fresh"]), Applied::Current);
        assert_eq!(exposed(&providers), ["ns__fresh"]);
    }

    #[test]
    fn the_same_metadata_is_not_listed_again_but_a_new_revision_is() {
        let mut providers = providers();
        let first = providers.saw(provider("svc", "ns", 1)).unwrap();
        answer(&mut providers, first, &["a"]);
        assert_eq!(providers.saw(provider("svc", "ns", 1)), None);
        assert!(providers.saw(provider("svc", "ns", 2)).is_some());
        // The old tools stay offered until the new list arrives.
        assert_eq!(exposed(&providers), ["ns__a"]);
        // A refresh makes the pending fetch stale as well.
        let refresh = providers.refresh("svc").unwrap();
        answer(&mut providers, refresh, &["b"]);
        assert_eq!(exposed(&providers), ["ns__b"]);
        assert_eq!(providers.refresh("unknown"), None);
    }

    #[test]
    fn a_renamed_namespace_drops_the_old_names_at_once() {
        let mut providers = providers();
        let first = providers.saw(provider("svc", "old", 1)).unwrap();
        answer(&mut providers, first, &["a"]);
        providers.saw(provider("svc", "new", 1)).unwrap();
        assert!(exposed(&providers).is_empty());
    }

    #[test]
    fn a_service_that_stops_being_a_provider_leaves() {
        let mut providers = providers();
        let first = providers.saw(provider("svc", "ns", 1)).unwrap();
        answer(&mut providers, first.clone(), &["a"]);
        assert_eq!(
            providers.saw(service("svc", json!({"protocol": "other"}))),
            None
        );
        assert!(exposed(&providers).is_empty());
        assert_eq!(answer(&mut providers, first, &["a"]), Applied::Gone);
    }

    #[test]
    fn a_failed_list_offers_nothing_of_that_provider() {
        let mut providers = providers();
        let first = providers.saw(provider("svc", "ns", 1)).unwrap();
        answer(&mut providers, first, &["a"]);
        let second = providers.saw(provider("svc", "ns", 2)).unwrap();
        providers.apply(Fetched {
            fetch: second,
            tools: Err(CallError::TimedOut(std::time::Duration::from_secs(10))),
        });
        assert!(exposed(&providers).is_empty());
    }

    #[test]
    fn providers_claim_namespaces_in_arrival_order() {
        let mut providers = providers();
        // Arrival order, not service id order, decides.
        let first = providers.saw(provider("svc-b", "ns", 1)).unwrap();
        let second = providers.saw(provider("svc-a", "ns", 1)).unwrap();
        answer(&mut providers, second, &["from_a"]);
        answer(&mut providers, first, &["from_b"]);
        assert_eq!(exposed(&providers), ["ns__from_b"]);
        providers.removed("svc-b");
        assert_eq!(exposed(&providers), ["ns__from_a"]);
    }
}
