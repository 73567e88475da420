//! The workloads, each run against any system by the same code.

pub mod callgrind;
pub mod gateway;
pub mod notify;
pub mod request;
pub mod scale;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use switchboard_testkit::procfs;

use crate::systems::floor::FloorProcess;
use crate::systems::hub::HubProcess;
use crate::systems::nats::NatsProcess;
use crate::systems::System;

/// The three servers, started once and shared by the throughput and latency
/// workloads.
pub struct Servers {
    pub hub: HubProcess,
    pub nats: NatsProcess,
    pub floor: FloorProcess,
    /// Two hubs federated over `nats` (workload 7), if that workload runs.
    pub federated: Option<Federated>,
}

/// Two hubs of one fabric: owners (receivers, responders) on one, callers
/// (senders) on the other, so every message crosses NATS.
pub struct Federated {
    pub owners: HubProcess,
    pub callers: HubProcess,
}

/// Where a workload's owners and callers connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// Both on the one hub (`Servers::hub`).
    #[default]
    OneHub,
    /// Owners on one hub, callers on another (`Servers::federated`).
    AcrossHubs,
}

impl Servers {
    /// The hub owners connect to, and the hub callers connect to.
    pub fn hubs(&self, placement: Placement) -> anyhow::Result<(&HubProcess, &HubProcess)> {
        match placement {
            Placement::OneHub => Ok((&self.hub, &self.hub)),
            Placement::AcrossHubs => self
                .federated
                .as_ref()
                .map(|f| (&f.owners, &f.callers))
                .ok_or_else(|| anyhow::anyhow!("no federated hubs were started")),
        }
    }

    /// The PID whose CPU time a run of `system` is charged to.
    pub fn pid(&self, system: System) -> u32 {
        match system {
            System::HubUnix | System::HubWs => self.hub.pid(),
            System::Nats => self.nats.pid(),
            System::Floor => self.floor.pid(),
        }
    }
}

/// Deliveries counted by receivers: totals, and when the last one came.
pub struct Tally {
    base: Instant,
    count: AtomicU64,
    last_ns: AtomicU64,
    problem: Mutex<Option<String>>,
}

impl Tally {
    pub fn new(base: Instant) -> Self {
        Tally {
            base,
            count: AtomicU64::new(0),
            last_ns: AtomicU64::new(0),
            problem: Mutex::new(None),
        }
    }

    /// Records `n` deliveries now.
    pub fn add(&self, n: u64) {
        if n == 0 {
            return;
        }
        self.count.fetch_add(n, Ordering::Relaxed);
        let now = self.base.elapsed().as_nanos() as u64;
        self.last_ns.fetch_max(now, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// When the last delivery was counted.
    pub fn last(&self) -> Instant {
        self.base + Duration::from_nanos(self.last_ns.load(Ordering::Relaxed))
    }

    /// Notes something that makes the run invalid (the first one wins).
    pub fn problem(&self, what: String) {
        self.problem.lock().get_or_insert(what);
    }

    pub fn take_problem(&self) -> Option<String> {
        self.problem.lock().take()
    }
}

/// CPU seconds of a server and of the harness over a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSpent {
    pub server: f64,
    pub harness: f64,
}

/// Reads both CPU clocks now.
pub fn cpu_now(server_pid: u32) -> anyhow::Result<CpuSpent> {
    Ok(CpuSpent {
        server: procfs::cpu_seconds(server_pid)?,
        harness: procfs::own_cpu_seconds()?,
    })
}

impl std::ops::Sub for CpuSpent {
    type Output = CpuSpent;
    fn sub(self, before: CpuSpent) -> CpuSpent {
        CpuSpent {
            server: self.server - before.server,
            harness: self.harness - before.harness,
        }
    }
}
