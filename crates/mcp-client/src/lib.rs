//! The MCP client side of Switchboard, on the official `rmcp` SDK: start an
//! MCP server (a child on stdio, Streamable HTTP, or a server already at
//! the other end of two byte streams), run the handshake, list and call
//! its tools, and keep it up. The ACP front's session servers
//! and `switchboard provide-mcp` both reach their servers through it; no
//! other crate uses rmcp's client side, and no rmcp type is in this
//! crate's API (tools, results and the server's own requests are MCP's
//! JSON).
//!
//! - [`upstream`]: what a server is ([`Upstream`]);
//! - [`start()`]: spawn or connect, `initialize`, the first `tools/list`,
//!   each bounded, failures worded for the user ([`StartError`]);
//! - [`Connection`]: one live connection: [`Connection::call_tool`]
//!   (timeout, progress to the caller's [`ProgressSink`],
//!   `notifications/cancelled` when dropped), [`Connection::list_tools`],
//!   its end, `tools/list_changed`, a bounded stop;
//! - [`Supervised`]: a server kept up by a [`Restart`] policy, its tools
//!   listed again when they change;
//! - [`Handler`]: the caller's answers to the server's own requests
//!   (sampling, elicitation, roots) and its notifications.
//!
//! Layering: `supervise.rs` → `start.rs` → `connection.rs` (with `call.rs`,
//! `request.rs`) → `bridge.rs` → `progress.rs`, `handler.rs`; never back.
//! Both transports, `child.rs` (stdio, and streams: the same transport
//! with no child) and `streamable.rs` (Streamable HTTP, as lines), hand
//! rmcp lines through the same `tap.rs`. On stdio, `tools/call` goes
//! around rmcp: `call.rs` writes its line into the
//! child's input queue (`input.rs`, which rmcp writes into too) and the
//! tap hands it the answer.

mod bridge;
mod call;
mod child;
mod connection;
mod handler;
mod input;
mod oversized;
mod progress;
mod request;
mod start;
mod stderr;
mod streamable;
mod supervise;
mod tap;
pub mod upstream;

pub use call::{CallError, ToolCall};
pub use connection::{Connection, STOP_WAIT};
pub use handler::{CallTag, Handler, HandlerFuture, ListKind, ServerNotification, ServerRequest};
pub use progress::{ProgressSink, ProgressUpdate};
pub use request::RequestError;
pub use start::{start, StartError, StartOptions, Started};
pub use supervise::{Backoff, Event, Restart, Supervised, SupervisedStart};
pub use upstream::{
    check_header, check_url, shown_url, BearerError, BearerSource, HeaderError, Stderr, StopHook,
    Upstream, UrlError,
};

#[cfg(test)]
mod tests;
