//! What the fabric soak's clients and watchers share: the counters, the
//! services of the clients that are connected now (by hub), and each hub's
//! catalog as its watcher sees it.
//!
//! The `must stay zero` counters are things that must never happen; any of
//! them non-zero fails the run.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

#[derive(Debug, Default)]
pub struct Counts {
    // ---- traffic ------------------------------------------------------------
    pub requests_sent: AtomicU64,
    /// Sent to a service of another hub.
    pub requests_remote: AtomicU64,
    pub notifications_sent: AtomicU64,
    pub notifications_remote: AtomicU64,
    pub sessions: AtomicU64,
    /// Requests pending when their caller's own hub was killed: no answer
    /// can come (the connection is gone); not a failure.
    pub abandoned: AtomicU64,

    // ---- answers --------------------------------------------------------------
    pub answered_result: AtomicU64,
    pub answered_app_error: AtomicU64,
    /// By JSON-RPC error code (the hub's own: -32052 gone, -32051 timeout,
    /// -32008 not found, -32050 limit).
    pub answered_error: Mutex<BTreeMap<i64, u64>>,

    // ---- what owners received -------------------------------------------------
    pub forwarded_received: AtomicU64,
    pub notifications_received: AtomicU64,
    pub catalog_actions: AtomicU64,

    // ---- must stay zero -------------------------------------------------------
    /// An answer to a request id already answered.
    pub duplicate_answers: AtomicU64,
    /// An answer to an id this connection never used.
    pub unknown_answers: AtomicU64,
    /// A result or error that belongs to another request (its token).
    pub misrouted_answers: AtomicU64,
    /// Requests without an answer when the drain ended.
    pub unanswered: AtomicU64,
    /// A notification with a sequence number at or below one already
    /// delivered from the same sender to the same owner.
    pub notifications_repeated: AtomicU64,
    /// One delivered after a later one from the same sender.
    pub notifications_reordered: AtomicU64,
    /// A request or notification for a service this connection never owned.
    pub foreign_deliveries: AtomicU64,
    /// A catalog action that does not fit its watcher's view.
    pub catalog_inconsistencies: AtomicU64,
    /// Something unreadable, or a hub that answered a call wrongly.
    pub protocol_failures: AtomicU64,
}

pub fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl Counts {
    pub fn answered_error(&self, code: i64) {
        *self.answered_error.lock().entry(code).or_default() += 1;
    }

    pub fn requests_answered(&self) -> u64 {
        get(&self.answered_result)
            + get(&self.answered_app_error)
            + self.answered_error.lock().values().sum::<u64>()
    }

    /// The counters that must stay zero, by name.
    pub fn failures(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("duplicate_answers", get(&self.duplicate_answers)),
            ("unknown_answers", get(&self.unknown_answers)),
            ("misrouted_answers", get(&self.misrouted_answers)),
            ("unanswered", get(&self.unanswered)),
            ("notifications_repeated", get(&self.notifications_repeated)),
            (
                "notifications_reordered",
                get(&self.notifications_reordered),
            ),
            ("foreign_deliveries", get(&self.foreign_deliveries)),
            (
                "catalog_inconsistencies",
                get(&self.catalog_inconsistencies),
            ),
            ("protocol_failures", get(&self.protocol_failures)),
        ]
    }

    /// Every counter, by name, for the report.
    pub fn all(&self) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = [
            ("requests_sent", &self.requests_sent),
            ("requests_remote", &self.requests_remote),
            ("notifications_sent", &self.notifications_sent),
            ("notifications_remote", &self.notifications_remote),
            ("sessions", &self.sessions),
            ("abandoned", &self.abandoned),
            ("answered_result", &self.answered_result),
            ("answered_app_error", &self.answered_app_error),
            ("forwarded_received", &self.forwarded_received),
            ("notifications_received", &self.notifications_received),
            ("catalog_actions", &self.catalog_actions),
        ]
        .into_iter()
        .map(|(name, counter)| (name.to_owned(), get(counter)))
        .collect();
        for (code, n) in self.answered_error.lock().iter() {
            all.push((format!("answered_error_{code}"), *n));
        }
        all.extend(self.failures().into_iter().map(|(n, v)| (n.to_owned(), v)));
        all
    }
}

/// The services the soak's clients hold now, each with its hub.
#[derive(Debug, Default)]
pub struct Directory {
    services: Mutex<Vec<(usize, String)>>,
}

impl Directory {
    pub fn add(&self, hub: usize, id: &str) {
        self.services.lock().push((hub, id.to_owned()));
    }

    pub fn remove(&self, id: &str) {
        let mut services = self.services.lock();
        if let Some(at) = services.iter().position(|(_, known)| known == id) {
            services.swap_remove(at);
        }
    }

    /// A service to call: of another hub than `from` with probability
    /// `remote`, when there is one.
    pub fn pick(
        &self,
        rng: &mut fastrand::Rng,
        from: usize,
        remote: f64,
    ) -> Option<(usize, String)> {
        let services = self.services.lock();
        if services.is_empty() {
            return None;
        }
        let others: Vec<&(usize, String)> = services.iter().filter(|(h, _)| *h != from).collect();
        let pick = if !others.is_empty() && rng.f64() < remote {
            others[rng.usize(..others.len())]
        } else {
            &services[rng.usize(..services.len())]
        };
        Some(pick.clone())
    }

    pub fn ids(&self) -> HashSet<String> {
        self.services
            .lock()
            .iter()
            .map(|(_, id)| id.clone())
            .collect()
    }

    pub fn count_on(&self, hub: usize) -> usize {
        self.services
            .lock()
            .iter()
            .filter(|(h, _)| *h == hub)
            .count()
    }
}

/// Each hub's catalog as its watcher holds it (`None` while the watcher is
/// not subscribed: its hub is down or it is reconnecting).
#[derive(Debug)]
pub struct Catalogs {
    views: Vec<Mutex<Option<HashSet<String>>>>,
}

impl Catalogs {
    pub fn new(hubs: usize) -> Catalogs {
        Catalogs {
            views: (0..hubs).map(|_| Mutex::new(None)).collect(),
        }
    }

    pub fn set(&self, hub: usize, view: Option<HashSet<String>>) {
        *self.views[hub].lock() = view;
    }

    pub fn get(&self, hub: usize) -> Option<HashSet<String>> {
        self.views[hub].lock().clone()
    }
}
