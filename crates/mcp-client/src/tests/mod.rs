//! The layer against a real MCP server process: the workspace's
//! `mcp-test-server` (built by `cargo test --workspace`, or
//! `cargo build -p switchboard-mcp --bins`), or a shell that is not one;
//! and against a scripted server on streams (`streams.rs`).

mod calls;
mod starting;
mod streams;
mod supervision;
mod surface;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchboard_testkit::{within, workspace_binary, WAIT};

use crate::{
    start, Connection, Handler, HandlerFuture, ListKind, ProgressSink, ProgressUpdate,
    StartOptions, Started, ToolCall, Upstream,
};

fn options(initialize_timeout: Duration) -> StartOptions {
    StartOptions {
        client_name: "switchboard-mcp-client tests".into(),
        initialize_timeout,
        list_timeout: WAIT,
    }
}

/// `mcp-test-server` with `env` set.
fn test_server(env: &[(&str, &Path)]) -> Upstream {
    let mut command =
        tokio::process::Command::new(workspace_binary("mcp-test-server", "switchboard-testkit"));
    command.envs(env.iter().map(|(name, value)| (name, value)));
    Upstream::stdio("the test server", command)
}

async fn started() -> Started {
    within(
        "the test server to start",
        start(test_server(&[]), &options(WAIT), Arc::new(())),
    )
    .await
    .expect("the test server starts")
}

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

/// The text of a `CallToolResult`'s first content block.
fn text(result: &RawValue) -> String {
    let result: Value = serde_json::from_str(result.get()).expect("a result object");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Calls `name` with `arguments`, bounded.
async fn call(connection: &Connection, name: &str, arguments: Value) -> String {
    let result = within(
        &format!("{name} to answer"),
        connection.call_tool(ToolCall::new(name, arguments)),
    )
    .await
    .unwrap_or_else(|error| panic!("{name}: {error}"));
    text(&result)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A progress sink that keeps what it is given.
#[derive(Default)]
struct Collected(Mutex<Vec<ProgressUpdate>>);

impl ProgressSink for Collected {
    fn report(&self, update: ProgressUpdate) -> HandlerFuture<'_, ()> {
        self.0.lock().push(update);
        Box::pin(async {})
    }
}

impl Collected {
    fn messages(&self) -> Vec<String> {
        let mut messages: Vec<String> = self
            .0
            .lock()
            .iter()
            .filter_map(|update| update.message.clone())
            .collect();
        messages.sort();
        messages
    }
}

/// A handler that keeps the lists said to have changed.
#[derive(Default)]
struct Changes(Mutex<Vec<ListKind>>);

impl Handler for Changes {
    fn on_list_changed(&self, list: ListKind) {
        self.0.lock().push(list);
    }
}

fn no_arguments() -> Value {
    json!({})
}
