//! This hub's services into the shared catalog, kept alive by heartbeats.
//!
//! Two tasks: the feed reader follows the local catalog (`CatalogFeed`, a
//! snapshot then actions) and records what changed, never waiting on NATS;
//! the publisher writes what changed to the bucket (`svc.<me>.<id>`) and,
//! every third of the TTL, re-puts the claim and every service (the bucket's
//! `max_age` removes what is not re-put: a hub that dies vanishes within the
//! TTL). After NATS comes back it writes everything again and purges keys
//! of this hub that should not be there.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures_util::StreamExt;
use parking_lot::Mutex;
use serde_json::Value;
use switchboard_hub::link::CatalogFeed;
use switchboard_protocol::error::GoneReason;
use tokio::sync::Notify;

use crate::fabric::{self, Claim};
use crate::metrics::Metrics;
use crate::shared::{Fabric, Joined};

/// KV writes in flight at once.
const WRITES_IN_FLIGHT: usize = 64;
/// Pause after a failed write before trying again.
const RETRY: Duration = Duration::from_millis(500);

/// The local services and what changed since the publisher last looked.
#[derive(Default)]
struct Exports {
    /// Local services now: id → its `Service` object.
    services: HashMap<String, Value>,
    /// Changed ids: `None` if the service is there, else how it left.
    dirty: HashMap<String, Option<GoneReason>>,
}

struct Shared {
    exports: Mutex<Exports>,
    changed: Notify,
}

pub async fn run(fabric: Arc<Fabric>) {
    let shared = Arc::new(Shared {
        exports: Mutex::default(),
        changed: Notify::new(),
    });
    let reader = tokio::spawn(follow_feed(fabric.clone(), shared.clone()));
    publish(&fabric, &shared).await;
    reader.abort();
}

/// Follows the local catalog into `Exports`; a new feed (after the old one
/// fell behind) starts with a snapshot, which replaces everything.
async fn follow_feed(fabric: Arc<Fabric>, shared: Arc<Shared>) {
    let mut batch = Vec::new();
    loop {
        let Ok(feed) = CatalogFeed::open(&fabric.hub) else {
            return; // the hub is shutting down
        };
        loop {
            let more = tokio::select! {
                () = fabric.stop.cancelled() => return,
                more = feed.next_batch(&mut batch) => more,
            };
            if !more {
                break;
            }
            {
                let mut exports = shared.exports.lock();
                for line in batch.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    apply_line(&mut exports, line);
                }
            }
            feed.written(&mut batch);
            shared.changed.notify_one();
        }
        if fabric.hub.is_stopping() {
            return;
        }
        tracing::warn!("the catalog feed fell behind; following it anew");
    }
}

/// One line of the catalog feed (the hub's own JSON: a cold path).
fn apply_line(exports: &mut Exports, line: &[u8]) {
    let Ok(message) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    if let Some(snapshot) = message.pointer("/result/snapshot/state/services") {
        let services: HashMap<String, Value> = snapshot
            .as_array()
            .into_iter()
            .flatten()
            .filter(|service| is_local(service))
            .filter_map(|service| {
                Some((service["serviceId"].as_str()?.to_owned(), service.clone()))
            })
            .collect();
        let gone: Vec<String> = exports
            .services
            .keys()
            .filter(|id| !services.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            exports.dirty.insert(id, Some(GoneReason::Disconnected));
        }
        for id in services.keys() {
            exports.dirty.insert(id.clone(), None);
        }
        exports.services = services;
        return;
    }
    let Some(action) = message.pointer("/params/action") else {
        return;
    };
    let id = action["serviceId"]
        .as_str()
        .or_else(|| action.pointer("/service/serviceId").and_then(Value::as_str));
    let Some(id) = id.map(str::to_owned) else {
        return;
    };
    match action["type"].as_str() {
        Some("clientServices/added") if is_local(&action["service"]) => {
            exports
                .services
                .insert(id.clone(), action["service"].clone());
            exports.dirty.insert(id, None);
        }
        Some("clientServices/updated") => {
            if let Some(service) = exports.services.get_mut(&id) {
                service["metadata"] = action["metadata"].clone();
                exports.dirty.insert(id, None);
            }
        }
        Some("clientServices/removed") if exports.services.remove(&id).is_some() => {
            let reason = match action["reason"].as_str() {
                Some("unregistered") => GoneReason::Unregistered,
                _ => GoneReason::Disconnected,
            };
            exports.dirty.insert(id, Some(reason));
        }
        _ => {}
    }
}

/// A service of this hub (services learned from other hubs carry `hub`).
fn is_local(service: &Value) -> bool {
    service.is_object() && service.get("hub").is_none()
}

/// What one write does.
enum Write {
    Put(String, Bytes),
    /// The owner unregistered it: watchers see a delete.
    Delete(String),
    /// It left with its owner's connection: watchers see a purge.
    Purge(String),
}

impl Write {
    fn key(&self) -> &str {
        match self {
            Write::Put(key, _) | Write::Delete(key) | Write::Purge(key) => key,
        }
    }
}

/// Writes changes as they come, everything on a heartbeat and after NATS
/// comes back; only while this hub holds its name.
async fn publish(fabric: &Fabric, shared: &Shared) {
    let mut joined_rx = fabric.joined.subscribe();
    let mut connected = fabric.connected.clone();
    let claim_key = fabric::claim_key(&fabric.name);
    let claim_value: Bytes = serde_json::to_vec(&Claim {
        instance: fabric.instance.clone(),
        version: env!("CARGO_PKG_VERSION").into(),
    })
    .expect("a claim serializes")
    .into();
    'joined: loop {
        let joined = loop {
            if let Some(joined) = joined_rx.borrow_and_update().clone() {
                break joined;
            }
            tokio::select! {
                () = fabric.stop.cancelled() => return,
                changed = joined_rx.changed() => if changed.is_err() { return },
            }
        };
        let Joined {
            store,
            mut claim_revision,
            ttl,
        } = joined;
        let mut heartbeat = tokio::time::interval(ttl / 3);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        heartbeat.tick().await;
        // Everything, at once, and strays purged: (re)joined.
        let mut full = true;
        let mut strays = true;
        loop {
            if *connected.borrow_and_update() {
                if full {
                    match renew_claim(fabric, &store, &claim_key, &claim_value, claim_revision)
                        .await
                    {
                        Ok(revision) => claim_revision = revision,
                        Err(Renewal::Lost(holder)) => {
                            lose_name(fabric, &holder);
                            continue 'joined;
                        }
                        Err(Renewal::Failed) => {}
                    }
                }
                let ok = sync(fabric, shared, &store, full).await;
                if strays && ok {
                    strays = !purge_strays(fabric, shared, &store).await;
                }
                full = !ok;
            } else {
                full = true;
            }
            tokio::select! {
                () = fabric.stop.cancelled() => return,
                () = shared.changed.notified() => {}
                // The heartbeat: everything again.
                _ = heartbeat.tick() => full = true,
                // NATS lost or back: everything again once it is up (the
                // bucket may have lost or aged out keys meanwhile).
                _ = connected.changed() => {
                    full = true;
                    strays = true;
                }
                _ = joined_rx.changed() => continue 'joined,
            }
            if !full {
                // Let a burst of changes gather into one round of writes.
                tokio::task::yield_now().await;
            }
        }
    }
}

enum Renewal {
    /// Another instance holds the name now.
    Lost(String),
    /// NATS failed; try again on the next beat.
    Failed,
}

/// Re-puts the claim if it is still this hub's (compare-and-set on the
/// revision this hub last wrote).
async fn renew_claim(
    fabric: &Fabric,
    store: &kv::Store,
    key: &str,
    value: &Bytes,
    revision: u64,
) -> Result<u64, Renewal> {
    Metrics::inc(&fabric.metrics.kv_writes);
    match store.update(key, value.clone(), revision).await {
        Ok(revision) => return Ok(revision),
        Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => {}
        Err(error) => {
            Metrics::inc(&fabric.metrics.kv_write_failures);
            tracing::debug!(%error, "cannot renew the claim");
            return Err(Renewal::Failed);
        }
    }
    // Someone wrote after this hub: itself (an answer lost), the bucket
    // (the claim aged out while NATS was away), or another hub.
    match store.entry(key).await {
        Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
            match serde_json::from_slice::<Claim>(&entry.value) {
                Ok(claim) if claim.instance == fabric.instance => Ok(entry.revision),
                Ok(claim) => Err(Renewal::Lost(claim.instance)),
                Err(_) => Err(Renewal::Lost("?".into())),
            }
        }
        Ok(_) => store.create(key, value.clone()).await.map_err(|error| {
            Metrics::inc(&fabric.metrics.kv_write_failures);
            tracing::debug!(%error, "cannot claim the name again");
            Renewal::Failed
        }),
        Err(_) => Err(Renewal::Failed),
    }
}

fn lose_name(fabric: &Fabric, holder: &str) {
    tracing::error!(
        name = %fabric.name,
        holder,
        "another hub took this hub's name while it was away; this hub now serves local clients only (restart it with another --hub-name)"
    );
    fabric
        .metrics
        .name_conflict
        .store(true, std::sync::atomic::Ordering::Relaxed);
    fabric
        .metrics
        .joined
        .store(false, std::sync::atomic::Ordering::Relaxed);
    fabric.joined.send_replace(None);
}

/// Writes what changed (`everything`: every service). `false` if a write
/// failed (the changes stay to write).
async fn sync(fabric: &Fabric, shared: &Shared, store: &kv::Store, everything: bool) -> bool {
    let writes: Vec<Write> = {
        let mut exports = shared.exports.lock();
        let Exports { services, dirty } = &mut *exports;
        let mut writes = Vec::new();
        for (id, gone) in dirty.drain() {
            let key = fabric::service_key(&fabric.name, &id);
            match gone {
                // With `everything`, every present service is written below.
                None if everything => {}
                None => writes.extend(services.get(&id).and_then(|s| put(fabric, &key, s))),
                Some(GoneReason::Unregistered) => writes.push(Write::Delete(key)),
                Some(GoneReason::Disconnected) => writes.push(Write::Purge(key)),
            }
        }
        if everything {
            writes.extend(services.iter().filter_map(|(id, service)| {
                put(fabric, &fabric::service_key(&fabric.name, id), service)
            }));
        }
        writes
    };
    if writes.is_empty() {
        return true;
    }
    let results: Vec<(Write, bool)> = futures_util::stream::iter(writes)
        .map(|write| async move {
            Metrics::inc(&fabric.metrics.kv_writes);
            let ok = match &write {
                Write::Put(key, value) => store.put(key, value.clone()).await.is_ok(),
                Write::Delete(key) => store.delete(key).await.is_ok(),
                Write::Purge(key) => store.purge(key).await.is_ok(),
            };
            (write, ok)
        })
        .buffer_unordered(WRITES_IN_FLIGHT)
        .collect()
        .await;
    let all_ok = retry_failed(fabric, shared, results);
    if !all_ok {
        tokio::time::sleep(RETRY).await;
    }
    all_ok
}

/// Marks the writes that failed as changed again; `true` if none did.
fn retry_failed(fabric: &Fabric, shared: &Shared, results: Vec<(Write, bool)>) -> bool {
    let mut all_ok = true;
    let mut exports = shared.exports.lock();
    for (write, ok) in results {
        if ok {
            continue;
        }
        all_ok = false;
        Metrics::inc(&fabric.metrics.kv_write_failures);
        // Write it again later, unless a newer change is already waiting.
        let id = write
            .key()
            .rsplit_once('.')
            .map_or("", |(_, id)| id)
            .to_owned();
        let gone = match write {
            Write::Put(..) => None,
            Write::Delete(_) => Some(GoneReason::Unregistered),
            Write::Purge(_) => Some(GoneReason::Disconnected),
        };
        exports.dirty.entry(id).or_insert(gone);
    }
    all_ok
}

fn put(fabric: &Fabric, key: &str, service: &Value) -> Option<Write> {
    let value = serde_json::to_vec(&serde_json::json!({
        "instance": fabric.instance,
        "service": service,
    }))
    .ok()?;
    Some(Write::Put(key.to_owned(), value.into()))
}

/// Purges keys of this hub that name no service of it now (left by an
/// earlier instance, or removed while NATS was away); `false` if the keys
/// could not be listed.
async fn purge_strays(fabric: &Fabric, shared: &Shared, store: &kv::Store) -> bool {
    let prefix = fabric::service_key(&fabric.name, "");
    let Ok(keys) = store.keys().await else {
        return false;
    };
    let keys: Vec<String> = keys
        .filter_map(|key| async move { key.ok() })
        .collect()
        .await;
    let strays: Vec<String> = {
        let exports = shared.exports.lock();
        keys.into_iter()
            .filter(|key| {
                key.strip_prefix(&prefix)
                    .is_some_and(|id| !exports.services.contains_key(id))
            })
            .collect()
    };
    for key in strays {
        Metrics::inc(&fabric.metrics.kv_writes);
        if store.purge(&key).await.is_err() {
            Metrics::inc(&fabric.metrics.kv_write_failures);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(value: Value) -> Vec<u8> {
        serde_json::to_vec(&value).unwrap()
    }

    #[test]
    fn the_feed_keeps_local_services_and_what_changed() {
        let mut exports = Exports::default();
        let local = serde_json::json!({"serviceId": "svc-a-1", "clientId": "c-a-1", "principal": {"kind": "direct"}, "metadata": {}});
        let remote = serde_json::json!({"serviceId": "svc-b-1", "clientId": "c-b-1", "principal": {"kind": "direct", "hub": "b"}, "metadata": {}, "hub": "b"});
        apply_line(
            &mut exports,
            &line(
                serde_json::json!({"jsonrpc": "2.0", "id": 0, "result": {"snapshot": {"state": {"services": [local, remote]}}}}),
            ),
        );
        assert_eq!(exports.services.len(), 1);
        assert_eq!(exports.dirty.remove("svc-a-1"), Some(None));
        apply_line(
            &mut exports,
            &line(
                serde_json::json!({"jsonrpc": "2.0", "method": "action", "params": {"action": {"type": "clientServices/updated", "serviceId": "svc-a-1", "metadata": {"v": 2}}}}),
            ),
        );
        assert_eq!(exports.services["svc-a-1"]["metadata"]["v"], 2);
        apply_line(
            &mut exports,
            &line(
                serde_json::json!({"jsonrpc": "2.0", "method": "action", "params": {"action": {"type": "clientServices/removed", "serviceId": "svc-a-1", "reason": "unregistered"}}}),
            ),
        );
        assert!(exports.services.is_empty());
        assert_eq!(
            exports.dirty.remove("svc-a-1"),
            Some(Some(GoneReason::Unregistered))
        );
        apply_line(
            &mut exports,
            &line(
                serde_json::json!({"jsonrpc": "2.0", "method": "action", "params": {"action": {"type": "clientServices/removed", "serviceId": "svc-b-1", "reason": "disconnected"}}}),
            ),
        );
        assert!(exports.dirty.is_empty());
    }
}
