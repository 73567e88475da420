//! The dashboard's snapshot (`hub/dashboardSnapshot`, the same JSON the
//! page's stream starts with; `docs/dashboard.md` has its shape), read into
//! what `top` shows. Members it does not know are ignored, and ones it
//! knows but misses default, so an older or newer hub still shows.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Snapshot {
    pub hub: HubInfo,
    pub services: Vec<Service>,
    pub tick: Option<Tick>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HubInfo {
    pub version: String,
    pub pid: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Service {
    pub service_id: String,
    pub client_id: String,
    pub principal: Value,
    pub metadata: Value,
    /// The hub it lives on, for a service reached through federation.
    pub hub: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Tick {
    /// Milliseconds since the Unix epoch.
    pub t: u64,
    pub uptime_seconds: u64,
    pub rss_bytes: Option<u64>,
    pub totals: Totals,
    pub rates: Rates,
    pub connections: Vec<Connection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Totals {
    pub connections: u64,
    pub services: u64,
    pub in_flight: u64,
    pub queued_bytes: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Rates {
    pub notifications: f64,
    pub requests: f64,
    pub bytes_in: f64,
    pub bytes_out: f64,
    pub drops: HashMap<String, f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Connection {
    pub client_id: Option<String>,
    pub principal: Value,
    pub transport: String,
    pub services: u64,
    pub in_flight: u64,
    pub calls: u64,
    pub queued_bytes: u64,
    pub messages_in: u64,
    pub messages_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub drops: u64,
    pub connected_since: u64,
}

/// A principal as one word: `direct`, `unverified`, or the module id.
pub fn principal_label(principal: &Value) -> String {
    match principal.get("kind").and_then(Value::as_str) {
        Some("reserved") => principal
            .get("module_id")
            .and_then(Value::as_str)
            .unwrap_or("reserved")
            .to_owned(),
        Some(kind) => kind.to_owned(),
        None => "-".to_owned(),
    }
}

/// A metadata member as text (`label`, `protocol`), empty when absent.
pub fn metadata_text(metadata: &Value, key: &str) -> String {
    match metadata.get(key) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

/// One row of the connection table, with rates from the tick before.
#[derive(Debug, Clone)]
pub struct ConnectionRow {
    pub connection: Connection,
    pub in_rate: Option<f64>,
    pub out_rate: Option<f64>,
    pub age_seconds: u64,
}

/// The connection table of `tick`, rates against `previous` (same client
/// id, `dt` apart).
pub fn connection_rows(tick: &Tick, previous: Option<&Tick>) -> Vec<ConnectionRow> {
    let before: HashMap<&str, &Connection> = previous
        .map(|p| {
            p.connections
                .iter()
                .filter_map(|c| Some((c.client_id.as_deref()?, c)))
                .collect()
        })
        .unwrap_or_default();
    let dt = previous.map_or(0.0, |p| tick.t.saturating_sub(p.t) as f64 / 1000.0);
    tick.connections
        .iter()
        .map(|c| {
            let earlier = c.client_id.as_deref().and_then(|id| before.get(id));
            let rate =
                |now: u64, then: u64| (dt > 0.0).then(|| now.saturating_sub(then) as f64 / dt);
            ConnectionRow {
                in_rate: earlier.and_then(|e| rate(c.messages_in, e.messages_in)),
                out_rate: earlier.and_then(|e| rate(c.messages_out, e.messages_out)),
                age_seconds: tick.t.saturating_sub(c.connected_since) / 1000,
                connection: c.clone(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_snapshot_and_derives_rates() {
        let json = r#"{"hub":{"version":"0.1.0","pid":7,"extra":1},
            "services":[{"serviceId":"svc-1","clientId":"c-1","principal":{"kind":"reserved","module_id":"git"},
                         "metadata":{"label":"Git","protocol":"git/1"}}],
            "tick":{"t":2000,"totals":{"connections":1,"services":1},"rates":{"notifications":5.0,"drops":{"shed":1.0}},
                    "connections":[{"clientId":"c-1","principal":{"kind":"direct"},"transport":"unix",
                                    "messagesIn":30,"connectedSince":1000}]}}"#;
        let snapshot: Snapshot = serde_json::from_str(json).unwrap();
        assert_eq!(principal_label(&snapshot.services[0].principal), "git");
        assert_eq!(
            metadata_text(&snapshot.services[0].metadata, "label"),
            "Git"
        );
        let tick = snapshot.tick.unwrap();
        let mut earlier = Tick {
            t: 1000,
            ..Tick::default()
        };
        earlier.connections = vec![Connection {
            client_id: Some("c-1".into()),
            messages_in: 10,
            ..Connection::default()
        }];
        let rows = connection_rows(&tick, Some(&earlier));
        assert_eq!(rows[0].in_rate, Some(20.0));
        assert_eq!(rows[0].age_seconds, 1);
        assert_eq!(connection_rows(&tick, None)[0].in_rate, None);
    }
}
