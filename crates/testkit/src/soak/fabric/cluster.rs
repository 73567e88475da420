//! The fabric's processes: one real nats-server (`nats.rs`) and hubs `a`,
//! `b`, `c` as real `switchboard serve --nats URL --hub-name NAME`
//! processes (`process.rs`), each on its own directory with a config that
//! sets `[federation] serviceTtlMs` and lets every principal do everything.
//!
//! Starting and killing wait on the calling thread (the hub's `hub.json`,
//! the server's port); the soak calls them from `spawn_blocking`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use crate::nats::NatsServer;
use crate::process::{HubProcess, HubProcessBuilder};

/// The hubs' names; `a` is never killed.
pub const NAMES: [&str; 3] = ["a", "b", "c"];

/// Every principal may do everything: the soak is not about grants.
const OPEN: &str =
    "[[grants]]\nfrom = \"*\"\nto = \"*\"\nallow = [\"discover\", \"request\", \"notify\"]\n";

/// What the clients may read of a hub without holding the cluster.
#[derive(Debug)]
pub struct HubSlot {
    pub name: &'static str,
    pub dir: PathBuf,
    /// Up: started and not killed since.
    pub up: AtomicBool,
    /// Its process while up, else 0.
    pub pid: AtomicU32,
}

pub struct Cluster {
    pub nats: NatsServer,
    hubs: Vec<Option<HubProcess>>,
    builders: Vec<HubProcessBuilder>,
}

impl Cluster {
    /// The nats-server, then the hubs in order (the first makes the
    /// catalog's bucket, with `ttl`); each hub's directory under `work`.
    pub fn start(work: &Path, ttl: Duration, slots: &[HubSlot]) -> Cluster {
        let nats = NatsServer::start();
        let builders: Vec<HubProcessBuilder> = NAMES
            .iter()
            .map(|name| {
                let config = work.join(format!("{name}.toml"));
                let text = format!("[federation]\nserviceTtlMs = {}\n{OPEN}", ttl.as_millis());
                std::fs::write(&config, text).expect("write a hub's config");
                HubProcess::builder()
                    .dir(work.join(name))
                    .config(&config)
                    .arg("--nats")
                    .arg(nats.url())
                    .arg("--hub-name")
                    .arg(*name)
            })
            .collect();
        let mut cluster = Cluster {
            nats,
            hubs: NAMES.iter().map(|_| None).collect(),
            builders,
        };
        for (index, slot) in slots.iter().enumerate().take(NAMES.len()) {
            cluster.start_hub(index, slot);
        }
        cluster
    }

    /// Starts hub `index` (again), on its directory.
    pub fn start_hub(&mut self, index: usize, slot: &HubSlot) {
        let hub = self.builders[index].clone().start();
        slot.pid.store(hub.pid(), Ordering::Relaxed);
        slot.up.store(true, Ordering::Release);
        self.hubs[index] = Some(hub);
    }

    /// SIGKILL to hub `index`: it cannot leave the fabric or clean up.
    pub fn kill_hub(&mut self, index: usize, slot: &HubSlot) {
        slot.up.store(false, Ordering::Release);
        slot.pid.store(0, Ordering::Relaxed);
        if let Some(mut hub) = self.hubs[index].take() {
            hub.kill();
        }
    }

    /// What hub `index` logged, while it runs.
    pub fn log(&self, index: usize) -> String {
        self.hubs[index]
            .as_ref()
            .map(HubProcess::log)
            .unwrap_or_default()
    }
}

/// The slots of hubs that will live in `work`.
pub fn slots(work: &Path) -> Vec<HubSlot> {
    NAMES
        .iter()
        .map(|name| HubSlot {
            name,
            dir: work.join(name),
            up: AtomicBool::new(false),
            pid: AtomicU32::new(0),
        })
        .collect()
}
