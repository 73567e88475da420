//! The plan of a benchmark run: which workloads, how long, how many runs,
//! in what order; each workload's module says what it measures (its rows and
//! takes) and [`crate::measure`] runs it.

mod callgrind;
mod federation;
mod gateway;
mod notify;
mod request;
mod scale;
mod targets;

pub use gateway::find_everything;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use crate::measure::progress;
use crate::report::Report;
use crate::systems::floor::FloorProcess;
use crate::systems::hub::{HubLaunch, HubProcess};
use crate::systems::nats::{self, NatsProcess};
use crate::systems::System;
use crate::workloads::Servers;

/// The workloads of the issue, selectable with `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// 1. notifications 1→1 at 200 B, 1 KiB, 16 KiB (and CPU per message).
    Notify,
    /// 2. notifications 16→1 and 1→16.
    Fan,
    /// 3. sequential request/reply latency.
    Latency,
    /// 4. request/reply with 64 in flight.
    Window,
    /// 5. idle connections, catalog snapshot, unrelated services.
    Scale,
    /// 6. instructions per notification under callgrind.
    Callgrind,
    /// 7. across two hubs federated over one nats-server, beside direct NATS.
    Federation,
    /// 8. the MCP gateway: a tools/call through it beside the same call
    ///    over stdio, and the memory of servers shared through it.
    Gateway,
}

impl Workload {
    pub const ALL: [Workload; 8] = [
        Workload::Notify,
        Workload::Fan,
        Workload::Latency,
        Workload::Window,
        Workload::Scale,
        Workload::Callgrind,
        Workload::Federation,
        Workload::Gateway,
    ];
}

pub struct Bins {
    pub hub: PathBuf,
    pub floor: PathBuf,
    pub nats: PathBuf,
    /// The workspace's MCP test server (workload 8).
    pub mcp_test_server: PathBuf,
    /// server-everything's entry point, when installed (workload 8's
    /// memory figure; without it the test server is used).
    pub everything: Option<PathBuf>,
}

pub struct Plan {
    pub quick: bool,
    pub pin: bool,
    pub runs: usize,
    pub bins: Bins,
    pub workloads: Vec<Workload>,
    /// The systems to drive (default: all four).
    pub systems: Vec<System>,
    pub callgrind_dir: PathBuf,
    /// The report's *hand-off* line ([`crate::handoff::describe`]), taken
    /// before the harness pinned itself.
    pub handoff: String,
}

impl Plan {
    fn wants(&self, workload: Workload) -> bool {
        self.workloads.contains(&workload)
    }

    /// Those of `systems` this run drives, in that order.
    fn among(&self, systems: &[System]) -> Vec<System> {
        systems
            .iter()
            .copied()
            .filter(|s| self.systems.contains(s))
            .collect()
    }

    /// The CPU servers are pinned to, with `--pin`.
    fn server_cpu(&self) -> Option<usize> {
        self.pin.then_some(0)
    }

    fn durations(&self) -> Durations {
        if self.quick {
            Durations {
                notify: Duration::from_millis(250),
                sequential: Duration::from_secs(1),
                window: Duration::from_millis(500),
                callgrind_notifications: 2_000,
                callgrind_runs: 1,
            }
        } else {
            Durations {
                notify: Duration::from_secs(2),
                sequential: Duration::from_secs(10),
                window: Duration::from_secs(3),
                callgrind_notifications: 20_000,
                callgrind_runs: self.runs,
            }
        }
    }
}

/// How long each kind of run lasts.
struct Durations {
    notify: Duration,
    sequential: Duration,
    window: Duration,
    callgrind_notifications: u64,
    callgrind_runs: usize,
}

pub async fn run(plan: &Plan) -> anyhow::Result<Report> {
    let mut report = Report {
        title: "Switchboard benchmark: hub vs NATS vs floor".into(),
        machine: crate::report::machine_description(&plan.handoff),
        ..Report::default()
    };
    report.machine.push((
        "nats-server".into(),
        nats::server_version(&plan.bins.nats).unwrap_or_else(|| "unknown".into()),
    ));
    report.machine.push((
        "mode".into(),
        format!(
            "{}{}, {} runs per figure",
            if plan.quick { "--quick" } else { "full" },
            if plan.pin {
                ", --pin (servers on CPU 0, harness on CPU 1)"
            } else {
                ", unpinned"
            },
            plan.runs
        ),
    ));

    let needs_servers = [
        Workload::Notify,
        Workload::Fan,
        Workload::Latency,
        Workload::Window,
        Workload::Scale,
        Workload::Federation,
    ]
    .into_iter()
    .any(|w| plan.wants(w));
    if needs_servers {
        let servers = start_servers(plan).await?;
        if plan.wants(Workload::Notify) {
            notify::one_to_one(&servers, plan, &mut report).await;
        }
        if plan.wants(Workload::Fan) {
            notify::fan(&servers, plan, &mut report).await;
        }
        if plan.wants(Workload::Latency) {
            request::one_hub(&servers, plan, 1, &mut report).await;
        }
        if plan.wants(Workload::Window) {
            request::one_hub(&servers, plan, request::WINDOW, &mut report).await;
        }
        if plan.wants(Workload::Scale) {
            scale::unrelated_services(&servers, plan, &mut report).await?;
        }
        if plan.wants(Workload::Federation) {
            federation::across_hubs(&servers, plan, &mut report).await;
        }
    }
    // These start servers of their own.
    if plan.wants(Workload::Scale) {
        scale::idle_connections(plan, &mut report).await;
    }
    if plan.wants(Workload::Callgrind) {
        callgrind::instructions(plan, &mut report).await;
    }
    if plan.wants(Workload::Gateway) {
        gateway::gateway(plan, &mut report).await;
    }
    targets::check(&mut report);
    Ok(report)
}

/// The hub, nats-server and floor shared by the throughput and latency
/// workloads, and the federated pair if workload 7 runs.
async fn start_servers(plan: &Plan) -> anyhow::Result<Servers> {
    progress("starting hub, nats-server and floor");
    let cpu = plan.server_cpu();
    let mut servers = Servers {
        hub: HubProcess::start(HubLaunch {
            bin: &plan.bins.hub,
            cpu,
            ws: true,
            wrapper: Vec::new(),
            startup: Duration::from_secs(10),
            args: Vec::new(),
            config: "",
        })
        .await
        .context("starting the hub")?,
        nats: NatsProcess::start(&plan.bins.nats, cpu)
            .await
            .context("starting nats-server")?,
        floor: FloorProcess::start(&plan.bins.floor, cpu)
            .await
            .context("starting the floor")?,
        federated: None,
    };
    if plan.wants(Workload::Federation) {
        progress("starting two hubs federated over the nats-server");
        servers.federated = Some(federation::start_hubs(plan, &servers.nats.url).await?);
    }
    Ok(servers)
}
