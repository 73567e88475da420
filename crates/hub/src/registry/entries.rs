//! The JSON the catalog keeps and sends, assembled from pieces already
//! encoded: a `Service` object, and the `added`, `removed` and `updated`
//! actions.

use serde_json::value::RawValue;
use switchboard_protocol::error::GoneReason;

use crate::conn::Identity;
use crate::wire;

pub(super) fn service_json(id: &str, owner: &Identity, metadata: &RawValue) -> Box<str> {
    let mut buf = Vec::with_capacity(128 + metadata.get().len());
    buf.extend_from_slice(b"{\"serviceId\":");
    wire::json_string(&mut buf, id);
    buf.extend_from_slice(b",\"clientId\":");
    wire::json_string(&mut buf, &owner.client_id);
    buf.extend_from_slice(b",\"principal\":");
    buf.extend_from_slice(owner.principal.json.as_bytes());
    buf.extend_from_slice(b",\"metadata\":");
    buf.extend_from_slice(metadata.get().as_bytes());
    buf.push(b'}');
    into_text(buf)
}

pub(super) fn into_text(buf: Vec<u8>) -> Box<str> {
    String::from_utf8(buf)
        .expect("JSON assembled from JSON text is UTF-8")
        .into_boxed_str()
}

pub(super) fn added_action(service_json: &str) -> Box<str> {
    let mut buf = Vec::with_capacity(48 + service_json.len());
    buf.extend_from_slice(b"{\"type\":\"clientServices/added\",\"service\":");
    buf.extend_from_slice(service_json.as_bytes());
    buf.push(b'}');
    into_text(buf)
}

pub(super) fn removed_action(id: &str, reason: &str) -> Box<str> {
    let mut buf = Vec::with_capacity(96 + id.len());
    buf.extend_from_slice(b"{\"type\":\"clientServices/removed\",\"serviceId\":");
    wire::json_string(&mut buf, id);
    buf.extend_from_slice(b",\"reason\":\"");
    buf.extend_from_slice(reason.as_bytes());
    buf.extend_from_slice(b"\"}");
    into_text(buf)
}

pub(super) fn updated_action(id: &str, metadata: &RawValue) -> Box<str> {
    let mut buf = Vec::with_capacity(96 + id.len() + metadata.get().len());
    buf.extend_from_slice(b"{\"type\":\"clientServices/updated\",\"serviceId\":");
    wire::json_string(&mut buf, id);
    buf.extend_from_slice(b",\"metadata\":");
    buf.extend_from_slice(metadata.get().as_bytes());
    buf.push(b'}');
    into_text(buf)
}

pub(super) fn gone_label(reason: GoneReason) -> &'static str {
    match reason {
        GoneReason::Unregistered => "unregistered",
        GoneReason::Disconnected => "disconnected",
    }
}
