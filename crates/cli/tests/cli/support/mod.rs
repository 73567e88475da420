//! Setup shared by the `switchboard` binary's tests. Hubs and clients come
//! from `switchboard_testkit` (re-exported here); what is left is
//! particular to this binary's tests:
//!
//! - [`anthropic`]: a scripted Anthropic Messages API, the model of a real
//!   Claude Code;
//! - [`browser`]: a headless chromium driven through the DevTools protocol;
//! - [`callback`]: a hub client with a callback service, as a version-2
//!   consumer has one;
//! - [`commands`]: `switchboard` commands run as processes;
//! - [`fabric`]: a `nats-server` and hubs joined over it (federation);
//! - [`faults`]: `hub-fault-client` processes the fault tests SIGKILL;
//! - [`http_mcp`]: a Streamable HTTP MCP server (rmcp's) that records
//!   the headers it is sent;
//! - [`http_request`]: reading a request on a scripted HTTP server;
//! - [`mcp`]: `provide-mcp` and `mcp` processes and the official MCP client;
//! - [`modules`]: a hub with `[modules.NAME]`, and what the module tests ask of it.
//! - [`openai_responses`]: a scripted OpenAI Responses API, the model of a
//!   real Codex;
//!
//! The ACP tests' own setup (model server, editor, provider) is in
//! `acp/support`.

pub mod anthropic;
pub mod browser;
pub mod callback;
pub mod commands;
pub mod fabric;
pub mod faults;
pub mod http_mcp;
pub mod http_request;
pub mod mcp;
pub mod modules;
pub mod openai_responses;
pub mod tls;

pub use commands::*;
pub use switchboard_testkit::{metric_value, read_hub_json, HubProcess, LineClient, WAIT};

/// Writes `text` to `path`, readable and writable by its owner alone.
pub fn write_private(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A file's permission bits.
pub fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}
