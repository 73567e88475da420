//! Requests as this agent reads them, so that every malformed one is
//! refused with an error whose message is a sentence naming the problem:
//!
//! - `session/new`, `session/load` and `session/resume`: the schema's
//!   request, with `mcpServers` read by [`crate::mcp::parse_servers`] rather
//!   than by the schema's types, so that a malformed entry is refused with
//!   `-32602` naming the entry and what is wrong with it;
//! - every other request in [`Checked`], whose params errors say what did
//!   not parse (the SDK's own say only "Invalid params");
//! - a method this agent does not serve: [`method_not_found`].

use agent_client_protocol::v1::schema::{
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
    ResumeSessionRequest, ResumeSessionResponse,
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
    let request = R::parse_message(method, &rest).map_err(|error| params_error(method, error))?;
    Ok((request, servers))
}

/// The SDK's params error for `method` as a sentence: what did not parse.
pub fn params_error(method: &str, error: Error) -> Error {
    if error.code != ErrorCode::INVALID_PARAMS {
        return error;
    }
    let detail = match &error.data {
        Some(Value::Object(data)) => data.get("error").and_then(Value::as_str).map(str::to_owned),
        Some(Value::String(text)) => Some(text.clone()),
        _ => None,
    };
    let message = match detail {
        Some(detail) => format!("invalid params for {method}: {detail}"),
        None => format!("invalid params for {method}"),
    };
    Error::new(ErrorCode::INVALID_PARAMS, message)
}

/// `-32601` for a request no handler serves, naming the method.
pub fn method_not_found(method: &str) -> Error {
    Error::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("method not found: {method}"),
    )
    .data(Value::String(method.to_owned()))
}

/// A request of the schema, whose params errors read as sentences.
#[derive(Debug, Clone)]
pub struct Checked<R>(pub R);

impl<R: JsonRpcMessage> JsonRpcMessage for Checked<R> {
    fn matches_method(method: &str) -> bool {
        R::matches_method(method)
    }

    fn method(&self) -> &str {
        self.0.method()
    }

    fn to_untyped_message(&self) -> Result<UntypedMessage, Error> {
        self.0.to_untyped_message()
    }

    fn parse_message(method: &str, params: &Value) -> Result<Self, Error> {
        R::parse_message(method, params)
            .map(Checked)
            .map_err(|error| params_error(method, error))
    }
}

impl<R: JsonRpcRequest> JsonRpcRequest for Checked<R> {
    type Response = R::Response;
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
with_servers!(
    ResumeSession,
    ResumeSessionRequest,
    ResumeSessionResponse,
    "session/resume"
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
        let no_cwd = json!({"sessionId": "s", "mcpServers": []});
        let error = ResumeSession::parse_message("session/resume", &no_cwd).unwrap_err();
        assert_eq!(
            error.message,
            "invalid params for session/resume: missing field `cwd`"
        );
    }

    #[test]
    fn params_errors_and_unknown_methods_read_as_sentences() {
        use agent_client_protocol::v1::schema::PromptRequest;
        let error =
            Checked::<PromptRequest>::parse_message("session/prompt", &json!({"prompt": []}))
                .unwrap_err();
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(
            error.message,
            "invalid params for session/prompt: missing field `sessionId`"
        );
        let error = method_not_found("session/foo");
        assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND);
        assert_eq!(error.message, "method not found: session/foo");
    }
}
