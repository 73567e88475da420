//! The Switchboard hub: a per-user daemon that routes JSON-RPC between
//! local clients. See `ARCHITECTURE.md` at the repository root for the map.
//!
//! - [`server`]: start and stop a hub ([`Hub`]);
//! - `transport`: the Unix socket and WebSocket listeners, one task per
//!   connection;
//! - `admission`: connection slots (`maxConnections`) and the table of
//!   open connections;
//! - `session`: what one connection's messages do; `channels`: the
//!   channels it may subscribe to and their snapshots;
//! - `registry`: services and the catalog channel;
//! - `router`: the notify and request paths; `requests`: deadlines,
//!   cancels and the sides leaving; `pending`: their bookkeeping;
//! - `outbound`: per-connection queues and the overload policy;
//! - `state`, `teardown`, `reload`, `scrape`: the shared state, a
//!   connection's end and shutdown, config reloads, metrics;
//! - [`policy`] and [`config`]: principals, tokens and grants (and the
//!   add-ons' sections: `[modules.NAME]`, `[dashboard]`, `[federation]`);
//! - [`dir`]: the hub directory, lock and `hub.json`.
//!
//! Add-ons live in crates of their own and enter through one door each:
//! - [`link`]: what a federation (the `switchboard-federation` crate) may
//!   do to a running hub: other hubs as link connections;
//! - [`observe`]: what an observer (the `switchboard-dashboard` crate) may
//!   read, and what the hub asks of it;
//! - [`supervise`]: what a supervisor of modules (the `switchboard-modules`
//!   crate) may do, and what the hub asks of it;
//! - [`endpoint`]: what an add-on serving its own HTTP endpoint (the MCP
//!   gateway's `/mcp`, the `switchboard-mcp` crate) may do.

pub mod config;
pub mod dir;
pub mod endpoint;
pub mod link;
pub mod observe;
pub mod policy;
pub mod server;
pub mod supervise;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

mod add_ons;
mod admission;
mod channels;
mod conn;
mod federated;
mod ids;
mod metrics;
mod outbound;
mod pending;
mod registry;
mod reload;
mod reply;
mod requests;
mod router;
mod scrape;
mod session;
mod state;
mod teardown;
mod transport;
mod wire;

pub use config::Config;
pub use dir::HubInfo;
pub use scrape::Bookkeeping;
pub use server::{AddOns, Federated, FederationMetrics, Hub, HubOptions, StartError};
pub use state::HubState;
