//! Outgoing messages, written straight into a connection's queue.
//!
//! The routed messages (`clientService/notification`, `handleRequest`,
//! responses) are assembled from pre-encoded pieces and the sender's raw
//! bytes: nothing here parses or re-encodes a payload, and nothing allocates
//! beyond the queue's own growth. Each writer appends one message and `\n`.

use serde_json::value::RawValue;
use switchboard_protocol::hub::CATALOG_CHANNEL;
use switchboard_protocol::jsonrpc::ErrorObject;

const NULL_ID: &str = "null";

/// `"channel":"ahp-client-services://","serviceId":`
const ROUTED_HEAD: &str = concat!(
    "\"channel\":\"",
    "ahp-client-services://",
    "\",\"serviceId\":"
);

/// Appends `value` as a JSON string.
pub fn json_string(buf: &mut Vec<u8>, value: &str) {
    // Writing a &str into a Vec<u8> cannot fail.
    let _ = serde_json::to_writer(&mut *buf, value);
}

fn push_u64(buf: &mut Vec<u8>, value: u64) {
    buf.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`; both raw JSON.
pub fn result(buf: &mut Vec<u8>, id: &str, result: &str) {
    buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    buf.extend_from_slice(id.as_bytes());
    buf.extend_from_slice(b",\"result\":");
    buf.extend_from_slice(result.as_bytes());
    buf.extend_from_slice(b"}\n");
}

/// An error response; `id` is raw JSON or `None` for `null`.
pub fn error(buf: &mut Vec<u8>, id: Option<&str>, error: &ErrorObject) {
    buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    buf.extend_from_slice(id.unwrap_or(NULL_ID).as_bytes());
    buf.extend_from_slice(b",\"error\":");
    let _ = serde_json::to_writer(&mut *buf, error);
    buf.extend_from_slice(b"}\n");
}

/// An owner's error passed through to the caller: `code` and `message` as
/// the owner wrote them, `data` raw, or `{"truncated":true}` when it is over
/// `max_data` bytes.
pub fn passthrough_error(
    buf: &mut Vec<u8>,
    id: &str,
    code: i64,
    message: &RawValue,
    data: Option<&RawValue>,
    max_data: u64,
) {
    buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    buf.extend_from_slice(id.as_bytes());
    buf.extend_from_slice(b",\"error\":{\"code\":");
    buf.extend_from_slice(itoa::Buffer::new().format(code).as_bytes());
    buf.extend_from_slice(b",\"message\":");
    buf.extend_from_slice(message.get().as_bytes());
    if let Some(data) = data {
        buf.extend_from_slice(b",\"data\":");
        if data.get().len() as u64 <= max_data {
            buf.extend_from_slice(data.get().as_bytes());
        } else {
            buf.extend_from_slice(b"{\"truncated\":true}");
        }
    }
    buf.extend_from_slice(b"}}\n");
}

/// What a routed message is.
#[derive(Debug, Clone, Copy)]
pub enum Routed {
    /// `clientService/notification`: no id.
    Notification,
    /// `clientService/handleRequest` with the hub-minted id.
    Request(u64),
    /// The same to a federation link, with the caller's `timeoutMs`, so
    /// the owner's hub keeps the same deadline (`link.rs`).
    LinkRequest { id: u64, timeout_ms: u64 },
}

/// The pieces of a routed message that do not come from the payload.
pub struct RoutedHeader<'a> {
    /// The service id as a JSON string, quotes included.
    pub service_id_json: &'a str,
    /// `"senderClientId":…,"senderPrincipal":…` of the sender.
    pub sender_fields: &'a str,
}

/// A forwarded notification or request; `method` and `params` are spliced
/// exactly as the sender wrote them.
pub fn routed(
    buf: &mut Vec<u8>,
    kind: Routed,
    header: &RoutedHeader<'_>,
    method: &str,
    params: Option<&str>,
) {
    match kind {
        Routed::Notification => buf.extend_from_slice(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"clientService/notification\",\"params\":{",
        ),
        Routed::Request(id) | Routed::LinkRequest { id, .. } => {
            buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            push_u64(buf, id);
            buf.extend_from_slice(b",\"method\":\"clientService/handleRequest\",\"params\":{");
        }
    }
    if let Routed::LinkRequest { timeout_ms, .. } = kind {
        buf.extend_from_slice(b"\"timeoutMs\":");
        push_u64(buf, timeout_ms);
        buf.push(b',');
    }
    buf.extend_from_slice(ROUTED_HEAD.as_bytes());
    buf.extend_from_slice(header.service_id_json.as_bytes());
    buf.push(b',');
    buf.extend_from_slice(header.sender_fields.as_bytes());
    buf.extend_from_slice(b",\"method\":");
    buf.extend_from_slice(method.as_bytes());
    if let Some(params) = params {
        buf.extend_from_slice(b",\"params\":");
        buf.extend_from_slice(params.as_bytes());
    }
    buf.extend_from_slice(b"}}\n");
}

/// `"senderClientId":"…","senderPrincipal":{…}`, built once per connection.
pub fn sender_fields(client_id: &str, principal_json: &str) -> Box<str> {
    let mut buf = Vec::with_capacity(64 + client_id.len() + principal_json.len());
    buf.extend_from_slice(b"\"senderClientId\":");
    json_string(&mut buf, client_id);
    buf.extend_from_slice(b",\"senderPrincipal\":");
    buf.extend_from_slice(principal_json.as_bytes());
    String::from_utf8(buf)
        .expect("JSON text is UTF-8")
        .into_boxed_str()
}

/// `$/cancelRequest {id}` to an owner, for a hub-minted id.
pub fn cancel(buf: &mut Vec<u8>, id: u64) {
    buf.extend_from_slice(
        b"{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":{\"id\":",
    );
    push_u64(buf, id);
    buf.extend_from_slice(b"}}\n");
}

/// A catalog `action` notification around a pre-encoded action object.
pub fn action(buf: &mut Vec<u8>, server_seq: u64, action: &str) {
    buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"action\",\"params\":{\"channel\":");
    json_string(buf, CATALOG_CHANNEL);
    buf.extend_from_slice(b",\"serverSeq\":");
    push_u64(buf, server_seq);
    buf.extend_from_slice(b",\"action\":");
    buf.extend_from_slice(action.as_bytes());
    buf.extend_from_slice(b"}}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    fn parse(buf: &[u8]) -> Value {
        assert_eq!(buf.last(), Some(&b'\n'));
        assert_eq!(buf.iter().filter(|b| **b == b'\n').count(), 1);
        serde_json::from_slice(buf).unwrap()
    }

    #[test]
    fn routed_request_splices_method_and_params() {
        let mut buf = Vec::new();
        let fields = sender_fields("c-1", r#"{"kind":"direct"}"#);
        let header = RoutedHeader {
            service_id_json: "\"svc-1\"",
            sender_fields: &fields,
        };
        routed(
            &mut buf,
            Routed::Request(9),
            &header,
            "\"math/add\"",
            Some(r#"{ "a" : [1, 2.50] }"#),
        );
        let text = std::str::from_utf8(&buf).unwrap();
        assert!(text.contains(r#""params":{ "a" : [1, 2.50] }}}"#), "{text}");
        let value = parse(&buf);
        assert_eq!(value["id"], 9);
        assert_eq!(value["method"], "clientService/handleRequest");
        assert_eq!(value["params"]["channel"], CATALOG_CHANNEL);
        assert_eq!(value["params"]["serviceId"], "svc-1");
        assert_eq!(value["params"]["senderClientId"], "c-1");
        assert_eq!(value["params"]["senderPrincipal"]["kind"], "direct");
        assert_eq!(value["params"]["method"], "math/add");
    }

    #[test]
    fn notification_without_params_omits_the_member() {
        let mut buf = Vec::new();
        let fields = sender_fields("c", r#"{"kind":"direct"}"#);
        let header = RoutedHeader {
            service_id_json: "\"s\"",
            sender_fields: &fields,
        };
        routed(&mut buf, Routed::Notification, &header, "\"m\"", None);
        let value = parse(&buf);
        assert!(value.get("id").is_none());
        assert!(value["params"].get("params").is_none());
    }

    #[test]
    fn large_error_data_is_replaced_by_truncated() {
        let mut buf = Vec::new();
        let data = raw(r#"{"big":"0123456789"}"#);
        passthrough_error(&mut buf, "1", 4242, &raw("\"boom\""), Some(&data), 5);
        let value = parse(&buf);
        assert_eq!(
            value["error"]["data"],
            serde_json::json!({"truncated": true})
        );
        buf.clear();
        passthrough_error(&mut buf, "1", 4242, &raw("\"boom\""), Some(&data), 64);
        assert_eq!(parse(&buf)["error"]["data"]["big"], "0123456789");
    }

    #[test]
    fn action_and_cancel_shapes() {
        let mut buf = Vec::new();
        action(
            &mut buf,
            7,
            r#"{"type":"clientServices/removed","serviceId":"s","reason":"hidden"}"#,
        );
        let value = parse(&buf);
        assert_eq!(value["params"]["serverSeq"], 7);
        assert_eq!(value["params"]["action"]["reason"], "hidden");
        buf.clear();
        cancel(&mut buf, 12);
        assert_eq!(parse(&buf)["params"]["id"], 12);
    }
}
