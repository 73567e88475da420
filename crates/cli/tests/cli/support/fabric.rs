//! A fabric for the federation tests: one real `nats-server` and hubs as
//! real `switchboard serve --nats … --hub-name …` processes, each with its
//! own directory and config (a short `serviceTtlMs`, so that liveness tests
//! take seconds).

use std::path::PathBuf;
use std::time::Duration;

use switchboard_client::{Catalog, CatalogEvent, Client, ServiceInfo};
use switchboard_testkit::{within, HubProcess, NatsServer};

/// `serviceTtlMs` of every test fabric.
pub const TTL: Duration = Duration::from_millis(2000);

/// Every principal of every hub may do everything: the tests that are not
/// about authorization.
pub const OPEN: &str =
    "[[grants]]\nfrom = \"*\"\nto = \"*\"\nallow = [\"discover\", \"request\", \"notify\"]\n";

pub struct Fabric {
    pub nats: NatsServer,
    /// Each hub connects as its own NATS user (`NAME`, password
    /// `NAME-secret`) instead of anonymously.
    pub users: bool,
    root: tempfile::TempDir,
}

impl Fabric {
    pub fn new() -> Fabric {
        Fabric {
            nats: NatsServer::start(),
            users: false,
            root: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// Starts hub `name` with `config` (TOML: principals and grants) after
    /// `[federation] serviceTtlMs`.
    pub fn hub(&self, name: &str, config: &str) -> HubProcess {
        self.hub_builder(name, config).start()
    }

    /// The builder of hub `name`, for a test that starts it itself.
    pub fn hub_builder(&self, name: &str, config: &str) -> switchboard_testkit::HubProcessBuilder {
        self.hub_builder_with_ttl(name, config, TTL)
    }

    /// [`Fabric::hub_builder`] with another `serviceTtlMs` (the first hub
    /// to start makes the bucket, whose TTL every hub then follows).
    pub fn hub_builder_with_ttl(
        &self,
        name: &str,
        config: &str,
        ttl: Duration,
    ) -> switchboard_testkit::HubProcessBuilder {
        let config = self.config_with_ttl(name, config, ttl);
        let url = if self.users {
            self.nats.url_as(name, &format!("{name}-secret"))
        } else {
            self.nats.url()
        };
        HubProcess::builder()
            .dir(self.root.path().join(name))
            .config(&config)
            .arg("--nats")
            .arg(url)
            .arg("--hub-name")
            .arg(name)
    }

    /// Writes hub `name`'s config file.
    pub fn config(&self, name: &str, config: &str) -> PathBuf {
        self.config_with_ttl(name, config, TTL)
    }

    fn config_with_ttl(&self, name: &str, config: &str, ttl: Duration) -> PathBuf {
        let path = self.root.path().join(format!("{name}.toml"));
        let text = format!("[federation]\nserviceTtlMs = {}\n{config}", ttl.as_millis());
        std::fs::write(&path, text).expect("write a config");
        path
    }

    /// A path in the fabric's temporary directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }
}

/// Waits for the next catalog event that is not about another service than
/// `service_id` (`None`: any).
pub async fn next_event(catalog: &mut Catalog, what: &str) -> CatalogEvent {
    within(what, catalog.next_event())
        .await
        .unwrap_or_else(|| panic!("the catalog ended while waiting for {what}"))
}

/// Waits for `service_id`'s `added` (or finds it in the snapshot); returns it.
pub async fn wait_listed(catalog: &mut Catalog, service_id: &str) -> ServiceInfo {
    if let Some(service) = catalog
        .initial()
        .iter()
        .find(|s| s.service_id == service_id)
    {
        return service.clone();
    }
    loop {
        let event = next_event(catalog, &format!("{service_id} in the catalog")).await;
        if let CatalogEvent::Added(service) = event {
            if service.service_id == service_id {
                return service;
            }
        }
    }
}

/// Waits until `catalog` no longer lists `service_id`; returns the reason.
pub async fn wait_removed(catalog: &mut Catalog, service_id: &str) -> String {
    loop {
        if let CatalogEvent::Removed {
            service_id: id,
            reason,
        } = next_event(catalog, &format!("{service_id} removed")).await
        {
            if id == service_id {
                return serde_json::to_value(reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
            }
        }
    }
}

/// An SDK client of `hub` subscribed to its catalog.
pub async fn watcher(hub: &HubProcess, name: &str) -> (Client, Catalog) {
    let client = hub.client(name).await;
    let catalog = client.catalog().await.expect("subscribe");
    (client, catalog)
}
