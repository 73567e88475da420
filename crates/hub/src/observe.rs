//! What an observer of a running hub (the `switchboard-dashboard` crate)
//! may do to it, and what the hub asks of it: the observer's one door, as
//! `link.rs` is the federation's.
//!
//! An observer reads, through a [`HubView`]: the catalog as a bounded
//! [`CatalogFeed`] (snapshot, then every change), a [`Sample`] of the open
//! connections and the counters, and the config in force
//! ([`ConfigInForce`]). The hub asks of it, through [`Observer`]
//! (`add_ons.rs`), only the routes it serves on the HTTP port and the
//! answers to its own `hub/…` methods. It is attached by an [`Attach`]
//! function, which the hub calls once with its view while it starts.
//! Nothing else of the hub is reachable from here.
//!
//! Invariant: an observer never slows routing. Its catalog feed is a
//! queue like any subscriber's, fed under the catalog lock and bounded;
//! one that falls behind is dropped and opens another. A sample takes the
//! connection table's lock as a `/metrics` scrape does, and short locks
//! under it, and never awaits.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::SystemTime;

use switchboard_protocol::{Limits, Principal};
use tokio_util::task::TaskTracker;

use crate::admission::ShuttingDown;
use crate::config::DashboardConfig;
use crate::conn::{Conn, Identity, Transport};
use crate::metrics::Counters;
use crate::outbound::{Batch, Class, Pushed};
use crate::policy::PrincipalRef;
use crate::state::HubState;

pub use crate::state::Listening;
use crate::{ids, teardown, wire};
pub use switchboard_protocol::modules::ModuleStatus;

pub use crate::add_ons::{Caller, Observer};
pub use crate::ids::{mint, mint_token};
pub use crate::metrics::{Latency, LATENCY_BUCKETS};
pub use crate::policy::token_digest;
pub use crate::reply::invalid_request;

/// Makes the observer, once, while the hub starts and before it listens:
/// with the view it keeps, and the hub's task tracker for tasks that run as
/// long as the hub (they must end when [`HubView::stopping`] does).
pub type Attach = Box<dyn FnOnce(HubView, &TaskTracker) -> Arc<dyn Observer> + Send>;

/// An observer's handle on the hub. Weak: the hub holds its observer, and
/// the observer must not keep the hub alive; every read of a hub that is
/// gone answers as an empty one.
#[derive(Clone)]
pub struct HubView {
    hub: Weak<HubState>,
}

/// The config in force, as an observer may show it: never a token.
#[derive(Debug, Clone)]
pub struct ConfigInForce {
    pub limits: Limits,
    /// Principal names, grants, origins (`Policy::describe`).
    pub policy: serde_json::Value,
    pub log_payloads: bool,
    pub config_file: Option<PathBuf>,
    pub reloads: u64,
    /// The `[dashboard]` section the hub started with.
    pub dashboard: DashboardConfig,
}

/// One pass over the hub: what a scrape reads, with a row per connection.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub connections: Vec<ConnectionSample>,
    pub services: usize,
    pub subscribers: usize,
    pub server_seq: u64,
    /// Counters of every connection, open and closed, summed.
    pub totals: Totals,
}

/// One open connection.
#[derive(Debug, Clone)]
pub struct ConnectionSample {
    /// `None` before `initialize`.
    pub client_id: Option<Box<str>>,
    /// `{"kind":…}` as stamped into routed messages; `None` before `initialize`.
    pub principal: Option<Box<str>>,
    /// `unix`, `websocket`, `remote`, `hub link`, `catalog feed`.
    pub transport: &'static str,
    /// Services it owns.
    pub services: usize,
    /// Requests routed to its services, not yet answered.
    pub in_flight: usize,
    /// Requests it made, not yet answered.
    pub calls: usize,
    pub queued_bytes: usize,
    pub messages_in: u64,
    pub messages_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Notifications it sent that were dropped.
    pub drops: u64,
    pub connected_at: SystemTime,
}

/// The hub's counters, summed over open and closed connections.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub notifications_forwarded: u64,
    /// By reason, in [`Totals::drop_labels`]' order.
    pub notifications_dropped: Vec<u64>,
    pub requests_started: u64,
    pub requests_failed: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Request latency, bucket by bucket ([`Latency`]).
    pub latency: [u64; LATENCY_BUCKETS],
}

impl Totals {
    /// The reasons a notification is dropped, in the order of
    /// `notifications_dropped`.
    pub fn drop_labels() -> Vec<&'static str> {
        Counters::default()
            .drops()
            .map(|(label, _)| label)
            .collect()
    }

    fn add(&mut self, counters: &Counters) {
        self.notifications_forwarded += Counters::get(&counters.notifications_forwarded);
        self.requests_started += Counters::get(&counters.requests_started);
        self.requests_failed += counters.failures().map(|(_, n)| n).sum::<u64>();
        self.bytes_in += Counters::get(&counters.bytes_received);
        let drops = counters.drops();
        if self.notifications_dropped.is_empty() {
            self.notifications_dropped = drops.map(|(_, n)| n).collect();
        } else {
            for (total, (_, n)) in self.notifications_dropped.iter_mut().zip(drops) {
                *total += n;
            }
        }
        for (total, n) in self.latency.iter_mut().zip(counters.latency.counts()) {
            *total += n;
        }
    }
}

impl HubView {
    pub(crate) fn new(hub: &Arc<HubState>) -> Self {
        HubView {
            hub: Arc::downgrade(hub),
        }
    }

    /// Resolves once the hub begins to shut down (at once if it is gone).
    pub async fn stopping(&self) {
        if let Some(hub) = self.hub.upgrade() {
            // Not holding the hub across the wait would be nicer, but the
            // token lives in it; shutdown cancels it before anything waits
            // for the hub's tasks.
            hub.stopping().await;
        }
    }

    /// The config in force.
    pub fn config(&self) -> Option<ConfigInForce> {
        let hub = self.hub.upgrade()?;
        Some(ConfigInForce {
            limits: hub.limits.clone(),
            policy: hub.registry.policy().describe(),
            log_payloads: hub.log_payloads(),
            config_file: hub.config_path.clone(),
            reloads: hub.reloads(),
            dashboard: hub.dashboard_config.clone(),
        })
    }

    /// Where the hub listens (empty until it does).
    pub fn listening(&self) -> Listening {
        self.hub
            .upgrade()
            .and_then(|hub| hub.listening.get().cloned())
            .unwrap_or_default()
    }

    /// The supervised modules' states (none without a supervisor).
    pub fn modules(&self) -> Vec<ModuleStatus> {
        self.hub
            .upgrade()
            .and_then(|hub| hub.supervisor.get().map(|supervisor| supervisor.statuses()))
            .unwrap_or_default()
    }

    /// Every service as a JSON array (oldest first) and the `serverSeq` it
    /// reflects.
    pub fn services(&self) -> (String, u64) {
        match self.hub.upgrade() {
            Some(hub) => hub.registry.services_json(),
            None => ("[]".into(), 0),
        }
    }

    /// The catalog from now on, as a queue of at most `max_bytes`.
    pub fn catalog_feed(&self, max_bytes: u64) -> Result<CatalogFeed, ShuttingDown> {
        let hub = self.hub.upgrade().ok_or(ShuttingDown)?;
        CatalogFeed::open_bounded(&hub, max_bytes)
    }

    /// One pass over the open connections and the counters. As in a
    /// scrape, the connection table's lock is held throughout: a
    /// connection released meanwhile has its counters folded into the
    /// hub's under that lock, so totals never go back.
    pub fn sample(&self) -> Sample {
        let Some(hub) = self.hub.upgrade() else {
            return Sample::default();
        };
        let owned: std::collections::HashMap<u64, usize> =
            hub.registry.owned_counts().into_iter().collect();
        let mut sample = Sample {
            connections: Vec::new(),
            services: hub.registry.service_count(),
            subscribers: hub.registry.subscriber_count(),
            server_seq: hub.registry.server_seq(),
            totals: Totals::default(),
        };
        let open = hub.admission.open();
        sample.totals.add(&hub.counters);
        sample.totals.bytes_out += Counters::get(&hub.counters.bytes_sent);
        sample.connections.reserve(open.len());
        for conn in open.iter() {
            let row = connection_sample(conn, owned.get(&conn.id).copied().unwrap_or(0));
            sample.totals.add(&conn.counters);
            sample.totals.bytes_out += row.bytes_out;
            sample.connections.push(row);
        }
        sample
    }
}

fn connection_sample(conn: &Conn, services: usize) -> ConnectionSample {
    let identity = conn.identity();
    let counters = &conn.counters;
    let (sent, queued) = conn.out.sent();
    ConnectionSample {
        client_id: identity.map(|i| i.client_id.clone()),
        principal: identity.map(|i| i.principal.json.clone()),
        transport: conn.transport.label(),
        services,
        in_flight: conn.pending.lock().len(),
        calls: conn.calls.lock().len(),
        queued_bytes: queued,
        messages_in: Counters::get(&counters.messages_received),
        messages_out: sent.messages,
        bytes_in: Counters::get(&counters.bytes_received),
        bytes_out: sent.bytes,
        drops: counters.drops().map(|(_, n)| n).sum(),
        connected_at: conn.connected_at,
    }
}

/// The local catalog from the moment it is opened: a subscription with the
/// `direct` principal's view (every service), delivered as the catalog's
/// own lines (the `subscribe` response, then `action` notifications). The
/// federation publishes it to other hubs; the dashboard streams it to its
/// pages.
pub struct CatalogFeed {
    hub: Arc<HubState>,
    conn: Arc<Conn>,
}

impl CatalogFeed {
    /// Subscribes, with a queue bounded like a client's
    /// (`slowConsumerBytes`). The first batch starts with the snapshot (a
    /// response with id 0: `{"snapshot": {...}}`).
    pub fn open(hub: &Arc<HubState>) -> Result<CatalogFeed, ShuttingDown> {
        CatalogFeed::open_bounded(hub, hub.limits.slow_consumer_bytes)
    }

    /// [`CatalogFeed::open`] with a queue of at most `max_bytes`: past it
    /// the feed is closed (its reader opens another).
    pub fn open_bounded(hub: &Arc<HubState>, max_bytes: u64) -> Result<CatalogFeed, ShuttingDown> {
        let conn = hub
            .admission
            .admit_internal(Transport::Feed, max_bytes, max_bytes)?;
        let direct = hub.registry.policy().authenticate(Some(hub.direct_token()));
        let principal = direct.map_or_else(
            || PrincipalRef::new(Principal::Direct),
            |direct| direct.principal,
        );
        let identity = Identity::new(
            ids::mint(&hub.client_id_prefix),
            principal,
            Some(token_digest(hub.direct_token())),
        );
        let _ = conn.set_identity(identity);
        hub.registry.subscribe(&conn, false, |snapshot, _| {
            let _: Pushed = conn.out.push(Class::Essential, |buf| {
                let mut result = String::with_capacity(snapshot.len() + 16);
                result.push_str("{\"snapshot\":");
                result.push_str(snapshot);
                result.push('}');
                wire::result(buf, "0", &result);
            });
        });
        Ok(CatalogFeed {
            hub: hub.clone(),
            conn,
        })
    }

    /// Waits for catalog lines and swaps them into `buf` (must be empty);
    /// `false` once the feed is closed (shutdown, or it fell too far
    /// behind: then open another, whose snapshot says where things are).
    pub async fn next_batch(&self, buf: &mut Vec<u8>) -> bool {
        matches!(self.conn.out.next_batch(buf).await, Batch::Write)
    }

    /// Hands back the buffer [`CatalogFeed::next_batch`] filled, emptied.
    pub fn written(&self, buf: &mut Vec<u8>) {
        self.conn.out.written(buf);
    }
}

impl Drop for CatalogFeed {
    fn drop(&mut self) {
        teardown::disconnect(&self.hub, &self.conn);
        teardown::release(&self.hub, &self.conn);
    }
}
