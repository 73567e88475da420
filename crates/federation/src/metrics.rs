//! The federation's figures, appended to the hub's `/metrics`
//! (`switchboard_federation_*`). Counters are atomics touched by the
//! federation's own tasks; the gauges are read at scrape time.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use switchboard_hub::link::Dropped;

/// Why something from NATS was not acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// A line another hub sent, dropped by the hub (`link::Dropped`).
    Line(Dropped),
    /// A message without the headers every hub sends.
    NoHeaders,
    /// From a hub this one does not know (no claim seen).
    UnknownHub,
    /// From, or for, another instance than the live one.
    StaleInstance,
    /// A KV entry that does not parse, or names what it may not.
    BadEntry,
}

const IGNORED: [(&str, usize); 9] = [
    ("malformed", 0),
    ("too_large", 1),
    ("impersonation", 2),
    ("unknown_method", 3),
    ("closed", 4),
    ("no_headers", 5),
    ("unknown_hub", 6),
    ("stale_instance", 7),
    ("bad_entry", 8),
];

impl Ignored {
    fn index(self) -> usize {
        match self {
            Ignored::Line(dropped) => Dropped::ALL.iter().position(|d| *d == dropped).unwrap_or(0),
            Ignored::NoHeaders => 5,
            Ignored::UnknownHub => 6,
            Ignored::StaleInstance => 7,
            Ignored::BadEntry => 8,
        }
    }
}

/// Why lines for another hub were not sent, or requests to it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendFailure {
    /// This hub had no NATS connection.
    Disconnected,
    /// NATS said no one listens on that hub's subject.
    NoResponders,
    /// One line over NATS's `max_payload`.
    TooLarge,
}

const SEND_FAILURES: [&str; 3] = ["disconnected", "no_responders", "too_large"];

/// The kinds of lines that cross between hubs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Request,
    Notification,
    Response,
    Cancel,
}

const KINDS: [&str; 4] = ["request", "notification", "response", "cancel"];

impl LineKind {
    /// The kind of a line a hub wrote (`hub/src/wire.rs` shapes), by its
    /// first bytes: no parsing.
    pub fn of(line: &[u8]) -> LineKind {
        const HEAD: &[u8] = b"{\"jsonrpc\":\"2.0\",";
        let rest = line.strip_prefix(HEAD).unwrap_or(line);
        if rest.starts_with(b"\"method\":\"clientService/notification\"") {
            LineKind::Notification
        } else if rest.starts_with(b"\"method\":\"$/cancelRequest\"") {
            LineKind::Cancel
        } else if memchr::memmem::find(rest, b",\"method\":\"clientService/handleRequest\"")
            .is_some_and(|at| at < 32)
        {
            LineKind::Request
        } else {
            LineKind::Response
        }
    }
}

#[derive(Debug, Default)]
pub struct Metrics {
    pub connected: AtomicBool,
    /// Set when the connection is lost: the next one is a reconnection.
    pub lost: AtomicBool,
    pub reconnects: AtomicU64,
    pub joined: AtomicBool,
    /// Another live hub holds this hub's name: it stays out of the fabric.
    pub name_conflict: AtomicBool,
    sent: [AtomicU64; 4],
    received: [AtomicU64; 4],
    pub publishes: AtomicU64,
    pub bytes_sent: AtomicU64,
    /// Batches that waited for another hub's credit (`shared::Window`).
    pub window_waits: AtomicU64,
    /// Of those, the ones published after `Window::WAIT` without a credit.
    pub window_timeouts: AtomicU64,
    pub nats_messages_received: AtomicU64,
    ignored: [AtomicU64; 9],
    send_failures: [AtomicU64; 3],
    /// Requests failed because their hub could not be reached.
    pub requests_failed_unreachable: AtomicU64,
    pub kv_writes: AtomicU64,
    pub kv_write_failures: AtomicU64,
    /// The hubs seen (name → services listed), rewritten by the watcher.
    pub hubs: Mutex<Vec<(String, usize)>>,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl Metrics {
    pub fn sent(&self, kind: LineKind) {
        bump(&self.sent[kind as usize], 1);
    }

    pub fn received(&self, kind: LineKind) {
        bump(&self.received[kind as usize], 1);
    }

    pub fn ignored(&self, why: Ignored) {
        bump(&self.ignored[why.index()], 1);
    }

    pub fn ignored_count(&self, why: Ignored) -> u64 {
        self.ignored[why.index()].load(Ordering::Relaxed)
    }

    pub fn send_failed(&self, why: SendFailure) {
        bump(&self.send_failures[why as usize], 1);
    }

    pub fn inc(counter: &AtomicU64) {
        bump(counter, 1);
    }

    pub fn add(counter: &AtomicU64, by: u64) {
        bump(counter, by);
    }

    /// Prometheus text of every figure, for hub `name`.
    pub fn render(&self, name: &str, out: &mut String) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let flag = |b: &AtomicBool| u64::from(b.load(Ordering::Relaxed));
        let mut metric = |metric: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
            let _ = writeln!(out, "# HELP switchboard_federation_{metric} {help}");
            let _ = writeln!(out, "# TYPE switchboard_federation_{metric} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(out, "switchboard_federation_{metric}{labels} {value}");
            }
        };
        let one = |value: u64| vec![(String::new(), value)];
        let by = |names: &[&str], values: &[AtomicU64]| -> Vec<(String, u64)> {
            names
                .iter()
                .zip(values)
                .map(|(name, value)| (format!("{{reason=\"{name}\"}}"), get(value)))
                .collect()
        };
        let by_kind = |values: &[AtomicU64]| -> Vec<(String, u64)> {
            KINDS
                .iter()
                .zip(values)
                .map(|(kind, value)| (format!("{{kind=\"{kind}\"}}"), get(value)))
                .collect()
        };
        metric(
            "info",
            "gauge",
            "This hub's name in the fabric.",
            &[(format!("{{name=\"{name}\"}}"), 1)],
        );
        metric(
            "nats_connected",
            "gauge",
            "1 while the hub has a NATS connection.",
            &one(flag(&self.connected)),
        );
        metric(
            "joined",
            "gauge",
            "1 while the hub holds its name in the fabric and publishes its services.",
            &one(flag(&self.joined)),
        );
        metric(
            "name_conflict",
            "gauge",
            "1 when another live hub holds this hub's name (this one stays out).",
            &one(flag(&self.name_conflict)),
        );
        metric(
            "nats_reconnects_total",
            "counter",
            "NATS connections regained after a loss.",
            &one(get(&self.reconnects)),
        );
        let hubs = self.hubs.lock().clone();
        metric(
            "hubs",
            "gauge",
            "Other hubs seen in the fabric.",
            &one(hubs.len() as u64),
        );
        metric(
            "remote_services",
            "gauge",
            "Services of other hubs known here, by hub.",
            &hubs
                .iter()
                .map(|(hub, services)| (format!("{{hub=\"{hub}\"}}"), *services as u64))
                .collect::<Vec<_>>(),
        );
        metric(
            "lines_sent_total",
            "counter",
            "Messages sent to other hubs, by kind.",
            &by_kind(&self.sent),
        );
        metric(
            "lines_received_total",
            "counter",
            "Messages received from other hubs and routed, by kind.",
            &by_kind(&self.received),
        );
        metric(
            "publishes_total",
            "counter",
            "NATS messages published to other hubs (each a batch of lines).",
            &one(get(&self.publishes)),
        );
        metric(
            "bytes_sent_total",
            "counter",
            "Bytes of lines published to other hubs.",
            &one(get(&self.bytes_sent)),
        );
        metric(
            "window_waits_total",
            "counter",
            "Batches that waited because another hub had not yet taken what was sent to it (flow control).",
            &one(get(&self.window_waits)),
        );
        metric(
            "window_timeouts_total",
            "counter",
            "Batches published after waiting the most for another hub's credit.",
            &one(get(&self.window_timeouts)),
        );
        metric(
            "nats_messages_received_total",
            "counter",
            "NATS messages received from other hubs.",
            &one(get(&self.nats_messages_received)),
        );
        let ignored: Vec<(String, u64)> = IGNORED
            .iter()
            .map(|(name, index)| (format!("{{reason=\"{name}\"}}"), get(&self.ignored[*index])))
            .collect();
        metric(
            "ignored_total",
            "counter",
            "Lines, messages and KV entries from NATS dropped unrouted, by reason.",
            &ignored,
        );
        metric(
            "send_failures_total",
            "counter",
            "Batches for other hubs not delivered, by reason.",
            &by(&SEND_FAILURES, &self.send_failures),
        );
        metric(
            "requests_failed_unreachable_total",
            "counter",
            "Requests to other hubs failed with -32052 because the hub could not be reached.",
            &one(get(&self.requests_failed_unreachable)),
        );
        metric(
            "kv_writes_total",
            "counter",
            "Writes to the shared catalog (services, claim, heartbeats).",
            &one(get(&self.kv_writes)),
        );
        metric(
            "kv_write_failures_total",
            "counter",
            "Writes to the shared catalog that failed (retried).",
            &one(get(&self.kv_write_failures)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_kinds_are_told_by_their_first_bytes() {
        let kinds = [
            (
                &br#"{"jsonrpc":"2.0","id":7,"method":"clientService/handleRequest","params":{}}"#
                    [..],
                LineKind::Request,
            ),
            (
                br#"{"jsonrpc":"2.0","method":"clientService/notification","params":{}}"#,
                LineKind::Notification,
            ),
            (
                br#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":7}}"#,
                LineKind::Cancel,
            ),
            (
                br#"{"jsonrpc":"2.0","id":7,"result":{"method":"clientService/handleRequest"}}"#,
                LineKind::Response,
            ),
        ];
        for (line, kind) in kinds {
            assert_eq!(LineKind::of(line), kind);
        }
    }

    #[test]
    fn renders_every_reason() {
        let metrics = Metrics::default();
        metrics.ignored(Ignored::Line(Dropped::Impersonation));
        metrics.ignored(Ignored::BadEntry);
        metrics.send_failed(SendFailure::NoResponders);
        *metrics.hubs.lock() = vec![("b".into(), 3)];
        let mut text = String::new();
        metrics.render("a", &mut text);
        assert!(text.contains("switchboard_federation_info{name=\"a\"} 1\n"));
        assert!(text.contains("switchboard_federation_ignored_total{reason=\"impersonation\"} 1\n"));
        assert!(text.contains("switchboard_federation_ignored_total{reason=\"bad_entry\"} 1\n"));
        assert!(text
            .contains("switchboard_federation_send_failures_total{reason=\"no_responders\"} 1\n"));
        assert!(text.contains("switchboard_federation_remote_services{hub=\"b\"} 3\n"));
        assert!(text.contains("switchboard_federation_hubs 1\n"));
    }
}
