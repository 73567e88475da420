//! The hub's tool index: every tool provider this client may discover, with
//! what it lists, kept current from the catalog (no polling).
//!
//! One task owns it ([`Index::run`]). It reads catalog events, starts list
//! fetches (each in a task of its own, so a slow provider delays no event)
//! and applies their answers; after each change it builds the
//! [`ToolTable`](super::ToolTable) and the [`Surface`](super::Surface) and
//! publishes each if it differs from the last one. [`Providers`] is the
//! state it keeps, without any I/O.
//!
//! A list that fails (the provider timed out or answered an error) is
//! fetched again after a backoff ([`RETRY_FIRST`] doubling to
//! [`RETRY_MAX`]) for as long as its provider is in the catalog: a provider
//! that was slow once must not stay empty until its next change. A list
//! cut off by a lost connection is not retried; the resync refetches it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use switchboard_client::{Catalog, CatalogEvent, Client};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::backend::{Command, HubCaller};
use super::call::{list_provider, CallError};
use super::listing::{ListKind, Listing};
use super::providers::{Applied, Built, Fetch, Fetched, Providers};
use super::published::Published;
use super::surface::SurfaceConflict;
use super::table::Conflict;

/// The first wait before a failed list is fetched again.
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between fetches of a list that keeps failing.
const RETRY_MAX: Duration = Duration::from_secs(30);

/// The task that owns [`Providers`].
pub(super) struct Index {
    providers: Providers,
    client: Client,
    published: Arc<Published>,
    fetches: JoinSet<Fetched>,
    /// Fetches of the first snapshot not yet answered; readiness waits for them.
    initial: HashSet<u64>,
    /// Conflicts already logged (and, for resource URIs, counted).
    reported: HashSet<Conflict>,
    reported_surface: HashSet<SurfaceConflict>,
    /// Failed lists in a row, per provider and kind: the next retry's
    /// backoff. An entry leaves when its list is answered or its provider
    /// is gone, so this is bounded by the providers in the catalog.
    failures: HashMap<(String, ListKind), u32>,
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
            reported_surface: HashSet::new(),
            failures: HashMap::new(),
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
            for fetch in self.providers.saw(service) {
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
                        self.on_fetched(fetched);
                    }
                }
                Some(command) = commands.recv() => match command {
                    Command::Refresh { service_id, kind } => {
                        if let Some(fetch) = self.providers.refresh(&service_id, kind) {
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
                for fetch in self.providers.saw(service) {
                    self.start(fetch);
                }
            }
            CatalogEvent::Removed { service_id, .. } => self.providers.removed(&service_id),
            CatalogEvent::Resynced => {
                // A new connection: services of the old one's era are gone.
                self.providers.clear();
                for service in catalog.services() {
                    for fetch in self.providers.saw(service) {
                        self.start(fetch);
                    }
                }
            }
        }
    }

    fn on_fetched(&mut self, fetched: Fetched) {
        self.initial.remove(&fetched.fetch.number);
        let retry = matches!(
            &fetched.listing,
            Err(error) if !matches!(error, CallError::ConnectionLost | CallError::NotConnected)
        );
        let key = (fetched.fetch.service_id.clone(), fetched.fetch.kind);
        match self.providers.apply(fetched) {
            Applied::Stale => self.published.count_stale_list(),
            Applied::Failed => {
                self.published.count_failed_list();
                if retry {
                    self.retry(key);
                } else {
                    self.failures.remove(&key);
                }
            }
            Applied::Current | Applied::Gone => {
                self.failures.remove(&key);
            }
        }
    }

    /// Fetches a failed list again after its backoff. The fetch is numbered
    /// now, so a newer one (the provider changed meanwhile) supersedes it.
    fn retry(&mut self, key: (String, ListKind)) {
        let Some(fetch) = self.providers.refresh(&key.0, key.1) else {
            self.failures.remove(&key);
            return;
        };
        let failures = self.failures.entry(key).or_insert(0);
        let delay = RETRY_FIRST
            .saturating_mul(1 << (*failures).min(5))
            .min(RETRY_MAX);
        *failures += 1;
        self.start_after(fetch, delay);
    }

    fn start(&mut self, fetch: Fetch) {
        self.start_after(fetch, Duration::ZERO);
    }

    fn start_after(&mut self, fetch: Fetch, delay: Duration) {
        let client = self.client.clone();
        self.fetches.spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let listing = list_provider(&client, &fetch.service_id, fetch.kind)
                .await
                .and_then(|answer| {
                    Listing::from_answer(fetch.kind, &answer, &fetch.service_id)
                        .map_err(CallError::Failed)
                });
            Fetched { fetch, listing }
        });
    }

    /// Builds the tables, if anything they are built from changed, and
    /// swaps each in if it differs. Each conflict is logged once for as long
    /// as it lasts; each new resource URI collision is counted.
    fn publish(&mut self) {
        if !self.providers.take_changed() {
            return;
        }
        let Built {
            table,
            surface,
            conflicts,
            surface_conflicts,
        } = self.providers.build();
        let conflicts: HashSet<Conflict> = conflicts.into_iter().collect();
        for conflict in conflicts.difference(&self.reported) {
            tracing::warn!("{conflict}");
        }
        self.reported = conflicts;
        let surface_conflicts: HashSet<SurfaceConflict> = surface_conflicts.into_iter().collect();
        for conflict in surface_conflicts.difference(&self.reported_surface) {
            tracing::warn!("{conflict}");
            if matches!(conflict, SurfaceConflict::ResourceUri { .. }) {
                self.published.count_resource_collision();
            }
        }
        self.reported_surface = surface_conflicts;
        self.published.publish(table);
        self.published.publish_surface(surface);
    }
}
