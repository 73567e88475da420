//! Progress from a provider back to the consumer that called it.
//!
//! The hub routes requests and notifications only to services, so a consumer
//! that wants progress registers a *progress sink*: a service with metadata
//! `{"protocol":"tool-progress","version":1}`. A provider finds the sink of
//! the client that sent a call (same `clientId` in the catalog) and sends it
//! `clientService/notify` `notifications/progress` with MCP's parameters
//! `{progressToken, progress, total?, message?}`, the token being the
//! call's `progress_token` untouched. No sink, or no token: nothing is sent.
//!
//! As in MCP, each report of a call must exceed the last: one that does not
//! is dropped here. That also repairs a relay that reorders: `provide-mcp`
//! hands on an MCP server's progress, and rmcp runs each incoming
//! notification on its own task, so step 2 can reach it after step 3.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use switchboard_client::{Catalog, CatalogEvent, Client, ServiceInfo};

/// The `protocol` metadata value of a progress sink service.
pub const PROGRESS_SINK_PROTOCOL: &str = "tool-progress";
pub const PROGRESS_SINK_VERSION: u64 = 1;
/// The notification method a sink receives.
pub const PROGRESS_METHOD: &str = "notifications/progress";

/// The params of `notifications/progress` (MCP's shape).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressParams {
    pub progress_token: Box<RawValue>,
    pub progress: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The metadata a consumer registers its progress sink with.
pub fn progress_sink_metadata() -> serde_json::Value {
    serde_json::json!({"protocol": PROGRESS_SINK_PROTOCOL, "version": PROGRESS_SINK_VERSION})
}

/// Reports progress of one call; does nothing when the caller asked for no
/// progress or has no sink.
#[derive(Clone, Default)]
pub struct Progress {
    target: Option<Arc<ProgressTarget>>,
}

struct ProgressTarget {
    client: Client,
    sink_service_id: String,
    token: Box<RawValue>,
    /// The last progress sent. Held across the send, so that reports from
    /// concurrent tasks leave in increasing order too; a send waits only for
    /// the socket.
    last_sent: tokio::sync::Mutex<Option<f64>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.target {
            Some(target) => f
                .debug_struct("Progress")
                .field("sink", &target.sink_service_id)
                .field("token", &target.token.get())
                .finish(),
            None => f.write_str("Progress(off)"),
        }
    }
}

impl Progress {
    /// A reporter that reports nothing.
    pub fn none() -> Self {
        Progress::default()
    }

    pub(crate) fn to_sink(client: Client, sink_service_id: String, token: Box<RawValue>) -> Self {
        Progress {
            target: Some(Arc::new(ProgressTarget {
                client,
                sink_service_id,
                token,
                last_sent: tokio::sync::Mutex::new(None),
            })),
        }
    }

    /// Whether reports reach anyone.
    pub fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    /// The caller's progress token, untouched.
    pub fn token(&self) -> Option<&RawValue> {
        self.target.as_ref().map(|t| &*t.token)
    }

    /// Sends one progress notification, unless `progress` does not exceed
    /// the last one sent (then it is dropped, see the module docs). Never
    /// waits for the caller (a notification is never acknowledged), only for
    /// the socket.
    pub async fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(target) = &self.target else {
            return;
        };
        let mut last_sent = target.last_sent.lock().await;
        if last_sent.is_some_and(|last| progress <= last) || progress.is_nan() {
            tracing::debug!(progress, last = ?*last_sent, "progress dropped: not above the last");
            return;
        }
        *last_sent = Some(progress);
        let params = ProgressParams {
            progress_token: target.token.clone(),
            progress,
            total,
            message,
        };
        if let Err(error) = target
            .client
            .notify(&target.sink_service_id, PROGRESS_METHOD, &params)
            .await
        {
            tracing::debug!(%error, "cannot send progress");
        }
    }
}

/// Which client owns which progress sink, kept current from the catalog by
/// one task (the only writer).
#[derive(Default)]
pub(crate) struct SinkDirectory {
    by_client: RwLock<HashMap<String, String>>,
}

impl SinkDirectory {
    pub(crate) fn sink_of(&self, client_id: &str) -> Option<String> {
        self.by_client.read().get(client_id).cloned()
    }

    /// Fills the directory from `catalog` and keeps it current until the
    /// directory is dropped or the client goes away.
    pub(crate) fn follow(catalog: Catalog) -> Arc<SinkDirectory> {
        let directory = Arc::new(SinkDirectory::default());
        directory.reset(catalog.initial());
        tokio::spawn(follow_catalog(catalog, Arc::downgrade(&directory)));
        directory
    }

    fn reset(&self, services: &[ServiceInfo]) {
        let mut map = self.by_client.write();
        map.clear();
        for service in services.iter().filter(|s| is_sink(s)) {
            map.insert(service.client_id.clone(), service.service_id.clone());
        }
    }
}

fn is_sink(service: &ServiceInfo) -> bool {
    service.metadata.get("protocol").and_then(|p| p.as_str()) == Some(PROGRESS_SINK_PROTOCOL)
}

async fn follow_catalog(mut catalog: Catalog, directory: Weak<SinkDirectory>) {
    while let Some(event) = catalog.next_event().await {
        let Some(directory) = directory.upgrade() else {
            return;
        };
        match event {
            CatalogEvent::Added(service) | CatalogEvent::Updated(service) => {
                let mut map = directory.by_client.write();
                if is_sink(&service) {
                    map.insert(service.client_id, service.service_id);
                } else {
                    map.retain(|_, id| *id != service.service_id);
                }
            }
            CatalogEvent::Removed { service_id, .. } => {
                directory
                    .by_client
                    .write()
                    .retain(|_, id| *id != service_id);
            }
            CatalogEvent::Resynced => directory.reset(&catalog.services()),
        }
    }
}
