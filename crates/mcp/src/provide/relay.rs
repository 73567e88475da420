//! What the parts of `provide-mcp` share: the supervised server, the hub
//! connection, the calls in flight, the listeners, the counters, and one
//! outbox that sends the callback services their notifications in order.
//!
//! The server and the hub connection are set once, after the start: the
//! MCP client layer needs the relay's handler before the server runs, and
//! the hub connection comes after the server's first start succeeded.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde_json::Value;
use switchboard_client::Client;
use switchboard_mcp_client::{Connection, ListKind, Supervised};
use tokio::sync::mpsc;

use super::calls::Calls;
use super::listeners::Listeners;

/// Notifications waiting for the hub connection; more are dropped (and
/// counted) rather than held without bound.
const OUTBOX_BOUND: usize = 4096;

/// What `provide-mcp` counts of the server's traffic back to its callers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayStats {
    /// Requests of the server that named no call while several were in flight.
    pub ambiguous_attributions: u64,
    /// Requests refused because the call's client did not declare the
    /// capability (or the call has no client).
    pub refused_undeclared: u64,
    /// Sampling and elicitation requests that belonged to no call.
    pub requests_of_no_call: u64,
    /// Notifications of the server that reached no caller.
    pub notifications_dropped: u64,
}

#[derive(Default)]
struct Counters {
    ambiguous_attributions: AtomicU64,
    refused_undeclared: AtomicU64,
    requests_of_no_call: AtomicU64,
    notifications_dropped: AtomicU64,
}

/// What a count is of.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counted {
    Ambiguous,
    Undeclared,
    NoCall,
    Dropped,
}

/// One notification for a callback service.
pub(crate) struct Outgoing {
    pub(crate) service: String,
    pub(crate) method: &'static str,
    pub(crate) params: Value,
}

pub(crate) struct Relay {
    pub(crate) namespace: String,
    pub(crate) server: OnceLock<Supervised>,
    pub(crate) hub: OnceLock<Client>,
    pub(crate) calls: Arc<Calls>,
    pub(crate) listeners: Mutex<Listeners>,
    counters: Counters,
    outbox: mpsc::Sender<Outgoing>,
    /// The server's `resources` and `prompts` `list_changed`, for the main
    /// loop to bump their revisions.
    pub(crate) changes: mpsc::UnboundedSender<ListKind>,
}

/// What the main loop drains.
pub(crate) struct Inboxes {
    pub(crate) outbox: mpsc::Receiver<Outgoing>,
    pub(crate) changes: mpsc::UnboundedReceiver<ListKind>,
}

impl Relay {
    pub(crate) fn new(namespace: &str) -> (Arc<Relay>, Inboxes) {
        let (outbox, outgoing) = mpsc::channel(OUTBOX_BOUND);
        let (changes, changed) = mpsc::unbounded_channel();
        let relay = Arc::new(Relay {
            namespace: namespace.to_owned(),
            server: OnceLock::new(),
            hub: OnceLock::new(),
            calls: Arc::new(Calls::default()),
            listeners: Mutex::new(Listeners::default()),
            counters: Counters::default(),
            outbox,
            changes,
        });
        (
            relay,
            Inboxes {
                outbox: outgoing,
                changes: changed,
            },
        )
    }

    /// The server's live connection; `None` while it is down.
    pub(crate) fn connection(&self) -> Option<Connection> {
        self.server.get().and_then(Supervised::connection)
    }

    /// Queues a notification for a callback service.
    pub(crate) fn send(&self, service: String, method: &'static str, params: Value) {
        if self
            .outbox
            .try_send(Outgoing {
                service,
                method,
                params,
            })
            .is_err()
        {
            self.count(Counted::Dropped, method, "the outbox is full");
        }
    }

    /// Counts one event and logs it at debug (never a payload).
    pub(crate) fn count(&self, what: Counted, method: &str, why: &str) {
        let counter = match what {
            Counted::Ambiguous => &self.counters.ambiguous_attributions,
            Counted::Undeclared => &self.counters.refused_undeclared,
            Counted::NoCall => &self.counters.requests_of_no_call,
            Counted::Dropped => &self.counters.notifications_dropped,
        };
        let total = counter.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::debug!(namespace = %self.namespace, method, ?what, total, "{why}");
    }

    pub(crate) fn stats(&self) -> RelayStats {
        let counters = &self.counters;
        RelayStats {
            ambiguous_attributions: counters.ambiguous_attributions.load(Ordering::Relaxed),
            refused_undeclared: counters.refused_undeclared.load(Ordering::Relaxed),
            requests_of_no_call: counters.requests_of_no_call.load(Ordering::Relaxed),
            notifications_dropped: counters.notifications_dropped.load(Ordering::Relaxed),
        }
    }
}

/// Sends the outbox's notifications in order, until the relay is gone.
pub(crate) async fn deliver(client: Client, mut outbox: mpsc::Receiver<Outgoing>) {
    while let Some(outgoing) = outbox.recv().await {
        if let Err(error) = client
            .notify(&outgoing.service, outgoing.method, &outgoing.params)
            .await
        {
            tracing::debug!(%error, method = outgoing.method, "cannot send a notification to a caller");
        }
    }
}
