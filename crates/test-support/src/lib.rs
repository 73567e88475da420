//! Test support shared by every crate's integration tests: one way to start
//! a real hub and to connect clients to it.
//!
//! - [`TestHub`] (`in_process.rs`): a hub in the test's own runtime, on a
//!   fresh temporary directory, over its real sockets.
//! - [`HubProcess`] (`process.rs`): the real `switchboard serve` binary as
//!   a child process, its log captured to a file.
//! - [`binary`]: where the workspace's binaries are, from any crate's tests.
//! - [`clients`]: SDK clients over the Unix socket, the WebSocket or
//!   `hub.json`; [`LineClient`] (`line_client.rs`): a blocking line client
//!   for wire-level tests.
//! - [`http`] and [`metrics`]: `GET` on the hub's HTTP port, samples of its
//!   Prometheus text;
//! - [`nats`]: a real `nats-server` for the federation's tests.
//! - [`wait`]: the bound on every wait ([`WAIT`]) and the helpers that
//!   enforce it.
//!
//! Helpers that only one crate needs (the hub's byte-recording client, the
//! ACP tests' scripted model server, the sidecar's Git repositories) stay in
//! that crate's `tests/<crate>/support`.

pub mod binary;
pub mod clients;
pub mod http;
mod in_process;
mod line_client;
pub mod metrics;
pub mod nats;
mod process;
pub mod wait;

pub use binary::{switchboard_binary, workspace_binary};
pub use in_process::{TestHub, TestHubBuilder};
pub use line_client::LineClient;
pub use metrics::metric_value;
pub use nats::NatsServer;
pub use process::{read_hub_json, HubProcess, HubProcessBuilder};
pub use wait::{eventually, within, WAIT};
