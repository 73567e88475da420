//! `session/new` and `session/load` as this agent reads them: the schema's
//! request, with `mcpServers` read by [`crate::mcp::parse_servers`] rather
//! than by the schema's types, so that a malformed entry is refused with
//! `-32602` naming the entry and what is wrong with it (the schema's own
//! decoding would only say that the params do not parse).

use agent_client_protocol::v1::schema::{
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
};
use agent_client_protocol::{Error, ErrorCode, JsonRpcMessage, JsonRpcRequest, UntypedMessage};
use serde_json::Value;

use crate::mcp::{parse_servers, ServerSpec};

/// Whether `http` MCP servers are taken (advertised as
/// `mcpCapabilities.http`).
pub const MCP_HTTP: bool = true;

/// Reads `params` for `method` as `R`, with its `mcpServers` read apart.
fn parse_with_servers<R: JsonRpcMessage>(
    method: &str,
    params: &Value,
) -> Result<(R, Vec<ServerSpec>), Error> {
    let servers = parse_servers(params.get("mcpServers"), MCP_HTTP)
        .map_err(|message| Error::new(ErrorCode::INVALID_PARAMS, message))?;
    let mut rest = params.clone();
    if let Value::Object(members) = &mut rest {
        members.insert("mcpServers".into(), Value::Array(Vec::new()));
    }
    Ok((R::parse_message(method, &rest)?, servers))
}

macro_rules! with_servers {
    ($name:ident, $request:ty, $response:ty, $method:literal) => {
        #[derive(Debug, Clone)]
        pub struct $name {
            pub request: $request,
            pub servers: Vec<ServerSpec>,
        }

        impl JsonRpcMessage for $name {
            fn matches_method(method: &str) -> bool {
                method == $method
            }

            fn method(&self) -> &str {
                $method
            }

            fn to_untyped_message(&self) -> Result<UntypedMessage, Error> {
                self.request.to_untyped_message()
            }

            fn parse_message(method: &str, params: &Value) -> Result<Self, Error> {
                let (request, servers) = parse_with_servers::<$request>(method, params)?;
                Ok($name { request, servers })
            }
        }

        impl JsonRpcRequest for $name {
            type Response = $response;
        }
    };
}

with_servers!(
    NewSession,
    NewSessionRequest,
    NewSessionResponse,
    "session/new"
);
with_servers!(
    LoadSession,
    LoadSessionRequest,
    LoadSessionResponse,
    "session/load"
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn servers_are_read_apart_and_a_bad_one_is_named() {
        let params = json!({"cwd": "/w", "mcpServers": [{"name": "a", "command": "/bin/a"}]});
        let parsed = NewSession::parse_message("session/new", &params).unwrap();
        assert_eq!(parsed.servers.len(), 1);
        assert!(parsed.request.mcp_servers.is_empty());
        let bad = json!({"cwd": "/w", "mcpServers": [{"name": "a"}]});
        let error = NewSession::parse_message("session/new", &bad).unwrap_err();
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(error.message, "mcpServers[0] (\"a\"): command is missing");
    }
}
