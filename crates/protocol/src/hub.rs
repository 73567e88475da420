//! Methods, parameters and results of `hub-protocol.md`.
//!
//! These types are the one description of each wire shape: clients (the
//! Rust SDK) build their params with them, and the golden vectors in
//! `tests/golden/` pin them. Parameter types borrow (`&RawValue` for
//! application payloads, `Cow<str>` for names), so building or reading one
//! neither copies nor parses a payload. Result and event types are owned, for
//! clients. (The hub itself reads `clientService/*` params from the index
//! its validating walk builds, never through serde: see `crates/hub`'s
//! `router.rs`.)

use std::borrow::Cow;

use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::GoneReason;
use crate::jsonrpc::present;
use crate::limits::Limits;
use crate::modules::ModuleChanges;
use crate::principal::Principal;

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: &str = "1.0.0";
/// The versions the hub speaks; an offered version is accepted when it is
/// caret-compatible with one of them ([`select_version`]).
pub const SUPPORTED_VERSIONS: &[&str] = &[PROTOCOL_VERSION];
/// The root channel named in `initialize.channel`.
pub const ROOT_CHANNEL: &str = "ahp-root://";
/// The catalog channel.
pub const CATALOG_CHANNEL: &str = "ahp-client-services://";
/// `serverInfo.name`.
pub const SERVER_NAME: &str = "switchboard";

/// Method names.
pub mod method {
    pub const INITIALIZE: &str = "initialize";
    pub const PING: &str = "ping";
    pub const REGISTER_SERVICE: &str = "client/registerService";
    pub const UNREGISTER_SERVICE: &str = "client/unregisterService";
    pub const UPDATE_SERVICE: &str = "client/updateService";
    pub const SUBSCRIBE: &str = "subscribe";
    pub const UNSUBSCRIBE: &str = "unsubscribe";
    /// Hub → subscriber: one catalog change.
    pub const ACTION: &str = "action";
    /// Client → hub notification.
    pub const NOTIFY: &str = "clientService/notify";
    /// Hub → owner notification.
    pub const NOTIFICATION: &str = "clientService/notification";
    /// Client → hub request.
    pub const REQUEST: &str = "clientService/request";
    /// Hub → owner request.
    pub const HANDLE_REQUEST: &str = "clientService/handleRequest";
    /// Both directions (LSP convention).
    pub const CANCEL_REQUEST: &str = "$/cancelRequest";
    /// Extension: re-read the config (direct principal only).
    pub const RELOAD: &str = "hub/reload";
    /// Extension: the supervised modules and their state (direct only).
    pub const MODULES: &str = "hub/modules";
    /// Extension: stop a module and start it again (direct only).
    pub const RESTART_MODULE: &str = "hub/restartModule";
    /// Extension: a one-time login code for the dashboard page (direct
    /// principal only); result [`super::DashboardLoginResult`].
    pub const DASHBOARD_LOGIN: &str = "hub/dashboardLogin";
    /// Extension: the dashboard's snapshot (hub, config, services, the
    /// latest tick, history) as JSON (direct principal only), for
    /// `switchboard top`. Its shape is in `docs/dashboard.md`.
    pub const DASHBOARD_SNAPSHOT: &str = "hub/dashboardSnapshot";
    /// AHP's resume command: fresh snapshots of the listed channels (and,
    /// as a connection's first message, `initialize` by the upgrade's token).
    pub const RECONNECT: &str = "reconnect";
}

/// `reconnect`'s result type (AHP's `ReconnectSnapshotResult`).
pub const RECONNECT_SNAPSHOT: &str = "snapshot";

/// The state of `ahp-root://`: an AHP root state with no agents (the hub
/// hosts none).
pub const ROOT_STATE: &str = r#"{"agents":[]}"#;

/// `initialize` result `_meta`: tells an AHP client this host has client
/// services, and on which channel.
pub const INITIALIZE_META: &str =
    r#"{"clientServices":{"version":1,"channel":"ahp-client-services://"}}"#;

/// Picks the version to speak from `offered`, as AHP does: the highest
/// offered entry that is caret-compatible with a version the hub speaks
/// (`^1.0.0` is `>=1.0.0 <2.0.0`; for `0.y.z` the minor must match too, and
/// for `0.0.z` the patch), returned exactly as offered. Entries that are not
/// `MAJOR.MINOR.PATCH` are skipped. `None`: nothing compatible (-32005).
pub fn select_version<S: AsRef<str>>(offered: &[S]) -> Option<&str> {
    let speaks: Vec<Semver> = SUPPORTED_VERSIONS
        .iter()
        .filter_map(|v| semver(v))
        .collect();
    offered
        .iter()
        .map(AsRef::as_ref)
        .filter_map(|text| Some((text, semver(text)?)))
        .filter(|(_, version)| speaks.iter().any(|base| caret_matches(*base, *version)))
        .max_by_key(|(_, version)| *version)
        .map(|(text, _)| text)
}

type Semver = (u64, u64, u64);

/// `MAJOR.MINOR.PATCH`, digits only, no leading zeros (SemVer's core).
fn semver(text: &str) -> Option<Semver> {
    let mut parts = text.split('.');
    let mut next = || {
        let part = parts.next()?;
        let digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
        (digits && (part == "0" || !part.starts_with('0')))
            .then(|| part.parse().ok())
            .flatten()
    };
    let version = (next()?, next()?, next()?);
    parts.next().is_none().then_some(version)
}

/// Whether `version` is within `^base`.
fn caret_matches(base: Semver, version: Semver) -> bool {
    version >= base
        && version.0 == base.0
        && (base.0 > 0 || version.1 == base.1)
        && (base.0 > 0 || base.1 > 0 || version.2 == base.2)
}

// ---- initialize ------------------------------------------------------------

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Cow<'a, str>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub protocol_versions: Option<Vec<Cow<'a, str>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub auth_token: Option<Cow<'a, str>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub client_info: Option<ClientInfo<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub initial_subscriptions: Option<Vec<Cow<'a, str>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo<'a> {
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Cow<'a, str>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub protocol_version: String,
    pub client_id: String,
    pub principal: Principal,
    pub server_seq: u64,
    pub snapshots: Vec<Snapshot>,
    pub server_info: ServerInfo,
    pub limits: Limits,
    /// `{clientServices: {version: 1, channel}}` ([`INITIALIZE_META`]).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

/// The result of `hub/dashboardLogin`: open `http://<ws host:port><path>`
/// within `expiresInSeconds`, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DashboardLoginResult {
    pub code: String,
    /// `/ui/login?code=…`
    pub path: String,
    pub expires_in_seconds: u64,
}

// ---- services ----------------------------------------------------------------

/// A service as the catalog lists it: owner identity stamped by the hub,
/// metadata exactly as the owner wrote it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    pub service_id: String,
    pub client_id: String,
    pub principal: Principal,
    pub metadata: Box<RawValue>,
    /// The owner hub of a service learned from another hub of a federation
    /// (`federation.md` section 2); absent for local services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RegisterServiceParams<'a> {
    #[serde(borrow)]
    pub metadata: &'a RawValue,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterServiceResult {
    pub service_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnregisterServiceParams<'a> {
    #[serde(borrow)]
    pub service_id: Cow<'a, str>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateServiceParams<'a> {
    #[serde(borrow)]
    pub service_id: Cow<'a, str>,
    #[serde(borrow)]
    pub metadata: &'a RawValue,
}

/// The `{}` result of unregister and update.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

// ---- catalog -------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubscribeParams<'a> {
    #[serde(borrow)]
    pub channel: Cow<'a, str>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubscribeResult {
    pub snapshot: Snapshot,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub resource: String,
    pub state: CatalogState,
    /// The snapshot holds exactly the changes with `serverSeq <= fromSeq`.
    pub from_seq: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CatalogState {
    pub services: Vec<Service>,
}

/// Params of the `action` notification.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionParams {
    pub channel: String,
    pub server_seq: u64,
    pub action: CatalogAction,
}

/// One change to the catalog.
///
/// `Deserialize` is written by hand: serde's internally tagged enums buffer
/// their content, and a buffered `RawValue` (the metadata) cannot be decoded.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type")]
pub enum CatalogAction {
    #[serde(rename = "clientServices/added")]
    Added { service: Service },
    #[serde(rename = "clientServices/removed", rename_all = "camelCase")]
    Removed {
        service_id: String,
        reason: RemovalReason,
    },
    #[serde(rename = "clientServices/updated", rename_all = "camelCase")]
    Updated {
        service_id: String,
        metadata: Box<RawValue>,
    },
}

impl CatalogAction {
    const TYPES: &'static [&'static str] = &[
        "clientServices/added",
        "clientServices/removed",
        "clientServices/updated",
    ];
}

impl<'de> Deserialize<'de> for CatalogAction {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Every member of every variant, read in one pass straight from the input.
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Flat {
            #[serde(rename = "type")]
            kind: String,
            service: Option<Service>,
            service_id: Option<String>,
            reason: Option<RemovalReason>,
            metadata: Option<Box<RawValue>>,
        }
        fn required<T, E: serde::de::Error>(member: Option<T>, name: &'static str) -> Result<T, E> {
            member.ok_or_else(|| E::missing_field(name))
        }
        let flat = Flat::deserialize(deserializer)?;
        match flat.kind.as_str() {
            "clientServices/added" => Ok(CatalogAction::Added {
                service: required(flat.service, "service")?,
            }),
            "clientServices/removed" => Ok(CatalogAction::Removed {
                service_id: required(flat.service_id, "serviceId")?,
                reason: required(flat.reason, "reason")?,
            }),
            "clientServices/updated" => Ok(CatalogAction::Updated {
                service_id: required(flat.service_id, "serviceId")?,
                metadata: required(flat.metadata, "metadata")?,
            }),
            other => Err(D::Error::unknown_variant(other, Self::TYPES)),
        }
    }
}

/// Why a service left a subscriber's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RemovalReason {
    Unregistered,
    Disconnected,
    /// A policy change made it invisible to this subscriber.
    Hidden,
}

impl From<GoneReason> for RemovalReason {
    fn from(reason: GoneReason) -> Self {
        match reason {
            GoneReason::Disconnected => RemovalReason::Disconnected,
            GoneReason::Unregistered => RemovalReason::Unregistered,
        }
    }
}

// ---- notifications and requests ------------------------------------------------

/// Client → hub `clientService/notify`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotifyParams<'a> {
    #[serde(borrow)]
    pub service_id: Cow<'a, str>,
    #[serde(borrow)]
    pub method: Cow<'a, str>,
    /// `Some` whenever the member is present, `null` included, so a `null`
    /// payload is forwarded as `null`.
    #[serde(
        borrow,
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub params: Option<&'a RawValue>,
}

/// Client → hub `clientService/request`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestParams<'a> {
    #[serde(borrow)]
    pub service_id: Cow<'a, str>,
    #[serde(borrow)]
    pub method: Cow<'a, str>,
    /// `Some` whenever the member is present, `null` included.
    #[serde(
        borrow,
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub params: Option<&'a RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// Hub → owner: `clientService/notification` and `clientService/handleRequest`
/// share this shape.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutedParams {
    pub channel: String,
    pub service_id: String,
    pub sender_client_id: String,
    pub sender_principal: Principal,
    pub method: String,
    /// `Some` whenever the member is present, `null` included.
    #[serde(
        default,
        deserialize_with = "present_owned",
        skip_serializing_if = "Option::is_none"
    )]
    pub params: Option<Box<RawValue>>,
}

/// Deserializes a member that is present (even as `null`) into `Some`.
fn present_owned<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(deserializer).map(Some)
}

/// `$/cancelRequest` in either direction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CancelParams<'a> {
    #[serde(borrow)]
    pub id: &'a RawValue,
}

/// Result of the `hub/reload` extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadResult {
    pub principals: usize,
    pub grants: usize,
    /// Connections closed because their token no longer maps to a principal.
    pub closed: usize,
    /// Modules added, removed and restarted because their config changed.
    #[serde(default, skip_serializing_if = "ModuleChanges::is_empty")]
    pub modules: ModuleChanges,
}

/// A method name is non-empty printable ASCII of at most `max` bytes.
pub fn check_method_name(name: &str, max: u64) -> Result<(), MethodNameError> {
    if name.is_empty() {
        return Err(MethodNameError::Empty);
    }
    if name.len() as u64 > max {
        return Err(MethodNameError::TooLong {
            length: name.len(),
            max,
        });
    }
    if let Some(index) = name.bytes().position(|b| !(0x20..=0x7e).contains(&b)) {
        return Err(MethodNameError::InvalidCharacter { index });
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MethodNameError {
    #[error("method is empty")]
    Empty,
    #[error("method is {length} bytes; at most {max} are allowed")]
    TooLong { length: usize, max: u64 },
    #[error("method has a byte that is not printable ASCII at offset {index}")]
    InvalidCharacter { index: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names() {
        assert_eq!(check_method_name("a/b c", 256), Ok(()));
        assert_eq!(check_method_name("", 256), Err(MethodNameError::Empty));
        assert_eq!(
            check_method_name("abc", 2),
            Err(MethodNameError::TooLong { length: 3, max: 2 })
        );
        assert_eq!(
            check_method_name("a\tb", 256),
            Err(MethodNameError::InvalidCharacter { index: 1 })
        );
        assert_eq!(
            check_method_name("é", 256),
            Err(MethodNameError::InvalidCharacter { index: 0 })
        );
    }

    #[test]
    fn versions_are_matched_by_caret_and_answered_as_offered() {
        // What the AHP 1.0 SDKs offer.
        assert_eq!(select_version(&["1.0.0", "0.9.0"]), Some("1.0.0"));
        assert_eq!(
            select_version(&["0.9.0", "1.2.3", "1.10.0"]),
            Some("1.10.0")
        );
        assert_eq!(select_version(&["1.4.0"]), Some("1.4.0"));
        assert_eq!(select_version(&["0.5.2"]), None);
        assert_eq!(select_version(&["2.0.0", "0.1.0"]), None);
        assert_eq!(select_version::<&str>(&[]), None);
        // Not MAJOR.MINOR.PATCH: skipped, not an error.
        for odd in [
            "1.0",
            "1.0.0.0",
            "01.0.0",
            "1.0.0-beta",
            "v1.0.0",
            "1..0",
            "",
        ] {
            assert_eq!(select_version(&[odd]), None, "{odd}");
            assert_eq!(select_version(&[odd, "1.0.1"]), Some("1.0.1"), "{odd}");
        }
        assert!(caret_matches((0, 9, 0), (0, 9, 4)));
        assert!(!caret_matches((0, 9, 0), (0, 10, 0)));
        assert!(!caret_matches((0, 0, 3), (0, 0, 4)));
        assert!(!caret_matches((1, 2, 0), (1, 1, 9)));
    }
}
