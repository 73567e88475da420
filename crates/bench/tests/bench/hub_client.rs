//! The harness's lean hub client speaks the real protocol: checked against
//! the real hub, in-process, over its Unix socket and its WebSocket.

use futures_util::{SinkExt, StreamExt};
use switchboard_bench::lines::{self, After};
use switchboard_bench::messages::{self, RequestTemplate};
use switchboard_bench::systems::hub::{self, HubConn, Transport};
use switchboard_bench::workloads::request;
use switchboard_testkit::{within, TestHub};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_built_notifications_arrive_as_protocol_notifications_with_the_payload_intact() {
    let hub = TestHub::start().await;
    let mut receiver = HubConn::connect(hub.info(), Transport::Unix, "receiver")
        .await
        .unwrap();
    let service = receiver.register("bench").await.unwrap();
    let sender = HubConn::connect(hub.info(), Transport::Unix, "sender")
        .await
        .unwrap();
    let payload = messages::payload(1024);

    let mut batch = Vec::new();
    for _ in 0..100 {
        batch.extend_from_slice(messages::hub_notify(&service, &payload).as_bytes());
        batch.push(b'\n');
    }
    let (_s_read, mut s_write, _) = sender.into_unix().unwrap();
    s_write.write_all(&batch).await.unwrap();

    let (mut read, _write, mut buf) = receiver.into_unix().unwrap();
    let mut delivered = 0;
    within("100 deliveries", async {
        while delivered < 100 {
            if delivered == 0 {
                if let Some(first) = buf.first_line() {
                    hub::check_notification(first, &payload).unwrap();
                }
            }
            delivered += buf.count_lines();
            if delivered < 100 {
                assert!(
                    buf.fill(&mut read).await.unwrap() > 0,
                    "the hub closed the receiver"
                );
            }
        }
    })
    .await;
    assert_eq!(delivered, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lean_responder_answers_requests_routed_by_the_hub() {
    let hub = TestHub::start().await;
    let mut owner = HubConn::connect(hub.info(), Transport::Unix, "owner")
        .await
        .unwrap();
    let service = owner.register("bench").await.unwrap();
    let payload = messages::payload(200);
    let (read, write, buf) = owner.into_unix().unwrap();
    let responder = tokio::spawn(request::answer_lines(
        read,
        write,
        buf,
        RequestTemplate::response("", &payload, true),
        false,
    ));

    let caller = HubConn::connect(hub.info(), Transport::Unix, "caller")
        .await
        .unwrap();
    let (mut read, mut write, mut buf) = caller.into_unix().unwrap();
    let requests = RequestTemplate::hub("", &service, &payload, true);
    let mut out = Vec::new();
    for id in 1..=64 {
        requests.write(&mut out, id);
    }
    write.write_all(&out).await.unwrap();

    let mut answered = Vec::new();
    within("64 answers", async {
        while answered.len() < 64 {
            assert!(
                buf.fill(&mut read).await.unwrap() > 0,
                "the hub closed the caller"
            );
            buf.drain_lines(|line| {
                let (id, after) = lines::message_id(line).expect("an answer with an integer id");
                assert_eq!(after, After::Result, "{}", String::from_utf8_lossy(line));
                let result = format!(",\"result\":{payload}}}");
                assert!(
                    line.ends_with(result.as_bytes()),
                    "the result was not spliced byte for byte"
                );
                answered.push(id);
            });
        }
    })
    .await;
    answered.sort_unstable();
    assert_eq!(answered, (1..=64).collect::<Vec<u64>>());
    responder.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_over_the_websocket_arrive_as_frames() {
    let hub = TestHub::start().await;
    let mut receiver = HubConn::connect(hub.info(), Transport::Ws, "receiver")
        .await
        .unwrap();
    let service = receiver.register("bench").await.unwrap();
    let sender = HubConn::connect(hub.info(), Transport::Ws, "sender")
        .await
        .unwrap();
    let payload = messages::payload(200);
    let mut sink = sender.into_ws().unwrap();
    for _ in 0..10 {
        sink.feed(Message::text(messages::hub_notify(&service, &payload)))
            .await
            .unwrap();
    }
    sink.flush().await.unwrap();

    let mut ws = receiver.into_ws().unwrap();
    for _ in 0..10 {
        let frame = within("a frame", ws.next()).await.unwrap().unwrap();
        let Message::Text(text) = frame else {
            panic!("expected a text frame, got {frame:?}")
        };
        hub::check_notification(text.as_bytes(), &payload).unwrap();
    }
}

#[tokio::test]
async fn a_wrong_token_fails_initialize() {
    let hub = TestHub::start().await;
    let mut info = hub.info().clone();
    info.token = "0".repeat(64);
    let error = HubConn::connect(&info, Transport::Unix, "intruder")
        .await
        .err()
        .expect("initialize must fail");
    assert!(format!("{error:#}").contains("-32007"), "{error:#}");
}

#[tokio::test]
async fn a_catalog_subscribe_is_timed_to_its_complete_answer() {
    let hub = TestHub::start().await;
    let mut owner = HubConn::connect(hub.info(), Transport::Unix, "owner")
        .await
        .unwrap();
    let names: Vec<String> = (0..300).map(|i| format!("svc-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    // maxServicesPerClient is 256 by default: the 257th registration fails.
    let error = owner.register_many(&refs).await.unwrap_err();
    assert!(format!("{error:#}").contains("-32050"), "{error:#}");

    let mut subscriber = HubConn::connect(hub.info(), Transport::Unix, "subscriber")
        .await
        .unwrap();
    let (took, answer) = subscriber
        .call_timed(
            "subscribe",
            serde_json::json!({"channel": "ahp-client-services://"}),
        )
        .await
        .unwrap();
    assert!(took.as_nanos() > 0);
    let value: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(
        value["result"]["snapshot"]["state"]["services"]
            .as_array()
            .unwrap()
            .len(),
        256
    );
}
