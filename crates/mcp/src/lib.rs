//! MCP on Switchboard, both ways:
//!
//! - [`provide`]: `switchboard provide-mcp` runs a stdio MCP server as a
//!   supervised child (or reaches a remote one over Streamable HTTP) and
//!   publishes its tools as a hub tool provider;
//! - [`gateway`]: `switchboard mcp` is an MCP server on stdio that serves
//!   what every tool provider on the hub serves: tools and prompts (as
//!   `<namespace>__<name>`), resources and templates, and their servers'
//!   requests to the client; a [`Profile`] narrows and renames what its
//!   sessions see;
//! - [`http`]: the same gateway over Streamable HTTP, served by the hub
//!   at `/mcp` (an add-on through the hub's endpoint door);
//! - [`oauth`]: OAuth 2.1 for remote servers: `switchboard mcp login`, and
//!   the refreshed access token `provide-mcp --oauth` sends.
//!
//! Design choices (progress relay, error mapping, ledger place) are in
//! `docs/tool-calls.md`.

pub mod gateway;
pub mod http;
pub mod oauth;
pub mod provide;

pub use gateway::logging::GatewayLogFilter;
pub use gateway::{run_gateway, Gateway, GatewayOptions, ServedSession};
pub use provide::{ledger_path, run_provider, McpServer, ProvideOptions, RelayStats, RemoteServer};
pub use switchboard_tools::consumer::{Profile, ProfileError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Start(switchboard_mcp_client::StartError),
    #[error(transparent)]
    Tools(#[from] switchboard_tools::ToolsError),
    #[error(transparent)]
    Hub(#[from] switchboard_client::Error),
    #[error("MCP on stdio: {0}")]
    Stdio(String),
    /// What the user asked for cannot be done as given.
    #[error("{0}")]
    Options(String),
    #[error(transparent)]
    OAuth(#[from] oauth::OAuthError),
}

impl Error {
    /// The remote server's OAuth login must be done (again) before it can
    /// be reached: `provide-mcp` ends with
    /// [`switchboard_protocol::modules::EXIT_NEEDS_LOGIN`].
    pub fn needs_login(&self) -> bool {
        matches!(self, Error::OAuth(oauth::OAuthError::NeedsLogin { .. }))
    }
}
