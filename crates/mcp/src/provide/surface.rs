//! The hosted server's surface beyond its tools, for the hub's callers
//! (`docs/reference/tool-calls.md` section 9.2): lists read whole from the
//! server, reads, prompts, completion and tasks passed through, and what
//! is shared among callers kept here: resource subscriptions (the server is
//! subscribed while anyone is) and logging levels (the server logs at the
//! most verbose one asked).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_client::{reply, Reply};
use switchboard_mcp_client::{Connection, RequestError};
use switchboard_protocol::tool_call::v2;
use switchboard_protocol::{ErrorCode, ErrorObject};
use switchboard_tools::errors::{invalid_member, tool_unavailable};
use switchboard_tools::{BoxFuture, SurfaceHandler, SurfaceNotification, SurfaceRequest};

use super::listeners::severity;
use super::relay::Relay;

/// How long one request to the server may take; the hub's longest request
/// timeout, since the caller's own (shorter) one cancels it first.
pub(crate) const SERVER_REQUEST_BOUND: Duration = Duration::from_secs(600);

pub(crate) struct Surface(pub(crate) Arc<Relay>);

impl SurfaceHandler for Surface {
    fn request(&self, request: SurfaceRequest) -> BoxFuture<Reply> {
        let relay = self.0.clone();
        Box::pin(async move {
            let cancelled = request.cancelled.clone();
            tokio::select! {
                answer = relay.serve(request) => answer,
                // The hub answered the caller already; dropping the work
                // tells the server `notifications/cancelled`.
                () = cancelled.cancelled() => Err(ErrorObject::new(ErrorCode::RequestCancelled, "cancelled")),
            }
        })
    }

    fn notification(&self, notification: SurfaceNotification) -> BoxFuture<()> {
        let relay = self.0.clone();
        Box::pin(async move {
            if notification.method != v2::ROOTS_LIST_CHANGED {
                return;
            }
            if let Some(connection) = relay.connection() {
                if let Err(error) = connection.roots_list_changed().await {
                    tracing::debug!(%error, "cannot tell the MCP server its roots changed");
                }
            }
        })
    }
}

impl Relay {
    fn live(&self) -> Result<Connection, ErrorObject> {
        self.connection().ok_or_else(|| {
            tool_unavailable(format!(
                "the MCP server of namespace {:?} is not running (it exited and is being restarted)",
                self.namespace
            ))
        })
    }

    async fn serve(&self, request: SurfaceRequest) -> Reply {
        let connection = self.live()?;
        let method = request.method.as_str();
        match method {
            v2::RESOURCES_LIST => whole(&connection, method, "resources").await,
            v2::RESOURCE_TEMPLATES_LIST => whole(&connection, method, "resourceTemplates").await,
            v2::PROMPTS_LIST => whole(&connection, method, "prompts").await,
            v2::TASKS_LIST => whole(&connection, method, "tasks").await,
            v2::RESOURCES_SUBSCRIBE | v2::RESOURCES_UNSUBSCRIBE => {
                self.subscription(&connection, request).await
            }
            v2::LOGGING_SET_LEVEL => self.set_level(&connection, request).await,
            _ => forward(&connection, method, request.params).await,
        }
    }

    async fn subscription(&self, connection: &Connection, request: SurfaceRequest) -> Reply {
        let service = match &request.client {
            Some(client) => client.service.clone(),
            None => return Err(invalid_member("client", "is required to subscribe")),
        };
        let Some(uri) = request.params["uri"].as_str() else {
            return Err(invalid_member("uri", "must be a string"));
        };
        if request.method == v2::RESOURCES_SUBSCRIBE {
            let first = self.listeners.lock().subscribe(uri, &service);
            if first {
                if let Err(error) =
                    forward(connection, v2::RESOURCES_SUBSCRIBE, json!({"uri": uri})).await
                {
                    self.listeners.lock().unsubscribe(uri, &service);
                    return Err(error);
                }
            }
        } else {
            let last = self.listeners.lock().unsubscribe(uri, &service);
            if last {
                forward(connection, v2::RESOURCES_UNSUBSCRIBE, json!({"uri": uri})).await?;
            }
        }
        reply(&json!({}))
    }

    async fn set_level(&self, connection: &Connection, request: SurfaceRequest) -> Reply {
        let service = match &request.client {
            Some(client) => client.service.clone(),
            None => {
                return Err(invalid_member(
                    "client",
                    "is required to set a logging level",
                ))
            }
        };
        let Some(level) = request.params["level"].as_str().and_then(severity) else {
            return Err(invalid_member(
                "level",
                "must be one of MCP's logging levels",
            ));
        };
        let change = self.listeners.lock().set_level(&service, level);
        if let Some(level) = change {
            forward(connection, v2::LOGGING_SET_LEVEL, json!({"level": level})).await?;
        }
        reply(&json!({}))
    }

    /// Tells a new server what the callers asked of the last one: the URIs
    /// they are subscribed to and the logging level.
    pub(crate) async fn restore(&self, connection: &Connection) {
        let (uris, level) = {
            let listeners = self.listeners.lock();
            (listeners.subscribed_uris(), listeners.server_level())
        };
        for uri in uris {
            if let Err(error) =
                forward(connection, v2::RESOURCES_SUBSCRIBE, json!({"uri": uri})).await
            {
                tracing::warn!(error = %error.message, "cannot subscribe the restarted MCP server again");
            }
        }
        if let Some(level) = level {
            if let Err(error) =
                forward(connection, v2::LOGGING_SET_LEVEL, json!({"level": level})).await
            {
                tracing::warn!(error = %error.message, "cannot set the restarted MCP server's logging level");
            }
        }
    }

    /// A callback service is gone: its subscriptions and level go with it.
    pub(crate) async fn service_gone(&self, service: &str) {
        let (emptied, level) = self.listeners.lock().remove_service(service);
        let Some(connection) = self.connection() else {
            return;
        };
        for uri in emptied {
            let _ = forward(&connection, v2::RESOURCES_UNSUBSCRIBE, json!({"uri": uri})).await;
        }
        if let Some(level) = level {
            let _ = forward(&connection, v2::LOGGING_SET_LEVEL, json!({"level": level})).await;
        }
    }
}

/// A request passed through: the server's result or error, as it sent it.
async fn forward(connection: &Connection, method: &str, params: Value) -> Reply {
    connection
        .request(method, params, SERVER_REQUEST_BOUND)
        .await
        .map_err(server_error)
}

/// A list, every page of it, as one answer without `nextCursor`.
async fn whole(connection: &Connection, method: &str, key: &str) -> Reply {
    let items = connection
        .list_all(method, key, SERVER_REQUEST_BOUND)
        .await
        .map_err(server_error)?;
    reply(&json!({ key: items }))
}

fn server_error(error: RequestError) -> ErrorObject {
    match error {
        RequestError::Answered { error, .. } => error,
        other => ErrorObject::new(ErrorCode::InternalError, format!("the MCP server: {other}")),
    }
}
