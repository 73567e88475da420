//! Shared setup: a provider with a few tools whose runs are counted, on a
//! real hub (`switchboard_testkit::TestHub`).

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchboard_client::{Client, Error, RequestOptions};
pub use switchboard_testkit::{TestHub, WAIT};
use switchboard_tools::{tool_fn, Provider, ToolError, ToolResult, ToolSpec};
use tokio::sync::Notify;

/// Where the provider named `name` keeps its call ledger.
pub fn ledger_path(hub: &TestHub, name: &str) -> std::path::PathBuf {
    hub.path("ledgers").join(format!("{name}.sqlite"))
}

/// How often each tool of [`demo_provider`] actually ran.
#[derive(Default)]
pub struct Runs {
    pub counter: AtomicU64,
    pub blocker: AtomicU64,
    pub cancellable: AtomicU64,
    /// Released by the test to let `blocker` finish.
    pub release: Notify,
    /// Signalled when `blocker` or `cancellable` has started.
    pub started: Notify,
    /// Signalled when `cancellable` saw its cancellation.
    pub saw_cancel: Notify,
}

pub fn echo_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"text": {"type": "string", "description": "what to echo"}},
        "required": ["text"],
        "additionalProperties": false,
    })
}

/// `echo`, `counter` (counts its runs), `blocker` (runs until released),
/// `cancellable` (runs until cancelled, stops 20 ms later and reports it)
/// and `progress`.
pub fn demo_tools(runs: &Arc<Runs>) -> Vec<(ToolSpec, Arc<dyn switchboard_tools::ToolHandler>)> {
    let counter_runs = runs.clone();
    let blocker_runs = runs.clone();
    let cancellable_runs = runs.clone();
    vec![
        (
            ToolSpec::new("echo", echo_schema())
                .description("Repeats the text")
                .read_only(true),
            tool_fn(|call| async move {
                Ok(ToolResult::text(
                    call.arguments["text"].as_str().unwrap_or_default(),
                ))
            }),
        ),
        (
            ToolSpec::new("counter", json!({"type": "object"})).description("Counts its runs"),
            tool_fn(move |_call| {
                let runs = counter_runs.clone();
                async move {
                    let n = runs.counter.fetch_add(1, Ordering::SeqCst) + 1;
                    Ok(ToolResult::structured(json!({"run": n})))
                }
            }),
        ),
        (
            ToolSpec::new("blocker", json!({"type": "object"})),
            tool_fn(move |_call| {
                let runs = blocker_runs.clone();
                async move {
                    let n = runs.blocker.fetch_add(1, Ordering::SeqCst) + 1;
                    runs.started.notify_one();
                    runs.release.notified().await;
                    Ok(ToolResult::structured(json!({"blocker_run": n})))
                }
            }),
        ),
        (
            ToolSpec::new("cancellable", json!({"type": "object"})),
            tool_fn(move |call| {
                let runs = cancellable_runs.clone();
                async move {
                    runs.cancellable.fetch_add(1, Ordering::SeqCst);
                    runs.started.notify_one();
                    call.cancelled.cancelled().await;
                    // It stops as real tools do, with a last wait (closing
                    // a file, a connection) after it sees the cancellation:
                    // a provider that dropped the call on cancel would never
                    // get past it.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    runs.saw_cancel.notify_one();
                    Err(ToolError::OutcomeUnknown("cancelled by the caller".into()))
                }
            }),
        ),
        (
            ToolSpec::new("progress", json!({"type": "object"})),
            tool_fn(|call| async move {
                // Out of order and repeated, as a relay can deliver them:
                // only the increasing ones (1, 2, 3) may leave.
                for step in [1, 2, 1, 2, 3] {
                    call.progress
                        .report(f64::from(step), Some(3.0), Some(format!("step {step}")))
                        .await;
                }
                Ok(ToolResult::text(format!(
                    "progress enabled: {}",
                    call.progress.is_enabled()
                )))
            }),
        ),
    ]
}

pub struct Demo {
    pub hub: TestHub,
    pub provider: Provider,
    pub provider_client: Client,
    pub caller: Client,
    pub runs: Arc<Runs>,
}

pub async fn demo_provider() -> Demo {
    let hub = TestHub::start().await;
    let provider_client = hub.client("provider").await;
    let runs = Arc::new(Runs::default());
    let provider = Provider::builder("demo")
        .ledger_path(ledger_path(&hub, "demo"))
        .tools(demo_tools(&runs))
        .cancel_grace(Duration::from_millis(200))
        .register(&provider_client)
        .await
        .unwrap();
    let caller = hub.client("caller").await;
    Demo {
        hub,
        provider,
        provider_client,
        caller,
        runs,
    }
}

impl Demo {
    /// `tools/call` with `body` as the params, raw answer.
    pub async fn call(&self, body: &Value) -> Result<Box<RawValue>, Error> {
        let params = serde_json::value::to_raw_value(body).unwrap();
        tokio::time::timeout(
            WAIT,
            self.caller.request_raw(
                &self.provider.service_id(),
                "tools/call",
                Some(&params),
                RequestOptions::default(),
            ),
        )
        .await
        .expect("no answer in time")
    }

    pub async fn list(&self) -> Value {
        self.caller
            .request(&self.provider.service_id(), "tools/list", &json!({}))
            .await
            .unwrap()
    }

    pub fn pin(&self, tool: &str) -> String {
        self.provider
            .pins()
            .into_iter()
            .find(|(name, _)| name == tool)
            .map(|(_, pin)| pin)
            .unwrap()
    }
}

/// The error of an answer that must be an error: (code, data).
pub fn rpc_error(answer: Result<Box<RawValue>, Error>) -> (i64, String, Value) {
    match answer {
        Err(Error::Rpc(error)) => {
            let data = error.data().unwrap_or(Value::Null);
            (error.code, error.message, data)
        }
        Err(other) => panic!("expected an error answer, got {other}"),
        Ok(result) => panic!("expected an error answer, got {}", result.get()),
    }
}
