//! The gateway's rmcp `Service`: the methods that carry what the hub's
//! providers serve are answered here, with the providers' results passed
//! on as raw JSON (rmcp's typed model would drop what it does not know:
//! `execution`, a 2025-11-25 `CreateTaskResult`, unknown members); the
//! lifecycle and everything else goes to [`GatewayHandler`].
//!
//! Answered here, for every version: `tools/list`, `tools/call`,
//! `resources/list`, `resources/templates/list`, `resources/read`,
//! `prompts/list`, `prompts/get`, `completion/complete`,
//! `logging/setLevel`; for sessions that began with `initialize` (before
//! 2026-07-28) also `resources/subscribe`, `resources/unsubscribe` and MCP
//! 2025-11-25's `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    ClientNotification, ClientRequest, CustomResult, ErrorCode, ErrorData, ProtocolVersion,
    ServerConfig, ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{RoleServer, ServerHandler, Service};
use serde::Serialize;
use serde_json::{Map, Value};
use switchboard_protocol::tool_call::v2;

use super::errors::without_complete_result_type;
use super::handler::GatewayHandler;
use super::session::Session;

pub(crate) struct SessionService {
    session: Arc<Session>,
    handler: GatewayHandler,
}

impl SessionService {
    pub(crate) fn new(session: Arc<Session>) -> Self {
        SessionService {
            handler: GatewayHandler(session.clone()),
            session,
        }
    }
}

/// What kind of result an answer is, for the shape 2026-07-28 requires.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// A list or a read: cacheable, so it carries cache hints.
    Cacheable,
    Plain,
}

/// The request's params as a JSON object (rmcp took `_meta` out already).
fn params_of(params: &impl Serialize) -> Map<String, Value> {
    match serde_json::to_value(params) {
        Ok(Value::Object(mut params)) => {
            params.remove("_meta");
            params
        }
        _ => Map::new(),
    }
}

/// Whether the request of `context` uses the 2026-07-28 lifecycle: it
/// names that version, or its session began without `initialize`.
fn modern(context: &RequestContext<RoleServer>) -> bool {
    context.peer.peer_info().is_none()
        || context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
}

/// rmcp's own checks for a request it would dispatch: a version named in
/// `_meta` must be one this server speaks, and a request of the 2026-07-28
/// lifecycle must carry the metadata that version requires.
fn check_lifecycle(
    context: &RequestContext<RoleServer>,
    supported: &[ProtocolVersion],
) -> Result<(), ErrorData> {
    let requested = context.meta.protocol_version();
    if let Some(requested) = &requested {
        if !supported.contains(requested) {
            return Err(ErrorData::unsupported_protocol_version(
                requested.clone(),
                supported,
            ));
        }
    }
    if modern(context) {
        let missing = context
            .meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28);
        if !missing.is_empty() {
            return Err(ErrorData::invalid_params(
                format!(
                    "request _meta is missing or has malformed required fields: {}",
                    missing.join(", ")
                ),
                None,
            ));
        }
    }
    Ok(())
}

/// A raw answer in the shape the request's version expects: 2026-07-28
/// results say `resultType: "complete"` (lists and reads with cache hints:
/// the gateway's lists change, so nothing is cached); older ones never do.
fn finish(
    shape: Shape,
    answer: Result<Value, ErrorData>,
    modern: bool,
) -> Result<ServerResult, ErrorData> {
    match answer {
        Ok(mut value) => {
            if !modern {
                without_complete_result_type(&mut value);
            } else if let Some(object) = value.as_object_mut() {
                object
                    .entry("resultType")
                    .or_insert_with(|| Value::from("complete"));
                if shape == Shape::Cacheable {
                    object.entry("ttlMs").or_insert_with(|| Value::from(0));
                    object
                        .entry("cacheScope")
                        .or_insert_with(|| Value::from("private"));
                }
            }
            Ok(ServerResult::CustomResult(CustomResult(value)))
        }
        Err(mut error) => {
            // As rmcp does: 2026-07-28 has no "resource not found" code.
            if modern && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            Err(error)
        }
    }
}

/// The methods of MCP 2025-11-25's tasks the gateway answers (rmcp reads
/// `tasks/get` and `tasks/cancel` as the 2026-07-28 extension's, the rest
/// as custom requests).
fn task_method(method: &str) -> Option<&'static str> {
    [
        v2::TASKS_GET,
        v2::TASKS_RESULT,
        v2::TASKS_LIST,
        v2::TASKS_CANCEL,
    ]
    .into_iter()
    .find(|known| *known == method)
}

impl Service<RoleServer> for SessionService {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let session = &self.session;
        session.link.set_peer(&context.peer);
        let modern = modern(&context);
        let ours = match &request {
            ClientRequest::ListToolsRequest(_)
            | ClientRequest::CallToolRequest(_)
            | ClientRequest::ListResourcesRequest(_)
            | ClientRequest::ListResourceTemplatesRequest(_)
            | ClientRequest::ReadResourceRequest(_)
            | ClientRequest::ListPromptsRequest(_)
            | ClientRequest::GetPromptRequest(_)
            | ClientRequest::CompleteRequest(_)
            | ClientRequest::SetLevelRequest(_) => true,
            ClientRequest::SubscribeRequest(_)
            | ClientRequest::UnsubscribeRequest(_)
            | ClientRequest::GetTaskRequest(_)
            | ClientRequest::CancelTaskRequest(_) => !modern,
            ClientRequest::CustomRequest(custom) => {
                !modern && task_method(&custom.method).is_some()
            }
            _ => false,
        };
        if !ours {
            return Service::handle_request(&self.handler, request, context).await;
        }
        check_lifecycle(
            &context,
            &ServerHandler::supported_protocol_versions(&self.handler),
        )?;
        let (shape, answer) = match request {
            ClientRequest::ListToolsRequest(_) => {
                (Shape::Cacheable, Ok(session.list_tools(&context)))
            }
            ClientRequest::CallToolRequest(call) => {
                (Shape::Plain, session.call_tool(call.params, context).await)
            }
            ClientRequest::ListResourcesRequest(_) => {
                (Shape::Cacheable, Ok(session.list_resources()))
            }
            ClientRequest::ListResourceTemplatesRequest(_) => {
                (Shape::Cacheable, Ok(session.list_resource_templates()))
            }
            ClientRequest::ReadResourceRequest(read) => (
                Shape::Cacheable,
                session
                    .read_resource(params_of(&read.params), &context)
                    .await,
            ),
            ClientRequest::ListPromptsRequest(_) => (Shape::Cacheable, Ok(session.list_prompts())),
            ClientRequest::GetPromptRequest(get) => (
                Shape::Plain,
                session.get_prompt(params_of(&get.params), &context).await,
            ),
            ClientRequest::CompleteRequest(complete) => (
                Shape::Plain,
                session
                    .complete(params_of(&complete.params), &context)
                    .await,
            ),
            ClientRequest::SetLevelRequest(set) => {
                let level = params_of(&set.params)
                    .get("level")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                (Shape::Plain, session.set_level(&level, &context).await)
            }
            ClientRequest::SubscribeRequest(subscribe) => (
                Shape::Plain,
                session.subscribe(&subscribe.params.uri, &context).await,
            ),
            ClientRequest::UnsubscribeRequest(unsubscribe) => (
                Shape::Plain,
                session.unsubscribe(&unsubscribe.params.uri, &context).await,
            ),
            ClientRequest::GetTaskRequest(get) => (
                Shape::Plain,
                session
                    .task_request(v2::TASKS_GET, params_of(&get.params), &context)
                    .await,
            ),
            ClientRequest::CancelTaskRequest(cancel) => (
                Shape::Plain,
                session
                    .task_request(v2::TASKS_CANCEL, params_of(&cancel.params), &context)
                    .await,
            ),
            ClientRequest::CustomRequest(custom) => {
                let method = task_method(&custom.method).unwrap_or(v2::TASKS_LIST);
                let answer = if method == v2::TASKS_LIST {
                    session.list_tasks(&context).await
                } else {
                    let params = match custom.params {
                        Some(Value::Object(mut params)) => {
                            params.remove("_meta");
                            params
                        }
                        _ => Map::new(),
                    };
                    session.task_request(method, params, &context).await
                };
                (Shape::Plain, answer)
            }
            other => return Service::handle_request(&self.handler, other, context).await,
        };
        finish(shape, answer, modern)
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.session.link.set_peer(&context.peer);
        Service::handle_notification(&self.handler, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerHandler::get_info(&self.handler)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        ServerHandler::supported_protocol_versions(&self.handler)
    }
}
