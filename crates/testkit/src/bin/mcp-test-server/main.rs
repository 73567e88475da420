//! `mcp-test-server`: a small real MCP server on stdio (protocol 2025-11-25),
//! for the tests.
//!
//! Tools (`tools.rs`):
//! - `echo {text}` → the text;
//! - `slow {marker?, seconds?}` → appends `started` to the marker file, then
//!   waits until cancelled (appends `cancelled`) or `seconds` (default 30) pass;
//! - `counter {path}` → increments the number in `path` and returns it, so a
//!   rerun is visible on disk;
//! - `progress {steps, release?}` → sends `steps` progress notifications,
//!   waits (at most 30 s) until the file `release` exists if given, then `done`;
//! - `add_tool {name}` / `remove_tool {name}` → changes the tool list at run
//!   time and sends `notifications/tools/list_changed`; `add_resource {uri}`
//!   and `add_prompt {name}` do the same for resources and prompts;
//! - `exit` → the process exits at once (a crash mid-call);
//! - `sample {prompt?, link?}`, `elicit {message?, mode?, link?}`, `roots
//!   {link?}` → ask the client (`sampling/createMessage`,
//!   `elicitation/create` in form or URL mode, `roots/list`) and return its
//!   answer as structured content, or its error as `error CODE: MESSAGE`
//!   with `isError`. `link: "token"` puts the call's progress token in the
//!   request's `_meta`; without it the request names no call;
//! - `log {level, text, link?}` → `notifications/message` at `level` (sent
//!   when the level set by `logging/setLevel` lets it through); `level` →
//!   the level set, or `unset`; `touch {uri}` → `notifications/resources/updated`
//!   when `uri` is subscribed; `roots_changes` → how many
//!   `notifications/roots/list_changed` came; `client` → the client's
//!   `initialize` params (its capabilities);
//! - `research {topic?, seconds?, delay?, ask?}` (`execution.taskSupport:
//!   "required"`) → a task (`tasks.rs`), created after `delay` seconds
//!   (default none): it works `seconds` (default 0.3),
//!   asks the client for a sample about the task when `ask` is `sampling`
//!   (`_meta` naming the task), then completes.
//!
//! Resources, a resource template, prompts with arguments, completion and
//! logging are in `surface.rs`.
//!
//! Every tool run is also appended to `$MCP_TEST_SERVER_LOG` when it is set.
//! While the file `$MCP_TEST_SERVER_REFUSE_START` exists, the server exits
//! at start (a backend that stays down until the test lets it up).

mod surface;
mod tasks;
mod tools;
mod wire;

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use wire::{Dispatch, Peer, RpcError};

/// Protocol versions this server speaks, newest first.
const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

pub struct Server {
    pub peer: Arc<Peer>,
    pub extra_tools: Mutex<BTreeSet<String>>,
    pub extra_resources: Mutex<BTreeSet<String>>,
    pub extra_prompts: Mutex<BTreeSet<String>>,
    pub subscriptions: Mutex<BTreeSet<String>>,
    /// The level `logging/setLevel` set last.
    pub level: Mutex<Option<String>>,
    pub roots_changes: AtomicU64,
    pub tasks: tasks::Tasks,
    /// The client's `initialize` params.
    pub client: Mutex<Value>,
}

impl Server {
    fn new(peer: Arc<Peer>) -> Arc<Server> {
        Arc::new(Server {
            peer,
            extra_tools: Mutex::default(),
            extra_resources: Mutex::default(),
            extra_prompts: Mutex::default(),
            subscriptions: Mutex::default(),
            level: Mutex::default(),
            roots_changes: AtomicU64::new(0),
            tasks: tasks::Tasks::default(),
            client: Mutex::new(json!({})),
        })
    }

    fn initialize(&self, params: &Value) -> Value {
        *self.client.lock() = params.clone();
        let asked = params["protocolVersion"].as_str().unwrap_or_default();
        let version = VERSIONS
            .iter()
            .find(|version| **version == asked)
            .unwrap_or(&VERSIONS[0]);
        json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": true},
                "resources": {"subscribe": true, "listChanged": true},
                "prompts": {"listChanged": true},
                "completions": {},
                "logging": {},
                "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
            },
            "serverInfo": {"name": "mcp-test-server", "version": env!("CARGO_PKG_VERSION")},
        })
    }
}

impl Dispatch for Server {
    async fn request(
        self: Arc<Self>,
        method: String,
        params: Value,
        cancelled: CancellationToken,
    ) -> Option<Result<Value, RpcError>> {
        tracing::debug!(method, "request");
        let answer = match method.as_str() {
            "initialize" => Ok(self.initialize(&params)),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({"tools": self.tools()})),
            "tools/call" => return self.call_tool(params, cancelled).await,
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" => {
                self.tasks.request(&method, &params, &cancelled).await
            }
            other => match self.surface(other, &params) {
                Some(answer) => answer,
                None => Err(RpcError::new(-32601, format!("Method not found: {other}"))),
            },
        };
        Some(answer)
    }

    fn notification(&self, method: &str, _params: &Value) {
        if method == "notifications/roots/list_changed" {
            self.roots_changes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Appends `line` to the file at `path`.
pub fn append(path: &str, line: &str) {
    use std::io::Write;
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Some(refuse) = std::env::var_os("MCP_TEST_SERVER_REFUSE_START") {
        if std::path::Path::new(&refuse).exists() {
            eprintln!("mcp-test-server: refusing to start while {refuse:?} exists");
            std::process::exit(1);
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    // Ends when stdin closes (the client went away).
    wire::serve(Server::new).await;
}
