//! rmcp's client handler for one connection: progress to its call's route,
//! `tools/list_changed` to the connection's signal, everything else to the
//! caller's [`Handler`] as MCP's JSON (the server's own text, from the
//! [`WireTap`], when the connection has one).

// Sampling, roots and logging are deprecated in rmcp (SEP-2577) but still
// MCP a server may send; their types are named here only to pass them on.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorCode, ErrorData, Implementation, ListRootsResult,
    LoggingMessageNotificationParam, NotificationMetaObject, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use switchboard_protocol::ErrorObject;
use tokio::sync::Notify;

use crate::handler::{Handler, ListKind, ServerNotification, ServerRequest};
use crate::progress::ProgressRoutes;
use crate::tap::WireTap;

pub(crate) struct Bridge {
    /// `clientInfo.name` at `initialize`.
    pub(crate) client_name: String,
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) routes: Arc<ProgressRoutes>,
    /// Signalled on each `tools/list_changed`; a burst while nobody waits
    /// leaves one permit, so it is one re-list.
    pub(crate) tools_changed: Arc<Notify>,
    /// The connection's wire as the server wrote it (stdio only).
    pub(crate) tap: Arc<WireTap>,
}

impl Bridge {
    /// The server's request as it sent it, and the call it names.
    async fn request(
        &self,
        method: &str,
        typed: Value,
        context: &RequestContext<RoleClient>,
    ) -> ServerRequest {
        let raw = self
            .tap
            .take_server_request(&context.id)
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
        let params = raw.unwrap_or_else(|| with_meta(typed, &context.meta.0 .0));
        let call = match progress_token(&params) {
            Some(token) => self.routes.tag_of(&token).await,
            None => None,
        };
        ServerRequest {
            method: method.to_owned(),
            params,
            call,
            cancelled: context.ct.clone(),
        }
    }

    async fn notification(
        &self,
        method: &str,
        typed: Value,
        context: &NotificationContext<RoleClient>,
    ) -> ServerNotification {
        // rmcp 3.11 moves a notification's extensions into the context
        // before it takes `_meta` out of them, so the `_meta` the server
        // sent stays in `context.extensions` and `context.meta` is empty.
        let meta = match context.extensions.get::<NotificationMetaObject>() {
            Some(sent) if context.meta.0 .0.is_empty() => &sent.0 .0,
            _ => &context.meta.0 .0,
        };
        let params = with_meta(typed, meta);
        let call = match progress_token(&params) {
            Some(token) => self.routes.tag_of(&token).await,
            None => None,
        };
        ServerNotification {
            method: method.to_owned(),
            params,
            call,
        }
    }
}

impl ClientHandler for Bridge {
    fn get_info(&self) -> ClientConfig {
        // What the handler declares; a member rmcp's model does not know is
        // left out (a declaration it could not honour anyway).
        let capabilities: ClientCapabilities =
            serde_json::from_value(self.handler.capabilities()).unwrap_or_default();
        // The `initialize` handshake: what servers in the wild speak.
        ClientConfig::new(
            capabilities,
            Implementation::new(self.client_name.clone(), env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = self
            .request("sampling/createMessage", json(&params), &context)
            .await;
        answer(self.handler.create_message(request).await)
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let request = self
            .request("elicitation/create", json(&params), &context)
            .await;
        answer(self.handler.elicit(request).await)
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let request = self
            .request("roots/list", Value::Object(Map::new()), &context)
            .await;
        answer(self.handler.list_roots(request).await)
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
        context: NotificationContext<RoleClient>,
    ) {
        let notification = self
            .notification("notifications/message", json(&params), &context)
            .await;
        self.handler.on_logging_message(notification);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let notification = self
            .notification("notifications/resources/updated", json(&params), &context)
            .await;
        self.handler.on_resource_updated(notification);
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

/// `params` with the message's `_meta` (which rmcp keeps apart) put back.
fn with_meta(params: Value, meta: &Map<String, Value>) -> Value {
    let mut params = match params {
        Value::Object(params) => params,
        _ => Map::new(),
    };
    if !meta.is_empty() && !params.contains_key("_meta") {
        params.insert("_meta".into(), Value::Object(meta.clone()));
    }
    Value::Object(params)
}

/// `_meta.progressToken` of a message's params.
fn progress_token(params: &Value) -> Option<ProgressToken> {
    let token = params.get("_meta")?.get("progressToken")?;
    serde_json::from_value(token.clone()).ok()
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
