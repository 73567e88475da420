//! Spec sections 1, 2 and 10 on the WebSocket port: bearer tokens, the
//! Origin allow-list, and the HTTP endpoints `/metrics` and `/healthz`.

use crate::support::*;
use serde_json::{json, Value};

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn a_bearer_token_on_the_upgrade_authenticates_initialize_without_auth_token() {
    let hub = TestHub::with_principals(&["explorer"], "").await;
    let mut direct = hub
        .ws_connect_with("direct", &[("Authorization", &bearer(&hub.token))])
        .await
        .unwrap();
    let result = direct.initialize_ok(None).await;
    assert_eq!(result["principal"], json!({"kind": "direct"}));

    let mut explorer = hub
        .ws_connect_with(
            "explorer",
            &[("Authorization", &bearer(&token_of("explorer")))],
        )
        .await
        .unwrap();
    let result = explorer.initialize_ok(None).await;
    assert_eq!(
        result["principal"],
        json!({"kind": "reserved", "module_id": "explorer"})
    );
    // The same token in both places is fine too.
    let mut both = hub
        .ws_connect_with("both", &[("Authorization", &bearer(&hub.token))])
        .await
        .unwrap();
    both.initialize_ok(Some(&hub.token)).await;
}

#[tokio::test]
async fn a_wrong_bearer_token_gets_auth_required_at_initialize_and_is_closed() {
    let hub = TestHub::with_principals(&["explorer"], "").await;
    let mut wrong = hub
        .ws_connect_with("wrong", &[("Authorization", "Bearer not-the-token")])
        .await
        .expect("the upgrade itself is not refused");
    // Even with a right authToken: the bearer is wrong.
    let response = wrong.initialize(Some(&hub.token)).await;
    expect_error(&response, code::AUTH_REQUIRED);
    wrong.wait_closed().await;

    // A bearer and an authToken of different principals do not mix.
    let mut mixed = hub
        .ws_connect_with(
            "mixed",
            &[("Authorization", &bearer(&token_of("explorer")))],
        )
        .await
        .unwrap();
    expect_error(
        &mixed.initialize(Some(&hub.token)).await,
        code::AUTH_REQUIRED,
    );
    mixed.wait_closed().await;

    // Without a bearer, a missing authToken is refused as on the Unix socket.
    let mut missing = hub.ws_connect("missing").await;
    expect_error(&missing.initialize(None).await, code::AUTH_REQUIRED);
    missing.wait_closed().await;
}

#[tokio::test]
async fn an_origin_outside_the_allow_list_is_refused_with_403() {
    let hub = TestHub::start().await;
    for origin in ["http://evil.example", "null", "http://localhost:5173"] {
        let refused = hub.ws_connect_with("page", &[("Origin", origin)]).await;
        assert_eq!(refused.err(), Some(403), "Origin {origin}");
        let (status, _) = hub.http_get("/metrics", &[("Origin", origin)]).await;
        assert_eq!(status, 403, "GET /metrics with Origin {origin}");
    }
    // No Origin: a non-browser client.
    let mut tool = hub.ws_connect("tool").await;
    tool.initialize_ok(Some(&hub.token)).await;
}

#[tokio::test]
async fn a_configured_origin_is_upgraded() {
    let hub = TestHub::with_config("[hub]\nallowed_origins = [\"http://localhost:5173\"]\n").await;
    let mut page = hub
        .ws_connect_with("page", &[("Origin", "http://localhost:5173")])
        .await
        .expect("101 for an allowed origin");
    page.initialize_ok(Some(&hub.token)).await;
    expect_result(&page.request("ping", json!(null)).await);
    let other = hub
        .ws_connect_with("other", &[("Origin", "http://localhost:5174")])
        .await;
    assert_eq!(other.err(), Some(403));
}

#[tokio::test]
async fn websocket_and_unix_socket_clients_route_to_each_other_byte_for_byte() {
    let hub = TestHub::start().await;
    let mut unix_owner = hub.client("unix-owner").await;
    let unix_service = unix_owner.register(json!({"on": "unix"})).await;
    let mut ws = hub.ws_connect("ws").await;
    ws.initialize_ok(Some(&hub.token)).await;
    let ws_service = ws.register(json!({"on": "ws"})).await;

    let params = r#"{ "x" : 1.50 }"#;
    ws.send_line(&format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"clientService/request","params":{{"serviceId":"{unix_service}","method":"echo","params":{params}}}}}"#
    ))
    .await;
    let handle = unix_owner.handle_request().await;
    assert_eq!(handle["params"]["senderClientId"], ws.client_id.as_str());
    assert_eq!(raw_member(&handle.raw, &["params", "params"]), params);
    unix_owner
        .send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{params}}}"#,
            handle["id"]
        ))
        .await;
    let answer = ws.response(&json!(9)).await;
    assert_eq!(answer["result"], json!({"x": 1.5}));

    unix_owner
        .notify_service(&ws_service, "hello", json!("from unix"))
        .await;
    let note = ws
        .receive(is_method("clientService/notification"), WAIT)
        .await;
    assert_eq!(
        note["params"]["senderClientId"],
        unix_owner.client_id.as_str()
    );
    assert_eq!(note["params"]["params"], "from unix");
    expect_all_silent([&mut ws, &mut unix_owner]).await;
}

#[tokio::test]
async fn binary_frames_are_accepted_and_a_raw_newline_in_a_frame_becomes_a_space() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    let mut ws = hub.ws_connect("ws").await;
    ws.initialize_ok(Some(&hub.token)).await;

    ws.send_binary(br#"{"jsonrpc":"2.0","id":"bin","method":"ping"}"#)
        .await;
    assert_eq!(
        expect_result(&ws.response(&json!("bin")).await),
        Value::Null
    );

    ws.send_line(&format!(
        "{{\"jsonrpc\":\"2.0\",\n\"method\":\"clientService/notify\",\"params\":{{\"serviceId\":\"{service}\",\"method\":\"m\",\"params\":{{\"a\":\n1}}}}}}"
    ))
    .await;
    let note = owner.next().await;
    assert_eq!(raw_member(&note.raw, &["params", "params"]), r#"{"a": 1}"#);
}

#[tokio::test]
async fn a_message_in_fragments_is_assembled_and_bounded_as_a_whole() {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    let fragment = |text: &str, data: Data, fin: bool| {
        Frame::message(text.as_bytes().to_vec(), OpCode::Data(data), fin)
    };
    let hub = TestHub::with_config(
        "[limits]\nmaxMessageBytes = 4096\nmaxMetadataBytes = 64\nmaxErrorDataBytes = 64",
    )
    .await;
    let mut ws = hub.ws_connect("ws").await;
    ws.initialize_ok(Some(&hub.token)).await;
    // A ping in between is answered by the codec and changes nothing.
    ws.send_frame(fragment(r#"{"jsonrpc":"2.0","#, Data::Text, false))
        .await;
    ws.send_frame(Frame::ping(b"are you there".to_vec())).await;
    ws.send_frame(fragment(r#""id":"frag","#, Data::Continue, false))
        .await;
    ws.send_frame(fragment(r#""method":"ping"}"#, Data::Continue, true))
        .await;
    assert_eq!(
        expect_result(&ws.response(&json!("frag")).await),
        Value::Null
    );

    // Fragments each under the bound, together over it: -32600, closed.
    let half = format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"ping","params":"{}"#,
        "x".repeat(2100)
    );
    ws.send_frame(fragment(&half, Data::Text, false)).await;
    ws.send_frame(fragment(&"y".repeat(2100), Data::Continue, false))
        .await;
    let answer = ws.next().await;
    assert_eq!(answer["id"], Value::Null);
    expect_error(&answer, code::INVALID_REQUEST);
    assert_eq!(answer["error"]["data"]["limit"], "maxMessageBytes");
    ws.wait_closed().await;

    // A continuation of nothing is a protocol error: the connection closes.
    let mut ws = hub.ws_connect("stray").await;
    ws.initialize_ok(Some(&hub.token)).await;
    ws.send_frame(fragment("{}", Data::Continue, true)).await;
    ws.wait_closed().await;
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn a_text_frame_that_is_not_utf8_closes_only_its_connection() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::http::HeaderValue;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::Message;

    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    let service = owner.register(json!({})).await;
    // A notification to the owner with one byte that is not UTF-8 (0xff)
    // inside a string: the hub must not take it for text.
    let mut not_utf8 = format!(
        r#"{{"jsonrpc":"2.0","method":"clientService/notify","params":{{"serviceId":"{service}","method":"m","params":"?"}}}}"#
    )
    .into_bytes();
    let at = not_utf8.iter().position(|&b| b == b'?').unwrap();
    not_utf8[at] = 0xff;

    // In a binary frame the hub's decoder finds it: -32700, and the
    // connection carries on.
    let mut binary = hub.ws_connect("binary").await;
    binary.initialize_ok(Some(&hub.token)).await;
    binary.send_binary(&not_utf8).await;
    let answer = binary.next().await;
    expect_error(&answer, code::PARSE_ERROR);
    assert_eq!(answer["id"], Value::Null);

    // In a text frame the frame reader finds it: the connection is closed
    // with 1007, nothing reaches the owner. Each raw connection is
    // initialized, so that the same bytes taken for text would be routed.
    let raw_initialized = || async {
        let mut request = hub.ws.as_str().into_client_request().unwrap();
        request.headers_mut().insert(
            "Authorization",
            HeaderValue::from_str(&bearer(&hub.token)).unwrap(),
        );
        let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersions": ["1.0.0"], "clientInfo": {"name": "text"}}});
        ws.send(Message::text(initialize.to_string()))
            .await
            .unwrap();
        let answer = tokio::time::timeout(WAIT, ws.next()).await.unwrap();
        let Some(Ok(Message::Text(answer))) = answer else {
            panic!("no answer to initialize: {answer:?}");
        };
        assert!(answer.contains("\"result\""), "{answer}");
        ws
    };
    let close_code = |mut ws: tokio_tungstenite::WebSocketStream<_>| async move {
        let close = tokio::time::timeout(WAIT, async {
            loop {
                match ws.next().await {
                    Some(Ok(Message::Close(close))) => return close,
                    Some(Ok(_)) => {}
                    other => panic!("no close frame: {other:?}"),
                }
            }
        })
        .await
        .expect("the hub closes a connection that sent a text message that is not UTF-8");
        close.map(|close| u16::from(close.code))
    };
    let mut text = raw_initialized().await;
    let frame = Frame::message(not_utf8.clone(), OpCode::Data(Data::Text), true);
    text.send(Message::Frame(frame)).await.unwrap();
    assert_eq!(close_code(text).await, Some(1007));

    // The same bytes as a text message in two fragments, split just before
    // the 0xff byte (each fragment's own check, had there been one, would
    // fail the second): fastwebsockets checks whole text frames only, so
    // the hub checks the assembled message. Also 1007.
    let fragments = [
        Frame::message(not_utf8[..at].to_vec(), OpCode::Data(Data::Text), false),
        Frame::message(not_utf8[at..].to_vec(), OpCode::Data(Data::Continue), true),
    ];
    let mut fragmented = raw_initialized().await;
    for fragment in fragments {
        fragmented.send(Message::Frame(fragment)).await.unwrap();
    }
    assert_eq!(close_code(fragmented).await, Some(1007));

    // A character split between two text fragments is no fault: the
    // assembled message is routed.
    let split = format!(
        r#"{{"jsonrpc":"2.0","method":"clientService/notify","params":{{"serviceId":"{service}","method":"m","params":"é"}}}}"#
    )
    .into_bytes();
    let middle = split.iter().position(|&b| b == 0xc3).unwrap() + 1;
    let mut whole = raw_initialized().await;
    for fragment in [
        Frame::message(split[..middle].to_vec(), OpCode::Data(Data::Text), false),
        Frame::message(split[middle..].to_vec(), OpCode::Data(Data::Continue), true),
    ] {
        whole.send(Message::Frame(fragment)).await.unwrap();
    }
    let note = owner.next().await;
    assert_eq!(note["params"]["params"], "é");

    // The owner got neither message; the binary sender still routes.
    expect_all_silent([&mut owner, &mut binary]).await;
    binary
        .notify_service(&service, "m", json!("still here"))
        .await;
    let note = owner.next().await;
    assert_eq!(note["params"]["params"], "still here");
    assert_hub_routes(&hub).await;
}

#[tokio::test]
async fn healthz_answers_ok_and_metrics_serve_prometheus_text() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    owner.register(json!({})).await;
    owner.subscribe().await;

    let (status, body) = hub.http_get("/healthz", &[]).await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    let (status, body) = hub.http_get("/metrics", &[]).await;
    assert_eq!(status, 200);
    for line in body.lines().filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            assert!(
                comment.starts_with("HELP ") || comment.starts_with("TYPE "),
                "{line}"
            );
            continue;
        }
        let (name, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        assert!(name.starts_with("switchboard_"), "{line}");
        value.parse::<f64>().unwrap_or_else(|_| panic!("{line}"));
    }
    // Counted while the /metrics request itself is not a connection.
    assert_eq!(metric_value(&body, "switchboard_connections"), 1);
    assert_eq!(metric_value(&body, "switchboard_services"), 1);
    assert_eq!(metric_value(&body, "switchboard_catalog_subscribers"), 1);
    for name in [
        "switchboard_notifications_forwarded_total",
        "switchboard_notifications_dropped_total{reason=\"shed\"}",
        "switchboard_requests_started_total",
        "switchboard_requests_completed_total",
        "switchboard_requests_failed_total{reason=\"timeout\"}",
        "switchboard_requests_in_flight",
        "switchboard_queued_bytes",
    ] {
        metric_value(&body, name);
    }
}

#[tokio::test]
async fn other_paths_and_foreign_hosts_are_refused() {
    let hub = TestHub::start().await;
    assert_eq!(hub.http_get("/nope", &[]).await.0, 404);
    assert_eq!(
        hub.http_get("/healthz", &[("Host", "evil.example:80")])
            .await
            .0,
        403
    );
    let url = hub.ws.clone() + "elsewhere";
    let request = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
        url.as_str(),
    )
    .unwrap();
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status().as_u16(), 404)
        }
        other => panic!("upgrade on another path: {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_reload_applies_a_new_origin_allow_list_at_once() {
    let hub = TestHub::start().await;
    let origin = [("Origin", "http://localhost:5173")];
    assert_eq!(hub.ws_connect_with("page", &origin).await.err(), Some(403));
    hub.reload_with("[hub]\nallowed_origins = [\"http://localhost:5173\"]\n")
        .unwrap();
    let mut page = hub
        .ws_connect_with("page", &origin)
        .await
        .expect("101 after the reload");
    page.initialize_ok(Some(&hub.token)).await;
}

#[tokio::test]
async fn a_websocket_owner_closing_removes_its_services_and_fails_its_requests() {
    let hub = TestHub::start().await;
    let mut watcher = hub.client("watcher").await;
    watcher.subscribe().await;
    let mut owner = hub.ws_connect("ws-owner").await;
    owner.initialize_ok(Some(&hub.token)).await;
    let service = owner.register(json!({})).await;
    let mut caller = hub.client("caller").await;
    let id = caller.request_service(&service, "slow", json!({})).await;
    owner.handle_request().await;

    owner.close().await;
    let answer = caller.response(&id).await;
    expect_error(&answer, code::SERVICE_GONE);
    assert_eq!(answer["error"]["data"]["reason"], "disconnected");
    watcher.action("clientServices/added").await;
    let removed = watcher.action("clientServices/removed").await;
    assert_eq!(removed["params"]["action"]["reason"], "disconnected");
    hub.assert_bookkeeping_released().await;
}
