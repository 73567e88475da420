//! Re-reading the config (`SIGHUP`, `hub/reload`): new principals, grants
//! and origins apply at once; limits and `[dashboard]` wait for a restart.

use std::sync::Arc;

use switchboard_protocol::hub::ReloadResult;

use crate::config::{Config, ConfigError};
use crate::state::HubState;

/// Re-reads the config file: new principals, grants and origins apply at
/// once; subscribers see visibility changes as catalog actions; connections
/// whose token no longer maps to their principal are closed. A config that
/// fails to load changes nothing.
pub fn reload(hub: &HubState) -> Result<ReloadResult, ConfigError> {
    let Some(path) = &hub.config_path else {
        return Err(ConfigError::NoConfigFile);
    };
    let config = Config::load(path)?;
    if config.limits != hub.limits {
        tracing::warn!("the config's [limits] changed; they apply when the hub restarts");
    }
    if config.dashboard != hub.dashboard_config {
        tracing::warn!("the config's [dashboard] changed; it applies when the hub restarts");
    }
    let policy = Arc::new(config.policy(hub.direct_token()));
    // Swapped under the catalog lock, with the visibility changes it causes
    // published there (see `registry.rs`).
    hub.registry.replace_policy(policy.clone());
    hub.set_log_payloads(config.log_payloads);
    // The supervisor starts, stops and restarts modules on its own time;
    // the answer says what it was asked to do.
    let modules = hub
        .supervisor
        .get()
        .map(|supervisor| supervisor.reload(config.modules))
        .unwrap_or_default();

    let conns = hub.admission.open().to_vec();
    let mut closed = 0;
    for conn in conns {
        let Some(identity) = conn.identity() else {
            continue;
        };
        let still_valid = match &identity.token_digest {
            Some(digest) => policy
                .principal_for_digest(digest)
                .or_else(|| {
                    let supervisor = hub.supervisor.get()?;
                    supervisor.principal_for_digest(digest)
                })
                .is_some_and(|p| p.principal == identity.principal.principal),
            None => policy.allows_unverified(),
        };
        if !still_valid {
            tracing::info!(
                client = conn.label(),
                "closing a connection whose principal was removed"
            );
            // Its reader stops and its task tears it down (`teardown.rs`).
            conn.out.drain_and_close();
            closed += 1;
        }
    }
    hub.count_reload();
    tracing::info!(
        principals = policy.principal_count(),
        grants = policy.grant_count(),
        closed,
        modules_added = ?modules.added,
        modules_removed = ?modules.removed,
        modules_restarted = ?modules.restarted,
        "config reloaded"
    );
    Ok(ReloadResult {
        principals: policy.principal_count(),
        grants: policy.grant_count(),
        closed,
        modules,
    })
}
