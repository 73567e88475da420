//! Spec section 5: notifications are forwarded at most once, spliced byte
//! for byte, in order per sender, and never acknowledged.

use crate::support::*;
use serde_json::{json, Value};

#[tokio::test]
async fn a_notification_produces_exactly_one_forwarded_message_and_nothing_to_the_sender() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let mut sender = hub.client("sender").await;
    let service = owner.register(json!({"name": "sink"})).await;

    sender
        .notify_service(&service, "files/changed", json!({"path": "/tmp/x"}))
        .await;
    let forwarded = owner.next().await;
    assert_eq!(
        forwarded.value,
        json!({
            "jsonrpc": "2.0",
            "method": "clientService/notification",
            "params": {
                "channel": CATALOG,
                "serviceId": service,
                "senderClientId": sender.client_id,
                "senderPrincipal": {"kind": "direct"},
                "method": "files/changed",
                "params": {"path": "/tmp/x"},
            },
        })
    );
    expect_all_silent([&mut owner, &mut sender]).await;
    assert_eq!(hub.metric("switchboard_notifications_forwarded_total"), 1);
}

#[tokio::test]
async fn notification_params_arrive_byte_for_byte() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let mut sender = hub.client("sender").await;
    let service = owner.register(json!({})).await;

    let params = r#"{ "amount" :  1.50 ,"list":[1e3 ,-0.0,  1E-7, "caf\u00e9 \"q\""] , "big": 123456789012345678901234567890,"empty":{ } }"#;
    let line = format!(
        r#"{{"jsonrpc":"2.0","method":"clientService/notify","params":{{"serviceId":"{service}","method":"odd/numbers","params":{params}}}}}"#
    );
    sender.send_line(&line).await;
    let forwarded = owner
        .receive(is_method("clientService/notification"), WAIT)
        .await;
    assert_eq!(raw_member(&forwarded.raw, &["params", "params"]), params);
    assert_eq!(
        raw_member(&forwarded.raw, &["params", "method"]),
        r#""odd/numbers""#
    );
    sender.expect_silence(SILENCE).await;
}

#[tokio::test]
async fn absent_params_are_forwarded_absent_and_null_params_as_null() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let mut sender = hub.client("sender").await;
    let service = owner.register(json!({})).await;

    sender
        .notify(
            "clientService/notify",
            json!({"serviceId": service, "method": "no/params"}),
        )
        .await;
    let forwarded = owner.next().await;
    assert_eq!(forwarded["params"]["method"], "no/params");
    assert!(forwarded["params"].get("params").is_none(), "{forwarded:?}");

    sender
        .notify(
            "clientService/notify",
            json!({"serviceId": service, "method": "null/params", "params": null}),
        )
        .await;
    let forwarded = owner.next().await;
    assert_eq!(raw_member(&forwarded.raw, &["params", "params"]), "null");
}

#[tokio::test]
async fn notifications_to_unknown_or_removed_services_are_dropped_silently_and_counted() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let mut sender = hub.client("sender").await;
    let removed = owner.register(json!({})).await;
    let live = owner.register(json!({})).await;
    owner
        .call("client/unregisterService", json!({"serviceId": removed}))
        .await;

    sender
        .notify_service("svc-00000000000000000000000000000000", "x", json!(1))
        .await;
    sender.notify_service(&removed, "x", json!(2)).await;
    // Malformed: no method, method not a string, empty method, no serviceId,
    // params not an object.
    for params in [
        json!({"serviceId": live}),
        json!({"serviceId": live, "method": 7}),
        json!({"serviceId": live, "method": ""}),
        json!({"method": "x"}),
        json!([live, "x"]),
    ] {
        sender.notify("clientService/notify", params).await;
    }
    sender
        .send_line(r#"{"jsonrpc":"2.0","method":"clientService/notify"}"#)
        .await;
    // An unknown notification method is dropped too.
    sender.notify("no/suchNotification", json!({})).await;
    // The sender's messages are handled in order: after this answer, every
    // notification above has been handled.
    expect_result(&sender.request("ping", json!(null)).await);

    expect_all_silent([&mut sender, &mut owner]).await;
    let dropped = |reason: &str| {
        hub.metric(&format!(
            "switchboard_notifications_dropped_total{{reason=\"{reason}\"}}"
        ))
    };
    assert_eq!(dropped("unknown_service"), 2);
    assert_eq!(dropped("malformed"), 6);
    assert_eq!(dropped("unknown_method"), 1);
    assert_eq!(hub.metric("switchboard_notifications_forwarded_total"), 0);

    // The live service still gets what is well formed.
    sender.notify_service(&live, "ok", json!(3)).await;
    assert_eq!(owner.next().await["params"]["params"], 3);
}

/// A sender's connection keeps the route of the service it last notified
/// (`LastRoute`): once that service is unregistered, or its owner is gone,
/// the very next notification to it is dropped, and a new service is
/// reached at once.
#[tokio::test]
async fn the_next_notification_after_its_service_left_is_dropped() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let mut sender = hub.client("sender").await;
    let first = owner.register(json!({})).await;
    let second = owner.register(json!({})).await;
    let received = |note: &Msg| note.value["params"]["params"].clone();

    sender.notify_service(&first, "n", json!(1)).await;
    sender.notify_service(&first, "n", json!(2)).await;
    assert_eq!(received(&owner.next().await), 1);
    assert_eq!(received(&owner.next().await), 2);
    owner
        .call("client/unregisterService", json!({"serviceId": first}))
        .await;
    sender.notify_service(&first, "n", json!(3)).await;
    // Back and forth between two services: each reached, in order.
    sender.notify_service(&second, "n", json!(4)).await;
    sender.notify_service(&first, "n", json!(5)).await;
    sender.notify_service(&second, "n", json!(6)).await;
    assert_eq!(received(&owner.next().await), 4);
    assert_eq!(received(&owner.next().await), 6);

    // The owner leaves: its service with it.
    owner.close().await;
    hub.eventually("the owner's services are gone", |hub| {
        hub.metric("switchboard_services") == 0
    })
    .await;
    sender.notify_service(&second, "n", json!(7)).await;
    let mut new_owner = hub.client("new owner").await;
    let third = new_owner.register(json!({})).await;
    sender.notify_service(&third, "n", json!(8)).await;
    assert_eq!(received(&new_owner.next().await), 8);

    expect_result(&sender.request("ping", json!(null)).await);
    expect_all_silent([&mut sender, &mut new_owner]).await;
    assert_eq!(
        hub.metric("switchboard_notifications_dropped_total{reason=\"unknown_service\"}"),
        3
    );
}

#[tokio::test]
async fn notifications_keep_no_state_in_the_hub() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let mut sender = hub.client("sender").await;
    let service = owner.register(json!({})).await;
    for n in 0..100 {
        sender.notify_service(&service, "tick", json!(n)).await;
    }
    for _ in 0..100 {
        owner.next().await;
    }
    assert_eq!(hub.bookkeeping(), Default::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_from_one_sender_to_one_service_keep_their_order() {
    const COUNT: u64 = 5000;
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let mut sender = hub.client("sender").await;
    let mut other = hub.client("other").await;
    let service = owner.register(json!({})).await;

    // Written in large chunks so lines are split across reads, and
    // interleaved with another sender (no order is promised across senders).
    let mut chunk = Vec::new();
    for n in 0..COUNT {
        let message = json!({
            "jsonrpc": "2.0",
            "method": "clientService/notify",
            "params": {"serviceId": service, "method": "seq", "params": {"n": n}},
        });
        chunk.extend_from_slice(message.to_string().as_bytes());
        chunk.push(b'\n');
        if chunk.len() > 40_000 {
            sender.send_raw(&chunk).await;
            chunk.clear();
            other.notify_service(&service, "other", json!(n)).await;
        }
    }
    sender.send_raw(&chunk).await;

    let mut expected = 0;
    while expected < COUNT {
        let note = owner
            .receive(is_method("clientService/notification"), WAIT)
            .await;
        if note["params"]["senderClientId"] != sender.client_id.as_str() {
            continue;
        }
        assert_eq!(note["params"]["params"]["n"], expected, "out of order");
        expected += 1;
    }
    sender.expect_silence(SILENCE).await;
    assert_eq!(
        hub.metric("switchboard_notifications_dropped_total{reason=\"shed\"}"),
        0
    );
}

#[tokio::test]
async fn a_notify_sent_with_an_id_is_invalid_and_not_forwarded() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let mut sender = hub.client("sender").await;
    let service = owner.register(json!({})).await;

    let response = sender
        .request(
            "clientService/notify",
            json!({"serviceId": service, "method": "m", "params": {}}),
        )
        .await;
    let error = expect_error(&response, code::INVALID_REQUEST);
    assert_eq!(error["data"]["reason"], "notificationWithId");
    expect_all_silent([&mut owner, &mut sender]).await;
    let _: Value = expect_result(&sender.request("ping", json!(null)).await);
}
