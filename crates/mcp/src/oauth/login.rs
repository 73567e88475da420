//! `switchboard mcp login NAME`: an OAuth 2.1 authorization code flow with
//! PKCE for one remote module, the user's browser in the middle.
//!
//! 1. A listener on `127.0.0.1` (a port of its own unless one is given)
//!    is the redirect URI, `http://127.0.0.1:PORT/callback`;
//! 2. discovery: the server's protected-resource metadata names its
//!    authorization server, whose metadata gives the endpoints;
//! 3. the client: one registered beforehand ([`PreRegisteredClient`],
//!    with its secret if it is confidential), or else one registered now
//!    (dynamic client registration; a server that offers none is a clear
//!    error naming what to configure);
//! 4. the authorization URL is shown (and opened, by the caller, when a
//!    browser is at hand); the user signs in there;
//! 5. the authorization server redirects the browser to the listener with
//!    a code, which is exchanged (with the PKCE verifier) for tokens, saved
//!    0600 by [`FileCredentialStore`].
//!
//! Every wait is bounded: the login as a whole by [`LoginOptions::wait`].

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::response::Html;
use axum::routing::get;
use parking_lot::Mutex;
use rmcp::transport::auth::{AuthorizationManager, AuthorizationRequest, AuthorizationSession};
use tokio::sync::oneshot;

use super::store::FileCredentialStore;
use super::{OAuthError, PreRegisteredClient};

/// The client name a login registers under.
const CLIENT_NAME: &str = "Switchboard";

pub struct LoginOptions {
    /// The module's name: the credentials file's and the messages'.
    pub name: String,
    /// The remote MCP server.
    pub url: url::Url,
    /// Where the credentials go (`credentials_path`).
    pub credentials: PathBuf,
    /// The redirect listener's port on 127.0.0.1; 0 for any free one.
    pub port: u16,
    /// The client registered beforehand, if any; none: dynamic
    /// registration.
    pub client: Option<PreRegisteredClient>,
    /// The scopes to ask for; none: as the server's metadata (or its
    /// challenge) says.
    pub scopes: Vec<String>,
    /// How long to wait for the browser to come back.
    pub wait: Duration,
}

/// Runs the login; `show` gets the authorization URL as soon as it is
/// known (to print it, or open it). Returns once the tokens are saved.
pub async fn login(options: LoginOptions, show: impl FnOnce(&str)) -> Result<(), OAuthError> {
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, options.port)))
            .await
            .map_err(|error| {
                OAuthError::Redirect(format!("cannot listen on 127.0.0.1: {error}"))
            })?;
    let port = listener
        .local_addr()
        .map_err(|error| OAuthError::Redirect(error.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");

    super::install_crypto();
    let mut manager = AuthorizationManager::new(options.url.as_str())
        .await
        .map_err(OAuthError::auth("cannot prepare OAuth"))?;
    // A new login starts from nothing: an old client id may belong to an
    // authorization server that has forgotten it.
    let store = FileCredentialStore::new(options.credentials.clone());
    manager.set_credential_store(store);
    let resolution = manager.resolve_metadata().await.map_err(OAuthError::auth(
        "cannot discover the server's authorization server",
    ))?;
    // Newer MCP revisions require published metadata; endpoints guessed
    // from the URL would send the user to pages that do not exist.
    if !resolution.source.is_discovered() {
        return Err(OAuthError::NoMetadata {
            url: switchboard_mcp_client::shown_url(&options.url),
        });
    }
    if options.client.is_none() && resolution.metadata.registration_endpoint.is_none() {
        return Err(OAuthError::NoRegistration {
            name: options.name,
            url: switchboard_mcp_client::shown_url(&options.url),
            redirect_uri,
        });
    }
    manager.set_metadata(resolution.metadata);
    let mut request = AuthorizationRequest::new(redirect_uri.clone()).with_client_name(CLIENT_NAME);
    if !options.scopes.is_empty() {
        request = request.with_scopes(options.scopes.iter().cloned());
    }
    if let Some(client) = &options.client {
        request = request.with_preregistered_client(client.id.clone());
        if let Some(secret) = client.secret()? {
            request = request.with_client_secret(secret);
        }
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, source)| OAuthError::auth("cannot start the authorization")(source))?;

    let (sender, callback) = oneshot::channel();
    let redirect = Redirect {
        base: redirect_uri,
        sender: Arc::new(Mutex::new(Some(sender))),
    };
    let app = axum::Router::new()
        .route("/callback", get(callback_page))
        .with_state(redirect);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    show(session.get_authorization_url());

    let outcome = async {
        let url = match tokio::time::timeout(options.wait, callback).await {
            Ok(Ok(url)) => url?,
            Ok(Err(_)) => return Err(OAuthError::Redirect("the listener ended".into())),
            Err(_) => return Err(OAuthError::TimedOut(options.wait)),
        };
        session
            .handle_callback_url(&url)
            .await
            .map_err(OAuthError::auth(
                "the authorization server refused the code",
            ))?;
        Ok(())
    }
    .await;
    server.abort();
    outcome
}

/// The redirect's full URL, or why the authorization server sent none.
type Callback = Result<String, OAuthError>;

#[derive(Clone)]
struct Redirect {
    base: String,
    /// The first redirect only; a second is answered but ignored.
    sender: Arc<Mutex<Option<oneshot::Sender<Callback>>>>,
}

/// The browser arrives with `code` and `state` (or `error`): the page says
/// what happened, and the login goes on with the URL.
async fn callback_page(
    State(redirect): State<Redirect>,
    RawQuery(query): RawQuery,
) -> Html<String> {
    let query = query.unwrap_or_default();
    let url = format!("{}?{query}", redirect.base);
    let parsed = url::Url::parse(&url).ok();
    let pair = |key: &str| {
        parsed.as_ref().and_then(|url| {
            url.query_pairs()
                .find(|(name, _)| name == key)
                .map(|(_, value)| value.into_owned())
        })
    };
    let (outcome, page) = match pair("error") {
        Some(error) => {
            let description = pair("error_description").unwrap_or_default();
            let message = format!("the authorization server said {error}: {description}");
            (
                Err(OAuthError::Redirect(message.clone())),
                format!("Login failed: {}", escape(&message)),
            )
        }
        None => (
            Ok(url),
            "Signed in: Switchboard has the login. You can close this tab.".to_owned(),
        ),
    };
    if let Some(sender) = redirect.sender.lock().take() {
        let _ = sender.send(outcome);
    }
    Html(format!(
        "<!doctype html><meta charset=utf-8><title>Switchboard</title><p>{page}</p>"
    ))
}

/// Text from the authorization server, safe in a page.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
