//! What can go wrong talking to the hub, with every hub error code typed.

use std::io;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::Value;
use switchboard_protocol::error::GoneReason;
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::ErrorCode;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No hub could be found (no `hub.json`, or it is unreadable).
    #[error("cannot find the hub: {0}")]
    Discovery(String),
    #[error("cannot connect to {endpoint}: {error}")]
    Connect { endpoint: String, error: io::Error },
    #[error("WebSocket: {0}")]
    WebSocket(String),
    /// The connection ended (the hub stopped, or `close` was called).
    #[error("the connection to the hub is closed")]
    Closed,
    /// The hub or the service answered with an error.
    #[error(transparent)]
    Rpc(#[from] RpcError),
    /// No answer arrived in time on this side (the hub's own timeout answers
    /// `-32051`, which is an [`Error::Rpc`]).
    #[error("no answer within {0:?}")]
    LocalTimeout(Duration),
    #[error("cannot encode the params: {0}")]
    Encode(serde_json::Error),
    #[error("cannot decode the answer: {0}")]
    Decode(serde_json::Error),
    /// The hub sent something this SDK cannot read.
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl Error {
    /// The typed meaning of an error answer, if this is one.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            Error::Rpc(error) => Some(error.kind()),
            _ => None,
        }
    }
}

/// A JSON-RPC error answer, as received.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Box<RawValue>>,
}

/// What an error answer means. Every code of `hub-protocol.md` section 9
/// has a variant; anything else is an application error of the service.
#[derive(Debug, Clone, PartialEq)]
pub enum ErrorKind {
    ParseError,
    InvalidRequest {
        reason: Option<String>,
    },
    MethodNotFound,
    InvalidParams {
        field: Option<String>,
    },
    Internal,
    UnsupportedProtocolVersion {
        supported: Vec<String>,
    },
    AuthRequired,
    NotFound,
    PermissionDenied,
    LimitExceeded {
        limit: Option<String>,
    },
    Timeout {
        timeout_ms: Option<u64>,
    },
    ServiceGone {
        reason: Option<GoneReason>,
    },
    Cancelled,
    /// A code the hub does not use: the service's own error.
    Application {
        code: i64,
    },
}

impl RpcError {
    pub fn from_object(object: ErrorObject) -> Self {
        RpcError {
            code: object.code,
            message: object.message,
            data: object.data,
        }
    }

    /// `data` decoded as JSON, if present.
    pub fn data(&self) -> Option<Value> {
        self.data
            .as_deref()
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
    }

    fn data_str(&self, key: &str) -> Option<String> {
        self.data()?.get(key)?.as_str().map(str::to_owned)
    }

    pub fn kind(&self) -> ErrorKind {
        let Some(code) = ErrorCode::from_code(self.code) else {
            return ErrorKind::Application { code: self.code };
        };
        match code {
            ErrorCode::ParseError => ErrorKind::ParseError,
            ErrorCode::InvalidRequest => ErrorKind::InvalidRequest {
                reason: self.data_str("reason"),
            },
            ErrorCode::MethodNotFound => ErrorKind::MethodNotFound,
            ErrorCode::InvalidParams => ErrorKind::InvalidParams {
                field: self.data_str("field"),
            },
            ErrorCode::InternalError => ErrorKind::Internal,
            ErrorCode::UnsupportedProtocolVersion => ErrorKind::UnsupportedProtocolVersion {
                supported: self
                    .data()
                    .and_then(|d| serde_json::from_value(d["supportedVersions"].clone()).ok())
                    .unwrap_or_default(),
            },
            ErrorCode::AuthRequired => ErrorKind::AuthRequired,
            ErrorCode::NotFound => ErrorKind::NotFound,
            ErrorCode::PermissionDenied => ErrorKind::PermissionDenied,
            ErrorCode::LimitExceeded => ErrorKind::LimitExceeded {
                limit: self.data_str("limit"),
            },
            ErrorCode::RequestTimeout => ErrorKind::Timeout {
                timeout_ms: self.data().and_then(|d| d["timeoutMs"].as_u64()),
            },
            ErrorCode::ServiceGone => ErrorKind::ServiceGone {
                reason: self
                    .data()
                    .and_then(|d| serde_json::from_value(d["reason"].clone()).ok()),
            },
            ErrorCode::RequestCancelled => ErrorKind::Cancelled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rpc(code: i64, data: Value) -> RpcError {
        RpcError {
            code,
            message: "m".into(),
            data: Some(serde_json::value::to_raw_value(&data).unwrap()),
        }
    }

    #[test]
    fn every_hub_code_has_a_kind() {
        assert_eq!(
            rpc(-32050, json!({"limit": "maxInFlightPerClient"})).kind(),
            ErrorKind::LimitExceeded {
                limit: Some("maxInFlightPerClient".into())
            }
        );
        assert_eq!(
            rpc(-32052, json!({"reason": "unregistered"})).kind(),
            ErrorKind::ServiceGone {
                reason: Some(GoneReason::Unregistered)
            }
        );
        assert_eq!(
            rpc(-32051, json!({"timeoutMs": 5})).kind(),
            ErrorKind::Timeout {
                timeout_ms: Some(5)
            }
        );
        assert_eq!(
            rpc(4242, json!({})).kind(),
            ErrorKind::Application { code: 4242 }
        );
        for code in ErrorCode::ALL {
            assert!(!matches!(
                rpc(code.code(), json!({})).kind(),
                ErrorKind::Application { .. }
            ));
        }
    }
}
