//! Reading request params without building a value of them: members as
//! raw JSON, decoded one by one, each error naming its field.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_protocol::jsonrpc::{json_str, ErrorObject};

use crate::reply;

/// Decodes params that must be an object (absent counts as `{}`).
pub(super) fn object<'a, T: Deserialize<'a> + Default>(
    params: Option<&'a RawValue>,
) -> Result<T, ErrorObject> {
    match params {
        None => Ok(T::default()),
        Some(raw) if raw.get().starts_with('{') => serde_json::from_str(raw.get())
            .map_err(|error| reply::invalid_params("params", format!("invalid params: {error}"))),
        Some(_) => Err(reply::invalid_params(
            "params",
            "params must be a JSON object",
        )),
    }
}

/// A member that must be a string with Unicode text; the error names it.
pub(super) fn string_member<'a>(
    raw: Option<&'a RawValue>,
    field: &str,
) -> Result<Cow<'a, str>, ErrorObject> {
    let raw =
        raw.ok_or_else(|| reply::invalid_params(field, format!("{field} must be a string")))?;
    json_str(raw).map_err(|error| reply::invalid_params(field, format!("{field} {error}")))
}

pub(super) fn string_list<'a>(
    raw: &'a RawValue,
    field: &str,
) -> Result<Vec<Cow<'a, str>>, ErrorObject> {
    let items: Vec<&'a RawValue> = serde_json::from_str(raw.get())
        .map_err(|_| reply::invalid_params(field, format!("{field} must be a list of strings")))?;
    items
        .into_iter()
        .map(|item| {
            json_str(item).map_err(|error| {
                let what = format!("{field} must be a list of strings: an item {error}");
                reply::invalid_params(field, what)
            })
        })
        .collect()
}
