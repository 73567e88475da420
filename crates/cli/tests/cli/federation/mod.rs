//! Hubs federated over a real `nats-server` (`docs/reference/federation.md`):
//! three hubs on this machine, each a `switchboard serve` process with its
//! own directory, clients on each. One module per section of the reference.

mod authorization;
mod bad_input;
mod catalog;
mod faults;
mod permissions;
mod routing;
mod secrets;

use serde_json::{json, Value};
use switchboard_testkit::{HubProcess, LineClient};

/// A line client of `hub` with its `direct` token, subscribed to the
/// catalog; returns it and the services of its snapshot.
pub fn subscribed(hub: &HubProcess) -> (LineClient, Vec<Value>) {
    let mut client = hub.line_client();
    let answer = client.request("subscribe", json!({"channel": "ahp-client-services://"}));
    let services = answer["result"]["snapshot"]["state"]["services"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    (client, services)
}

/// Reads `client`'s catalog actions until `service_id` is added (or is in
/// `snapshot` already); returns the service object.
pub fn wait_added(client: &mut LineClient, snapshot: &[Value], service_id: &str) -> Value {
    if let Some(service) = snapshot.iter().find(|s| s["serviceId"] == service_id) {
        return service.clone();
    }
    loop {
        let message = client.recv();
        let action = &message["params"]["action"];
        if message["method"] == "action"
            && action["type"] == "clientServices/added"
            && action["service"]["serviceId"] == service_id
        {
            return action["service"].clone();
        }
    }
}

/// A line client on `hub` that owns one service; returns it and the id.
pub fn owner(hub: &HubProcess, metadata: Value) -> (LineClient, String) {
    let mut client = hub.line_client();
    let answer = client.request("client/registerService", json!({"metadata": metadata}));
    let id = answer["result"]["serviceId"]
        .as_str()
        .unwrap_or_else(|| panic!("register: {answer}"))
        .to_owned();
    (client, id)
}

/// The next message of `client` that is not a catalog action.
pub fn next_non_action(client: &mut LineClient) -> Value {
    loop {
        let message = client.recv();
        if message["method"] != "action" {
            return message;
        }
    }
}
