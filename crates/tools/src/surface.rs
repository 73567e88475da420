//! Version 2 beyond the tools (`docs/reference/tool-calls.md` section 9):
//! the rest of an MCP server's surface, which the provider serves through
//! its [`SurfaceHandler`]. The SDK decodes the `client` member, keeps the
//! methods to section 9.2's list, and holds `tasks/*` to the tasks a call of
//! the caller's principal created (the ledger's task map); bodies pass
//! through as MCP's JSON.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use switchboard_client::{method_not_found, Notification, Reply, Request};
use switchboard_protocol::tool_call::{callback, v2, ClientRef};
use switchboard_protocol::{ErrorObject, Principal};
use tokio_util::sync::CancellationToken;

use crate::errors;
use crate::ledger::Ledger;
use crate::tool::BoxFuture;

/// The methods a version-2 provider serves besides `tools/list` and
/// `tools/call`.
pub const SURFACE_METHODS: &[&str] = &[
    v2::RESOURCES_LIST,
    v2::RESOURCE_TEMPLATES_LIST,
    v2::RESOURCES_READ,
    v2::RESOURCES_SUBSCRIBE,
    v2::RESOURCES_UNSUBSCRIBE,
    v2::PROMPTS_LIST,
    v2::PROMPTS_GET,
    v2::COMPLETION_COMPLETE,
    v2::LOGGING_SET_LEVEL,
    v2::TASKS_GET,
    v2::TASKS_RESULT,
    v2::TASKS_LIST,
    v2::TASKS_CANCEL,
];

/// One version-2 request other than the tools, as the provider's surface
/// gets it.
#[derive(Debug)]
pub struct SurfaceRequest {
    /// One of [`SURFACE_METHODS`].
    pub method: String,
    /// MCP's params as the consumer sent them, without the `client` member
    /// and without `_meta["switchboard/call"]`; an object.
    pub params: Value,
    /// The consumer's callback service and its MCP client's capabilities.
    pub client: Option<ClientRef>,
    /// The `tool_call_id` the consumer named in `_meta["switchboard/call"]`.
    pub call: Option<String>,
    /// The authority, stamped by the hub.
    pub sender_principal: Principal,
    pub sender_client_id: String,
    /// Cancelled when the caller cancels, times out or leaves.
    pub cancelled: CancellationToken,
}

/// A consumer's notification to the provider (today
/// `notifications/roots/list_changed`).
#[derive(Debug)]
pub struct SurfaceNotification {
    pub method: String,
    /// MCP's params, without `client`.
    pub params: Value,
    pub client: Option<ClientRef>,
    pub sender_principal: Principal,
    pub sender_client_id: String,
}

/// Serves a version-2 provider's surface beyond the tools. One method for
/// every request kind: the bodies are MCP's and pass through. `tasks/get`,
/// `tasks/result` and `tasks/cancel` reach it only for a task of the
/// caller's principal; the answer to `tasks/list` is cut down to those.
pub trait SurfaceHandler: Send + Sync + 'static {
    /// The answer to `request`: MCP's result, or a JSON-RPC error.
    fn request(&self, request: SurfaceRequest) -> BoxFuture<Reply>;

    /// A consumer's notification; the default ignores it.
    fn notification(&self, notification: SurfaceNotification) -> BoxFuture<()> {
        let _ = notification;
        Box::pin(async {})
    }
}

/// A decoded version-2 body: MCP's params and the members the contract adds.
#[derive(Debug)]
struct Decoded {
    params: Value,
    client: Option<ClientRef>,
    call: Option<String>,
}

fn decode(method: &str, raw: Option<&RawValue>) -> Result<Decoded, ErrorObject> {
    let mut params: Map<String, Value> = match raw {
        None => Map::new(),
        Some(raw) => serde_json::from_str(raw.get()).map_err(|_| {
            errors::invalid_member("params", &format!("of {method} must be an object"))
        })?,
    };
    let client = match params.remove("client") {
        None | Some(Value::Null) => None,
        Some(client) => Some(
            serde_json::from_value::<ClientRef>(client).map_err(|error| {
                errors::invalid_member("client", &format!("is not a ClientRef: {error}"))
            })?,
        ),
    };
    let mut call = None;
    if let Some(Value::Object(meta)) = params.get_mut("_meta") {
        if let Some(Value::String(id)) = meta.remove(callback::CALL_META) {
            call = Some(id);
        }
        if meta.is_empty() {
            params.remove("_meta");
        }
    }
    Ok(Decoded {
        params: Value::Object(params),
        client,
        call,
    })
}

fn principal_key(principal: &Principal) -> String {
    serde_json::to_string(principal).unwrap_or_default()
}

/// A version-2 request other than the tools, to the provider of
/// `namespace` whose task map is in `ledger`.
pub(crate) async fn handle_request(
    ledger: &Ledger,
    namespace: &str,
    surface: Arc<dyn SurfaceHandler>,
    request: Request,
) -> Reply {
    if !SURFACE_METHODS.contains(&request.method.as_str()) {
        return Err(method_not_found(&request.method));
    }
    let decoded = decode(&request.method, request.params.as_deref())?;
    let principal = principal_key(&request.sender_principal);
    let method = request.method.as_str();
    if matches!(method, v2::TASKS_GET | v2::TASKS_RESULT | v2::TASKS_CANCEL) {
        let task_id = decoded.params["taskId"]
            .as_str()
            .ok_or_else(|| errors::invalid_member("taskId", "must be the string id of a task"))?;
        let owner = ledger
            .task_owner(task_id)
            .await
            .map_err(|error| errors::ledger_unavailable(&error.to_string()))?;
        if owner.is_none_or(|owner| owner.principal != principal) {
            tracing::debug!(namespace = %namespace, method, "a task of no call of this principal");
            return Err(errors::unknown_task(task_id));
        }
    }
    let is_list = method == v2::TASKS_LIST;
    let answer = surface
        .request(SurfaceRequest {
            method: request.method.clone(),
            params: decoded.params,
            client: decoded.client,
            call: decoded.call,
            sender_principal: request.sender_principal.clone(),
            sender_client_id: request.sender_client_id.clone(),
            cancelled: request.cancelled.clone(),
        })
        .await?;
    if !is_list {
        return Ok(answer);
    }
    let owned: HashSet<String> = ledger
        .tasks_of(&principal)
        .await
        .map_err(|error| errors::ledger_unavailable(&error.to_string()))?
        .into_iter()
        .collect();
    own_tasks(&answer, &owned)
}

/// A consumer's notification to a version-2 provider.
pub(crate) async fn handle_notification(
    surface: Arc<dyn SurfaceHandler>,
    notification: Notification,
) {
    if notification.method != v2::ROOTS_LIST_CHANGED {
        return;
    }
    let Ok(decoded) = decode(&notification.method, notification.params.as_deref()) else {
        tracing::debug!(method = %notification.method, "a notification with malformed params; dropped");
        return;
    };
    surface
        .notification(SurfaceNotification {
            method: notification.method,
            params: decoded.params,
            client: decoded.client,
            sender_principal: notification.sender_principal,
            sender_client_id: notification.sender_client_id,
        })
        .await;
}

/// `tasks/list`'s answer with only the tasks in `owned`.
fn own_tasks(answer: &RawValue, owned: &HashSet<String>) -> Reply {
    let mut answer: Map<String, Value> = serde_json::from_str(answer.get()).map_err(|error| {
        ErrorObject::new(
            switchboard_protocol::ErrorCode::InternalError,
            format!("the tasks/list answer is not an object: {error}"),
        )
    })?;
    if let Some(Value::Array(tasks)) = answer.get_mut("tasks") {
        tasks.retain(|task| {
            task.get("taskId")
                .and_then(Value::as_str)
                .is_some_and(|id| owned.contains(id))
        });
    }
    answer.remove("nextCursor");
    switchboard_client::reply(&answer)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_contracts_members_are_taken_out_of_the_params() {
        let raw = RawValue::from_string(
            json!({"uri": "a://b", "client": {"service": "svc-1", "capabilities": {"roots": {}}},
                   "_meta": {"switchboard/call": "call-1"}})
            .to_string(),
        )
        .unwrap();
        let decoded = decode("resources/read", Some(&raw)).unwrap();
        assert_eq!(decoded.params, json!({"uri": "a://b"}));
        assert_eq!(decoded.client.unwrap().service, "svc-1");
        assert_eq!(decoded.call.as_deref(), Some("call-1"));
        let bad = RawValue::from_string(json!({"client": 3}).to_string()).unwrap();
        let error = decode("resources/read", Some(&bad)).unwrap_err();
        assert_eq!(error.code, -32602);
        assert_eq!(error.data_as::<Value>().unwrap()["field"], "client");
    }

    #[test]
    fn tasks_list_keeps_only_the_callers_tasks() {
        let answer = RawValue::from_string(
            json!({"tasks": [{"taskId": "a"}, {"taskId": "b"}, {"taskId": "c"}], "nextCursor": "x"})
                .to_string(),
        )
        .unwrap();
        let owned = HashSet::from(["b".to_owned()]);
        let kept: Value = serde_json::from_str(own_tasks(&answer, &owned).unwrap().get()).unwrap();
        assert_eq!(kept, json!({"tasks": [{"taskId": "b"}]}));
    }
}
