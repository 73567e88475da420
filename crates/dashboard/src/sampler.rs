//! The dashboard's clock: once a second, one pass over the open connections
//! (the same pass a `/metrics` scrape makes) gives the connection table and
//! the hub's totals; the difference from the second before gives the rates
//! and the latency percentiles. The point goes into a ring of
//! `HISTORY_POINTS` (15 minutes), and the whole tick, encoded once, is
//! published to every open page (a `watch` channel: a page that misses
//! ticks simply gets the latest, nothing queues up).
//!
//! The sampler only reads, through the hub's observer door
//! (`HubView::sample`: the pass a scrape makes, under the connection
//! table's lock, never awaiting under it).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use switchboard_hub::observe::{ConnectionSample, ModuleStatus, Sample};
use tokio::time::{Instant, MissedTickBehavior};

use crate::history::{rates, Point, Totals};
use crate::state::DashboardState;

/// How often the sampler runs.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// One row of the connection table.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConnectionRow<'a> {
    /// `None` before `initialize`.
    client_id: Option<&'a str>,
    principal: Option<&'a serde_json::value::RawValue>,
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
    connections: Vec<ConnectionRow<'a>>,
    /// The supervised modules, as `hub/modules` lists them.
    modules: Vec<ModuleStatus>,
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

/// Runs until the hub stops: one tick a second.
pub async fn run(state: Arc<DashboardState>) {
    let mut interval = tokio::time::interval(INTERVAL);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut previous: Option<Previous> = None;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            () = state.hub.stopping() => return,
        }
        previous = Some(tick(&state, previous));
    }
}

fn tick(state: &DashboardState, previous: Option<Previous>) -> Previous {
    let now = Instant::now();
    let t = unix_ms(SystemTime::now());
    let sample = state.hub.sample();
    let totals = history_totals(&sample);
    let mut rows: Vec<ConnectionRow<'_>> = sample.connections.iter().map(row).collect();
    rows.sort_unstable_by_key(|row| std::cmp::Reverse(row.connected_since));
    let tick_totals = TickTotals {
        connections: sample.connections.len(),
        services: sample.services,
        subscribers: sample.subscribers,
        in_flight: rows.iter().map(|row| row.in_flight).sum(),
        queued_bytes: rows.iter().map(|row| row.queued_bytes).sum(),
        notifications_forwarded: sample.totals.notifications_forwarded,
        notifications_dropped: sample.totals.notifications_dropped.iter().sum(),
        requests_started: sample.totals.requests_started,
        requests_failed: sample.totals.requests_failed,
    };
    let point = match &previous {
        Some(previous) => rates(t, now - previous.at, &previous.totals, &totals),
        None => Point {
            t,
            ..Point::default()
        },
    };
    let drop_labels = switchboard_hub::observe::Totals::drop_labels();
    {
        let mut history = state.history.lock();
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
        uptime_seconds: state.uptime().as_secs(),
        rss_bytes: rss_bytes(),
        server_seq: sample.server_seq,
        totals: tick_totals,
        rates,
        connections: rows,
        modules: state.hub.modules(),
    };
    state.publish_tick(serde_json::to_string(&tick).expect("a tick serializes"));
    Previous { at: now, totals }
}

/// The running totals the history's rates are taken between.
fn history_totals(sample: &Sample) -> Totals {
    let totals = &sample.totals;
    Totals {
        notifications: totals.notifications_forwarded,
        requests: totals.requests_started,
        bytes_in: totals.bytes_in,
        bytes_out: totals.bytes_out,
        drops: std::array::from_fn(|i: usize| {
            totals.notifications_dropped.get(i).copied().unwrap_or(0)
        }),
        latency: totals.latency,
    }
}

fn row(connection: &ConnectionSample) -> ConnectionRow<'_> {
    ConnectionRow {
        client_id: connection.client_id.as_deref(),
        principal: connection
            .principal
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok()),
        transport: connection.transport,
        services: connection.services,
        in_flight: connection.in_flight,
        calls: connection.calls,
        queued_bytes: connection.queued_bytes,
        messages_in: connection.messages_in,
        messages_out: connection.messages_out,
        bytes_in: connection.bytes_in,
        bytes_out: connection.bytes_out,
        drops: connection.drops,
        connected_since: unix_ms(connection.connected_at),
    }
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
