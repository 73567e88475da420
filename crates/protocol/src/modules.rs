//! Supervised modules: how a module the hub started proves who it is, and
//! the shapes of the `hub/modules` and `hub/restartModule` extensions.
//!
//! The hub hands each module run a *launch credential* over an inherited
//! pipe: `$SWITCHBOARD_LAUNCH_FD` names the descriptor, which holds the
//! credential and then ends. The module presents it as `initialize`'s
//! `authToken`; the prefix tells the hub it is a launch credential, never a
//! configured token. See `docs/modules.md`.

use serde::{Deserialize, Serialize};

/// The environment variable naming the inherited descriptor that holds the
/// launch credential (a decimal file descriptor number).
pub const LAUNCH_FD_ENV: &str = "SWITCHBOARD_LAUNCH_FD";

/// Every launch credential starts with this; configured tokens may not.
pub const LAUNCH_CREDENTIAL_PREFIX: &str = "sb-launch-";

/// The most bytes a launch credential may have (what a reader takes from
/// the descriptor at most).
pub const MAX_LAUNCH_CREDENTIAL_BYTES: usize = 128;

/// Whether `token` is shaped like a launch credential (the hub decides
/// whether it is a live one).
pub fn is_launch_credential(token: &str) -> bool {
    token.starts_with(LAUNCH_CREDENTIAL_PREFIX)
}

/// The exit status by which a module says it cannot run until its user
/// logs in again (a remote MCP server's OAuth login: no token, or a
/// refresh the authorization server refused). The supervisor shows
/// [`ModuleState::NeedsLogin`] and does not restart it until
/// `hub/restartModule` (which `switchboard mcp login` sends) or a reload.
/// 77 is `EX_NOPERM` of `sysexits.h`.
pub const EXIT_NEEDS_LOGIN: i32 = 77;

/// What a module is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModuleState {
    /// Its process runs.
    Running,
    /// It ended and is restarted after a pause (`retryInMs`).
    Backoff,
    /// Asked to stop (SIGTERM sent; SIGKILL follows after a bound).
    Stopping,
    /// It ended and its restart policy does not restart it.
    Exited,
    /// It failed too often in a row too soon after starting; nothing
    /// restarts it until `hub/restartModule` or a reload changes it.
    GivenUp,
    /// It ended with [`EXIT_NEEDS_LOGIN`]: its user must log in
    /// (`switchboard mcp login NAME`); nothing restarts it until then.
    NeedsLogin,
}

impl ModuleState {
    /// The name on the wire (`given-up`).
    pub fn name(self) -> &'static str {
        match self {
            ModuleState::Running => "running",
            ModuleState::Backoff => "backoff",
            ModuleState::Stopping => "stopping",
            ModuleState::Exited => "exited",
            ModuleState::GivenUp => "given-up",
            ModuleState::NeedsLogin => "needs-login",
        }
    }
}

/// One module as `hub/modules` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleStatus {
    pub name: String,
    pub state: ModuleState,
    /// The process's id while it runs (or is stopping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Starts after the first one (automatic and asked for).
    pub restarts: u64,
    /// Since the current run started, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_ms: Option<u64>,
    /// How the last run ended: `exit status 1`, `killed by signal 9`,
    /// `cannot start: …`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_exit: Option<String>,
    /// In `backoff`: when the next start is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
    /// Services registered now by connections of this module.
    pub services: u64,
    /// The command line, as started.
    pub command: String,
    /// For a remote MCP server behind OAuth (`oauth = true`): what
    /// `switchboard mcp login NAME` signs in to, and as which client. Its
    /// members (`oauthUrl`, …) sit beside the others.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthLogin>,
    /// Where its stdout and stderr go.
    pub log: String,
}

/// How `switchboard mcp login NAME` signs in to a remote module behind
/// OAuth. A client the authorization server registered beforehand
/// (`oauth_client_id`) is used as it is; without one, the login registers
/// a client dynamically.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthLogin {
    /// The remote MCP server's URL.
    #[serde(rename = "oauthUrl")]
    pub url: String,
    /// The pre-registered client's id (not a secret).
    #[serde(
        rename = "oauthClientId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_id: Option<String>,
    /// The file that holds that client's secret, for a confidential
    /// client: a path, never the secret.
    #[serde(
        rename = "oauthClientSecretFile",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_secret_file: Option<String>,
    /// The port of the loopback redirect URI the client was registered
    /// with (`http://127.0.0.1:PORT/callback`); none: any free port.
    #[serde(
        rename = "oauthRedirectPort",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub redirect_port: Option<u16>,
    /// The scopes to ask for (`oauth_scopes`); none: the server's
    /// metadata says.
    #[serde(rename = "oauthScopes", default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

/// Result of `hub/modules`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModulesResult {
    pub modules: Vec<ModuleStatus>,
}

/// Params of `hub/restartModule`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartModuleParams {
    pub name: String,
}

/// What a reload did to the modules, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleChanges {
    #[serde(default)]
    pub added: Vec<String>,
    #[serde(default)]
    pub removed: Vec<String>,
    /// Modules whose config changed: stopped and started again.
    #[serde(default)]
    pub restarted: Vec<String>,
}

impl ModuleChanges {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_named_as_on_the_wire() {
        for state in [
            ModuleState::Running,
            ModuleState::Backoff,
            ModuleState::Stopping,
            ModuleState::Exited,
            ModuleState::GivenUp,
            ModuleState::NeedsLogin,
        ] {
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.name()));
        }
    }

    #[test]
    fn launch_credentials_are_told_apart_by_prefix() {
        assert!(is_launch_credential("sb-launch-00ff"));
        assert!(!is_launch_credential("00ff"));
    }
}
