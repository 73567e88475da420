//! What `hub.json` holds: how to reach a hub. (Where the file is, and
//! reading it, are `switchboard-discovery`'s.)

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The socket's file name in the hub directory.
pub const SOCKET_FILE: &str = "hub.sock";
/// The discovery file's name in the hub directory.
pub const INFO_FILE: &str = "hub.json";

/// What `hub.json` says: how to reach the hub and the `direct` token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubInfo {
    pub version: u32,
    pub pid: u32,
    pub socket: PathBuf,
    /// `ws://127.0.0.1:PORT/`, or `null` when the hub serves no WebSocket.
    pub ws: Option<String>,
    /// `wss://HOST:PORT/` of the remote (TLS) listener, when it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// `http://127.0.0.1:PORT/mcp`: the MCP gateway over Streamable HTTP,
    /// when the hub serves it (on the WebSocket's port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_url: Option<String>,
    pub token: String,
    /// Present when the hub is part of a federation (`federation.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub federation: Option<FederationInfo>,
}

/// `hub.json`'s `federation` member: the hub's name in the fabric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FederationInfo {
    pub name: String,
}
