//! `tools/list` from the consumer's table and `tools/call` through it.

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, ErrorData, NumberOrString, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Value};
use switchboard_tools::consumer::{fresh_call_key, RequestContext as CallContext, ToolTable};

use super::errors::{answer_to_mcp, tool_error, unknown_tool};
use super::session::Session;
use super::wire::TASK_META;
use super::Gateway;

/// The `_meta` member by which an MCP client gives a call its own
/// `call_key` (MCP has no idempotency key of its own): the provider's fence
/// then makes a retry with the same key return the first call's outcome,
/// never a second run, across provider restarts.
pub(crate) const CALL_KEY_META: &str = "switchboard/callKey";

/// The call's `call_key`: the client's own (any string; the provider checks
/// it against the token rule), else a fresh one for a task (the task's
/// record then answers `outcome_unknown` after a provider restart, never
/// "no such task"), else none. A fresh key on a plain call would fence
/// nothing (no one else knows it, the gateway never retries) and would
/// cost the provider's ledger two disk syncs per call.
fn call_key_of(
    context: &RequestContext<RoleServer>,
    task: bool,
) -> Result<Option<String>, ErrorData> {
    match context.meta.0.get(CALL_KEY_META) {
        Some(Value::String(key)) => Ok(Some(key.clone())),
        Some(_) => Err(ErrorData::invalid_params(
            format!("_meta.{CALL_KEY_META} must be a string"),
            Some(json!({"code": "invalid_request", "field": "call_key", "reason": "not_a_string"})),
        )),
        None => Ok(task.then(|| fresh_call_key("mcp-"))),
    }
}

pub(crate) fn request_id_text(id: &NumberOrString) -> String {
    match id {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.to_string(),
    }
}

/// The MCP definitions of one table: built once per table.
pub(crate) struct Listed {
    table: Arc<ToolTable>,
    definitions: Arc<[Value]>,
}

impl Gateway {
    /// Every tool as MCP defines it (`execution`, `outputSchema`, ...
    /// kept), under its exposed name, or the profile's name for it; one
    /// the profile leaves out is not listed. One that is not a tool
    /// definition (`inputSchema` not an object) is not in the table at all.
    pub(crate) fn definitions(&self) -> Arc<[Value]> {
        let table = self.tools.tools();
        let mut listed = self.listed.lock();
        if let Some(last) = listed.as_ref() {
            if Arc::ptr_eq(&last.table, &table) {
                return last.definitions.clone();
            }
        }
        let definitions: Arc<[Value]> = table
            .tools()
            .filter_map(|tool| self.shown_definition(&tool.name, || tool.listed_definition()))
            .collect();
        *listed = Some(Listed {
            table,
            definitions: definitions.clone(),
        });
        definitions
    }
}

impl Session {
    /// `tools/list`: a tool whose `execution.taskSupport` is `"required"`
    /// only for a client that declared tasks.
    pub(crate) fn list_tools(&self, context: &RequestContext<RoleServer>) -> Value {
        let tasks = self.declares_tasks(context);
        let tools: Vec<Value> = self
            .gateway
            .definitions()
            .iter()
            .filter(|tool| tasks || tool["execution"]["taskSupport"] != "required")
            .cloned()
            .collect();
        json!({ "tools": tools })
    }

    /// `tools/call`. A version-2 provider gets `client` and the request's
    /// `task`; a version-1 provider's progress comes through the gateway's
    /// progress sink. The MCP client decides when to give up (it cancels);
    /// the hub's longest timeout is only the backstop.
    pub(crate) async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let tool = self
            .gateway
            .exposed(&request.name)
            .and_then(|name| self.gateway.tools.tools().get(name).cloned());
        let Some(tool) = tool else {
            // A client's mistake (or a list it has not refreshed yet).
            tracing::debug!(tool = %request.name, "tools/call of a tool not on the list");
            return Err(unknown_tool(&format!("unknown tool {:?}", request.name)));
        };
        let arguments = request.arguments.unwrap_or_default();
        let arguments = serde_json::value::to_raw_value(&arguments)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let task = context
            .meta
            .0
             .0
            .get(TASK_META)
            .and_then(|task| serde_json::value::to_raw_value(task).ok());
        let client_token: Option<ProgressToken> = context.meta.get_progress_token();
        let version_one = tool
            .backend
            .provider()
            .is_some_and(|provider| provider.version < 2);
        let mut call = CallContext::new(request_id_text(&context.id), self.declared(&context));
        // A version-1 provider's progress comes to the progress sink under a
        // token the relay mints; a version-2 provider's to the callback
        // service under the call's id (the consumer maps it back).
        let _route = match (&client_token, tool.backend.progress_client_id()) {
            (Some(token), Some(provider)) if version_one => {
                let (route, sent) = self.gateway.progress.route(
                    token.clone(),
                    provider.to_owned(),
                    context.peer.clone(),
                );
                call.progress_token = Some(sent);
                Some(route)
            }
            _ => {
                call.progress_token = client_token
                    .as_ref()
                    .and_then(|token| serde_json::to_value(token).ok());
                None
            }
        };
        let call_key = call_key_of(&context, task.is_some())?;
        tokio::select! {
            answer = self.consumer.call_tool(&tool, arguments, call_key, task, &call) => {
                answer_to_mcp(&tool, answer)
            }
            // Dropping the call sends the hub `$/cancelRequest`.
            () = context.ct.cancelled() => {
                // rmcp sends nothing for a cancelled request (MCP says not
                // to answer one), so this only decides how rmcp logs it.
                tracing::debug!(tool = %tool.name, "the MCP client cancelled a call");
                Ok(tool_error("cancelled", "cancelled by the client"))
            }
        }
    }
}
