//! The names the hubs of a fabric agree on: the KV bucket and its keys,
//! the subjects, the headers, and the values stored in the bucket.
//! `docs/federation.md` describes them for operators (and the NATS
//! permissions built on them).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use switchboard_protocol::Principal;

/// The JetStream KV bucket of the shared catalog.
pub const BUCKET: &str = "switchboard-catalog";

/// Hub-to-hub lines: `switchboard.hub.<to>.<from>`. The sender is taken
/// from the subject, which NATS permissions tie to the sender's user.
pub fn lines_subject(to: &str, from: &str) -> String {
    format!("switchboard.hub.{to}.{from}")
}

/// What a hub subscribes to for the lines of every other hub.
pub fn inbound_subject(me: &str) -> String {
    format!("switchboard.hub.{me}.*")
}

/// A request here, answered with the instance of the hub that holds the
/// name: how a starting hub tells a live claim from a stale one.
pub fn probe_subject(name: &str) -> String {
    format!("switchboard.probe.{name}")
}

/// The instance of the hub that sent a message (every hub-to-hub message).
pub const FROM_INSTANCE: &str = "Switchboard-From";
/// The instance of the hub a message is for: a message for an earlier
/// instance of this hub (answers to ids it minted) is dropped.
pub const TO_INSTANCE: &str = "Switchboard-To";
/// On a message of lines: how many bytes of lines the sending hub has
/// published to the receiving one so far, this message's included.
pub const SENT: &str = "Switchboard-Sent";
/// On a credit (a message with no lines, receiver to sender): the highest
/// `Switchboard-Sent` the receiving hub has handed to its hub, in the
/// sender's numbering. Cumulative, so a lost credit is healed by the next.
pub const TAKEN: &str = "Switchboard-Taken";

/// `hub.<name>`: a hub's claim on its name, re-put as its heartbeat.
pub fn claim_key(name: &str) -> String {
    format!("hub.{name}")
}

/// `svc.<hub>.<serviceId>`: one service of one hub.
pub fn service_key(hub: &str, service_id: &str) -> String {
    format!("svc.{hub}.{service_id}")
}

/// What a key of the bucket names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'a> {
    Claim { hub: &'a str },
    Service { hub: &'a str, service_id: &'a str },
}

impl<'a> Key<'a> {
    pub fn parse(key: &'a str) -> Option<Key<'a>> {
        if let Some(hub) = key.strip_prefix("hub.") {
            return is_hub_name(hub).then_some(Key::Claim { hub });
        }
        let (hub, service_id) = key.strip_prefix("svc.")?.split_once('.')?;
        (is_hub_name(hub) && !service_id.is_empty()).then_some(Key::Service { hub, service_id })
    }
}

pub use switchboard_hub::config::is_hub_name;

/// The value of a claim key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Random per process: tells a restarted hub from the one before.
    pub instance: String,
    /// The switchboard version, for operators.
    #[serde(default)]
    pub version: String,
}

/// The value of a service key: the service as its own hub lists it.
#[derive(Debug, Serialize, Deserialize)]
pub struct ServiceEntry<'a> {
    pub instance: &'a str,
    #[serde(borrow)]
    pub service: ServiceObject<'a>,
}

/// `{serviceId, clientId, principal, metadata}` (no `hub`: its own view).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceObject<'a> {
    pub service_id: &'a str,
    pub client_id: &'a str,
    pub principal: Principal,
    #[serde(borrow)]
    pub metadata: &'a RawValue,
}

/// 128 random bits, hex: this process's instance.
pub fn new_instance() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random generator failed");
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_hubs_and_services() {
        assert_eq!(Key::parse("hub.laptop"), Some(Key::Claim { hub: "laptop" }));
        assert_eq!(
            Key::parse("svc.laptop.svc-laptop-00ff"),
            Some(Key::Service {
                hub: "laptop",
                service_id: "svc-laptop-00ff"
            })
        );
        for bad in [
            "hub.",
            "hub.Laptop",
            "svc.laptop",
            "svc.laptop.",
            "other.x",
            "svc..x",
        ] {
            assert_eq!(Key::parse(bad), None, "{bad}");
        }
        assert_eq!(claim_key("a"), "hub.a");
        assert_eq!(service_key("a", "svc-a-1"), "svc.a.svc-a-1");
        assert_eq!(lines_subject("a", "b"), "switchboard.hub.a.b");
    }
}
