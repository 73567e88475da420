//! A live, consistent view of the catalog: the snapshot, then every change
//! applied in `serverSeq` order.
//!
//! The connection's reader applies snapshots and actions to the feed as it
//! reads them, in wire order, so the map a [`Catalog`] shows and the events
//! it yields can never disagree or race (the hub guarantees the snapshot
//! precedes every later action on the connection).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use switchboard_protocol::hub::{ActionParams, CatalogAction, RemovalReason, Service, Snapshot};
use switchboard_protocol::Principal;
use tokio::sync::mpsc;

/// One service as the catalog lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceInfo {
    pub service_id: String,
    pub client_id: String,
    pub principal: Principal,
    pub metadata: Value,
}

impl ServiceInfo {
    /// The hub that owns a service learned from another hub of a
    /// federation; `None` for a service of this client's own hub.
    pub fn hub(&self) -> Option<&str> {
        self.principal.hub()
    }

    fn from_wire(service: Service) -> Self {
        ServiceInfo {
            metadata: serde_json::from_str(service.metadata.get()).unwrap_or(Value::Null),
            service_id: service.service_id,
            client_id: service.client_id,
            principal: service.principal,
        }
    }

    pub fn matches(&self, selector: &Selector) -> bool {
        selector.matches(&self.metadata)
    }
}

/// One change, after the snapshot.
#[derive(Debug, Clone, PartialEq)]
pub enum CatalogEvent {
    Added(ServiceInfo),
    Removed {
        service_id: String,
        reason: RemovalReason,
    },
    /// The service with its new metadata.
    Updated(ServiceInfo),
    /// The client reconnected and re-subscribed: the map was replaced by a
    /// fresh snapshot (services of the old connection's era are gone).
    Resynced,
}

/// A metadata selector: `key=value[,key=value…]`, each value compared as
/// JSON when it parses as JSON (`version=1`) and as a string otherwise
/// (`protocol=git-object-reader`).
#[derive(Debug, Clone, PartialEq)]
pub struct Selector(Vec<(String, String)>);

impl Selector {
    /// `None` when `text` is not `key=value` pairs.
    pub fn parse(text: &str) -> Option<Self> {
        let pairs: Option<Vec<(String, String)>> = text
            .split(',')
            .map(|pair| {
                let (key, value) = pair.split_once('=')?;
                let key = key.trim();
                (!key.is_empty()).then(|| (key.to_owned(), value.trim().to_owned()))
            })
            .collect();
        pairs.filter(|p| !p.is_empty()).map(Selector)
    }

    pub fn matches(&self, metadata: &Value) -> bool {
        self.0.iter().all(|(key, wanted)| {
            metadata.get(key).is_some_and(|actual| {
                actual.as_str() == Some(wanted.as_str())
                    || serde_json::from_str::<Value>(wanted).is_ok_and(|w| &w == actual)
            })
        })
    }
}

#[derive(Default)]
struct FeedState {
    services: BTreeMap<String, ServiceInfo>,
    seq: u64,
    subscribed: bool,
    listeners: Vec<mpsc::UnboundedSender<(u64, CatalogEvent)>>,
}

/// The catalog state of one client, kept across reconnects.
#[derive(Default)]
pub(crate) struct CatalogFeed {
    state: Mutex<FeedState>,
}

impl CatalogFeed {
    pub(crate) fn is_subscribed(&self) -> bool {
        self.state.lock().subscribed
    }

    /// Replaces the map with a snapshot (a first subscribe, or a re-subscribe
    /// after reconnecting, which listeners see as [`CatalogEvent::Resynced`]).
    pub(crate) fn install(&self, snapshot: Snapshot) {
        let mut state = self.state.lock();
        let resync = state.subscribed;
        state.services = snapshot
            .state
            .services
            .into_iter()
            .map(|s| (s.service_id.clone(), ServiceInfo::from_wire(s)))
            .collect();
        state.seq = snapshot.from_seq;
        state.subscribed = true;
        if resync {
            state.emit(CatalogEvent::Resynced);
        }
    }

    /// Applies one `action`; older ones (at or below the snapshot) are ignored.
    pub(crate) fn apply(&self, params: ActionParams) {
        let mut state = self.state.lock();
        if !state.subscribed || params.server_seq <= state.seq {
            return;
        }
        state.seq = params.server_seq;
        let event = match params.action {
            CatalogAction::Added { service } => {
                let info = ServiceInfo::from_wire(service);
                state.services.insert(info.service_id.clone(), info.clone());
                CatalogEvent::Added(info)
            }
            CatalogAction::Removed { service_id, reason } => {
                state.services.remove(&service_id);
                CatalogEvent::Removed { service_id, reason }
            }
            CatalogAction::Updated {
                service_id,
                metadata,
            } => {
                let Some(info) = state.services.get_mut(&service_id) else {
                    return;
                };
                info.metadata = serde_json::from_str(metadata.get()).unwrap_or(Value::Null);
                CatalogEvent::Updated(info.clone())
            }
        };
        state.emit(event);
    }

    /// A new listener: the current map and every event after it.
    fn listen(
        &self,
    ) -> (
        Vec<ServiceInfo>,
        u64,
        mpsc::UnboundedReceiver<(u64, CatalogEvent)>,
    ) {
        let mut state = self.state.lock();
        let (sender, receiver) = mpsc::unbounded_channel();
        state.listeners.push(sender);
        (
            state.services.values().cloned().collect(),
            state.seq,
            receiver,
        )
    }
}

impl FeedState {
    fn emit(&mut self, event: CatalogEvent) {
        // A listener whose Catalog was dropped is forgotten here.
        let seq = self.seq;
        self.listeners
            .retain(|listener| listener.send((seq, event.clone())).is_ok());
    }
}

/// A live view of the services this client may discover.
pub struct Catalog {
    feed: Arc<CatalogFeed>,
    initial: Vec<ServiceInfo>,
    events: mpsc::UnboundedReceiver<(u64, CatalogEvent)>,
    /// The `serverSeq` of the last event taken (or of the initial view).
    event_seq: u64,
}

impl Catalog {
    pub(crate) fn new(feed: Arc<CatalogFeed>) -> Self {
        let (initial, event_seq, events) = feed.listen();
        Catalog {
            feed,
            initial,
            events,
            event_seq,
        }
    }

    /// The services when this view was created; [`Catalog::next_event`]
    /// yields every change after it.
    pub fn initial(&self) -> &[ServiceInfo] {
        &self.initial
    }

    /// The services now (every change read so far applied).
    pub fn services(&self) -> Vec<ServiceInfo> {
        self.feed.state.lock().services.values().cloned().collect()
    }

    pub fn get(&self, service_id: &str) -> Option<ServiceInfo> {
        self.feed.state.lock().services.get(service_id).cloned()
    }

    /// The services whose metadata matches `selector`.
    pub fn select(&self, selector: &Selector) -> Vec<ServiceInfo> {
        self.feed
            .state
            .lock()
            .services
            .values()
            .filter(|s| s.matches(selector))
            .cloned()
            .collect()
    }

    /// The `serverSeq` of the last event [`Catalog::next_event`] returned
    /// (of the snapshot for `Resynced`, of the initial view before any).
    pub fn event_seq(&self) -> u64 {
        self.event_seq
    }

    /// The `serverSeq` of the last change applied to the live map.
    pub fn server_seq(&self) -> u64 {
        self.feed.state.lock().seq
    }

    /// The next change, in `serverSeq` order. `None` once the client is gone.
    pub async fn next_event(&mut self) -> Option<CatalogEvent> {
        let (seq, event) = self.events.recv().await?;
        self.event_seq = seq;
        Some(event)
    }

    /// A change that already arrived, without waiting.
    pub fn try_next_event(&mut self) -> Option<CatalogEvent> {
        let (seq, event) = self.events.try_recv().ok()?;
        self.event_seq = seq;
        Some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_compare_strings_and_json() {
        let metadata = json!({"protocol": "git-object-reader", "version": 1, "label": "a=b"});
        assert!(Selector::parse("protocol=git-object-reader")
            .unwrap()
            .matches(&metadata));
        assert!(Selector::parse("protocol=git-object-reader, version=1")
            .unwrap()
            .matches(&metadata));
        assert!(!Selector::parse("version=2").unwrap().matches(&metadata));
        assert!(!Selector::parse("missing=1").unwrap().matches(&metadata));
        assert!(Selector::parse("svc-123").is_none());
        assert!(Selector::parse("=x").is_none());
    }
}
