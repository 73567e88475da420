//! Fault injection with real processes: a hub (`switchboard serve`), owners
//! and callers as separate `hub-fault-client` processes, SDK clients, and
//! MCP providers, each killed with SIGKILL at the worst moment. What must
//! hold: every request gets exactly one answer, nothing hangs, and the hub's
//! bookkeeping (seen through `GET /metrics`) returns to zero.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::faults::FaultClient;
use crate::support::mcp::{marker_lines, provider_id, provider_id_except, text_of, McpHub};
use crate::support::{metric_value, read_hub_json, HubProcess, WAIT};
use rmcp::model::CallToolRequestParams;
use serde_json::{json, Value};
use switchboard_client::{handler_fn, reply, CatalogEvent, Error, ErrorKind, RequestOptions};
use switchboard_testkit::clients::connect_dir;
use switchboard_testkit::eventually;

const CALLERS: u64 = 10;
const REQUESTS_PER_CALLER: u64 = 100;
const TOTAL: u64 = CALLERS * REQUESTS_PER_CALLER;

/// `(tag, seq)` of an event, to compare sets of requests.
fn key(event: &Value) -> (String, u64) {
    (
        event["tag"].as_str().expect("tag").to_owned(),
        event["seq"].as_u64().expect("seq"),
    )
}

/// Starts `CALLERS` callers, each sending `REQUESTS_PER_CALLER` requests to
/// `service` at once.
fn start_callers(dir: &std::path::Path, service: &str) -> Vec<FaultClient> {
    (0..CALLERS)
        .map(|n| FaultClient::caller(dir, service, REQUESTS_PER_CALLER, &format!("caller-{n}")))
        .collect()
}

#[test]
fn killing_an_owner_with_1000_pending_requests_answers_each_exactly_once_with_service_gone() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let hub = HubProcess::builder().dir(&dir).start();
    let mut owner = FaultClient::owner(&dir);
    let service = owner.registered_service();
    let mut callers = start_callers(&dir, &service);
    hub.wait_for_metric("switchboard_requests_in_flight", TOTAL);
    owner.wait_for_count("request", TOTAL as usize);

    owner.kill9();

    let mut answered = 0;
    for caller in &mut callers {
        assert!(caller.wait_exit().success(), "a caller failed");
        let answers = caller.events_named("answer");
        let seqs: BTreeSet<u64> = answers.iter().map(|a| key(a).1).collect();
        assert_eq!(answers.len() as u64, REQUESTS_PER_CALLER, "{answers:?}");
        assert_eq!(
            seqs,
            (0..REQUESTS_PER_CALLER).collect(),
            "one answer per request"
        );
        for answer in &answers {
            assert_eq!(answer["error"]["code"], -32052, "{answer}");
            assert_eq!(
                answer["error"]["data"]["reason"], "disconnected",
                "{answer}"
            );
        }
        answered += answers.len() as u64;
    }
    assert_eq!(answered, TOTAL);

    hub.wait_for_metric("switchboard_requests_in_flight", 0);
    hub.wait_for_metric("switchboard_connections", 0);
    let metrics = hub.metrics();
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_requests_failed_total{reason=\"disconnected\"}"
        ),
        TOTAL
    );
    assert_eq!(metric_value(&metrics, "switchboard_services"), 0);
}

#[test]
fn killing_callers_with_requests_in_flight_cancels_each_at_the_owner_once() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let hub = HubProcess::builder().dir(&dir).start();
    let owner = FaultClient::owner(&dir);
    let service = owner.registered_service();
    let mut callers = start_callers(&dir, &service);
    owner.wait_for_count("request", TOTAL as usize);
    hub.wait_for_metric("switchboard_requests_in_flight", TOTAL);

    for caller in &mut callers {
        caller.kill9();
    }

    owner.wait_for_count("cancelled", TOTAL as usize);
    hub.wait_for_metric("switchboard_requests_in_flight", 0);
    let requested: Vec<(String, u64)> = owner.events_named("request").iter().map(key).collect();
    let cancelled: Vec<(String, u64)> = owner.events_named("cancelled").iter().map(key).collect();
    assert_eq!(cancelled.len() as u64, TOTAL, "one cancel per request");
    let requested_set: BTreeSet<_> = requested.iter().cloned().collect();
    let cancelled_set: BTreeSet<_> = cancelled.into_iter().collect();
    assert_eq!(requested_set.len() as u64, TOTAL);
    assert_eq!(cancelled_set, requested_set);

    // The owner stays connected, its service listed.
    hub.wait_for_metric("switchboard_connections", 1);
    let metrics = hub.metrics();
    assert_eq!(
        metric_value(
            &metrics,
            "switchboard_requests_failed_total{reason=\"caller_gone\"}"
        ),
        TOTAL
    );
    assert_eq!(metric_value(&metrics, "switchboard_services"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_clients_see_a_killed_hub_and_reconnect_to_its_restart_under_new_ids() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("hub");
    let mut killed = tokio::task::block_in_place(|| HubProcess::builder().dir(&dir).start());

    let owner = connect_dir(&dir, "owner").await;
    let handler = handler_fn(|request| async move {
        if request.method == "hold" {
            request.cancelled.cancelled().await;
        }
        reply(&request.params::<Value>()?)
    });
    let service = owner
        .register(&json!({"protocol": "echo"}), handler)
        .await
        .unwrap();
    let old_id = service.id();
    let caller = connect_dir(&dir, "caller").await;
    let mut catalog = caller.catalog().await.unwrap();
    let echoed: Value = caller
        .request(&old_id, "echo", &json!({"n": 1}))
        .await
        .unwrap();
    assert_eq!(echoed, json!({"n": 1}));
    let in_flight = {
        let (caller, old_id) = (caller.clone(), old_id.clone());
        tokio::spawn(async move {
            let options = RequestOptions {
                timeout: Some(Duration::from_secs(60)),
            };
            caller.request_raw(&old_id, "hold", None, options).await
        })
    };
    tokio::task::block_in_place(|| killed.wait_for_metric("switchboard_requests_in_flight", 1));

    killed.signal(libc::SIGKILL);
    tokio::task::block_in_place(|| killed.wait_exit());

    // Both connections end; the request in flight fails instead of hanging.
    tokio::time::timeout(WAIT, owner.closed())
        .await
        .expect("the owner sees the drop");
    tokio::time::timeout(WAIT, caller.closed())
        .await
        .expect("the caller sees the drop");
    let failed = tokio::time::timeout(WAIT, in_flight)
        .await
        .expect("no hang")
        .unwrap();
    assert!(matches!(failed, Err(Error::Closed)), "{failed:?}");
    let error = caller
        .request::<Value>(&old_id, "echo", &json!({}))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Closed), "{error:?}");

    // The dead hub left its socket and hub.json; a new one takes over.
    assert_eq!(read_hub_json(&dir).unwrap()["pid"], killed.pid());
    assert!(dir.join("hub.sock").exists());
    let restarted = tokio::task::block_in_place(|| HubProcess::builder().dir(&dir).start());
    assert!(
        restarted.log().contains("removed a stale socket"),
        "{}",
        restarted.log()
    );
    assert_ne!(restarted.token(), killed.token());

    // Reconnecting re-reads hub.json (the new token) and registers again.
    owner.reconnect().await.expect("the owner reconnects");
    caller.reconnect().await.expect("the caller reconnects");
    let new_id = service.id();
    assert_ne!(new_id, old_id);
    let echoed: Value = caller
        .request(&new_id, "echo", &json!({"n": 2}))
        .await
        .unwrap();
    assert_eq!(echoed, json!({"n": 2}));
    let error = caller
        .request::<Value>(&old_id, "echo", &json!({}))
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        Some(ErrorKind::NotFound),
        "an old id never routes"
    );

    tokio::time::timeout(WAIT, async {
        while catalog.next_event().await.unwrap() != CatalogEvent::Resynced {}
    })
    .await
    .expect("the catalog resyncs on the new connection");
    assert!(catalog.get(&new_id).is_some());
    assert!(catalog.get(&old_id).is_none());

    let metrics = tokio::task::block_in_place(|| restarted.metrics());
    assert_eq!(metric_value(&metrics, "switchboard_connections"), 2);
    assert_eq!(metric_value(&metrics, "switchboard_services"), 1);
    assert_eq!(metric_value(&metrics, "switchboard_requests_in_flight"), 0);
}

/// `provide_mcp_fence.rs` covers the same kill from a hub client: `-32052`
/// at once and `outcome_unknown` for the same `call_key` after the restart.
/// This is the MCP client's side, through the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_call_whose_provider_is_killed_mid_call_fails_clearly_and_is_never_rerun() {
    let hub = HubProcess::start();
    let mut alpha = hub.provide("alpha");
    let client = hub.client("test").await;
    let killed_id = provider_id(&client, "alpha").await;
    let gateway = hub.gateway().await;
    gateway
        .wait_for_tools("alpha", |names| names.iter().any(|n| n == "alpha__slow"))
        .await;

    let marker = hub.path("slow-marker");
    let call = {
        let peer = gateway.service.peer().clone();
        let arguments = json!({"marker": marker, "seconds": 60});
        let params = CallToolRequestParams::new("alpha__slow")
            .with_arguments(arguments.as_object().cloned().unwrap());
        tokio::spawn(async move { tokio::time::timeout(WAIT, peer.call_tool(params)).await })
    };
    eventually("the call to start", || marker_lines(&marker) == ["started"]).await;

    alpha.kill9();

    let result = call
        .await
        .unwrap()
        .expect("an answer, not a hang")
        .expect("a tool result, not a protocol error");
    assert_eq!(result.is_error, Some(true));
    let text = text_of(&result);
    assert!(text.starts_with("[provider_gone]"), "{text}");

    // A restarted provider serves again; the killed call is not run again.
    let _restarted = hub.provide("alpha");
    provider_id_except(&client, "alpha", Some(&killed_id)).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match gateway.call("alpha__echo", json!({"text": "back"})).await {
            Ok(result) if result.is_error != Some(true) => {
                assert_eq!(text_of(&result), "back");
                break;
            }
            other => assert!(
                tokio::time::Instant::now() < deadline,
                "the provider never came back: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(marker_lines(&marker), ["started"]);
}
