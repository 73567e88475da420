//! Spec section 8, overload: a consumer that does not read can only fill its
//! own queue. Notifications to it are shed past `notifyShedBytes`; requests,
//! responses and catalog actions are never shed, and a consumer that cannot
//! take them past `slowConsumerBytes` is disconnected.

use crate::support::*;
use serde_json::json;

const SHED_BYTES: u64 = 64 * 1024;
const SLOW_BYTES: u64 = 256 * 1024;

fn config() -> String {
    format!(
        "[limits]\nnotifyShedBytes = {SHED_BYTES}\nslowConsumerBytes = {SLOW_BYTES}\nmaxMessageBytes = 131072\n"
    )
}

/// Sends notifications of about 1 KiB each to `service`, numbered `numbers`,
/// then a ping, so that when this returns the hub has handled them.
async fn flood(sender: &mut RawClient, service: &str, numbers: std::ops::Range<u64>) {
    let pad = "x".repeat(1000);
    let mut chunk = Vec::new();
    for n in numbers {
        let message = json!({
            "jsonrpc": "2.0",
            "method": "clientService/notify",
            "params": {"serviceId": service, "method": "flood", "params": {"n": n, "pad": pad}},
        });
        chunk.extend_from_slice(message.to_string().as_bytes());
        chunk.push(b'\n');
        if chunk.len() > 256 * 1024 {
            sender.send_raw(&chunk).await;
            chunk.clear();
        }
    }
    sender.send_raw(&chunk).await;
    expect_result(&sender.request("ping", json!(null)).await);
}

fn shed(hub: &TestHub) -> u64 {
    hub.metric("switchboard_notifications_dropped_total{reason=\"shed\"}")
}

/// After a flood of `count` notifications (and one ping) towards a
/// consumer that stopped reading: each was forwarded or shed and counted,
/// the consumer's queue stayed within the shed bound, and once it reads
/// again what was not shed arrives once, in order, with nothing retried
/// and no one disconnected.
async fn shed_counted_and_the_rest_delivered_once_in_order(
    hub: &TestHub,
    consumer: &mut RawClient,
    count: u64,
) {
    let forwarded = hub.metric("switchboard_notifications_forwarded_total") - 1;
    assert!(shed(hub) > 0, "nothing was shed");
    assert_eq!(forwarded + shed(hub), count);
    let queued = hub.metric("switchboard_queued_bytes");
    assert!(
        queued < SHED_BYTES + 2048,
        "{queued} bytes queued; notifyShedBytes is {SHED_BYTES}"
    );
    consumer.resume_reading();
    let mut last = None;
    for _ in 0..forwarded {
        let note = consumer
            .receive(is_method("clientService/notification"), WAIT)
            .await;
        let n = note["params"]["params"]["n"].as_u64().unwrap();
        assert!(last.is_none_or(|last| n > last), "{n} after {last:?}");
        last = Some(n);
    }
    consumer.expect_silence(SILENCE).await;
    assert_eq!(hub.metric("switchboard_slow_consumer_disconnects_total"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_towards_a_consumer_that_does_not_read_is_shed_while_others_keep_routing() {
    const COUNT: u64 = 3000;
    let hub = TestHub::with_config(&config()).await;
    let mut consumer = hub.client("consumer").await;
    let service = consumer.register(json!({})).await;
    consumer.stop_reading();
    let mut sender = hub.client("sender").await;

    flood(&mut sender, &service, 0..COUNT / 2).await;
    // Meanwhile, everyone else is served (one notification of theirs).
    assert_hub_routes(&hub).await;
    flood(&mut sender, &service, COUNT / 2..COUNT).await;

    // Shedding is silent for the sender.
    sender.expect_silence(SILENCE).await;
    shed_counted_and_the_rest_delivered_once_in_order(&hub, &mut consumer, COUNT).await;
}

/// The same flood from a WebSocket sender, one message per frame: its
/// reader takes frames from its buffer between waits, so flow control and
/// shedding must hold frame by frame as they do line by line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_flood_one_message_per_frame_is_shed_and_counted_the_same() {
    const COUNT: u64 = 1500;
    let hub = TestHub::with_config(&config()).await;
    let mut consumer = hub.client("consumer").await;
    let service = consumer.register(json!({})).await;
    consumer.stop_reading();
    let mut sender = hub.ws_connect("ws-sender").await;
    sender.initialize_ok(Some(&hub.token)).await;
    let pad = "x".repeat(1000);
    for n in 0..COUNT {
        let message = json!({
            "jsonrpc": "2.0",
            "method": "clientService/notify",
            "params": {"serviceId": service, "method": "flood", "params": {"n": n, "pad": pad}},
        });
        sender.send_raw(message.to_string().as_bytes()).await;
    }
    expect_result(&sender.request("ping", json!(null)).await);
    assert_hub_routes(&hub).await;

    // Shedding is silent for the sender.
    sender.expect_silence(SILENCE).await;
    shed_counted_and_the_rest_delivered_once_in_order(&hub, &mut consumer, COUNT).await;
    // The sender was slowed, never stopped: it is still served.
    expect_result(&sender.request("ping", json!(null)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_actions_are_never_shed() {
    let hub = TestHub::with_config(&config()).await;
    let mut subscriber = hub.client("subscriber").await;
    let service = subscriber.register(json!({})).await;
    let snapshot = subscriber.subscribe().await;
    subscriber.stop_reading();

    let mut sender = hub.client("sender").await;
    flood(&mut sender, &service, 0..1000).await;
    let shed_before = shed(&hub);
    assert!(
        shed_before > 0,
        "the subscriber's queue never reached notifyShedBytes"
    );

    let mut owner = hub.client("owner").await;
    let mut registered = Vec::new();
    for i in 0..3 {
        registered.push(owner.register(json!({"i": i})).await);
    }
    // Its queue is still over notifyShedBytes: notifications are still shed.
    flood(&mut sender, &service, 1000..1010).await;
    assert_eq!(shed(&hub), shed_before + 10);

    subscriber.resume_reading();
    // Every one of them, with consecutive serverSeq.
    let from_seq = snapshot["fromSeq"].as_u64().unwrap();
    for (seq, id) in (from_seq + 1..).zip(registered) {
        let added = subscriber.action("clientServices/added").await;
        assert_eq!(
            added["params"]["action"]["service"]["serviceId"],
            id.as_str()
        );
        assert_eq!(added["params"]["serverSeq"], seq);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_must_take_requests_past_slow_consumer_bytes_is_disconnected() {
    let hub = TestHub::with_config(&config()).await;
    let mut watcher = hub.client("watcher").await;
    watcher.subscribe().await;
    let mut consumer = hub.client("consumer").await;
    let service = consumer.register(json!({})).await;
    watcher.action("clientServices/added").await;
    consumer.stop_reading();

    let mut sender = hub.client("sender").await;
    flood(&mut sender, &service, 0..1000).await;
    assert!(
        shed(&hub) > 0,
        "the consumer's queue never reached notifyShedBytes"
    );
    assert_eq!(hub.metric("switchboard_slow_consumer_disconnects_total"), 0);

    // Requests are never shed: they push the queue past slowConsumerBytes.
    let mut caller = hub.client("caller").await;
    let big = "y".repeat(32 * 1024);
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.push(
            caller
                .request_service(&service, "big", json!({"pad": big}))
                .await,
        );
    }
    let mut gone = 0;
    for id in &ids {
        let answer = caller.response(id).await;
        let error = answer["error"].clone();
        match error["code"].as_i64() {
            Some(code::SERVICE_GONE) => {
                assert_eq!(error["data"]["reason"], "disconnected");
                gone += 1;
            }
            // Sent after the consumer's services were already removed.
            Some(code::NOT_FOUND) => assert!(gone > 0, "{answer}"),
            _ => panic!("unexpected answer {answer}"),
        }
    }
    assert!(gone > 0);
    caller.expect_silence(SILENCE).await;

    let removed = watcher.action("clientServices/removed").await;
    assert_eq!(removed["params"]["action"]["serviceId"], service.as_str());
    assert_eq!(removed["params"]["action"]["reason"], "disconnected");
    consumer.resume_reading();
    consumer.wait_closed().await;
    hub.assert_bookkeeping_released().await;
    hub.eventually("the consumer's queue is released", |hub| {
        hub.metric("switchboard_queued_bytes") == 0
            && hub.metric("switchboard_slow_consumer_disconnects_total") == 1
    })
    .await;
    assert_hub_routes(&hub).await;
}

/// Flow control remembers which queues a reader's messages congested, so
/// that reader can let them drain before it reads on. A reader that stops
/// right after (its connection closed in the same read) never takes that
/// list: two connections that congested each other that way must still
/// both be freed, not keep each other alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_congested_each_other_and_closed_are_freed() {
    // The soft watermark is a quarter of notifyShedBytes: one notification
    // of 2 KiB congests an empty queue. The two readers must each push to
    // the other before the other closes, which happens when they run at
    // the same time: repeated, a hub whose backlog holds strong references
    // leaks in nearly every run (it did in 5 of 5 with 200 rounds).
    const ROUNDS: usize = 100;
    const MAX_MESSAGE: usize = 16 * 1024;
    let hub = TestHub::with_config(&format!(
        "[limits]\nnotifyShedBytes = 4096\nmaxMessageBytes = {MAX_MESSAGE}\nmaxMetadataBytes = 1024\n"
    ))
    .await;
    // One write: the notification that congests the peer's queue, pings
    // (so each side is busy while the other may still push to it), then
    // more than maxMessageBytes without a newline, which closes the sender
    // within that same read.
    let last_words = |peer_service: &str| {
        let note = json!({
            "jsonrpc": "2.0",
            "method": "clientService/notify",
            "params": {"serviceId": peer_service, "method": "m", "params": "x".repeat(2048)},
        });
        let mut bytes = format!("{note}\n").into_bytes();
        for id in 0..1000 {
            bytes.extend_from_slice(
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#).as_bytes(),
            );
            bytes.push(b'\n');
        }
        bytes.extend(std::iter::repeat_n(b' ', MAX_MESSAGE + 1));
        bytes
    };
    for _ in 0..ROUNDS {
        let mut a = hub.client("a").await;
        let mut b = hub.client("b").await;
        let service_a = a.register(json!({})).await;
        let service_b = b.register(json!({})).await;
        let (to_b, to_a) = (last_words(&service_b), last_words(&service_a));
        tokio::join!(a.send_raw(&to_b), b.send_raw(&to_a));
        a.wait_closed().await;
        b.wait_closed().await;
    }
    let state = hub.hub().state().clone();
    hub.eventually("every connection is closed", |_| {
        state.connection_count() == 0
    })
    .await;
    hub.eventually("every closed connection is freed", |_| {
        state.connections_in_memory() == 0
    })
    .await;
}
