//! Spec sections 1, 2 and 9: every malformed input gets its error and leaves
//! both the connection (unless the spec closes it) and the hub working.

use crate::support::*;
use serde_json::{json, Value};

/// Sends `line` and expects exactly one answer: an error with `code`, the
/// given `id` and `data.reason`; then the same connection still answers ping.
async fn expect_refused(
    client: &mut RawClient,
    line: &[u8],
    code: i64,
    id: Value,
    reason: &str,
) -> Value {
    let mut bytes = line.to_vec();
    bytes.push(b'\n');
    client.send_raw(&bytes).await;
    let answer = client.next().await;
    let shown = String::from_utf8_lossy(line);
    assert_eq!(answer["id"], id, "answer to {shown}: {answer:?}");
    let error = expect_error(&answer, code);
    assert_eq!(
        error["data"]["reason"], reason,
        "answer to {shown}: {answer:?}"
    );
    let ping = client.request("ping", json!(null)).await;
    assert_eq!(expect_result(&ping), Value::Null, "ping after {shown}");
    assert!(
        client.take_inbox().is_empty(),
        "{shown} got more than one answer"
    );
    error
}

#[tokio::test]
async fn a_line_that_is_not_json_gets_parse_error_with_id_null() {
    let hub = TestHub::start().await;
    let mut client = hub.client("client").await;
    let lines: [&[u8]; 6] = [
        br#"{"jsonrpc":"2.0","id":1,"method":"ping","#,
        b"not json",
        br#"{"jsonrpc":"2.0","id":2,"method":}"#,
        br#"{"jsonrpc":"2.0","id":3,"method":"ping"} trailing"#,
        b"\xff\xfe{}",
        br#"{"jsonrpc":"2.0","id":4,"method":"ping","params":"\ud800"#,
    ];
    for line in lines {
        expect_refused(&mut client, line, code::PARSE_ERROR, Value::Null, "notJson").await;
    }
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn a_batch_gets_one_invalid_request_with_id_null_and_nothing_else() {
    let hub = TestHub::start().await;
    let mut client = hub.client("client").await;
    let batch =
        br#"[{"jsonrpc":"2.0","id":41,"method":"ping"},{"jsonrpc":"2.0","id":42,"method":"ping"}]"#;
    expect_refused(
        &mut client,
        batch,
        code::INVALID_REQUEST,
        Value::Null,
        "batch",
    )
    .await;
    expect_refused(
        &mut client,
        b"[]",
        code::INVALID_REQUEST,
        Value::Null,
        "batch",
    )
    .await;
    client.expect_silence(SILENCE).await;
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn a_message_that_is_not_an_object_is_invalid_request_with_id_null() {
    let hub = TestHub::start().await;
    let mut client = hub.client("client").await;
    for line in ["42", r#""ping""#, "null", "true"] {
        expect_refused(
            &mut client,
            line.as_bytes(),
            code::INVALID_REQUEST,
            Value::Null,
            "notAnObject",
        )
        .await;
    }
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn a_wrong_jsonrpc_member_is_invalid_request_answered_with_its_id() {
    let hub = TestHub::start().await;
    let mut client = hub.client("client").await;
    for (line, id) in [
        (r#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#, json!(5)),
        (r#"{"id":"six","method":"ping"}"#, json!("six")),
        (r#"{"jsonrpc":2.0,"id":7,"method":"ping"}"#, json!(7)),
    ] {
        expect_refused(
            &mut client,
            line.as_bytes(),
            code::INVALID_REQUEST,
            id,
            "badVersion",
        )
        .await;
    }
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn a_bad_id_type_is_invalid_request_with_id_null() {
    let hub = TestHub::start().await;
    let mut client = hub.client("client").await;
    for id in ["{}", "[1]", "true"] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        expect_refused(
            &mut client,
            line.as_bytes(),
            code::INVALID_REQUEST,
            Value::Null,
            "badId",
        )
        .await;
    }
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn other_broken_envelopes_are_invalid_request() {
    let hub = TestHub::start().await;
    let mut client = hub.client("client").await;
    let cases = [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
            json!(1),
            "badMethod",
        ),
        (r#"{"jsonrpc":"2.0","id":2}"#, json!(2), "noMethod"),
        (
            r#"{"jsonrpc":"2.0","id":3,"result":1,"error":{"code":1,"message":"m"}}"#,
            json!(3),
            "resultAndError",
        ),
        (
            r#"{"jsonrpc":"2.0","result":1}"#,
            Value::Null,
            "responseWithoutId",
        ),
    ];
    for (line, id, reason) in cases {
        expect_refused(
            &mut client,
            line.as_bytes(),
            code::INVALID_REQUEST,
            id,
            reason,
        )
        .await;
    }
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn an_unknown_method_is_method_not_found_and_an_unknown_notification_is_ignored() {
    let hub = TestHub::start().await;
    let mut client = hub.client("client").await;
    let response = client.request("no/suchMethod", json!({})).await;
    expect_error(&response, code::METHOD_NOT_FOUND);
    client.notify("no/suchNotification", json!({})).await;
    expect_result(&client.request("ping", json!(null)).await);
    client.expect_silence(SILENCE).await;
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn bad_params_are_invalid_params_naming_the_field() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    let mut client = hub.client("client").await;
    let s = service.as_str();
    let cases = [
        ("client/registerService", json!({}), "metadata"),
        ("client/registerService", json!({"metadata": 1}), "metadata"),
        (
            "client/registerService",
            json!({"metadata": ["a"]}),
            "metadata",
        ),
        ("client/registerService", json!([{}]), "params"),
        ("client/unregisterService", json!({}), "serviceId"),
        (
            "client/unregisterService",
            json!({"serviceId": 5}),
            "serviceId",
        ),
        ("client/updateService", json!({"serviceId": s}), "metadata"),
        (
            "client/updateService",
            json!({"serviceId": s, "metadata": "m"}),
            "metadata",
        ),
        (
            "client/updateService",
            json!({"serviceId": 5, "metadata": {}}),
            "serviceId",
        ),
        ("clientService/request", json!({"method": "m"}), "serviceId"),
        (
            "clientService/request",
            json!({"serviceId": 1, "method": "m"}),
            "serviceId",
        ),
        ("clientService/request", json!({"serviceId": s}), "method"),
        (
            "clientService/request",
            json!({"serviceId": s, "method": ""}),
            "method",
        ),
        (
            "clientService/request",
            json!({"serviceId": s, "method": 5}),
            "method",
        ),
        (
            "clientService/request",
            json!({"serviceId": s, "method": "a\u{1}b"}),
            "method",
        ),
        (
            "clientService/request",
            json!({"serviceId": s, "method": "café"}),
            "method",
        ),
        (
            "clientService/request",
            json!({"serviceId": s, "method": "m", "timeoutMs": "x"}),
            "timeoutMs",
        ),
        ("clientService/request", json!([s, "m"]), "params"),
        ("subscribe", json!({}), "channel"),
        ("subscribe", json!({"channel": 5}), "channel"),
    ];
    for (method, params, field) in cases {
        let response = client.request(method, params.clone()).await;
        let error = expect_error(&response, code::INVALID_PARAMS);
        assert_eq!(
            error["data"]["field"], field,
            "{method} {params}: {response}"
        );
    }
    expect_result(&client.request("ping", json!(null)).await);
    expect_all_silent([&mut client, &mut owner]).await;

    // The same for initialize, on a fresh connection.
    let mut fresh = hub.connect("fresh").await;
    for (params, field) in [
        (json!({"channel": 5}), "channel"),
        (json!({"protocolVersions": "1.0.0"}), "protocolVersions"),
        (json!({"protocolVersions": [1]}), "protocolVersions"),
        (json!({"clientInfo": {"version": "1"}}), "clientInfo"),
        (json!({"clientInfo": "me"}), "clientInfo"),
        (
            json!({"initialSubscriptions": CATALOG}),
            "initialSubscriptions",
        ),
        (json!([]), "params"),
    ] {
        let response = fresh.initialize_with(params.clone()).await;
        let error = expect_error(&response, code::INVALID_PARAMS);
        assert_eq!(
            error["data"]["field"], field,
            "initialize {params}: {response}"
        );
    }
    fresh.initialize_ok(Some(&hub.token)).await;
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn notification_methods_sent_with_an_id_are_invalid_and_not_performed() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    let mut client = hub.client("client").await;
    client.subscribe().await;
    let pending = client.request_service(&service, "slow", json!({})).await;
    let handle = owner.handle_request().await;

    for (method, params) in [
        (
            "clientService/notify",
            json!({"serviceId": service, "method": "m"}),
        ),
        ("$/cancelRequest", json!({"id": pending})),
        ("unsubscribe", json!({"channel": CATALOG})),
    ] {
        let response = client.request(method, params).await;
        let error = expect_error(&response, code::INVALID_REQUEST);
        assert_eq!(error["data"]["reason"], "notificationWithId", "{method}");
    }
    // Not notified, not cancelled, still subscribed.
    owner.expect_silence(SILENCE).await;
    owner.register(json!({"second": true})).await;
    client.action("clientServices/added").await;
    owner.respond(&handle["id"], json!("still pending")).await;
    assert_eq!(
        expect_result(&client.response(&pending).await),
        "still pending"
    );
    client.expect_silence(SILENCE).await;
}

#[tokio::test]
async fn request_methods_sent_as_notifications_are_dropped_silently() {
    let hub = TestHub::start().await;
    let mut client = hub.client("client").await;
    client
        .notify("client/registerService", json!({"metadata": {}}))
        .await;
    client
        .notify("subscribe", json!({"channel": CATALOG}))
        .await;
    client.notify("ping", json!(null)).await;
    expect_result(&client.request("ping", json!(null)).await);
    client.expect_silence(SILENCE).await;
    let snapshot = hub.client("judge").await.subscribe().await;
    assert_eq!(snapshot["state"]["services"], json!([]));
    // And `$/cancelRequest` with params that are not an object cancels nothing.
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    let id = client.request_service(&service, "m", json!({})).await;
    let handle = owner.handle_request().await;
    client.notify("$/cancelRequest", json!([id])).await;
    owner.expect_silence(SILENCE).await;
    owner.respond(&handle["id"], json!("answered")).await;
    assert_eq!(expect_result(&client.response(&id).await), "answered");
}

#[tokio::test]
async fn a_second_initialize_is_invalid_request_and_the_identity_stays() {
    let hub = TestHub::with_principals(&["explorer"], "").await;
    let mut client = hub.client("client").await;
    let first_id = client.client_id.clone();
    let response = client
        .request("initialize", json!({"authToken": token_of("explorer")}))
        .await;
    let error = expect_error(&response, code::INVALID_REQUEST);
    assert_eq!(error["data"]["reason"], "alreadyInitialized");

    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    client.notify_service(&service, "who", json!({})).await;
    let note = owner.next().await;
    assert_eq!(note["params"]["senderClientId"], first_id.as_str());
    assert_eq!(note["params"]["senderPrincipal"], json!({"kind": "direct"}));
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn an_unsupported_protocol_version_is_refused_and_the_connection_closed() {
    // Section 11: versions match by caret (1.x.y), the offered entry is
    // answered as it was written, and -32005 closes the connection (as
    // AHP does) once the error is flushed.
    let hub = TestHub::start().await;
    for offered in [
        json!(["0.9.0", "2.0.0"]),
        json!(["0.5.2"]),
        json!([]),
        json!(["1.0"]),
    ] {
        let mut client = hub.connect("client").await;
        let response = client
            .initialize_with(json!({"protocolVersions": offered, "authToken": hub.token}))
            .await;
        let error = expect_error(&response, code::UNSUPPORTED_VERSION);
        assert_eq!(
            error["data"]["supportedVersions"],
            json!(["1.0.0"]),
            "{offered}"
        );
        client.wait_closed().await;
        assert!(
            client.take_inbox().is_empty(),
            "{offered}: more after -32005"
        );
    }
    for (offered, chosen) in [
        (json!(["2.0.0", "1.0.0"]), "1.0.0"),
        (json!(["1.0.0", "0.9.0"]), "1.0.0"),
        (json!(["1.2.0", "1.10.3", "0.9.0"]), "1.10.3"),
    ] {
        let mut client = hub.connect("client").await;
        let result = client
            .initialize_with(json!({"protocolVersions": offered, "authToken": hub.token}))
            .await;
        assert_eq!(
            expect_result(&result)["protocolVersion"],
            chosen,
            "{offered}"
        );
    }
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn a_wrong_or_missing_token_is_auth_required_and_closes_the_connection() {
    let hub = TestHub::with_principals(&["explorer"], "").await;
    let mut flipped = hub.token.clone().into_bytes();
    flipped[0] = if flipped[0] == b'0' { b'1' } else { b'0' };
    let wrong = String::from_utf8(flipped).unwrap();
    for params in [
        json!({"authToken": wrong}),
        json!({"authToken": ""}),
        json!({"authToken": hub.token.to_uppercase() + "0"}),
        json!({}),
        json!({"clientInfo": {"name": "no token at all"}}),
    ] {
        let mut client = hub.connect("client").await;
        let response = client.initialize_with(params.clone()).await;
        expect_error(&response, code::AUTH_REQUIRED);
        client.wait_closed().await;
        assert!(
            client.take_inbox().is_empty(),
            "{params}: more after -32007"
        );
    }
    // Absent params count as {}: no token.
    let mut client = hub.connect("client").await;
    client
        .send_line(r#"{"jsonrpc":"2.0","id":"init","method":"initialize"}"#)
        .await;
    expect_error(&client.response(&json!("init")).await, code::AUTH_REQUIRED);
    client.wait_closed().await;
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn blank_lines_and_carriage_returns_are_tolerated() {
    let hub = TestHub::start().await;
    let mut client = hub.client("client").await;
    client
        .send_raw(b"\n\r\n   \n{\"jsonrpc\":\"2.0\",\"id\":\"crlf\",\"method\":\"ping\"}\r\n")
        .await;
    assert_eq!(
        client.next().await.value,
        json!({"jsonrpc": "2.0", "id": "crlf", "result": null})
    );
    client.expect_silence(SILENCE).await;
}

#[tokio::test]
async fn a_last_message_without_its_newline_is_handled_when_the_peer_closes() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    let mut sender = hub.client("sender").await;
    let line = json!({
        "jsonrpc": "2.0",
        "method": "clientService/notify",
        "params": {"serviceId": service, "method": "bye", "params": "last words"},
    });
    sender.send_raw(line.to_string().as_bytes()).await;
    sender.close().await;
    let note = owner.next().await;
    assert_eq!(note["params"]["params"], "last words");
}

/// `docs/protocol.md`: JSON whitespace is space, tab, CR and LF only. Any
/// other byte before or after a message (a form feed, a vertical tab, NUL)
/// makes the line `-32700`, and so does a line of nothing but such bytes; a
/// line of JSON whitespace alone is ignored. The same on both transports.
#[tokio::test]
async fn bytes_other_than_json_whitespace_around_a_message_are_a_parse_error() {
    let hub = TestHub::start().await;
    let mut unix = hub.client("unix").await;
    let mut ws = hub.ws_connect("ws").await;
    ws.initialize_ok(Some(&hub.token)).await;
    let ping: &[u8] = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let lines: [Vec<u8>; 8] = [
        [b"\x0c", ping].concat(),
        [ping, b"\x0c"].concat(),
        [b" \x0c\t", ping, b" "].concat(),
        [ping, b"\x0b"].concat(),
        b"\x0c".to_vec(),
        b"\x0c\x0c \t".to_vec(),
        b"\x0b".to_vec(),
        b"\x00".to_vec(),
    ];
    for client in [&mut unix, &mut ws] {
        for line in &lines {
            expect_refused(client, line, code::PARSE_ERROR, Value::Null, "notJson").await;
        }
        client.send_raw(b" \t\r\n").await;
        client.send_raw(&[b" \t\r", ping, b" \r\n"].concat()).await;
        let answer = client.response(&json!(7)).await;
        assert_eq!(expect_result(&answer), Value::Null);
        client.expect_silence(SILENCE).await;
    }
}

/// A string escape may be half a surrogate pair (`"\ud800"`): valid JSON, no
/// Unicode text. Where the hub reads such a string it says so and names the
/// field; it never reads it as some other (say, empty) text.
#[tokio::test]
async fn a_string_without_unicode_text_is_refused_naming_its_field() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    let mut client = hub.client("client").await;
    let says_why = |error: &Value| {
        let message = error["message"].as_str().unwrap();
        assert!(message.contains("surrogate"), "{error}");
    };

    // The method of the message itself: -32600 badMethod, with its id.
    let lines: [&[u8]; 2] = [
        br#"{"jsonrpc":"2.0","id":5,"method":"ping\ud800"}"#,
        br#"{"jsonrpc":"2.0","id":5,"method":"\udc00"}"#,
    ];
    for line in lines {
        let error = expect_refused(
            &mut client,
            line,
            code::INVALID_REQUEST,
            json!(5),
            "badMethod",
        )
        .await;
        says_why(&error);
    }

    // Members the hub reads: -32602 with data.field.
    let cases = [
        (
            "clientService/request",
            format!(r#"{{"serviceId":"{service}\ud800","method":"m"}}"#),
            "serviceId",
        ),
        (
            "clientService/request",
            format!(r#"{{"serviceId":"{service}","method":"m\udfff"}}"#),
            "method",
        ),
        (
            "subscribe",
            r#"{"channel":"ahp-client-services://\ud800"}"#.to_owned(),
            "channel",
        ),
        (
            "client/updateService",
            r#"{"serviceId":"\ud800","metadata":{}}"#.to_owned(),
            "serviceId",
        ),
        (
            "client/unregisterService",
            r#"{"serviceId":"svc-\ud800"}"#.to_owned(),
            "serviceId",
        ),
    ];
    for (id, (method, params, field)) in (100..).zip(cases) {
        client
            .send_line(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
            ))
            .await;
        let answer = client.response(&json!(id)).await;
        let error = expect_error(&answer, code::INVALID_PARAMS);
        assert_eq!(error["data"]["field"], field, "{method}: {answer:?}");
        says_why(&error);
    }

    // Before initialize: the token.
    let mut fresh = hub.connect("fresh").await;
    fresh
        .send_line(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"authToken":"\ud800"}}"#,
        )
        .await;
    let error = expect_error(&fresh.response(&json!(1)).await, code::INVALID_PARAMS);
    assert_eq!(error["data"]["field"], "authToken");
    says_why(&error);

    // A notification is never answered: dropped and counted as malformed.
    client
        .send_line(&format!(
            r#"{{"jsonrpc":"2.0","method":"clientService/notify","params":{{"serviceId":"{service}","method":"m\ud800"}}}}"#
        ))
        .await;
    expect_result(&client.request("ping", json!(null)).await);
    assert_eq!(
        hub.metric("switchboard_notifications_dropped_total{reason=\"malformed\"}"),
        1
    );
    owner.expect_silence(SILENCE).await;
    client.expect_silence(SILENCE).await;
}
