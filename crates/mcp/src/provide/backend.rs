//! The child MCP server as the provider sees it: the current connection (if
//! the child is up), relaying calls, progress and cancellation to it.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientConfig,
    ClientRequest, Implementation, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    ServerResult,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, ServiceError};
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;
use switchboard_protocol::ErrorObject;
use switchboard_tools::errors::tool_unavailable;
use switchboard_tools::{BoxFuture, Progress, ToolCall, ToolError, ToolHandler, ToolResult};
use tokio::sync::mpsc;

/// State shared by the supervisor (the only writer of `peer`), the tool
/// handlers and the child's notification handler.
pub(crate) struct Backend {
    pub(crate) namespace: String,
    /// The live child's connection; `None` while it is down or restarting.
    peer: RwLock<Option<Peer<RoleClient>>>,
    /// The child's progress token of each running call → where its progress
    /// goes. A tokio mutex: a call holds it while its request is queued, so
    /// the child's first progress cannot arrive before the route exists.
    routes: tokio::sync::Mutex<HashMap<ProgressToken, Progress>>,
}

impl Backend {
    pub(crate) fn new(namespace: String) -> Arc<Self> {
        Arc::new(Backend {
            namespace,
            peer: RwLock::new(None),
            routes: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn set_peer(&self, peer: Option<Peer<RoleClient>>) {
        *self.peer.write() = peer;
    }

    fn peer(&self) -> Option<Peer<RoleClient>> {
        self.peer.read().clone()
    }

    fn unavailable(&self) -> ToolError {
        ToolError::NotRun(tool_unavailable(format!(
            "the MCP server of namespace {:?} is not running (it exited and is being restarted); nothing ran",
            self.namespace
        )))
    }

    async fn relay(self: Arc<Self>, call: ToolCall) -> Result<ToolResult, ToolError> {
        let Some(peer) = self.peer() else {
            return Err(self.unavailable());
        };
        let mut params = CallToolRequestParams::new(call.tool.clone());
        match call.arguments {
            Value::Object(arguments) => params = params.with_arguments(arguments),
            Value::Null => {}
            other => {
                return Err(ToolError::Failed(ErrorObject::new(
                    switchboard_protocol::ErrorCode::InvalidParams,
                    format!("MCP tools take an object of arguments, not {other}"),
                )))
            }
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut routes = self.routes.lock().await;
        let handle = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            // Never sent: the child is gone.
            Err(_) => return Err(self.unavailable()),
        };
        let request_id = handle.id.clone();
        let _route = if call.progress.is_enabled() {
            routes.insert(handle.progress_token.clone(), call.progress.clone());
            Some(RouteGuard {
                backend: self.clone(),
                token: handle.progress_token.clone(),
            })
        } else {
            None
        };
        drop(routes);
        let response = tokio::select! {
            response = handle.await_response() => response,
            () = call.cancelled.cancelled() => {
                let note = CancelledNotificationParam::new(
                    Some(request_id),
                    Some("cancelled by the caller".into()),
                );
                let _ = peer.notify_cancelled(note).await;
                return Err(ToolError::OutcomeUnknown(
                    "cancelled by the caller; the MCP server was told to stop".into(),
                ));
            }
        };
        match response {
            Ok(ServerResult::CallToolResult(result)) => serde_json::to_value(result)
                .map_err(|error| failed(format!("cannot encode the MCP server's result: {error}")))
                .and_then(ToolResult::from_value),
            Ok(_) => Err(failed(
                "the MCP server answered tools/call with something other than a CallToolResult"
                    .into(),
            )),
            Err(ServiceError::McpError(error)) => {
                let mut object = ErrorObject {
                    code: i64::from(error.code.0),
                    message: error.message.into_owned(),
                    data: None,
                };
                if let Some(data) = error.data {
                    object = object.with_data(&data);
                }
                Err(ToolError::Failed(object))
            }
            Err(error) => Err(ToolError::OutcomeUnknown(format!(
                "the MCP server stopped answering during the call: {error}"
            ))),
        }
    }

    async fn report_progress(&self, params: ProgressNotificationParam) {
        let progress = self
            .routes
            .lock()
            .await
            .get(&params.progress_token)
            .cloned();
        if let Some(progress) = progress {
            progress
                .report(params.progress, params.total, params.message)
                .await;
        }
    }
}

fn failed(message: String) -> ToolError {
    ToolError::Failed(ErrorObject::new(
        switchboard_protocol::ErrorCode::InternalError,
        message,
    ))
}

/// Removes a call's progress route when the call ends, however it ends.
struct RouteGuard {
    backend: Arc<Backend>,
    token: ProgressToken,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        let backend = self.backend.clone();
        let token = self.token.clone();
        tokio::spawn(async move {
            backend.routes.lock().await.remove(&token);
        });
    }
}

/// Every tool of the child is served by this one handler.
pub(crate) struct RelayHandler(pub(crate) Arc<Backend>);

impl ToolHandler for RelayHandler {
    fn call(&self, call: ToolCall) -> BoxFuture<Result<ToolResult, ToolError>> {
        Box::pin(self.0.clone().relay(call))
    }
}

/// The client side of the connection to the child: follows its
/// `tools/list_changed` and relays its progress.
pub(crate) struct ChildClient {
    pub(crate) backend: Arc<Backend>,
    pub(crate) list_changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for ChildClient {
    fn get_info(&self) -> ClientConfig {
        // The `initialize` handshake: what stdio servers in the wild speak.
        ClientConfig::new(
            Default::default(),
            Implementation::new("switchboard provide-mcp", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.backend.report_progress(params).await;
    }
}
