//! A version-2 provider (`docs/reference/tool-calls.md` section 9) on a
//! real hub: its metadata, the surface methods through its handler, the
//! `client` and `task` members of a call, progress to the callback service,
//! and tasks held to the principal whose call created them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchboard_client::{
    handler_fn, reply, BoxFuture, Client, ConnectOptions, Endpoint, Error, Reply, RequestOptions,
    Selector,
};
use switchboard_tools::consumer::{ConsumerOptions, HubTools};
use switchboard_tools::{
    tool_fn, ListRevision, Provider, SurfaceHandler, SurfaceNotification, SurfaceRequest,
    ToolResult, ToolSpec,
};
use tokio::sync::mpsc;

use crate::support::*;

const CONFIG: &str = r#"
[principals.alice]
token = "alice-token-0123456789"

[principals.bob]
token = "bob-token-0123456789"

[[grants]]
from = "*"
to = "*"
allow = ["discover", "request", "notify"]
"#;

/// One request as the surface got it: method, params, client service, call.
type Asked = (String, Value, Option<String>, Option<String>);

/// What the surface was asked, and the tasks its server says exist.
#[derive(Default)]
struct Recorder {
    requests: Mutex<Vec<Asked>>,
    notifications: Mutex<Vec<(String, Option<String>)>>,
}

struct RecordingSurface(Arc<Recorder>);

impl SurfaceHandler for RecordingSurface {
    fn request(&self, request: SurfaceRequest) -> BoxFuture<Reply> {
        self.0.requests.lock().push((
            request.method.clone(),
            request.params.clone(),
            request.client.as_ref().map(|c| c.service.clone()),
            request.call.clone(),
        ));
        let answer = match request.method.as_str() {
            "tasks/list" => {
                json!({"tasks": [{"taskId": "task-1"}, {"taskId": "task-2"}, {"taskId": "elsewhere"}]})
            }
            "tasks/get" => {
                json!({"taskId": request.params["taskId"], "status": "working", "pollInterval": 5})
            }
            _ => json!({"answered": request.method, "extra": {"kept": [1, 2.50]}}),
        };
        Box::pin(async move { reply(&answer) })
    }

    fn notification(&self, notification: SurfaceNotification) -> BoxFuture<()> {
        self.0
            .notifications
            .lock()
            .push((notification.method, notification.client.map(|c| c.service)));
        Box::pin(async {})
    }
}

struct V2 {
    hub: TestHub,
    provider: Provider,
    provider_client: Client,
    recorder: Arc<Recorder>,
    task_runs: Arc<AtomicU64>,
}

fn v2_tools(runs: &Arc<AtomicU64>) -> Vec<(ToolSpec, Arc<dyn switchboard_tools::ToolHandler>)> {
    let task_runs = runs.clone();
    vec![
        (
            ToolSpec::new("research", json!({"type": "object"}))
                .member("execution", json!({"taskSupport": "required"}))
                .member("icons", json!([{"src": "https://example.com/i.png"}])),
            tool_fn(move |call| {
                let runs = task_runs.clone();
                async move {
                    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                    assert_eq!(call.task, Some(json!({"ttl": 1000})));
                    ToolResult::from_value(
                        json!({"task": {"taskId": format!("task-{n}"), "status": "working"}}),
                    )
                }
            }),
        ),
        (
            ToolSpec::new("talk", json!({"type": "object"})),
            tool_fn(|call| async move {
                for step in [1.0, 2.0] {
                    call.progress.report(step, Some(2.0), None).await;
                }
                Ok(ToolResult::structured(json!({
                    "client": call.client.map(|c| c.service),
                })))
            }),
        ),
    ]
}

async fn register(
    hub: &TestHub,
    provider_client: &Client,
    recorder: &Arc<Recorder>,
    runs: &Arc<AtomicU64>,
) -> Provider {
    Provider::builder("everything")
        .ledger_path(ledger_path(hub, "everything"))
        .tools(v2_tools(runs))
        .capabilities(json!({"resources": {"subscribe": true}, "tasks": {"list": {}}}))
        .surface(Arc::new(RecordingSurface(recorder.clone())))
        .register(provider_client)
        .await
        .unwrap()
}

async fn v2_provider() -> V2 {
    let hub = TestHub::builder().config(CONFIG).start().await;
    let provider_client = hub.client("provider").await;
    let recorder = Arc::new(Recorder::default());
    let task_runs = Arc::new(AtomicU64::new(0));
    let provider = register(&hub, &provider_client, &recorder, &task_runs).await;
    V2 {
        hub,
        provider,
        provider_client,
        recorder,
        task_runs,
    }
}

impl V2 {
    async fn principal(&self, token: &str) -> Client {
        Client::connect_with(ConnectOptions {
            endpoint: Endpoint::Unix {
                path: self.hub.info().socket.clone(),
                token: Some(token.to_owned()),
            },
            client_name: token.to_owned(),
        })
        .await
        .unwrap()
    }
}

async fn ask(client: &Client, service: &str, method: &str, params: Value) -> Result<Value, Error> {
    let params = serde_json::value::to_raw_value(&params).unwrap();
    let answer: Box<RawValue> = tokio::time::timeout(
        WAIT,
        client.request_raw(service, method, Some(&params), RequestOptions::default()),
    )
    .await
    .expect("an answer in time")?;
    Ok(serde_json::from_str(answer.get()).unwrap())
}

fn error_of(answer: Result<Value, Error>) -> (i64, Value) {
    match answer {
        Err(Error::Rpc(error)) => (error.code, error.data().unwrap_or(Value::Null)),
        other => panic!("expected an error answer, got {other:?}"),
    }
}

/// The provider's metadata as the catalog shows it, once `check` holds.
async fn metadata_when(client: &Client, check: impl Fn(&Value) -> bool) -> Value {
    let catalog = client.catalog().await.unwrap();
    let selector = Selector::parse("protocol=tool-provider,namespace=everything").unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(service) = catalog.select(&selector).into_iter().next() {
            if check(&service.metadata) {
                return service.metadata;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the metadata never matched"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_version_2_provider_publishes_its_capabilities_and_revisions() {
    let v2 = v2_provider().await;
    let watcher = v2.hub.client("watcher").await;
    let metadata = metadata_when(&watcher, |_| true).await;
    assert_eq!(metadata["version"], 2);
    // It declared resources and tasks beside its tools: `tools` is added,
    // or a consumer would list none of them (what a consumer lists of a
    // version-2 provider is what its capabilities declare).
    assert_eq!(
        metadata["capabilities"],
        json!({"tools": {}, "resources": {"subscribe": true}, "tasks": {"list": {}}})
    );
    let consumer = HubTools::start(ConsumerOptions {
        endpoint: Endpoint::Dir(Some(v2.hub.dir().to_path_buf())),
        client_name: "consumer".into(),
    });
    assert!(consumer.wait_ready(WAIT).await);
    assert!(
        consumer.tools().get("everything__talk").is_some(),
        "the consumer lists the provider's tools"
    );
    assert_eq!(
        (
            &metadata["toolsRevision"],
            &metadata["resourcesRevision"],
            &metadata["promptsRevision"]
        ),
        (&json!(1), &json!(1), &json!(1))
    );
    v2.provider
        .bump_revision(ListRevision::Resources)
        .await
        .unwrap();
    metadata_when(&watcher, |m| {
        m["resourcesRevision"] == 2 && m["promptsRevision"] == 1
    })
    .await;
    assert!(!v2
        .provider
        .set_capabilities(v2.provider.capabilities())
        .await
        .unwrap());
    assert!(v2
        .provider
        .set_capabilities(json!({"prompts": {}}))
        .await
        .unwrap());
    metadata_when(&watcher, |m| {
        m["capabilities"] == json!({"prompts": {}, "tools": {}})
    })
    .await;
    assert_eq!(v2.provider.revision(ListRevision::Prompts), 1);
}

#[tokio::test]
async fn surface_requests_reach_the_handler_without_the_contracts_members() {
    let v2 = v2_provider().await;
    let caller = v2.hub.client("caller").await;
    let service = v2.provider.service_id();
    let answer = ask(
        &caller,
        &service,
        "resources/read",
        json!({"uri": "a://b", "client": {"service": "svc-cb", "capabilities": {}},
               "_meta": {"switchboard/call": "call-9", "other": 1}}),
    )
    .await
    .unwrap();
    assert_eq!(
        answer,
        json!({"answered": "resources/read", "extra": {"kept": [1, 2.50]}})
    );
    let (method, params, client, call) = v2.recorder.requests.lock()[0].clone();
    assert_eq!(method, "resources/read");
    assert_eq!(params, json!({"uri": "a://b", "_meta": {"other": 1}}));
    assert_eq!(client.as_deref(), Some("svc-cb"));
    assert_eq!(call.as_deref(), Some("call-9"));
    let (code, _) = error_of(ask(&caller, &service, "resources/nonsense", json!({})).await);
    assert_eq!(code, -32601);
    let (code, data) = error_of(ask(&caller, &service, "prompts/get", json!({"client": 7})).await);
    assert_eq!((code, &data["field"]), (-32602, &json!("client")));

    // A version-1 provider serves the tools only.
    let plain = Provider::builder("plain")
        .ledger_path(ledger_path(&v2.hub, "plain"))
        .register(&v2.provider_client)
        .await
        .unwrap();
    let (code, _) = error_of(ask(&caller, &plain.service_id(), "resources/list", json!({})).await);
    assert_eq!(code, -32601);

    caller
        .notify(
            &service,
            "notifications/roots/list_changed",
            &json!({"client": {"service": "svc-cb"}}),
        )
        .await
        .unwrap();
    tokio::time::timeout(WAIT, async {
        while v2.recorder.notifications.lock().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(
        v2.recorder.notifications.lock()[0],
        (
            "notifications/roots/list_changed".to_owned(),
            Some("svc-cb".to_owned())
        )
    );
}

#[tokio::test]
async fn a_tool_keeps_its_other_mcp_members_in_the_listing() {
    let v2 = v2_provider().await;
    let caller = v2.hub.client("caller").await;
    let listed = ask(&caller, &v2.provider.service_id(), "tools/list", json!({}))
        .await
        .unwrap();
    let research = &listed["tools"][0];
    assert_eq!(research["execution"], json!({"taskSupport": "required"}));
    assert_eq!(research["icons"][0]["src"], "https://example.com/i.png");
    assert!(research["schemaPin"]
        .as_str()
        .unwrap()
        .starts_with("tp1:research:"));
}

#[tokio::test]
async fn a_call_hands_the_tool_its_client_and_progress_goes_to_the_callback_service() {
    let v2 = v2_provider().await;
    let caller = v2.hub.client("caller").await;
    let (heard, mut progress) = mpsc::unbounded_channel::<Value>();
    let callback = caller
        .register(
            &json!({"protocol": "mcp-client", "version": 1, "callback": true}),
            handler_fn(|_request| async { reply(&json!({})) }).with_notifications(move |note| {
                let heard = heard.clone();
                async move {
                    let _ = heard
                        .send(json!({"method": note.method, "params": note.params::<Value>()}));
                }
            }),
        )
        .await
        .unwrap();
    let answer = ask(
        &caller,
        &v2.provider.service_id(),
        "tools/call",
        json!({"name": "talk", "arguments": {}, "progress_token": "p-1",
               "client": {"service": callback.id(), "capabilities": {"sampling": {}}}}),
    )
    .await
    .unwrap();
    assert_eq!(answer["structuredContent"]["client"], callback.id());
    for step in [1, 2] {
        let note = tokio::time::timeout(WAIT, progress.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(note["method"], "notifications/progress");
        assert_eq!(note["params"]["progressToken"], "p-1");
        assert_eq!(note["params"]["progress"], f64::from(step));
    }
}

#[tokio::test]
async fn the_fence_holds_for_tasks_and_a_task_is_its_creators_principals() {
    let v2 = v2_provider().await;
    let alice = v2.principal("alice-token-0123456789").await;
    let bob = v2.principal("bob-token-0123456789").await;
    let service = v2.provider.service_id();
    let call =
        json!({"name": "research", "arguments": {}, "call_key": "k-task", "task": {"ttl": 1000}});
    let first = ask(&alice, &service, "tools/call", call.clone())
        .await
        .unwrap();
    assert_eq!(first["task"]["taskId"], "task-1");
    let again = ask(&alice, &service, "tools/call", call).await.unwrap();
    assert_eq!(again, first, "the same key is the same task");
    assert_eq!(v2.task_runs.load(Ordering::SeqCst), 1);
    let unkeyed = json!({"name": "research", "arguments": {}, "task": {"ttl": 1000}});
    assert_eq!(
        ask(&bob, &service, "tools/call", unkeyed).await.unwrap()["task"]["taskId"],
        "task-2"
    );

    let got = ask(&alice, &service, "tasks/get", json!({"taskId": "task-1"}))
        .await
        .unwrap();
    assert_eq!(got["pollInterval"], 5);
    for (who, task) in [(&bob, "task-1"), (&alice, "task-2"), (&alice, "elsewhere")] {
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            let (code, data) = error_of(ask(who, &service, method, json!({"taskId": task})).await);
            assert_eq!(code, -32602);
            assert_eq!(data, json!({"code": "unknown_task", "taskId": task}));
        }
    }
    let listed = ask(&alice, &service, "tasks/list", json!({}))
        .await
        .unwrap();
    assert_eq!(listed, json!({"tasks": [{"taskId": "task-1"}]}));
    let listed = ask(&bob, &service, "tasks/list", json!({})).await.unwrap();
    assert_eq!(listed, json!({"tasks": [{"taskId": "task-2"}]}));

    // Who created which task survives the provider.
    let V2 {
        hub,
        provider,
        provider_client,
        recorder,
        task_runs,
    } = v2;
    provider.unregister().await.unwrap();
    provider_client.close();
    let provider_client = hub.client("provider again").await;
    let provider = loop {
        // The old connection's ledger lock goes with its last handle.
        match Provider::builder("everything")
            .ledger_path(ledger_path(&hub, "everything"))
            .tools(v2_tools(&task_runs))
            .surface(Arc::new(RecordingSurface(recorder.clone())))
            .register(&provider_client)
            .await
        {
            Ok(provider) => break provider,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    };
    let service = provider.service_id();
    ask(&alice, &service, "tasks/get", json!({"taskId": "task-1"}))
        .await
        .unwrap();
    let (_, data) = error_of(ask(&bob, &service, "tasks/get", json!({"taskId": "task-1"})).await);
    assert_eq!(data["code"], "unknown_task");
}
