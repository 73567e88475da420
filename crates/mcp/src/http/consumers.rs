//! The gateways behind `/mcp`: one per principal and profile, shared by
//! that principal's sessions with that profile (each session has its own
//! sink for what providers send back during its calls, as on stdio).
//!
//! A gateway is a client of the hub with its principal's token, so the
//! hub holds its sessions to that principal's grants. One made before the
//! last config reload is not reused (its profile or token may be stale);
//! one without sessions for [`CONSUMER_IDLE`] is closed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use switchboard_client::{Connector, Endpoint};
use switchboard_hub::endpoint::EndpointDoor;
use switchboard_tools::consumer::Profile;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::gateway::{Gateway, GatewayOptions};

/// How long a gateway without sessions is kept for the next one.
pub const CONSUMER_IDLE: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConsumerKey {
    pub principal: String,
    pub profile: Option<String>,
    /// The hub's reload count when it was made.
    pub reloads: u64,
}

struct Entry {
    gateway: Arc<OnceCell<Arc<Gateway>>>,
    sessions: usize,
    idle_since: Instant,
}

#[derive(Default)]
pub struct Consumers {
    entries: Mutex<HashMap<ConsumerKey, Entry>>,
}

impl Consumers {
    /// The gateway for `key`, started (with `token`, connected to the hub
    /// in-process through `door`) if there is none; counts one more
    /// session on it.
    pub async fn acquire(
        &self,
        key: &ConsumerKey,
        door: &EndpointDoor,
        token: &str,
        profile: Option<Profile>,
    ) -> Arc<Gateway> {
        let cell = {
            let mut entries = self.entries.lock();
            let entry = entries.entry(key.clone()).or_insert_with(|| Entry {
                gateway: Arc::new(OnceCell::new()),
                sessions: 0,
                idle_since: Instant::now(),
            });
            entry.sessions += 1;
            entry.gateway.clone()
        };
        cell.get_or_init(|| async {
            tracing::info!(principal = key.principal, profile = ?key.profile, "starting an MCP gateway for HTTP sessions");
            let door = door.clone();
            Gateway::start(GatewayOptions {
                endpoint: Endpoint::InProcess {
                    connect: Connector::new(move || Ok(door.connect()?)),
                    token: Some(token.to_owned()),
                },
                profile,
            })
            .await
        })
        .await
        .clone()
    }

    /// One session of `key` ended.
    pub fn release(&self, key: &ConsumerKey) {
        let mut entries = self.entries.lock();
        if let Some(entry) = entries.get_mut(key) {
            entry.sessions = entry.sessions.saturating_sub(1);
            if entry.sessions == 0 {
                entry.idle_since = Instant::now();
            }
        }
    }

    /// Closes the gateways idle for [`CONSUMER_IDLE`], or made before a
    /// reload and idle (`reloads`: the hub's count now); every one with
    /// `all`.
    pub fn sweep(&self, reloads: u64, all: bool) {
        let mut closed = Vec::new();
        self.entries.lock().retain(|key, entry| {
            let idle = entry.sessions == 0
                && (key.reloads != reloads || entry.idle_since.elapsed() >= CONSUMER_IDLE);
            let keep = !(all || idle);
            if !keep {
                closed.extend(entry.gateway.get().cloned());
            }
            keep
        });
        for gateway in closed {
            gateway.close();
        }
    }
}
