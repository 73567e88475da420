//! The remote listener's TLS (`--remote ADDR --tls-cert FILE --tls-key
//! FILE`): rustls with the ring provider, TLS 1.2 and 1.3, no client
//! certificates (clients authenticate with a named principal's token),
//! ALPN `http/1.1`. The sockets it accepts are served by `http.rs` like the
//! loopback port's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// Where the remote listener binds and what it presents.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    pub address: std::net::SocketAddr,
    /// PEM: the certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM: the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate {path}: {error}")]
    Cert { path: PathBuf, error: String },
    #[error("the TLS certificate file {path} holds no PEM certificate")]
    NoCert { path: PathBuf },
    #[error("cannot read the TLS private key {path}: {error}")]
    Key { path: PathBuf, error: String },
    #[error("the TLS certificate {cert} and key {key} do not make a server identity: {error}")]
    Config {
        cert: PathBuf,
        key: PathBuf,
        error: String,
    },
}

/// Reads the certificate chain and key and builds the acceptor.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|error| TlsError::Cert {
            path: cert.to_owned(),
            error: error.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCert {
            path: cert.to_owned(),
        });
    }
    let private_key = PrivateKeyDer::from_pem_file(key).map_err(|error| TlsError::Key {
        path: key.to_owned(),
        error: error.to_string(),
    })?;
    let config_error = |error: rustls::Error| TlsError::Config {
        cert: cert.to_owned(),
        key: key.to_owned(),
        error: error.to_string(),
    };
    // The provider is named: another crate in the process may enable a
    // second one, and then rustls has no default to pick.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(config_error)?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(config_error)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
