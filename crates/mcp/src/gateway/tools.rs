//! `tools/list` from the consumer's table and `tools/call` through it.

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, ErrorData, NumberOrString, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Value};
use switchboard_tools::consumer::{fresh_call_key, RequestContext as CallContext, ToolTable};

use super::errors::{answer_to_mcp, tool_error, unknown_tool};
use super::search::{self, ToolIndex, CALL_TOOL, SEARCH_TOOL};
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
    /// Built on the first search of this table (tool search).
    index: Option<Arc<ToolIndex>>,
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
            index: None,
        });
        definitions
    }

    /// The current definitions, ready to search.
    fn index(&self) -> Arc<ToolIndex> {
        let definitions = self.definitions();
        let mut listed = self.listed.lock();
        match listed.as_mut() {
            Some(listed) if Arc::ptr_eq(&listed.definitions, &definitions) => listed
                .index
                .get_or_insert_with(|| Arc::new(ToolIndex::build(definitions)))
                .clone(),
            // The table changed meanwhile: this search uses what it listed.
            _ => Arc::new(ToolIndex::build(definitions)),
        }
    }

    /// Whether a tool shown as in `definition` is listed beside
    /// `search_tools` and `call_tool` (its profile pins it).
    fn pinned(&self, definition: &Value) -> bool {
        let hub_name = definition["name"]
            .as_str()
            .and_then(|name| self.exposed(name));
        match (&self.profile, hub_name) {
            (Some(profile), Some(name)) => profile.pins(name),
            _ => false,
        }
    }
}

/// Whether a client is shown a tool: one whose `execution.taskSupport` is
/// `"required"` only if it declared tasks.
fn shown_to(tasks: bool, tool: &Value) -> bool {
    tasks || tool["execution"]["taskSupport"] != "required"
}

impl Session {
    /// `tools/list`: a tool whose `execution.taskSupport` is `"required"`
    /// only for a client that declared tasks.
    /// With tool search, `search_tools`, `call_tool` and the pinned tools.
    pub(crate) fn list_tools(&self, context: &RequestContext<RoleServer>) -> Value {
        let tasks = self.declares_tasks(context);
        let definitions = self.gateway.definitions();
        let shown = definitions.iter().filter(|tool| shown_to(tasks, tool));
        let tools: Vec<Value> = if self.gateway.tool_search() {
            let pinned = shown.filter(|tool| self.gateway.pinned(tool)).cloned();
            search::meta_tools().into_iter().chain(pinned).collect()
        } else {
            shown.cloned().collect()
        };
        json!({ "tools": tools })
    }

    /// `search_tools`: the best matches for the query among the tools this
    /// client could be listed, with their definitions.
    fn search_tools(
        &self,
        arguments: Option<rmcp::model::JsonObject>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let arguments = arguments.unwrap_or_default();
        let Some(query) = arguments.get("query").and_then(Value::as_str) else {
            return Err(ErrorData::invalid_params(
                "search_tools needs a query: what you want to do, as a string",
                None,
            ));
        };
        let limit = match arguments.get("limit") {
            None => search::DEFAULT_RESULTS,
            Some(limit) => match limit.as_u64() {
                Some(n @ 1..) => (n as usize).min(search::MAX_RESULTS),
                _ => {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "search_tools: limit must be an integer from 1 to {}",
                            search::MAX_RESULTS
                        ),
                        None,
                    ))
                }
            },
        };
        let tasks = self.declares_tasks(context);
        let found = self
            .gateway
            .index()
            .search(query, limit, |tool| shown_to(tasks, tool));
        let found = json!({ "tools": found });
        Ok(json!({
            "content": [{"type": "text", "text": found.to_string()}],
            "structuredContent": found,
        }))
    }

    /// `tools/call`. A version-2 provider gets `client` and the request's
    /// `task`; a version-1 provider's progress comes through the gateway's
    /// progress sink. The MCP client decides when to give up (it cancels);
    /// the hub's longest timeout is only the backstop.
    pub(crate) async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        if self.gateway.tool_search() {
            match request.name.as_ref() {
                SEARCH_TOOL => return self.search_tools(request.arguments, &context),
                CALL_TOOL => request = called(request)?,
                _ => {}
            }
        }
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

/// The call `call_tool` asks for: its `name` with its `arguments`.
fn called(mut request: CallToolRequestParams) -> Result<CallToolRequestParams, ErrorData> {
    let mut arguments = request.arguments.take().unwrap_or_default();
    let Some(Value::String(name)) = arguments.remove("name") else {
        return Err(ErrorData::invalid_params(
            "call_tool needs name: the tool's name, as search_tools gave it",
            None,
        ));
    };
    let inner = match arguments.remove("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(inner)) => Some(inner),
        Some(_) => {
            return Err(ErrorData::invalid_params(
                "call_tool: arguments must be an object",
                None,
            ))
        }
    };
    request.name = name.into();
    request.arguments = inner;
    Ok(request)
}
