//! Sections 1-3 under faults: a hub killed, NATS restarted, a name taken.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_testkit::{switchboard_binary, wait::poll};

use super::{next_non_action, owner, subscribed, wait_added};
use crate::support::fabric::{Fabric, OPEN, TTL};
use crate::support::{metric_value, LineClient};

/// A `serviceTtlMs` far longer than a NATS restart takes here: no hub has
/// a reason to forget another (forgetting is
/// `a_hub_cut_off_past_the_ttl_leaves_the_catalogs_and_comes_back_when_it_resumes`).
const LONG_TTL: Duration = Duration::from_secs(60);

/// Sends `count` requests from `client` (ids 0..count) to `service`.
fn send_requests(client: &mut LineClient, service: &str, count: u64) {
    for id in 0..count {
        client.send(&json!({"jsonrpc": "2.0", "id": id, "method": "clientService/request",
                            "params": {"serviceId": service, "method": "hang", "timeoutMs": 60000}}));
    }
}

/// Reads `client`'s messages until `service`'s `removed` (`disconnected`,
/// the only action allowed) and `count` other messages (answers) came;
/// returns the answers.
fn removal_and_answers(client: &mut LineClient, service: &str, count: usize) -> Vec<Value> {
    let (mut removed, mut answers) = (false, Vec::new());
    while !removed || answers.len() < count {
        let message = client.recv();
        if message["method"] == "action" {
            let action = &message["params"]["action"];
            assert_eq!(action["type"], "clientServices/removed", "{message}");
            assert_eq!(action["serviceId"], service);
            assert_eq!(action["reason"], "disconnected");
            removed = true;
        } else {
            answers.push(message);
        }
    }
    answers
}

#[test]
fn a_killed_hubs_services_leave_within_the_ttl_and_its_pending_requests_fail_once() {
    const PER_CALLER: u64 = 20;
    let fabric = Fabric::new();
    let mut a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    let c = fabric.hub("c", OPEN);
    let (mut owner, service) = owner(&a, json!({}));
    let (mut on_b, snapshot) = subscribed(&b);
    wait_added(&mut on_b, &snapshot, &service);
    let (mut on_c, snapshot) = subscribed(&c);
    wait_added(&mut on_c, &snapshot, &service);
    send_requests(&mut on_b, &service, PER_CALLER);
    send_requests(&mut on_c, &service, PER_CALLER);
    for _ in 0..2 * PER_CALLER {
        assert_eq!(
            next_non_action(&mut owner)["method"],
            "clientService/handleRequest"
        );
    }

    a.kill();
    // The reads below wait at most WAIT, ten times the TTL.
    assert!(TTL * 10 <= switchboard_testkit::WAIT);

    for client in [&mut on_b, &mut on_c] {
        // Its service leaves, `disconnected`, and every request fails once.
        let answers = removal_and_answers(client, &service, PER_CALLER as usize);
        let answered: BTreeMap<u64, Value> = answers
            .iter()
            .map(|answer| (answer["id"].as_u64().unwrap(), answer["error"].clone()))
            .collect();
        assert_eq!(
            answered.len() as u64,
            PER_CALLER,
            "answered twice: {answers:?}"
        );
        for error in answered.values() {
            assert_eq!(error["code"], -32052, "{error}");
            assert_eq!(error["data"]["reason"], "disconnected", "{error}");
        }
        let pong = client.request("ping", Value::Null);
        assert_eq!(pong["result"], Value::Null, "{pong}");
    }
    // Only the bucket's max_age (serviceTtlMs) removed them: nothing was
    // sent to A after it died. (Every read above is bounded by WAIT.)

    // The same name comes back: the dead hub's claim is taken over at once.
    a.restart();
    let (_owner, service) = super::owner(&a, json!({"again": true}));
    wait_added(&mut on_b, &[], &service);
    for hub in [&b, &c] {
        hub.wait_for_metric("switchboard_requests_in_flight", 0);
    }
}

#[test]
fn after_a_nats_restart_hubs_rejoin_catalogs_converge_and_nothing_is_answered_twice() {
    let mut fabric = Fabric::new();
    let a = fabric.hub_builder_with_ttl("a", OPEN, LONG_TTL).start();
    let b = fabric.hub_builder_with_ttl("b", OPEN, LONG_TTL).start();
    let (mut owner, before) = owner(&a, json!({"when": "before"}));
    let (mut watcher, snapshot) = subscribed(&b);
    wait_added(&mut watcher, &snapshot, &before);
    let (mut caller, snapshot) = subscribed(&b);
    wait_added(&mut caller, &snapshot, &before);
    caller.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "clientService/request",
                        "params": {"serviceId": before, "method": "hang", "timeoutMs": 60000}}),
    );
    let pending = next_non_action(&mut owner);
    assert_eq!(pending["method"], "clientService/handleRequest");

    fabric.nats.stop();
    // Lost with NATS: the pending request fails once, at once.
    let answer = next_non_action(&mut caller);
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["code"], -32052, "{answer}");
    // Changes while NATS is away.
    let (_late_owner, during) = super::owner(&a, json!({"when": "during"}));
    // Local routing on A goes on without NATS.
    let (mut local, snapshot) = subscribed(&a);
    wait_added(&mut local, &snapshot, &during);
    let id = local.send_request(
        "clientService/request",
        json!({"serviceId": before, "method": "local"}),
    );
    let request = next_non_action(&mut owner);
    assert_eq!(request["params"]["method"], "local", "{request}");
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "local"}));
    let answer = next_non_action(&mut local);
    assert_eq!(answer["id"], id);
    assert_eq!(answer["result"], "local");
    fabric.nats.restart();

    // Both hubs reconnect and B lists exactly A's two services again.
    for hub in [&a, &b] {
        hub.wait_for_metric("switchboard_federation_nats_connected", 1);
        hub.wait_for_metric("switchboard_federation_joined", 1);
    }
    poll(
        || {
            let (_, now) = subscribed(&b);
            let ids: Vec<&str> = now.iter().filter_map(|s| s["serviceId"].as_str()).collect();
            (ids.len() == 2 && ids.contains(&before.as_str()) && ids.contains(&during.as_str()))
                .then_some(())
        },
        || format!("B's catalog never converged:\n{}", b.log()),
    );
    // The owner's late answer is dropped; the caller hears nothing more.
    owner.send(&json!({"jsonrpc": "2.0", "id": pending["id"], "result": "late"}));
    let pong = caller.request("ping", Value::Null);
    assert_eq!(pong["result"], Value::Null, "{pong}");
    // And requests work again.
    let id = caller.send_request(
        "clientService/request",
        json!({"serviceId": before, "method": "again"}),
    );
    // The next thing A's owner hears is this request: nothing of B's (the
    // pending "hang" included) was cancelled, as B never left the fabric.
    let request = next_non_action(&mut owner);
    assert_eq!(
        request["method"], "clientService/handleRequest",
        "{request}"
    );
    assert_eq!(request["params"]["method"], "again", "{request}");
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "again"}));
    let answer = next_non_action(&mut caller);
    assert_eq!(answer["id"], id);
    assert_eq!(answer["result"], "again");
    assert!(metric_value(&b.metrics(), "switchboard_federation_nats_reconnects_total") >= 1);
    drop(watcher);
}

/// Reads `client`'s messages until `service_id` is added; any `removed`
/// on the way fails the test.
fn added_and_nothing_removed(client: &mut LineClient, service_id: &str) {
    loop {
        let message = client.recv();
        let action = &message["params"]["action"];
        assert_ne!(action["type"], "clientServices/removed", "{message}");
        if action["type"] == "clientServices/added" && action["service"]["serviceId"] == service_id
        {
            return;
        }
    }
}

#[test]
fn nats_restarts_shorter_than_the_ttl_remove_nothing_and_cancel_nothing() {
    // Many keys per hub: each hub re-puts all of them when NATS comes back,
    // while the other's new consumer is catching up on the same keys.
    const SERVICES: usize = 40;
    const ROUNDS: u64 = 4;
    let mut fabric = Fabric::new();
    let a = fabric.hub_builder_with_ttl("a", OPEN, LONG_TTL).start();
    let b = fabric.hub_builder_with_ttl("b", OPEN, LONG_TTL).start();
    let mut sides = Vec::new();
    for (here, there) in [(&a, &b), (&b, &a)] {
        let (mut owner, first) = owner(here, json!({}));
        let mut services = vec![first];
        for _ in 1..SERVICES {
            let answer = owner.request("client/registerService", json!({"metadata": {}}));
            services.push(answer["result"]["serviceId"].as_str().unwrap().to_owned());
        }
        // Listed on the other hub (in any order: the puts are concurrent).
        let (mut watcher, snapshot) = subscribed(there);
        let mut unlisted: std::collections::BTreeSet<&str> =
            services.iter().map(String::as_str).collect();
        for service in &snapshot {
            unlisted.remove(service["serviceId"].as_str().unwrap_or_default());
        }
        while !unlisted.is_empty() {
            let message = watcher.recv();
            let action = &message["params"]["action"];
            if action["type"] == "clientServices/added" {
                unlisted.remove(action["service"]["serviceId"].as_str().unwrap_or_default());
            }
        }
        // A request from the other hub stays pending at this owner
        // throughout (its caller's hub fails it when NATS goes).
        let (mut caller, _) = subscribed(there);
        caller.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "clientService/request",
                            "params": {"serviceId": services[0], "method": "hang", "timeoutMs": 60000}}));
        let pending = next_non_action(&mut owner);
        assert_eq!(pending["params"]["method"], "hang", "{pending}");
        sides.push((here, owner, services, watcher, caller));
    }

    let mut markers = Vec::new();
    for round in 1..=ROUNDS {
        fabric.nats.restart();
        for hub in [&a, &b] {
            poll(
                || {
                    let reconnects = metric_value(
                        &hub.metrics(),
                        "switchboard_federation_nats_reconnects_total",
                    );
                    (reconnects >= round).then_some(())
                },
                || format!("a hub never reconnected:\n{}", hub.log()),
            );
        }
        // A service registered now reaches the other hub once both follow
        // the bucket again; before it, no service may have left there.
        for (here, _, _, watcher, _) in &mut sides {
            let (marker, service) = owner(here, json!({"round": round}));
            added_and_nothing_removed(watcher, &service);
            markers.push(marker);
        }
    }

    // Every owner hears the request sent now next: nothing was cancelled.
    for (_, owner, services, _, caller) in &mut sides {
        let id = caller.send_request(
            "clientService/request",
            json!({"serviceId": services[1], "method": "after"}),
        );
        let request = next_non_action(owner);
        assert_eq!(
            request["method"], "clientService/handleRequest",
            "{request}"
        );
        assert_eq!(request["params"]["method"], "after", "{request}");
        owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "after"}));
        let answer = loop {
            let answer = next_non_action(caller);
            if answer["id"] == id {
                break answer;
            }
            // The "hang" request failed on its caller's hub when NATS went.
            assert_eq!(answer["id"], 1, "{answer}");
            assert_eq!(answer["error"]["code"], -32052, "{answer}");
        };
        assert_eq!(answer["result"], "after", "{answer}");
    }
}

#[test]
fn a_second_hub_with_a_live_hubs_name_refuses_to_start() {
    let fabric = Fabric::new();
    let _a = fabric.hub("a", OPEN);
    let config = fabric.config("a-again", OPEN);
    let output = Command::new(switchboard_binary())
        .args(["serve", "--dir"])
        .arg(fabric.path("a-again"))
        .args([
            "--ws",
            "127.0.0.1:0",
            "--nats",
            &fabric.nats.url(),
            "--hub-name",
            "a",
            "--config",
        ])
        .arg(&config)
        .output()
        .expect("run switchboard serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("hub name \"a\" is taken"), "{stderr}");
    assert!(!fabric.path("a-again").join("hub.json").exists());
}

#[test]
fn a_hub_cut_off_past_the_ttl_leaves_the_catalogs_and_comes_back_when_it_resumes() {
    let fabric = Fabric::new();
    let a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    let (mut owner, service) = owner(&a, json!({}));
    let (mut on_b, snapshot) = subscribed(&b);
    wait_added(&mut on_b, &snapshot, &service);
    on_b.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "clientService/request",
                      "params": {"serviceId": service, "method": "hang", "timeoutMs": 60000}}),
    );
    assert_eq!(
        next_non_action(&mut owner)["method"],
        "clientService/handleRequest"
    );

    // A stops answering anything (its NATS connection stays open: NATS
    // cannot tell, no 503 comes): only the TTL tells B.
    a.signal(libc::SIGSTOP);
    let answers = removal_and_answers(&mut on_b, &service, 1);
    assert_eq!(answers[0]["id"], 1);
    assert_eq!(answers[0]["error"]["code"], -32052, "{}", answers[0]);
    assert_eq!(answers[0]["error"]["data"]["reason"], "disconnected");

    // A resumes: its heartbeat puts its claim and service back, B lists the
    // service again (an `added`), and requests reach it again.
    a.signal(libc::SIGCONT);
    wait_added(&mut on_b, &[], &service);
    let id = on_b.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "again"}),
    );
    let request = loop {
        let message = next_non_action(&mut owner);
        if message["method"] == "clientService/handleRequest"
            && message["params"]["method"] == "again"
        {
            break message;
        }
    };
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "back"}));
    let answer = next_non_action(&mut on_b);
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["result"], "back");
    let pong = on_b.request("ping", Value::Null);
    assert_eq!(pong["result"], Value::Null, "{pong}");
}

/// NATS not there: async-nats retries several times a second, and the hub
/// says so once (then at most once a minute), not at each attempt; when
/// NATS comes, once again.
#[test]
fn an_unreachable_nats_is_logged_once_per_change_not_once_per_attempt() {
    let mut fabric = Fabric::new();
    fabric.nats.stop();
    let a = fabric.hub("a", OPEN);
    a.wait_for_log("NATS is not reachable");
    std::thread::sleep(Duration::from_secs(5));
    let about_nats = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|line| line.to_ascii_lowercase().contains("nats"))
            .map(str::to_owned)
            .collect()
    };
    let lines = about_nats(&a.log());
    assert!(
        lines.len() <= 2,
        "{} lines about NATS in 5 s:\n{}",
        lines.len(),
        lines.join("\n")
    );

    fabric.nats.restart();
    a.wait_for_metric("switchboard_federation_joined", 1);
    let log = a.log();
    let connected = log.matches("NATS connected").count();
    assert_eq!(connected, 1, "{log}");
    assert!(!log.contains("client error"), "{log}");
}
