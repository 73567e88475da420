//! The MCP side of the gateway: `tools/list` from the hub's tool table,
//! `tools/call` through [`ExposedTool::call`].

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, Implementation, ListToolsResult,
    NumberOrString, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use switchboard_tools::consumer::{fresh_call_key, ExposedTool, Invocation};

use super::errors::{answer_to_mcp, tool_error, unknown_tool};
use super::Gateway;

pub(crate) struct GatewayServer(pub(crate) Arc<Gateway>);

fn request_id_text(id: &NumberOrString) -> String {
    match id {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.to_string(),
    }
}

impl ServerHandler for GatewayServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "switchboard",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Tools of the Switchboard hub's tool providers, named <namespace>__<tool>.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.0.definitions().to_vec(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let gateway = &self.0;
        let Some(tool) = gateway.tools.tools().get(request.name.as_ref()).cloned() else {
            // A client's mistake (or a list it has not refreshed yet).
            tracing::debug!(tool = %request.name, "tools/call of a tool not on the list");
            return Err(unknown_tool(&format!("unknown tool {:?}", request.name)));
        };
        let arguments = request.arguments.unwrap_or_default();
        let arguments = serde_json::value::to_raw_value(&arguments)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let progress_token = context.meta.get_progress_token();
        let _route = progress_token
            .clone()
            .zip(tool.backend.progress_client_id())
            .and_then(|(token, provider)| gateway.progress.route(token, provider.to_owned()));
        let invocation = Invocation {
            arguments,
            tool_call_id: Some(request_id_text(&context.id)),
            progress_token: progress_token
                .as_ref()
                .and_then(|token| serde_json::value::to_raw_value(token).ok()),
            // MCP has no idempotency key, so every call is its own (the
            // fence still protects against hub-level duplicates).
            call_key: Some(fresh_call_key("mcp-")),
            // The MCP client decides when to give up (it cancels); the
            // hub's longest timeout is only the backstop.
            timeout: None,
            client: None,
            task: None,
        };
        tokio::select! {
            answer = tool.call(invocation) => answer_to_mcp(&tool, answer),
            // Dropping the call sends the hub `$/cancelRequest`.
            () = context.ct.cancelled() => Ok(cancelled(&tool)),
        }
    }
}

/// The answer to a call the MCP client cancelled. rmcp sends nothing for a
/// cancelled request (MCP says not to answer one), so this only decides how
/// rmcp logs it: an error answer would be a WARN line for an ordinary event.
fn cancelled(tool: &ExposedTool) -> CallToolResponse {
    tracing::debug!(tool = %tool.name, "the MCP client cancelled a call");
    tool_error("cancelled", "cancelled by the client")
}
