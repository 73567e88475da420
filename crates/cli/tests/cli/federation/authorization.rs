//! Section 4: each side decides with its own grants.

use serde_json::{json, Value};

use super::{next_non_action, owner, subscribed, wait_added};
use crate::support::fabric::{Fabric, OPEN};
use crate::support::{metric_value, LineClient};

/// Principals `explorer` and `other` with their tokens.
const PRINCIPALS: &str = "[principals.explorer]\ntoken = \"explorer-token-0123\"\n[principals.other]\ntoken = \"other-token-012345\"\n";

fn as_principal(hub: &crate::support::HubProcess, token: &str) -> LineClient {
    let mut client = LineClient::connect(&hub.socket());
    client.initialize(token);
    client
}

#[test]
fn the_owners_hub_refuses_what_its_grants_do_not_allow_whatever_the_callers_hub_allows() {
    let fabric = Fabric::new();
    // A lets B's explorer see its services, but not call them; B's `other`
    // may not even see them there. B itself allows everything.
    let a = fabric.hub(
        "a",
        "[[grants]]\nfrom = \"b/explorer\"\nto = \"*\"\nallow = [\"discover\"]\n",
    );
    let b = fabric.hub(
        "b",
        &format!("{PRINCIPALS}[[grants]]\nfrom = \"*\"\nto = \"a/*\"\nallow = [\"discover\", \"request\", \"notify\"]\n"),
    );
    let (mut owner, service) = owner(&a, json!({}));
    for token in ["explorer-token-0123", "other-token-012345"] {
        let mut watcher = as_principal(&b, token);
        let answer = watcher.request("subscribe", json!({"channel": "ahp-client-services://"}));
        let snapshot = answer["result"]["snapshot"]["state"]["services"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        wait_added(&mut watcher, &snapshot, &service);
    }
    let request = |client: &mut LineClient| {
        client.request(
            "clientService/request",
            json!({"serviceId": service, "method": "m"}),
        )
    };
    let mut explorer = as_principal(&b, "explorer-token-0123");
    let answer = request(&mut explorer);
    assert_eq!(answer["error"]["code"], -32009, "{answer}");
    let mut other = as_principal(&b, "other-token-012345");
    let answer = request(&mut other);
    assert_eq!(answer["error"]["code"], -32008, "{answer}");
    // B's direct user is `b/direct` on A: no grant either.
    let mut direct = b.line_client();
    let answer = request(&mut direct);
    assert_eq!(answer["error"]["code"], -32008, "{answer}");

    // Notifications A does not allow are dropped there, silently, counted.
    explorer.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
                          "params": {"serviceId": service, "method": "n"}}));
    a.wait_for_metric(
        "switchboard_notifications_dropped_total{reason=\"not_permitted\"}",
        1,
    );
    let pong = explorer.request("ping", Value::Null);
    assert_eq!(pong["result"], Value::Null, "{pong}");
    // Nothing reached the owner.
    owner.send(&json!({"jsonrpc": "2.0", "id": "probe", "method": "ping"}));
    assert_eq!(next_non_action(&mut owner)["id"], "probe");
    let metrics = a.metrics();
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_requests_failed_total{reason=\"permission_denied\"}"
        ),
        1
    );
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_requests_failed_total{reason=\"not_found\"}"
        ),
        2
    );
}

#[test]
fn discovery_is_decided_by_the_observers_grants() {
    let fabric = Fabric::new();
    let a = fabric.hub(
        "a",
        "[[grants]]\nfrom = \"*\"\nto = \"*\"\nallow = [\"discover\", \"request\"]\n",
    );
    let b = fabric.hub(
        "b",
        &format!("{PRINCIPALS}[[grants]]\nfrom = \"explorer\"\nto = \"a/direct\"\nallow = [\"discover\", \"request\"]\n"),
    );
    let (_owner, service) = owner(&a, json!({}));
    // explorer sees it, and may call it.
    let mut explorer = as_principal(&b, "explorer-token-0123");
    let answer = explorer.request("subscribe", json!({"channel": "ahp-client-services://"}));
    let snapshot = answer["result"]["snapshot"]["state"]["services"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let listed = wait_added(&mut explorer, &snapshot, &service);
    assert_eq!(listed["hub"], "a");
    // Its `added` came; `other` on the same hub never sees it, and cannot
    // reach it (-32008 on B, before anything crosses).
    let mut other = as_principal(&b, "other-token-012345");
    let answer = other.request("subscribe", json!({"channel": "ahp-client-services://"}));
    assert_eq!(
        answer["result"]["snapshot"]["state"]["services"],
        json!([]),
        "{answer}"
    );
    let answer = other.request(
        "clientService/request",
        json!({"serviceId": service, "method": "m"}),
    );
    assert_eq!(answer["error"]["code"], -32008, "{answer}");
    // B's direct user sees everything (local `direct` acts on every service).
    let (_direct, snapshot) = subscribed(&b);
    assert!(snapshot.iter().any(|s| s["serviceId"] == service));
    let metrics = a.metrics();
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_federation_lines_received_total{kind=\"request\"}"
        ),
        0
    );
}

/// The owner's hub keeps, for each remote caller, the service it last
/// notified and the decision (`LastRoute`): a reload there re-decides the
/// very next notification from another hub, both ways.
#[test]
fn a_reload_on_the_owners_hub_re_decides_the_next_notification_from_another_hub() {
    let fabric = Fabric::new();
    let grant = "[[grants]]\nfrom = \"b/*\"\nto = \"*\"\nallow = [\"discover\", \"notify\"]\n";
    let a = fabric.hub("a", grant);
    let b = fabric.hub("b", OPEN);
    let (mut owner, service) = owner(&a, json!({}));
    let (mut sender, snapshot) = subscribed(&b);
    wait_added(&mut sender, &snapshot, &service);
    let notify = |sender: &mut LineClient, seq: u64| {
        sender.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
                            "params": {"serviceId": service, "method": "n", "params": seq}}));
    };
    let config = fabric.path("a.toml");
    let with_grant = std::fs::read_to_string(&config).expect("a's config");
    assert!(with_grant.contains(grant));
    let reload = |text: &str| {
        std::fs::write(&config, text).expect("rewrite a's config");
        let answer = a.line_client().request("hub/reload", Value::Null);
        assert!(answer["result"].is_object(), "{answer}");
    };

    notify(&mut sender, 1);
    assert_eq!(next_non_action(&mut owner)["params"]["params"], 1);

    reload(&with_grant.replace(grant, ""));
    notify(&mut sender, 2);
    a.wait_for_metric(
        "switchboard_notifications_dropped_total{reason=\"not_permitted\"}",
        1,
    );

    reload(&with_grant);
    notify(&mut sender, 3);
    assert_eq!(next_non_action(&mut owner)["params"]["params"], 3);
}
