//! The error codes of `hub-protocol.md` section 9 and the shapes of their `data`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Every error code the hub answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    UnsupportedProtocolVersion,
    AuthRequired,
    NotFound,
    PermissionDenied,
    LimitExceeded,
    RequestTimeout,
    ServiceGone,
    RequestCancelled,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MethodNotFound,
        ErrorCode::InvalidParams,
        ErrorCode::InternalError,
        ErrorCode::UnsupportedProtocolVersion,
        ErrorCode::AuthRequired,
        ErrorCode::NotFound,
        ErrorCode::PermissionDenied,
        ErrorCode::LimitExceeded,
        ErrorCode::RequestTimeout,
        ErrorCode::ServiceGone,
        ErrorCode::RequestCancelled,
    ];

    pub const fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::UnsupportedProtocolVersion => -32005,
            ErrorCode::AuthRequired => -32007,
            ErrorCode::NotFound => -32008,
            ErrorCode::PermissionDenied => -32009,
            ErrorCode::LimitExceeded => -32050,
            ErrorCode::RequestTimeout => -32051,
            ErrorCode::ServiceGone => -32052,
            ErrorCode::RequestCancelled => -32800,
        }
    }

    pub fn from_code(code: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.code() == code)
    }

    /// The name the spec gives the code.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "ParseError",
            ErrorCode::InvalidRequest => "InvalidRequest",
            ErrorCode::MethodNotFound => "MethodNotFound",
            ErrorCode::InvalidParams => "InvalidParams",
            ErrorCode::InternalError => "InternalError",
            ErrorCode::UnsupportedProtocolVersion => "UnsupportedProtocolVersion",
            ErrorCode::AuthRequired => "AuthRequired",
            ErrorCode::NotFound => "NotFound",
            ErrorCode::PermissionDenied => "PermissionDenied",
            ErrorCode::LimitExceeded => "LimitExceeded",
            ErrorCode::RequestTimeout => "RequestTimeout",
            ErrorCode::ServiceGone => "ServiceGone",
            ErrorCode::RequestCancelled => "RequestCancelled",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

/// `data` of `-32600` before `initialize`, and of other envelope errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonData {
    pub reason: String,
}

/// `data` of `-32602`: which parameter was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidParamsData {
    pub field: String,
}

/// `data` of `-32050`: which bound was hit, by its name in the limits table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitExceededData {
    pub limit: String,
    /// The bound in force.
    pub max: u64,
}

/// `data` of `-32051`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestTimeoutData {
    pub timeout_ms: u64,
}

/// Why a service went away, in `-32052` data and in `removed` actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GoneReason {
    Disconnected,
    Unregistered,
}

/// `data` of `-32052`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceGoneData {
    pub reason: GoneReason,
}

/// `data` of `-32005`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnsupportedVersionData {
    pub supported_versions: Vec<String>,
}

/// `data` of an application error whose `data` was over `maxErrorDataBytes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TruncatedData {
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(code.code()), Some(code));
        }
        assert_eq!(ErrorCode::from_code(4242), None);
    }
}
