//! The JSON-RPC 2.0 envelope, decoded without touching payloads.
//!
//! [`decode`] classifies one message (request, notification or response) and
//! hands back `params`, `result` and `error` as borrowed [`RawValue`]s: the
//! bytes exactly as the sender wrote them. The hub splices those bytes into
//! the messages it forwards and never builds a `serde_json::Value` of them.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, IgnoredAny};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::ErrorCode;

/// The only `jsonrpc` member value this protocol accepts.
pub const VERSION: &str = "2.0";

/// One decoded message. Every member that carries application data is raw.
#[derive(Debug, Clone, Copy)]
pub enum Message<'a> {
    Request {
        id: &'a RawValue,
        method: Method<'a>,
        params: Option<&'a RawValue>,
    },
    Notification {
        method: Method<'a>,
        params: Option<&'a RawValue>,
    },
    Response {
        id: &'a RawValue,
        outcome: Outcome<'a>,
    },
}

/// A method name: the decoded text, borrowed from the message when it has no
/// escapes (the common case, so decoding does not allocate).
#[derive(Debug, Clone, Copy)]
pub struct Method<'a> {
    raw: &'a RawValue,
}

impl<'a> Method<'a> {
    /// The method name as text. Borrowed unless the JSON string had escapes.
    pub fn name(&self) -> Cow<'a, str> {
        // `decode` only builds a Method from a raw JSON string.
        json_str(self.raw).unwrap_or(Cow::Borrowed(""))
    }

    /// The JSON string exactly as the sender wrote it, quotes included.
    pub fn raw(&self) -> &'a RawValue {
        self.raw
    }
}

/// What a response carries: exactly one of `result` or `error`.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    Result(&'a RawValue),
    Error(&'a RawValue),
}

/// Why a message could not be decoded, with the id to answer when one was found.
#[derive(Debug, Clone)]
pub struct DecodeError<'a> {
    pub code: ErrorCode,
    /// The id to echo in the error response: `None` answers with `"id": null`.
    pub id: Option<&'a RawValue>,
    pub reason: &'static str,
    pub message: String,
}

impl fmt::Display for DecodeError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// Deserializes a member that is present (even as `null`) into `Some`.
pub(crate) fn present<'de, D>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: Deserializer<'de>,
{
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// Classifies one message. Errors say which JSON-RPC error answers it.
pub fn decode(bytes: &[u8]) -> Result<Message<'_>, DecodeError<'_>> {
    let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
    if first != Some(b'{') {
        return Err(not_an_object(bytes, first));
    }
    // One UTF-8 check for the whole message: decoding from `&str` lets the
    // borrowed raw members skip serde_json's per-member re-check.
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Err(DecodeError {
            code: ErrorCode::ParseError,
            id: None,
            reason: "notJson",
            message: "message is not valid JSON: it is not UTF-8".into(),
        });
    };
    let envelope: Envelope<'_> = serde_json::from_str(text).map_err(|error| {
        let code = match error.classify() {
            serde_json::error::Category::Data => ErrorCode::InvalidRequest,
            _ => ErrorCode::ParseError,
        };
        DecodeError {
            code,
            id: None,
            reason: if code == ErrorCode::ParseError {
                "notJson"
            } else {
                "malformedEnvelope"
            },
            message: if code == ErrorCode::ParseError {
                format!("message is not valid JSON: {error}")
            } else {
                format!("message is not a JSON-RPC 2.0 object: {error}")
            },
        }
    })?;

    let id = match envelope.id {
        Some(id) if !is_valid_id(id) => {
            return Err(invalid(
                None,
                "badId",
                "id must be a string, a number or null".into(),
            ))
        }
        other => other,
    };
    match envelope.jsonrpc.and_then(json_str) {
        Some(version) if version == VERSION => {}
        _ => return Err(invalid(id, "badVersion", "jsonrpc must be \"2.0\"".into())),
    }

    if let Some(method) = envelope.method {
        if json_str(method).is_none() {
            return Err(invalid(id, "badMethod", "method must be a string".into()));
        }
        let method = Method { raw: method };
        return Ok(match id {
            Some(id) => Message::Request {
                id,
                method,
                params: envelope.params,
            },
            None => Message::Notification {
                method,
                params: envelope.params,
            },
        });
    }

    match (id, envelope.result, envelope.error) {
        (Some(id), Some(result), None) => Ok(Message::Response {
            id,
            outcome: Outcome::Result(result),
        }),
        (Some(id), None, Some(error)) => Ok(Message::Response {
            id,
            outcome: Outcome::Error(error),
        }),
        (id, Some(_), Some(_)) => Err(invalid(
            id,
            "resultAndError",
            "a response carries result or error, not both".into(),
        )),
        (None, _, _) if envelope.result.is_some() || envelope.error.is_some() => Err(invalid(
            None,
            "responseWithoutId",
            "a response must carry an id".into(),
        )),
        (id, _, _) => Err(invalid(
            id,
            "noMethod",
            "a message needs a method (request, notification) or a result or error (response)"
                .into(),
        )),
    }
}

fn not_an_object(bytes: &[u8], first: Option<u8>) -> DecodeError<'_> {
    if serde_json::from_slice::<IgnoredAny>(bytes).is_err() {
        return DecodeError {
            code: ErrorCode::ParseError,
            id: None,
            reason: "notJson",
            message: "message is not valid JSON".into(),
        };
    }
    if first == Some(b'[') {
        invalid(
            None,
            "batch",
            "JSON-RPC batches are not supported; send one message at a time".into(),
        )
    } else {
        invalid(
            None,
            "notAnObject",
            "a JSON-RPC message must be a JSON object".into(),
        )
    }
}

fn invalid<'a>(id: Option<&'a RawValue>, reason: &'static str, message: String) -> DecodeError<'a> {
    DecodeError {
        code: ErrorCode::InvalidRequest,
        id,
        reason,
        message,
    }
}

fn is_valid_id(id: &RawValue) -> bool {
    matches!(
        id.get().as_bytes().first(),
        Some(b'"' | b'-' | b'0'..=b'9' | b'n')
    )
}

/// The text of a raw JSON string, borrowed when it has no escapes; `None` when
/// the value is not a string.
pub fn json_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    json_str_text(raw.get())
}

/// [`json_str`] over the text of a JSON value known to be valid.
pub fn json_str_text(text: &str) -> Option<Cow<'_, str>> {
    if !text.starts_with('"') {
        return None;
    }
    if !text.contains('\\') {
        // A raw JSON string without escapes is its text between the quotes.
        return Some(Cow::Borrowed(&text[1..text.len() - 1]));
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

/// A request id of a message this side sends.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    Number(i64),
    String(String),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// A JSON-RPC error object. `data` stays raw so it passes through unparsed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<RawValue>>,
}

impl ErrorObject {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorObject {
            code: code.code(),
            message: message.into(),
            data: None,
        }
    }

    /// Attaches `data`, serialized once here.
    pub fn with_data(mut self, data: &impl Serialize) -> Self {
        self.data = serde_json::value::to_raw_value(data).ok();
        self
    }

    /// The data member decoded as `T`, when present and of that shape.
    pub fn data_as<T: for<'de> Deserialize<'de>>(&self) -> Option<T> {
        self.data
            .as_deref()
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
    }
}

/// An outgoing request.
#[derive(Debug, Serialize)]
pub struct Request<'a, P: Serialize> {
    pub jsonrpc: &'static str,
    pub id: &'a Id,
    pub method: &'a str,
    pub params: P,
}

impl<'a, P: Serialize> Request<'a, P> {
    pub fn new(id: &'a Id, method: &'a str, params: P) -> Self {
        Request {
            jsonrpc: VERSION,
            id,
            method,
            params,
        }
    }
}

/// An outgoing notification.
#[derive(Debug, Serialize)]
pub struct Notification<'a, P: Serialize> {
    pub jsonrpc: &'static str,
    pub method: &'a str,
    pub params: P,
}

impl<'a, P: Serialize> Notification<'a, P> {
    pub fn new(method: &'a str, params: P) -> Self {
        Notification {
            jsonrpc: VERSION,
            method,
            params,
        }
    }
}

/// An outgoing response; `id` is raw so it echoes the request's id exactly.
#[derive(Debug, Serialize)]
pub struct Response<'a, R: Serialize> {
    pub jsonrpc: &'static str,
    pub id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<R>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a ErrorObject>,
}

impl<'a, R: Serialize> Response<'a, R> {
    pub fn ok(id: &'a RawValue, result: R) -> Self {
        Response {
            jsonrpc: VERSION,
            id,
            result: Some(result),
            error: None,
        }
    }
}

impl<'a> Response<'a, ()> {
    pub fn err(id: &'a RawValue, error: &'a ErrorObject) -> Self {
        Response {
            jsonrpc: VERSION,
            id,
            result: None,
            error: Some(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(bytes: &[u8]) -> ErrorCode {
        decode(bytes).unwrap_err().code
    }

    #[test]
    fn classifies_requests_notifications_and_responses() {
        match decode(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap() {
            Message::Request { id, method, params } => {
                assert_eq!(id.get(), "7");
                assert_eq!(method.name(), "ping");
                assert!(params.is_none());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","method":"x","params":{"a": [1,2]}}"#).unwrap(),
            Message::Notification { params: Some(p), .. } if p.get() == r#"{"a": [1,2]}"#
        ));
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","id":"a","result":null}"#).unwrap(),
            Message::Response { outcome: Outcome::Result(r), .. } if r.get() == "null"
        ));
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","id":null,"method":"m"}"#).unwrap(),
            Message::Request { id, .. } if id.get() == "null"
        ));
    }

    #[test]
    fn rejects_what_is_not_json_rpc() {
        assert_eq!(code_of(b"{\"jsonrpc\":"), ErrorCode::ParseError);
        assert_eq!(code_of(b"nope"), ErrorCode::ParseError);
        assert_eq!(code_of(b"[1,2]"), ErrorCode::InvalidRequest);
        assert_eq!(code_of(b"17"), ErrorCode::InvalidRequest);
        assert_eq!(
            code_of(br#"{"id":1,"method":"m"}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"1.0","id":1,"method":"m"}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":{},"method":"m"}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":1,"method":5}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            code_of(br#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#),
            ErrorCode::InvalidRequest
        );
    }

    #[test]
    fn echoes_the_id_of_a_request_with_a_bad_version() {
        let error = decode(br#"{"jsonrpc":"3","id":"x","method":"m"}"#).unwrap_err();
        assert_eq!(error.id.map(RawValue::get), Some("\"x\""));
    }

    #[test]
    fn method_with_escapes_is_decoded() {
        match decode(br#"{"jsonrpc":"2.0","method":"a\/b"}"#).unwrap() {
            Message::Notification { method, .. } => assert_eq!(method.name(), "a/b"),
            other => panic!("{other:?}"),
        }
    }
}
