//! TLS for `wss://` endpoints (a hub's remote listener): rustls with ring,
//! trusting the system's roots, or only a given CA.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use tokio_tungstenite::Connector;

use crate::error::Error;

/// The connector for a `wss://` URL: the certificates in `ca_cert` (PEM)
/// as the only roots when given, else the system's.
pub(crate) fn connector(ca_cert: Option<&Path>) -> Result<Connector, Error> {
    let mut roots = RootCertStore::empty();
    match ca_cert {
        Some(path) => {
            let certificates = CertificateDer::pem_file_iter(path)
                .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
                .map_err(|error| {
                    Error::WebSocket(format!(
                        "cannot read the CA certificate {}: {error}",
                        path.display()
                    ))
                })?;
            if certificates.is_empty() {
                return Err(Error::WebSocket(format!(
                    "{} holds no PEM certificate",
                    path.display()
                )));
            }
            for certificate in certificates {
                roots.add(certificate).map_err(|error| {
                    Error::WebSocket(format!(
                        "{} holds a certificate rustls refuses: {error}",
                        path.display()
                    ))
                })?;
            }
        }
        None => {
            // Certificates the system store holds but rustls cannot parse are
            // skipped, as browsers do.
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::WebSocket(format!("cannot set up TLS: {error}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Connector::Rustls(Arc::new(config)))
}
