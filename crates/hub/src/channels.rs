//! The channels a client may subscribe to, and the snapshots the hub answers
//! `initialize`, `subscribe` and `reconnect` with.
//!
//! - `ahp-client-services://`, the catalog: its snapshot is built by the
//!   registry under the catalog lock (`Registry::subscribe`), which orders it
//!   before every later action.
//! - `ahp-root://`, AHP's root channel: a valid AHP root state with no agents
//!   (this hub hosts none) and no actions ever, so its snapshot needs no lock;
//!   it takes the `fromSeq` of the catalog snapshot it is sent with, or the
//!   current `serverSeq`.

use switchboard_protocol::hub::{CATALOG_CHANNEL, ROOT_CHANNEL, ROOT_STATE};

use crate::conn::Conn;
use crate::registry::Registry;
use std::sync::Arc;

/// A channel the hub serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Catalog,
    Root,
}

impl Channel {
    pub fn parse(uri: &str) -> Option<Channel> {
        match uri {
            CATALOG_CHANNEL => Some(Channel::Catalog),
            ROOT_CHANNEL => Some(Channel::Root),
            _ => None,
        }
    }
}

/// The channels a client listed, each once, in the order it listed them.
#[derive(Debug, Default)]
pub struct Listed(Vec<Channel>);

impl Listed {
    pub fn push(&mut self, channel: Channel) {
        if !self.0.contains(&channel) {
            self.0.push(channel);
        }
    }

    pub fn catalog(&self) -> bool {
        self.0.contains(&Channel::Catalog)
    }
}

/// Subscribes `conn` to the listed channels and calls `respond` with their
/// snapshots (a JSON array's items, comma-separated, in the listed order)
/// and the `serverSeq` they reflect. With the catalog listed, `respond` runs
/// under the catalog lock, like `Registry::subscribe`'s, so the response is
/// queued before any later action.
pub fn subscribe(
    registry: &Registry,
    conn: &Arc<Conn>,
    listed: &Listed,
    respond: impl FnOnce(&str, u64),
) {
    let assemble = |catalog: Option<&str>, seq: u64| {
        let mut items = String::with_capacity(catalog.map_or(0, str::len) + 96);
        for channel in &listed.0 {
            if !items.is_empty() {
                items.push(',');
            }
            match channel {
                Channel::Catalog => items.push_str(catalog.unwrap_or_default()),
                Channel::Root => push_root_snapshot(&mut items, seq),
            }
        }
        respond(&items, seq);
    };
    if listed.catalog() {
        // A URI in `initialSubscriptions` carries no params: no
        // `{"callbacks": true}` (hub protocol section 13).
        registry.subscribe(conn, false, |snapshot, seq| assemble(Some(snapshot), seq));
    } else {
        assemble(None, registry.server_seq());
    }
}

/// `{"resource":"ahp-root://","state":{"agents":[]},"fromSeq":seq}`.
pub fn push_root_snapshot(out: &mut String, seq: u64) {
    out.push_str("{\"resource\":\"");
    out.push_str(ROOT_CHANNEL);
    out.push_str("\",\"state\":");
    out.push_str(ROOT_STATE);
    out.push_str(",\"fromSeq\":");
    out.push_str(itoa::Buffer::new().format(seq));
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_snapshot_is_json_with_an_empty_agent_list() {
        let mut out = String::new();
        push_root_snapshot(&mut out, 7);
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"resource": "ahp-root://", "state": {"agents": []}, "fromSeq": 7})
        );
    }

    #[test]
    fn listed_channels_keep_their_order_once_each() {
        let mut listed = Listed::default();
        for channel in [Channel::Root, Channel::Catalog, Channel::Root] {
            listed.push(channel);
        }
        assert_eq!(listed.0, [Channel::Root, Channel::Catalog]);
        assert!(listed.catalog());
        assert_eq!(Channel::parse("ahp-root://"), Some(Channel::Root));
        assert_eq!(Channel::parse("ahp-root:/"), None);
    }
}
