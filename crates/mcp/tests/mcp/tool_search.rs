//! Tool search: 300 tools from 10 providers (server-everything's own tools
//! and nine servers people use, `tests/data/tool_search/corpus.json`), one
//! gateway listing them all and one with `tool_search = true`. The search
//! gateway's `tools/list` is at least 90 % smaller, and 50 queries written
//! from what a user wants done (`queries.json`, not copied from the
//! descriptions) find the intended tool in the top three at least 45 times.

use std::path::Path;

use rmcp::model::CallToolRequestParams;
use serde_json::{json, Value};
use switchboard_client::{handler_fn, method_not_found, reply, Client, Reply, Request};
use switchboard_mcp::Profile;
use switchboard_protocol::tool_call::ToolCallRequest;

use crate::support::*;

const PROFILES: &str = r#"
[profiles.search]
tool_search = true
pinned = ["git__status"]
"#;

fn data(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tool_search")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("the test data")).expect("JSON")
}

/// A version-2 provider serving `tools` under `namespace`; a call answers
/// which tool ran with which arguments.
async fn corpus_provider(hub: &TestHub, namespace: &str, tools: Value) -> Client {
    let client = Client::connect_with(switchboard_client::ConnectOptions {
        endpoint: direct(hub),
        client_name: format!("corpus {namespace}"),
    })
    .await
    .expect("the provider connects");
    let ns = namespace.to_owned();
    let handler = handler_fn(move |request: Request| {
        let (ns, tools) = (ns.clone(), tools.clone());
        async move {
            match request.method.as_str() {
                "tools/list" => reply(&json!({ "tools": tools })),
                "tools/call" => {
                    let call: ToolCallRequest = request.params()?;
                    let text = format!("{ns} ran {} with {}", call.name, call.arguments.get());
                    reply(&json!({"content": [{"type": "text", "text": text}]}))
                }
                other => Err(method_not_found(other)) as Reply,
            }
        }
    });
    let metadata = json!({
        "protocol": "tool-provider", "version": 2, "namespace": namespace,
        "capabilities": {"tools": {"listChanged": true}}, "toolsRevision": 1,
    });
    let service = client
        .register(&metadata, handler)
        .await
        .expect("the provider registers");
    std::mem::forget(service); // registered for the test's life
    client
}

async fn listed(client: &McpClient) -> Vec<rmcp::model::Tool> {
    within("tools/list", client.service.peer().list_all_tools())
        .await
        .expect("tools/list")
}

async fn call(client: &McpClient, name: &str, arguments: Value) -> rmcp::model::CallToolResult {
    let params = CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments.as_object().cloned().expect("an object"));
    within("tools/call", client.service.peer().call_tool(params))
        .await
        .expect("tools/call")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_shrinks_the_list_and_finds_the_tool_a_user_means() {
    let hub = hub().await;
    let corpus = data("corpus.json");
    let providers = corpus["providers"].as_array().expect("providers");
    let mut clients = Vec::new();
    for provider in providers {
        let namespace = provider["namespace"].as_str().unwrap();
        clients.push(corpus_provider(&hub, namespace, provider["tools"].clone()).await);
    }
    let total: usize = providers
        .iter()
        .map(|p| p["tools"].as_array().unwrap().len())
        .sum();
    assert_eq!((providers.len(), total), (10, 300));

    let profile = Profile::parse(PROFILES, Path::new("switchboard.toml"), "search").unwrap();
    let full = gateway(&hub).await;
    let searching = gateway_with(&hub, Some(profile)).await;
    for gateway in [&full, &searching] {
        eventually("every corpus tool in the gateway's table", || {
            gateway.tools().tools().tools().count() == total
        })
        .await;
    }
    let everything = McpClient::connect(&full, "full", Answers::Always).await;
    let client = McpClient::connect(&searching, "searcher", Answers::Always).await;

    // The list: every tool against two, and the pinned one.
    let all = listed(&everything).await;
    assert_eq!(all.len(), total);
    let few = listed(&client).await;
    let mut names: Vec<&str> = few.iter().map(|tool| tool.name.as_ref()).collect();
    names.sort();
    assert_eq!(names, ["call_tool", "git__status", "search_tools"]);
    let bytes = |tools: &[rmcp::model::Tool]| serde_json::to_vec(tools).unwrap().len();
    let (all_bytes, few_bytes) = (bytes(&all), bytes(&few));
    let shrink = 1.0 - few_bytes as f64 / all_bytes as f64;
    println!(
        "tools/list: {all_bytes} bytes for every tool, {few_bytes} with tool search ({:.1} % less)",
        shrink * 100.0
    );
    assert!(shrink >= 0.9, "only {:.1} % smaller", shrink * 100.0);

    // The queries, top three each.
    let queries = data("queries.json");
    let queries = queries.as_array().expect("queries");
    assert_eq!(queries.len(), 50);
    let mut misses = Vec::new();
    for entry in queries {
        let query = entry["query"].as_str().unwrap();
        let expect = entry["expect"].as_str().unwrap();
        let found = call(&client, "search_tools", json!({"query": query, "limit": 3})).await;
        let tools = found.structured_content.expect("structured content")["tools"].clone();
        let names: Vec<String> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect();
        assert!(names.len() <= 3, "{names:?}");
        if !names.iter().any(|name| name == expect) {
            misses.push(format!("{query:?}: wanted {expect}, got {names:?}"));
        }
    }
    let hits = queries.len() - misses.len();
    println!(
        "tool search: {hits} of {} queries found their tool in the top 3",
        queries.len()
    );
    assert!(
        hits >= 45,
        "{hits} of 50 in the top 3; missed:\n{}",
        misses.join("\n")
    );

    // A found tool runs through call_tool, under its name, with its arguments.
    let ran = call(
        &client,
        "call_tool",
        json!({"name": "git__log", "arguments": {"repo_path": "/src/app", "max_count": 3}}),
    )
    .await;
    let text = serde_json::to_value(&ran.content).unwrap()[0]["text"]
        .as_str()
        .expect("text content")
        .to_owned();
    // The server echoes the arguments it got; their key order depends on
    // serde_json's features in the build, so compare them as values.
    let echoed = text
        .strip_prefix("git ran log with ")
        .unwrap_or_else(|| panic!("unexpected answer {text:?}"));
    assert_eq!(
        serde_json::from_str::<Value>(echoed).unwrap(),
        json!({"repo_path": "/src/app", "max_count": 3})
    );

    // Mistakes are answered, and name what is wrong.
    for (name, arguments, wanted) in [
        ("search_tools", json!({}), "needs a query"),
        (
            "search_tools",
            json!({"query": "x", "limit": 0}),
            "limit must be",
        ),
        (
            "call_tool",
            json!({"arguments": {}}),
            "call_tool needs name",
        ),
        (
            "call_tool",
            json!({"name": "git__log", "arguments": 3}),
            "must be an object",
        ),
        (
            "call_tool",
            json!({"name": "git__nope"}),
            "unknown tool \"git__nope\"",
        ),
    ] {
        let params = CallToolRequestParams::new(name)
            .with_arguments(arguments.as_object().cloned().unwrap());
        let error = within("a refused call", client.service.peer().call_tool(params))
            .await
            .expect_err("refused");
        assert!(error.to_string().contains(wanted), "{name}: {error}");
    }
    drop(clients);
}
