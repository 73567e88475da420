//! `switchboard provide-mcp` as a version-2 provider
//! (`docs/reference/tool-calls.md` section 9), with real processes: a hub,
//! `provide-mcp` around `mcp-test-server`, and hub clients that each
//! register a callback service and answer what the server asks.

use std::time::Duration;

use crate::support::callback::*;
use crate::support::mcp::{marker_lines, provider_id, provider_id_except, McpHub};
use crate::support::HubProcess;
use serde_json::{json, Value};
use switchboard_client::{Error, Selector};

const PRINCIPALS: &str = r#"
[principals.alice]
token = "alice-token-0123456789"

[principals.bob]
token = "bob-token-0123456789"

[[grants]]
from = "*"
to = "*"
allow = ["discover", "request", "notify"]
"#;

/// How long "nothing else arrives" is watched for.
const QUIET: Duration = Duration::from_millis(300);

/// A hub, `provide-mcp` for namespace `everything`, its service id.
async fn hosted() -> (HubProcess, crate::support::mcp::Process, String) {
    let hub = HubProcess::start();
    let provider = hub.provide("everything");
    let watcher = hub.client("watcher").await;
    let service = provider_id(&watcher, "everything").await;
    (hub, provider, service)
}

async fn caller(hub: &HubProcess, name: &str, capabilities: Value) -> Caller {
    Caller::register(name, hub.client(name).await, capabilities, Elicit::Accept).await
}

fn error_of(answer: Result<Value, Error>) -> (i64, String, Value) {
    match answer {
        Err(Error::Rpc(error)) => (
            error.code,
            error.message.clone(),
            error.data().unwrap_or(Value::Null),
        ),
        other => panic!("expected an error answer, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_2_method_answers_through_provide_mcp() {
    let (hub, _provider, service) = hosted().await;
    let alice = caller(&hub, "alice", every_capability()).await;
    let catalog = alice.client.catalog().await.unwrap();
    let selector = Selector::parse("protocol=tool-provider,namespace=everything").unwrap();
    let metadata = catalog.select(&selector)[0].metadata.clone();
    assert_eq!(metadata["version"], 2);
    assert_eq!(
        metadata["capabilities"]["resources"],
        json!({"subscribe": true, "listChanged": true})
    );
    assert_eq!(
        metadata["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    assert_eq!(
        (&metadata["resourcesRevision"], &metadata["promptsRevision"]),
        (&json!(1), &json!(1))
    );

    let tools = alice.ask(&service, "tools/list", json!({})).await.unwrap();
    let research = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "research")
        .unwrap();
    assert_eq!(research["execution"], json!({"taskSupport": "required"}));
    assert_eq!(research["title"], "Research");

    // The server lists one resource per page: the answer is the whole list.
    let resources = alice
        .ask(&service, "resources/list", json!({}))
        .await
        .unwrap();
    let uris: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(uris, ["test://text", "test://blob"]);
    assert!(resources.get("nextCursor").is_none());
    let templates = alice
        .ask(&service, "resources/templates/list", json!({}))
        .await
        .unwrap();
    assert_eq!(
        templates["resourceTemplates"][0]["uriTemplate"],
        "test://items/{id}"
    );
    let read = alice
        .ask(&service, "resources/read", json!({"uri": "test://text"}))
        .await
        .unwrap();
    assert_eq!(read["contents"][0]["text"], "hello, resources");
    let blob = alice
        .ask(&service, "resources/read", json!({"uri": "test://blob"}))
        .await
        .unwrap();
    assert_eq!(blob["contents"][0]["blob"], "AAECAw==");
    let item = alice
        .ask(&service, "resources/read", json!({"uri": "test://items/7"}))
        .await
        .unwrap();
    assert_eq!(item["contents"][0]["text"], "item 7");
    let (code, _, data) = error_of(
        alice
            .ask(&service, "resources/read", json!({"uri": "test://none"}))
            .await,
    );
    assert_eq!((code, data), (-32002, json!({"uri": "test://none"})));

    let prompts = alice
        .ask(&service, "prompts/list", json!({}))
        .await
        .unwrap();
    assert_eq!(prompts["prompts"][0]["arguments"][0]["name"], "name");
    let prompt = alice
        .ask(
            &service,
            "prompts/get",
            json!({"name": "greet", "arguments": {"name": "Ada"}}),
        )
        .await
        .unwrap();
    assert_eq!(prompt["messages"][0]["content"]["text"], "Hello, Ada!");
    let completion = alice
        .ask(
            &service,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "al"}}),
        )
        .await
        .unwrap();
    assert_eq!(
        completion["completion"]["values"],
        json!(["alice", "albert"])
    );
    let completion = alice
        .ask(
            &service,
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "test://items/{id}"}, "argument": {"name": "id", "value": "7"}}),
        )
        .await
        .unwrap();
    assert_eq!(completion["completion"]["values"], json!(["7"]));
    let (code, _, _) = error_of(alice.ask(&service, "no/such", json!({})).await);
    assert_eq!(code, -32601);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_elicitation_and_roots_reach_the_callers_callback_naming_the_call() {
    let (hub, _provider, service) = hosted().await;
    let alice = caller(&hub, "alice", every_capability()).await;
    let sampled = alice
        .call(&service, "sample", json!({"link": "token"}), "call-1")
        .await;
    assert_eq!(
        sampled["structuredContent"]["content"]["text"],
        "alice sampled for call-1"
    );
    let form = alice.call(&service, "elicit", json!({}), "call-2").await;
    assert_eq!(
        form["structuredContent"],
        json!({"action": "accept", "content": {"name": "alice"}})
    );
    let url = alice
        .call(&service, "elicit", json!({"mode": "url"}), "call-3")
        .await;
    assert_eq!(url["structuredContent"]["action"], "accept");
    let roots = alice.call(&service, "roots", json!({}), "call-4").await;
    assert_eq!(
        roots["structuredContent"]["roots"][0]["uri"],
        "file:///alice"
    );

    let heard = alice.heard();
    let asked: Vec<(&str, &str)> = heard
        .iter()
        .map(|h| {
            (
                h.method.as_str(),
                h.params["_meta"]["switchboard/call"]
                    .as_str()
                    .unwrap_or("none"),
            )
        })
        .collect();
    assert_eq!(
        asked,
        [
            ("sampling/createMessage", "call-1"),
            ("elicitation/create", "call-2"),
            ("elicitation/create", "call-3"),
            ("roots/list", "call-4"),
        ]
    );
    // MCP's params as the server sent them, the call's name added.
    assert_eq!(heard[0].params["maxTokens"], 100);
    assert_eq!(heard[2].params["mode"], "url");
    assert_eq!(heard[2].params["url"], "https://example.com/consent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_callers_each_get_only_their_own_callbacks() {
    let (hub, _provider, service) = hosted().await;
    let alice = caller(&hub, "alice", every_capability()).await;
    let bob = caller(&hub, "bob", every_capability()).await;
    // Neither request names its call: each is the only call in flight.
    let a = alice.call(&service, "sample", json!({}), "a-1").await;
    let b = bob.call(&service, "sample", json!({}), "b-1").await;
    assert_eq!(
        a["structuredContent"]["content"]["text"],
        "alice sampled for a-1"
    );
    assert_eq!(
        b["structuredContent"]["content"]["text"],
        "bob sampled for b-1"
    );
    tokio::time::sleep(QUIET).await;
    assert_eq!(alice.heard().len(), 1);
    assert_eq!(bob.heard().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_that_cannot_be_told_apart_get_the_ambiguity_error_never_a_cross_delivery()
{
    let (hub, _provider, service) = hosted().await;
    let alice = std::sync::Arc::new(caller(&hub, "alice", every_capability()).await);
    let bob = caller(&hub, "bob", every_capability()).await;
    let marker = hub.path("marker");
    let slow = tokio::spawn({
        let (alice, service, marker) = (alice.clone(), service.clone(), marker.clone());
        async move {
            alice
                .call(
                    &service,
                    "slow",
                    json!({"marker": marker, "seconds": 3}),
                    "a-slow",
                )
                .await
        }
    });
    switchboard_testkit::eventually("alice's call to run", || {
        marker_lines(&marker) == ["started"]
    })
    .await;

    let unnamed = bob.call(&service, "sample", json!({}), "b-1").await;
    assert_eq!(unnamed["isError"], true);
    assert_eq!(
        text(&unnamed),
        "error -32603: several calls are in flight and the request names none of them"
    );
    // Named by its call's progress token, it is told apart.
    let named = bob
        .call(&service, "sample", json!({"link": "token"}), "b-2")
        .await;
    assert_eq!(
        named["structuredContent"]["content"]["text"],
        "bob sampled for b-2"
    );
    slow.await.unwrap();
    tokio::time::sleep(QUIET).await;
    assert!(alice.heard().is_empty(), "{:?}", alice.heard());
    assert_eq!(bob.heard().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_capability_makes_the_server_see_method_not_found() {
    let (hub, _provider, service) = hosted().await;
    let plain = caller(&hub, "plain", json!({"elicitation": {"form": {}}})).await;
    let sampled = plain.call(&service, "sample", json!({}), "p-1").await;
    assert_eq!(
        text(&sampled),
        "error -32601: the client does not support sampling"
    );
    let roots = plain.call(&service, "roots", json!({}), "p-2").await;
    assert_eq!(
        text(&roots),
        "error -32601: the client does not support roots"
    );
    let url = plain
        .call(&service, "elicit", json!({"mode": "url"}), "p-3")
        .await;
    assert_eq!(
        text(&url),
        "error -32601: the client does not support URL elicitation"
    );
    let form = plain.call(&service, "elicit", json!({}), "p-4").await;
    assert_eq!(form["structuredContent"]["action"], "accept");
    // A call without `client` takes nothing back.
    let bare = plain
        .ask_bare(
            &service,
            "tools/call",
            &json!({"name": "sample", "arguments": {}}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        text(&bare),
        "error -32601: the client does not support sampling"
    );
    assert_eq!(plain.heard_of("elicitation/create").len(), 1);
    assert_eq!(plain.heard().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_of_a_call_goes_to_its_callers_callback_service_under_its_token() {
    let (hub, _provider, service) = hosted().await;
    let alice = caller(&hub, "alice", every_capability()).await;
    let body =
        json!({"name": "progress", "arguments": {"steps": 3}, "progress_token": {"mine": 1}});
    let done = alice.ask(&service, "tools/call", body).await.unwrap();
    assert_eq!(text(&done), "done");
    let progress = alice.wait_for("notifications/progress", 3).await;
    for (step, heard) in progress.iter().enumerate() {
        assert_eq!(heard.params["progressToken"], json!({"mine": 1}));
        assert_eq!(heard.params["progress"], (step + 1) as f64);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_fenced_by_its_call_key_and_an_interrupted_one_is_never_run_again() {
    let hub = HubProcess::start();
    let mut provider = hub.provide("everything");
    let alice = caller(&hub, "alice", every_capability()).await;
    let service = provider_id(&alice.client, "everything").await;
    let runs = hub.runs_file("everything");
    let research = |key: &str, delay: u64| {
        json!({"name": "research", "arguments": {"topic": "tides", "delay": delay},
               "call_key": key, "task": {"ttl": 60000}, "tool_call_id": key})
    };
    let created = alice
        .ask(&service, "tools/call", research("k-1", 0))
        .await
        .unwrap();
    let task_id = created["task"]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(created["task"]["status"], "working");
    let again = alice
        .ask(&service, "tools/call", research("k-1", 0))
        .await
        .unwrap();
    assert_eq!(again, created, "the same key is the same task");
    let result = alice
        .ask(&service, "tasks/result", json!({"taskId": task_id}))
        .await
        .unwrap();
    assert_eq!(text(&result), "research on tides: done");
    let got = alice
        .ask(&service, "tasks/get", json!({"taskId": task_id}))
        .await
        .unwrap();
    assert_eq!(got["status"], "completed");
    let listed = alice.ask(&service, "tasks/list", json!({})).await.unwrap();
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1);
    // Without a task the task-only tool is refused by the server.
    let (code, _, _) = error_of(
        alice
            .ask(
                &service,
                "tools/call",
                json!({"name": "research", "arguments": {}}),
            )
            .await,
    );
    assert_eq!(code, -32601);

    // Killed while the server creates the task: unknown for ever, never rerun.
    let pending = tokio::spawn({
        let (client, service, body) = (alice.client.clone(), service.clone(), research("k-2", 30));
        async move {
            let params = serde_json::value::to_raw_value(&body).unwrap();
            client
                .request_raw(&service, "tools/call", Some(&params), Default::default())
                .await
        }
    });
    switchboard_testkit::eventually("the second task's creation to start", || {
        marker_lines(&runs).len() == 3
    })
    .await;
    provider.kill9();
    assert!(pending.await.unwrap().is_err());
    let _restarted = hub.provide("everything");
    let service = provider_id_except(&alice.client, "everything", Some(&service)).await;
    for _ in 0..2 {
        let (code, message, data) =
            error_of(alice.ask(&service, "tools/call", research("k-2", 30)).await);
        assert_eq!(code, -32603, "{message} {data}");
        assert_eq!(data, json!({"code": "outcome_unknown", "call_key": "k-2"}));
    }
    // The settled one replays its task.
    let replayed = alice
        .ask(&service, "tools/call", research("k-1", 0))
        .await
        .unwrap();
    assert_eq!(replayed, created);
    assert_eq!(marker_lines(&runs), ["research", "research", "research"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tasks_of_another_principal_are_unknown() {
    let config = tempfile::tempdir().unwrap();
    let path = config.path().join("switchboard.toml");
    std::fs::write(&path, PRINCIPALS).unwrap();
    let hub = HubProcess::builder().config(&path).start();
    let _provider = hub.provide("everything");
    let alice = Caller::connect(&hub.socket(), "alice-token-0123456789").await;
    let alice = Caller::register("alice", alice, every_capability(), Elicit::Accept).await;
    let bob = Caller::connect(&hub.socket(), "bob-token-0123456789").await;
    let bob = Caller::register("bob", bob, every_capability(), Elicit::Accept).await;
    let service = provider_id(&alice.client, "everything").await;
    let body = json!({"name": "research", "arguments": {"seconds": 0}, "task": {}});
    let created = alice.ask(&service, "tools/call", body).await.unwrap();
    let task_id = created["task"]["taskId"].as_str().unwrap();
    alice
        .ask(&service, "tasks/get", json!({"taskId": task_id}))
        .await
        .unwrap();
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let (code, _, data) = error_of(bob.ask(&service, method, json!({"taskId": task_id})).await);
        assert_eq!(
            (code, data),
            (-32602, json!({"code": "unknown_task", "taskId": task_id}))
        );
    }
    let bobs = bob.ask(&service, "tasks/list", json!({})).await.unwrap();
    assert_eq!(bobs, json!({"tasks": []}));
    let alices = alice.ask(&service, "tasks/list", json!({})).await.unwrap();
    assert_eq!(alices["tasks"][0]["taskId"], task_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_requests_reach_the_client_of_the_call_that_created_it() {
    let (hub, _provider, service) = hosted().await;
    let alice = caller(&hub, "alice", every_capability()).await;
    let body = json!({"name": "research", "arguments": {"topic": "moss", "ask": "sampling", "seconds": 0.2},
                      "task": {}, "tool_call_id": "a-task"});
    let created = alice.ask(&service, "tools/call", body).await.unwrap();
    let task_id = created["task"]["taskId"].as_str().unwrap();
    let result = alice
        .ask(&service, "tasks/result", json!({"taskId": task_id}))
        .await
        .unwrap();
    assert_eq!(
        text(&result),
        "research on moss: done; the model said: alice sampled for a-task"
    );
    let asked = alice.heard_of("sampling/createMessage");
    assert_eq!(
        asked[0].params["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_gets_logs_at_its_level_and_a_calls_log_goes_to_its_caller_only() {
    let (hub, _provider, service) = hosted().await;
    let alice = caller(&hub, "alice", every_capability()).await;
    let bob = caller(&hub, "bob", every_capability()).await;
    alice
        .ask(&service, "logging/setLevel", json!({"level": "warning"}))
        .await
        .unwrap();
    bob.ask(&service, "logging/setLevel", json!({"level": "debug"}))
        .await
        .unwrap();
    let level = alice.call(&service, "level", json!({}), "a-level").await;
    assert_eq!(
        text(&level),
        "debug",
        "the server logs at the most verbose level asked"
    );

    alice
        .call(
            &service,
            "log",
            json!({"level": "info", "text": "chatter"}),
            "a-1",
        )
        .await;
    alice
        .call(
            &service,
            "log",
            json!({"level": "error", "text": "alarm"}),
            "a-2",
        )
        .await;
    bob.call(
        &service,
        "log",
        json!({"level": "error", "text": "mine", "link": "token"}),
        "b-3",
    )
    .await;
    let bobs = bob.wait_for("notifications/message", 3).await;
    let alices = alice.wait_for("notifications/message", 1).await;
    tokio::time::sleep(QUIET).await;
    let data = |heard: &[Heard]| {
        heard
            .iter()
            .map(|h| h.params["data"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(data(&bobs), ["chatter", "alarm", "mine"]);
    assert_eq!(data(&alice.heard_of("notifications/message")), ["alarm"]);
    assert_eq!(bobs[2].params["_meta"]["switchboard/call"], "b-3");
    assert!(alices[0].params["_meta"].get("switchboard/call").is_none());
    let (code, _, _) = error_of(
        alice
            .ask(&service, "logging/setLevel", json!({"level": "loud"}))
            .await,
    );
    assert_eq!(code, -32602);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_update_reaches_its_subscribers_only() {
    let (hub, _provider, service) = hosted().await;
    let alice = caller(&hub, "alice", every_capability()).await;
    let bob = caller(&hub, "bob", every_capability()).await;
    alice
        .ask(
            &service,
            "resources/subscribe",
            json!({"uri": "test://text"}),
        )
        .await
        .unwrap();
    let touched = bob
        .call(&service, "touch", json!({"uri": "test://text"}), "b-1")
        .await;
    assert_eq!(text(&touched), "touched");
    let updated = alice.wait_for("notifications/resources/updated", 1).await;
    assert_eq!(updated[0].params["uri"], "test://text");
    tokio::time::sleep(QUIET).await;
    assert!(bob.heard_of("notifications/resources/updated").is_empty());
    alice
        .ask(
            &service,
            "resources/unsubscribe",
            json!({"uri": "test://text"}),
        )
        .await
        .unwrap();
    let touched = bob
        .call(&service, "touch", json!({"uri": "test://text"}), "b-2")
        .await;
    assert_eq!(
        text(&touched),
        "not subscribed",
        "the server is unsubscribed with the last subscriber"
    );
    let (code, _, data) = error_of(
        alice
            .ask_bare(
                &service,
                "resources/subscribe",
                &json!({"uri": "test://text"}),
                None,
            )
            .await,
    );
    assert_eq!((code, &data["field"]), (-32602, &json!("client")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changes_bump_the_revisions_and_roots_changes_reach_the_server() {
    let (hub, _provider, service) = hosted().await;
    let alice = caller(&hub, "alice", every_capability()).await;
    let catalog = alice.client.catalog().await.unwrap();
    let selector = Selector::parse("protocol=tool-provider,namespace=everything").unwrap();
    alice
        .call(
            &service,
            "add_resource",
            json!({"uri": "test://new"}),
            "a-1",
        )
        .await;
    alice
        .call(&service, "add_prompt", json!({"name": "fresh"}), "a-2")
        .await;
    switchboard_testkit::eventually("both revisions to grow", || {
        let metadata = &catalog.select(&selector)[0].metadata;
        metadata["resourcesRevision"] == 2 && metadata["promptsRevision"] == 2
    })
    .await;
    let resources = alice
        .ask(&service, "resources/list", json!({}))
        .await
        .unwrap();
    assert_eq!(resources["resources"].as_array().unwrap().len(), 3);

    alice
        .client
        .notify(
            &service,
            "notifications/roots/list_changed",
            &json!({"client": alice.client_member()}),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let changes = alice
            .call(&service, "roots_changes", json!({}), "a-3")
            .await;
        if text(&changes) == "1" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never heard of the roots change"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_answers_ends_with_the_calls_timeout_and_the_server_goes_on() {
    let (hub, _provider, service) = hosted().await;
    let silent = Caller::register(
        "silent",
        hub.client("silent").await,
        every_capability(),
        Elicit::Never,
    )
    .await;
    let body = json!({"name": "elicit", "arguments": {}, "client": silent.client_member()});
    let (code, _, _) = error_of(
        silent
            .ask_bare(
                &service,
                "tools/call",
                &body,
                Some(Duration::from_millis(800)),
            )
            .await,
    );
    assert_eq!(code, -32051, "the hub's timeout of the call");
    silent.wait_for("elicitation/create", 1).await;
    // The provider and its server are free for the next call.
    let alice = caller(&hub, "alice", every_capability()).await;
    let sampled = alice.call(&service, "sample", json!({}), "a-1").await;
    assert_eq!(
        sampled["structuredContent"]["content"]["text"],
        "alice sampled for a-1"
    );
}
