//! One MCP server of one session: its rmcp client, its tools as the
//! consumer layer sees them, and its [`ToolBackend`].

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientConfig,
    ClientRequest, Implementation, ProtocolVersion, RequestId, ServerResult, Tool,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::value::RawValue;
use serde_json::Value;
use switchboard_client::RpcError;
use switchboard_protocol::tool_call::ToolCallRequest;
use switchboard_tools::consumer::{
    call_timeout, CallError, ExposedTool, ListedTool, ToolBackend, LIST_TIMEOUT,
};
use switchboard_tools::BoxFuture;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, watch};

use super::config::{ServerSpec, Transport};
use super::ServerContext;

/// How much of a stdio server's stderr is kept for a start failure's report.
const STDERR_TAIL_BYTES: usize = 1024;
/// How long stopping a server may take before it is dropped anyway.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// The client side of one server's connection: follows `list_changed`.
struct SessionClient {
    list_changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for SessionClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            Default::default(),
            Implementation::new("switchboard acp", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }
}

/// A session server as the backend of its tools.
pub struct ServerBackend {
    /// `mcp:<sessionId>:<name>`.
    id: String,
    name: String,
    peer: Peer<RoleClient>,
    /// The longest a call may take.
    ceiling: Duration,
    /// `false` once the server's connection ended.
    alive: watch::Sender<bool>,
}

impl ServerBackend {
    fn gone(&self) -> CallError {
        CallError::Failed(format!(
            "the MCP server {:?} of this session has stopped; its tools cannot run",
            self.name
        ))
    }
}

/// Tells the server a call is no longer wanted, if the call's future is
/// dropped before its answer.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let peer = self.peer.clone();
            tokio::spawn(async move {
                let note = CancelledNotificationParam::new(
                    Some(id),
                    Some("cancelled by the agent".into()),
                );
                let _ = peer.notify_cancelled(note).await;
            });
        }
    }
}

impl ToolBackend for ServerBackend {
    fn id(&self) -> &str {
        &self.id
    }

    fn call(
        &self,
        request: ToolCallRequest,
        timeout: Option<Duration>,
    ) -> BoxFuture<Result<Box<RawValue>, CallError>> {
        let peer = self.peer.clone();
        let alive = *self.alive.borrow();
        let gone = self.gone();
        let wait = call_timeout(timeout, self.ceiling);
        Box::pin(async move {
            if !alive {
                return Err(gone);
            }
            let mut params = CallToolRequestParams::new(request.name);
            match serde_json::from_str::<Value>(request.arguments.get()) {
                Ok(Value::Object(arguments)) => params = params.with_arguments(arguments),
                Ok(Value::Null) => {}
                Ok(other) => {
                    return Err(CallError::Failed(format!(
                        "MCP tools take an object of arguments, not {other}"
                    )))
                }
                Err(error) => return Err(CallError::Failed(format!("invalid arguments: {error}"))),
            }
            let mut options = PeerRequestOptions::no_options();
            options.timeout = Some(wait);
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let handle = peer
                .send_request_with_option(request, options)
                .await
                .map_err(|_| gone.clone())?;
            let mut cancel = CancelOnDrop {
                peer: peer.clone(),
                id: Some(handle.id.clone()),
            };
            let response = handle.await_response().await;
            cancel.id = None;
            match response {
                Ok(ServerResult::CallToolResult(result)) => {
                    serde_json::value::to_raw_value(&result).map_err(|error| {
                        CallError::Failed(format!("cannot encode the result: {error}"))
                    })
                }
                Ok(_) => Err(CallError::Failed(
                    "the MCP server answered tools/call with something other than a result".into(),
                )),
                Err(ServiceError::McpError(error)) => Err(CallError::Answered(RpcError {
                    code: i64::from(error.code.0),
                    message: error.message.into_owned(),
                    data: error
                        .data
                        .and_then(|data| serde_json::value::to_raw_value(&data).ok()),
                })),
                Err(ServiceError::Timeout { timeout }) => Err(CallError::TimedOut(timeout)),
                Err(ServiceError::TransportClosed) => Err(gone),
                Err(error) => Err(CallError::Failed(format!(
                    "the MCP server stopped answering during the call: {error}"
                ))),
            }
        })
    }
}

/// A started server.
pub(super) struct RunningServer {
    spec: ServerSpec,
    backend: Arc<ServerBackend>,
    tools: RwLock<Vec<Arc<ExposedTool>>>,
    /// The guard of a stdio server.
    guard_pid: Option<u32>,
    stop: Mutex<Option<rmcp::service::RunningServiceCancellationToken>>,
    /// Ends with the connection.
    ended: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl RunningServer {
    pub(super) fn backend_id(&self) -> &str {
        &self.backend.id
    }

    pub(super) fn namespace(&self) -> &str {
        &self.spec.namespace
    }

    pub(super) fn tools(&self) -> Vec<Arc<ExposedTool>> {
        self.tools.read().clone()
    }

    /// Stops the server: its guard kills it and everything it started,
    /// then the connection is closed. Bounded by [`STOP_WAIT`].
    pub(super) async fn stop(&self) {
        if let Some(pid) = self.guard_pid {
            crate::guard::stop(pid);
        }
        if let Some(stop) = self.stop.lock().take() {
            stop.cancel();
        }
        let ended = self.ended.lock().take();
        if let Some(ended) = ended {
            if tokio::time::timeout(STOP_WAIT, ended).await.is_err() {
                tracing::warn!(server = %self.spec.name, "the MCP server's connection did not close in {STOP_WAIT:?}");
            }
        }
    }
}

/// Starts `spec` for session `session_id`: connects, runs `initialize` and
/// `tools/list`. `Err` is the line the user is shown.
pub(super) async fn start(
    context: &ServerContext,
    session_id: &str,
    cwd: &Path,
    spec: ServerSpec,
) -> Result<Arc<RunningServer>, String> {
    let label = format!("MCP server {:?} ({})", spec.name, spec.describe());
    let (list_changed, mut list_changes) = mpsc::unbounded_channel();
    let handler = SessionClient { list_changed };
    let bound = context.start_timeout;
    let (running, guard_pid): (RunningService<RoleClient, SessionClient>, Option<u32>) = match &spec
        .transport
    {
        Transport::Stdio { command, args, env } => {
            let mut process = context.launcher.command(command, args);
            process
                .envs(env.iter().map(|(name, value)| (name, value)))
                .current_dir(cwd);
            let (transport, stderr) = TokioChildProcess::builder(process)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|error| format!("{label} did not start: {error}"))?;
            let pid = transport.id();
            let tail = Arc::new(Mutex::new(String::new()));
            let reader = stderr
                .map(|stderr| tokio::spawn(log_stderr(stderr, spec.name.clone(), tail.clone())));
            let stop_guard = || {
                if let Some(pid) = pid {
                    crate::guard::stop(pid);
                }
            };
            match tokio::time::timeout(bound, handler.serve(transport)).await {
                Ok(Ok(running)) => (running, pid),
                Ok(Err(error)) => {
                    stop_guard();
                    if let Some(reader) = reader {
                        let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
                    }
                    let said = tail.lock().trim().to_owned();
                    return Err(if said.is_empty() {
                        format!("{label} did not start: {error}")
                    } else {
                        format!("{label} did not start: {error}; it said: {said}")
                    });
                }
                Err(_) => {
                    stop_guard();
                    return Err(format!(
                        "{label} did not answer initialize within {bound:?}; given up"
                    ));
                }
            }
        }
        Transport::Http { url, headers } => {
            let client = reqwest::Client::builder()
                .connect_timeout(bound)
                .build()
                .map_err(|error| format!("{label}: cannot build an HTTP client: {error}"))?;
            let headers = headers
                .iter()
                .filter_map(|(name, value)| {
                    Some((
                        reqwest::header::HeaderName::from_bytes(name.as_bytes()).ok()?,
                        reqwest::header::HeaderValue::from_str(value).ok()?,
                    ))
                })
                .collect();
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            match tokio::time::timeout(bound, handler.serve(transport)).await {
                Ok(Ok(running)) => (running, None),
                Ok(Err(error)) => return Err(format!("{label} did not start: {error}")),
                Err(_) => {
                    return Err(format!(
                        "{label} did not answer initialize within {bound:?}; given up"
                    ))
                }
            }
        }
    };

    let peer = running.peer().clone();
    let backend = Arc::new(ServerBackend {
        id: format!("mcp:{session_id}:{}", spec.name),
        name: spec.name.clone(),
        peer: peer.clone(),
        ceiling: context.call_timeout,
        alive: watch::Sender::new(true),
    });
    let stop = running.cancellation_token();
    let listed = match list(&peer, &backend).await {
        Ok(tools) => tools,
        Err(reason) => {
            if let Some(pid) = guard_pid {
                crate::guard::stop(pid);
            }
            stop.cancel();
            return Err(format!("{label} started, but {reason}"));
        }
    };
    tracing::info!(session = session_id, server = %spec.name, tools = listed.len(), "MCP server started");
    let server = Arc::new(RunningServer {
        tools: RwLock::new(listed),
        backend: backend.clone(),
        guard_pid,
        stop: Mutex::new(Some(stop)),
        ended: Mutex::new(None),
        spec,
    });
    // The connection's end: the server exited, or was stopped.
    let ending = backend.clone();
    let ended = tokio::spawn(async move {
        let reason = running.waiting().await;
        ending.alive.send_replace(false);
        tracing::info!(server = %ending.name, ?reason, "MCP server connection ended");
    });
    *server.ended.lock() = Some(ended);
    // Re-list on `list_changed` (a burst is one re-list); ends with the
    // connection, when the handler and its sender are dropped.
    let weak = Arc::downgrade(&server);
    tokio::spawn(async move {
        while list_changes.recv().await.is_some() {
            while list_changes.try_recv().is_ok() {}
            let Some(server) = weak.upgrade() else { return };
            match list(&server.backend.peer, &server.backend).await {
                Ok(tools) => *server.tools.write() = tools,
                Err(reason) => tracing::warn!(server = %server.spec.name, "{reason}"),
            }
        }
    });
    Ok(server)
}

/// `tools/list`, bounded by [`LIST_TIMEOUT`], as exposed tools.
async fn list(
    peer: &Peer<RoleClient>,
    backend: &Arc<ServerBackend>,
) -> Result<Vec<Arc<ExposedTool>>, String> {
    let tools: Vec<Tool> = match tokio::time::timeout(LIST_TIMEOUT, peer.list_all_tools()).await {
        Ok(Ok(tools)) => tools,
        Ok(Err(error)) => return Err(format!("tools/list failed: {error}")),
        Err(_) => return Err(format!("tools/list got no answer within {LIST_TIMEOUT:?}")),
    };
    let answer = serde_json::value::to_raw_value(&serde_json::json!({ "tools": tools }))
        .map_err(|error| format!("cannot read its tools: {error}"))?;
    let listed = ListedTool::from_answer(&answer, &backend.id)?;
    let namespace = super::config::namespace_of(&backend.name);
    let tool_backend: Arc<dyn ToolBackend> = backend.clone();
    Ok(listed
        .into_iter()
        .map(|tool| Arc::new(ExposedTool::new(&namespace, tool, tool_backend.clone())))
        .collect())
}

/// Logs a stdio server's stderr line by line, keeping its last bytes.
async fn log_stderr(stderr: tokio::process::ChildStderr, name: String, tail: Arc<Mutex<String>>) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "switchboard_acp::mcp::stderr", server = %name, "{line}");
        let mut tail = tail.lock();
        if !tail.is_empty() {
            tail.push_str(" | ");
        }
        tail.push_str(&line);
        if tail.len() > STDERR_TAIL_BYTES {
            let mut cut = tail.len() - STDERR_TAIL_BYTES;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail.drain(..cut);
        }
    }
}
