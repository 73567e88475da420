//! A module's OAuth credentials in a private file, written as the hub
//! writes `hub.json` (`switchboard_hub::dir::write_private`: a 0600
//! temporary file renamed over it), so a reader never sees half a file
//! and a crash never loses the old one.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};

/// rmcp's [`CredentialStore`] over one file.
#[derive(Debug, Clone)]
pub struct FileCredentialStore {
    path: PathBuf,
    /// Held across a refresh (load, exchange, save): authorization servers
    /// rotate refresh tokens, and a second refresh with the one the first
    /// just used is refused and revokes the whole grant.
    refreshing: Arc<tokio::sync::Mutex<()>>,
}

impl FileCredentialStore {
    pub fn new(path: PathBuf) -> Self {
        FileCredentialStore {
            path,
            refreshing: Arc::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    fn write(&self, credentials: &StoredCredentials) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let json = serde_json::to_vec_pretty(credentials).map_err(std::io::Error::other)?;
        switchboard_hub::dir::write_private(&self.path, &json)
    }

    fn failed(&self, what: &str, error: impl std::fmt::Display) -> AuthError {
        AuthError::CredentialStoreError(format!("{what} {}: {error}", self.path.display()))
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileCredentialStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|error| self.failed("cannot read the credentials in", error)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(self.failed("cannot read", error)),
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.write(&credentials)
            .map_err(|error| self.failed("cannot write", error))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(self.failed("cannot remove", error)),
        }
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let guard = self.refreshing.clone().lock_owned().await;
        Ok(Some(CredentialRefreshGuard::new(guard)))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[tokio::test]
    async fn saved_credentials_are_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileCredentialStore::new(dir.path().join("oauth/docs.json"));
        assert!(store.load().await.unwrap().is_none());
        let credentials =
            StoredCredentials::new("client-1".into(), None, vec!["mcp".into()], Some(7));
        store.save(credentials).await.unwrap();
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(dir.path().join("oauth"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        let loaded = store.load().await.unwrap().unwrap();
        assert_eq!(loaded.client_id, "client-1");
        assert_eq!(loaded.granted_scopes, vec!["mcp".to_owned()]);
        store.clear().await.unwrap();
        assert!(!store.exists());
        store.clear().await.unwrap();
    }

    #[tokio::test]
    async fn a_file_that_is_not_credentials_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("docs.json");
        std::fs::write(&path, "not json").unwrap();
        let error = FileCredentialStore::new(path).load().await.unwrap_err();
        assert!(
            error.to_string().contains("cannot read the credentials in"),
            "{error}"
        );
    }
}
