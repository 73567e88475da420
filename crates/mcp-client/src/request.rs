//! Requests to the server other than `tools/call`, each bounded. Today that
//! is `tools/list`; each other MCP request a caller needs (`resources/*`,
//! `prompts/*`, `completion/complete`, `logging/setLevel`, `tasks/*`) is
//! one more method here over [`bounded`]: rmcp's typed request on the
//! peer, its result as MCP's JSON.

use std::future::Future;
use std::time::Duration;

use rmcp::service::ServiceError;
use serde_json::Value;

use crate::connection::Connection;

/// Why a request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// An error answer, a closed connection, an unreadable answer.
    #[error("{method} failed: {reason}")]
    Failed {
        method: &'static str,
        reason: String,
    },
    #[error("{method} got no answer within {bound:?}")]
    TimedOut {
        method: &'static str,
        bound: Duration,
    },
}

impl Connection {
    /// `tools/list`, every page, as MCP `Tool` objects.
    pub async fn list_tools(&self, bound: Duration) -> Result<Vec<Value>, RequestError> {
        const METHOD: &str = "tools/list";
        let tools = bounded(METHOD, bound, self.inner.peer.list_all_tools()).await?;
        tools
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()
            .map_err(|error| RequestError::Failed {
                method: METHOD,
                reason: format!("cannot read its tools: {error}"),
            })
    }
}

/// `request`, given up after `bound`.
async fn bounded<T>(
    method: &'static str,
    bound: Duration,
    request: impl Future<Output = Result<T, ServiceError>>,
) -> Result<T, RequestError> {
    match tokio::time::timeout(bound, request).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(RequestError::Failed {
            method,
            reason: error.to_string(),
        }),
        Err(_) => Err(RequestError::TimedOut { method, bound }),
    }
}
