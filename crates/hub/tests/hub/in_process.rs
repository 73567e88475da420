//! In-process connections through the endpoint door (the MCP gateway's
//! behind `/mcp` are these): a client in the hub's own process, over an
//! in-memory pipe, is a client like any other: it authenticates, owns and
//! calls services, gets the same errors, counts against `maxConnections`,
//! and leaves nothing behind when its pipe closes.

use serde_json::{json, Value};
use switchboard_hub::endpoint::ConnectError;

use crate::support::*;

#[tokio::test]
async fn an_in_process_client_owns_a_service_a_socket_client_calls() {
    let hub = TestHub::start().await;
    let mut owner = hub.connect_in_process("in-process owner");
    owner.initialize_ok(Some(&hub.token)).await;
    let service = owner.register(json!({"name": "echo"})).await;

    let mut caller = hub.client("caller").await;
    let id = caller
        .request_service(&service, "echo", json!({"text": "hello"}))
        .await;
    let forwarded = owner.handle_request().await;
    assert_eq!(forwarded["params"]["method"], "echo", "{forwarded:?}");
    assert_eq!(forwarded["params"]["params"], json!({"text": "hello"}));
    owner
        .respond(&forwarded["id"], json!({"echoed": "hello"}))
        .await;
    let answer = caller.response(&id).await;
    assert_eq!(answer["result"], json!({"echoed": "hello"}), "{answer}");

    // And the other way round: it calls a socket client's service.
    let theirs = caller.register(json!({"name": "theirs"})).await;
    let id = owner.request_service(&theirs, "ping", json!([])).await;
    let forwarded = caller.handle_request().await;
    caller.respond(&forwarded["id"], json!("pong")).await;
    assert_eq!(owner.response(&id).await["result"], "pong");
}

#[tokio::test]
async fn an_in_process_client_authenticates_like_any_other() {
    let hub = TestHub::with_principals(&["reader"], "").await;
    let mut wrong = hub.connect_in_process("wrong token");
    let refused = wrong.initialize(Some("not-a-token")).await;
    assert!(refused.get("error").is_some(), "{refused}");

    let mut named = hub.connect_in_process("named");
    let init = named.initialize_ok(Some(&token_of("reader"))).await;
    assert_eq!(
        init["principal"],
        json!({"kind": "reserved", "module_id": "reader"}),
        "{init}"
    );
}

#[tokio::test]
async fn bad_input_on_an_in_process_connection_gets_its_error_and_the_connection_carries_on() {
    let hub = TestHub::start().await;
    let mut client = hub.connect_in_process("garbage");
    client.initialize_ok(Some(&hub.token)).await;
    client.send_line("{not json").await;
    expect_error(&client.next().await.value, code::PARSE_ERROR);
    client.send_line("[]").await;
    expect_error(&client.next().await.value, code::INVALID_REQUEST);
    expect_result(&client.request("ping", Value::Null).await);
}

#[tokio::test]
async fn in_process_connections_count_against_max_connections() {
    let hub = TestHub::with_config("[limits]\nmaxConnections = 2\n").await;
    let first = hub.client("first").await;
    let mut second = hub.connect_in_process("second");
    second.initialize_ok(Some(&hub.token)).await;
    match hub.door().connect() {
        Err(ConnectError::Full) => {}
        Ok(_) => panic!("a third connection past maxConnections = 2"),
        Err(other) => panic!("refused for another reason: {other}"),
    }
    assert_eq!(hub.metric("switchboard_connections_refused_total"), 1);
    // The socket's own refusal is unchanged, and a place frees up when a
    // connection closes.
    first.close().await;
    hub.eventually("the closed connection is released", |hub| {
        hub.metric("switchboard_connections") == 1
    })
    .await;
    let mut third = hub.connect_in_process("third");
    third.initialize_ok(Some(&hub.token)).await;
}

#[tokio::test]
async fn closing_the_pipe_tears_the_connection_down() {
    let hub = TestHub::start().await;
    let mut watcher = hub.client("watcher").await;
    watcher.subscribe().await;
    let mut owner = hub.connect_in_process("leaving");
    owner.initialize_ok(Some(&hub.token)).await;
    let service = owner.register(json!({"name": "short-lived"})).await;
    watcher.action("clientServices/added").await;

    let mut caller = hub.client("caller").await;
    let id = caller.request_service(&service, "slow", json!({})).await;
    owner.handle_request().await;
    owner.close().await;

    // The call in flight fails, the service leaves the catalog, and the
    // hub forgets the connection.
    let failed = caller.response(&id).await;
    assert!(failed.get("error").is_some(), "{failed}");
    watcher.action("clientServices/removed").await;
    hub.eventually("the in-process connection is released", |hub| {
        hub.metric("switchboard_connections") == 2
    })
    .await;
}
