//! The permission gate: a tool not annotated read-only runs only after the
//! editor says so (`session/request_permission`).
//!
//! A request belongs to the session that raised it: it carries that
//! session's id, it is registered in that session's record (so cancelling
//! the session settles it, and cancelling another session cannot), and the
//! editor's answer comes back to this future alone, matched by the JSON-RPC
//! request id. "Always" answers are remembered in the session record, so
//! they hold for that session only.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallUpdate,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;
use tokio_util::sync::CancellationToken;

use crate::session::{Remembered, Session};
use crate::sessions::{Handle, Routes};

pub const ALLOW_ONCE: &str = "allow_once";
pub const ALLOW_ALWAYS: &str = "allow_always";
pub const REJECT_ONCE: &str = "reject_once";
pub const REJECT_ALWAYS: &str = "reject_always";

/// How long the editor may take to answer before the call is treated as
/// rejected.
const ANSWER_WAIT: Duration = Duration::from_secs(30 * 60);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Not allowed; the text says why, for the model.
    Reject(String),
    /// The turn was cancelled while the request was pending.
    Cancelled,
}

fn options() -> Vec<PermissionOption> {
    vec![
        PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
        PermissionOption::new(
            ALLOW_ALWAYS,
            "Always allow",
            PermissionOptionKind::AllowAlways,
        ),
        PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        PermissionOption::new(
            REJECT_ALWAYS,
            "Always reject",
            PermissionOptionKind::RejectAlways,
        ),
    ]
}

/// Asks whether `tool` may run (or answers from this session's memory).
pub async fn ask(
    cx: &ConnectionTo<Client>,
    session: &Session,
    routes: &Arc<Routes>,
    cancel: &CancellationToken,
    tool: &str,
    tool_call: ToolCallUpdate,
) -> Decision {
    match session.remembered(tool) {
        Some(Remembered::Allow) => return Decision::Allow,
        Some(Remembered::Reject) => {
            return Decision::Reject("the user chose to always reject this tool".into())
        }
        None => {}
    }
    let (permission, settled) = session.register_permission();
    let _route = routes.bind(
        Handle::Permission(format!("{}#{permission}", session.id)),
        &session.id,
    );
    let request = RequestPermissionRequest::new(session.id.clone(), tool_call, options());
    // Dropping the pending request (when cancellation wins) tells the editor
    // with `$/cancel_request` that the answer is no longer wanted.
    let answer = cx.send_request(request).block_task();
    let decision = tokio::select! {
        biased;
        _ = settled => Decision::Cancelled,
        _ = cancel.cancelled() => Decision::Cancelled,
        answer = tokio::time::timeout(ANSWER_WAIT, answer) => match answer {
            Err(_) => Decision::Reject(format!("the user did not answer within {ANSWER_WAIT:?}")),
            Ok(Err(error)) => {
                tracing::warn!(session = %session.id, %error, "permission request failed");
                Decision::Reject(format!("permission could not be asked: {}", error.message))
            }
            Ok(Ok(response)) => match response.outcome {
                RequestPermissionOutcome::Selected(selected) => {
                    match &*selected.option_id.0 {
                        ALLOW_ONCE => Decision::Allow,
                        ALLOW_ALWAYS => {
                            session.remember(tool, Remembered::Allow);
                            Decision::Allow
                        }
                        REJECT_ALWAYS => {
                            session.remember(tool, Remembered::Reject);
                            Decision::Reject("the user rejected this tool call".into())
                        }
                        REJECT_ONCE => Decision::Reject("the user rejected this tool call".into()),
                        other => {
                            tracing::warn!(option = other, "the editor chose an option that was not offered");
                            Decision::Reject(format!("the editor answered with an unknown option {other:?}"))
                        }
                    }
                }
                RequestPermissionOutcome::Cancelled if cancel.is_cancelled() => Decision::Cancelled,
                // Cancelled outside a cancelled turn: the user dismissed it.
                _ => Decision::Reject("the user dismissed the permission request".into()),
            },
        },
    };
    session.forget_permission(permission);
    decision
}
