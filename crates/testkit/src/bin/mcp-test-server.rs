//! `mcp-test-server`: a small real MCP server on stdio, for the tests.
//!
//! Tools:
//! - `echo {text}` → the text;
//! - `slow {marker?, seconds?}` → appends `started` to the marker file, then
//!   waits until cancelled (appends `cancelled`) or `seconds` (default 30) pass;
//! - `counter {path}` → increments the number in `path` and returns it, so a
//!   rerun is visible on disk;
//! - `progress {steps, release?}` → sends `steps` progress notifications,
//!   waits (at most 30 s) until the file `release` exists if given, then `done`;
//! - `add_tool {name}` / `remove_tool {name}` → changes the tool list at run
//!   time and sends `notifications/tools/list_changed`.
//!
//! - `exit` → the process exits at once (a crash mid-call).
//!
//! Every tool run is also appended to `$MCP_TEST_SERVER_LOG` when it is set.
//! While the file `$MCP_TEST_SERVER_REFUSE_START` exists, the server exits
//! at start (a backend that stays down until the test lets it up).

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

#[derive(Clone, Default)]
struct TestServer {
    extra_tools: Arc<Mutex<BTreeSet<String>>>,
}

fn tool(name: &str, description: &str, schema: Value) -> Tool {
    serde_json::from_value(json!({
        "name": name,
        "description": description,
        "inputSchema": schema,
    }))
    .expect("a valid tool")
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

fn string_arg<'a>(
    arguments: &'a serde_json::Map<String, Value>,
    name: &str,
) -> Result<&'a str, ErrorData> {
    arguments
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params(format!("missing string argument {name:?}"), None))
}

fn append(path: &str, line: &str) {
    use std::io::Write;
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

impl TestServer {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            tool(
                "echo",
                "Returns the text",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
            tool(
                "slow",
                "Waits until cancelled",
                json!({"type": "object", "properties": {"marker": {"type": "string"}, "seconds": {"type": "number"}}}),
            ),
            tool(
                "counter",
                "Increments the number in a file",
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ),
            tool(
                "progress",
                "Reports progress",
                json!({"type": "object", "properties": {"steps": {"type": "integer", "minimum": 0}, "release": {"type": "string"}}}),
            ),
            tool(
                "add_tool",
                "Adds a tool",
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            ),
            tool("exit", "Exits the process", json!({"type": "object"})),
            tool(
                "remove_tool",
                "Removes a tool",
                json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            ),
        ];
        for name in self.extra_tools.lock().iter() {
            tools.push(tool(name, "An added tool", json!({"type": "object"})));
        }
        tools
    }

    async fn run(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        if let Ok(log) = std::env::var("MCP_TEST_SERVER_LOG") {
            append(&log, &request.name);
        }
        match request.name.as_ref() {
            "echo" => Ok(text(string_arg(&arguments, "text")?)),
            "slow" => {
                let marker = arguments
                    .get("marker")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let seconds = arguments
                    .get("seconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(30.0);
                if let Some(marker) = &marker {
                    append(marker, "started");
                }
                tokio::select! {
                    () = context.ct.cancelled() => {
                        if let Some(marker) = &marker {
                            append(marker, "cancelled");
                        }
                        Ok(text("cancelled"))
                    }
                    () = tokio::time::sleep(Duration::from_secs_f64(seconds.clamp(0.0, 3600.0))) => Ok(text("done")),
                }
            }
            "counter" => {
                let path = string_arg(&arguments, "path")?;
                let count = std::fs::read_to_string(path)
                    .ok()
                    .and_then(|text| text.trim().parse::<u64>().ok())
                    .unwrap_or(0)
                    + 1;
                std::fs::write(path, count.to_string())
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                Ok(CallToolResult::structured(json!({"count": count})))
            }
            "progress" => {
                let steps = arguments.get("steps").and_then(Value::as_u64).unwrap_or(3);
                if let Some(token) = context.meta.get_progress_token() {
                    for step in 1..=steps {
                        let note = ProgressNotificationParam::new(token.clone(), step as f64)
                            .with_total(steps as f64)
                            .with_message(format!("step {step}"));
                        let _ = context.peer.notify_progress(note).await;
                    }
                }
                if let Some(release) = arguments.get("release").and_then(Value::as_str) {
                    for _ in 0..3000 {
                        if std::path::Path::new(release).exists() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                Ok(text("done"))
            }
            "add_tool" | "remove_tool" => {
                let name = string_arg(&arguments, "name")?.to_owned();
                if request.name == "add_tool" {
                    self.extra_tools.lock().insert(name);
                } else {
                    self.extra_tools.lock().remove(&name);
                }
                let _ = context.peer.notify_tool_list_changed().await;
                Ok(text("ok"))
            }
            "exit" => std::process::exit(3),
            other if self.extra_tools.lock().contains(other) => Ok(text(format!("{other} ran"))),
            other => Err(ErrorData::invalid_params(
                format!("unknown tool {other:?}"),
                None,
            )),
        }
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "mcp-test-server",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.run(request, context).await.map(CallToolResponse::from)
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
    let server = match TestServer::default()
        .serve(rmcp::transport::io::stdio())
        .await
    {
        Ok(server) => server,
        Err(error) => {
            eprintln!("mcp-test-server: {error}");
            std::process::exit(1);
        }
    };
    // Ends when stdin closes (the client went away).
    let _ = server.waiting().await;
}
