//! Counters and their Prometheus text.
//!
//! Hot counters live per connection ([`Counters`] in each `Conn`), touched
//! only by that connection's reader, so routing never contends on a shared
//! cache line. A scrape sums the live connections and the totals of closed
//! ones (folded into the hub's own `Counters` when a connection ends).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use switchboard_protocol::error::GoneReason;

/// Why a notification was not forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyDrop {
    UnknownService,
    NotPermitted,
    Malformed,
    Shed,
    NotInitialized,
    Closed,
    UnknownMethod,
    /// Nested deeper than a receiver can read (`MAX_FORWARDED_DEPTH`).
    TooDeep,
}

impl NotifyDrop {
    const ALL: [NotifyDrop; 8] = [
        NotifyDrop::UnknownService,
        NotifyDrop::NotPermitted,
        NotifyDrop::Malformed,
        NotifyDrop::Shed,
        NotifyDrop::NotInitialized,
        NotifyDrop::Closed,
        NotifyDrop::UnknownMethod,
        NotifyDrop::TooDeep,
    ];

    fn label(self) -> &'static str {
        match self {
            NotifyDrop::UnknownService => "unknown_service",
            NotifyDrop::NotPermitted => "not_permitted",
            NotifyDrop::Malformed => "malformed",
            NotifyDrop::Shed => "shed",
            NotifyDrop::NotInitialized => "not_initialized",
            NotifyDrop::Closed => "closed",
            NotifyDrop::UnknownMethod => "unknown_method",
            NotifyDrop::TooDeep => "too_deep",
        }
    }
}

/// Why a routed request ended without the owner's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestFailure {
    InvalidParams,
    NotFound,
    PermissionDenied,
    Limit,
    Timeout,
    Cancelled,
    Disconnected,
    Unregistered,
    CallerGone,
}

impl RequestFailure {
    const ALL: [RequestFailure; 9] = [
        RequestFailure::InvalidParams,
        RequestFailure::NotFound,
        RequestFailure::PermissionDenied,
        RequestFailure::Limit,
        RequestFailure::Timeout,
        RequestFailure::Cancelled,
        RequestFailure::Disconnected,
        RequestFailure::Unregistered,
        RequestFailure::CallerGone,
    ];

    fn label(self) -> &'static str {
        match self {
            RequestFailure::InvalidParams => "invalid_params",
            RequestFailure::NotFound => "not_found",
            RequestFailure::PermissionDenied => "permission_denied",
            RequestFailure::Limit => "limit",
            RequestFailure::Timeout => "timeout",
            RequestFailure::Cancelled => "cancelled",
            RequestFailure::Disconnected => "disconnected",
            RequestFailure::Unregistered => "unregistered",
            RequestFailure::CallerGone => "caller_gone",
        }
    }
}

impl From<GoneReason> for RequestFailure {
    fn from(reason: GoneReason) -> Self {
        match reason {
            GoneReason::Disconnected => RequestFailure::Disconnected,
            GoneReason::Unregistered => RequestFailure::Unregistered,
        }
    }
}

#[derive(Debug, Default)]
pub struct Counters {
    pub messages_received: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub notifications_forwarded: AtomicU64,
    notifications_dropped: [AtomicU64; NotifyDrop::ALL.len()],
    pub requests_started: AtomicU64,
    pub requests_completed: AtomicU64,
    requests_failed: [AtomicU64; RequestFailure::ALL.len()],
    pub responses_dropped: AtomicU64,
    pub slow_consumer_disconnects: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    pub fn inc(counter: &AtomicU64) {
        bump(counter)
    }

    pub fn notification_dropped(&self, why: NotifyDrop) {
        bump(&self.notifications_dropped[why as usize]);
    }

    pub fn request_failed(&self, why: RequestFailure) {
        bump(&self.requests_failed[why as usize]);
    }

    /// Adds every counter of `other` into `self`.
    pub fn absorb(&self, other: &Counters) {
        let pairs = self.all().into_iter().zip(other.all());
        for (mine, theirs) in pairs {
            mine.fetch_add(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    fn all(&self) -> Vec<&AtomicU64> {
        let mut all = vec![
            &self.messages_received,
            &self.protocol_errors,
            &self.notifications_forwarded,
            &self.requests_started,
            &self.requests_completed,
            &self.responses_dropped,
            &self.slow_consumer_disconnects,
        ];
        all.extend(self.notifications_dropped.iter());
        all.extend(self.requests_failed.iter());
        all
    }
}

/// Values that are read, not counted, at scrape time.
#[derive(Debug, Default, Clone)]
pub struct Gauges {
    pub connections: u64,
    pub connections_accepted: u64,
    pub connections_refused: u64,
    pub services: u64,
    pub subscribers: u64,
    pub requests_in_flight: u64,
    pub queued_bytes: u64,
    pub server_seq: u64,
    pub reloads: u64,
}

/// Renders Prometheus text format 0.0.4 from a sum of counters and the gauges.
pub fn render<'a>(counters: impl IntoIterator<Item = &'a Counters>, gauges: &Gauges) -> String {
    let total = Counters::default();
    for c in counters {
        total.absorb(c);
    }
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let mut out = String::with_capacity(4096);
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(&str, u64)]| {
        let _ = writeln!(out, "# HELP switchboard_{name} {help}");
        let _ = writeln!(out, "# TYPE switchboard_{name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "switchboard_{name}{labels} {value}");
        }
    };
    metric(
        "connections",
        "gauge",
        "Open client connections.",
        &[("", gauges.connections)],
    );
    metric(
        "connections_accepted_total",
        "counter",
        "Connections accepted since start.",
        &[("", gauges.connections_accepted)],
    );
    metric(
        "connections_refused_total",
        "counter",
        "Connections refused at maxConnections.",
        &[("", gauges.connections_refused)],
    );
    metric(
        "services",
        "gauge",
        "Registered services.",
        &[("", gauges.services)],
    );
    metric(
        "catalog_subscribers",
        "gauge",
        "Connections subscribed to the catalog.",
        &[("", gauges.subscribers)],
    );
    metric(
        "server_seq",
        "gauge",
        "The catalog's serverSeq.",
        &[("", gauges.server_seq)],
    );
    metric(
        "messages_received_total",
        "counter",
        "JSON-RPC messages read from clients.",
        &[("", get(&total.messages_received))],
    );
    metric(
        "protocol_errors_total",
        "counter",
        "Messages answered with -32700 or -32600.",
        &[("", get(&total.protocol_errors))],
    );
    metric(
        "notifications_forwarded_total",
        "counter",
        "Notifications delivered to an owner's queue.",
        &[("", get(&total.notifications_forwarded))],
    );
    let dropped: Vec<(String, u64)> = NotifyDrop::ALL
        .iter()
        .map(|why| {
            (
                format!("{{reason=\"{}\"}}", why.label()),
                get(&total.notifications_dropped[*why as usize]),
            )
        })
        .collect();
    let dropped: Vec<(&str, u64)> = dropped.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    metric(
        "notifications_dropped_total",
        "counter",
        "Notifications not forwarded, by reason.",
        &dropped,
    );
    metric(
        "requests_started_total",
        "counter",
        "Requests forwarded to an owner.",
        &[("", get(&total.requests_started))],
    );
    metric(
        "requests_completed_total",
        "counter",
        "Requests answered by their owner (result or error).",
        &[("", get(&total.requests_completed))],
    );
    let failed: Vec<(String, u64)> = RequestFailure::ALL
        .iter()
        .map(|why| {
            (
                format!("{{reason=\"{}\"}}", why.label()),
                get(&total.requests_failed[*why as usize]),
            )
        })
        .collect();
    let failed: Vec<(&str, u64)> = failed.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    metric(
        "requests_failed_total",
        "counter",
        "Requests answered by the hub instead of an owner, by reason.",
        &failed,
    );
    metric(
        "requests_in_flight",
        "gauge",
        "Requests forwarded and not yet answered.",
        &[("", gauges.requests_in_flight)],
    );
    metric(
        "responses_dropped_total",
        "counter",
        "Responses to unknown or already answered requests.",
        &[("", get(&total.responses_dropped))],
    );
    metric(
        "slow_consumer_disconnects_total",
        "counter",
        "Connections closed because their queue passed slowConsumerBytes.",
        &[("", get(&total.slow_consumer_disconnects))],
    );
    metric(
        "queued_bytes",
        "gauge",
        "Bytes waiting in outbound queues.",
        &[("", gauges.queued_bytes)],
    );
    metric(
        "config_reloads_total",
        "counter",
        "Successful config reloads.",
        &[("", gauges.reloads)],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_summed_counters() {
        let a = Counters::default();
        let b = Counters::default();
        Counters::inc(&a.notifications_forwarded);
        Counters::inc(&b.notifications_forwarded);
        b.notification_dropped(NotifyDrop::Shed);
        b.request_failed(RequestFailure::Timeout);
        let text = render([&a, &b], &Gauges::default());
        assert!(text.contains("switchboard_notifications_forwarded_total 2\n"));
        assert!(text.contains("switchboard_notifications_dropped_total{reason=\"shed\"} 1\n"));
        assert!(text.contains("switchboard_requests_failed_total{reason=\"timeout\"} 1\n"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert_eq!(line.split(' ').count(), 2, "{line}");
        }
    }
}
