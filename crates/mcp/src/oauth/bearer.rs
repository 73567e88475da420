//! The access token a remote module sends, from its stored credentials:
//! rmcp's [`AuthorizationManager`] refreshes it when less than half its
//! life (at most 30 s) is left, and saves the new one to the file. A
//! refresh the authorization server refuses (the grant was revoked, the
//! refresh token expired) cannot be retried: the module needs a login,
//! and [`OAuthBearer::needs_login`] fires so that `provide-mcp` ends with
//! the status that says so.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::transport::auth::{AuthError, AuthorizationManager, OAuthClientConfig};
use switchboard_mcp_client::{BearerError, BearerSource};
use tokio_util::sync::CancellationToken;

use super::store::FileCredentialStore;
use super::{OAuthError, PreRegisteredClient};

pub struct OAuthBearer {
    name: String,
    manager: AuthorizationManager,
    /// The server refused the last token (401): refresh before the next
    /// request rather than send it again.
    refused: AtomicBool,
    needs_login: CancellationToken,
    /// One token fetch at a time: two requests that both find the token
    /// about to expire refresh it once (the second finds the fresh one).
    fetching: tokio::sync::Mutex<()>,
}

impl OAuthBearer {
    /// The stored credentials of module `name` for the server at `url`;
    /// [`OAuthError::NeedsLogin`] when there are none (or they were for
    /// another authorization server, or another client than `client`, the
    /// one registered beforehand). Discovers the authorization server's
    /// metadata, so that a refresh knows its token endpoint; a confidential
    /// client refreshes with its secret.
    pub async fn load(
        name: &str,
        url: &url::Url,
        path: PathBuf,
        client: Option<&PreRegisteredClient>,
    ) -> Result<Self, OAuthError> {
        let store = FileCredentialStore::new(path);
        let needs_login = || OAuthError::NeedsLogin {
            name: name.to_owned(),
        };
        if !store.exists() {
            return Err(needs_login());
        }
        super::install_crypto();
        let mut manager = AuthorizationManager::new(url.as_str())
            .await
            .map_err(OAuthError::auth("cannot prepare OAuth"))?;
        manager.set_credential_store(store);
        let stored = manager
            .initialize_from_store()
            .await
            .map_err(OAuthError::auth("cannot use the stored login"))?;
        if !stored {
            return Err(needs_login());
        }
        if let Some(client) = client {
            let (stored_id, _) = manager
                .get_credentials()
                .await
                .map_err(OAuthError::auth("cannot use the stored login"))?;
            // The config names another client than the login was made
            // with: its tokens are that client's.
            if stored_id != client.id {
                tracing::warn!(module = %name, "the stored login is another OAuth client's than oauth_client_id");
                return Err(needs_login());
            }
            if let Some(secret) = client.secret()? {
                manager
                    .configure_client(
                        OAuthClientConfig::new(client.id.clone(), url.as_str())
                            .with_client_secret(secret),
                    )
                    .map_err(OAuthError::auth("cannot use the OAuth client"))?;
            }
        }
        Ok(OAuthBearer {
            name: name.to_owned(),
            manager,
            refused: AtomicBool::new(false),
            needs_login: CancellationToken::new(),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// Cancelled once no token can be had without a login.
    pub fn needs_login(&self) -> CancellationToken {
        self.needs_login.clone()
    }

    async fn access_token(&self) -> Result<String, BearerError> {
        let _one_at_a_time = self.fetching.lock().await;
        let token = if self.refused.swap(false, Ordering::AcqRel) {
            self.manager
                .refresh_token()
                .await
                .map(|fresh| oauth2::TokenResponse::access_token(&fresh).secret().clone())
        } else {
            self.manager.get_access_token().await
        };
        token.map_err(|error| match error {
            AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_) => {
                tracing::warn!(module = %self.name, %error, "the OAuth login no longer holds");
                self.needs_login.cancel();
                BearerError(
                    OAuthError::NeedsLogin {
                        name: self.name.clone(),
                    }
                    .to_string(),
                )
            }
            other => BearerError(format!("cannot get an OAuth access token: {other}")),
        })
    }
}

impl BearerSource for OAuthBearer {
    fn token(&self) -> Pin<Box<dyn Future<Output = Result<String, BearerError>> + Send + '_>> {
        Box::pin(self.access_token())
    }

    fn rejected(&self, _token: &str) {
        self.refused.store(true, Ordering::Release);
    }
}
