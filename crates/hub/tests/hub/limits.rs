//! Spec section 8: every bound, tested at its edge with a small configured
//! value: exactly at the bound succeeds, one past it fails with the error the
//! spec names (`-32050` with `data.limit`, or `-32602` with `data.field`).

use crate::support::*;
use serde_json::{json, Value};

const LIMITS: &str = r#"
[limits]
maxMessageBytes = 4096
maxMetadataBytes = 64
maxMethodBytes = 8
maxServicesPerClient = 3
maxInFlightPerClient = 2
maxInFlightPerService = 3
defaultRequestTimeoutMs = 5000
maxRequestTimeoutMs = 5000
maxErrorDataBytes = 32
"#;

#[track_caller]
fn expect_limit(response: &Value, limit: &str, max: u64) {
    let error = expect_error(response, code::LIMIT_EXCEEDED);
    assert_eq!(error["data"]["limit"], limit, "{response}");
    assert_eq!(error["data"]["max"], max, "{response}");
}

#[track_caller]
fn expect_invalid_field(response: &Value, field: &str) {
    let error = expect_error(response, code::INVALID_PARAMS);
    assert_eq!(error["data"]["field"], field, "{response}");
}

/// A `ping` request of exactly `size` bytes (padded with JSON whitespace).
fn ping_of_size(id: u64, size: usize) -> String {
    let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping""#);
    let padding = size - head.len() - 1;
    format!("{head}{}}}", " ".repeat(padding))
}

/// A metadata object whose JSON text is exactly `size` bytes.
fn metadata_of_size(size: usize) -> String {
    let text = format!(r#"{{"k":"{}"}}"#, "x".repeat(size - 8));
    assert_eq!(text.len(), size);
    text
}

#[tokio::test]
async fn a_message_of_max_message_bytes_is_served_and_one_byte_more_closes_the_connection() {
    let hub = TestHub::with_config(LIMITS).await;
    let mut client = hub.client("client").await;
    client.send_line(&ping_of_size(100, 4096)).await;
    assert_eq!(
        expect_result(&client.response(&json!(100)).await),
        Value::Null
    );

    client.send_line(&ping_of_size(101, 4097)).await;
    let answer = client.next().await;
    assert_eq!(answer["id"], Value::Null);
    let error = expect_error(&answer, code::INVALID_REQUEST);
    assert_eq!(
        error["data"],
        json!({"reason": "tooLarge", "limit": "maxMessageBytes", "max": 4096})
    );
    client.wait_closed().await;
    assert!(client.take_inbox().is_empty(), "nothing follows the error");
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn a_message_over_max_message_bytes_is_refused_even_split_across_writes() {
    let hub = TestHub::with_config(LIMITS).await;
    let mut client = hub.client("client").await;
    let line = ping_of_size(7, 4097);
    client.send_raw(&line.as_bytes()[..3000]).await;
    client.send_raw(&line.as_bytes()[3000..]).await;
    let answer = client.next().await;
    expect_error(&answer, code::INVALID_REQUEST);
    assert_eq!(answer["error"]["data"]["limit"], "maxMessageBytes");
    client.wait_closed().await;

    // A split message of exactly the bound is fine.
    let mut client = hub.client("client-2").await;
    let line = ping_of_size(8, 4096) + "\n";
    client.send_raw(&line.as_bytes()[..2000]).await;
    client.send_raw(&line.as_bytes()[2000..]).await;
    expect_result(&client.response(&json!(8)).await);
}

#[tokio::test]
async fn a_websocket_frame_over_max_message_bytes_closes_the_connection() {
    let hub = TestHub::with_config(LIMITS).await;
    let mut client = hub.ws_connect("ws").await;
    client.initialize_ok(Some(&hub.token)).await;
    client.send_line(&ping_of_size(100, 4096)).await;
    expect_result(&client.response(&json!(100)).await);
    client.send_line(&ping_of_size(101, 4097)).await;
    let answer = client.next().await;
    assert_eq!(answer["id"], Value::Null);
    expect_error(&answer, code::INVALID_REQUEST);
    assert_eq!(answer["error"]["data"]["limit"], "maxMessageBytes");
    client.wait_closed().await;
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn metadata_of_max_metadata_bytes_is_accepted_and_one_byte_more_is_refused() {
    let hub = TestHub::with_config(LIMITS).await;
    let mut owner = hub.client("owner").await;
    let register = |metadata: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"r","method":"client/registerService","params":{{"metadata":{metadata}}}}}"#
        )
    };
    owner.send_line(&register(&metadata_of_size(64))).await;
    let service = expect_result(&owner.response(&json!("r")).await)["serviceId"].clone();
    owner.send_line(&register(&metadata_of_size(65))).await;
    expect_limit(&owner.response(&json!("r")).await, "maxMetadataBytes", 64);

    let update = |metadata: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"u","method":"client/updateService","params":{{"serviceId":{service},"metadata":{metadata}}}}}"#
        )
    };
    owner.send_line(&update(&metadata_of_size(64))).await;
    expect_result(&owner.response(&json!("u")).await);
    owner.send_line(&update(&metadata_of_size(65))).await;
    expect_limit(&owner.response(&json!("u")).await, "maxMetadataBytes", 64);
}

#[tokio::test]
async fn a_method_of_max_method_bytes_routes_and_one_byte_more_is_refused() {
    let hub = TestHub::with_config(LIMITS).await;
    let mut owner = hub.client("owner").await;
    let mut caller = hub.client("caller").await;
    let service = owner.register(json!({})).await;

    let id = caller
        .request_service(&service, "abcd/fgh", json!({}))
        .await;
    let handle = owner.handle_request().await;
    assert_eq!(handle["params"]["method"], "abcd/fgh");
    owner.respond(&handle["id"], json!(null)).await;
    expect_result(&caller.response(&id).await);
    let id = caller
        .request_service(&service, "abcd/fghi", json!({}))
        .await;
    expect_limit(&caller.response(&id).await, "maxMethodBytes", 8);

    caller.notify_service(&service, "abcd/fgh", json!(1)).await;
    caller.notify_service(&service, "abcd/fghi", json!(2)).await;
    let note = owner.next().await;
    assert_eq!(note["params"]["method"], "abcd/fgh");
    expect_all_silent([&mut owner, &mut caller]).await;
    assert_eq!(
        hub.metric("switchboard_notifications_dropped_total{reason=\"malformed\"}"),
        1
    );
}

#[tokio::test]
async fn max_services_per_client_is_enforced_per_connection() {
    let hub = TestHub::with_config(LIMITS).await;
    let mut owner = hub.client("owner").await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(owner.register(json!({"i": i})).await);
    }
    let response = owner
        .request("client/registerService", json!({"metadata": {"i": 3}}))
        .await;
    expect_limit(&response, "maxServicesPerClient", 3);

    let mut other = hub.client("other").await;
    for i in 0..3 {
        other.register(json!({"i": i})).await;
    }
    owner
        .call("client/unregisterService", json!({"serviceId": ids[0]}))
        .await;
    owner.register(json!({"i": "again"})).await;
}

#[tokio::test]
async fn max_in_flight_per_client_refuses_at_once_and_releases_nothing_twice() {
    let hub = TestHub::with_config(LIMITS).await;
    let mut owner = hub.client("owner").await;
    let mut caller = hub.client("caller").await;
    let service = owner.register(json!({})).await;

    let first = caller.request_service(&service, "a", json!({})).await;
    let second = caller.request_service(&service, "b", json!({})).await;
    let third = caller.request_service(&service, "c", json!({})).await;
    expect_limit(&caller.response(&third).await, "maxInFlightPerClient", 2);
    let handle_a = owner.handle_request().await;
    let handle_b = owner.handle_request().await;
    owner.expect_silence(SILENCE).await;
    assert_eq!(
        (
            hub.bookkeeping().pending,
            hub.bookkeeping().calls,
            hub.bookkeeping().deadlines
        ),
        (2, 2, 2)
    );

    owner.respond(&handle_a["id"], json!("a")).await;
    assert_eq!(expect_result(&caller.response(&first).await), "a");
    let fourth = caller.request_service(&service, "d", json!({})).await;
    let handle_d = owner.handle_request().await;
    owner.respond(&handle_b["id"], json!("b")).await;
    owner.respond(&handle_d["id"], json!("d")).await;
    assert_eq!(expect_result(&caller.response(&second).await), "b");
    assert_eq!(expect_result(&caller.response(&fourth).await), "d");
    caller.expect_silence(SILENCE).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn max_in_flight_per_service_counts_every_caller_of_one_service() {
    let hub = TestHub::with_config(LIMITS).await;
    let mut owner = hub.client("owner").await;
    let busy = owner.register(json!({"name": "busy"})).await;
    let idle = owner.register(json!({"name": "idle"})).await;
    let mut a = hub.client("caller-a").await;
    let mut b = hub.client("caller-b").await;

    let mut pending = vec![
        (0, a.request_service(&busy, "m", json!({})).await),
        (0, a.request_service(&busy, "m", json!({})).await),
        (1, b.request_service(&busy, "m", json!({})).await),
    ];
    let mut handles = Vec::new();
    for _ in 0..3 {
        handles.push(owner.handle_request().await);
    }
    let refused = b.request_service(&busy, "m", json!({})).await;
    expect_limit(&b.response(&refused).await, "maxInFlightPerService", 3);
    // Another service of the same owner is not affected.
    let other = b.request_service(&idle, "m", json!({})).await;
    let handle = owner.handle_request().await;
    owner.respond(&handle["id"], json!("idle")).await;
    assert_eq!(expect_result(&b.response(&other).await), "idle");

    for handle in &handles {
        owner.respond(&handle["id"], json!("busy")).await;
    }
    for (who, id) in pending.drain(..) {
        let caller = if who == 0 { &mut a } else { &mut b };
        assert_eq!(expect_result(&caller.response(&id).await), "busy");
    }
    expect_all_silent([&mut a, &mut b]).await;
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn timeout_ms_must_be_from_one_to_max_request_timeout_ms() {
    let hub = TestHub::with_config(LIMITS).await;
    let mut owner = hub.client("owner").await;
    let mut caller = hub.client("caller").await;
    let service = owner.register(json!({})).await;

    for timeout in [
        json!(0),
        json!(5001),
        json!(-1),
        json!(1.5),
        json!("100"),
        json!(null),
    ] {
        let response = caller
            .request(
                "clientService/request",
                json!({"serviceId": service, "method": "m", "timeoutMs": timeout}),
            )
            .await;
        expect_invalid_field(&response, "timeoutMs");
    }
    owner.expect_silence(SILENCE).await;

    for timeout in [5000, 1] {
        let id = caller
            .send_request(
                "clientService/request",
                json!({"serviceId": service, "method": "m", "timeoutMs": timeout}),
            )
            .await;
        let handle = owner.handle_request().await;
        if timeout == 1 {
            expect_error(&caller.response(&id).await, code::REQUEST_TIMEOUT);
        } else {
            owner.respond(&handle["id"], json!("in time")).await;
            assert_eq!(expect_result(&caller.response(&id).await), "in time");
        }
    }
    hub.assert_bookkeeping_released().await;
}

#[tokio::test]
async fn error_data_over_max_error_data_bytes_is_replaced_by_truncated() {
    let hub = TestHub::with_config(LIMITS).await;
    let mut owner = hub.client("owner").await;
    let mut caller = hub.client("caller").await;
    let service = owner.register(json!({})).await;

    let at_bound = metadata_of_size(32);
    let over = metadata_of_size(33);
    for (data, expected) in [
        (&at_bound, at_bound.clone()),
        (&over, r#"{"truncated":true}"#.to_owned()),
    ] {
        let id = caller.request_service(&service, "fail", json!({})).await;
        let handle = owner.handle_request().await;
        owner
            .send_line(&format!(
                r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":4000,"message":"nope","data":{data}}}}}"#,
                handle["id"]
            ))
            .await;
        let answer = caller.receive(|m| m["id"] == id, WAIT).await;
        assert_eq!(answer["error"]["code"], 4000);
        assert_eq!(answer["error"]["message"], "nope");
        assert_eq!(raw_member(&answer.raw, &["error", "data"]), expected);
    }
}

#[tokio::test]
async fn max_connections_refuses_the_next_connection_on_both_transports() {
    let hub = TestHub::with_config("[limits]\nmaxConnections = 3\n").await;
    let mut first = hub.client("first").await;
    let _second = hub.connect("second").await; // uninitialized ones count too
    let _third = hub.ws_connect("third").await;

    let mut refused = hub.connect("refused").await;
    let answer = refused.next().await;
    assert_eq!(answer["id"], Value::Null);
    expect_limit(&answer, "maxConnections", 3);
    refused.wait_closed().await;
    assert_eq!(
        hub.ws_connect_with("refused-ws", &[]).await.err(),
        Some(503)
    );
    assert_eq!(hub.metric("switchboard_connections_refused_total"), 2);
    expect_result(&first.request("ping", json!(null)).await);

    // A place frees up when a connection closes.
    first.close().await;
    hub.eventually("the closed connection is released", |hub| {
        hub.metric("switchboard_connections") == 2
    })
    .await;
    hub.client("fourth").await;
}

#[tokio::test]
async fn a_reload_does_not_change_the_limits_in_force() {
    let hub = TestHub::with_config(LIMITS).await;
    hub.reload_with("[limits]\nmaxMethodBytes = 100\n").unwrap();
    let mut owner = hub.client("owner").await;
    assert_eq!(owner.init["limits"]["maxMethodBytes"], 8);
    let service = owner.register(json!({})).await;
    let id = owner
        .request_service(&service, "abcd/fghi", json!({}))
        .await;
    expect_limit(&owner.response(&id).await, "maxMethodBytes", 8);
}

/// `maxConnections` bounds sockets from the moment they are accepted: a
/// WebSocket-port socket holds its slot while the hub waits for its HTTP
/// head, so sockets that never send one cannot make the hub take more.
#[tokio::test]
async fn a_socket_on_the_websocket_port_holds_a_slot_before_it_sends_its_head() {
    let hub = TestHub::with_config("[limits]\nmaxConnections = 2\n").await;
    let address = hub.ws.trim_start_matches("ws://").trim_end_matches('/');
    // Accepted in order: these two take the two slots.
    let mut silent = Vec::new();
    for _ in 0..2 {
        silent.push(tokio::net::TcpStream::connect(address).await.unwrap());
    }

    assert_eq!(
        hub.ws_connect_with("refused-ws", &[]).await.err(),
        Some(503)
    );
    let mut refused = hub.connect("refused-unix").await;
    let answer = refused.next().await;
    expect_limit(&answer, "maxConnections", 2);
    refused.wait_closed().await;
    // A full hub still answers its health check and metrics.
    assert_eq!(hub.http_get("/healthz", &[]).await.0, 200);
    let (status, metrics) = hub.http_get("/metrics", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(metric_value(&metrics, "switchboard_connections"), 0);
    assert_eq!(
        metric_value(&metrics, "switchboard_connections_refused_total"),
        2
    );

    // Closing them frees their slots.
    drop(silent);
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut client = loop {
        match hub.ws_connect_with("admitted", &[]).await {
            Ok(client) => break client,
            Err(503) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await
            }
            Err(status) => panic!("the upgrade got {status} after the slots were freed"),
        }
    };
    client.initialize_ok(Some(&hub.token)).await;
}

/// `levels` nested arrays around `1`: JSON text that nests `levels` deep.
fn nested(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

/// Whatever the hub forwards, serde_json with its default recursion limit
/// (127 levels) can read: a payload may nest 125 levels (it is forwarded two
/// levels down), an owner's result 126. Past that a notification is dropped
/// and counted, a request refused with `-32602` `params`, an answer replaced
/// by `-32603`. (Every client here reads with serde_json's defaults, so a
/// forwarded message it could not read would fail the test.)
#[tokio::test]
async fn nothing_nested_deeper_than_serde_json_reads_is_forwarded() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    let mut caller = hub.client("caller").await;
    let notify = |levels| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"clientService/notify","params":{{"serviceId":"{service}","method":"n","params":{}}}}}"#,
            nested(levels)
        )
    };
    let request = |id, levels| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"clientService/request","params":{{"serviceId":"{service}","method":"r","params":{}}}}}"#,
            nested(levels)
        )
    };

    // Notifications: 125 levels arrive, 126 are dropped as too deep.
    caller.send_line(&notify(125)).await;
    let note = owner.next().await;
    assert_eq!(raw_member(&note.raw, &["params", "params"]), nested(125));
    caller.send_line(&notify(126)).await;
    expect_result(&caller.request("ping", json!(null)).await);
    owner.expect_silence(SILENCE).await;
    let too_deep = "switchboard_notifications_dropped_total{reason=\"too_deep\"}";
    assert_eq!(hub.metric(too_deep), 1);

    // Requests: 125 levels are forwarded, 126 refused naming params.
    caller.send_line(&request(1, 125)).await;
    let handle = owner.handle_request().await;
    assert_eq!(raw_member(&handle.raw, &["params", "params"]), nested(125));
    caller.send_line(&request(2, 126)).await;
    let error = expect_error(&caller.response(&json!(2)).await, code::INVALID_PARAMS);
    assert_eq!(error["data"]["field"], "params");
    assert!(
        error["message"].as_str().unwrap().contains("125"),
        "{error}"
    );

    // Answers: a result of 126 levels is passed on, 127 would make the
    // caller's message 128 deep and becomes -32603.
    let answer = |id: &Value, levels| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#,
            nested(levels)
        )
    };
    owner.send_line(&answer(&handle["id"], 126)).await;
    let result = caller
        .receive(|m| is_response(m) && m["id"] == 1, WAIT)
        .await;
    assert_eq!(raw_member(&result.raw, &["result"]), nested(126));
    caller.send_line(&request(3, 1)).await;
    let handle = owner.handle_request().await;
    owner.send_line(&answer(&handle["id"], 127)).await;
    let error = expect_error(&caller.response(&json!(3)).await, code::INTERNAL_ERROR);
    assert!(
        error["message"].as_str().unwrap().contains("127"),
        "{error}"
    );
    hub.assert_bookkeeping_released().await;
}

/// Metadata travels deepest inside `initialize`'s snapshot, seven levels
/// down: it may nest 120 levels; 121 are refused with `-32602` `metadata`,
/// at registration and at update alike.
#[tokio::test]
async fn metadata_may_nest_120_levels_and_no_more() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let metadata = |levels: usize| format!(r#"{{"deep":{}}}"#, nested(levels - 1));
    let register = |id, levels| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"client/registerService","params":{{"metadata":{}}}}}"#,
            metadata(levels)
        )
    };
    owner.send_line(&register(1, 120)).await;
    let service = expect_result(&owner.response(&json!(1)).await)["serviceId"]
        .as_str()
        .unwrap()
        .to_owned();
    owner.send_line(&register(2, 121)).await;
    let error = expect_error(&owner.response(&json!(2)).await, code::INVALID_PARAMS);
    assert_eq!(error["data"]["field"], "metadata");
    owner
        .send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"client/updateService","params":{{"serviceId":"{service}","metadata":{}}}}}"#,
            metadata(121)
        ))
        .await;
    let error = expect_error(&owner.response(&json!(3)).await, code::INVALID_PARAMS);
    assert_eq!(error["data"]["field"], "metadata");

    // The deepest place it goes: a snapshot in an initialize result.
    let mut watcher = hub.connect("watcher").await;
    let init = watcher
        .initialize_with(json!({"authToken": hub.token, "initialSubscriptions": [CATALOG]}))
        .await;
    let listed = &expect_result(&init)["snapshots"][0]["state"]["services"][0];
    assert_eq!(listed["serviceId"], service.as_str());
}
