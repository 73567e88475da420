//! The hub's tool index: every tool provider this client may discover, with
//! what it lists, kept current from the catalog (no polling).
//!
//! One task owns it ([`Index::run`]). It reads catalog events, starts list
//! fetches (each in a task of its own, so a slow provider delays no event)
//! and applies their answers; after each change it builds the
//! [`ToolTable`](super::ToolTable) and the [`Surface`](super::Surface) and
//! publishes each if it differs from the last one. [`Providers`] is the
//! state it keeps, without any I/O.

use std::collections::HashSet;
use std::sync::Arc;

use switchboard_client::{Catalog, CatalogEvent, Client};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::backend::{Command, HubCaller};
use super::call::{list_provider, CallError};
use super::listing::Listing;
use super::providers::{Applied, Built, Fetch, Fetched, Providers};
use super::published::Published;
use super::surface::SurfaceConflict;
use super::table::Conflict;

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
                        self.initial.remove(&fetched.fetch.number);
                        match self.providers.apply(fetched) {
                            Applied::Stale => self.published.count_stale_list(),
                            Applied::Failed => self.published.count_failed_list(),
                            Applied::Current | Applied::Gone => {}
                        }
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

    fn start(&mut self, fetch: Fetch) {
        let client = self.client.clone();
        self.fetches.spawn(async move {
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
