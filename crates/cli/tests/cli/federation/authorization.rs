//! Section 4: each side decides with its own grants.

use serde_json::{json, Value};

use super::{next_non_action, owner, subscribed, wait_added};
use crate::support::fabric::{Fabric, OPEN};
use crate::support::{metric_value, run, LineClient};

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
    // A grants B's explorer `discover` alone, which decides nothing there
    // (discovery is the observer's hub's to decide), and B's `other` and
    // `direct` nothing. B itself allows everything: each of them sees the
    // service, and each is refused by A with -32009, never -32008.
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
    let refused = |caller: &str| {
        json!({
            "code": -32009,
            "message": format!(
                "hub a refused: it has no grant from \"{caller}\" to \"direct\" with \"request\""
            ),
            "data": {"hub": "a", "action": "request"},
        })
    };
    let mut explorer = as_principal(&b, "explorer-token-0123");
    let answer = request(&mut explorer);
    assert_eq!(answer["error"], refused("b/explorer"), "{answer}");
    let mut other = as_principal(&b, "other-token-012345");
    let answer = request(&mut other);
    assert_eq!(answer["error"], refused("b/other"), "{answer}");
    // B's direct user is `b/direct` on A: no grant either.
    let mut direct = b.line_client();
    let answer = request(&mut direct);
    assert_eq!(answer["error"], refused("b/direct"), "{answer}");

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
        3
    );
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_requests_failed_total{reason=\"not_found\"}"
        ),
        0
    );
}

/// The case: a service `direct` registered by hand on A, which B's
/// grants let B's `direct` see and call. A has no grant: B's caller sees
/// the service, and A refuses the call with -32009 naming the grant it
/// lacks (not -32008, which would contradict B's catalog), and logs the
/// refusal with both principals and no token. A gains the grant `from =
/// "b/direct"`, `to = "direct"` (`request` alone: discovery was B's to
/// decide), `switchboard reload` on A, and the same call goes through.
#[test]
fn a_direct_service_another_hub_refuses_is_minus_32009_naming_the_grant_until_it_is_granted() {
    let fabric = Fabric::new();
    let a = fabric
        .hub_builder("a", "")
        .env("RUST_LOG", "info,switchboard_hub=debug")
        .start();
    let b = fabric.hub(
        "b",
        "[[grants]]\nfrom = \"direct\"\nto = \"a/direct\"\nallow = [\"discover\", \"request\"]\n",
    );
    let (mut owner, service) = owner(&a, json!({"name": "by-hand"}));
    let (mut caller, snapshot) = subscribed(&b);
    let listed = wait_added(&mut caller, &snapshot, &service);
    assert_eq!(listed["hub"], "a");
    assert_eq!(listed["principal"], json!({"kind": "direct", "hub": "a"}));
    let call = json!({"serviceId": service, "method": "m", "params": {"secret": "payload-7f3a"}});

    let answer = caller.request("clientService/request", call.clone());
    assert_eq!(
        answer["error"],
        json!({
            "code": -32009,
            "message": "hub a refused: it has no grant from \"b/direct\" to \"direct\" with \"request\"",
            "data": {"hub": "a", "action": "request"},
        }),
        "{answer}"
    );
    // A says why at debug: both principals and the action; no payload, no token.
    a.wait_for_log("refused a caller of another hub");
    let log = a.log();
    let line = log
        .lines()
        .find(|line| line.contains("refused a caller of another hub"))
        .unwrap_or_else(|| panic!("no refusal in A's log:\n{log}"));
    for field in [
        "caller=b/direct",
        "owner=direct",
        "action=request",
        &format!("service={service}"),
    ] {
        assert!(line.contains(field), "{field} is not in {line}");
    }
    // A notification A refuses is dropped without a word to its sender, and
    // logged the same way.
    caller.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
                        "params": {"serviceId": service, "method": "n", "params": "payload-7f3a"}}));
    a.wait_for_log("action=notify");
    let log = a.log();
    for secret in [a.token(), b.token(), "payload-7f3a".to_owned()] {
        assert!(!log.contains(&secret), "A's log shows {secret}:\n{log}");
    }

    let config = fabric.path("a.toml");
    let mut text = std::fs::read_to_string(&config).expect("a's config");
    text.push_str("[[grants]]\nfrom = \"b/direct\"\nto = \"direct\"\nallow = [\"request\"]\n");
    std::fs::write(&config, text).expect("rewrite a's config");
    run(&["reload", "--dir", a.dir_arg()]).ok();

    let id = caller.send_request("clientService/request", call);
    let request = next_non_action(&mut owner);
    assert_eq!(
        request["method"], "clientService/handleRequest",
        "{request}"
    );
    assert_eq!(
        request["params"]["senderPrincipal"],
        json!({"kind": "direct", "hub": "b"})
    );
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "granted"}));
    let answer = next_non_action(&mut caller);
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["result"], "granted", "{answer}");
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

/// Callback services (hub-protocol section 13) across hubs: `consumer` on A
/// may call `module` on B (A grants `consumer` → `b/module`, B grants
/// `a/consumer` → `module`); no grant names `consumer`'s services anywhere.
/// Each hub applies the callback rule with its own grants, so `module` may
/// request and notify `consumer`'s callback service, and B lists it to
/// `module` only with `{"callbacks": true}`. `other`, whom B lets call
/// everything of A but whom `consumer` may not request on A, is refused by
/// A (-32009 naming A); `stranger` by B (-32008, nothing crosses).
#[test]
fn a_callback_service_is_decided_by_the_owners_request_grants_on_each_hub() {
    let fabric = Fabric::new();
    let a = fabric.hub(
        "a",
        "[principals.consumer]\ntoken = \"consumer-token-0123\"\n\
         [[grants]]\nfrom = \"consumer\"\nto = \"b/module\"\nallow = [\"discover\", \"request\"]\n",
    );
    let b = fabric.hub(
        "b",
        "[principals.module]\ntoken = \"module-token-01234\"\n\
         [principals.other]\ntoken = \"other-token-012345\"\n\
         [principals.stranger]\ntoken = \"stranger-token-0123\"\n\
         [[grants]]\nfrom = \"a/consumer\"\nto = \"module\"\nallow = [\"request\"]\n\
         [[grants]]\nfrom = \"other\"\nto = \"a/*\"\nallow = [\"discover\", \"request\"]\n",
    );
    let mut consumer = as_principal(&a, "consumer-token-0123");
    let answer = consumer.request(
        "client/registerService",
        json!({"metadata": {"protocol": "mcp-client", "version": 1, "callback": true}}),
    );
    let service = answer["result"]["serviceId"]
        .as_str()
        .unwrap_or_else(|| panic!("register: {answer}"))
        .to_owned();

    let mut module = as_principal(&b, "module-token-01234");
    let answer = module.request(
        "subscribe",
        json!({"channel": "ahp-client-services://", "callbacks": true}),
    );
    let snapshot = answer["result"]["snapshot"]["state"]["services"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let listed = wait_added(&mut module, &snapshot, &service);
    assert_eq!(listed["hub"], "a");
    assert_eq!(listed["metadata"]["callback"], true);
    // Listed on B now; a subscriber that does not ask does not see it.
    let mut plain = as_principal(&b, "module-token-01234");
    let answer = plain.request("subscribe", json!({"channel": "ahp-client-services://"}));
    assert_eq!(
        answer["result"]["snapshot"]["state"]["services"],
        json!([]),
        "{answer}"
    );

    let id = module.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "sampling/createMessage", "params": {"n": 1}}),
    );
    let request = next_non_action(&mut consumer);
    assert_eq!(
        request["method"], "clientService/handleRequest",
        "{request}"
    );
    assert_eq!(
        request["params"]["senderPrincipal"],
        json!({"kind": "reserved", "module_id": "module", "hub": "b"})
    );
    consumer.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "sampled"}));
    let answer = next_non_action(&mut module);
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["result"], "sampled", "{answer}");
    module.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
                        "params": {"serviceId": service, "method": "notifications/progress", "params": {"progress": 1}}}));
    let note = next_non_action(&mut consumer);
    assert_eq!(note["method"], "clientService/notification", "{note}");
    assert_eq!(note["params"]["params"]["progress"], 1);

    // B lets `other` call it (an ordinary grant); A does not.
    let mut other = as_principal(&b, "other-token-012345");
    let answer = other.request(
        "clientService/request",
        json!({"serviceId": service, "method": "m"}),
    );
    assert_eq!(
        answer["error"],
        json!({
            "code": -32009,
            "message": "hub a refused: it has no grant from \"b/other\" to \"consumer\" with \"request\"",
            "data": {"hub": "a", "action": "request"},
        }),
        "{answer}"
    );
    // A callback service of A's `direct` is no exception: `direct` may
    // request everything on A, but that is no grant to B's principals.
    let (_user, users) = owner(&a, json!({"callback": true}));
    let mut watcher = as_principal(&b, "other-token-012345");
    let answer = watcher.request("subscribe", json!({"channel": "ahp-client-services://"}));
    let snapshot = answer["result"]["snapshot"]["state"]["services"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    wait_added(&mut watcher, &snapshot, &users);
    let answer = other.request(
        "clientService/request",
        json!({"serviceId": users, "method": "m"}),
    );
    assert_eq!(
        answer["error"]["message"],
        "hub a refused: it has no grant from \"b/other\" to \"direct\" with \"request\"",
        "{answer}"
    );
    // B refuses `stranger` itself.
    let mut stranger = as_principal(&b, "stranger-token-0123");
    let answer = stranger.request(
        "clientService/request",
        json!({"serviceId": service, "method": "m"}),
    );
    assert_eq!(answer["error"]["code"], -32008, "{answer}");
}
