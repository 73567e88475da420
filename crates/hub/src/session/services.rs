//! What a connection does with services and the catalog:
//! `client/registerService`, `client/unregisterService`,
//! `client/updateService` and `subscribe`.

use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_protocol::hub::{RegisterServiceResult, CATALOG_CHANNEL, ROOT_CHANNEL};
use switchboard_protocol::json;
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::limits::{names, MAX_METADATA_DEPTH};

use super::params::{object, string_member};
use super::Session;
use crate::channels;
use crate::conn::Identity;
use crate::reply;
use crate::requests;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawServiceParams<'a> {
    #[serde(borrow, default)]
    service_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
pub(super) struct RawChannelParams<'a> {
    #[serde(borrow, default)]
    pub(super) channel: Option<&'a RawValue>,
    /// `subscribe` only: `true` lists the callback services this connection
    /// may use only through the callback rule (hub protocol section 13).
    #[serde(borrow, default)]
    pub(super) callbacks: Option<&'a RawValue>,
}

/// The subscribe params' `callbacks`: a boolean, absent (or `null`) meaning
/// `false`; anything else is `-32602` naming it.
fn callbacks_member(raw: Option<&RawValue>) -> Result<bool, ErrorObject> {
    match raw.map(RawValue::get) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(reply::invalid_params(
            "callbacks",
            "callbacks must be true or false",
        )),
    }
}

impl Session {
    pub(super) fn register(
        &self,
        identity: &Identity,
        params: Option<&RawValue>,
    ) -> Result<String, ErrorObject> {
        let params: RawServiceParams<'_> = object(params)?;
        let metadata = metadata_member(params.metadata, self.hub.limits.max_metadata_bytes)?;
        let service_id = self.hub.registry.register(
            &self.conn,
            identity,
            metadata,
            self.hub.limits.max_services_per_client,
        )?;
        tracing::debug!(client = %identity.client_id, service = %service_id, "registered a service");
        Ok(serde_json::to_string(&RegisterServiceResult {
            service_id: service_id.into(),
        })
        .expect("serializes"))
    }

    pub(super) fn unregister(&self, params: Option<&RawValue>) -> Result<String, ErrorObject> {
        let params: RawServiceParams<'_> = object(params)?;
        let service_id = string_member(params.service_id, "serviceId")?;
        let route = self.hub.registry.unregister(&self.conn, &service_id)?;
        requests::service_unregistered(&self.hub, &route);
        Ok("{}".into())
    }

    pub(super) fn update(
        &self,
        identity: &Identity,
        params: Option<&RawValue>,
    ) -> Result<String, ErrorObject> {
        let params: RawServiceParams<'_> = object(params)?;
        let service_id = string_member(params.service_id, "serviceId")?;
        let metadata = metadata_member(params.metadata, self.hub.limits.max_metadata_bytes)?;
        self.hub
            .registry
            .update(&self.conn, identity, &service_id, metadata)?;
        Ok("{}".into())
    }

    pub(super) fn subscribe(&self, id: &RawValue, params: Option<&RawValue>) {
        let channel = object::<RawChannelParams<'_>>(params).and_then(|p| {
            Ok((
                string_member(p.channel, "channel")?,
                callbacks_member(p.callbacks)?,
            ))
        });
        match channel {
            Ok((channel, _)) if channel == ROOT_CHANNEL => {
                let mut result = String::from("{\"snapshot\":");
                channels::push_root_snapshot(&mut result, self.hub.registry.server_seq());
                result.push('}');
                self.reply_result(id, &result);
            }
            Ok((channel, callbacks)) if channel == CATALOG_CHANNEL => {
                self.hub
                    .registry
                    .subscribe(&self.conn, callbacks, |snapshot, _| {
                        let mut result = String::with_capacity(snapshot.len() + 16);
                        result.push_str("{\"snapshot\":");
                        result.push_str(snapshot);
                        result.push('}');
                        self.reply_result(id, &result);
                    });
            }
            Ok((channel, _)) => self.reply_error(
                Some(id),
                &reply::not_found(format!("unknown channel {channel:?}")),
            ),
            Err(error) => self.reply_error(Some(id), &error),
        }
    }
}

fn metadata_member(raw: Option<&RawValue>, max: u64) -> Result<&RawValue, ErrorObject> {
    let metadata = raw
        .filter(|m| m.get().starts_with('{'))
        .ok_or_else(|| reply::invalid_params("metadata", "metadata must be a JSON object"))?;
    let size = metadata.get().len() as u64;
    if size > max {
        return Err(reply::limit(
            names::MAX_METADATA_BYTES,
            max,
            format!("metadata is {size} bytes; at most {max} are allowed"),
        ));
    }
    // Metadata is forwarded up to seven levels down (in `initialize`'s
    // snapshot): deeper than this, a receiver's serde_json could not read it.
    // (A second walk of at most maxMetadataBytes, on a cold path.)
    match json::depth(metadata.get()) {
        Ok(depth) if depth <= MAX_METADATA_DEPTH => Ok(metadata),
        Ok(depth) => Err(reply::invalid_params(
            "metadata",
            format!(
                "metadata nests {depth} levels deep; at most {MAX_METADATA_DEPTH} are allowed, \
                 so that every message carrying it stays readable (serde_json reads 127)"
            ),
        )),
        Err(error) => Err(reply::invalid_params(
            "metadata",
            format!("metadata is not JSON: {error}"),
        )),
    }
}
