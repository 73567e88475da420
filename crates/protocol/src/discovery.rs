//! How a client finds the hub: the directory rule and `hub.json`.
//!
//! Pure functions over values the caller supplies (environment, uid), so
//! the hub and every client apply the same rule without this crate doing I/O.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

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

/// The hub directory: `explicit` (`--dir`), else `$SWITCHBOARD_DIR`, else
/// `$XDG_RUNTIME_DIR/switchboard`, else `/tmp/switchboard-<uid>`.
pub fn hub_dir(
    explicit: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
    uid: u32,
) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_owned();
    }
    let set = |name: &str| env(name).filter(|value| !value.is_empty());
    if let Some(dir) = set("SWITCHBOARD_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(runtime) = set("XDG_RUNTIME_DIR") {
        return Path::new(&runtime).join("switchboard");
    }
    PathBuf::from(format!("/tmp/switchboard-{uid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_rule_in_order() {
        let none = |_: &str| None;
        assert_eq!(hub_dir(None, none, 7), PathBuf::from("/tmp/switchboard-7"));
        let xdg = |name: &str| (name == "XDG_RUNTIME_DIR").then(|| OsString::from("/run/user/7"));
        assert_eq!(
            hub_dir(None, xdg, 7),
            PathBuf::from("/run/user/7/switchboard")
        );
        let both = |name: &str| match name {
            "XDG_RUNTIME_DIR" => Some(OsString::from("/run/user/7")),
            "SWITCHBOARD_DIR" => Some(OsString::from("/srv/sb")),
            _ => None,
        };
        assert_eq!(hub_dir(None, both, 7), PathBuf::from("/srv/sb"));
        assert_eq!(hub_dir(Some(Path::new("/x")), both, 7), PathBuf::from("/x"));
        let empty = |_: &str| Some(OsString::new());
        assert_eq!(hub_dir(None, empty, 7), PathBuf::from("/tmp/switchboard-7"));
    }
}
