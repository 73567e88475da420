//! A hub with its remote (TLS) listener on, for the tests that reach it.

use std::path::{Path, PathBuf};

use switchboard_testkit::HubProcessBuilder;

/// A self-signed certificate for `localhost`, written to `dir`.
pub struct LocalhostCertificate {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The certificate, for a client to trust.
    pub pem: String,
}

impl LocalhostCertificate {
    /// `dir/cert.pem`, and `dir/key.pem` readable by its owner alone.
    pub fn write(dir: &Path) -> LocalhostCertificate {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        let pem = certified.cert.pem();
        std::fs::write(&cert, &pem).unwrap();
        super::write_private(&key, &certified.signing_key.serialize_pem());
        LocalhostCertificate { cert, key, pem }
    }

    /// `serve --remote 127.0.0.1:0` with this certificate.
    pub fn remote(&self, builder: HubProcessBuilder) -> HubProcessBuilder {
        builder
            .arg("--remote")
            .arg("127.0.0.1:0")
            .arg("--tls-cert")
            .arg(&self.cert)
            .arg("--tls-key")
            .arg(&self.key)
    }
}
