//! Payloads and the pre-built messages the harness sends.
//!
//! Every system carries the same payload: a JSON object of exactly the
//! requested size. The hub gets it inside the real protocol messages; the
//! floor gets the very same JSON-RPC lines behind a routing prefix
//! (`<target> `); NATS gets it as the message body.

use std::fmt::Write as _;

/// The application method of every benchmark notification and request.
pub const METHOD: &str = "bench";

/// `{"data":""}`: the smallest payload.
const EMPTY_PAYLOAD: usize = 11;

/// A JSON object of exactly `size` bytes: `{"data":"abc…"}`.
pub fn payload(size: usize) -> String {
    assert!(
        size >= EMPTY_PAYLOAD,
        "payloads are at least {EMPTY_PAYLOAD} bytes"
    );
    let fill = size - EMPTY_PAYLOAD;
    let mut text = String::with_capacity(size);
    text.push_str("{\"data\":\"");
    text.extend(
        b"abcdefghijklmnopqrstuvwxyz0123456789"
            .iter()
            .cycle()
            .take(fill)
            .map(|&b| b as char),
    );
    text.push_str("\"}");
    debug_assert_eq!(text.len(), size);
    text
}

fn json_string(value: &str) -> String {
    serde_json::to_string(value).expect("a string serializes")
}

/// `clientService/notify` to `service_id`, without the trailing newline.
pub fn hub_notify(service_id: &str, payload: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"clientService/notify\",\"params\":{{\"serviceId\":{},\"method\":\"{METHOD}\",\"params\":{payload}}}}}",
        json_string(service_id)
    )
}

/// The bytes around a request's id, so a request is two copies and an
/// integer: `head` + id + `tail`.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl RequestTemplate {
    /// `clientService/request` to `service_id`, with `prefix` before the
    /// JSON (the floor's routing prefix, or nothing) and `newline` after it.
    pub fn hub(prefix: &str, service_id: &str, payload: &str, newline: bool) -> Self {
        let head = format!("{prefix}{{\"jsonrpc\":\"2.0\",\"id\":").into_bytes();
        let mut tail = format!(
            ",\"method\":\"clientService/request\",\"params\":{{\"serviceId\":{},\"method\":\"{METHOD}\",\"params\":{payload}}}}}",
            json_string(service_id)
        )
        .into_bytes();
        if newline {
            tail.push(b'\n');
        }
        RequestTemplate { head, tail }
    }

    /// A response with `payload` as its result: `prefix{"jsonrpc":"2.0","id":N,"result":PAYLOAD}`.
    pub fn response(prefix: &str, payload: &str, newline: bool) -> Self {
        let head = format!("{prefix}{{\"jsonrpc\":\"2.0\",\"id\":").into_bytes();
        let mut tail = format!(",\"result\":{payload}}}").into_bytes();
        if newline {
            tail.push(b'\n');
        }
        RequestTemplate { head, tail }
    }

    pub fn write(&self, buf: &mut Vec<u8>, id: u64) {
        buf.extend_from_slice(&self.head);
        buf.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
        buf.extend_from_slice(&self.tail);
    }

    /// `head` + `id` (raw bytes of a JSON integer) + `tail`.
    pub fn write_raw_id(&self, buf: &mut Vec<u8>, id: &[u8]) {
        buf.extend_from_slice(&self.head);
        buf.extend_from_slice(id);
        buf.extend_from_slice(&self.tail);
    }

    pub fn build(&self, id: u64) -> Vec<u8> {
        let mut buf = Vec::with_capacity(self.head.len() + self.tail.len() + 20);
        self.write(&mut buf, id);
        buf
    }
}

/// A JSON-RPC request for setup calls (off the hot path).
pub fn request(id: u64, method: &str, params: &serde_json::Value) -> String {
    let mut text = String::new();
    let _ = write!(
        text,
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":{},\"params\":{params}}}",
        json_string(method)
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_have_the_exact_size_and_are_json_objects() {
        for size in [EMPTY_PAYLOAD, 200, 1024, 16 * 1024] {
            let text = payload(size);
            assert_eq!(text.len(), size);
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(value.is_object());
        }
    }

    #[test]
    fn notify_and_request_are_the_protocol_messages() {
        let body = payload(64);
        let notify: serde_json::Value = serde_json::from_str(&hub_notify("svc-1", &body)).unwrap();
        assert_eq!(notify["method"], "clientService/notify");
        assert_eq!(notify["params"]["serviceId"], "svc-1");
        assert_eq!(
            notify["params"]["params"]["data"].as_str().unwrap().len(),
            64 - 11
        );
        assert!(notify.get("id").is_none());

        let request = RequestTemplate::hub("", "svc-1", &body, true).build(42);
        assert_eq!(request.last(), Some(&b'\n'));
        let request: serde_json::Value = serde_json::from_slice(&request).unwrap();
        assert_eq!(request["id"], 42);
        assert_eq!(request["method"], "clientService/request");
        assert_eq!(request["params"]["method"], METHOD);

        let response = RequestTemplate::response("", &body, false).build(7);
        let response: serde_json::Value = serde_json::from_slice(&response).unwrap();
        assert_eq!(response["id"], 7);
        assert_eq!(response["result"]["data"].as_str().unwrap().len(), 64 - 11);
    }
}
