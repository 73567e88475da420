//! The JSON-RPC 2.0 envelope, decoded without touching payloads.
//!
//! [`decode`] classifies one message (request, notification or response) and
//! hands back `params`, `result` and `error` as borrowed [`RawValue`]s: the
//! bytes exactly as the sender wrote them. The hub splices those bytes into
//! the messages it forwards and never builds a `serde_json::Value` of them.

use std::borrow::Cow;
use std::fmt;

use serde::de::Deserializer;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::ErrorCode;
use crate::json::{self, Cursor, Member, MemberIndex, SyntaxError, TextError};

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
    /// Whether the string has escapes (so its text is not its raw bytes).
    escaped: bool,
}

impl<'a> Method<'a> {
    /// The method name as text. Borrowed unless the JSON string had escapes.
    pub fn name(&self) -> Cow<'a, str> {
        let raw = self.raw.get();
        if self.escaped {
            // `decode` builds a Method only from a string whose text it has
            // decoded once already, so this cannot fail.
            json::string_text(raw).unwrap_or_default()
        } else {
            Cow::Borrowed(&raw[1..raw.len() - 1])
        }
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

/// What the validating walk of a message found besides its envelope.
#[derive(Debug, Default)]
pub struct Layout<'a> {
    /// The members of `params`, when it is an object.
    pub params: MemberIndex<'a>,
    /// How deeply the whole message nests (1 for an object of scalars; see
    /// [`json::depth`]); compare with `limits::MAX_FORWARDED_DEPTH`.
    pub depth: usize,
    /// Whether the message holds a raw line feed (as whitespace between
    /// tokens, the only place valid JSON has one). Set for a message that
    /// decodes; for one that does not it may miss some.
    pub line_feed: bool,
}

/// The envelope's members, as found by one validating walk of the message.
#[derive(Default)]
struct Envelope<'a> {
    jsonrpc: Option<Member<'a>>,
    id: Option<&'a str>,
    method: Option<Member<'a>>,
    params: Option<&'a str>,
    result: Option<&'a str>,
    error: Option<&'a str>,
    /// The first envelope member that appeared twice.
    duplicate: Option<&'static str>,
}

impl<'a> Envelope<'a> {
    /// Validates the object `text` (its first non-space byte is `{`) and
    /// finds its members; the members of an object `params` and the depth
    /// of the message go to `layout`.
    fn walk(text: &'a str, layout: &mut Layout<'a>) -> Result<Self, SyntaxError> {
        let mut envelope = Envelope::default();
        let mut cursor = Cursor::new(text);
        cursor.skip_space();
        cursor.eat(b'{', "'{'")?;
        cursor.enter();
        cursor.members(|cursor, key| {
            let start = cursor.at();
            // `params` is walked member by member, so that routing finds
            // `serviceId` and `method` without walking the payload again.
            let value_escaped = if key.is("params") && cursor.peek() == Some(b'{') {
                cursor.object_into(&mut layout.params)?;
                false
            } else {
                cursor.value()?
            };
            let member = Member {
                key,
                value: cursor.since(start),
                value_escaped,
            };
            envelope.record(member);
            Ok(())
        })?;
        cursor.end()?;
        layout.depth = cursor.deepest();
        layout.line_feed = cursor.saw_line_feed();
        Ok(envelope)
    }

    fn record(&mut self, member: Member<'a>) {
        // A key without text (a lone surrogate escape) names no member.
        let (taken, field) = match member.key.text().as_deref() {
            Some("jsonrpc") => (self.jsonrpc.replace(member).is_some(), "jsonrpc"),
            Some("id") => (self.id.replace(member.value).is_some(), "id"),
            Some("method") => (self.method.replace(member).is_some(), "method"),
            Some("params") => (self.params.replace(member.value).is_some(), "params"),
            Some("result") => (self.result.replace(member.value).is_some(), "result"),
            Some("error") => (self.error.replace(member.value).is_some(), "error"),
            _ => return,
        };
        if taken && self.duplicate.is_none() {
            self.duplicate = Some(field);
        }
    }
}

/// Deserializes a member that is present (even as `null`) into `Some`.
pub(crate) fn present<'de, D>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: Deserializer<'de>,
{
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// `text`, which the walk has validated as one JSON value without
/// surrounding space, as a [`RawValue`], without parsing it again.
fn validated(text: &str) -> &RawValue {
    // SAFETY: `RawValue` is `#[repr(transparent)]` over `str`, so the two
    // references have the same layout; serde_json makes the same cast in its
    // own (private) `RawValue::from_borrowed`. What `RawValue` promises its
    // users, that the text is exactly one valid JSON value, holds because
    // `Envelope::walk` validated it (the `json` module's tests and the
    // `json_validator` fuzz target hold the walk to serde_json's rules).
    unsafe { &*(text as *const str as *const RawValue) }
}

/// Classifies one message. Errors say which JSON-RPC error answers it.
pub fn decode(bytes: &[u8]) -> Result<Message<'_>, DecodeError<'_>> {
    decode_indexed(bytes, &mut Layout::default())
}

/// [`decode`], and into `layout` what the same walk found: the members of
/// `params` when it is an object ([`MemberIndex::members_of`]) and how
/// deeply the message nests.
pub fn decode_indexed<'a>(
    bytes: &'a [u8],
    layout: &mut Layout<'a>,
) -> Result<Message<'a>, DecodeError<'a>> {
    let first = bytes.iter().copied().find(|&b| !json::is_space(b));
    if first != Some(b'{') {
        return Err(not_an_object(bytes, first));
    }
    // One UTF-8 check for the whole message (SIMD: std's check was ~260
    // instructions of a 300-byte notification); the walk then only looks
    // for ASCII.
    let Ok(text) = simdutf8::basic::from_utf8(bytes) else {
        return Err(DecodeError {
            code: ErrorCode::ParseError,
            id: None,
            reason: "notJson",
            message: "message is not valid JSON: it is not UTF-8".into(),
        });
    };
    decode_object(text, layout)
}

/// [`decode_indexed`] of a text already known to be UTF-8 (a WebSocket
/// text frame, which the frame reader checked): the same decode without a
/// second UTF-8 check (~140 instructions of a 300-byte notification).
pub fn decode_text_indexed<'a>(
    text: &'a str,
    layout: &mut Layout<'a>,
) -> Result<Message<'a>, DecodeError<'a>> {
    let first = text.bytes().find(|&b| !json::is_space(b));
    if first != Some(b'{') {
        return Err(not_an_object(text.as_bytes(), first));
    }
    decode_object(text, layout)
}

/// Decodes a UTF-8 text that starts, after whitespace, with `{`.
fn decode_object<'a>(
    text: &'a str,
    layout: &mut Layout<'a>,
) -> Result<Message<'a>, DecodeError<'a>> {
    let envelope = Envelope::walk(text, layout).map_err(|error| DecodeError {
        code: ErrorCode::ParseError,
        id: None,
        reason: "notJson",
        message: format!("message is not valid JSON: {error}"),
    })?;
    if let Some(field) = envelope.duplicate {
        return Err(invalid(
            None,
            "malformedEnvelope",
            format!("message is not a JSON-RPC 2.0 object: duplicate member `{field}`"),
        ));
    }
    // Every member was validated by the walk: they are `RawValue`s as is.
    let params = envelope.params.map(validated);
    let result = envelope.result.map(validated);
    let error = envelope.error.map(validated);

    let id = match envelope.id {
        Some(id) if !is_valid_id(id) => {
            return Err(invalid(
                None,
                "badId",
                "id must be a string, a number or null".into(),
            ))
        }
        other => other.map(validated),
    };
    match envelope.jsonrpc.as_ref().map(Member::value_str) {
        Some(Ok(version)) if version == VERSION => {}
        _ => return Err(invalid(id, "badVersion", "jsonrpc must be \"2.0\"".into())),
    }

    if let Some(method) = envelope.method {
        // Decoded here only when escaped (rare): a name without text is
        // refused rather than read as some other name.
        let text = match (method.value.starts_with('"'), method.value_escaped) {
            (false, _) => Err(TextError::NotAString),
            (true, true) => json::string_text(method.value).map(|_| ()),
            (true, false) => Ok(()),
        };
        if let Err(error) = text {
            let message = format!("method {error}");
            return Err(invalid(id, "badMethod", message));
        }
        let method = Method {
            raw: validated(method.value),
            escaped: method.value_escaped,
        };
        let message = match id {
            Some(id) => Message::Request { id, method, params },
            None => Message::Notification { method, params },
        };
        return Ok(message);
    }

    let message =
        match (id, result, error) {
            (Some(id), Some(result), None) => Message::Response {
                id,
                outcome: Outcome::Result(result),
            },
            (Some(id), None, Some(error)) => Message::Response {
                id,
                outcome: Outcome::Error(error),
            },
            (id, Some(_), Some(_)) => {
                return Err(invalid(
                    id,
                    "resultAndError",
                    "a response carries result or error, not both".into(),
                ))
            }
            (None, _, _) if result.is_some() || error.is_some() => {
                return Err(invalid(
                    None,
                    "responseWithoutId",
                    "a response must carry an id".into(),
                ))
            }
            (id, _, _) => return Err(invalid(
                id,
                "noMethod",
                "a message needs a method (request, notification) or a result or error (response)"
                    .into(),
            )),
        };
    Ok(message)
}

fn not_an_object(bytes: &[u8], first: Option<u8>) -> DecodeError<'_> {
    // The same validator as for objects (serde_json's `from_slice` would not
    // check the UTF-8 of strings it skips).
    let is_json = std::str::from_utf8(bytes).is_ok_and(|text| crate::json::validate(text).is_ok());
    if !is_json {
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

fn is_valid_id(id: &str) -> bool {
    matches!(
        id.as_bytes().first(),
        Some(b'"' | b'-' | b'0'..=b'9' | b'n')
    )
}

/// The text of a raw JSON string, borrowed when it has no escapes; an error
/// when the value is not a string or has no Unicode text.
pub fn json_str(raw: &RawValue) -> Result<Cow<'_, str>, TextError> {
    json::string_text(raw.get())
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

    #[test]
    fn envelope_keys_match_by_their_text_escaped_or_not() {
        let message = br#"{"json\u0072pc":"2.0","id":1,"method":"m","para\u006ds":{"a":1}}"#;
        match decode(message).unwrap() {
            Message::Request { params, .. } => {
                assert_eq!(params.map(RawValue::get), Some(r#"{"a":1}"#))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn invalid_json_is_a_parse_error_wherever_it_is() {
        for bad in [
            // A control character inside the payload, deep in params.
            &b"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"p\":[\"a\x01\"]}}"[..],
            br#"{"jsonrpc":"2.0","method":"m","params":{"p":[1,]}}"#,
            br#"{"jsonrpc":"2.0","method":"m","params":{"p":01}}"#,
            br#"{"jsonrpc":"2.0","method":"m","params":{"p":"\x"}}"#,
            br#"{"jsonrpc":"2.0","method":"m"} trailing"#,
            // A duplicate member does not hide a syntax error after it.
            br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m","params":[}"#,
        ] {
            let error = decode(bad).unwrap_err();
            assert_eq!(
                error.code,
                ErrorCode::ParseError,
                "{}",
                String::from_utf8_lossy(bad)
            );
            assert_eq!(error.reason, "notJson");
            assert!(error.message.contains("at byte"), "{}", error.message);
        }
    }

    #[test]
    fn a_non_object_is_judged_by_the_same_validator() {
        assert_eq!(code_of(b"[\"\xff\"]"), ErrorCode::ParseError);
        assert_eq!(code_of(b"[1,]"), ErrorCode::ParseError);
        assert_eq!(decode(b"[1]").unwrap_err().reason, "batch");
    }

    #[test]
    fn a_text_known_to_be_utf8_decodes_as_its_bytes_do() {
        for text in [
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
            r#" {"jsonrpc":"2.0","method":"x","params":{"é": ["ü",2]}} "#,
            r#"{"jsonrpc":"2.0","id":"a","result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":{"p":[1,]}}"#,
            "{\"jsonrpc\":\"2.0\",\n\"method\":\"m\"}",
            "\x0c{}",
            "[1]",
            "[1,]",
            "17",
            "nope",
            "",
        ] {
            let (mut from_bytes, mut from_text) = (Layout::default(), Layout::default());
            assert_eq!(
                format!("{:?}", decode_indexed(text.as_bytes(), &mut from_bytes)),
                format!("{:?}", decode_text_indexed(text, &mut from_text)),
                "{text}"
            );
            assert_eq!(
                (from_bytes.depth, from_bytes.line_feed),
                (from_text.depth, from_text.line_feed)
            );
        }
    }

    #[test]
    fn a_form_feed_is_not_json_whitespace() {
        assert_eq!(code_of(b"\x0c{}"), ErrorCode::ParseError);
        assert_eq!(code_of(b"{\x0c}"), ErrorCode::ParseError);
        assert!(decode(b" \t\r\n{\"jsonrpc\":\"2.0\",\"method\":\"m\"} \n").is_ok());
    }

    #[test]
    fn a_duplicate_envelope_member_is_an_invalid_request() {
        let error =
            decode(br#"{"jsonrpc":"2.0","method":"m","params":{},"params":[]}"#).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidRequest);
        assert_eq!(error.reason, "malformedEnvelope");
        assert!(error.message.contains("`params`"), "{}", error.message);
    }

    #[test]
    fn the_index_holds_the_members_of_params() {
        let message = br#"{"jsonrpc":"2.0","method":"clientService/notify","params":{"serviceId":"s","method":"x","params":{"k":[1,{"d":"\""}]}}}"#;
        let mut layout = Layout::default();
        let Message::Notification { params, .. } = decode_indexed(message, &mut layout).unwrap()
        else {
            panic!("a notification");
        };
        assert_eq!(layout.depth, 5);
        let params = params.unwrap();
        let indexed: Vec<_> = layout.params.members_of(params.get()).unwrap().collect();
        let walked: Vec<_> = crate::scan::members(params).collect();
        assert_eq!(indexed, walked);
        assert_eq!(indexed[2].value, r#"{"k":[1,{"d":"\""}]}"#);

        // Params that are not an object leave the index empty and unclaimed.
        let mut layout = Layout::default();
        let message = br#"{"jsonrpc":"2.0","method":"m","params":[1]}"#;
        let Message::Notification { params, .. } = decode_indexed(message, &mut layout).unwrap()
        else {
            panic!("a notification");
        };
        assert!(layout.params.members_of(params.unwrap().get()).is_none());
        assert_eq!(layout.depth, 2);
    }

    #[test]
    fn the_layout_counts_every_level_of_the_message() {
        for (message, depth) in [
            (&br#"{"jsonrpc":"2.0","method":"m"}"#[..], 1),
            (br#"{"jsonrpc":"2.0","method":"m","params":{}}"#, 2),
            (br#"{"jsonrpc":"2.0","method":"m","params":{"a":[[]]}}"#, 4),
            (
                br#"{"jsonrpc":"2.0","method":"m","x":[[[[]]]],"params":{}}"#,
                5,
            ),
            (br#"{"jsonrpc":"2.0","id":1,"result":[[[]]]}"#, 4),
        ] {
            let mut layout = Layout::default();
            decode_indexed(message, &mut layout).unwrap();
            assert_eq!(layout.depth, depth, "{}", String::from_utf8_lossy(message));
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","method":"m","params":{{"p":{}1{}}}}}"#,
            "[".repeat(300),
            "]".repeat(300)
        );
        let mut layout = Layout::default();
        decode_indexed(deep.as_bytes(), &mut layout).unwrap();
        assert_eq!(layout.depth, 302);
    }

    #[test]
    fn the_layout_says_whether_a_raw_line_feed_is_between_tokens() {
        for (text, expected) in [
            (
                r#"{"jsonrpc":"2.0","method":"m","params":{"a":"x\ny"}}"#,
                false,
            ),
            ("{\"jsonrpc\":\"2.0\",\n\"method\":\"m\"}", true),
            (
                "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"a\":[1,\r\n2]}}",
                true,
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"a\" :\t\r 1}}",
                false,
            ),
        ] {
            let mut layout = Layout::default();
            decode_indexed(text.as_bytes(), &mut layout).unwrap();
            assert_eq!(layout.line_feed, expected, "{text:?}");
        }
    }

    #[test]
    fn a_method_without_unicode_text_is_a_bad_method() {
        for message in [
            &br#"{"jsonrpc":"2.0","id":4,"method":"\ud800"}"#[..],
            br#"{"jsonrpc":"2.0","method":"ping\udfff"}"#,
        ] {
            let error = decode(message).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidRequest);
            assert_eq!(error.reason, "badMethod");
            assert!(error.message.starts_with("method "), "{}", error.message);
            assert!(error.message.contains("surrogate"), "{}", error.message);
        }
        let error = decode(br#"{"jsonrpc":"2.0","id":4,"method":"\ud800"}"#).unwrap_err();
        assert_eq!(error.id.map(RawValue::get), Some("4"));
        // A pair is text.
        match decode(br#"{"jsonrpc":"2.0","method":"a\ud83d\ude00"}"#).unwrap() {
            Message::Notification { method, .. } => assert_eq!(method.name(), "a\u{1f600}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_key_without_unicode_text_names_no_member() {
        let message = br#"{"jsonrpc":"2.0","id":1,"method":"m","params\ud800":[1]}"#;
        match decode(message).unwrap() {
            Message::Request { params, .. } => assert!(params.is_none()),
            other => panic!("{other:?}"),
        }
    }
}
