//! The at-most-once fence on a real hub and a real SQLite ledger.

use std::sync::atomic::Ordering;

use crate::support::*;
use serde_json::{json, Value};
use switchboard_client::RequestOptions;
use tokio::time::timeout;

#[tokio::test]
async fn the_same_call_key_twice_runs_once_and_answers_byte_identical() {
    let demo = demo_provider().await;
    let body = json!({"name": "counter", "arguments": {"a": [1, 2.5]}, "call_key": "k-1", "tool_call_id": "t1"});
    let first = demo.call(&body).await.unwrap();
    // Same call, other member order and number spelling: same canonical arguments.
    let again = json!({"call_key": "k-1", "arguments": {"a": [1.0, 2.50]}, "name": "counter", "tool_call_id": "t2"});
    let second = demo.call(&again).await.unwrap();
    assert_eq!(first.get(), second.get());
    assert_eq!(demo.runs.counter.load(Ordering::SeqCst), 1);
    assert_eq!(demo.provider.stats().replays, 1);
}

#[tokio::test]
async fn a_reused_key_with_other_arguments_or_tool_is_refused_and_nothing_runs() {
    let demo = demo_provider().await;
    demo.call(&json!({"name": "counter", "arguments": {"a": 1}, "call_key": "k"}))
        .await
        .unwrap();
    for body in [
        json!({"name": "counter", "arguments": {"a": 2}, "call_key": "k"}),
        json!({"name": "echo", "arguments": {"text": "x"}, "call_key": "k"}),
    ] {
        let (code, message, data) = rpc_error(demo.call(&body).await);
        assert_eq!(code, -32602);
        assert_eq!(data, json!({"code": "call_key_reused", "call_key": "k"}));
        assert!(message.contains("nothing ran"), "{message}");
    }
    assert_eq!(demo.runs.counter.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_call_without_a_key_runs_every_time() {
    let demo = demo_provider().await;
    for n in 1..=3 {
        let answer = demo
            .call(&json!({"name": "counter", "arguments": {}}))
            .await
            .unwrap();
        let answer: Value = serde_json::from_str(answer.get()).unwrap();
        assert_eq!(answer["structuredContent"]["run"], n);
    }
}

#[tokio::test]
async fn a_concurrent_duplicate_waits_for_the_first_and_gets_its_result() {
    let demo = std::sync::Arc::new(demo_provider().await);
    let body = json!({"name": "blocker", "arguments": {}, "call_key": "dup"});
    let first = tokio::spawn({
        let demo = demo.clone();
        let body = body.clone();
        async move { demo.call(&body).await }
    });
    timeout(WAIT, demo.runs.started.notified()).await.unwrap();
    let second = tokio::spawn({
        let demo = demo.clone();
        async move { demo.call(&body).await }
    });
    // The duplicate is parked on the first call (not run, not refused).
    timeout(WAIT, async {
        while demo.provider.stats().duplicates_waited == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    demo.runs.release.notify_one();
    let first = timeout(WAIT, first).await.unwrap().unwrap().unwrap();
    let second = timeout(WAIT, second).await.unwrap().unwrap().unwrap();
    assert_eq!(first.get(), second.get());
    assert_eq!(demo.runs.blocker.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_cancelled_keyed_call_is_never_rerun() {
    let demo = demo_provider().await;
    let params = serde_json::value::to_raw_value(
        &json!({"name": "cancellable", "arguments": {}, "call_key": "c-1"}),
    )
    .unwrap();
    let service = demo.provider.service_id();
    let call = demo.caller.request_raw(
        &service,
        "tools/call",
        Some(&params),
        RequestOptions::default(),
    );
    // Dropping the request future mid-call sends $/cancelRequest.
    tokio::select! {
        _ = call => panic!("the call should still be running"),
        () = demo.runs.started.notified() => {}
    }
    timeout(WAIT, demo.runs.saw_cancel.notified())
        .await
        .unwrap();
    let retry = json!({"name": "cancellable", "arguments": {}, "call_key": "c-1"});
    // The ledger settles right after the tool returns; retry until it has.
    let mut answer = rpc_error(demo.call(&retry).await);
    for _ in 0..100 {
        if answer.2["code"] == "outcome_unknown" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        answer = rpc_error(demo.call(&retry).await);
    }
    let (code, _, data) = answer;
    assert_eq!(code, -32603);
    assert_eq!(data, json!({"code": "outcome_unknown", "call_key": "c-1"}));
    assert_eq!(demo.runs.cancellable.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_stale_pin_with_a_settled_key_still_replays_the_original_answer() {
    let demo = demo_provider().await;
    let pin = demo.pin("counter");
    let first = demo
        .call(&json!({"name": "counter", "arguments": {}, "call_key": "p", "schema_pin": pin}))
        .await
        .unwrap();
    let mut tools = demo_tools(&demo.runs);
    tools[1].0 =
        switchboard_tools::ToolSpec::new("counter", json!({"type": "object", "maxProperties": 3}));
    demo.provider.set_tools(tools).await.unwrap();
    let again = demo
        .call(&json!({"name": "counter", "arguments": {}, "call_key": "p", "schema_pin": pin}))
        .await
        .unwrap();
    assert_eq!(first.get(), again.get());
    assert_eq!(demo.runs.counter.load(Ordering::SeqCst), 1);
}
