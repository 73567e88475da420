//! The tool-call contract of `docs/reference/tool-calls.md`: the body of
//! `tools/call`, the opaque-token validators and the error data providers
//! answer with.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::error::ErrorCode;
use crate::jsonrpc::ErrorObject;
use crate::principal::Principal;

/// The `protocol` metadata value of a tool provider service.
pub const TOOL_PROVIDER_PROTOCOL: &str = "tool-provider";
/// The `version` metadata value of a version-1 tool provider (tools only).
pub const TOOL_PROVIDER_VERSION: u64 = 1;
/// The `version` metadata value of a version-2 tool provider (the whole MCP
/// server surface, `docs/reference/tool-calls.md` section 9).
pub const TOOL_PROVIDER_VERSION_2: u64 = 2;
/// Method names a provider serves.
pub const TOOLS_LIST: &str = "tools/list";
pub const TOOLS_CALL: &str = "tools/call";

/// The methods a version-2 provider serves besides the tools (MCP's names).
pub mod v2 {
    pub const RESOURCES_LIST: &str = "resources/list";
    pub const RESOURCE_TEMPLATES_LIST: &str = "resources/templates/list";
    pub const RESOURCES_READ: &str = "resources/read";
    pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
    pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
    pub const PROMPTS_LIST: &str = "prompts/list";
    pub const PROMPTS_GET: &str = "prompts/get";
    pub const COMPLETION_COMPLETE: &str = "completion/complete";
    pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
    pub const TASKS_GET: &str = "tasks/get";
    pub const TASKS_RESULT: &str = "tasks/result";
    pub const TASKS_LIST: &str = "tasks/list";
    pub const TASKS_CANCEL: &str = "tasks/cancel";
    /// A consumer to a provider (a notification): its MCP client's roots changed.
    pub const ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
}

/// A consumer's callback service (`docs/reference/tool-calls.md` section
/// 9.3): metadata `{"protocol": "mcp-client", "version": 1, "callback": true}`.
pub mod callback {
    /// The `protocol` metadata value of a consumer's callback service.
    pub const PROTOCOL: &str = "mcp-client";
    /// Its `version` metadata value.
    pub const VERSION: u64 = 1;
    /// The `_meta` key naming the call a callback belongs to (its `tool_call_id`).
    pub const CALL_META: &str = "switchboard/call";
    /// Requests a provider sends a consumer's callback service.
    pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
    pub const ELICITATION_CREATE: &str = "elicitation/create";
    pub const ROOTS_LIST: &str = "roots/list";
    /// Notifications it sends it.
    pub const PROGRESS: &str = "notifications/progress";
    pub const LOGGING_MESSAGE: &str = "notifications/message";
    pub const RESOURCE_UPDATED: &str = "notifications/resources/updated";
    /// `data.code` of a callback that names no call in flight.
    pub const UNKNOWN_CALL: &str = "unknown_call";
}

/// The body of a `tools/call` request.
///
/// Deliberately not `#[non_exhaustive]`: code that builds it field by field
/// must decide what to send for every member, so a new member stops its
/// struct literal compiling. [`ToolCallRequest::new`] builds the two-member
/// shape older consumers send.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The provider's bare tool name (no namespace prefix).
    pub name: String,
    /// Exactly what the caller supplied; kept raw so nothing translates it.
    pub arguments: Box<RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_token: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_pin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<CallOrigin>,
    /// Version 2: where the consumer answers the server's own requests
    /// during this call, and what its MCP client declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientRef>,
    /// Version 2: MCP's `task` member (`{ttl?}`), passed through untouched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Box<RawValue>>,
}

/// The `client` member (`docs/reference/tool-calls.md` section 9.3): the
/// consumer's callback service and its MCP client's capabilities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientRef {
    /// The callback service's id.
    pub service: String,
    /// MCP's `ClientCapabilities` as the consumer's MCP client declared them
    /// (`sampling`, `elicitation`, `roots`, ...); unknown members kept.
    #[serde(default)]
    pub capabilities: Value,
}

impl ClientRef {
    /// Whether the MCP client declared `capability` (`"sampling"`,
    /// `"elicitation"`, `"roots"`).
    pub fn declares(&self, capability: &str) -> bool {
        self.capabilities
            .get(capability)
            .is_some_and(|declared| !declared.is_null())
    }
}

impl ToolCallRequest {
    /// `{"name":…,"arguments":…}` with every optional member absent.
    pub fn new(name: impl Into<String>, arguments: Box<RawValue>) -> Self {
        ToolCallRequest {
            name: name.into(),
            arguments,
            tool_call_id: None,
            progress_token: None,
            call_key: None,
            schema_pin: None,
            origin: None,
            client: None,
            task: None,
        }
    }

    /// Like [`ToolCallRequest::new`], from a `serde_json::Value`.
    pub fn from_value(name: impl Into<String>, arguments: &Value) -> Self {
        let arguments = serde_json::value::to_raw_value(arguments)
            .unwrap_or_else(|_| RawValue::from_string("null".into()).expect("null is JSON"));
        Self::new(name, arguments)
    }

    /// Checks `call_key`, `schema_pin` and `origin.call_key` against the
    /// opaque-token rule, in that order.
    pub fn validate(&self) -> Result<(), TokenError> {
        if let Some(key) = &self.call_key {
            validate_token(TokenField::CallKey, key)?;
        }
        if let Some(pin) = &self.schema_pin {
            validate_token(TokenField::SchemaPin, pin)?;
        }
        if let Some(origin) = &self.origin {
            validate_token(TokenField::OriginCallKey, &origin.call_key)?;
        }
        Ok(())
    }
}

impl PartialEq for ToolCallRequest {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.arguments.get() == other.arguments.get()
            && self.tool_call_id == other.tool_call_id
            && self.progress_token.as_ref().map(|t| t.get())
                == other.progress_token.as_ref().map(|t| t.get())
            && self.call_key == other.call_key
            && self.schema_pin == other.schema_pin
            && self.origin == other.origin
            && self.client == other.client
            && self.task.as_ref().map(|t| t.get()) == other.task.as_ref().map(|t| t.get())
    }
}

/// The caller behind a relayed call: for attribution only, never for authority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallOrigin {
    pub carrier: Principal,
    pub call_key: String,
}

impl CallOrigin {
    pub fn new(carrier: Principal, call_key: impl Into<String>) -> Self {
        CallOrigin {
            carrier,
            call_key: call_key.into(),
        }
    }
}

/// The longest opaque token, in bytes.
pub const MAX_TOKEN_BYTES: usize = 256;

/// Which opaque token a [`TokenError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenField {
    CallKey,
    SchemaPin,
    OriginCallKey,
}

impl TokenField {
    /// The field's name on the wire, as error data names it.
    pub const fn name(self) -> &'static str {
        match self {
            TokenField::CallKey => "call_key",
            TokenField::SchemaPin => "schema_pin",
            TokenField::OriginCallKey => "origin.call_key",
        }
    }
}

impl fmt::Display for TokenField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A malformed opaque token. `Display` starts with the field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("{field} is empty; at least 1 byte is required")]
    Empty { field: TokenField },
    #[error("{field} is {length} bytes; at most 256 are allowed")]
    TooLong { field: TokenField, length: usize },
    #[error(
        "{field} has a byte at offset {index} that is not printable ASCII (0x21 to 0x7E; space is refused)"
    )]
    InvalidCharacter { field: TokenField, index: usize },
}

impl TokenError {
    pub fn field(&self) -> TokenField {
        match self {
            TokenError::Empty { field }
            | TokenError::TooLong { field, .. }
            | TokenError::InvalidCharacter { field, .. } => *field,
        }
    }

    /// `empty`, `too_long` or `invalid_character`.
    pub fn reason(&self) -> &'static str {
        match self {
            TokenError::Empty { .. } => "empty",
            TokenError::TooLong { .. } => "too_long",
            TokenError::InvalidCharacter { .. } => "invalid_character",
        }
    }

    /// The `-32602` error a provider answers with.
    pub fn to_error_object(&self) -> ErrorObject {
        let mut data = json!({
            "code": "invalid_request",
            "field": self.field().name(),
            "reason": self.reason(),
        });
        match self {
            TokenError::TooLong { length, .. } => data["length"] = json!(length),
            TokenError::InvalidCharacter { index, .. } => data["index"] = json!(index),
            TokenError::Empty { .. } => {}
        }
        ErrorObject::new(ErrorCode::InvalidParams, self.to_string()).with_data(&data)
    }
}

/// The one rule for `call_key`, `schema_pin` and `origin.call_key`: 1 to 256
/// bytes, each printable ASCII from 0x21 to 0x7E.
pub fn validate_token(field: TokenField, value: &str) -> Result<(), TokenError> {
    if value.is_empty() {
        return Err(TokenError::Empty { field });
    }
    if value.len() > MAX_TOKEN_BYTES {
        return Err(TokenError::TooLong {
            field,
            length: value.len(),
        });
    }
    if let Some(index) = value.bytes().position(|b| !(0x21..=0x7e).contains(&b)) {
        return Err(TokenError::InvalidCharacter { field, index });
    }
    Ok(())
}

pub fn validate_call_key(value: &str) -> Result<(), TokenError> {
    validate_token(TokenField::CallKey, value)
}

pub fn validate_schema_pin(value: &str) -> Result<(), TokenError> {
    validate_token(TokenField::SchemaPin, value)
}

pub fn validate_origin_call_key(value: &str) -> Result<(), TokenError> {
    validate_token(TokenField::OriginCallKey, value)
}

/// A parsed `tp1:<tool>:<sha256 hex>:<semantics>` pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaPin<'a> {
    pub tool: &'a str,
    pub digest: &'a str,
    pub semantics: u64,
}

impl<'a> SchemaPin<'a> {
    pub const PREFIX: &'static str = "tp1:";

    /// Parses a pin; `None` when it is not of the `tp1` form.
    pub fn parse(pin: &'a str) -> Option<Self> {
        let rest = pin.strip_prefix(Self::PREFIX)?;
        let (rest, semantics) = rest.rsplit_once(':')?;
        let (tool, digest) = rest.rsplit_once(':')?;
        let digest_ok = digest.len() == 64
            && digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let semantics_ok = !semantics.is_empty()
            && semantics.bytes().all(|b| b.is_ascii_digit())
            && (semantics == "0" || !semantics.starts_with('0'));
        if tool.is_empty() || !digest_ok || !semantics_ok {
            return None;
        }
        Some(SchemaPin {
            tool,
            digest,
            semantics: semantics.parse().ok()?,
        })
    }

    /// Formats a pin from its parts.
    pub fn format(tool: &str, digest_hex: &str, semantics: u64) -> String {
        format!("{}{tool}:{digest_hex}:{semantics}", Self::PREFIX)
    }
}

/// `data.code` values of tool-call errors.
pub mod error_codes {
    pub const INVALID_REQUEST: &str = "invalid_request";
    pub const TOOL_SCHEMA_CHANGED: &str = "tool_schema_changed";
    pub const CALL_KEY_REUSED: &str = "call_key_reused";
    pub const OUTCOME_UNKNOWN: &str = "outcome_unknown";
    pub const UNKNOWN_TOOL: &str = "unknown_tool";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_rule_edges() {
        assert!(validate_call_key("a").is_ok());
        assert!(validate_call_key(&"k".repeat(256)).is_ok());
        assert!(validate_call_key("!~prefix:id/base64+=").is_ok());
        assert_eq!(
            validate_call_key(""),
            Err(TokenError::Empty {
                field: TokenField::CallKey
            })
        );
        let long = validate_call_key(&"k".repeat(257)).unwrap_err();
        assert_eq!(
            long.to_string(),
            "call_key is 257 bytes; at most 256 are allowed"
        );
        for (bad, index) in [("a b", 1), ("a\tb", 1), ("ab\x7f", 2), ("é", 0)] {
            let error = validate_schema_pin(bad).unwrap_err();
            assert_eq!(
                error,
                TokenError::InvalidCharacter {
                    field: TokenField::SchemaPin,
                    index
                }
            );
            assert!(error.to_string().starts_with("schema_pin "));
        }
        let error = validate_origin_call_key("").unwrap_err();
        assert_eq!(error.field().name(), "origin.call_key");
        assert!(error.to_string().starts_with("origin.call_key "));
    }

    #[test]
    fn token_error_data_names_field_and_reason() {
        let object = validate_call_key(&"x".repeat(300))
            .unwrap_err()
            .to_error_object();
        assert_eq!(object.code, -32602);
        let data: Value = object.data_as().unwrap();
        assert_eq!(
            data,
            json!({"code":"invalid_request","field":"call_key","reason":"too_long","length":300})
        );
    }

    #[test]
    fn pins_parse() {
        let digest = "a".repeat(64);
        let pin = SchemaPin::format("read:file", &digest, 3);
        let parsed = SchemaPin::parse(&pin).unwrap();
        assert_eq!(parsed.tool, "read:file");
        assert_eq!(parsed.semantics, 3);
        assert!(SchemaPin::parse("tp1:x:abc:0").is_none());
        assert!(SchemaPin::parse(&format!("tp2:x:{digest}:0")).is_none());
        assert!(SchemaPin::parse(&format!("tp1:x:{digest}:01")).is_none());
        assert!(SchemaPin::parse(&format!("tp1::{digest}:0")).is_none());
        assert!(SchemaPin::parse(&format!("tp1:x:{}:0", "A".repeat(64))).is_none());
    }
}
