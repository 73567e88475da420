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

/// Request latency (from forwarding to the owner's answer) in fixed
/// power-of-two buckets of microseconds: bucket 0 holds 0 µs, bucket `k`
/// holds `[2^(k-1), 2^k)` µs, and the last one everything longer (from
/// about 67 s). Recording is one relaxed add, on the answering owner's own
/// counters; the dashboard's sampler sums and diffs them each second.
#[derive(Debug, Default)]
pub struct Latency {
    buckets: [AtomicU64; LATENCY_BUCKETS],
}

/// How many latency buckets there are.
pub const LATENCY_BUCKETS: usize = 28;

impl Latency {
    pub fn record(&self, elapsed: std::time::Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = (64 - micros.leading_zeros() as usize).min(LATENCY_BUCKETS - 1);
        bump(&self.buckets[bucket]);
    }

    /// The counts, bucket by bucket.
    pub fn counts(&self) -> [u64; LATENCY_BUCKETS] {
        std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed))
    }

    /// The upper bound of bucket `index` in microseconds (what a percentile
    /// falling in it reports).
    pub fn bucket_ceiling_micros(index: usize) -> u64 {
        1u64 << index.min(63)
    }
}

#[derive(Debug, Default)]
pub struct Counters {
    pub messages_received: AtomicU64,
    /// Bytes of the messages read (without framing).
    pub bytes_received: AtomicU64,
    /// Messages queued to the connection and bytes written to it. An open
    /// connection counts them in its queue (`Outbound::sent`, under the
    /// lock a push takes anyway); they are added here when it is released.
    pub messages_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub notifications_forwarded: AtomicU64,
    notifications_dropped: [AtomicU64; NotifyDrop::ALL.len()],
    pub requests_started: AtomicU64,
    pub requests_completed: AtomicU64,
    requests_failed: [AtomicU64; RequestFailure::ALL.len()],
    pub responses_dropped: AtomicU64,
    pub slow_consumer_disconnects: AtomicU64,
    /// Latency of the requests this connection's services answered.
    pub latency: Latency,
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

    /// Adds `n` to a byte counter.
    pub fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Notifications dropped, by reason (labels as in `/metrics`).
    pub fn drops(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        NotifyDrop::ALL.iter().map(|why| {
            (
                why.label(),
                self.notifications_dropped[*why as usize].load(Ordering::Relaxed),
            )
        })
    }

    /// Requests the hub answered instead of an owner, by reason.
    pub fn failures(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        RequestFailure::ALL.iter().map(|why| {
            (
                why.label(),
                self.requests_failed[*why as usize].load(Ordering::Relaxed),
            )
        })
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
            &self.bytes_received,
            &self.messages_sent,
            &self.bytes_sent,
            &self.protocol_errors,
            &self.notifications_forwarded,
            &self.requests_started,
            &self.requests_completed,
            &self.responses_dropped,
            &self.slow_consumer_disconnects,
        ];
        all.extend(self.notifications_dropped.iter());
        all.extend(self.requests_failed.iter());
        all.extend(self.latency.buckets.iter());
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
        "received_bytes_total",
        "counter",
        "Bytes of the JSON-RPC messages read from clients.",
        &[("", get(&total.bytes_received))],
    );
    metric(
        "sent_bytes_total",
        "counter",
        "Bytes written to clients.",
        &[("", get(&total.bytes_sent))],
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
    fn latency_buckets_are_powers_of_two_microseconds() {
        let latency = Latency::default();
        for micros in [0, 1, 2, 3, 1000, u64::MAX / 2] {
            latency.record(std::time::Duration::from_micros(micros));
        }
        let counts = latency.counts();
        assert_eq!(counts[0], 1); // 0 µs
        assert_eq!(counts[1], 1); // 1 µs
        assert_eq!(counts[2], 2); // 2 and 3 µs
        assert_eq!(counts[10], 1); // 1000 µs: [512, 1024)
        assert_eq!(counts[LATENCY_BUCKETS - 1], 1);
        assert_eq!(Latency::bucket_ceiling_micros(10), 1024);
    }

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
        assert!(text.contains("switchboard_received_bytes_total 0\n"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert_eq!(line.split(' ').count(), 2, "{line}");
        }
    }
}
