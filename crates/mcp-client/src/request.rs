//! Requests to the server other than `tools/call`, each bounded: any MCP
//! request by name ([`Connection::request`]), a whole paginated list
//! ([`Connection::list_all`]), and `tools/list` on it. Params go out and
//! results come back as MCP's JSON, untouched (through the connection's
//! wire tap; a connection without one, over HTTP, re-encodes rmcp's model).

use std::future::Future;
use std::time::Duration;

use rmcp::model::{ClientRequest, CustomRequest, RequestMetaObject};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use switchboard_protocol::ErrorObject;

use crate::call::{error_object, raw_of, CancelOnDrop};
use crate::connection::Connection;
use crate::tap::Awaited;

/// At most this many pages are read for one list.
const MAX_PAGES: usize = 1000;

/// Why a request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The server answered with this JSON-RPC error.
    #[error("{method} failed: {}", .error.message)]
    Answered { method: String, error: ErrorObject },
    /// A closed connection, an unreadable answer.
    #[error("{method} failed: {reason}")]
    Failed { method: String, reason: String },
    #[error("{method} got no answer within {bound:?}")]
    TimedOut { method: String, bound: Duration },
}

impl Connection {
    /// `tools/list`, every page, each tool as the server listed it.
    pub async fn list_tools(&self, bound: Duration) -> Result<Vec<Value>, RequestError> {
        self.list_all("tools/list", "tools", bound).await
    }

    /// Sends `method` with `params` (an object; its `_meta` is kept, but
    /// `_meta.progressToken` is this connection's own) and returns the
    /// server's result as it sent it. Dropping the future before the answer
    /// tells the server `notifications/cancelled`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        bound: Duration,
    ) -> Result<Box<RawValue>, RequestError> {
        let mut params = match params {
            Value::Object(params) => params,
            Value::Null => Map::new(),
            other => {
                return Err(RequestError::Failed {
                    method: method.to_owned(),
                    reason: format!("its params must be an object, not {other}"),
                })
            }
        };
        let mut options = PeerRequestOptions::no_options();
        if let Some(Value::Object(meta)) = params.remove("_meta") {
            options.meta = Some(RequestMetaObject::from(meta));
        }
        let params = (!params.is_empty()).then_some(Value::Object(params));
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, params));
        let peer = &self.inner.peer;
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|error| RequestError::Failed {
                method: method.to_owned(),
                reason: error.to_string(),
            })?;
        let awaited = Awaited {
            tap: Some(self.inner.tap.clone()),
            id: handle.id.clone(),
        };
        let mut cancel = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
            reason: "no longer wanted by the caller",
        };
        let typed = bounded(method, bound, handle.await_response()).await;
        if !matches!(typed, Err(RequestError::TimedOut { .. })) {
            cancel.id = None;
        }
        let typed = typed?;
        match awaited.take() {
            Some(raw) => Ok(raw),
            None => raw_of(&typed).map_err(|reason| RequestError::Failed {
                method: method.to_owned(),
                reason,
            }),
        }
    }

    /// Every page of a paginated list (`resources/list`, `prompts/list`,
    /// ...): the items under `key`, in the server's order.
    pub async fn list_all(
        &self,
        method: &str,
        key: &str,
        bound: Duration,
    ) -> Result<Vec<Value>, RequestError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut params = Map::new();
            if let Some(cursor) = cursor.take() {
                params.insert("cursor".into(), Value::String(cursor));
            }
            let page = self.request(method, Value::Object(params), bound).await?;
            let mut page: Map<String, Value> =
                serde_json::from_str(page.get()).map_err(|error| RequestError::Failed {
                    method: method.to_owned(),
                    reason: format!("its answer is not an object: {error}"),
                })?;
            match page.remove(key) {
                Some(Value::Array(page_items)) => items.extend(page_items),
                None | Some(Value::Null) => {}
                Some(_) => {
                    return Err(RequestError::Failed {
                        method: method.to_owned(),
                        reason: format!("its {key:?} is not an array"),
                    })
                }
            }
            match page.remove("nextCursor") {
                Some(Value::String(next)) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(items),
            }
        }
        Err(RequestError::Failed {
            method: method.to_owned(),
            reason: format!("it has more than {MAX_PAGES} pages"),
        })
    }

    /// Tells the server `notifications/roots/list_changed`.
    pub async fn roots_list_changed(&self) -> Result<(), RequestError> {
        self.inner
            .peer
            .notify_roots_list_changed()
            .await
            .map_err(|error| RequestError::Failed {
                method: "notifications/roots/list_changed".into(),
                reason: error.to_string(),
            })
    }
}

/// `request`, given up after `bound`.
async fn bounded<T>(
    method: &str,
    bound: Duration,
    request: impl Future<Output = Result<T, ServiceError>>,
) -> Result<T, RequestError> {
    match tokio::time::timeout(bound, request).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(ServiceError::McpError(error))) => Err(RequestError::Answered {
            method: method.to_owned(),
            error: error_object(error),
        }),
        Ok(Err(error)) => Err(RequestError::Failed {
            method: method.to_owned(),
            reason: error.to_string(),
        }),
        Err(_) => Err(RequestError::TimedOut {
            method: method.to_owned(),
            bound,
        }),
    }
}
