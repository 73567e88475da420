//! rmcp's client handler for one connection: progress to its call's route,
//! `tools/list_changed` to the connection's signal, everything else to the
//! caller's [`Handler`] as JSON.

// Sampling, roots and logging are deprecated in rmcp (SEP-2577) but still
// MCP a server may send; their types are named here only to pass them on.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{
    ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ErrorCode, ErrorData, Implementation, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProtocolVersion,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use switchboard_protocol::ErrorObject;
use tokio::sync::Notify;

use crate::handler::{Handler, ListKind};
use crate::progress::ProgressRoutes;

pub(crate) struct Bridge {
    /// `clientInfo.name` at `initialize`.
    pub(crate) client_name: String,
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) routes: Arc<ProgressRoutes>,
    /// Signalled on each `tools/list_changed`; a burst while nobody waits
    /// leaves one permit, so it is one re-list.
    pub(crate) tools_changed: Arc<Notify>,
}

impl ClientHandler for Bridge {
    fn get_info(&self) -> ClientConfig {
        // The `initialize` handshake: what servers in the wild speak.
        ClientConfig::new(
            Default::default(),
            Implementation::new(self.client_name.clone(), env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        answer(self.handler.create_message(json(&params)).await)
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        answer(self.handler.elicit(json(&params)).await)
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        answer(self.handler.list_roots().await)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.routes.report(params).await;
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.handler.on_logging_message(json(&params));
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.handler.on_resource_updated(json(&params));
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
        self.handler.on_list_changed(ListKind::Tools);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.handler.on_list_changed(ListKind::Resources);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.handler.on_list_changed(ListKind::Prompts);
    }
}

/// rmcp's parsed parameters as MCP's JSON again.
fn json(params: &impl Serialize) -> Value {
    serde_json::to_value(params).unwrap_or(Value::Null)
}

/// The caller's answer as the result rmcp sends; one not of the result's
/// shape is an internal error to the server.
fn answer<T: DeserializeOwned>(answer: Result<Value, ErrorObject>) -> Result<T, ErrorData> {
    match answer {
        Ok(value) => serde_json::from_value(value).map_err(|error| {
            ErrorData::internal_error(format!("the client's answer is malformed: {error}"), None)
        }),
        Err(error) => {
            let data = error.data_as::<Value>();
            Err(ErrorData::new(
                ErrorCode(i32::try_from(error.code).unwrap_or(ErrorCode::INTERNAL_ERROR.0)),
                error.message,
                data,
            ))
        }
    }
}
