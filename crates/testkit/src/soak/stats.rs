//! What the soak's clients counted, shared by all of them.
//!
//! The `*_failures` group are things that must never happen; any of them
//! non-zero fails the run.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Stats {
    // ---- traffic ------------------------------------------------------------
    pub requests_sent: AtomicU64,
    pub notifications_sent: AtomicU64,
    pub cancels_sent: AtomicU64,
    pub registrations: AtomicU64,
    pub unregistrations: AtomicU64,
    pub updates: AtomicU64,
    pub subscribes: AtomicU64,
    pub unsubscribes: AtomicU64,
    pub reconnects: AtomicU64,
    /// Requests still outstanding when their own client chose to disconnect:
    /// no answer can come (the connection is gone); not a failure.
    pub abandoned: AtomicU64,

    // ---- answers the callers received ---------------------------------------
    pub answered_result: AtomicU64,
    pub answered_app_error: AtomicU64,
    pub answered_not_found: AtomicU64,
    pub answered_gone: AtomicU64,
    pub answered_timeout: AtomicU64,
    pub answered_cancelled: AtomicU64,
    pub answered_limit: AtomicU64,

    // ---- what owners received ----------------------------------------------
    pub forwarded_received: AtomicU64,
    pub notifications_received: AtomicU64,
    pub cancels_received: AtomicU64,
    pub catalog_actions: AtomicU64,

    // ---- must stay zero -------------------------------------------------------
    /// An answer to a request id already answered.
    pub duplicate_answers: AtomicU64,
    /// An answer to an id this connection never used.
    pub unknown_answers: AtomicU64,
    /// A result or error that belongs to another request (wrong token).
    pub misrouted_answers: AtomicU64,
    /// Any other error code, or an error on a hub call that should succeed.
    pub unexpected_answers: AtomicU64,
    /// Requests without an answer when the drain period ended.
    pub unanswered: AtomicU64,
    /// A forwarded id delivered twice to one owner connection.
    pub duplicate_deliveries: AtomicU64,
    /// A request or notification for a service this connection never owned.
    pub foreign_deliveries: AtomicU64,
    /// `$/cancelRequest` for a forwarded id this owner never received.
    pub unknown_cancels: AtomicU64,
    /// A catalog action that does not fit the subscriber's view (duplicate
    /// add, unknown remove or update, `serverSeq` not growing).
    pub catalog_inconsistencies: AtomicU64,
    /// The hub closed a connection the driver did not close.
    pub closed_by_hub: AtomicU64,
    /// Something unreadable, or a connection that could not be opened.
    pub protocol_failures: AtomicU64,
}

pub fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl Stats {
    pub fn requests_answered(&self) -> u64 {
        [
            &self.answered_result,
            &self.answered_app_error,
            &self.answered_not_found,
            &self.answered_gone,
            &self.answered_timeout,
            &self.answered_cancelled,
            &self.answered_limit,
        ]
        .into_iter()
        .map(get)
        .sum()
    }

    /// The must-stay-zero counters, by name.
    pub fn failures(&self) -> Vec<(&'static str, u64)> {
        [
            ("duplicate_answers", &self.duplicate_answers),
            ("unknown_answers", &self.unknown_answers),
            ("misrouted_answers", &self.misrouted_answers),
            ("unexpected_answers", &self.unexpected_answers),
            ("unanswered", &self.unanswered),
            ("duplicate_deliveries", &self.duplicate_deliveries),
            ("foreign_deliveries", &self.foreign_deliveries),
            ("unknown_cancels", &self.unknown_cancels),
            ("catalog_inconsistencies", &self.catalog_inconsistencies),
            ("closed_by_hub", &self.closed_by_hub),
            ("protocol_failures", &self.protocol_failures),
        ]
        .into_iter()
        .map(|(name, counter)| (name, get(counter)))
        .collect()
    }

    /// Every counter, by name, for the summary.
    pub fn all(&self) -> Vec<(&'static str, u64)> {
        let mut all: Vec<(&'static str, u64)> = [
            ("requests_sent", &self.requests_sent),
            ("notifications_sent", &self.notifications_sent),
            ("cancels_sent", &self.cancels_sent),
            ("registrations", &self.registrations),
            ("unregistrations", &self.unregistrations),
            ("updates", &self.updates),
            ("subscribes", &self.subscribes),
            ("unsubscribes", &self.unsubscribes),
            ("reconnects", &self.reconnects),
            ("abandoned", &self.abandoned),
            ("answered_result", &self.answered_result),
            ("answered_app_error", &self.answered_app_error),
            ("answered_not_found", &self.answered_not_found),
            ("answered_gone", &self.answered_gone),
            ("answered_timeout", &self.answered_timeout),
            ("answered_cancelled", &self.answered_cancelled),
            ("answered_limit", &self.answered_limit),
            ("forwarded_received", &self.forwarded_received),
            ("notifications_received", &self.notifications_received),
            ("cancels_received", &self.cancels_received),
            ("catalog_actions", &self.catalog_actions),
        ]
        .into_iter()
        .map(|(name, counter)| (name, get(counter)))
        .collect();
        all.push(("requests_answered", self.requests_answered()));
        all.extend(self.failures());
        all
    }
}
