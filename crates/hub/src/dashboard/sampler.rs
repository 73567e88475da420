//! The dashboard's clock: once a second, one pass over the open connections
//! (the same pass a `/metrics` scrape makes) gives the connection table and
//! the hub's totals; the difference from the second before gives the rates
//! and the latency percentiles. The point goes into a ring of
//! `HISTORY_POINTS` (15 minutes), and the whole tick, encoded once, is
//! published to every open page (a `watch` channel: a page that misses
//! ticks simply gets the latest, nothing queues up).
//!
//! The sampler only reads: counters with relaxed loads, each connection's
//! queue and request tables under their own short locks, inside the
//! connection table's lock (as a scrape does), and it never awaits under
//! any of them.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::value::RawValue;
use tokio::time::{Instant, MissedTickBehavior};

use super::history::{rates, Point, Totals};
use crate::conn::Conn;
use crate::metrics::Counters;
use crate::state::HubState;

/// How often the sampler runs.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// One row of the connection table.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConnectionRow<'a> {
    /// `None` before `initialize`.
    client_id: Option<&'a str>,
    principal: Option<&'a RawValue>,
    transport: &'static str,
    services: usize,
    /// Requests routed to this connection's services, not yet answered.
    in_flight: usize,
    /// Requests this connection made, not yet answered.
    calls: usize,
    queued_bytes: usize,
    messages_in: u64,
    messages_out: u64,
    bytes_in: u64,
    bytes_out: u64,
    /// Notifications this connection sent that were dropped.
    drops: u64,
    /// Milliseconds since the Unix epoch.
    connected_since: u64,
}

/// What every page gets each second (and `hub/dashboardSnapshot` as `tick`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tick<'a> {
    t: u64,
    uptime_seconds: u64,
    rss_bytes: Option<u64>,
    server_seq: u64,
    totals: TickTotals,
    /// This second's rates (the newest history point).
    rates: Rates,
    /// `[ConnectionRow…]`, newest first.
    connections: &'a RawValue,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TickTotals {
    connections: usize,
    services: usize,
    subscribers: usize,
    in_flight: usize,
    queued_bytes: usize,
    notifications_forwarded: u64,
    notifications_dropped: u64,
    requests_started: u64,
    requests_failed: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rates {
    notifications: f64,
    requests: f64,
    bytes_in: f64,
    bytes_out: f64,
    /// Notifications dropped per second, by reason.
    drops: std::collections::BTreeMap<&'static str, f64>,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
}

/// The sampler's memory between two ticks.
struct Previous {
    at: Instant,
    totals: Totals,
}

/// Runs until shutdown: one tick a second.
pub async fn run(hub: Arc<HubState>) {
    let mut interval = tokio::time::interval(INTERVAL);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut previous: Option<Previous> = None;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            () = hub.stopping() => return,
        }
        previous = Some(tick(&hub, previous));
    }
}

fn tick(hub: &HubState, previous: Option<Previous>) -> Previous {
    let now = Instant::now();
    let t = unix_ms(SystemTime::now());
    let owned: std::collections::HashMap<u64, usize> =
        hub.registry.owned_counts().into_iter().collect();
    let mut totals = Totals::default();
    let mut tick_totals = TickTotals {
        connections: 0,
        services: hub.registry.service_count(),
        subscribers: hub.registry.subscriber_count(),
        in_flight: 0,
        queued_bytes: 0,
        notifications_forwarded: 0,
        notifications_dropped: 0,
        requests_started: 0,
        requests_failed: 0,
    };
    let connections: Box<RawValue>;
    {
        // As in a scrape: under the table's lock a released connection's
        // counters move into `hub.counters` atomically, so totals never go
        // back.
        let open = hub.admission.open();
        tick_totals.connections = open.len();
        add_counters(&mut totals, &mut tick_totals, &hub.counters);
        totals.bytes_out += Counters::get(&hub.counters.bytes_sent);
        let mut rows = Vec::with_capacity(open.len());
        for conn in open.iter() {
            let row = row(conn, owned.get(&conn.id).copied().unwrap_or(0));
            add_counters(&mut totals, &mut tick_totals, &conn.counters);
            totals.bytes_out += row.bytes_out;
            tick_totals.in_flight += row.in_flight;
            tick_totals.queued_bytes += row.queued_bytes;
            rows.push(row);
        }
        rows.sort_unstable_by_key(|row| std::cmp::Reverse(row.connected_since));
        // Encoded here: the rows borrow from the connections the lock holds.
        connections = serde_json::value::to_raw_value(&rows).expect("rows serialize");
    }
    let point = match &previous {
        Some(previous) => rates(t, now - previous.at, &previous.totals, &totals),
        None => Point {
            t,
            ..Point::default()
        },
    };
    let drop_labels: Vec<&'static str> = hub.counters.drops().map(|(label, _)| label).collect();
    {
        let mut history = hub.dashboard.history.lock();
        if history.drop_labels.is_empty() {
            history.drop_labels = drop_labels.clone();
        }
        history.push(point);
    }
    let rates = Rates {
        notifications: point.notifications,
        requests: point.requests,
        bytes_in: point.bytes_in,
        bytes_out: point.bytes_out,
        drops: drop_labels.into_iter().zip(point.drops).collect(),
        p50_ms: point.p50,
        p99_ms: point.p99,
    };
    let tick = Tick {
        t,
        uptime_seconds: hub.dashboard.uptime().as_secs(),
        rss_bytes: rss_bytes(),
        server_seq: hub.registry.server_seq(),
        totals: tick_totals,
        rates,
        connections: &connections,
    };
    hub.dashboard
        .publish_tick(serde_json::to_string(&tick).expect("a tick serializes"));
    Previous { at: now, totals }
}

fn row(conn: &Conn, services: usize) -> ConnectionRow<'_> {
    let identity = conn.identity();
    let counters = &conn.counters;
    let (sent, queued) = conn.out.sent();
    ConnectionRow {
        client_id: identity.map(|i| &*i.client_id),
        principal: identity.and_then(|i| serde_json::from_str(&i.principal.json).ok()),
        transport: conn.transport.label(),
        services,
        in_flight: conn.pending.lock().len(),
        calls: conn.calls.lock().len(),
        queued_bytes: queued,
        messages_in: Counters::get(&counters.messages_received),
        messages_out: sent.messages,
        bytes_in: Counters::get(&counters.bytes_received),
        bytes_out: sent.bytes,
        drops: counters.drops().map(|(_, n)| n).sum(),
        connected_since: unix_ms(conn.connected_at),
    }
}

fn add_counters(totals: &mut Totals, tick: &mut TickTotals, counters: &Counters) {
    let forwarded = Counters::get(&counters.notifications_forwarded);
    let started = Counters::get(&counters.requests_started);
    totals.notifications += forwarded;
    totals.requests += started;
    totals.bytes_in += Counters::get(&counters.bytes_received);
    for (total, (_, n)) in totals.drops.iter_mut().zip(counters.drops()) {
        *total += n;
        tick.notifications_dropped += n;
    }
    for (total, n) in totals.latency.iter_mut().zip(counters.latency.counts()) {
        *total += n;
    }
    tick.notifications_forwarded += forwarded;
    tick.requests_started += started;
    tick.requests_failed += counters.failures().map(|(_, n)| n).sum::<u64>();
}

pub fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The hub's resident memory, from `/proc/self/statm` (Linux only).
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}
