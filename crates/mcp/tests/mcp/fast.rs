//! A plain `tools/call` (no `_meta`, no `task`) takes the gateway's fast
//! path around rmcp (`gateway/fast.rs`): the same answers as through rmcp,
//! its cancellation, and what still goes through rmcp.

use serde_json::{json, Value};

use crate::support::*;

async fn session(hub: &TestHub, version: &str, capabilities: Value) -> (TestProvider, RawClient) {
    let provider = TestProvider::start(direct(hub), "ev", Serves::default()).await;
    let gateway = gateway(hub).await;
    wait_for_provider(&gateway, "ev").await;
    let mut client = RawClient::open(&gateway).await;
    client.initialize(version, capabilities).await;
    (provider, client)
}

#[tokio::test]
async fn a_plain_call_is_answered_as_through_rmcp() {
    let hub = hub().await;
    let (provider, mut client) = session(&hub, "2025-06-18", json!({})).await;
    let plain = client
        .request(
            "tools/call",
            json!({"name": "ev__echo", "arguments": {"text": "hi"}}),
        )
        .await;
    // `_meta` takes the call through rmcp.
    let through_rmcp = client
        .request(
            "tools/call",
            json!({"name": "ev__echo", "arguments": {"text": "hi"}, "_meta": {}}),
        )
        .await;
    assert_eq!(plain["jsonrpc"], "2.0");
    assert_eq!(
        plain["result"], through_rmcp["result"],
        "{plain} {through_rmcp}"
    );
    assert_eq!(plain["result"]["content"][0]["text"], "hi");
    // No arguments at all: an empty object for the provider.
    let bare = client
        .request("tools/call", json!({"name": "ev__echo"}))
        .await;
    assert_eq!(bare["result"]["content"][0]["text"], "", "{bare}");
    let calls = provider.seen.of("tools/call");
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0]["arguments"], json!({"text": "hi"}));
    assert_eq!(calls[2]["arguments"], json!({}));
}

#[tokio::test]
async fn string_ids_and_errors_keep_their_shape() {
    let hub = hub().await;
    let (_provider, mut client) = session(&hub, "2025-03-26", json!({})).await;
    client
        .send(
            json!({"jsonrpc": "2.0", "id": "call \"one\"", "method": "tools/call",
                     "params": {"name": "ev__echo", "arguments": {"text": "s"}}}),
        )
        .await;
    let answer = client.next_message().await;
    assert_eq!(answer["id"], "call \"one\"", "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "s");
    // The provider's error, as a tool result (the slow path's table).
    let unknown = client
        .request("tools/call", json!({"name": "ev__nothing_here"}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    // Arguments that are not an object go to rmcp, which refuses them.
    let odd = client
        .request("tools/call", json!({"name": "ev__echo", "arguments": [1]}))
        .await;
    assert!(odd.get("error").is_some(), "{odd}");
    // The session carries on.
    let after = client
        .request(
            "tools/call",
            json!({"name": "ev__echo", "arguments": {"text": "on"}}),
        )
        .await;
    assert_eq!(after["result"]["content"][0]["text"], "on", "{after}");
}

#[tokio::test]
async fn a_cancelled_plain_call_is_cancelled_at_the_hub_and_never_answered() {
    let hub = hub().await;
    let (provider, mut client) = session(&hub, "2025-06-18", json!({"elicitation": {}})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
                     "params": {"name": "ev__elicit", "arguments": {"text": "wait"}}}))
        .await;
    // The call is in flight: its provider asks the client, which never answers.
    let asked = client.next_message().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 41, "reason": "changed my mind"}}),
        )
        .await;
    let cancelled = "switchboard_requests_failed_total{reason=\"cancelled\"} 1";
    eventually("the hub saw the call cancelled", || {
        hub.metrics().contains(cancelled)
    })
    .await;
    // Nothing answers 41; the next call is answered.
    let next = client
        .request(
            "tools/call",
            json!({"name": "ev__echo", "arguments": {"text": "next"}}),
        )
        .await;
    assert_eq!(next["result"]["content"][0]["text"], "next", "{next}");
    let answered_41 = client
        .notifications
        .iter()
        .any(|message| message["id"] == 41 && message.get("method").is_none());
    assert!(!answered_41, "{:?}", client.notifications);
    assert_eq!(provider.seen.of("tools/call").len(), 2);
}

/// A cancel that arrives once the call's answer is on its way (MCP allows
/// the race: the client must ignore an answer after its cancel) stops
/// nothing and breaks nothing: each call is answered at most once, with
/// its own result or not at all, and the session carries on. Fifty calls,
/// each written with its cancel right behind it, so that the race goes
/// both ways; and a cancel for an id that is done, or was never sent.
#[tokio::test]
async fn a_cancel_that_comes_after_the_answer_is_harmless() {
    let hub = hub().await;
    let (provider, mut client) = session(&hub, "2025-06-18", json!({})).await;
    for id in 100..150 {
        client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": "ev__echo", "arguments": {"text": format!("call {id}")}}}))
            .await;
        // Each a little later than the one before: the first cancels
        // reach the call before it leaves, the last ones after its answer.
        for _ in 100..id {
            tokio::task::yield_now().await;
        }
        client
            .send(
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": id, "reason": "too late"}}),
            )
            .await;
    }
    let done = client
        .request(
            "tools/call",
            json!({"name": "ev__echo", "arguments": {"text": "after"}}),
        )
        .await;
    assert_eq!(done["result"]["content"][0]["text"], "after", "{done}");
    // Answers still on their way once the last call was answered.
    for id in [100, 0, 9999] {
        client
            .send(
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": id}}),
            )
            .await;
    }
    let again = client
        .request(
            "tools/call",
            json!({"name": "ev__echo", "arguments": {"text": "again"}}),
        )
        .await;
    assert_eq!(again["result"]["content"][0]["text"], "again", "{again}");

    let mut answered = std::collections::BTreeSet::new();
    for message in &client.notifications {
        let Some(id) = message["id"].as_i64() else {
            panic!("only answers to the cancelled calls are expected: {message}");
        };
        assert!((100..150).contains(&id), "{message}");
        assert!(answered.insert(id), "{id} was answered twice");
        assert_eq!(
            message["result"]["content"][0]["text"],
            format!("call {id}"),
            "an answer after a cancel is the call's own result: {message}"
        );
    }
    // The race went both ways: early cancels stopped their calls, late
    // ones came after the answer (45 of 50 here).
    assert!(
        !answered.is_empty() && answered.len() < 50,
        "answered after a cancel: {answered:?}"
    );
    // Every call the provider ran is one the client sent, once.
    let ran = provider.seen.of("tools/call");
    assert!(
        ran.len() >= answered.len() + 2 && ran.len() <= 52,
        "{}",
        ran.len()
    );
}

#[tokio::test]
async fn before_initialize_is_answered_a_call_goes_through_rmcp() {
    let hub = hub().await;
    let provider = TestProvider::start(direct(&hub), "ev", Serves::default()).await;
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "ev").await;
    let mut client = RawClient::open(&gateway).await;
    // A 2026-07-28 request carries its own `_meta`: never the fast path.
    let modern = client
        .request(
            "tools/call",
            json!({"name": "ev__echo", "arguments": {"text": "m"},
                   "_meta": modern_meta(json!({}))}),
        )
        .await;
    assert_eq!(modern["result"]["content"][0]["text"], "m", "{modern}");
    assert_eq!(modern["result"]["resultType"], "complete", "{modern}");
    assert_eq!(provider.seen.of("tools/call").len(), 1);
}
