//! The Switchboard hub: a per-user daemon that routes JSON-RPC between
//! local clients. See `ARCHITECTURE.md` at the repository root for the map.
//!
//! - [`server`]: start and stop a hub ([`Hub`]);
//! - `transport`: the Unix socket and WebSocket listeners, one task per
//!   connection;
//! - `dispatch`: what one connection's messages do;
//! - `registry`: services and the catalog channel;
//! - `router` and `pending`: notifications and requests;
//! - `outbound`: per-connection queues and the overload policy;
//! - [`policy`] and [`config`]: principals, tokens and grants;
//! - [`dir`]: the hub directory, lock and `hub.json`.

pub mod config;
pub mod dir;
pub mod policy;
pub mod server;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

mod conn;
mod dispatch;
mod ids;
mod metrics;
mod outbound;
mod pending;
mod registry;
mod reply;
mod router;
mod state;
mod transport;
mod wire;

pub use config::Config;
pub use dir::HubInfo;
pub use server::{Hub, HubOptions, StartError};
pub use state::{Bookkeeping, HubState};
