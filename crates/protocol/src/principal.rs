//! Who is behind a connection, as the hub stamps it on every routed message.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The identity the hub binds to a connection from the token it presented.
///
/// Tagged by `kind` on the wire: `{"kind":"reserved","module_id":"git"}`,
/// `{"kind":"direct"}`, `{"kind":"unverified"}`. Clients never choose it; the
/// hub stamps it on services, notifications and requests.
///
/// A principal of another hub of a federation (`federation.md` section 3)
/// is the same object with one more member, the hub's name:
/// `{"kind":"reserved","module_id":"git","hub":"laptop"}`. It is
/// [`Principal::Remote`] here, so it never equals a local principal of the
/// same kind and name (a tool provider's fence keys them apart).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    /// A named principal from the hub's config file, authenticated by its own token.
    Reserved { module_id: String },
    /// The user who runs the hub (the token in `hub.json`).
    Direct,
    /// A connection without a token, where the config allows it.
    Unverified,
    /// A principal of the hub named `hub`; `principal` is never itself remote.
    Remote {
        hub: String,
        principal: Box<Principal>,
    },
}

impl Principal {
    pub fn reserved(module_id: impl Into<String>) -> Self {
        Principal::Reserved {
            module_id: module_id.into(),
        }
    }

    /// `principal` as a principal of hub `hub` (a remote principal stays
    /// the one it is: the hub of a principal is where it authenticated).
    pub fn on_hub(self, hub: impl Into<String>) -> Self {
        match self {
            Principal::Remote { .. } => self,
            local => Principal::Remote {
                hub: hub.into(),
                principal: Box::new(local),
            },
        }
    }

    /// The name used for this principal in grants, logs and ledgers, without
    /// its hub (see [`Principal::hub`]; `Display` prints both).
    pub fn label(&self) -> &str {
        match self {
            Principal::Reserved { module_id } => module_id,
            Principal::Direct => "direct",
            Principal::Unverified => "unverified",
            Principal::Remote { principal, .. } => principal.label(),
        }
    }

    /// The hub a remote principal belongs to; `None` for a local one.
    pub fn hub(&self) -> Option<&str> {
        match self {
            Principal::Remote { hub, .. } => Some(hub),
            _ => None,
        }
    }

    /// The principal without its hub.
    pub fn local(&self) -> &Principal {
        match self {
            Principal::Remote { principal, .. } => principal,
            local => local,
        }
    }
}

/// `label`, or `hub/label` for a remote principal (the form grants use).
impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.hub() {
            Some(hub) => write!(f, "{hub}/{}", self.label()),
            None => f.write_str(self.label()),
        }
    }
}

/// The wire form: one flat object, `kind` first, `hub` last.
#[derive(Serialize, Deserialize)]
struct Flat<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    module_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    hub: Option<Cow<'a, str>>,
}

impl Serialize for Principal {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (local, hub) = match self {
            Principal::Remote { hub, principal } => (&**principal, Some(Cow::from(hub.as_str()))),
            local => (local, None),
        };
        let (kind, module_id) = match local {
            Principal::Reserved { module_id } => ("reserved", Some(Cow::from(module_id.as_str()))),
            Principal::Direct => ("direct", None),
            Principal::Unverified => ("unverified", None),
            // `on_hub` never nests; written flat all the same.
            Principal::Remote { principal, .. } => return principal.serialize(serializer),
        };
        Flat {
            kind: Cow::from(kind),
            module_id,
            hub,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Principal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let flat = Flat::deserialize(deserializer)?;
        let local = match (&*flat.kind, flat.module_id) {
            ("reserved", Some(module_id)) => Principal::Reserved {
                module_id: module_id.into_owned(),
            },
            ("reserved", None) => return Err(D::Error::missing_field("module_id")),
            ("direct", _) => Principal::Direct,
            ("unverified", _) => Principal::Unverified,
            (other, _) => {
                return Err(D::Error::unknown_variant(
                    other,
                    &["reserved", "direct", "unverified"],
                ))
            }
        };
        Ok(match flat.hub {
            Some(hub) => local.on_hub(hub.into_owned()),
            None => local,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_principals_keep_their_wire_form() {
        for (principal, text) in [
            (
                Principal::reserved("git"),
                r#"{"kind":"reserved","module_id":"git"}"#,
            ),
            (Principal::Direct, r#"{"kind":"direct"}"#),
            (Principal::Unverified, r#"{"kind":"unverified"}"#),
        ] {
            assert_eq!(serde_json::to_string(&principal).unwrap(), text);
            assert_eq!(serde_json::from_str::<Principal>(text).unwrap(), principal);
        }
    }

    #[test]
    fn a_remote_principal_carries_its_hub_last() {
        let remote = Principal::reserved("git").on_hub("laptop");
        let text = r#"{"kind":"reserved","module_id":"git","hub":"laptop"}"#;
        assert_eq!(serde_json::to_string(&remote).unwrap(), text);
        assert_eq!(serde_json::from_str::<Principal>(text).unwrap(), remote);
        assert_ne!(remote, Principal::reserved("git"));
        assert_eq!(remote.to_string(), "laptop/git");
        assert_eq!(remote.label(), "git");
        assert_eq!(remote.hub(), Some("laptop"));
        assert_eq!(remote.local(), &Principal::reserved("git"));
        let direct = Principal::Direct.on_hub("server");
        assert_eq!(
            serde_json::to_string(&direct).unwrap(),
            r#"{"kind":"direct","hub":"server"}"#
        );
        assert_eq!(direct.clone().on_hub("other"), direct);
    }

    #[test]
    fn bad_principals_are_refused() {
        for text in [
            r#"{"kind":"reserved"}"#,
            r#"{"kind":"root"}"#,
            r#"{"module_id":"git"}"#,
            r#""direct""#,
        ] {
            assert!(serde_json::from_str::<Principal>(text).is_err(), "{text}");
        }
    }
}
