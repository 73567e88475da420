//! Read-only views of a running hub: the Prometheus text of `GET /metrics`
//! (gauges read now, counters summed over the open connections and the
//! totals of closed ones; `metrics.rs` renders them) and the sizes tests
//! assert on.

use std::sync::atomic::Ordering;

use crate::metrics::{self, Counters, Gauges};
use crate::state::HubState;

/// Sizes of the request bookkeeping (see `pending.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bookkeeping {
    /// Forwarded requests not yet answered (owner side).
    pub pending: usize,
    /// Caller-side index entries.
    pub calls: usize,
    /// Armed deadlines.
    pub deadlines: usize,
}

impl HubState {
    /// Prometheus text of every counter and gauge.
    pub fn metrics_text(&self) -> String {
        // The table's lock is held throughout: a connection released
        // meanwhile has its counters folded into `self.counters` under the
        // same lock, so it is counted exactly once.
        let open = self.admission.open();
        let mut gauges = Gauges {
            connections: open.clients() as u64,
            connections_accepted: self.admission.accepted(),
            connections_refused: self.admission.refused(),
            services: self.registry.service_count() as u64,
            subscribers: self.registry.subscriber_count() as u64,
            requests_in_flight: 0,
            queued_bytes: 0,
            server_seq: self.registry.server_seq(),
            reloads: self.reloads(),
        };
        // Open connections count what they sent in their queues.
        let open_sent = Counters::default();
        for conn in open.iter() {
            gauges.requests_in_flight += conn.pending.lock().len() as u64;
            let (sent, queued) = conn.out.sent();
            gauges.queued_bytes += queued as u64;
            open_sent
                .messages_sent
                .fetch_add(sent.messages, Ordering::Relaxed);
            open_sent
                .bytes_sent
                .fetch_add(sent.bytes, Ordering::Relaxed);
        }
        let counters = [&self.counters, &open_sent]
            .into_iter()
            .chain(open.iter().map(|c| &c.counters));
        let mut text = metrics::render(counters, &gauges);
        drop(open);
        if let Some(supervisor) = self.supervisor.get() {
            supervisor.render_metrics(&mut text);
        }
        if let Some(federated) = &self.federated {
            federated.metrics.render_metrics(&mut text);
        }
        text
    }

    /// Open connections.
    pub fn connection_count(&self) -> usize {
        self.admission.open().len()
    }

    /// Connection objects not yet freed: the open ones, plus any that
    /// something still refers to after its teardown. Once every closed
    /// connection's task has ended this equals [`Self::connection_count`];
    /// more would be a leak.
    pub fn connections_in_memory(&self) -> usize {
        self.admission.allocated()
    }

    /// Requests forwarded and not yet answered, across the hub.
    pub fn pending_count(&self) -> usize {
        self.bookkeeping().pending
    }

    /// Sizes of the request bookkeeping across the hub; all zero when no
    /// request is in flight (tests assert that every ending releases it).
    pub fn bookkeeping(&self) -> Bookkeeping {
        let open = self.admission.open();
        let mut sizes = Bookkeeping {
            deadlines: self.timers.len(),
            ..Bookkeeping::default()
        };
        for conn in open.iter() {
            sizes.pending += conn.pending.lock().len();
            sizes.calls += conn.calls.lock().len();
        }
        sizes
    }
}
