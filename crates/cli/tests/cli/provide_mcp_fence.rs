//! The at-most-once fence of `switchboard provide-mcp`, with real processes:
//! a hub, `provide-mcp` around `mcp-test-server`, and a hub client sending
//! `tools/call` with `call_key`s.

use crate::support::mcp::*;
use serde_json::{json, Value};
use switchboard_client::{Client, Error, RequestOptions};

async fn call(client: &Client, service: &str, body: &Value) -> Result<String, Error> {
    let params = serde_json::value::to_raw_value(body).unwrap();
    tokio::time::timeout(
        WAIT,
        client.request_raw(
            service,
            "tools/call",
            Some(&params),
            RequestOptions::default(),
        ),
    )
    .await
    .expect("no answer in time")
    .map(|raw| raw.get().to_owned())
}

fn count(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_call_key_twice_runs_the_child_once() {
    let hub = HubProcess::start();
    let _provider = hub.provide("files");
    let client = hub.client("test").await;
    let service = provider_id(&client, "files").await;
    let counter = hub.path("counter");
    let body = json!({"name": "counter", "arguments": {"path": counter}, "call_key": "once-1"});
    let first = call(&client, &service, &body).await.unwrap();
    let second = call(&client, &service, &body).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(count(&counter), "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_a_key_runs_the_child_every_time() {
    let hub = HubProcess::start();
    let _provider = hub.provide("files");
    let client = hub.client("test").await;
    let service = provider_id(&client, "files").await;
    let counter = hub.path("counter");
    let body = json!({"name": "counter", "arguments": {"path": counter}});
    call(&client, &service, &body).await.unwrap();
    call(&client, &service, &body).await.unwrap();
    assert_eq!(count(&counter), "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_duplicate_waits_for_the_first_call() {
    let hub = HubProcess::start();
    let _provider = hub.provide("files");
    let client = hub.client("test").await;
    let service = provider_id(&client, "files").await;
    let marker = hub.path("marker");
    let body = json!({"name": "slow", "arguments": {"marker": marker, "seconds": 1.5}, "call_key": "dup-1"});
    let first = tokio::spawn({
        let (client, service, body) = (client.clone(), service.clone(), body.clone());
        async move { call(&client, &service, &body).await }
    });
    eventually("the first call to start", || {
        marker_lines(&marker) == ["started"]
    })
    .await;
    let second = call(&client, &service, &body).await.unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first, second);
    assert_eq!(marker_lines(&marker), ["started"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_killed_mid_call_answers_outcome_unknown_after_restart() {
    let hub = HubProcess::start();
    let mut provider = hub.provide("files");
    let client = hub.client("test").await;
    let service = provider_id(&client, "files").await;
    let marker = hub.path("marker");
    let body = json!({"name": "slow", "arguments": {"marker": marker, "seconds": 60}, "call_key": "crash-1"});
    let pending = tokio::spawn({
        let (client, service, body) = (client.clone(), service.clone(), body.clone());
        async move { call(&client, &service, &body).await }
    });
    eventually("the call to start", || marker_lines(&marker) == ["started"]).await;
    provider.kill9();
    match pending.await.unwrap() {
        Err(Error::Rpc(error)) => assert_eq!(error.code, -32052, "{error}"),
        other => panic!("expected service gone, got {other:?}"),
    }

    let _restarted = hub.provide("files");
    let restarted_service = provider_id_except(&client, "files", Some(&service)).await;
    for _ in 0..2 {
        match call(&client, &restarted_service, &body).await {
            Err(Error::Rpc(error)) => {
                assert_eq!(error.code, -32603);
                assert_eq!(
                    error.data(),
                    Some(json!({"code": "outcome_unknown", "call_key": "crash-1"}))
                );
            }
            other => panic!("expected outcome_unknown, got {other:?}"),
        }
    }
    // Never rerun: the child saw one start only.
    assert_eq!(marker_lines(&marker), ["started"]);
}
