//! The shared catalog into this hub's: every other hub as a link, its
//! services as catalog entries owned by that link.
//!
//! One task follows the bucket through an ordered consumer that starts with
//! the last value of every key and then follows each change. A hub's claim
//! (`hub.<name>`) opens its link, or replaces it when the instance changes;
//! a deleted or aged-out claim closes it (its services leave with
//! `disconnected`, what was pending on it fails with -32052). Service keys
//! of that instance add, update or remove its services; a put whose value
//! did not change (a heartbeat) changes nothing. After a reconnection the
//! consumer starts over, and once it has caught up, what it did not see
//! again and the bucket no longer holds is removed: a diff, published as
//! ordinary actions.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{push, DeliverPolicy};
use async_nats::jetstream::kv;
use bytes::Bytes;
use futures_util::StreamExt;
use switchboard_hub::link::{Link, RemoteService};
use switchboard_protocol::error::GoneReason;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use crate::fabric::{self, Claim, Key, ServiceEntry};
use crate::metrics::Ignored;
use crate::relay;
use crate::shared::{Fabric, Peer, Window};

/// Pause before following the bucket again after a failure.
const RETRY: Duration = Duration::from_millis(500);
/// Entries held while catching up, waiting for their hub's claim.
const MAX_STASH: usize = 65_536;
/// Bucket lookups at once when checking what a new consumer did not deliver.
const LOOKUPS_IN_FLIGHT: usize = 64;

/// What this task knows of one other hub.
struct PeerState {
    peer: Arc<Peer>,
    claim_revision: u64,
    services: HashMap<String, Known>,
}

struct Known {
    revision: u64,
    value: Bytes,
}

/// How a key changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Put,
    /// Deleted: a service its owner unregistered, a hub that left.
    Delete,
    /// Purged, or aged out (a limit marker): the owner went away.
    Purge,
}

impl Operation {
    fn of(message: &async_nats::Message) -> Operation {
        let Some(headers) = &message.headers else {
            return Operation::Put;
        };
        match headers.get("KV-Operation").map(|v| v.as_str()) {
            Some("DEL") => return Operation::Delete,
            Some("PURGE") => return Operation::Purge,
            _ => {}
        }
        match headers
            .get(async_nats::header::NATS_MARKER_REASON)
            .map(|v| v.as_str())
        {
            Some("Remove") => Operation::Delete,
            Some(_) => Operation::Purge,
            None => Operation::Put,
        }
    }

    fn reason(self) -> GoneReason {
        match self {
            Operation::Delete => GoneReason::Unregistered,
            _ => GoneReason::Disconnected,
        }
    }
}

struct View {
    fabric: Arc<Fabric>,
    tasks: TaskTracker,
    peers: HashMap<String, PeerState>,
    /// Service entries seen before their hub's claim, while catching up.
    stash: Vec<(String, Bytes, u64)>,
    /// Keys seen since the consumer started, until it caught up.
    seen: Option<HashSet<String>>,
    /// Writers report a link the overload policy aborted here.
    broken: mpsc::UnboundedSender<(String, String)>,
}

pub async fn run(fabric: Arc<Fabric>, tasks: TaskTracker) {
    let (broken, mut broken_rx) = mpsc::unbounded_channel();
    let mut view = View {
        fabric: fabric.clone(),
        tasks,
        peers: HashMap::new(),
        stash: Vec::new(),
        seen: None,
        broken,
    };
    let mut joined_rx = fabric.joined.subscribe();
    let mut connected = fabric.connected.clone();
    loop {
        // Follow the bucket only while this hub holds its name, with NATS up.
        let store = loop {
            let joined = joined_rx.borrow_and_update().clone();
            let up = *connected.borrow_and_update();
            match joined {
                Some(joined) if up => break joined.store,
                Some(joined) => {
                    if view.nats_away(joined.ttl, &mut connected).await {
                        continue;
                    }
                }
                None => view.close_all(),
            }
            tokio::select! {
                () = fabric.stop.cancelled() => return view.close_all(),
                _ = joined_rx.changed() => {}
                _ = connected.changed() => {}
            }
        };
        let (mut messages, pending) = match follow(&fabric, &store).await {
            Ok(followed) => followed,
            Err(error) => {
                tracing::warn!(%error, "cannot follow the shared catalog; trying again");
                tokio::select! {
                    () = fabric.stop.cancelled() => return view.close_all(),
                    () = tokio::time::sleep(RETRY) => continue,
                }
            }
        };
        view.start_over();
        if pending == 0 {
            if let Err(error) = view.caught_up(&store).await {
                tracing::warn!(%error, "cannot check the shared catalog; following it anew");
                continue;
            }
        }
        loop {
            tokio::select! {
                () = fabric.stop.cancelled() => return view.close_all(),
                _ = joined_rx.changed() => break,
                changed = connected.changed() => {
                    // Lost or regained: either way, follow anew (regained:
                    // from the start, and diff).
                    if changed.is_err() || !*connected.borrow() { view.fail_all_pending(); }
                    break;
                }
                Some((name, instance)) = broken_rx.recv() => view.rebuild(&name, &instance),
                message = messages.next() => match message {
                    Some(Ok(message)) => if let Err(error) = view.on_message(&message, &store).await {
                        tracing::warn!(%error, "cannot check the shared catalog; following it anew");
                        break;
                    },
                    Some(Err(error)) => {
                        tracing::warn!(%error, "following the shared catalog failed; following it anew");
                        break;
                    }
                    None => break,
                },
            }
        }
    }
}

/// An ordered consumer of the last value of every key, then every change;
/// and how many values it has to deliver before it is current.
async fn follow(
    fabric: &Fabric,
    store: &kv::Store,
) -> Result<(push::Ordered, u64), async_nats::Error> {
    let consumer = store
        .stream
        .create_consumer(push::OrderedConfig {
            deliver_subject: fabric.client.new_inbox(),
            description: Some(format!(
                "switchboard hub {}: the shared catalog",
                fabric.name
            )),
            filter_subject: format!("$KV.{}.>", fabric::BUCKET),
            deliver_policy: DeliverPolicy::LastPerSubject,
            replay_policy: async_nats::jetstream::consumer::ReplayPolicy::Instant,
            ..Default::default()
        })
        .await?;
    let pending = consumer.cached_info().num_pending;
    Ok((consumer.messages().await?, pending))
}

impl View {
    /// Applies one entry of the bucket; once the consumer is current, the
    /// diff (`caught_up`), which may ask the bucket (an error: follow anew).
    async fn on_message(
        &mut self,
        message: &async_nats::jetstream::Message,
        store: &kv::Store,
    ) -> Result<(), kv::EntryError> {
        let prefix = format!("$KV.{}.", fabric::BUCKET);
        let Some(key) = message.subject.strip_prefix(prefix.as_str()) else {
            return Ok(());
        };
        let Ok(info) = message.info() else {
            return Ok(());
        };
        let (revision, pending) = (info.stream_sequence, info.pending);
        let operation = Operation::of(&message.message);
        let key = key.to_owned();
        if let Some(seen) = &mut self.seen {
            seen.insert(key.clone());
        }
        self.apply(&key, operation, &message.payload, revision);
        if pending == 0 && self.seen.is_some() {
            self.caught_up(store).await?;
        }
        self.publish_figures();
        Ok(())
    }

    fn apply(&mut self, key: &str, operation: Operation, value: &Bytes, revision: u64) {
        match Key::parse(key) {
            None => self.fabric.metrics.ignored(Ignored::BadEntry),
            // This hub's own keys are `export`'s.
            Some(Key::Claim { hub } | Key::Service { hub, .. }) if hub == self.fabric.name => {}
            Some(Key::Claim { hub }) => self.on_claim(hub, operation, value, revision),
            Some(Key::Service { hub, service_id }) => {
                self.on_service(key, hub, service_id, operation, value, revision)
            }
        }
    }

    fn on_claim(&mut self, hub: &str, operation: Operation, value: &Bytes, revision: u64) {
        if self
            .peers
            .get(hub)
            .is_some_and(|state| revision <= state.claim_revision)
        {
            return; // delivered twice
        }
        if operation != Operation::Put {
            self.close(hub);
            return;
        }
        let Ok(claim) = serde_json::from_slice::<Claim>(value) else {
            return self.fabric.metrics.ignored(Ignored::BadEntry);
        };
        if let Some(state) = self.peers.get_mut(hub) {
            if state.peer.instance == claim.instance {
                state.claim_revision = revision; // a heartbeat
                return;
            }
            // Restarted: the old instance is gone, and all it had.
            self.close(hub);
        }
        self.open(hub, claim.instance, revision, HashMap::new());
    }

    fn open(
        &mut self,
        hub: &str,
        instance: String,
        revision: u64,
        services: HashMap<String, Known>,
    ) {
        let Ok(link) = Link::open(&self.fabric.hub, hub) else {
            return; // the hub is shutting down
        };
        tracing::info!(hub, "another hub joined the fabric");
        let peer = Arc::new(Peer {
            name: hub.to_owned(),
            instance,
            link,
            window: Window::default(),
        });
        self.fabric
            .peers
            .write()
            .insert(hub.to_owned(), peer.clone());
        self.tasks.spawn(relay::write(
            self.fabric.clone(),
            peer.clone(),
            self.broken.clone(),
        ));
        let mut state = PeerState {
            peer,
            claim_revision: revision,
            services: HashMap::new(),
        };
        for (id, known) in services {
            if add(&self.fabric, &state.peer, &id, &known.value) {
                state.services.insert(id, known);
            }
        }
        self.peers.insert(hub.to_owned(), state);
    }

    fn close(&mut self, hub: &str) {
        if let Some(state) = self.peers.remove(hub) {
            self.fabric.peers.write().remove(hub);
            state.peer.link.close();
            tracing::info!(hub, "another hub left the fabric");
        }
    }

    fn on_service(
        &mut self,
        key: &str,
        hub: &str,
        service_id: &str,
        operation: Operation,
        value: &Bytes,
        revision: u64,
    ) {
        if operation != Operation::Put {
            if let Some(state) = self.peers.get_mut(hub) {
                if state.services.remove(service_id).is_some() {
                    state
                        .peer
                        .link
                        .remove_service(service_id, operation.reason());
                }
            }
            return;
        }
        let Ok(entry) = serde_json::from_slice::<ServiceEntry<'_>>(value) else {
            return self.fabric.metrics.ignored(Ignored::BadEntry);
        };
        if entry.service.service_id != service_id {
            return self.fabric.metrics.ignored(Ignored::BadEntry);
        }
        let Some(state) = self
            .peers
            .get_mut(hub)
            .filter(|state| state.peer.instance == entry.instance)
        else {
            // Its claim may come later while catching up (the claim's last
            // heartbeat is newer than this value).
            if self.seen.is_some() && self.stash.len() < MAX_STASH {
                self.stash.push((key.to_owned(), value.clone(), revision));
            } else {
                self.fabric.metrics.ignored(Ignored::StaleInstance);
            }
            return;
        };
        match state.services.get_mut(service_id) {
            Some(known) if revision <= known.revision => {}
            Some(known) if known.value == *value => known.revision = revision,
            Some(known) => {
                let service = RemoteService {
                    service_id,
                    client_id: entry.service.client_id,
                    principal: &entry.service.principal,
                    metadata: entry.service.metadata,
                };
                match state.peer.link.update_service(service) {
                    Ok(()) => {
                        known.revision = revision;
                        known.value = value.clone();
                    }
                    Err(error) => {
                        tracing::debug!(%error, "ignored a service update of another hub");
                        self.fabric.metrics.ignored(Ignored::BadEntry);
                    }
                }
            }
            None => {
                if add(&self.fabric, &state.peer, service_id, value) {
                    state.services.insert(
                        service_id.to_owned(),
                        Known {
                            revision,
                            value: value.clone(),
                        },
                    );
                }
            }
        }
    }

    /// A new consumer: what it delivers until it is current is recorded, and
    /// what it does not deliver again is then removed (`caught_up`).
    fn start_over(&mut self) {
        self.seen = Some(HashSet::new());
        self.stash.clear();
        // Revisions of the last consumer mean nothing to this one (the
        // bucket may even have been made anew); values still tell repeats.
        for state in self.peers.values_mut() {
            state.claim_revision = 0;
            for known in state.services.values_mut() {
                known.revision = 0;
            }
        }
    }

    /// The consumer is current: what it did not deliver is gone, unless the
    /// bucket still holds it. A key rewritten while the consumer caught up
    /// (every hub re-puts its keys when NATS comes back) loses its old
    /// message before delivery and comes again only as a new message, which
    /// may come after one that said nothing was pending: so "not delivered"
    /// alone does not mean gone, and removing it would drop a live hub (its
    /// services leave and come back, what it asked here is cancelled).
    async fn caught_up(&mut self, store: &kv::Store) -> Result<(), kv::EntryError> {
        let Some(seen) = self.seen.take() else {
            return Ok(());
        };
        let mut unseen: Vec<String> = Vec::new();
        for (hub, state) in &self.peers {
            let claim = fabric::claim_key(hub);
            if !seen.contains(&claim) {
                unseen.push(claim);
            }
            unseen.extend(
                state
                    .services
                    .keys()
                    .map(|id| fabric::service_key(hub, id))
                    .filter(|key| !seen.contains(key)),
            );
        }
        let still_there = tokio::select! {
            () = self.fabric.stop.cancelled() => return Ok(()),
            listed = still_listed(store, unseen) => listed?,
        };
        let gone = |key: &String| !seen.contains(key) && !still_there.contains(key);
        let gone_hubs: Vec<String> = self
            .peers
            .keys()
            .filter(|hub| gone(&fabric::claim_key(hub)))
            .cloned()
            .collect();
        for hub in gone_hubs {
            self.close(&hub);
        }
        for (hub, state) in &mut self.peers {
            let gone_services: Vec<String> = state
                .services
                .keys()
                .filter(|id| gone(&fabric::service_key(hub, id)))
                .cloned()
                .collect();
            for id in gone_services {
                state.services.remove(&id);
                state
                    .peer
                    .link
                    .remove_service(&id, GoneReason::Disconnected);
            }
        }
        for (key, value, revision) in std::mem::take(&mut self.stash) {
            self.apply(&key, Operation::Put, &value, revision);
        }
        self.publish_figures();
        Ok(())
    }

    /// NATS is away: requests to other hubs cannot be answered now; after
    /// the TTL their services leave this catalog too (they come back, by
    /// diff, when NATS does).
    /// Returns whether NATS is back (else: stopping, or it stays away).
    async fn nats_away(
        &mut self,
        ttl: Duration,
        connected: &mut tokio::sync::watch::Receiver<bool>,
    ) -> bool {
        self.fail_all_pending();
        if self.peers.is_empty() {
            return false;
        }
        let stop = self.fabric.stop.clone();
        let back = tokio::select! {
            () = stop.cancelled() => return false,
            back = tokio::time::timeout(ttl, connected.wait_for(|up| *up)) => back,
        };
        if back.is_err() {
            tracing::warn!(
                "NATS away longer than serviceTtlMs; forgetting the other hubs until it is back"
            );
            self.close_all();
            return false;
        }
        true
    }

    fn fail_all_pending(&self) {
        for state in self.peers.values() {
            let failed = state.peer.link.fail_pending();
            crate::metrics::Metrics::add(
                &self.fabric.metrics.requests_failed_unreachable,
                failed as u64,
            );
        }
    }

    /// A link the overload policy aborted: a new one, with the same services.
    fn rebuild(&mut self, hub: &str, instance: &str) {
        let Some(state) = self.peers.get(hub) else {
            return;
        };
        if state.peer.instance != instance || !state.peer.link.is_aborted() {
            return;
        }
        let state = self.peers.remove(hub).expect("just found");
        self.fabric.peers.write().remove(hub);
        state.peer.link.close();
        tracing::warn!(hub, "the link to another hub fell behind; opened anew");
        self.open(
            hub,
            instance.to_owned(),
            state.claim_revision,
            state.services,
        );
    }

    fn close_all(&mut self) {
        let hubs: Vec<String> = self.peers.keys().cloned().collect();
        for hub in hubs {
            self.close(&hub);
        }
        self.publish_figures();
    }

    fn publish_figures(&self) {
        let mut hubs: Vec<(String, usize)> = self
            .peers
            .iter()
            .map(|(hub, state)| (hub.clone(), state.services.len()))
            .collect();
        hubs.sort();
        *self.fabric.metrics.hubs.lock() = hubs;
    }
}

/// Which of `keys` the bucket holds a value for now (a key deleted, purged
/// or aged out is not listed). Asks at most `LOOKUPS_IN_FLIGHT` at once.
async fn still_listed(
    store: &kv::Store,
    keys: Vec<String>,
) -> Result<HashSet<String>, kv::EntryError> {
    let mut lookups = futures_util::stream::iter(keys)
        .map(|key| async move {
            let entry = store.entry(key.as_str()).await?;
            Ok::<_, kv::EntryError>(
                entry
                    .is_some_and(|entry| entry.operation == kv::Operation::Put)
                    .then_some(key),
            )
        })
        .buffer_unordered(LOOKUPS_IN_FLIGHT);
    let mut listed = HashSet::new();
    while let Some(key) = lookups.next().await {
        listed.extend(key?);
    }
    Ok(listed)
}

/// Lists one service of `peer`; `false` (counted) if its value is not one.
fn add(fabric: &Fabric, peer: &Peer, service_id: &str, value: &Bytes) -> bool {
    let Ok(entry) = serde_json::from_slice::<ServiceEntry<'_>>(value) else {
        fabric.metrics.ignored(Ignored::BadEntry);
        return false;
    };
    let service = RemoteService {
        service_id,
        client_id: entry.service.client_id,
        principal: &entry.service.principal,
        metadata: entry.service.metadata,
    };
    match peer.link.add_service(service) {
        Ok(()) => true,
        Err(error) => {
            tracing::debug!(hub = %peer.name, %error, "ignored a service of another hub");
            fabric.metrics.ignored(Ignored::BadEntry);
            false
        }
    }
}
