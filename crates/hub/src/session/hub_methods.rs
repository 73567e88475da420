//! The hub's own `hub/…` methods: `hub/reload` here; the others belong to
//! the add-ons (`hub/modules` to the supervisor, `hub/dashboard…` to the
//! observer), which answer them through their doors.

use serde_json::json;
use serde_json::value::RawValue;
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::ErrorCode;

use super::Session;
use crate::add_ons::Caller;
use crate::conn::Identity;
use crate::reload;

impl Session {
    /// `hub/reload`: re-reads the config file.
    pub(super) fn reload(&self, identity: &Identity) -> Result<String, ErrorObject> {
        Caller::of(identity).require_direct("reload its config")?;
        let result = reload::reload(&self.hub).map_err(|error| {
            ErrorObject::new(
                ErrorCode::InternalError,
                format!("reload failed; the old config stays in force: {error}"),
            )
            .with_data(&json!({ "reason": "config" }))
        })?;
        Ok(serde_json::to_string(&result).expect("serializes"))
    }

    /// A method of an add-on, if one answers `method`.
    pub(super) fn add_on_request(
        &self,
        identity: &Identity,
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<Result<String, ErrorObject>> {
        let caller = Caller::of(identity);
        if let Some(answer) = self
            .hub
            .supervisor
            .get()
            .and_then(|supervisor| supervisor.request(method, &caller, params))
        {
            return Some(answer);
        }
        self.hub
            .observer
            .get()
            .and_then(|observer| observer.request(method, &caller, params))
    }
}
