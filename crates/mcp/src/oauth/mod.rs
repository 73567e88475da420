//! OAuth 2.1 for remote MCP servers (`[modules.NAME] oauth = true`), on
//! rmcp's authorization support (`rmcp::transport::auth`): discovery of the
//! server's protected-resource metadata and its authorization server's
//! metadata, the client (one registered beforehand, [`PreRegisteredClient`],
//! or else dynamic client registration), authorization code with PKCE,
//! refresh before expiry.
//!
//! - `store.rs`: a module's credentials (client id, tokens) in one file,
//!   `<hub dir>/oauth/NAME.json`, mode 0600, replaced atomically;
//! - `login.rs`: `switchboard mcp login NAME`: the authorization URL, and
//!   the loopback redirect that completes it;
//! - `bearer.rs`: what `provide-mcp --oauth` sends: the access token,
//!   refreshed before it expires; when no refresh is possible, the module
//!   needs a login and says so by its exit status
//!   ([`switchboard_protocol::modules::EXIT_NEEDS_LOGIN`]).
//!
//! No token is ever logged or shown: rmcp's `Debug` of credentials redacts
//! them, and every message here names the module, never a token.

mod bearer;
mod login;
mod store;

use std::path::{Path, PathBuf};

pub use bearer::OAuthBearer;
pub use login::{login, LoginOptions};
pub use store::FileCredentialStore;

/// Where the OAuth credentials of module `name` live under a hub directory.
pub fn credentials_path(hub_dir: &Path, name: &str) -> PathBuf {
    hub_dir.join("oauth").join(format!("{name}.json"))
}

/// A client the authorization server registered beforehand
/// (`oauth_client_id`), for servers that do not register clients
/// dynamically or whose owners want one known client. A confidential
/// client's secret stays in its file (`oauth_client_secret_file`), read
/// by a login and when the module starts; `Debug` shows the path only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreRegisteredClient {
    pub id: String,
    pub secret_file: Option<PathBuf>,
}

impl PreRegisteredClient {
    /// The secret: the file's first line, trimmed; `None` for a public
    /// client.
    fn secret(&self) -> Result<Option<String>, OAuthError> {
        let Some(path) = &self.secret_file else {
            return Ok(None);
        };
        let unreadable = |why: String| OAuthError::ClientSecret {
            path: path.display().to_string(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|error| unreadable(error.to_string()))?;
        match text.lines().next().map(str::trim) {
            Some(secret) if !secret.is_empty() => Ok(Some(secret.to_owned())),
            _ => Err(unreadable("it is empty".into())),
        }
    }
}

/// Why a login or a token failed.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// No credentials, or the authorization server no longer accepts them.
    #[error("{name} needs login: run `switchboard mcp login {name}`")]
    NeedsLogin { name: String },
    #[error("{what}")]
    Auth {
        what: &'static str,
        /// Boxed: rmcp's error is large, and this one travels in every
        /// `Result` of the crate.
        #[source]
        source: Box<rmcp::transport::auth::AuthError>,
    },
    #[error("the server at {url} publishes no OAuth metadata (neither protected-resource nor authorization-server metadata): is it behind OAuth?")]
    NoMetadata { url: String },
    #[error("the authorization server of {url} does not register clients dynamically: register one there (redirect URI {redirect_uri}, or any port on 127.0.0.1 if it allows that) and give [modules.{name}] its oauth_client_id (with oauth_client_secret_file for a confidential client, and oauth_redirect_port for a fixed port)")]
    NoRegistration {
        name: String,
        url: String,
        redirect_uri: String,
    },
    #[error("cannot read the OAuth client secret file {path}: {why}")]
    ClientSecret { path: String, why: String },
    #[error("the login redirect: {0}")]
    Redirect(String),
    #[error("no login within {0:?}: the authorization page was not completed")]
    TimedOut(std::time::Duration),
}

/// rustls needs a process-wide crypto provider before rmcp's OAuth client
/// (reqwest) is built; ring, as everywhere in the workspace. Installing
/// twice is harmless (the second is refused).
fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl OAuthError {
    fn auth(what: &'static str) -> impl FnOnce(rmcp::transport::auth::AuthError) -> OAuthError {
        move |source| OAuthError::Auth {
            what,
            source: Box::new(source),
        }
    }
}
