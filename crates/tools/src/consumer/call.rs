//! Calling a tool through the hub, with one timeout policy and one reading
//! of what a failure means.

use std::time::Duration;

use serde_json::value::RawValue;
use switchboard_client::{Client, RequestOptions};
use switchboard_protocol::tool_call::{ToolCallRequest, TOOLS_CALL};

pub use super::error::CallError;
use super::listing::ListKind;

/// How long one source may take to answer `tools/list`. A provider answers
/// it from memory; one that takes longer is listed with no tools until its
/// next change.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a call may wait: what the caller asked for (`None`: no bound of
/// its own, as an MCP host that cancels when it gives up), never more than
/// the backend's ceiling (the hub's `maxRequestTimeoutMs`).
pub fn call_timeout(requested: Option<Duration>, ceiling: Duration) -> Duration {
    requested.map_or(ceiling, |requested| requested.min(ceiling))
}

/// A fresh `call_key`: `prefix` and 128 random bits in hex. Providers keep
/// their fence ledger across restarts, so a key must be unique across the
/// consumer's restarts too (a counter would collide with an earlier run).
pub fn fresh_call_key(prefix: &str) -> String {
    let mut random = [0u8; 16];
    // The OS generator failing is not something a peer can cause; there is
    // no sensible way to mint keys without it.
    getrandom::fill(&mut random).expect("the OS random generator is unavailable");
    format!("{prefix}{}", hex::encode(random))
}

/// `tools/call` to the provider `service_id`. Dropping the future drops
/// the SDK request, which sends the hub `$/cancelRequest`.
pub(super) async fn call_provider(
    client: &Client,
    service_id: &str,
    request: &ToolCallRequest,
    timeout: Option<Duration>,
) -> Result<Box<RawValue>, CallError> {
    let params = serde_json::value::to_raw_value(request)
        .map_err(|error| CallError::Failed(format!("cannot encode the call: {error}")))?;
    request_provider(client, service_id, TOOLS_CALL, &params, timeout).await
}

/// `method` with `params` to the provider `service_id`, under the one
/// timeout policy ([`call_timeout`] of `timeout` and the hub's
/// `maxRequestTimeoutMs`). Dropping the future cancels it on the hub.
pub(super) async fn request_provider(
    client: &Client,
    service_id: &str,
    method: &str,
    params: &RawValue,
    timeout: Option<Duration>,
) -> Result<Box<RawValue>, CallError> {
    if client.is_closed() {
        return Err(CallError::NotConnected);
    }
    let options = RequestOptions {
        timeout: Some(call_timeout(timeout, hub_ceiling(client))),
    };
    Ok(client
        .request_raw(service_id, method, Some(params), options)
        .await?)
}

/// The hub's longest request timeout, what no wait of a call may exceed.
pub(super) fn hub_ceiling(client: &Client) -> Duration {
    Duration::from_millis(client.limits().max_request_timeout_ms)
}

/// How long a list (or another request answered from memory) may wait:
/// [`LIST_TIMEOUT`], or the hub's ceiling when that is shorter, since the
/// hub refuses a request whose timeout is past its ceiling.
pub(super) fn list_timeout(client: &Client) -> Duration {
    LIST_TIMEOUT.min(hub_ceiling(client))
}

/// The list `kind` of the provider `service_id`, bounded by [`list_timeout`].
pub(super) async fn list_provider(
    client: &Client,
    service_id: &str,
    kind: ListKind,
) -> Result<Box<RawValue>, CallError> {
    let params = RawValue::from_string("{}".into()).expect("{} is JSON");
    let options = RequestOptions {
        timeout: Some(list_timeout(client)),
    };
    Ok(client
        .request_raw(service_id, kind.method(), Some(&params), options)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchboard_client::RpcError;

    fn answered(code: i64, data: serde_json::Value) -> CallError {
        CallError::Answered(RpcError {
            code,
            message: "m".into(),
            data: Some(RawValue::from_string(data.to_string()).unwrap()),
        })
    }

    #[test]
    fn the_timeout_is_what_the_caller_asked_within_the_ceiling() {
        let ceiling = Duration::from_secs(600);
        assert_eq!(call_timeout(None, ceiling), ceiling);
        let short = Duration::from_secs(5);
        assert_eq!(call_timeout(Some(short), ceiling), short);
        assert_eq!(
            call_timeout(Some(Duration::from_secs(601)), ceiling),
            ceiling
        );
    }

    #[test]
    fn stale_listings_are_told_from_other_failures() {
        assert!(answered(-32602, json!({"code": "unknown_tool"})).is_stale_listing());
        assert!(answered(-32602, json!({"code": "tool_schema_changed"})).is_stale_listing());
        assert!(answered(-32008, json!({})).is_stale_listing());
        assert!(answered(-32052, json!({"reason": "ownerDisconnected"})).is_stale_listing());
        assert!(!answered(-32602, json!({"code": "invalid_arguments"})).is_stale_listing());
        assert!(!answered(-32051, json!({})).is_stale_listing());
        assert!(!CallError::ConnectionLost.is_stale_listing());
        assert_eq!(
            answered(-32602, json!({"code": "invalid_arguments"}))
                .code()
                .as_deref(),
            Some("invalid_arguments")
        );
    }

    #[test]
    fn call_keys_are_fresh_and_pass_the_token_rule() {
        let a = fresh_call_key("mcp-");
        assert_ne!(a, fresh_call_key("mcp-"));
        assert_eq!(a.len(), "mcp-".len() + 32);
        switchboard_protocol::tool_call::validate_call_key(&a).unwrap();
    }
}
