//! The JSON the catalog keeps and sends, assembled from pieces already
//! encoded: a `Service` object, and the `added`, `removed` and `updated`
//! actions; and the one member of metadata the hub reads, `callback`.

use serde_json::value::RawValue;
use switchboard_protocol::error::GoneReason;
use switchboard_protocol::scan;

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

/// The metadata member that makes a service a callback service (hub
/// protocol section 13).
pub const CALLBACK_FIELD: &str = "callback";

/// Why a metadata's `callback` member was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CallbackFlagError {
    #[error("metadata.callback must be true or absent")]
    NotTrue,
    #[error("metadata.callback appears more than once")]
    Repeated,
}

/// Whether metadata (an object serde_json has validated) marks a callback
/// service: `"callback": true`. Absent is `false`; any other value, or the
/// member twice, is an error. The only member of metadata the hub reads: a
/// walk of the object's top level (`scan::members`), values skipped.
pub fn callback_flag(metadata: &RawValue) -> Result<bool, CallbackFlagError> {
    let mut flag = None;
    for member in scan::members(metadata) {
        if member.key.text().as_deref() != Some(CALLBACK_FIELD) {
            continue;
        }
        if flag.is_some() {
            return Err(CallbackFlagError::Repeated);
        }
        if member.value != "true" {
            return Err(CallbackFlagError::NotTrue);
        }
        flag = Some(true);
    }
    Ok(flag.unwrap_or(false))
}
