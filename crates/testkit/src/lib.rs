//! Everything the tests and the soak need and the product does not: one
//! crate, `publish = false`.
//!
//! The library, used by every crate's integration tests (one way to start
//! a real hub and to connect clients to it):
//! - [`TestHub`] (`in_process.rs`): a hub in the test's own runtime, on a
//!   fresh temporary directory, over its real sockets (feature
//!   `in-process`, on by default; the only part that links the hub);
//! - [`HubProcess`] (`process.rs`): the real `switchboard serve` binary as
//!   a child process, its log captured to a file;
//! - [`binary`]: where the workspace's binaries are, from any crate's tests;
//! - [`clients`]: SDK clients over the Unix socket, the WebSocket or
//!   `hub.json`; [`LineClient`] (`line_client.rs`): a blocking line client
//!   for wire-level tests;
//! - [`http`] and [`metrics`]: `GET` on the hub's HTTP port, samples of its
//!   Prometheus text;
//! - [`nats`]: a real `nats-server` for the federation's tests;
//! - [`wait`]: the bound on every wait ([`WAIT`]) and the helpers that
//!   enforce it;
//! - [`procfs`]: memory, CPU time and the descriptor limit of a process
//!   (the bench's too).
//!
//! The programs (`src/bin/`), started by tests as separate processes so a
//! test can kill them: `hub-fault-client` (an owner or a caller the
//! fault-injection tests SIGKILL), `switchboard-test-module` (a supervised
//! module), `mcp-test-server` (a small real MCP server) and
//! `switchboard-soak` (the load and soak driver of `bench/soak.sh`, with
//! [`soak`], [`connections`], [`growth`], [`sampler`], [`target`] and
//! [`wire`]).
//!
//! Helpers that only one crate needs (the hub's byte-recording client, the
//! ACP tests' scripted model server, the sidecar's Git repositories) stay in
//! that crate's `tests/<crate>/support`.

pub mod binary;
pub mod clients;
pub mod connections;
pub mod growth;
pub mod http;
#[cfg(feature = "in-process")]
mod in_process;
mod line_client;
pub mod metrics;
pub mod nats;
mod outcome;
mod process;
pub mod procfs;
pub mod sampler;
pub mod soak;
pub mod target;
pub mod wait;
pub mod wire;

pub use binary::{switchboard_binary, workspace_binary};
#[cfg(feature = "in-process")]
pub use in_process::{TestHub, TestHubBuilder};
pub use line_client::LineClient;
pub use metrics::metric_value;
pub use nats::NatsServer;
pub use process::{read_hub_json, HubProcess, HubProcessBuilder};
pub use wait::{eventually, within, WAIT};
