//! Protocol versions (2025-03-26 to 2025-11-25 over `initialize`,
//! 2026-07-28 stateless with `server/discover`) and MCP 2025-11-25's tasks,
//! through a line client (rmcp's client cannot send `tasks` or a `task`).

use serde_json::{json, Value};

use crate::support::*;

async fn gateway_with_ev(
    hub: &TestHub,
) -> (TestProvider, std::sync::Arc<switchboard_mcp::Gateway>) {
    let serves = Serves {
        resources: vec![resource("test://ev/one")],
        prompts: vec![prompt("greet")],
        ..Serves::default()
    };
    let provider = TestProvider::start(direct(hub), "ev", serves).await;
    let gateway = gateway(hub).await;
    wait_for_provider(&gateway, "ev").await;
    (provider, gateway)
}

fn tool_names(answer: &Value) -> Vec<String> {
    answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {answer}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn each_version_with_initialize_is_negotiated_and_keeps_what_it_has() {
    let hub = hub().await;
    let (_provider, gateway) = gateway_with_ev(&hub).await;
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut client = RawClient::open(&gateway).await;
        let answer = client.initialize(version, json!({"sampling": {}})).await;
        let result = &answer["result"];
        assert_eq!(result["protocolVersion"], version, "{answer}");
        let capabilities = &result["capabilities"];
        assert_eq!(capabilities["resources"]["subscribe"], true);
        assert_eq!(capabilities["prompts"]["listChanged"], true);
        assert!(capabilities["completions"].is_object());
        assert!(capabilities["logging"].is_object());
        assert_eq!(capabilities["tasks"].is_object(), version == "2025-11-25");
        // Deprecated by 2026-07-28, alive here: subscribe and setLevel.
        let answer = client
            .request("resources/subscribe", json!({"uri": "test://ev/one"}))
            .await;
        assert_eq!(answer["result"], json!({}), "{version}: {answer}");
        let answer = client
            .request("logging/setLevel", json!({"level": "debug"}))
            .await;
        assert_eq!(answer["result"], json!({}), "{version}: {answer}");
        let answer = client.request("prompts/list", json!({})).await;
        assert_eq!(answer["result"]["prompts"][0]["name"], "ev__greet");
        assert!(answer["result"].get("resultType").is_none(), "{answer}");
    }
}

#[tokio::test]
async fn a_2026_07_28_client_discovers_and_calls_without_initialize() {
    let hub = hub().await;
    let (provider, gateway) = gateway_with_ev(&hub).await;
    let mut client = RawClient::open(&gateway).await;
    let meta = modern_meta(json!({}));
    let answer = client
        .request("server/discover", json!({"_meta": meta}))
        .await;
    let versions = &answer["result"]["supportedVersions"];
    for version in ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"] {
        assert!(
            versions.as_array().unwrap().contains(&json!(version)),
            "{answer}"
        );
    }
    assert!(
        answer["result"]["capabilities"]["prompts"].is_object(),
        "{answer}"
    );

    let answer = client.request("tools/list", json!({"_meta": meta})).await;
    assert!(tool_names(&answer).contains(&"ev__echo".to_owned()));
    assert_eq!(answer["result"]["resultType"], "complete");
    // Tasks are MCP 2025-11-25's here; a 2026-07-28 client is not offered
    // a tool that requires one.
    assert!(!tool_names(&answer).contains(&"ev__long".to_owned()));
    let answer = client
        .request(
            "tools/call",
            json!({"name": "ev__echo", "arguments": {"text": "stateless"}, "_meta": meta}),
        )
        .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "stateless",
        "{answer}"
    );
    assert_eq!(answer["result"]["resultType"], "complete");
    let answer = client
        .request(
            "resources/read",
            json!({"uri": "test://ev/one", "_meta": meta}),
        )
        .await;
    assert_eq!(
        answer["result"]["contents"][0]["text"],
        "ev read test://ev/one"
    );
    // Each request's own capabilities are what the provider is told, but
    // for what a 2026-07-28 client cannot be asked over this session.
    let declared = json!({"elicitation": {}, "experimental": {"x": {}}});
    let answer = client
        .request(
            "prompts/get",
            json!({"name": "ev__greet", "_meta": modern_meta(declared)}),
        )
        .await;
    assert!(answer["result"]["messages"].is_array(), "{answer}");
    let sent = &provider.seen.of("prompts/get")[0];
    assert_eq!(
        sent["client"]["capabilities"],
        json!({"experimental": {"x": {}}})
    );
    // A request without the metadata 2026-07-28 requires is refused.
    let answer = client.request("tools/list", json!({})).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // An unknown URI is -32602 there (2026-07-28 has no -32002).
    let answer = client
        .request("resources/read", json!({"uri": "other://x", "_meta": meta}))
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}

#[tokio::test]
async fn tasks_go_to_the_provider_that_created_them_for_the_session_that_asked() {
    let hub = hub().await;
    let (ev, gateway) = gateway_with_ev(&hub).await;
    let zeta = TestProvider::start(direct(&hub), "zeta", Serves::default()).await;
    wait_for_provider(&gateway, "zeta").await;
    let tasks = json!({"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}});

    // A client without tasks is not offered a tool that requires one.
    let mut plain = RawClient::open(&gateway).await;
    plain.initialize("2025-11-25", json!({})).await;
    let names = tool_names(&plain.request("tools/list", json!({})).await);
    assert!(!names.contains(&"ev__long".to_owned()));
    assert!(names.contains(&"ev__maybe_long".to_owned()));

    let mut one = RawClient::open(&gateway).await;
    one.initialize("2025-11-25", tasks.clone()).await;
    let answer = one.request("tools/list", json!({})).await;
    let long = answer["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "ev__long")
        .cloned()
        .expect("ev__long listed to a client with tasks");
    assert_eq!(long["execution"]["taskSupport"], "required");

    let answer = one
        .request(
            "tools/call",
            json!({"name": "ev__long", "arguments": {}, "task": {"ttl": 60000}}),
        )
        .await;
    assert_eq!(answer["result"]["task"]["taskId"], "ev-task-1", "{answer}");
    assert_eq!(ev.seen.of("tools/call")[0]["task"], json!({"ttl": 60000}));

    let mut two = RawClient::open(&gateway).await;
    two.initialize("2025-11-25", tasks).await;
    let answer = two
        .request(
            "tools/call",
            json!({"name": "zeta__long", "arguments": {}, "task": {}}),
        )
        .await;
    assert_eq!(
        answer["result"]["task"]["taskId"], "zeta-task-1",
        "{answer}"
    );

    let answer = one
        .request("tasks/get", json!({"taskId": "ev-task-1"}))
        .await;
    assert_eq!(answer["result"]["status"], "completed", "{answer}");
    let answer = one
        .request("tasks/result", json!({"taskId": "ev-task-1"}))
        .await;
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "ev result of ev-task-1"
    );
    let answer = one.request("tasks/list", json!({})).await;
    let ids: Vec<&str> = answer["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|task| task["taskId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["ev-task-1"], "{answer}");
    // Another provider's task (made for another session), or no task at
    // all: unknown, and no provider is asked.
    for unknown in ["zeta-task-1", "nobody-task"] {
        let answer = one.request("tasks/get", json!({"taskId": unknown})).await;
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert_eq!(answer["error"]["data"]["code"], "unknown_task", "{answer}");
    }
    assert!(zeta.seen.of("tasks/get").is_empty());
    assert_eq!(ev.seen.of("tasks/get").len(), 1);
    assert!(ev.seen.of("tasks/get")[0]["client"].is_object());
    let answer = one
        .request("tasks/cancel", json!({"taskId": "ev-task-1"}))
        .await;
    assert_eq!(answer["result"]["status"], "cancelled", "{answer}");
}
