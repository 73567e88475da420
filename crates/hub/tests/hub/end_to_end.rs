//! Whole conversations between clients, through a real hub: what a client
//! does without any session or model in between (spec sections 3 to 6).

use crate::support::*;
use serde_json::json;

#[tokio::test]
async fn two_clients_register_discover_and_exchange_notifications_and_requests() {
    let hub = TestHub::start().await;
    let mut alice = hub.client("alice").await;
    let mut bob = hub.client("bob").await;

    let alice_service = alice.register(json!({"name": "alice-inbox"})).await;
    let bob_service = bob.register(json!({"name": "bob-inbox"})).await;

    // Each finds the other in the catalog.
    let listed = snapshot_services(&alice.subscribe().await);
    assert_eq!(
        listed[&bob_service]["metadata"],
        json!({"name": "bob-inbox"})
    );
    assert_eq!(listed[&bob_service]["clientId"], bob.client_id.as_str());
    let listed = snapshot_services(&bob.subscribe().await);
    assert_eq!(listed[&alice_service]["clientId"], alice.client_id.as_str());

    // Notifications both ways, stamped with the sender's identity.
    alice
        .notify_service(&bob_service, "chat/say", json!({"text": "hi bob"}))
        .await;
    let note = bob
        .receive(is_method("clientService/notification"), WAIT)
        .await;
    assert_eq!(note["params"]["serviceId"], bob_service.as_str());
    assert_eq!(note["params"]["senderClientId"], alice.client_id.as_str());
    assert_eq!(note["params"]["senderPrincipal"], json!({"kind": "direct"}));
    assert_eq!(note["params"]["method"], "chat/say");
    assert_eq!(note["params"]["params"], json!({"text": "hi bob"}));

    bob.notify_service(&alice_service, "chat/say", json!({"text": "hi alice"}))
        .await;
    let note = alice
        .receive(is_method("clientService/notification"), WAIT)
        .await;
    assert_eq!(note["params"]["senderClientId"], bob.client_id.as_str());
    assert_eq!(note["params"]["params"], json!({"text": "hi alice"}));

    // Requests both ways.
    let id = alice
        .request_service(&bob_service, "math/add", json!({"a": 2, "b": 3}))
        .await;
    let handle = bob.handle_request().await;
    assert_eq!(handle["params"]["senderClientId"], alice.client_id.as_str());
    assert_eq!(handle["params"]["params"], json!({"a": 2, "b": 3}));
    bob.respond(&handle["id"], json!({"sum": 5})).await;
    assert_eq!(expect_result(&alice.response(&id).await), json!({"sum": 5}));

    let id = bob
        .request_service(&alice_service, "math/neg", json!({"a": 7}))
        .await;
    let handle = alice.handle_request().await;
    alice.respond(&handle["id"], json!(-7)).await;
    assert_eq!(expect_result(&bob.response(&id).await), json!(-7));

    expect_all_silent([&mut alice, &mut bob]).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn one_registration_serves_several_methods_answered_out_of_order() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("git-objects").await;
    let mut caller = hub.client("explorer").await;
    let service = owner.register(json!({"protocol": "git-objects"})).await;

    // A batched lookup: several requests in flight at once, one service.
    let refs = caller.request_service(&service, "getRefs", json!({})).await;
    let mut lookups = Vec::new();
    for ids in [["a1", "b22"], ["c333", "d4444"], ["e5", "f66"]] {
        let id = caller
            .request_service(&service, "getObjects", json!({"ids": ids}))
            .await;
        lookups.push((id, ids));
    }
    let mut handles = Vec::new();
    for _ in 0..4 {
        handles.push(owner.handle_request().await);
    }
    let mut forwarded: Vec<&serde_json::Value> = handles.iter().map(|h| &h["id"]).collect();
    forwarded.sort_by_key(|id| id.to_string());
    forwarded.dedup();
    assert_eq!(forwarded.len(), 4, "forwarded ids must be distinct");

    // Answer in the reverse order of arrival.
    for handle in handles.iter().rev() {
        let params = &handle["params"];
        assert_eq!(params["serviceId"], service.as_str());
        let result = match params["method"].as_str().unwrap() {
            "getRefs" => json!({"refs": {"HEAD": "a1"}}),
            "getObjects" => {
                let objects: Vec<_> = params["params"]["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|id| json!({"id": id, "size": id.as_str().unwrap().len()}))
                    .collect();
                json!({"objects": objects})
            }
            other => panic!("unexpected method {other}"),
        };
        owner.respond(&handle["id"], result).await;
    }

    assert_eq!(
        expect_result(&caller.response(&refs).await),
        json!({"refs": {"HEAD": "a1"}})
    );
    for (id, ids) in lookups {
        let expected: Vec<_> = ids
            .iter()
            .map(|i| json!({"id": i, "size": i.len()}))
            .collect();
        assert_eq!(
            expect_result(&caller.response(&id).await),
            json!({"objects": expected})
        );
    }
    caller.expect_silence(SILENCE).await;
    hub.assert_bookkeeping_released().await;
}
