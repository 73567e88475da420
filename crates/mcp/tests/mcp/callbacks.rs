//! What providers send back during calls: to the MCP client that made the
//! call and no other, and never for a call that is not in flight to a
//! service of the sender's principal.

// Logging and resources/subscribe are what 2026-07-28 deprecates and
// clients on 2025-11-25 still use: the gateway must keep serving them.
#![allow(deprecated)]

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

async fn ev_provider(hub: &TestHub) -> TestProvider {
    TestProvider::start(as_principal(hub, EV_TOKEN), "ev", Serves::default()).await
}

#[tokio::test]
async fn sampling_elicitation_and_roots_reach_the_client_that_made_the_call() {
    let hub = hub().await;
    let provider = ev_provider(&hub).await;
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "ev").await;
    let client = McpClient::connect(&gateway, "one", Answers::Always).await;

    let result = client
        .call("ev__sample", json!({"text": "a haiku"}))
        .await
        .unwrap();
    assert!(text_of(&result).contains("one answers a haiku"), "{result}");
    let result = client
        .call("ev__elicit", json!({"text": "your name?"}))
        .await
        .unwrap();
    assert!(text_of(&result).contains("accept"), "{result}");
    let result = client.call("ev__roots", json!({})).await.unwrap();
    assert!(text_of(&result).contains("file:///work"), "{result}");
    assert_eq!(*client.events.sampled.lock(), ["a haiku"]);
    assert_eq!(*client.events.elicited.lock(), ["your name?"]);
    assert_eq!(*client.events.roots_asked.lock(), 1);

    // The call carried `client`: the callback service and what the client
    // declared at initialize.
    let call = &provider.seen.of("tools/call")[0];
    assert_eq!(
        call["client"]["service"],
        json!(gateway.tools().callback_service_id())
    );
    assert!(
        call["client"]["capabilities"]["sampling"].is_object(),
        "{call}"
    );
    assert!(call["tool_call_id"].as_str().unwrap().starts_with("sbc"));
    assert_eq!(gateway.tools().stats().callbacks.refused_requests, 0);
}

#[tokio::test]
async fn two_clients_on_one_gateway_each_get_only_their_own_sampling_requests() {
    let hub = hub().await;
    let _provider = ev_provider(&hub).await;
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "ev").await;
    let one = McpClient::connect(&gateway, "one", Answers::Always).await;
    let two = McpClient::connect(&gateway, "two", Answers::Always).await;
    let (first, second) = tokio::join!(
        one.call("ev__sample", json!({"text": "for one"})),
        two.call("ev__sample", json!({"text": "for two"})),
    );
    assert!(text_of(&first.unwrap()).contains("one answers for one"));
    assert!(text_of(&second.unwrap()).contains("two answers for two"));
    assert_eq!(*one.events.sampled.lock(), ["for one"]);
    assert_eq!(*two.events.sampled.lock(), ["for two"]);
}

#[tokio::test]
async fn a_callback_naming_no_call_in_flight_is_refused_and_counted() {
    let hub = hub().await;
    let provider = ev_provider(&hub).await;
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "ev").await;
    let client = McpClient::connect(&gateway, "one", Answers::Always).await;
    let service = gateway.tools().callback_service_id().unwrap();
    for params in [
        json!({"messages": [], "maxTokens": 1, "_meta": {"switchboard/call": "sbc999-1"}}),
        json!({"messages": [], "maxTokens": 1}),
    ] {
        let error = provider
            .client
            .request::<Value>(&service, "sampling/createMessage", &params)
            .await
            .unwrap_err();
        let switchboard_client::Error::Rpc(error) = error else {
            panic!("not an error answer: {error}")
        };
        assert_eq!(error.code, -32602);
        assert_eq!(error.data().unwrap()["code"], "unknown_call");
    }
    // Notifications naming nothing are dropped (and counted).
    provider
        .notify(
            &service,
            "notifications/progress",
            json!({"progressToken": "sbc999-1", "progress": 1}),
        )
        .await;
    eventually("the stray progress dropped", || {
        gateway.tools().stats().callbacks.dropped_notifications >= 1
    })
    .await;
    assert_eq!(gateway.tools().stats().callbacks.refused_requests, 2);
    assert!(client.events.sampled.lock().is_empty());
    assert!(client.events.progress.lock().is_empty());
}

#[tokio::test]
async fn a_callback_naming_another_principals_call_is_refused() {
    let hub = hub().await;
    let provider = ev_provider(&hub).await;
    let intruder = switchboard_client::Client::connect_with(switchboard_client::ConnectOptions {
        endpoint: as_principal(&hub, INTRUDER_TOKEN),
        client_name: "intruder".into(),
    })
    .await
    .unwrap();
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "ev").await;
    let client = McpClient::connect(&gateway, "one", Answers::NeverElicit).await;
    // ev's call waits for its elicitation: the call is in flight.
    let call = {
        let peer = client.service.peer().clone();
        tokio::spawn(async move {
            let params = rmcp::model::CallToolRequestParams::new("ev__elicit")
                .with_arguments(json!({"text": "wait"}).as_object().cloned().unwrap());
            tokio::time::timeout(WAIT, peer.call_tool(params)).await
        })
    };
    client
        .wait_for("ev's elicitation", |events| {
            !events.elicited.lock().is_empty()
        })
        .await;
    let call_id = provider.seen.of("tools/call")[0]["tool_call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let service = gateway.tools().callback_service_id().unwrap();
    let params = json!({"messages": [], "maxTokens": 1, "_meta": {"switchboard/call": call_id}});
    let error = intruder
        .request::<Value>(&service, "sampling/createMessage", &params)
        .await
        .unwrap_err();
    let switchboard_client::Error::Rpc(error) = error else {
        panic!("not an error answer: {error}")
    };
    assert_eq!(error.data().unwrap()["code"], "unknown_call");
    assert_eq!(gateway.tools().stats().callbacks.refused_requests, 1);
    assert!(client.events.sampled.lock().is_empty());
    // The intruder's progress for that call is dropped too.
    let token = json!(call_id);
    intruder
        .notify(
            &service,
            "notifications/progress",
            &json!({"progressToken": token, "progress": 5}),
        )
        .await
        .unwrap();
    eventually("the intruder's progress dropped", || {
        gateway.tools().stats().callbacks.dropped_notifications >= 1
    })
    .await;
    assert!(client.events.progress.lock().is_empty());
    call.abort();
}

#[tokio::test]
async fn an_elicitation_the_client_never_answers_ends_with_the_call() {
    // The ceiling bounds every request, the gateway's lists of the
    // provider too: short enough to wait out, long enough that a loaded
    // machine (CI runs these tests side by side) still lists in time.
    let ceiling = Duration::from_secs(4);
    let hub = hub_with_ceiling(ceiling.as_millis() as u64).await;
    let provider = ev_provider(&hub).await;
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "ev").await;
    let client = McpClient::connect(&gateway, "one", Answers::NeverElicit).await;
    let began = Instant::now();
    let result = client
        .call("ev__elicit", json!({"text": "never"}))
        .await
        .unwrap();
    // The call ends at its deadline (the hub's ceiling), not later.
    assert!(
        began.elapsed() < ceiling + Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(result["isError"], true, "{result}");
    // The client was asked, and told when the call ended that the
    // question is void.
    client
        .wait_for("notifications/cancelled for the elicitation", |events| {
            !events.cancelled.lock().is_empty()
        })
        .await;
    assert_eq!(*client.events.elicited.lock(), ["never"]);
    // The provider's question got an error, not an answer.
    eventually("the provider's elicitation settled", || {
        !provider.seen.callbacks.lock().is_empty()
    })
    .await;
    let (method, outcome) = provider.seen.callbacks.lock()[0].clone();
    assert_eq!(method, "elicitation/create");
    assert!(
        outcome.starts_with("error") || outcome.starts_with("failed"),
        "{outcome}"
    );
}

#[tokio::test]
async fn progress_and_log_messages_of_a_call_reach_its_client_under_its_token() {
    let hub = hub().await;
    let _provider = ev_provider(&hub).await;
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "ev").await;
    let client = McpClient::connect(&gateway, "one", Answers::Always).await;
    let other = McpClient::connect(&gateway, "two", Answers::Always).await;
    // rmcp's client sends a progress token with every request.
    let result = client.call("ev__progress", json!({})).await.unwrap();
    assert_eq!(text_of(&result), "done");
    client
        .wait_for("progress", |events| !events.progress.lock().is_empty())
        .await;
    let steps: Vec<f64> = client
        .events
        .progress
        .lock()
        .iter()
        .map(|p| p.progress)
        .collect();
    // Sent 1, 3, 2: the 2 does not increase, so it is dropped.
    assert_eq!(steps, [1.0, 3.0]);
    let token = serde_json::to_value(&client.events.progress.lock()[0].progress_token).unwrap();
    assert!(
        !token.as_str().is_some_and(|t| t.starts_with("sbc")),
        "the client's own token: {token}"
    );

    let result = client
        .call("ev__log", json!({"text": "a line"}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "logged");
    client
        .wait_for("the call's log message", |events| {
            !events.logs.lock().is_empty()
        })
        .await;
    assert_eq!(client.events.logs.lock()[0].data, json!("a line"));
    assert!(other.events.progress.lock().is_empty());
    assert!(other.events.logs.lock().is_empty());
}
