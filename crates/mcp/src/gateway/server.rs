//! The MCP side of the gateway: `tools/list` from the index, `tools/call`
//! as a hub `clientService/request` `tools/call` to the provider.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorCode, ErrorData, Implementation, ListToolsResult,
    NumberOrString, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{json, Value};
use switchboard_client::RequestOptions;
use switchboard_protocol::tool_call::{ToolCallRequest, TOOLS_CALL};

use super::errors::{answer_to_mcp, tool_error};
use super::Gateway;

pub(crate) struct GatewayServer(pub(crate) Arc<Gateway>);

/// A fresh `call_key` per MCP call: MCP has no idempotency key, so every
/// call is its own (the fence still protects against hub-level duplicates).
fn fresh_call_key() -> String {
    let mut random = [0u8; 16];
    let _ = getrandom::fill(&mut random);
    format!("mcp-{}", hex::encode(random))
}

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
            self.0.table().definitions(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let gateway = &self.0;
        let table = gateway.table();
        let Some(entry) = table.tools.get(request.name.as_ref()) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {:?}", request.name),
                Some(json!({"code": "unknown_tool"})),
            ));
        };
        let Some(client) = gateway.client() else {
            return Ok(tool_error(
                "hub_unavailable",
                "the gateway is not connected to the hub yet; retry shortly",
            ));
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let progress_token = context.meta.get_progress_token();
        let _route = progress_token
            .clone()
            .and_then(|token| gateway.route_progress(token, entry.provider_client_id.clone()));
        let body = ToolCallRequest {
            name: entry.tool.clone(),
            arguments: serde_json::value::to_raw_value(&arguments)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?,
            tool_call_id: Some(request_id_text(&context.id)),
            progress_token: progress_token
                .as_ref()
                .and_then(|token| serde_json::value::to_raw_value(token).ok()),
            call_key: Some(fresh_call_key()),
            schema_pin: entry.schema_pin.clone(),
            origin: None,
        };
        let params = serde_json::value::to_raw_value(&body)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        // The MCP client decides when to give up (it cancels); the hub's
        // longest timeout is only the backstop.
        let timeout = Duration::from_millis(client.limits().max_request_timeout_ms);
        let answer = tokio::select! {
            answer = client.request_raw(
                &entry.service_id,
                TOOLS_CALL,
                Some(&params),
                RequestOptions { timeout: Some(timeout) },
            ) => answer,
            // Dropping the request future sends the hub `$/cancelRequest`.
            () = context.ct.cancelled() => {
                return Err(ErrorData::new(ErrorCode(-32800), "cancelled by the client", None));
            }
        };
        answer_to_mcp(gateway, entry, answer)
    }
}
