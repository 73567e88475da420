//! Spec sections 3 and 4: services, and the catalog channel
//! `ahp-client-services://` (snapshot, then actions stamped with `serverSeq`).

use std::collections::VecDeque;

use crate::support::*;
use serde_json::{json, Value};
use tokio::sync::watch;

fn server_seq(action: &Value) -> u64 {
    action["params"]["serverSeq"].as_u64().unwrap()
}

#[tokio::test]
async fn a_registration_reaches_subscribers_as_added_and_later_snapshots() {
    let hub = TestHub::start().await;
    let mut watcher = hub.client("watcher").await;
    let first = watcher.subscribe().await;
    assert_eq!(first["state"]["services"], json!([]));

    let mut owner = hub.client("owner").await;
    let metadata = json!({"name": "demo", "tags": ["a", "b"], "n": 1});
    let service = owner.register(metadata.clone()).await;
    let hex = service
        .strip_prefix("svc-")
        .expect("serviceId starts with svc-");
    assert!(hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()));

    let expected = json!({
        "serviceId": service,
        "clientId": owner.client_id,
        "principal": {"kind": "direct"},
        "metadata": metadata,
    });
    let added = watcher.action("clientServices/added").await;
    assert_eq!(added["params"]["channel"], CATALOG);
    assert!(server_seq(&added) > first["fromSeq"].as_u64().unwrap());
    assert_eq!(added["params"]["action"]["service"], expected);

    let snapshot = hub.client("late").await.subscribe().await;
    assert_eq!(snapshot["state"]["services"], json!([expected]));
    assert_eq!(snapshot["fromSeq"], added["params"]["serverSeq"]);
}

#[tokio::test]
async fn an_update_reaches_subscribers_as_updated_and_later_snapshots() {
    let hub = TestHub::start().await;
    let mut watcher = hub.client("watcher").await;
    watcher.subscribe().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({"rev": 1})).await;
    watcher.action("clientServices/added").await;

    let result = owner
        .call(
            "client/updateService",
            json!({"serviceId": service, "metadata": {"rev": 2}}),
        )
        .await;
    assert_eq!(result, json!({}));
    let updated = watcher.action("clientServices/updated").await;
    assert_eq!(
        updated["params"]["action"],
        json!({"type": "clientServices/updated", "serviceId": service, "metadata": {"rev": 2}})
    );
    let listed = snapshot_services(&hub.client("late").await.subscribe().await);
    assert_eq!(listed[&service]["metadata"], json!({"rev": 2}));
}

#[tokio::test]
async fn unregister_publishes_removed_and_the_id_stops_routing() {
    let hub = TestHub::start().await;
    let mut watcher = hub.client("watcher").await;
    watcher.subscribe().await;
    let mut owner = hub.client("owner").await;
    let mut caller = hub.client("caller").await;
    let service = owner.register(json!({"name": "short-lived"})).await;
    let keep = owner.register(json!({"name": "stays"})).await;

    let result = owner
        .call("client/unregisterService", json!({"serviceId": service}))
        .await;
    assert_eq!(result, json!({}));
    watcher.action("clientServices/added").await;
    watcher.action("clientServices/added").await;
    let removed = watcher.action("clientServices/removed").await;
    assert_eq!(
        removed["params"]["action"],
        json!({"type": "clientServices/removed", "serviceId": service, "reason": "unregistered"})
    );

    let id = caller.request_service(&service, "op", json!({})).await;
    expect_error(&caller.response(&id).await, code::NOT_FOUND);
    caller.notify_service(&service, "op", json!({})).await;
    let again = owner
        .request("client/unregisterService", json!({"serviceId": service}))
        .await;
    expect_error(&again, code::NOT_FOUND);
    owner.expect_silence(SILENCE).await;

    let listed = snapshot_services(&hub.client("late").await.subscribe().await);
    assert!(!listed.contains_key(&service));
    assert!(listed.contains_key(&keep));
}

#[tokio::test]
async fn closing_a_connection_removes_all_its_services_as_disconnected() {
    let hub = TestHub::start().await;
    let mut watcher = hub.client("watcher").await;
    watcher.subscribe().await;
    let mut owner = hub.client("owner").await;
    let mut services = vec![
        owner.register(json!({"n": 1})).await,
        owner.register(json!({"n": 2})).await,
        owner.register(json!({"n": 3})).await,
    ];
    for _ in 0..3 {
        watcher.action("clientServices/added").await;
    }
    owner.close().await;

    let mut removed = Vec::new();
    for _ in 0..3 {
        let action = watcher.action("clientServices/removed").await;
        assert_eq!(action["params"]["action"]["reason"], "disconnected");
        removed.push(
            action["params"]["action"]["serviceId"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    removed.sort();
    services.sort();
    assert_eq!(removed, services);
    let snapshot = hub.client("late").await.subscribe().await;
    assert_eq!(snapshot["state"]["services"], json!([]));
}

#[tokio::test]
async fn snapshots_list_services_in_registration_order() {
    let hub = TestHub::start().await;
    let mut a = hub.client("a").await;
    let mut b = hub.client("b").await;
    let mut order = Vec::new();
    for i in 0..6 {
        let client = if i % 2 == 0 { &mut a } else { &mut b };
        order.push(client.register(json!({"i": i})).await);
    }
    let snapshot = hub.client("late").await.subscribe().await;
    let listed: Vec<&str> = snapshot["state"]["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["serviceId"].as_str().unwrap())
        .collect();
    assert_eq!(listed, order);
}

#[tokio::test]
async fn subscribing_to_an_unknown_channel_is_not_found() {
    let hub = TestHub::start().await;
    let mut client = hub.client("client").await;
    let response = client
        .request("subscribe", json!({"channel": "ahp-no-such-channel://"}))
        .await;
    expect_error(&response, code::NOT_FOUND);
    client.subscribe().await;
}

#[tokio::test]
async fn unsubscribe_stops_actions_and_subscribing_again_returns_a_fresh_snapshot() {
    let hub = TestHub::start().await;
    let mut watcher = hub.client("watcher").await;
    let mut owner = hub.client("owner").await;
    watcher.subscribe().await;
    let first = owner.register(json!({"n": 1})).await;
    watcher.action("clientServices/added").await;

    watcher
        .notify("unsubscribe", json!({"channel": CATALOG}))
        .await;
    // An unknown channel is ignored.
    watcher
        .notify("unsubscribe", json!({"channel": "ahp-no-such-channel://"}))
        .await;
    assert_eq!(
        expect_result(&watcher.request("ping", json!(null)).await),
        Value::Null
    );
    let second = owner.register(json!({"n": 2})).await;
    watcher.expect_silence(SILENCE).await;

    let snapshot = watcher.subscribe().await;
    let listed = snapshot_services(&snapshot);
    assert!(listed.contains_key(&first) && listed.contains_key(&second));
    owner.register(json!({"n": 3})).await;
    let added = watcher.action("clientServices/added").await;
    assert!(server_seq(&added) > snapshot["fromSeq"].as_u64().unwrap());
}

#[tokio::test]
async fn subscribing_again_while_subscribed_continues_the_stream_without_duplicates() {
    let hub = TestHub::start().await;
    let mut watcher = hub.client("watcher").await;
    let mut owner = hub.client("owner").await;
    watcher.subscribe().await;
    owner.register(json!({"n": 1})).await;
    watcher.action("clientServices/added").await;

    let again = watcher.subscribe().await;
    assert_eq!(snapshot_services(&again).len(), 1);
    owner.register(json!({"n": 2})).await;
    let added = watcher.action("clientServices/added").await;
    assert!(server_seq(&added) > again["fromSeq"].as_u64().unwrap());
    watcher.expect_silence(SILENCE).await;
}

/// The spec's "no race" rule, observed while the catalog changes as fast as
/// clients can change it: snapshot + actions with `serverSeq > fromSeq`
/// rebuild exactly the set a later snapshot lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_and_actions_reconstruct_the_exact_service_set_under_churn() {
    const ROUNDS: u32 = 600;
    let hub = TestHub::start().await;
    let mut stable = hub.client("stable").await;
    for i in 0..3 {
        stable.register(json!({"stable": i})).await;
    }

    // One client registers, updates and unregisters in a tight loop.
    let (progress_tx, mut progress) = watch::channel(0u32);
    let mut churner = hub.client("churner").await;
    let churn = tokio::spawn(async move {
        let mut live = VecDeque::new();
        for round in 1..=ROUNDS {
            live.push_back(churner.register(json!({"round": round})).await);
            if round % 3 == 0 {
                let id = live.back().unwrap();
                churner
                    .call(
                        "client/updateService",
                        json!({"serviceId": id, "metadata": {"round": round, "updated": true}}),
                    )
                    .await;
            }
            if live.len() > 4 {
                let id = live.pop_front().unwrap();
                churner
                    .call("client/unregisterService", json!({"serviceId": id}))
                    .await;
            }
            progress_tx.send_replace(round);
        }
        churner
    });
    // Others come and go, taking their services with them.
    let mut leavers = Vec::new();
    for i in 0..20 {
        leavers.push(hub.client(&format!("leaver-{i}")).await);
    }
    let leave = tokio::spawn(async move {
        for mut leaver in leavers {
            leaver.register(json!({"leaving": 1})).await;
            leaver.register(json!({"leaving": 2})).await;
            leaver.close().await;
        }
    });

    // Subscribers join at different points of the churn.
    let mut subscribers = Vec::new();
    for at in [ROUNDS / 10, ROUNDS / 3, ROUNDS * 2 / 3] {
        progress.wait_for(|round| *round >= at).await.unwrap();
        let mut subscriber = hub.client(&format!("subscriber-at-{at}")).await;
        let id = subscriber
            .send_request("subscribe", json!({"channel": CATALOG}))
            .await;
        // The response comes before any action.
        let first = subscriber.next().await;
        assert!(
            is_response(&first) && first["id"] == id,
            "first message after subscribe: {first:?}"
        );
        subscribers.push((subscriber, first["result"]["snapshot"].clone()));
    }
    let _churner = churn.await.unwrap();
    leave.await.unwrap();

    let mut judge = hub.client("judge").await;
    let final_snapshot = judge.subscribe().await;
    let final_seq = final_snapshot["fromSeq"].as_u64().unwrap();
    let expected = snapshot_services(&final_snapshot);
    assert_eq!(expected.len(), 3 + 4);

    for (mut subscriber, snapshot) in subscribers {
        let from_seq = snapshot["fromSeq"].as_u64().unwrap();
        assert!(
            from_seq < final_seq,
            "{} joined after the churn",
            subscriber.label
        );
        let mut services = snapshot_services(&snapshot);
        let mut last = from_seq;
        while last < final_seq {
            let action = subscriber.receive(is_method("action"), WAIT).await;
            let seq = server_seq(&action);
            assert!(
                seq > last,
                "{}: serverSeq {seq} after {last} (fromSeq {from_seq})",
                subscriber.label
            );
            apply_action(&mut services, &action["params"]["action"]);
            last = seq;
        }
        assert_eq!(last, final_seq);
        assert_eq!(
            services, expected,
            "{} rebuilt another set",
            subscriber.label
        );
        subscriber.expect_silence(SILENCE).await;
    }
}

#[tokio::test]
async fn a_stale_service_id_never_routes_to_its_replacement() {
    let hub = TestHub::start().await;
    let mut watcher = hub.client("watcher").await;
    watcher.subscribe().await;
    let mut caller = hub.client("caller").await;

    let mut owner = hub.client("owner").await;
    let old = owner.register(json!({"name": "files"})).await;
    owner.close().await;
    watcher.action("clientServices/added").await;
    let removed = watcher.action("clientServices/removed").await;
    assert_eq!(removed["params"]["action"]["serviceId"], old.as_str());

    // The same client comes back and registers the same thing again.
    let mut owner = hub.client("owner-again").await;
    let new = owner.register(json!({"name": "files"})).await;
    assert_ne!(new, old);

    let id = caller.request_service(&old, "list", json!({})).await;
    expect_error(&caller.response(&id).await, code::NOT_FOUND);
    caller.notify_service(&old, "changed", json!({})).await;
    let response = owner
        .request("client/unregisterService", json!({"serviceId": old}))
        .await;
    expect_error(&response, code::NOT_FOUND);
    let response = owner
        .request(
            "client/updateService",
            json!({"serviceId": old, "metadata": {}}),
        )
        .await;
    expect_error(&response, code::NOT_FOUND);
    owner.expect_silence(SILENCE).await;

    // The new id routes.
    let id = caller.request_service(&new, "list", json!({})).await;
    let handle = owner.handle_request().await;
    assert_eq!(handle["params"]["serviceId"], new.as_str());
    owner.respond(&handle["id"], json!([])).await;
    assert_eq!(expect_result(&caller.response(&id).await), json!([]));
}

/// Unregistering while a sender floods the service: nothing for it reaches
/// the owner after the unregister response, and every request is answered
/// exactly once (by the hub, since the owner never answers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unregistering_under_traffic_stops_delivery_at_the_response() {
    const COUNT: u64 = 4000;
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    let mut sender = hub.client("sender").await;

    let target = service.clone();
    let traffic = tokio::spawn(async move {
        let mut chunk = Vec::new();
        let mut requests = Vec::new();
        for n in 0..COUNT {
            let message = if n % 50 == 0 {
                requests.push(json!(format!("r{n}")));
                json!({"jsonrpc": "2.0", "id": format!("r{n}"), "method": "clientService/request",
                       "params": {"serviceId": target, "method": "m", "params": n}})
            } else {
                json!({"jsonrpc": "2.0", "method": "clientService/notify",
                       "params": {"serviceId": target, "method": "m", "params": n}})
            };
            chunk.extend_from_slice(message.to_string().as_bytes());
            chunk.push(b'\n');
            if chunk.len() > 8 * 1024 {
                sender.send_raw(&chunk).await;
                chunk.clear();
                tokio::task::yield_now().await;
            }
        }
        sender.send_raw(&chunk).await;
        for id in &requests {
            let answer = sender.response(id).await;
            let code = answer["error"]["code"].as_i64();
            assert!(
                code == Some(code::SERVICE_GONE)
                    && answer["error"]["data"]["reason"] == "unregistered"
                    || code == Some(code::NOT_FOUND),
                "{answer}"
            );
        }
        sender.expect_silence(SILENCE).await;
    });

    owner
        .receive(is_method("clientService/notification"), WAIT)
        .await;
    owner
        .send_request_with_id(
            json!("unregister"),
            "client/unregisterService",
            json!({"serviceId": service}),
        )
        .await;
    traffic.await.unwrap();
    // Everything the sender sent has been handled; a ping orders the rest.
    expect_result(&owner.request("ping", json!(null)).await);
    let messages = owner.take_inbox();
    let at = messages
        .iter()
        .position(|m| m["id"] == "unregister")
        .expect("the unregister response");
    expect_result(&messages[at]);
    let late: Vec<_> = messages[at + 1..]
        .iter()
        .filter(|m| m["params"]["serviceId"] == service.as_str())
        .collect();
    assert!(
        late.is_empty(),
        "delivered after the unregister response: {late:?}"
    );
    hub.assert_bookkeeping_released().await;
}
