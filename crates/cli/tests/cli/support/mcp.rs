//! Shared setup for the MCP tests: real processes (`switchboard
//! provide-mcp` around `mcp-test-server`, `switchboard mcp`) on a
//! `switchboard serve` process, and the official MCP client (`rmcp`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, Implementation, ProgressNotificationParam,
    ProtocolVersion, Tool,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use switchboard_client::{Client, Selector};
pub use switchboard_testkit::{eventually, HubProcess, WAIT};
use switchboard_testkit::{switchboard_binary, workspace_binary};
use tokio::sync::Notify;

/// Child processes log at `warn` unless the test run sets `RUST_LOG`.
fn log_filter() -> String {
    std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into())
}

/// `mcp-test-server`, a binary of `switchboard-testkit`.
pub fn test_server_bin() -> PathBuf {
    workspace_binary("mcp-test-server", "switchboard-testkit")
}

/// A child process killed when dropped.
pub struct Process(Option<Child>);

impl Process {
    pub fn pid(&self) -> i32 {
        self.0.as_ref().map_or(0, |c| c.id() as i32)
    }

    pub fn signal(&mut self, signal: i32) {
        if let Some(child) = self.0.as_mut() {
            // SAFETY: kill(2) on a pid we spawned and have not reaped.
            unsafe { libc::kill(child.id() as i32, signal) };
        }
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and reap (bounded: SIGKILL after 10 s).
    pub fn stop(&mut self) {
        self.signal(libc::SIGTERM);
        if let Some(mut child) = self.0.take() {
            for _ in 0..500 {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl From<Child> for Process {
    /// Any child process of a test, stopped as [`Process::stop`] does when dropped.
    fn from(child: Child) -> Process {
        Process(Some(child))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The MCP processes of a test, around a hub process.
pub trait McpHub {
    /// `switchboard provide-mcp --namespace NS -- mcp-test-server`.
    fn provide(&self, namespace: &str) -> Process;
    /// While this file exists, the namespace's test server refuses to start.
    fn refuse_file(&self, namespace: &str) -> PathBuf;
    /// Where the namespace's test server appends each tool it runs.
    fn runs_file(&self, namespace: &str) -> PathBuf;
    /// [`McpHub::provide`], returned once the provider is in the catalog.
    async fn provide_listed(&self, namespace: &str) -> Process;
    /// `switchboard mcp` with the official MCP client on its stdio.
    async fn gateway(&self) -> Gateway;
    /// [`McpHub::gateway`] logging as it does by default (no `RUST_LOG`),
    /// with its stderr captured.
    async fn gateway_with_default_logs(&self) -> (Gateway, Stderr);
}

impl McpHub for HubProcess {
    fn provide(&self, namespace: &str) -> Process {
        let child = Command::new(switchboard_binary())
            .args(["provide-mcp", "--namespace", namespace, "--dir"])
            .arg(self.dir())
            .arg("--")
            .arg(test_server_bin())
            .env("MCP_TEST_SERVER_REFUSE_START", self.refuse_file(namespace))
            .env("MCP_TEST_SERVER_LOG", self.runs_file(namespace))
            .env("RUST_LOG", log_filter())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Process(Some(child))
    }

    fn refuse_file(&self, namespace: &str) -> PathBuf {
        self.path(&format!("refuse-{namespace}"))
    }

    fn runs_file(&self, namespace: &str) -> PathBuf {
        self.path(&format!("runs-{namespace}"))
    }

    async fn provide_listed(&self, namespace: &str) -> Process {
        let process = self.provide(namespace);
        let client = self.client("test").await;
        provider_id(&client, namespace).await;
        client.close();
        process
    }

    async fn gateway(&self) -> Gateway {
        gateway_on(self.dir()).await
    }

    async fn gateway_with_default_logs(&self) -> (Gateway, Stderr) {
        let mut command = tokio::process::Command::new(switchboard_binary());
        command
            .arg("mcp")
            .arg("--dir")
            .arg(self.dir())
            .env_remove("RUST_LOG");
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Stderr::collect(stderr.expect("stderr is piped"));
        (Gateway::serve(transport).await, stderr)
    }
}

/// `switchboard mcp --dir DIR` with the official MCP client on its stdio,
/// whether a hub runs in `dir` or not (yet).
pub async fn gateway_on(dir: &Path) -> Gateway {
    gateway_with_args(dir, &[]).await
}

/// [`gateway_on`] with more arguments (`--profile`, `--config`).
pub async fn gateway_with_args(dir: &Path, args: &[&str]) -> Gateway {
    let mut command = tokio::process::Command::new(switchboard_binary());
    command
        .arg("mcp")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .env("RUST_LOG", log_filter());
    let (transport, _) = TokioChildProcess::builder(command).spawn().unwrap();
    Gateway::serve(transport).await
}

/// A child's stderr, collected line by line until it closes.
pub struct Stderr {
    lines: Arc<Mutex<Vec<String>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Stderr {
    fn collect(stderr: tokio::process::ChildStderr) -> Self {
        use tokio::io::AsyncBufReadExt;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let collected = lines.clone();
        let reader = tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                collected.lock().unwrap().push(line);
            }
        });
        Stderr { lines, reader }
    }

    /// Every line, once the child has closed its stderr (bounded).
    pub async fn all(self) -> Vec<String> {
        tokio::time::timeout(WAIT, self.reader)
            .await
            .expect("stderr did not close")
            .unwrap();
        let lines = self.lines.lock().unwrap();
        lines.clone()
    }
}

/// Waits until a provider of `namespace` is in the catalog; its service id.
pub async fn provider_id(client: &Client, namespace: &str) -> String {
    provider_id_except(client, namespace, None).await
}

/// Like [`provider_id`], ignoring the service `except`.
pub async fn provider_id_except(client: &Client, namespace: &str, except: Option<&str>) -> String {
    let catalog = client.catalog().await.unwrap();
    let selector =
        Selector::parse(&format!("protocol=tool-provider,namespace={namespace}")).unwrap();
    let mut found = None;
    eventually(&format!("provider {namespace}"), || {
        found = catalog
            .select(&selector)
            .into_iter()
            .map(|s| s.service_id)
            .find(|id| Some(id.as_str()) != except);
        found.is_some()
    })
    .await;
    found.unwrap()
}

/// What the MCP client saw.
#[derive(Default)]
pub struct Events {
    pub list_changed: Notify,
    pub progress: Mutex<Vec<ProgressNotificationParam>>,
}

pub struct TestClient {
    events: Arc<Events>,
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            Default::default(),
            Implementation::new("switchboard-tests", "1"),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.events.list_changed.notify_one();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.events.progress.lock().unwrap().push(params);
    }
}

pub struct Gateway {
    pub service: RunningService<RoleClient, TestClient>,
    pub events: Arc<Events>,
}

impl Gateway {
    async fn serve(transport: TokioChildProcess) -> Gateway {
        let events = Arc::new(Events::default());
        let service = TestClient {
            events: events.clone(),
        }
        .serve(transport)
        .await
        .unwrap();
        Gateway { service, events }
    }

    /// Closes the MCP connection: the gateway sees stdin close and exits.
    pub async fn close(self) {
        let _ = tokio::time::timeout(WAIT, self.service.cancel()).await;
    }

    pub async fn tool_names(&self) -> Vec<String> {
        let tools: Vec<Tool> = tokio::time::timeout(WAIT, self.service.peer().list_all_tools())
            .await
            .unwrap()
            .unwrap();
        tools.into_iter().map(|t| t.name.into_owned()).collect()
    }

    /// Waits (bounded) until `tools/list` satisfies `check`.
    pub async fn wait_for_tools(
        &self,
        what: &str,
        check: impl Fn(&[String]) -> bool,
    ) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let names = self.tool_names().await;
            if check(&names) {
                return names;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}: {names:?}"
            );
            let _ = tokio::time::timeout(
                Duration::from_millis(200),
                self.events.list_changed.notified(),
            )
            .await;
        }
    }

    /// Waits (bounded) until `tools/list` names `tool`.
    pub async fn wait_for_tool(&self, tool: &str) {
        self.wait_for_tools(tool, |names| names.iter().any(|n| n == tool))
            .await;
    }

    pub async fn call(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<CallToolResult, rmcp::ServiceError> {
        self.call_with_meta(name, arguments, serde_json::json!({}))
            .await
    }

    /// `tools/call` with a `_meta` of its own.
    pub async fn call_with_meta(
        &self,
        name: &str,
        arguments: Value,
        meta: Value,
    ) -> Result<CallToolResult, rmcp::ServiceError> {
        let params: CallToolRequestParams = serde_json::from_value(serde_json::json!({
            "name": name, "arguments": arguments, "_meta": meta,
        }))
        .unwrap();
        tokio::time::timeout(WAIT, self.service.peer().call_tool(params))
            .await
            .expect("no answer in time")
    }
}

/// The text of a tool result's first content block.
pub fn text_of(result: &CallToolResult) -> String {
    let value = serde_json::to_value(result).unwrap();
    value["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Lines of a marker file written by the test server's `slow` tool.
pub fn marker_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}
