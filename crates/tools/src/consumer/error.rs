//! Why a call has no result: one error for every way a consumer's call,
//! list or request to a provider can fail, and what a caller reads from it.
//! A leaf: the call, the listing and the tool modules all use it.

use std::time::Duration;

use switchboard_client::{Error, ErrorKind, RpcError};
use switchboard_protocol::tool_call::error_codes;

/// Why a call has no result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// Nothing was sent: the hub is not reachable now.
    #[error("the hub is not connected")]
    NotConnected,
    /// The connection ended while the call was out: it may or may not have run.
    #[error("the connection to the hub was lost during the call")]
    ConnectionLost,
    /// No answer within the bound (on this side).
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// The hub or the provider answered with an error.
    #[error("{0}")]
    Answered(RpcError),
    /// Anything else (the hub sent something unreadable, ...).
    #[error("{0}")]
    Failed(String),
}

impl CallError {
    /// `data.code` of an error answer (`unknown_tool`, `invalid_arguments`, ...).
    pub fn code(&self) -> Option<String> {
        match self {
            CallError::Answered(error) => error
                .data()
                .and_then(|data| data.get("code")?.as_str().map(str::to_owned)),
            _ => None,
        }
    }

    /// Whether the answer says the listing the call was built from is out of
    /// date: the tool is unknown, its schema changed, or its provider is gone.
    pub fn is_stale_listing(&self) -> bool {
        let CallError::Answered(error) = self else {
            return false;
        };
        matches!(
            self.code().as_deref(),
            Some(error_codes::UNKNOWN_TOOL | error_codes::TOOL_SCHEMA_CHANGED)
        ) || matches!(
            error.kind(),
            ErrorKind::NotFound | ErrorKind::ServiceGone { .. }
        )
    }
}

impl From<Error> for CallError {
    fn from(error: Error) -> Self {
        match error {
            Error::Rpc(error) => CallError::Answered(error),
            Error::Closed => CallError::ConnectionLost,
            Error::LocalTimeout(wait) => CallError::TimedOut(wait),
            other => CallError::Failed(other.to_string()),
        }
    }
}
