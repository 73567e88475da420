//! Requests the agent makes of the editor (`fs/*`, `terminal/*`), each
//! bounded: a handler waiting on the editor never waits for ever.

use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, JsonRpcRequest};

/// How long the editor may take to answer one request.
pub const EDITOR_WAIT: Duration = Duration::from_secs(30);

/// Sends `request` and waits at most [`EDITOR_WAIT`]; `Err` says what
/// happened, naming the method.
pub async fn ask<R: JsonRpcRequest>(
    cx: &ConnectionTo<Client>,
    request: R,
) -> Result<R::Response, String>
where
    R::Response: Send,
{
    let method = request.method().to_owned();
    match tokio::time::timeout(EDITOR_WAIT, cx.send_request(request).block_task()).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(format!("the editor refused {method}: {}", error.message)),
        Err(_) => Err(format!(
            "the editor did not answer {method} within {EDITOR_WAIT:?}"
        )),
    }
}
