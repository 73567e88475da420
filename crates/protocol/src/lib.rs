//! Wire types of the Switchboard hub, with no I/O.
//!
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope, decoded with payloads left raw;
//! - [`json`]: the one-pass validator behind it, which also finds members;
//! - [`hub`]: the methods, parameters, results and catalog actions of
//!   `hub-protocol.md`;
//! - [`error`]: the error codes and the shapes of their `data`;
//! - [`limits`]: the bounds table;
//! - [`principal`]: who is behind a connection;
//! - [`scan`]: the members of an already-validated object, without re-parsing;
//! - [`discovery`]: the hub directory rule and `hub.json`;
//! - [`modules`]: launch credentials and the supervised modules' shapes;
//! - [`tool_call`]: the `tool-provider` contract of `docs/reference/tool-calls.md`.

pub mod discovery;
pub mod error;
pub mod hub;
pub mod json;
pub mod jsonrpc;
pub mod limits;
pub mod modules;
pub mod principal;
pub mod scan;
pub mod tool_call;

pub use error::ErrorCode;
pub use jsonrpc::ErrorObject;
pub use limits::Limits;
pub use principal::Principal;
pub use tool_call::{CallOrigin, TokenError, TokenField, ToolCallRequest};
