//! Who is behind a connection, as the hub stamps it on every routed message.

use serde::{Deserialize, Serialize};

/// The identity the hub binds to a connection from the token it presented.
///
/// Tagged by `kind` on the wire: `{"kind":"reserved","module_id":"git"}`,
/// `{"kind":"direct"}`, `{"kind":"unverified"}`. Clients never choose it; the
/// hub stamps it on services, notifications and requests.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Principal {
    /// A named principal from the hub's config file, authenticated by its own token.
    Reserved { module_id: String },
    /// The user who runs the hub (the token in `hub.json`).
    Direct,
    /// A connection without a token, where the config allows it.
    Unverified,
}

impl Principal {
    pub fn reserved(module_id: impl Into<String>) -> Self {
        Principal::Reserved {
            module_id: module_id.into(),
        }
    }

    /// The name used for this principal in grants, logs and ledgers.
    pub fn label(&self) -> &str {
        match self {
            Principal::Reserved { module_id } => module_id,
            Principal::Direct => "direct",
            Principal::Unverified => "unverified",
        }
    }
}
