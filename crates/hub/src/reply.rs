//! The errors the hub itself answers with, built the same way everywhere.

use serde_json::json;
use switchboard_protocol::error::{GoneReason, ServiceGoneData};
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::{ErrorCode, Principal};

pub fn invalid_params(field: &str, message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidParams, message).with_data(&json!({ "field": field }))
}

pub fn invalid_request(reason: &str, message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::InvalidRequest, message).with_data(&json!({ "reason": reason }))
}

pub fn limit(name: &str, max: u64, message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::LimitExceeded, message)
        .with_data(&json!({ "limit": name, "max": max }))
}

pub fn not_found(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::NotFound, message)
}

/// -32007, with the `data.resources` AHP requires (the hub protects no AHP
/// resources, so it is empty).
pub fn auth_required(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::AuthRequired, message).with_data(&json!({ "resources": [] }))
}

pub fn permission_denied(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(ErrorCode::PermissionDenied, message)
}

/// -32009 for a caller of another hub that its own hub let discover the
/// service and this hub (`hub`) refuses: the message names the grant this
/// hub lacks, `data` the hub and the action.
pub fn refused_by_hub(
    hub: &str,
    action: &str,
    caller: &Principal,
    owner: &Principal,
) -> ErrorObject {
    let (caller, owner) = (caller.to_string(), owner.to_string());
    ErrorObject::new(
        ErrorCode::PermissionDenied,
        format!("hub {hub} refused: it has no grant from {caller:?} to {owner:?} with {action:?}"),
    )
    .with_data(&json!({ "hub": hub, "action": action }))
}

pub fn service_gone(reason: GoneReason) -> ErrorObject {
    let message = match reason {
        GoneReason::Disconnected => "the service's owner disconnected",
        GoneReason::Unregistered => "the service was unregistered",
    };
    ErrorObject::new(ErrorCode::ServiceGone, message).with_data(&ServiceGoneData { reason })
}

pub fn timeout(timeout_ms: u64) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::RequestTimeout,
        format!("the service did not answer within {timeout_ms} ms"),
    )
    .with_data(&json!({ "timeoutMs": timeout_ms }))
}

pub fn cancelled() -> ErrorObject {
    ErrorObject::new(
        ErrorCode::RequestCancelled,
        "the request was cancelled by its caller",
    )
}

pub fn unknown_service(id: &str) -> ErrorObject {
    not_found(format!("no service {id:?}"))
}
