//! The gateway's MCP surface over version-2 providers: prompts and
//! resources listed, named and routed; collisions; a list that does not
//! parse; list changes announced; levels and subscriptions passed on.

// Logging and resources/subscribe are what 2026-07-28 deprecates and
// clients on 2025-11-25 still use: the gateway must keep serving them.
#![allow(deprecated)]

use rmcp::model::{
    CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams,
    SetLevelRequestParams, SubscribeRequestParams,
};
use serde_json::{json, Value};

use crate::support::*;

fn serves(namespace: &str) -> Serves {
    Serves {
        resources: vec![
            resource(&format!("test://{namespace}/one")),
            resource("test://shared"),
        ],
        templates: vec![template(&format!("test://{namespace}/items/{{id}}"))],
        prompts: vec![prompt("greet")],
        broken_prompts: false,
    }
}

fn json_of<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap()
}

#[tokio::test]
async fn prompts_and_resources_of_two_providers_are_listed_named_and_routed() {
    let hub = hub().await;
    let zeta = TestProvider::start(direct(&hub), "zeta", serves("zeta")).await;
    let alpha = TestProvider::start(direct(&hub), "alpha", serves("alpha")).await;
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "zeta").await;
    wait_for_provider(&gateway, "alpha").await;
    let client = McpClient::connect(&gateway, "one", Answers::Always).await;
    let peer = client.service.peer();

    let prompts = within("prompts/list", peer.list_all_prompts())
        .await
        .unwrap();
    let mut names: Vec<String> = prompts.iter().map(|p| p.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["alpha__greet", "zeta__greet"]);
    assert_eq!(prompts[0].description.as_deref(), Some("the prompt greet"));

    // One URI both list: served by the first by namespace order (alpha),
    // listed once, and the collision counted.
    let resources = within("resources/list", peer.list_all_resources())
        .await
        .unwrap();
    let uris: Vec<String> = resources.iter().map(|r| r.uri.clone()).collect();
    assert_eq!(
        uris,
        ["test://alpha/one", "test://shared", "test://zeta/one"]
    );
    assert_eq!(gateway.tools().stats().resource_collisions, 1);
    let read = within(
        "resources/read",
        peer.read_resource(ReadResourceRequestParams::new("test://shared")),
    )
    .await
    .unwrap();
    assert_eq!(
        json_of(&read)["contents"][0]["text"],
        "alpha read test://shared"
    );
    assert!(zeta.seen.of("resources/read").is_empty());

    // A URI no provider lists goes to the provider whose template matches.
    let read = within(
        "read by template",
        peer.read_resource(ReadResourceRequestParams::new("test://zeta/items/7")),
    )
    .await
    .unwrap();
    assert_eq!(
        json_of(&read)["contents"][0]["text"],
        "zeta read test://zeta/items/7"
    );
    let templates = within("templates/list", peer.list_all_resource_templates())
        .await
        .unwrap();
    assert_eq!(templates.len(), 2);
    // The read carried `client` and its own call id.
    let sent = &zeta.seen.of("resources/read")[0];
    assert_eq!(
        sent["client"]["service"],
        json!(gateway.tools().callback_service_id())
    );
    assert!(sent["_meta"]["switchboard/call"].is_string());

    // And a URI nobody serves is MCP's resource-not-found.
    let error = within(
        "an unknown URI",
        peer.read_resource(ReadResourceRequestParams::new("other://x")),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("-32002"), "{error}");

    // A prompt goes to its provider under its bare name.
    let got = within(
        "prompts/get",
        peer.get_prompt(GetPromptRequestParams::new("zeta__greet")),
    )
    .await
    .unwrap();
    assert_eq!(
        json_of(&got)["messages"][0]["content"]["text"],
        "zeta prompt greet"
    );
    assert_eq!(zeta.seen.of("prompts/get")[0]["name"], "greet");
    assert!(alpha.seen.of("prompts/get").is_empty());

    // A completion of a prompt argument goes to that prompt's provider.
    let params: CompleteRequestParams = serde_json::from_value(json!({
        "ref": {"type": "ref/prompt", "name": "alpha__greet"},
        "argument": {"name": "topic", "value": "t"}}))
    .unwrap();
    let completed = within("completion/complete", peer.complete(params))
        .await
        .unwrap();
    assert_eq!(
        json_of(&completed)["completion"]["values"][0],
        "alpha completes"
    );
    assert_eq!(
        alpha.seen.of("completion/complete")[0]["ref"]["name"],
        "greet"
    );
}

#[tokio::test]
async fn a_list_that_does_not_parse_offers_nothing_of_that_kind_and_is_counted() {
    let hub = hub().await;
    let mut broken = serves("broken");
    broken.broken_prompts = true;
    let _broken = TestProvider::start(direct(&hub), "broken", broken).await;
    let _good = TestProvider::start(direct(&hub), "good", serves("good")).await;
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "broken").await;
    wait_for_provider(&gateway, "good").await;
    eventually("the broken list counted", || {
        gateway.tools().stats().lists_failed >= 1
    })
    .await;
    let client = McpClient::connect(&gateway, "one", Answers::Always).await;
    let peer = client.service.peer();
    let prompts = within("prompts/list", peer.list_all_prompts())
        .await
        .unwrap();
    let names: Vec<String> = prompts.iter().map(|p| p.name.clone()).collect();
    assert_eq!(names, ["good__greet"]);
    // Everything else of that provider is still served.
    let result = client
        .call("broken__echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(text_of(&result), "still here");
    let resources = within("resources/list", peer.list_all_resources())
        .await
        .unwrap();
    assert!(resources.iter().any(|r| r.uri == "test://broken/one"));
}

#[tokio::test]
async fn a_changed_revision_is_listed_again_and_announced() {
    let hub = hub().await;
    let provider = TestProvider::start(direct(&hub), "ev", serves("ev")).await;
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "ev").await;
    let client = McpClient::connect(&gateway, "one", Answers::Always).await;
    let mut changed = serves("ev");
    changed.prompts.push(prompt("farewell"));
    changed.resources.push(resource("test://ev/two"));
    let prompts_changed = client.events.prompts_changed.notified();
    let resources_changed = client.events.resources_changed.notified();
    provider.change(changed).await;
    within("prompts/list_changed", prompts_changed).await;
    within("resources/list_changed", resources_changed).await;
    let peer = client.service.peer();
    let prompts = within("prompts/list", peer.list_all_prompts())
        .await
        .unwrap();
    assert_eq!(prompts.len(), 2);
    let resources = within("resources/list", peer.list_all_resources())
        .await
        .unwrap();
    assert_eq!(resources.len(), 3);
}

#[tokio::test]
async fn levels_subscriptions_and_roots_changes_are_passed_on() {
    let hub = hub().await;
    let provider = TestProvider::start(direct(&hub), "ev", serves("ev")).await;
    let gateway = gateway(&hub).await;
    wait_for_provider(&gateway, "ev").await;
    let client = McpClient::connect(&gateway, "one", Answers::Always).await;
    let peer = client.service.peer();

    // A log message of no call before any level was set is dropped.
    let service = gateway.tools().callback_service_id().unwrap();
    let note = json!({"level": "error", "data": "early"});
    provider
        .notify(&service, "notifications/message", note)
        .await;
    eventually("the early message dropped", || {
        gateway.tools().stats().callbacks.dropped_notifications >= 1
    })
    .await;

    let level: SetLevelRequestParams = serde_json::from_value(json!({"level": "warning"})).unwrap();
    within("logging/setLevel", peer.set_level(level))
        .await
        .unwrap();
    let set = provider.seen.of("logging/setLevel");
    assert_eq!(set[0]["level"], "warning");
    assert_eq!(set[0]["client"]["service"], json!(service));
    for (level, data) in [("info", "too low"), ("error", "wanted")] {
        let note = json!({"level": level, "data": data});
        provider
            .notify(&service, "notifications/message", note)
            .await;
    }
    client
        .wait_for("the wanted log message", |events| {
            !events.logs.lock().is_empty()
        })
        .await;
    let logs: Vec<Value> = client
        .events
        .logs
        .lock()
        .iter()
        .map(|l| l.data.clone())
        .collect();
    assert_eq!(logs, [json!("wanted")]);

    // Subscriptions: the provider is asked; updates of that URI arrive,
    // others are dropped.
    within(
        "resources/subscribe",
        peer.subscribe(SubscribeRequestParams::new("test://ev/one")),
    )
    .await
    .unwrap();
    assert_eq!(
        provider.seen.of("resources/subscribe")[0]["uri"],
        "test://ev/one"
    );
    let dropped = gateway.tools().stats().callbacks.dropped_notifications;
    for uri in ["test://ev/other", "test://ev/one"] {
        provider
            .notify(
                &service,
                "notifications/resources/updated",
                json!({"uri": uri}),
            )
            .await;
    }
    client
        .wait_for("the update", |events| !events.updated.lock().is_empty())
        .await;
    assert_eq!(*client.events.updated.lock(), ["test://ev/one"]);
    eventually("the other update dropped", || {
        gateway.tools().stats().callbacks.dropped_notifications > dropped
    })
    .await;

    // The client's roots changed: the provider is told, with `client`.
    within(
        "roots/list_changed",
        client.service.peer().notify_roots_list_changed(),
    )
    .await
    .unwrap();
    eventually("roots/list_changed passed on", || {
        provider_roots_changed(&provider)
    })
    .await;
    let changed = &provider.seen.of("notifications/roots/list_changed")[0];
    assert_eq!(changed["client"]["service"], json!(service));
}

/// Whether the provider heard `notifications/roots/list_changed`.
fn provider_roots_changed(provider: &TestProvider) -> bool {
    provider.seen.of("notifications/roots/list_changed").len() == 1
}
