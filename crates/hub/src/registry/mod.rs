//! The service registry and the catalog channel, under one lock.
//!
//! Invariants:
//! - `serverSeq` is incremented only under the catalog write lock, and every
//!   action is pushed to subscribers' queues before that lock is released.
//!   A subscribe builds its snapshot and pushes its response under the same
//!   lock, so the response precedes every action with a higher `serverSeq`
//!   on that connection and no change can fall between snapshot and stream.
//! - The policy is swapped only under the write lock, so the visibility that
//!   decided an `added` is the one that decides the matching `removed`.
//! - A service's `gone` flag is set under the write lock, before its removal
//!   is published; routing re-checks it where it orders messages (see
//!   `router.rs`), so nothing is delivered to a service after it is removed.
//! - No `await` happens under the lock; pushing to a queue never blocks.
//! - Callback services (hub protocol section 13): a principal may discover,
//!   notify and request a callback service when an ordinary grant lets it
//!   *or* the service's owner may `request` that principal
//!   (`Policy::allows_callback`). The second test runs only after the first
//!   refused, and only for a route marked `callback`, so ordinary traffic
//!   never pays for it. Both are functions of the policy of the moment: a
//!   reload re-decides them (and `LastRoute` keeps a decision only within one
//!   policy generation; a route's `callback` never changes). For *listing*,
//!   the rule counts only for a subscriber that asked for it
//!   (`{"callbacks": true}`): `is_listed` vs `may_discover`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::RwLock;
use serde_json::value::RawValue;
use switchboard_protocol::error::GoneReason;
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::limits::names;
use switchboard_protocol::Principal;

use crate::conn::{Conn, Identity};
use crate::ids::{self, ConnId};
use crate::outbound::{Class, Pushed};
use crate::policy::{Action, Policy, PrincipalRef};
use crate::reply;
use crate::wire;

mod entries;
mod route;

use entries::{added_action, gone_label, into_text, removed_action, service_json, updated_action};
pub use entries::{callback_flag, CallbackFlagError, CALLBACK_FIELD};
pub use route::{LastRoute, ServiceRoute};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A service as the catalog lists it.
struct Listed {
    route: Arc<ServiceRoute>,
    /// The full `Service` object, encoded once per registration or update.
    json: Box<str>,
    /// Registration order, so snapshots list services oldest first.
    order: u64,
}

/// A connection subscribed to the catalog.
struct Subscriber {
    conn: Arc<Conn>,
    /// Subscribed with `{"callbacks": true}`: also lists the callback
    /// services it may use only through the callback rule.
    callbacks: bool,
}

#[derive(Default)]
struct Catalog {
    services: FastMap<Box<str>, Listed>,
    owned: FastMap<ConnId, Vec<Arc<ServiceRoute>>>,
    subscribers: FastMap<ConnId, Subscriber>,
    seq: u64,
    registrations: u64,
}

pub struct Registry {
    catalog: RwLock<Catalog>,
    policy: ArcSwap<Policy>,
    /// Bumped by each `replace_policy`, after the swap: a decision made
    /// under generation `g` is stale once this is past `g` (`LastRoute`).
    policy_generation: AtomicU64,
    /// Mirror of the catalog's `serverSeq` for readers that need no lock.
    seq: AtomicU64,
    /// What minted service ids start with: `svc-`, or `svc-<hub name>-` on
    /// a hub of a federation (so a hub can only publish ids of its own).
    id_prefix: Box<str>,
}

/// Whether a principal may perform `action` on `route` under `policy`: an
/// ordinary grant, or else, for a callback service, the callback rule
/// (`callback_rule`: whether it counts here). The caller has already
/// decided that it is not the owning connection.
fn permits(
    policy: &Policy,
    caller: &Identity,
    route: &ServiceRoute,
    action: Action,
    callback_rule: bool,
) -> bool {
    let (caller, owner) = (
        &caller.principal.principal,
        &route.owner_principal.principal,
    );
    policy.allows(caller, owner, action)
        || (callback_rule && route.callback && policy.allows_callback(caller, owner))
}

/// Whether `viewer` may discover `route` under `policy` (a request's
/// `-32008`, an owner's `-32009`): the callback rule counts.
fn may_discover(policy: &Policy, viewer: &Conn, route: &ServiceRoute) -> bool {
    viewer.id == route.owner.id
        || viewer
            .identity()
            .is_some_and(|identity| permits(policy, identity, route, Action::Discover, true))
}

/// Whether the catalog lists `route` to `subscriber` under `policy`: as
/// [`may_discover`], but a callback service that only the callback rule
/// lets it see is listed only if it subscribed with `{"callbacks": true}`.
fn is_listed(policy: &Policy, subscriber: &Subscriber, route: &ServiceRoute) -> bool {
    let viewer = &subscriber.conn;
    viewer.id == route.owner.id
        || viewer.identity().is_some_and(|identity| {
            permits(
                policy,
                identity,
                route,
                Action::Discover,
                subscriber.callbacks,
            )
        })
}

impl Catalog {
    /// Lists a new service (`json`: its whole `Service` object) and
    /// publishes `added`.
    fn insert(
        &mut self,
        seq_mirror: &AtomicU64,
        policy: &Policy,
        route: &Arc<ServiceRoute>,
        json: Box<str>,
    ) {
        let action = added_action(&json);
        self.registrations += 1;
        let order = self.registrations;
        self.services.insert(
            route.id.clone(),
            Listed {
                route: route.clone(),
                json,
                order,
            },
        );
        self.owned
            .entry(route.owner.id)
            .or_default()
            .push(route.clone());
        self.publish(seq_mirror, policy, route, &action);
    }

    /// Unlists a service, marks it gone and publishes `removed` with `reason`.
    fn remove(
        &mut self,
        seq_mirror: &AtomicU64,
        policy: &Policy,
        route: &Arc<ServiceRoute>,
        reason: GoneReason,
    ) {
        self.services.remove(&route.id);
        if let Some(owned) = self.owned.get_mut(&route.owner.id) {
            owned.retain(|r| !Arc::ptr_eq(r, route));
        }
        route.set_gone(reason);
        let action = removed_action(&route.id, gone_label(reason));
        self.publish(seq_mirror, policy, route, &action);
    }

    /// Every service's JSON as one array, oldest first.
    fn all_services(&self) -> String {
        let mut services: Vec<&Listed> = self.services.values().collect();
        services.sort_unstable_by_key(|listed| listed.order);
        let size: usize = services.iter().map(|l| l.json.len() + 1).sum();
        let mut list = String::with_capacity(size + 2);
        list.push('[');
        for (index, listed) in services.iter().enumerate() {
            if index > 0 {
                list.push(',');
            }
            list.push_str(&listed.json);
        }
        list.push(']');
        list
    }

    /// Stamps the next `serverSeq` on an action and queues it for every
    /// subscriber that may see `route`.
    fn publish(
        &mut self,
        seq_mirror: &AtomicU64,
        policy: &Policy,
        route: &ServiceRoute,
        action: &str,
    ) {
        self.seq += 1;
        seq_mirror.store(self.seq, Ordering::Release);
        let seq = self.seq;
        for subscriber in self.subscribers.values() {
            if is_listed(policy, subscriber, route) {
                send_action(&subscriber.conn, seq, action);
            }
        }
    }
}

/// What became of a remote service's update (`Registry::update_remote`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteUpdate {
    Updated,
    /// The link lists no such service.
    Unknown,
    /// The update would make a callback service ordinary or the reverse.
    CallbackChanged,
}

/// The `-32602` for metadata whose `callback` member is refused.
fn callback_refused(error: CallbackFlagError) -> ErrorObject {
    reply::invalid_params(CALLBACK_FIELD, error.to_string())
}

fn send_action(subscriber: &Conn, seq: u64, action: &str) {
    // Essential: an action is never shed. A subscriber too slow to take it
    // passes slowConsumerBytes and is disconnected by the queue itself.
    let _: Pushed = subscriber
        .out
        .push(Class::Essential, |buf| wire::action(buf, seq, action));
}

impl Registry {
    pub fn new(policy: Arc<Policy>, id_prefix: &str) -> Self {
        Registry {
            catalog: RwLock::new(Catalog::default()),
            policy: ArcSwap::new(policy),
            policy_generation: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            id_prefix: id_prefix.into(),
        }
    }

    pub fn policy(&self) -> arc_swap::Guard<Arc<Policy>> {
        self.policy.load()
    }

    pub fn server_seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// The route of a live service (the hot path: one read lock, one lookup).
    pub fn route(&self, service_id: &str) -> Option<Arc<ServiceRoute>> {
        self.catalog
            .read()
            .services
            .get(service_id)
            .map(|listed| listed.route.clone())
    }

    /// Whether `caller` may perform `action` on `route`. A connection may
    /// always act on its own services; anyone else needs a grant, or the
    /// callback rule for a callback service (module docs). A link's callers
    /// (principals of other hubs) are decided here too, by this hub's grants.
    pub fn authorize(
        &self,
        caller: &Conn,
        identity: &Identity,
        route: &ServiceRoute,
        action: Action,
    ) -> bool {
        caller.id == route.owner.id || permits(&self.policy.load(), identity, route, action, true)
    }

    /// The route of `service_id` and whether `caller` may notify it: from
    /// `last` while that still holds, else from the catalog and the policy
    /// (and kept in `last`). `None`: no live service has that id.
    pub fn notify_route(
        &self,
        last: &mut LastRoute,
        caller: &Conn,
        identity: &Identity,
        service_id: &str,
    ) -> Option<(Arc<ServiceRoute>, bool)> {
        // Read before the policy is: a swap after this read makes the
        // decision below look stale next time, never the other way round.
        let generation = self.policy_generation.load(Ordering::Acquire);
        if generation == last.policy_generation && last.service_id == service_id {
            if let Some(route) = last.route.upgrade().filter(|route| route.gone().is_none()) {
                return Some((route, last.allowed));
            }
        }
        let route = self.route(service_id)?;
        let allowed = self.authorize(caller, identity, &route, Action::Notify);
        last.service_id.clear();
        last.service_id.push_str(service_id);
        last.route = Arc::downgrade(&route);
        last.policy_generation = generation;
        last.allowed = allowed;
        Some((route, allowed))
    }

    pub fn register(
        &self,
        owner: &Arc<Conn>,
        identity: &Identity,
        metadata: &RawValue,
        max_services: u64,
    ) -> Result<Box<str>, ErrorObject> {
        let callback = callback_flag(metadata).map_err(callback_refused)?;
        let mut catalog = self.catalog.write();
        let owned = catalog.owned.get(&owner.id).map_or(0, Vec::len);
        if owned as u64 >= max_services {
            return Err(reply::limit(
                names::MAX_SERVICES_PER_CLIENT,
                max_services,
                format!("this connection already has {owned} services; at most {max_services} are allowed"),
            ));
        }
        let id = loop {
            let id = ids::mint(&self.id_prefix);
            if !catalog.services.contains_key(id.as_str()) {
                break id.into_boxed_str();
            }
        };
        let route = ServiceRoute::new(&id, owner, identity.principal.clone(), callback);
        let json = service_json(&id, identity, metadata);
        catalog.insert(&self.seq, &self.policy.load(), &route, json);
        Ok(id)
    }

    /// Finds a service `owner` owns, or the error the spec gives for one it
    /// does not: `-32009` if it can see it, `-32008` if not.
    fn owned_by<'c>(
        &self,
        catalog: &'c Catalog,
        owner: &Conn,
        service_id: &str,
        what: &str,
    ) -> Result<&'c Listed, ErrorObject> {
        let listed = catalog
            .services
            .get(service_id)
            .ok_or_else(|| reply::unknown_service(service_id))?;
        if listed.route.owner.id == owner.id {
            return Ok(listed);
        }
        if may_discover(&self.policy.load(), owner, &listed.route) {
            Err(reply::permission_denied(format!(
                "only the connection that registered service {service_id:?} may {what} it"
            )))
        } else {
            Err(reply::unknown_service(service_id))
        }
    }

    /// Removes a service its owner unregisters; returns its route so pending
    /// requests can be failed.
    pub fn unregister(
        &self,
        owner: &Conn,
        service_id: &str,
    ) -> Result<Arc<ServiceRoute>, ErrorObject> {
        let mut catalog = self.catalog.write();
        let route = self
            .owned_by(&catalog, owner, service_id, "unregister")?
            .route
            .clone();
        catalog.remove(
            &self.seq,
            &self.policy.load(),
            &route,
            GoneReason::Unregistered,
        );
        Ok(route)
    }

    pub fn update(
        &self,
        owner: &Conn,
        identity: &Identity,
        service_id: &str,
        metadata: &RawValue,
    ) -> Result<(), ErrorObject> {
        let callback = callback_flag(metadata).map_err(callback_refused)?;
        let mut catalog = self.catalog.write();
        let route = self
            .owned_by(&catalog, owner, service_id, "update")?
            .route
            .clone();
        if callback != route.callback {
            return Err(reply::invalid_params(
                CALLBACK_FIELD,
                "metadata.callback is fixed when a service is registered: register a new \
                 service to change it",
            ));
        }
        let json = service_json(service_id, identity, metadata);
        if let Some(listed) = catalog.services.get_mut(service_id) {
            listed.json = json;
        }
        let action = updated_action(service_id, metadata);
        catalog.publish(&self.seq, &self.policy.load(), &route, &action);
        Ok(())
    }

    /// Removes everything of a connection that left: its subscription and
    /// its services (published as `removed`/`disconnected`).
    pub fn remove_connection(&self, conn: &Conn) -> Vec<Arc<ServiceRoute>> {
        let mut catalog = self.catalog.write();
        catalog.subscribers.remove(&conn.id);
        let routes = catalog.owned.remove(&conn.id).unwrap_or_default();
        let policy = self.policy.load();
        for route in &routes {
            catalog.services.remove(&route.id);
            route.set_gone(GoneReason::Disconnected);
            let action = removed_action(&route.id, gone_label(GoneReason::Disconnected));
            catalog.publish(&self.seq, &policy, route, &action);
        }
        routes
    }

    /// Subscribes `conn` to the catalog. `respond` receives the snapshot
    /// (`{resource, state, fromSeq}` as JSON) and its `fromSeq`, and must
    /// queue the response;
    /// it runs under the catalog lock, which is what orders it before every
    /// later action.
    ///
    /// `callbacks`: the subscribe params' `{"callbacks": true}` (module docs).
    /// Subscribing again replaces the subscription, and this choice.
    pub fn subscribe(&self, conn: &Arc<Conn>, callbacks: bool, respond: impl FnOnce(&str, u64)) {
        let mut catalog = self.catalog.write();
        let policy = self.policy.load();
        let subscriber = Subscriber {
            conn: conn.clone(),
            callbacks,
        };
        let mut visible_services: Vec<&Listed> = catalog
            .services
            .values()
            .filter(|entry| is_listed(&policy, &subscriber, &entry.route))
            .collect();
        visible_services.sort_unstable_by_key(|listed| listed.order);
        let size: usize = visible_services.iter().map(|l| l.json.len() + 1).sum();
        let mut snapshot = Vec::with_capacity(size + 128);
        snapshot.extend_from_slice(
            b"{\"resource\":\"ahp-client-services://\",\"state\":{\"services\":[",
        );
        for (index, listed) in visible_services.iter().enumerate() {
            if index > 0 {
                snapshot.push(b',');
            }
            snapshot.extend_from_slice(listed.json.as_bytes());
        }
        snapshot.extend_from_slice(b"]},\"fromSeq\":");
        snapshot.extend_from_slice(itoa::Buffer::new().format(catalog.seq).as_bytes());
        snapshot.push(b'}');
        respond(&into_text(snapshot), catalog.seq);
        catalog.subscribers.insert(conn.id, subscriber);
    }

    /// Every service as a JSON array (oldest first), and its `serverSeq`.
    pub fn services_json(&self) -> (String, u64) {
        let catalog = self.catalog.read();
        (catalog.all_services(), catalog.seq)
    }

    /// How many services each connection owns (connections with none are
    /// left out).
    pub fn owned_counts(&self) -> Vec<(ConnId, usize)> {
        let catalog = self.catalog.read();
        catalog
            .owned
            .iter()
            .map(|(id, routes)| (*id, routes.len()))
            .collect()
    }

    pub fn unsubscribe(&self, conn: &Conn) {
        self.catalog.write().subscribers.remove(&conn.id);
    }

    /// Swaps in a new policy and tells each subscriber about every service
    /// that became visible (`added`) or invisible (`removed`/`hidden`) to it.
    pub fn replace_policy(&self, policy: Arc<Policy>) {
        let mut catalog = self.catalog.write();
        let old = self.policy.swap(policy.clone());
        self.policy_generation.fetch_add(1, Ordering::AcqRel);
        let catalog = &mut *catalog;
        let mut services: Vec<&Listed> = catalog.services.values().collect();
        services.sort_unstable_by_key(|listed| listed.order);
        for subscriber in catalog.subscribers.values() {
            for entry in &services {
                let before = is_listed(&old, subscriber, &entry.route);
                let after = is_listed(&policy, subscriber, &entry.route);
                if before == after {
                    continue;
                }
                catalog.seq += 1;
                let action = if after {
                    added_action(&entry.json)
                } else {
                    removed_action(&entry.route.id, "hidden")
                };
                send_action(&subscriber.conn, catalog.seq, &action);
            }
        }
        self.seq.store(catalog.seq, Ordering::Release);
    }

    /// Lists a service of another hub, owned here by the link `owner`
    /// (`link.rs`): `json` is its whole `Service` object, `hub` included.
    /// Refused (`false`) if the id is taken.
    pub fn register_remote(
        &self,
        owner: &Arc<Conn>,
        service_id: &str,
        json: Box<str>,
        principal: Arc<PrincipalRef>,
        callback: bool,
    ) -> bool {
        let mut catalog = self.catalog.write();
        if catalog.services.contains_key(service_id) {
            return false;
        }
        let route = ServiceRoute::new(service_id, owner, principal, callback);
        catalog.insert(&self.seq, &self.policy.load(), &route, json);
        true
    }

    /// New metadata for a service the link `owner` listed (`callback`: its
    /// metadata's flag, which may not change, as for a local service).
    pub fn update_remote(
        &self,
        owner: &Conn,
        service_id: &str,
        json: Box<str>,
        metadata: &RawValue,
        callback: bool,
    ) -> RemoteUpdate {
        let mut catalog = self.catalog.write();
        let Some(listed) = catalog
            .services
            .get_mut(service_id)
            .filter(|listed| listed.route.owner.id == owner.id)
        else {
            return RemoteUpdate::Unknown;
        };
        if listed.route.callback != callback {
            return RemoteUpdate::CallbackChanged;
        }
        listed.json = json;
        let route = listed.route.clone();
        let action = updated_action(service_id, metadata);
        catalog.publish(&self.seq, &self.policy.load(), &route, &action);
        RemoteUpdate::Updated
    }

    /// Removes a service the link `owner` listed, with `reason`; returns its
    /// route so its pending requests can be failed.
    pub fn unregister_remote(
        &self,
        owner: &Conn,
        service_id: &str,
        reason: GoneReason,
    ) -> Option<Arc<ServiceRoute>> {
        let mut catalog = self.catalog.write();
        let route = catalog
            .services
            .get(service_id)
            .filter(|listed| listed.route.owner.id == owner.id)?
            .route
            .clone();
        catalog.remove(&self.seq, &self.policy.load(), &route, reason);
        Some(route)
    }

    /// Services a connection owns (a link: the services of its hub).
    pub fn owned_count(&self, owner: &Conn) -> usize {
        self.catalog.read().owned.get(&owner.id).map_or(0, Vec::len)
    }

    pub fn service_count(&self) -> usize {
        self.catalog.read().services.len()
    }

    pub fn subscriber_count(&self) -> usize {
        self.catalog.read().subscribers.len()
    }

    /// Services per reserved principal (`module_id` → count), for the
    /// modules' views and `/metrics`. One pass under the read lock.
    pub fn reserved_service_counts(&self) -> HashMap<String, u64> {
        let catalog = self.catalog.read();
        let mut counts = HashMap::new();
        for listed in catalog.services.values() {
            if let Principal::Reserved { module_id } = &listed.route.owner_principal.principal {
                *counts.entry(module_id.clone()).or_insert(0) += 1;
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests;
