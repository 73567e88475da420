//! Section 3: requests and notifications across hubs.

use serde_json::{json, Value};

use super::{next_non_action, owner, subscribed, wait_added};
use crate::support::fabric::{Fabric, OPEN};
use crate::support::{metric_value, HubProcess, LineClient};

/// A caller on `hub` that sees `service_id`.
fn caller(hub: &HubProcess, service_id: &str) -> LineClient {
    let (mut client, snapshot) = subscribed(hub);
    wait_added(&mut client, &snapshot, service_id);
    client
}

/// Hubs `a` and `b` on one NATS server, a service owned on `a`, and a
/// client on `b` that sees it. Fields drop in this order: the fabric (the
/// NATS server, the hubs' directories) last.
struct OwnerOnA {
    owner: LineClient,
    on_b: LineClient,
    service: String,
    a: HubProcess,
    b: HubProcess,
    fabric: Fabric,
}

/// [`OwnerOnA`], the service registered with `metadata`. A test that takes
/// the parts out binds the fabric first, so that it is dropped last.
fn owner_on_a(metadata: Value) -> OwnerOnA {
    let fabric = Fabric::new();
    let a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    let (owner, service) = owner(&a, metadata);
    let on_b = caller(&b, &service);
    OwnerOnA {
        owner,
        on_b,
        service,
        a,
        b,
        fabric,
    }
}

/// Sends a request `done` after the notifications `sender` sent to
/// `service`, and reads the owner's notifications until that request comes
/// (the same path, so every notification not shed is before it); answers
/// it with the count. Returns the request's id and each notification's
/// `seq`, in the order they came.
fn notifications_then_done(
    sender: &mut LineClient,
    owner: &mut LineClient,
    service: &str,
) -> (Value, Vec<u64>) {
    let id = sender.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "done"}),
    );
    let mut seen = Vec::new();
    loop {
        let message = next_non_action(owner);
        if message["method"] == "clientService/handleRequest" {
            owner.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": seen.len()}));
            return (id, seen);
        }
        assert_eq!(message["method"], "clientService/notification", "{message}");
        assert!(message.get("id").is_none());
        assert_eq!(message["params"]["senderPrincipal"]["hub"], "b");
        seen.push(message["params"]["params"]["seq"].as_u64().unwrap());
    }
}

/// The next `clientService/handleRequest` the owner gets.
fn handled(owner: &mut LineClient) -> Value {
    let message = next_non_action(owner);
    assert_eq!(
        message["method"], "clientService/handleRequest",
        "{message}"
    );
    message
}

#[test]
fn a_request_to_another_hub_is_answered_byte_for_byte_under_the_callers_id() {
    let OwnerOnA {
        fabric: _fabric,
        a,
        b,
        mut owner,
        service,
        on_b: mut caller,
    } = owner_on_a(json!({"label": "splice"}));

    // Params and result with spacing and numbers a re-encoder would change.
    let params = r#"{ "n" : [1, 2.50, 1e3, -0.0], "s":"\u00e9\n" }"#;
    caller.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":"x-1","method":"clientService/request","params":{{"serviceId":"{service}","method":"m/one","params":{params},"timeoutMs":10000}}}}"#
    ));
    let raw = loop {
        let line = owner.recv_raw();
        if line.contains("clientService/handleRequest") {
            break line;
        }
    };
    assert!(raw.contains(&format!(r#""params":{params}}}}}"#)), "{raw}");
    let forwarded: Value = serde_json::from_str(&raw).unwrap();
    let params_of = &forwarded["params"];
    assert_eq!(params_of["serviceId"], service);
    assert_eq!(params_of["method"], "m/one");
    assert!(params_of["senderClientId"]
        .as_str()
        .unwrap()
        .starts_with("c-b-"));
    assert_eq!(
        params_of["senderPrincipal"],
        json!({"kind": "direct", "hub": "b"})
    );
    assert!(params_of.get("timeoutMs").is_none(), "{raw}");
    let y = &forwarded["id"];
    assert!(y.is_u64(), "{raw}");

    let result = r#"{ "sum" : 1003.50 ,"list":[ ] }"#;
    owner.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":{y},"result":{result}}}"#
    ));
    let answer = loop {
        let line = caller.recv_raw();
        if !line.contains(r#""method":"action""#) {
            break line;
        }
    };
    assert_eq!(
        answer,
        format!(r#"{{"jsonrpc":"2.0","id":"x-1","result":{result}}}"#)
    );

    // An application error keeps its code, message and data.
    let id = caller.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "fail"}),
    );
    let request = handled(&mut owner);
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"],
                       "error": {"code": 4242, "message": "no such thing", "data": {"why": [1, 2]}}}));
    let answer = next_non_action(&mut caller);
    assert_eq!(answer["id"], id);
    assert_eq!(
        answer["error"],
        json!({"code": 4242, "message": "no such thing", "data": {"why": [1, 2]}})
    );

    // Each hub counts what crossed.
    let metrics = b.metrics();
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_federation_lines_sent_total{kind=\"request\"}"
        ),
        2
    );
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_federation_lines_received_total{kind=\"response\"}"
        ),
        2
    );
    let metrics = a.metrics();
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_federation_lines_received_total{kind=\"request\"}"
        ),
        2
    );
    assert_eq!(
        metric_value(&metrics, "switchboard_requests_completed_total"),
        2
    );
}

#[test]
fn timeouts_cancels_and_a_leaving_owner_answer_once_and_tell_the_owner() {
    let OwnerOnA {
        fabric: _fabric,
        a,
        b,
        mut owner,
        service,
        on_b: mut caller,
    } = owner_on_a(json!({}));

    // Timeout: -32051 on B; the owner on A gets $/cancelRequest for its id.
    let id = caller.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "slow", "timeoutMs": 300}),
    );
    let request = handled(&mut owner);
    let answer = next_non_action(&mut caller);
    assert_eq!(answer["id"], id);
    assert_eq!(answer["error"]["code"], -32051, "{answer}");
    assert_eq!(answer["error"]["data"]["timeoutMs"], 300);
    let cancel = next_non_action(&mut owner);
    assert_eq!(cancel["method"], "$/cancelRequest", "{cancel}");
    assert_eq!(cancel["params"]["id"], request["id"]);
    // The owner's late answer goes nowhere.
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "late"}));

    // Cancel: -32800 at once, $/cancelRequest to the owner.
    let id = caller.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "slow", "timeoutMs": 60000}),
    );
    let request = handled(&mut owner);
    caller.send(&json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": id}}));
    let answer = next_non_action(&mut caller);
    assert_eq!(answer["id"], id);
    assert_eq!(answer["error"]["code"], -32800, "{answer}");
    let cancel = next_non_action(&mut owner);
    assert_eq!(cancel["method"], "$/cancelRequest", "{cancel}");
    assert_eq!(cancel["params"]["id"], request["id"]);
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "late"}));

    // A ping proves nothing else came to the caller (no second answer).
    let pong = caller.request("ping", json!(null));
    assert_eq!(pong["result"], Value::Null, "{pong}");

    // The owner leaves with a request pending: -32052 disconnected.
    let id = caller.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "slow", "timeoutMs": 60000}),
    );
    handled(&mut owner);
    drop(owner);
    let answer = next_non_action(&mut caller);
    assert_eq!(answer["id"], id);
    assert_eq!(answer["error"]["code"], -32052, "{answer}");
    assert_eq!(answer["error"]["data"]["reason"], "disconnected");
    let pong = caller.request("ping", json!(null));
    assert_eq!(pong["result"], Value::Null, "{pong}");

    // Both hubs' bookkeeping is back to nothing.
    for hub in [&a, &b] {
        hub.wait_for_metric("switchboard_requests_in_flight", 0);
    }
    let metrics = b.metrics();
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_requests_failed_total{reason=\"timeout\"}"
        ),
        1
    );
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_requests_failed_total{reason=\"cancelled\"}"
        ),
        1
    );
}

#[test]
fn callers_on_two_hubs_may_use_the_same_request_id() {
    let fabric = Fabric::new();
    let a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    let c = fabric.hub("c", OPEN);
    let (mut owner, service) = owner(&a, json!({}));
    let mut on_b = caller(&b, &service);
    let mut on_c = caller(&c, &service);
    let request = |hub: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "clientService/request",
               "params": {"serviceId": service, "method": "who", "params": {"from": hub}}})
    };
    on_b.send(&request("b"));
    on_c.send(&request("c"));
    let first = handled(&mut owner);
    let second = handled(&mut owner);
    assert_ne!(first["id"], second["id"]);
    // Answer in the other order, echoing who asked.
    for request in [&second, &first] {
        owner.send(&json!({"jsonrpc": "2.0", "id": request["id"],
                           "result": {"to": request["params"]["params"]["from"],
                                      "hub": request["params"]["senderPrincipal"]["hub"]}}));
    }
    for (client, hub) in [(&mut on_b, "b"), (&mut on_c, "c")] {
        let answer = next_non_action(client);
        assert_eq!(answer["id"], 1);
        assert_eq!(answer["result"], json!({"to": hub, "hub": hub}), "{answer}");
    }
}

#[test]
fn notifications_to_another_hub_arrive_in_order_at_most_once_and_nothing_comes_back() {
    const COUNT: u64 = 2000;
    let mut hubs = owner_on_a(json!({}));
    let OwnerOnA {
        owner,
        on_b: sender,
        service,
        b,
        ..
    } = &mut hubs;
    for seq in 0..COUNT {
        sender.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
                            "params": {"serviceId": service, "method": "tick", "params": {"seq": seq}}}));
    }
    // Then one request, through the same path, to know when all arrived.
    let (id, seen) = notifications_then_done(sender, owner, service);
    // At most once and in order; here nothing was shed, so all of them.
    assert_eq!(seen, (0..COUNT).collect::<Vec<_>>());
    // The sender got nothing but the answer to its request.
    let answer = next_non_action(sender);
    assert_eq!(answer["id"], id);
    assert_eq!(answer["result"], COUNT);
    let metrics = b.metrics();
    let publishes = metric_value(&metrics, "switchboard_federation_publishes_total");
    assert!(publishes >= 1, "{publishes}");
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_federation_lines_sent_total{kind=\"notification\"}"
        ),
        COUNT
    );
}

/// The sending hub groups lines into NATS messages of about 60 KiB; a line
/// larger than that (and within NATS's `max_payload`) goes alone. Mixed
/// sizes in one burst arrive whole and in order.
#[test]
fn lines_larger_than_a_message_of_lines_go_alone_whole_and_in_order() {
    const COUNT: u64 = 40;
    let mut hubs = owner_on_a(json!({}));
    let OwnerOnA {
        owner,
        on_b: sender,
        service,
        b,
        ..
    } = &mut hubs;
    // Every third notification is 100 KiB: more than a message of lines,
    // less than NATS's default max_payload (1 MiB).
    let size = |seq: u64| {
        if seq.is_multiple_of(3) {
            100 * 1024
        } else {
            3000
        }
    };
    let pad = |seq: u64| "p".repeat(size(seq));
    for seq in 0..COUNT {
        sender.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
                            "params": {"serviceId": service, "method": "tick",
                                       "params": {"seq": seq, "pad": pad(seq)}}}));
    }
    for seq in 0..COUNT {
        let message = next_non_action(owner);
        assert_eq!(message["method"], "clientService/notification");
        assert_eq!(message["params"]["params"]["seq"], seq);
        assert_eq!(message["params"]["params"]["pad"], pad(seq));
    }
    // 14 lines of 100 KiB each went alone, the rest in messages around them.
    let publishes = metric_value(&b.metrics(), "switchboard_federation_publishes_total");
    assert!(publishes >= 14, "{publishes} publishes");
}

/// Sends requests `ids` from `client` to `service`, each waiting for an answer.
fn send_hanging(client: &mut LineClient, service: &str, ids: std::ops::Range<u64>) {
    for id in ids {
        client.send(&json!({"jsonrpc": "2.0", "id": id, "method": "clientService/request",
                            "params": {"serviceId": service, "method": "hang", "timeoutMs": 60000}}));
    }
}

/// Answers the next `count` requests the owner gets with their own id.
fn answer_all(owner: &mut LineClient, count: usize) {
    let requests: Vec<Value> = (0..count).map(|_| handled(owner)).collect();
    for request in requests {
        owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "done"}));
    }
}

/// Sends three requests from `caller`: the third is refused at once by
/// `limit`; then the owner answers the first two.
fn three_with_the_last_refused(
    caller: &mut LineClient,
    owner: &mut LineClient,
    service: &str,
    limit: &str,
) {
    send_hanging(caller, service, 0..3);
    let refused = next_non_action(caller);
    assert_eq!(refused["id"], 2, "{refused}");
    assert_eq!(refused["error"]["code"], -32050, "{refused}");
    assert_eq!(refused["error"]["data"]["limit"], limit, "{refused}");
    answer_all(owner, 2);
}

#[test]
fn in_flight_bounds_hold_on_the_callers_hub_and_on_the_owners() {
    let fabric = Fabric::new();
    // A bounds each caller, and a link from another hub is one, to two
    // requests; B bounds each service, a remote one too, to two.
    let a = fabric.hub("a", &format!("[limits]\nmaxInFlightPerClient = 2\n{OPEN}"));
    let b = fabric.hub("b", &format!("[limits]\nmaxInFlightPerService = 2\n{OPEN}"));
    let c = fabric.hub("c", OPEN);
    let (mut owner, service) = owner(&a, json!({}));

    // On B: the third request fails at once, on B, and never crosses.
    let mut on_b = caller(&b, &service);
    three_with_the_last_refused(&mut on_b, &mut owner, &service, "maxInFlightPerService");
    let mut answered: Vec<Value> = (0..2).map(|_| next_non_action(&mut on_b)).collect();
    answered.sort_by_key(|answer| answer["id"].as_u64());
    for (id, answer) in answered.iter().enumerate() {
        assert_eq!(answer["id"], id as u64, "{answer}");
        assert_eq!(answer["result"], "done", "{answer}");
    }
    assert_eq!(
        metric_value(
            &a.metrics(),
            "switchboard_federation_lines_received_total{kind=\"request\"}"
        ),
        2
    );

    // From C: A bounds C's link like any caller; its -32050 crosses back.
    let mut on_c = caller(&c, &service);
    three_with_the_last_refused(&mut on_c, &mut owner, &service, "maxInFlightPerClient");
    for _ in 0..2 {
        assert_eq!(next_non_action(&mut on_c)["result"], "done");
    }
    for hub in [&a, &b, &c] {
        hub.wait_for_metric("switchboard_requests_in_flight", 0);
    }
}

#[test]
fn lines_larger_than_nats_carries_fail_at_once_or_are_dropped_and_counted() {
    const BIG: usize = 10_000;
    let mut fabric = Fabric::new();
    // NATS carries at most 8 KiB per message; the hubs' own bound is far above.
    fabric.nats = switchboard_testkit::NatsServer::start_with_config("max_payload: 8192\n");
    let a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    let (mut owner, service) = owner(&a, json!({}));
    let mut on_b = caller(&b, &service);
    let big = "x".repeat(BIG);

    // A request too large for NATS fails on B at once: -32050.
    let id = on_b.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "big", "params": big}),
    );
    let answer = next_non_action(&mut on_b);
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["error"]["code"], -32050, "{answer}");
    assert_eq!(
        answer["error"]["data"]["limit"], "maxMessageBytes",
        "{answer}"
    );

    // A notification too large is dropped; the next one still arrives.
    for params in [json!(big), json!("small")] {
        on_b.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
                          "params": {"serviceId": service, "method": "n", "params": params}}));
    }
    let notification = next_non_action(&mut owner);
    assert_eq!(
        notification["method"], "clientService/notification",
        "{notification}"
    );
    assert_eq!(notification["params"]["params"], "small");

    // An answer too large is replaced by -32050 on A's side, once.
    let id = on_b.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "small"}),
    );
    let request = handled(&mut owner);
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": big}));
    let answer = next_non_action(&mut on_b);
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["error"]["code"], -32050, "{answer}");
    let pong = on_b.request("ping", Value::Null);
    assert_eq!(pong["result"], Value::Null, "{pong}");

    let too_large = "switchboard_federation_send_failures_total{reason=\"too_large\"}";
    assert_eq!(metric_value(&b.metrics(), too_large), 2);
    assert_eq!(metric_value(&a.metrics(), too_large), 1);
    for hub in [&a, &b] {
        hub.wait_for_metric("switchboard_requests_in_flight", 0);
    }
}

#[test]
fn a_hub_that_stops_taking_lines_holds_back_the_sending_hub_within_its_window() {
    // 8 MB of notifications, twice the window (4 MiB), for a hub that takes
    // nothing meanwhile: without flow control the sending hub would publish
    // them all into NATS, which holds at most 16 MB for a connection before
    // it drops a slow consumer's messages.
    const COUNT: u64 = 8_000;
    const WINDOW: u64 = 4 << 20;
    const MAX_PAYLOAD: u64 = 1 << 20;
    let mut fabric = Fabric::new();
    fabric.nats = switchboard_testkit::NatsServer::start_with_config("max_pending: 16MB\n");
    // A stays listed while it is stopped.
    let ttl = std::time::Duration::from_secs(60);
    let a = fabric.hub_builder_with_ttl("a", OPEN, ttl).start();
    let b = fabric.hub_builder_with_ttl("b", OPEN, ttl).start();
    let (mut owner, service) = owner(&a, json!({}));
    let mut sender = caller(&b, &service);
    let pad = "x".repeat(1000);
    a.signal(libc::SIGSTOP);
    for seq in 0..COUNT {
        sender.send(&json!({"jsonrpc": "2.0", "method": "clientService/notify",
                            "params": {"serviceId": service, "method": "tick",
                                       "params": {"seq": seq, "pad": pad}}}));
    }
    // B's link writer waits for A's credit with the window full...
    b.wait_for_metric_at_least("switchboard_federation_window_waits_total", 1);
    let sent = metric_value(&b.metrics(), "switchboard_federation_bytes_sent_total");
    a.signal(libc::SIGCONT);
    // ...having published at most the window and one more message.
    assert!(
        sent <= WINDOW + MAX_PAYLOAD,
        "{sent} bytes in flight to a stopped hub"
    );
    assert!(sent >= WINDOW, "the window was not full: {sent}");
    // Then A's credits let the rest through: in order, and every one that is
    // not there was shed by a hub, which counted it (none, in practice).
    let (id, seen) = notifications_then_done(&mut sender, &mut owner, &service);
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "out of order");
    let answer = next_non_action(&mut sender);
    assert_eq!(answer["id"], id, "{answer}");
    let shed = |hub: &HubProcess| {
        hub.metrics()
            .lines()
            .filter(|l| l.starts_with("switchboard_notifications_dropped_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    assert_eq!(
        seen.len() as u64 + shed(&a) + shed(&b),
        COUNT,
        "lost without a count"
    );
    assert_eq!(
        metric_value(&b.metrics(), "switchboard_federation_window_timeouts_total"),
        0
    );
}
