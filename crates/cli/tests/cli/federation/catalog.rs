//! Section 2: the shared catalog.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use switchboard_client::{handler_fn, reply, CatalogEvent};
use switchboard_protocol::Principal;

use super::{owner, subscribed, wait_added};
use crate::support::fabric::{next_event, wait_listed, wait_removed, watcher, Fabric, OPEN};
use crate::support::{metric_value, switchboard};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_of_one_hub_is_listed_on_the_others_with_its_hub_until_it_goes() {
    let fabric = Fabric::new();
    let a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    let c = fabric.hub("c", OPEN);
    let (_b_client, mut on_b) = watcher(&b, "watcher-b").await;
    let (_c_client, mut on_c) = watcher(&c, "watcher-c").await;

    let owner = a.client("owner").await;
    let service = owner
        .register(
            &json!({"label": "echo"}),
            handler_fn(|_| async { reply(&"ok") }),
        )
        .await
        .unwrap();
    let id = service.id();
    assert!(id.starts_with("svc-a-"), "{id}");
    for catalog in [&mut on_b, &mut on_c] {
        let listed = wait_listed(catalog, &id).await;
        assert_eq!(listed.hub(), Some("a"));
        assert_eq!(listed.principal, Principal::Direct.on_hub("a"));
        assert_eq!(listed.client_id, owner.client_id());
        assert_eq!(listed.metadata, json!({"label": "echo"}));
    }
    // A's own catalog lists it without `hub`.
    let (_a_client, on_a) = watcher(&a, "watcher-a").await;
    assert_eq!(on_a.get(&id).unwrap().hub(), None);

    service
        .update(&json!({"label": "echo", "v": 2}))
        .await
        .unwrap();
    for catalog in [&mut on_b, &mut on_c] {
        match next_event(catalog, "the update").await {
            CatalogEvent::Updated(updated) => assert_eq!(updated.metadata["v"], 2),
            other => panic!("expected updated, got {other:?}"),
        }
    }
    service.unregister().await.unwrap();
    assert_eq!(wait_removed(&mut on_b, &id).await, "unregistered");
    assert_eq!(wait_removed(&mut on_c, &id).await, "unregistered");

    // A connection that closes takes its services along: `disconnected`.
    let service = owner
        .register(&json!({}), handler_fn(|_| async { reply(&"ok") }))
        .await
        .unwrap();
    let id = service.id();
    wait_listed(&mut on_b, &id).await;
    owner.close();
    assert_eq!(wait_removed(&mut on_b, &id).await, "disconnected");

    // `switchboard services` and `status` on B say where things are.
    let again = a.client("owner-2").await;
    let service = again
        .register(
            &json!({"label": "shown"}),
            handler_fn(|_| async { reply(&"ok") }),
        )
        .await
        .unwrap();
    wait_listed(&mut on_b, &service.id()).await;
    let listed = switchboard(&["services", "--dir", b.dir_arg()]).await;
    let table = listed.ok();
    assert!(table.contains("HUB"), "{table}");
    let row = table.lines().find(|l| l.contains(&service.id())).unwrap();
    assert!(row.split_whitespace().any(|cell| cell == "a"), "{row}");
    let status = switchboard(&["status", "--dir", b.dir_arg()]).await;
    let status = status.ok();
    assert!(status.contains("federation: b"), "{status}");
    assert!(status.contains("nats: connected"), "{status}");
    assert!(
        status.contains("hubs: a (1 service), c (0 services)"),
        "{status}"
    );
    let metrics = b.metrics();
    assert_eq!(
        metric_value(&metrics, "switchboard_federation_nats_connected"),
        1
    );
    assert_eq!(metric_value(&metrics, "switchboard_federation_hubs"), 2);
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_federation_remote_services{hub=\"a\"}"
        ),
        1
    );
    assert_eq!(b.info["federation"], json!({"name": "b"}));
}

/// Applies one catalog line to `view` (id → service); checks `serverSeq`.
fn apply(view: &mut BTreeMap<String, Value>, last_seq: &mut u64, message: &Value) {
    if message["method"] != "action" {
        return;
    }
    let seq = message["params"]["serverSeq"].as_u64().unwrap();
    assert!(seq > *last_seq, "serverSeq {seq} after {last_seq}");
    *last_seq = seq;
    let action = &message["params"]["action"];
    match action["type"].as_str().unwrap() {
        "clientServices/added" => {
            let id = action["service"]["serviceId"].as_str().unwrap().to_owned();
            assert!(
                view.insert(id, action["service"].clone()).is_none(),
                "added twice: {message}"
            );
        }
        "clientServices/removed" => {
            let id = action["serviceId"].as_str().unwrap();
            assert!(
                view.remove(id).is_some(),
                "removed what was not there: {message}"
            );
        }
        "clientServices/updated" => {
            let id = action["serviceId"].as_str().unwrap();
            view.get_mut(id).expect("updated what is there")["metadata"] =
                action["metadata"].clone();
        }
        other => panic!("unknown action {other}"),
    }
}

#[test]
fn snapshot_plus_actions_rebuild_the_catalog_while_another_hub_churns() {
    let fabric = Fabric::new();
    let a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    // Subscribers on B that join at different moments of A's churn.
    let mut subscribers = vec![subscribed(&b)];
    let mut churner = a.line_client();
    let mut kept = Vec::new();
    for round in 0..150 {
        let answer = churner.request(
            "client/registerService",
            json!({"metadata": {"round": round}}),
        );
        let id = answer["result"]["serviceId"].as_str().unwrap().to_owned();
        if round % 10 == 0 {
            kept.push(id);
        } else {
            let gone = churner.request("client/unregisterService", json!({"serviceId": id}));
            assert_eq!(gone["result"], json!({}), "{gone}");
        }
        if round % 50 == 25 {
            subscribers.push(subscribed(&b));
        }
    }
    // B has caught up once a fresh snapshot holds exactly what A kept (the
    // same ids, not only as many: B may still list one A just removed and
    // not yet one A just added).
    let kept_ids: std::collections::BTreeSet<&str> = kept.iter().map(String::as_str).collect();
    let fresh = switchboard_testkit::wait::poll(
        || {
            let (_, fresh) = subscribed(&b);
            let ids: std::collections::BTreeSet<&str> = fresh
                .iter()
                .filter_map(|s| s["serviceId"].as_str())
                .collect();
            let same = ids == kept_ids;
            same.then_some(fresh)
        },
        || {
            format!(
                "B never listed exactly A's {} remaining services",
                kept.len()
            )
        },
    );
    let fresh: BTreeMap<String, Value> = fresh
        .iter()
        .map(|s| (s["serviceId"].as_str().unwrap().to_owned(), s.clone()))
        .collect();
    // Every subscriber's snapshot plus the actions after it comes to the
    // same catalog (a recv past the last action would fail the test).
    for (client, snapshot) in &mut subscribers {
        let mut view: BTreeMap<String, Value> = snapshot
            .iter()
            .map(|s| (s["serviceId"].as_str().unwrap().to_owned(), s.clone()))
            .collect();
        let mut last_seq = 0;
        while view != fresh {
            let message = client.recv();
            apply(&mut view, &mut last_seq, &message);
        }
    }
}

#[test]
fn a_hub_that_stops_cleanly_takes_its_services_out_at_once() {
    let fabric = Fabric::new();
    // A TTL far past every wait (A makes the bucket, so it is the
    // fabric's): only a clean leave can remove A's services in time.
    let mut a = fabric
        .hub_builder_with_ttl("a", OPEN, std::time::Duration::from_secs(600))
        .start();
    let b = fabric.hub("b", OPEN);
    let (_owner, service) = super::owner(&a, json!({}));
    let (mut on_b, snapshot) = subscribed(&b);
    super::wait_added(&mut on_b, &snapshot, &service);
    a.signal(libc::SIGTERM);
    assert!(a.wait_exit().success());
    loop {
        let message = on_b.recv();
        let action = &message["params"]["action"];
        if action["type"] == "clientServices/removed" {
            assert_eq!(action["serviceId"], service);
            assert_eq!(action["reason"], "disconnected");
            break;
        }
    }
    b.wait_for_metric("switchboard_federation_hubs", 0);
}

#[test]
fn a_hub_started_without_nats_serves_locally_and_joins_when_nats_comes() {
    let mut fabric = Fabric::new();
    fabric.nats.stop();
    let a = fabric.hub("a", OPEN);
    a.wait_for_log("NATS is not reachable");
    // Local clients are served meanwhile.
    let (mut owner, service) = super::owner(&a, json!({}));
    let (mut local, snapshot) = subscribed(&a);
    super::wait_added(&mut local, &snapshot, &service);
    let metrics = a.metrics();
    assert_eq!(metric_value(&metrics, "switchboard_federation_joined"), 0);
    fabric.nats.restart();
    a.wait_for_metric("switchboard_federation_joined", 1);
    let b = fabric.hub("b", OPEN);
    let (mut on_b, snapshot) = subscribed(&b);
    super::wait_added(&mut on_b, &snapshot, &service);
    let id = on_b.send_request(
        "clientService/request",
        json!({"serviceId": service, "method": "m"}),
    );
    let request = super::next_non_action(&mut owner);
    owner.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": "joined"}));
    let answer = super::next_non_action(&mut on_b);
    assert_eq!(answer["id"], id);
    assert_eq!(answer["result"], "joined");
}

#[test]
fn heartbeats_keep_services_listed_without_updates() {
    let fabric = Fabric::new();
    let a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    let (_owner, first) = super::owner(&a, json!({"n": 1}));
    let (mut on_b, snapshot) = subscribed(&b);
    super::wait_added(&mut on_b, &snapshot, &first);
    // A re-puts its claim and its service on every heartbeat (serviceTtlMs
    // / 3); wait for several, past one TTL.
    let writes = || metric_value(&a.metrics(), "switchboard_federation_kv_writes_total");
    let before = writes();
    switchboard_testkit::wait::poll(
        || (writes() >= before + 8).then_some(()),
        || format!("A never renewed its keys:\n{}", a.metrics()),
    );
    // The bucket is ordered: B sees the next service after every heartbeat
    // before it, and none of them was an action.
    let (_second_owner, second) = super::owner(&a, json!({"n": 2}));
    let message = on_b.recv();
    let action = &message["params"]["action"];
    assert_eq!(action["type"], "clientServices/added", "{message}");
    assert_eq!(action["service"]["serviceId"], second, "{message}");
    let (_, now) = subscribed(&b);
    assert_eq!(now.len(), 2, "{now:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hub_answers_the_nats_service_api_with_its_name() {
    use futures::StreamExt;
    use switchboard_testkit::within;
    let fabric = Fabric::new();
    let _a = fabric.hub("a", OPEN);
    let _b = fabric.hub("b", OPEN);
    let nats = async_nats::connect(fabric.nats.url())
        .await
        .expect("connect to NATS");
    // `nats micro ping switchboard-hub`: every hub answers on one inbox. A
    // hub adds its endpoint just after it starts, so the ping is repeated
    // until both have answered (bounded by `within`).
    let inbox = nats.new_inbox();
    let mut answers = nats.subscribe(inbox.clone()).await.unwrap();
    let mut hubs = std::collections::BTreeSet::new();
    within("both hubs answering the service API", async {
        while hubs.len() < 2 {
            nats.publish_with_reply("$SRV.INFO.switchboard-hub", inbox.clone(), "".into())
                .await
                .unwrap();
            let round = tokio::time::sleep(std::time::Duration::from_millis(250));
            tokio::pin!(round);
            loop {
                tokio::select! {
                    answer = answers.next() => {
                        let answer = answer.expect("the inbox stays open");
                        let info: serde_json::Value =
                            serde_json::from_slice(&answer.payload).unwrap();
                        assert_eq!(info["name"], "switchboard-hub", "{info}");
                        hubs.insert(info["metadata"]["hub"].as_str().unwrap().to_owned());
                    }
                    _ = &mut round => break,
                }
            }
        }
    })
    .await;
    let hubs: Vec<_> = hubs.into_iter().collect();
    assert_eq!(hubs, ["a", "b"]);
}

#[test]
fn the_dashboard_of_b_shows_a_service_of_a_with_its_hub() {
    let fabric = Fabric::new();
    let a = fabric.hub("a", OPEN);
    let b = fabric.hub("b", OPEN);
    let (_owner_on_a, on_a) = owner(&a, json!({"label": "lives on a"}));
    let (_local_owner, on_b) = owner(&b, json!({"label": "lives on b"}));
    let (mut watcher, snapshot) = subscribed(&b);
    wait_added(&mut watcher, &snapshot, &on_a);
    // What the page and `switchboard top` start from.
    let mut direct = b.line_client();
    let answer = direct.request("hub/dashboardSnapshot", Value::Null);
    let snapshot: Value = match &answer["result"] {
        Value::String(text) => serde_json::from_str(text).expect("the snapshot is JSON"),
        result => result.clone(),
    };
    let services = snapshot["services"].as_array().expect("services");
    let of = |id: &str| {
        services
            .iter()
            .find(|s| s["serviceId"] == id)
            .unwrap_or_else(|| panic!("{id} not in the dashboard's snapshot: {snapshot}"))
    };
    assert_eq!(of(&on_a)["hub"], "a", "{snapshot}");
    assert_eq!(of(&on_b).get("hub"), None, "a local service names no hub");
}
