//! One hub's catalog, watched: a connection subscribed to
//! `ahp-client-services://` whose snapshot and actions are checked one by
//! one (`catalog.rs`) and published to the soak ([`Catalogs`]), so that it
//! can tell when every hub lists exactly the services of the clients that
//! are connected. Subscribes again after its hub comes back.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::tally::inc;
use super::Shared;
use crate::soak::catalog::CatalogView;
use crate::wire;

/// Watches hub `hub` until the run ends.
pub async fn run(hub: usize, shared: Arc<Shared>) {
    while !shared.finished() {
        watch(hub, &shared).await;
        shared.catalogs.set(hub, None);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One subscription, while the hub serves it.
async fn watch(hub: usize, shared: &Shared) {
    let slot = &shared.hubs[hub];
    if !slot.up.load(Ordering::Acquire) {
        return;
    }
    let Some(info) = crate::read_hub_json(&slot.dir) else {
        return;
    };
    let (Some(socket), Some(token)) = (info["socket"].as_str(), info["token"].as_str()) else {
        return;
    };
    let name = format!("fabric-watcher-{}", slot.name);
    let Ok((mut reader, mut writer, _)) =
        wire::open(std::path::Path::new(socket), token, &name).await
    else {
        return;
    };
    let params = json!({"channel": "ahp-client-services://"});
    if writer.request(1, "subscribe", params).await.is_err() {
        return;
    }
    let Ok(Ok(answer)) =
        tokio::time::timeout(Duration::from_secs(10), reader.response(&json!(1))).await
    else {
        return;
    };
    let mut view = match CatalogView::from_snapshot(&answer["result"]["snapshot"]) {
        Ok(view) => view,
        Err(error) => {
            inc(&shared.counts.catalog_inconsistencies);
            eprintln!("[fabric] hub {}: {error}", slot.name);
            return;
        }
    };
    shared.catalogs.set(hub, Some(view.services().clone()));
    loop {
        let message = tokio::select! {
            message = reader.recv() => message,
            () = tokio::time::sleep(Duration::from_millis(200)) => {
                if shared.finished() {
                    writer.close().await;
                    return;
                }
                continue;
            }
        };
        let Ok(Some(message)) = message else {
            return; // the hub went away
        };
        if message["method"] != "action" {
            continue;
        }
        inc(&shared.counts.catalog_actions);
        if let Err(error) = view.apply(&message["params"]) {
            inc(&shared.counts.catalog_inconsistencies);
            eprintln!("[fabric] hub {}: {error}", slot.name);
        }
        shared.catalogs.set(hub, Some(view.services().clone()));
    }
}
