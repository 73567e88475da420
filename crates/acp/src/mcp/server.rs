//! One MCP server of one session: its connection (the MCP client layer,
//! `switchboard-mcp-client`, no restart: a session reports a server that
//! stops), its tools as the consumer layer sees them, and its
//! [`ToolBackend`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::value::RawValue;
use serde_json::Value;
use switchboard_client::RpcError;
use switchboard_mcp_client::{
    Event, Restart, StartOptions, Supervised, SupervisedStart, ToolCall, Upstream,
};
use switchboard_protocol::tool_call::ToolCallRequest;
use switchboard_tools::consumer::{
    call_timeout, CallError, ExposedTool, ListedTool, ToolBackend, LIST_TIMEOUT,
};
use switchboard_tools::BoxFuture;
use tokio::sync::mpsc::UnboundedReceiver;

use super::config::{ServerSpec, Transport};
use super::ServerContext;

/// A session server as the backend of its tools.
pub struct ServerBackend {
    /// `mcp:<sessionId>:<name>`.
    id: String,
    name: String,
    server: Supervised,
    /// The longest a call may take.
    ceiling: Duration,
}

impl ServerBackend {
    fn gone(&self) -> CallError {
        CallError::Failed(format!(
            "the MCP server {:?} of this session has stopped; its tools cannot run",
            self.name
        ))
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
        let connection = self.server.connection();
        let gone = self.gone();
        let wait = call_timeout(timeout, self.ceiling);
        Box::pin(async move {
            let Some(connection) = connection else {
                return Err(gone);
            };
            let arguments = serde_json::from_str::<Value>(request.arguments.get())
                .map_err(|error| CallError::Failed(format!("invalid arguments: {error}")))?;
            let mut call = ToolCall::new(request.name, arguments);
            call.timeout = Some(wait);
            call.cancel_reason = "cancelled by the agent";
            connection.call_tool(call).await.map_err(|error| {
                use switchboard_mcp_client::CallError as Mcp;
                match error {
                    Mcp::Answered(error) => CallError::Answered(RpcError {
                        code: error.code,
                        message: error.message,
                        data: error.data,
                    }),
                    Mcp::TimedOut(timeout) => CallError::TimedOut(timeout),
                    Mcp::NotSent | Mcp::Closed(_) => gone,
                    other => CallError::Failed(other.to_string()),
                }
            })
        })
    }
}

/// A started server.
pub(super) struct RunningServer {
    spec: ServerSpec,
    backend: Arc<ServerBackend>,
    tools: RwLock<Vec<Arc<ExposedTool>>>,
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

    /// Stops the server: a stdio server's guard kills it and everything it
    /// started, then the connection is closed. Bounded.
    pub(super) async fn stop(&self) {
        self.backend.server.stop().await;
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
    let options = StartOptions {
        client_name: "switchboard acp".into(),
        initialize_timeout: context.start_timeout,
        list_timeout: LIST_TIMEOUT,
    };
    let make = {
        let (context, spec, cwd, label) =
            (context.clone(), spec.clone(), cwd.to_owned(), label.clone());
        move || upstream(&context, &spec, &cwd, &label)
    };
    let SupervisedStart {
        server,
        tools,
        events,
    } = Supervised::start(make, options, Arc::new(()), Restart::Never)
        .await
        .map_err(|error| error.to_string())?;
    let backend = Arc::new(ServerBackend {
        id: format!("mcp:{session_id}:{}", spec.name),
        name: spec.name.clone(),
        server,
        ceiling: context.call_timeout,
    });
    let listed = match exposed(&tools, &backend) {
        Ok(tools) => tools,
        Err(reason) => {
            backend.server.stop().await;
            return Err(format!("{label} started, but {reason}"));
        }
    };
    tracing::info!(session = session_id, server = %spec.name, tools = listed.len(), "MCP server started");
    let server = Arc::new(RunningServer {
        tools: RwLock::new(listed),
        backend,
        spec,
    });
    tokio::spawn(follow_tools(Arc::downgrade(&server), events));
    Ok(server)
}

/// How `spec` is reached: a stdio server runs under a job guard in the
/// session's `cwd`, and is stopped through its guard.
fn upstream(context: &ServerContext, spec: &ServerSpec, cwd: &PathBuf, label: &str) -> Upstream {
    match &spec.transport {
        Transport::Stdio { command, args, env } => {
            let mut process = context.launcher.command(command, args);
            process
                .envs(env.iter().map(|(name, value)| (name, value)))
                .current_dir(cwd);
            Upstream::stdio(label, process)
                .capture_stderr()
                .stopped_by(Arc::new(|pid| {
                    crate::guard::stop(pid);
                }))
        }
        Transport::Http { url, headers } => {
            Upstream::http(label, url.as_str()).headers(headers.clone())
        }
    }
}

/// The server's tools again after each `tools/list_changed`; ends with the
/// connection.
async fn follow_tools(server: Weak<RunningServer>, mut events: UnboundedReceiver<Event>) {
    while let Some(event) = events.recv().await {
        let Event::ToolsChanged(tools) = event else {
            continue;
        };
        let Some(server) = server.upgrade() else {
            return;
        };
        match exposed(&tools, &server.backend) {
            Ok(tools) => *server.tools.write() = tools,
            Err(reason) => tracing::warn!(server = %server.spec.name, "{reason}"),
        }
    }
}

/// A server's `tools/list` entries as exposed tools.
fn exposed(tools: &[Value], backend: &Arc<ServerBackend>) -> Result<Vec<Arc<ExposedTool>>, String> {
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
