//! Requests the agent makes of the editor (`fs/*`, `terminal/*`), each
//! bounded: a handler waiting on the editor never waits for ever.

use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, ErrorCode, JsonRpcRequest};

/// How long the editor may take to answer one request.
pub const EDITOR_WAIT: Duration = Duration::from_secs(30);

/// Words in an editor's error message that mean "no such file", for
/// editors that answer a missing file with an error code other than ACP's
/// resource-not-found (`-32002`). Compared case-insensitively.
pub const NOT_FOUND_MESSAGES: [&str; 4] = ["not found", "no such file", "does not exist", "enoent"];

/// Why the editor did not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditorError {
    #[error("the editor refused {method}: {message}")]
    Refused {
        method: String,
        code: ErrorCode,
        message: String,
    },
    #[error("the editor did not answer {method} within {EDITOR_WAIT:?}")]
    Timeout { method: String },
}

impl EditorError {
    /// Whether the editor said that what was asked for does not exist:
    /// ACP's resource-not-found, or a message that says so
    /// ([`NOT_FOUND_MESSAGES`]).
    pub fn is_not_found(&self) -> bool {
        match self {
            EditorError::Refused { code, message, .. } => {
                let message = message.to_lowercase();
                *code == ErrorCode::RESOURCE_NOT_FOUND
                    || NOT_FOUND_MESSAGES.iter().any(|m| message.contains(m))
            }
            EditorError::Timeout { .. } => false,
        }
    }
}

/// Sends `request` and waits at most [`EDITOR_WAIT`].
pub async fn ask<R: JsonRpcRequest>(
    cx: &ConnectionTo<Client>,
    request: R,
) -> Result<R::Response, EditorError>
where
    R::Response: Send,
{
    let method = request.method().to_owned();
    match tokio::time::timeout(EDITOR_WAIT, cx.send_request(request).block_task()).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(EditorError::Refused {
            method,
            code: error.code,
            message: error.message,
        }),
        Err(_) => Err(EditorError::Timeout { method }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_not_found_answer_counts_as_a_missing_file() {
        let refused = |code, message: &str| EditorError::Refused {
            method: "fs/read_text_file".into(),
            code,
            message: message.into(),
        };
        assert!(refused(ErrorCode::RESOURCE_NOT_FOUND, "Resource not found").is_not_found());
        assert!(refused(
            ErrorCode::INTERNAL_ERROR,
            "/a: No such file or directory (os error 2)"
        )
        .is_not_found());
        assert!(!refused(ErrorCode::INTERNAL_ERROR, "Internal error").is_not_found());
        assert!(!refused(ErrorCode::INTERNAL_ERROR, "permission denied").is_not_found());
        assert!(!EditorError::Timeout {
            method: "fs/read_text_file".into()
        }
        .is_not_found());
    }
}
