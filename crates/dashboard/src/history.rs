//! The dashboard's memory: the hub's running totals at one instant, the
//! rates between two of them, latency percentiles from the buckets, and
//! the last 15 minutes of points. Pure data: nothing here reads the hub
//! (the sampler does).

use std::collections::VecDeque;
use std::time::Duration;

use switchboard_hub::observe::{Latency, LATENCY_BUCKETS};

/// Points kept: 15 minutes at one a second.
pub const HISTORY_POINTS: usize = 15 * 60;
/// Drop reasons charted, in this order (labels as in `/metrics`).
pub const DROP_REASONS: usize = 8;

/// The hub's running totals at one instant.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub notifications: u64,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub drops: [u64; DROP_REASONS],
    pub latency: [u64; LATENCY_BUCKETS],
}

/// One second of the history, as rates.
#[derive(Debug, Clone, Copy, Default)]
pub struct Point {
    /// Milliseconds since the Unix epoch.
    pub t: u64,
    pub notifications: f64,
    pub requests: f64,
    pub bytes_in: f64,
    pub bytes_out: f64,
    pub drops: [f64; DROP_REASONS],
    /// Milliseconds; `None` when no request was answered in that second.
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

/// The last 15 minutes, oldest first.
#[derive(Default)]
pub struct History {
    points: VecDeque<Point>,
    /// The drop reasons' labels, in the order of `Point::drops`.
    pub drop_labels: Vec<&'static str>,
}

impl History {
    pub fn push(&mut self, point: Point) {
        if self.points.len() == HISTORY_POINTS {
            self.points.pop_front();
        }
        self.points.push_back(point);
    }

    /// Columns, as the page's charts take them:
    /// `{t:[s…], notifications:[…], requests:[…], bytesIn:[…], bytesOut:[…],
    /// drops:{reason:[…]}, p50:[ms|null…], p99:[…]}` (`t` in seconds).
    pub fn to_json(&self) -> serde_json::Value {
        let column =
            |f: &dyn Fn(&Point) -> f64| -> Vec<f64> { self.points.iter().map(f).collect() };
        let drops: serde_json::Map<String, serde_json::Value> = self
            .drop_labels
            .iter()
            .enumerate()
            .map(|(i, label)| {
                (
                    (*label).to_owned(),
                    serde_json::json!(column(&|p| p.drops[i])),
                )
            })
            .collect();
        let optional = |f: &dyn Fn(&Point) -> Option<f64>| -> Vec<Option<f64>> {
            self.points.iter().map(f).collect()
        };
        serde_json::json!({
            "t": column(&|p| p.t as f64 / 1000.0),
            "notifications": column(&|p| p.notifications),
            "requests": column(&|p| p.requests),
            "bytesIn": column(&|p| p.bytes_in),
            "bytesOut": column(&|p| p.bytes_out),
            "drops": drops,
            "p50": optional(&|p| p.p50),
            "p99": optional(&|p| p.p99),
        })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.points.len()
    }
}

/// The rates between two totals `elapsed` apart.
pub fn rates(t: u64, elapsed: Duration, before: &Totals, after: &Totals) -> Point {
    let seconds = elapsed.as_secs_f64().max(1e-3);
    let rate = |a: u64, b: u64| b.saturating_sub(a) as f64 / seconds;
    let mut window = [0u64; LATENCY_BUCKETS];
    for (i, slot) in window.iter_mut().enumerate() {
        *slot = after.latency[i].saturating_sub(before.latency[i]);
    }
    Point {
        t,
        notifications: rate(before.notifications, after.notifications),
        requests: rate(before.requests, after.requests),
        bytes_in: rate(before.bytes_in, after.bytes_in),
        bytes_out: rate(before.bytes_out, after.bytes_out),
        drops: std::array::from_fn(|i| rate(before.drops[i], after.drops[i])),
        p50: percentile(&window, 0.50),
        p99: percentile(&window, 0.99),
    }
}

/// The upper bound (ms) of the bucket holding the `q` quantile; `None` for
/// an empty window.
fn percentile(counts: &[u64; LATENCY_BUCKETS], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (index, count) in counts.iter().enumerate() {
        seen += count;
        if seen >= rank {
            return Some(Latency::bucket_ceiling_micros(index) as f64 / 1000.0);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_bucket_ceilings() {
        let mut counts = [0u64; LATENCY_BUCKETS];
        assert_eq!(percentile(&counts, 0.5), None);
        counts[10] = 98; // [512, 1024) µs
        counts[20] = 2; // [~0.5, ~1) s
        assert_eq!(percentile(&counts, 0.50), Some(1.024));
        assert_eq!(percentile(&counts, 0.98), Some(1.024));
        assert_eq!(percentile(&counts, 0.99), Some(1048.576));
    }

    #[test]
    fn history_keeps_fifteen_minutes() {
        let mut history = History::default();
        for t in 0..(HISTORY_POINTS as u64 + 10) {
            history.push(Point {
                t: t * 1000,
                ..Point::default()
            });
        }
        assert_eq!(history.len(), HISTORY_POINTS);
        let json = history.to_json();
        assert_eq!(json["t"][0], 10.0);
        assert_eq!(json["t"].as_array().unwrap().len(), HISTORY_POINTS);
    }

    #[test]
    fn rates_are_differences_over_time() {
        let before = Totals::default();
        let mut after = Totals {
            notifications: 500,
            ..Totals::default()
        };
        after.drops[3] = 10;
        after.latency[5] = 4;
        let point = rates(7, Duration::from_millis(500), &before, &after);
        assert_eq!(point.notifications, 1000.0);
        assert_eq!(point.drops[3], 20.0);
        assert_eq!(point.p99, Some(0.032));
    }
}
