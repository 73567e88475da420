//! The consumer side (`switchboard_tools::consumer`) against a real hub:
//! tools listed and named, called and cancelled, names contested, stale
//! lists dropped, a stale call relisted, and the hub appearing, going and
//! coming back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchboard_client::{
    handler_fn, method_not_found, reply, CatalogEvent, Client, Endpoint, ErrorKind,
};
use switchboard_protocol::{ErrorCode, ErrorObject};
use switchboard_tools::consumer::{
    CallError, ConsumerOptions, ExposedTool, HubTools, Invocation, ToolTable,
};
use switchboard_tools::{tool_fn, Provider, ToolResult, ToolSpec};
use tokio::sync::Notify;
use tokio::time::timeout;

fn consumer(hub: &TestHub) -> HubTools {
    HubTools::start(ConsumerOptions {
        endpoint: Endpoint::Dir(Some(hub.dir().to_path_buf())),
        client_name: "consumer".into(),
    })
}

/// The demo provider, and a consumer that has listed it.
async fn demo_and_consumer() -> (Demo, HubTools) {
    let demo = demo_provider().await;
    let tools = consumer(&demo.hub);
    assert!(tools.wait_ready(WAIT).await);
    (demo, tools)
}

/// The tool exposed as `name` now.
fn offered(tools: &HubTools, name: &str) -> Arc<ExposedTool> {
    let table = tools.tools();
    let tool = table
        .get(name)
        .unwrap_or_else(|| panic!("{name} is not offered"));
    tool.clone()
}

fn names(table: &ToolTable) -> Vec<String> {
    table.tools().map(|tool| tool.name.clone()).collect()
}

/// The backend (service id) serving the tool exposed as `name`.
fn served_by(table: &ToolTable, name: &str) -> String {
    let tool = table
        .get(name)
        .unwrap_or_else(|| panic!("{name} is not offered"));
    tool.backend.id().to_owned()
}

/// Waits (bounded) until the published table satisfies `check`.
async fn wait_for(
    tools: &HubTools,
    what: &str,
    check: impl Fn(&ToolTable) -> bool,
) -> Arc<ToolTable> {
    let mut changes = tools.changes();
    let waited = timeout(WAIT, async {
        loop {
            changes.borrow_and_update();
            let table = tools.tools();
            if check(&table) {
                return table;
            }
            changes.changed().await.expect("the index stopped");
        }
    })
    .await;
    waited.unwrap_or_else(|_| panic!("timed out waiting for {what}: {:?}", names(&tools.tools())))
}

fn invocation(arguments: Value, timeout: Option<Duration>) -> Invocation {
    Invocation {
        arguments: serde_json::value::to_raw_value(&arguments).unwrap(),
        tool_call_id: Some("call-1".into()),
        progress_token: None,
        call_key: None,
        timeout,
        client: None,
        task: None,
    }
}

fn text(answer: &RawValue) -> String {
    let result: Value = serde_json::from_str(answer.get()).unwrap();
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A `tools/list` answer naming `tools`, each with `pin`.
fn listing(tools: &[&str], pin: &str) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|name| json!({"name": name, "inputSchema": {"type": "object"}, "schemaPin": pin}))
        .collect();
    json!({ "tools": tools })
}

fn provider_metadata(namespace: &str, revision: u64) -> Value {
    json!({"protocol": "tool-provider", "version": 1, "namespace": namespace, "toolsRevision": revision})
}

fn echo() -> (ToolSpec, Arc<dyn switchboard_tools::ToolHandler>) {
    (
        ToolSpec::new("echo", echo_schema()),
        tool_fn(|call| async move {
            Ok(ToolResult::text(
                call.arguments["text"].as_str().unwrap_or_default(),
            ))
        }),
    )
}

async fn register_echo(hub: &TestHub, client: &Client, namespace: &str) -> Provider {
    let (spec, handler) = echo();
    Provider::builder(namespace)
        .ledger_path(ledger_path(hub, namespace))
        .tool(spec, handler)
        .register(client)
        .await
        .unwrap()
}

#[tokio::test]
async fn provider_tools_are_listed_under_one_name_and_called() {
    let (demo, tools) = demo_and_consumer().await;
    let table = tools.tools();
    assert_eq!(
        names(&table),
        [
            "demo__blocker",
            "demo__cancellable",
            "demo__counter",
            "demo__echo",
            "demo__progress"
        ]
    );
    let echo = table.get("demo__echo").unwrap();
    assert_eq!(
        (echo.namespace.as_str(), echo.tool.as_str()),
        ("demo", "echo")
    );
    assert_eq!(echo.schema_pin, Some(demo.pin("echo")));
    assert_eq!(echo.description(), Some("Repeats the text"));
    assert_eq!(echo.input_schema(), &echo_schema());
    assert!(echo.read_only());
    assert!(!table.get("demo__counter").unwrap().read_only());
    assert_eq!(served_by(&table, "demo__echo"), demo.provider.service_id());
    assert_eq!(
        echo.backend.progress_client_id(),
        Some(demo.provider_client.client_id().as_str())
    );
    // Already model-safe: the same name both ways.
    assert_eq!(table.model_name("demo__echo"), Some("demo__echo"));
    assert_eq!(
        table.by_model_name("demo__echo").unwrap().name,
        "demo__echo"
    );

    let answer = echo
        .call(invocation(json!({"text": "hi"}), None))
        .await
        .unwrap();
    assert_eq!(text(&answer), "hi");
    // The provider refuses: the caller reads why; the listing is not stale.
    let error = echo
        .call(invocation(json!({"text": 5}), None))
        .await
        .unwrap_err();
    assert_eq!(error.code().as_deref(), Some("invalid_arguments"));
    assert!(!error.is_stale_listing());
    tools.close();
}

#[tokio::test]
async fn a_call_waits_no_longer_than_its_caller_asked() {
    let (demo, tools) = demo_and_consumer().await;
    let blocker = offered(&tools, "demo__blocker");
    let error = blocker
        .call(invocation(json!({}), Some(Duration::from_millis(200))))
        .await
        .unwrap_err();
    // The hub enforced the caller's bound.
    match &error {
        CallError::Answered(rpc) => {
            assert!(matches!(rpc.kind(), ErrorKind::Timeout { .. }), "{error}")
        }
        other => panic!("expected the hub's timeout, got {other}"),
    }
    demo.runs.release.notify_one();
}

#[tokio::test]
async fn dropping_a_call_cancels_it_on_the_provider() {
    let (demo, tools) = demo_and_consumer().await;
    let cancellable = offered(&tools, "demo__cancellable");
    let started = demo.runs.started.notified();
    let call = tokio::spawn(cancellable.call(invocation(json!({}), None)));
    timeout(WAIT, started)
        .await
        .expect("the tool did not start");
    let saw_cancel = demo.runs.saw_cancel.notified();
    call.abort();
    timeout(WAIT, saw_cancel)
        .await
        .expect("the provider never saw the cancellation");
}

#[tokio::test]
async fn a_new_tools_revision_is_listed_and_signalled() {
    let (demo, tools) = demo_and_consumer().await;
    let mut changes = tools.changes();
    changes.borrow_and_update();
    let (spec, handler) = echo();
    let spec = ToolSpec {
        name: "extra".into(),
        ..spec
    };
    demo.provider.add_tool(spec, handler).await.unwrap();
    timeout(WAIT, changes.changed())
        .await
        .expect("no change signalled")
        .unwrap();
    wait_for(&tools, "demo__extra", |table| {
        table.get("demo__extra").is_some()
    })
    .await;
}

#[tokio::test]
async fn the_first_provider_of_a_namespace_keeps_it_until_it_leaves() {
    let hub = TestHub::start().await;
    let first_client = hub.client("first").await;
    let first = register_echo(&hub, &first_client, "dup").await;
    let tools = consumer(&hub);
    assert!(tools.wait_ready(WAIT).await);

    // A second provider of the namespace, with a tool of its own. The
    // consumer's client feeds this view and the index alike, in one order.
    let mut catalog = tools.client().unwrap().catalog().await.unwrap();
    let second_client = hub.client("second").await;
    let counter = ToolSpec::new("counter", json!({"type": "object"}));
    let second = Provider::builder("dup")
        .ledger_path(ledger_path(&hub, "dup-second"))
        .tool(
            counter,
            tool_fn(|_| async { Ok(ToolResult::text("counted")) }),
        )
        .register(&second_client)
        .await
        .unwrap();
    // A table built after the index has seen the second provider still
    // serves the first one only.
    let second_id = second.service_id();
    let seen = timeout(WAIT, async {
        while let Some(event) = catalog.next_event().await {
            if matches!(&event, CatalogEvent::Added(service) if service.service_id == second_id) {
                return;
            }
        }
    });
    seen.await.expect("the second provider never appeared");
    let trigger_client = hub.client("third").await;
    let _other = register_echo(&hub, &trigger_client, "other").await;
    let table = wait_for(&tools, "namespace other", |table| {
        table.get("other__echo").is_some()
    })
    .await;
    assert_eq!(names(&table), ["dup__echo", "other__echo"]);
    assert_eq!(served_by(&table, "dup__echo"), first.service_id());

    first.unregister().await.unwrap();
    let table = wait_for(&tools, "the second provider served", |table| {
        table.get("dup__counter").is_some()
    })
    .await;
    assert_eq!(names(&table), ["dup__counter", "other__echo"]);
    assert_eq!(served_by(&table, "dup__counter"), second.service_id());
}

#[tokio::test]
async fn a_slow_old_list_never_overwrites_a_newer_one() {
    let hub = TestHub::start().await;
    let owner = hub.client("scripted provider").await;
    let (first_list, gate) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let lists = Arc::new(AtomicU64::new(0));
    let handler = {
        let (first_list, gate, lists) = (first_list.clone(), gate.clone(), lists.clone());
        handler_fn(move |request| {
            let (first_list, gate, lists) = (first_list.clone(), gate.clone(), lists.clone());
            async move {
                if request.method != "tools/list" {
                    return Err(method_not_found(&request.method));
                }
                // The first list answers only when the test says so.
                if lists.fetch_add(1, Ordering::SeqCst) == 0 {
                    first_list.notify_one();
                    gate.notified().await;
                    return reply(&listing(&["old"], "pin-old"));
                }
                reply(&listing(&["new"], "pin-new"))
            }
        })
    };
    let service = owner
        .register(&provider_metadata("scripted", 1), handler)
        .await
        .unwrap();
    let tools = consumer(&hub);
    timeout(WAIT, first_list.notified())
        .await
        .expect("the first tools/list never came");
    service
        .update(&provider_metadata("scripted", 2))
        .await
        .unwrap();
    wait_for(&tools, "the newer list", |table| {
        names(table) == ["scripted__new"]
    })
    .await;

    gate.notify_one();
    // The old list was the first catalog's fetch: the consumer is ready once
    // the index has dealt with its answer.
    assert!(tools.wait_ready(WAIT).await);
    assert_eq!(tools.stats().stale_lists_dropped, 1);
    assert_eq!(names(&tools.tools()), ["scripted__new"]);
}

#[tokio::test]
async fn a_list_that_failed_is_fetched_again_without_a_new_revision() {
    let hub = TestHub::start().await;
    let owner = hub.client("scripted provider").await;
    let lists = Arc::new(AtomicU64::new(0));
    let handler = {
        let lists = lists.clone();
        handler_fn(move |request| {
            let lists = lists.clone();
            async move {
                if request.method != "tools/list" {
                    return Err(method_not_found(&request.method));
                }
                // The first two lists fail, as a provider busy starting does.
                if lists.fetch_add(1, Ordering::SeqCst) < 2 {
                    return Err(ErrorObject::new(ErrorCode::InternalError, "not ready yet"));
                }
                reply(&listing(&["late"], "pin-late"))
            }
        })
    };
    let _service = owner
        .register(&provider_metadata("scripted", 1), handler)
        .await
        .unwrap();
    let tools = consumer(&hub);
    // No catalog change follows: only the retries (1 s, then 2 s) list it.
    wait_for(&tools, "the list after two failures", |table| {
        names(table) == ["scripted__late"]
    })
    .await;
    assert_eq!(lists.load(Ordering::SeqCst), 3);
    assert_eq!(tools.stats().lists_failed, 2);
}

#[tokio::test]
async fn a_call_that_finds_its_listing_stale_has_the_provider_listed_again() {
    let hub = TestHub::start().await;
    let owner = hub.client("scripted provider").await;
    let lists = Arc::new(AtomicU64::new(0));
    let handler = {
        let lists = lists.clone();
        handler_fn(move |request| {
            let lists = lists.clone();
            async move {
                match request.method.as_str() {
                    "tools/list" => {
                        let n = lists.fetch_add(1, Ordering::SeqCst) + 1;
                        reply(&listing(&["a"], &format!("pin-{n}")))
                    }
                    // Whatever pin the caller sends, the schema moved on.
                    "tools/call" => Err(ErrorObject::new(ErrorCode::InvalidParams, "a changed")
                        .with_data(&json!({"code": "tool_schema_changed"}))),
                    other => Err(method_not_found(other)),
                }
            }
        })
    };
    // The metadata never changes: only the stale call can cause a new list.
    let _service = owner
        .register(&provider_metadata("moving", 1), handler)
        .await
        .unwrap();
    let tools = consumer(&hub);
    assert!(tools.wait_ready(WAIT).await);
    let tool = offered(&tools, "moving__a");
    assert_eq!(tool.schema_pin.as_deref(), Some("pin-1"));
    let error = tool.call(invocation(json!({}), None)).await.unwrap_err();
    assert_eq!(error.code().as_deref(), Some("tool_schema_changed"));
    assert!(error.is_stale_listing());
    wait_for(&tools, "the listing again", |table| {
        table
            .get("moving__a")
            .and_then(|tool| tool.schema_pin.as_deref())
            == Some("pin-2")
    })
    .await;
}

#[tokio::test]
async fn starts_without_a_hub_and_follows_it_across_a_restart() {
    let mut hub = TestHub::not_started();
    let tools = consumer(&hub);
    // No hub: ready at once, with nothing to offer.
    assert!(tools.wait_ready(WAIT).await);
    assert!(tools.tools().is_empty());
    assert!(!tools.is_connected());

    hub.serve().await;
    let first_client = hub.client("provider").await;
    let _first = register_echo(&hub, &first_client, "late").await;
    wait_for(&tools, "the hub to be reached", |table| {
        table.get("late__echo").is_some()
    })
    .await;
    assert!(tools.is_connected());

    hub.shut_down().await;
    wait_for(&tools, "the tools to go with the hub", ToolTable::is_empty).await;

    hub.serve().await;
    let second_client = hub.client("provider").await;
    let _second = register_echo(&hub, &second_client, "again").await;
    let table = wait_for(&tools, "the hub to be reached again", |table| {
        table.get("again__echo").is_some()
    })
    .await;
    assert_eq!(names(&table), ["again__echo"]);
    let answer = table
        .get("again__echo")
        .unwrap()
        .call(invocation(json!({"text": "back"}), None))
        .await
        .unwrap();
    assert_eq!(text(&answer), "back");
    tools.close();
}
