//! The dashboard: what runs in the hub, live, for people. A page under
//! `/ui/` on the HTTP port and `switchboard top` in a terminal read one data
//! model, built here: a *snapshot* (the hub, the config in force, every
//! service, the last tick, 15 minutes of history) followed by *deltas*
//! (catalog actions as they happen, a tick every second).
//!
//! - `state.rs`: the dashboard's part of `HubState`;
//! - `auth.rs`: one-time login codes and browser sessions;
//! - `history.rs`: totals, rates, percentiles, the 15-minute history;
//! - `sampler.rs`: the 1 s task: the connection table, rates, latency
//!   percentiles and the 15-minute history;
//! - `stream.rs`: the page's Server-Sent Events stream (snapshot, then
//!   deltas), bounded like any consumer;
//! - `pages.rs`: the routes under `/ui/`, the embedded assets, the headers.
//!
//! **Invariant:** the dashboard only reads the hub, and nothing routing does
//! ever waits on it. Its one hook into the hot side is the catalog's list of
//! watchers (`registry.rs`), fed under the catalog lock like any subscriber,
//! into a bounded queue: a page that falls behind is dropped and resyncs
//! with a new snapshot. Ticks go through a `watch` channel (latest value
//! only), so a slow page never makes the hub hold more.

mod auth;
mod history;
mod pages;
mod sampler;
pub mod state;
mod stream;

use std::sync::Arc;

use crate::conn::Identity;
use crate::reply;
use crate::state::HubState;
use axum::Router;
use serde_json::json;
use serde_json::value::RawValue;
use switchboard_protocol::hub::{DashboardLoginResult, PROTOCOL_VERSION};
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::Principal;

pub use sampler::run as run_sampler;

/// The routes under `/ui/` (none when the dashboard is off: 404 there).
pub fn routes(hub: &HubState) -> Option<Router<Arc<HubState>>> {
    hub.dashboard.enabled().then(pages::routes)
}

/// The snapshot both views start from:
/// `{hub, config, serverSeq, services: [Service…], tick, history}`.
/// `services` is the catalog as a JSON array at `server_seq`.
fn snapshot(hub: &HubState, services: &str, server_seq: u64) -> String {
    let tick = hub.dashboard.ticks.borrow().clone();
    let history = hub.dashboard.history.lock().to_json();
    let services: &RawValue = serde_json::from_str(services).expect("the catalog is JSON");
    let tick: &RawValue = serde_json::from_str(&tick).expect("a tick is JSON");
    let dashboard = &hub.dashboard;
    let snapshot = json!({
        "hub": {
            "name": "switchboard",
            "version": env!("CARGO_PKG_VERSION"),
            "protocolVersion": PROTOCOL_VERSION,
            "pid": std::process::id(),
            "startedAt": sampler::unix_ms(dashboard.started_at),
            "uptimeSeconds": dashboard.uptime().as_secs(),
            "rssBytes": sampler::rss_bytes(),
        },
        "config": {
            "limits": hub.limits,
            "policy": hub.registry.policy().describe(),
            "logPayloads": hub.log_payloads(),
            "configFile": hub.config_path,
            "reloads": hub.reloads(),
            "dashboard": {
                "enabled": dashboard.enabled(),
                "loginCodeSeconds": dashboard.config.login_code.as_secs(),
            },
        },
        "serverSeq": server_seq,
        "services": services,
        "tick": tick,
        "history": history,
    });
    snapshot.to_string()
}

fn direct_only(identity: &Identity, what: &str) -> Result<(), ErrorObject> {
    if identity.principal.principal == Principal::Direct {
        Ok(())
    } else {
        Err(reply::permission_denied(format!(
            "only the hub's own (direct) principal may {what}"
        )))
    }
}

/// `hub/dashboardLogin`: a one-time login code for the page.
pub fn login_code(hub: &HubState, identity: &Identity) -> Result<String, ErrorObject> {
    direct_only(identity, "ask for a dashboard login code")?;
    if !hub.dashboard.enabled() {
        return Err(reply::invalid_request(
            "dashboardDisabled",
            "the dashboard is turned off in the config ([dashboard] enabled = false)",
        ));
    }
    let code = hub.dashboard.logins.new_code();
    let result = DashboardLoginResult {
        path: format!("/ui/login?code={code}"),
        code,
        expires_in_seconds: hub.dashboard.logins.code_lifetime().as_secs(),
    };
    Ok(serde_json::to_string(&result).expect("serializes"))
}

/// `hub/dashboardSnapshot`: the page's snapshot, for `switchboard top`.
pub fn snapshot_for(hub: &HubState, identity: &Identity) -> Result<String, ErrorObject> {
    direct_only(identity, "read the dashboard snapshot")?;
    let (services, seq) = hub.registry.services_json();
    Ok(snapshot(hub, &services, seq))
}
