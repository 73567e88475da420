//! The plan of a benchmark run: which workloads, how long, how many runs,
//! in what order; and the report built from what they measured.
//!
//! Runs are interleaved (run 1 of every system, then run 2, …) so a slow
//! moment of the machine does not land on one system only.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::report::{Format, Report, Row, TargetCheck};
use crate::systems::floor::FloorProcess;
use crate::systems::hub::{HubLaunch, HubProcess};
use crate::systems::nats::{self, NatsProcess};
use crate::systems::System;
use crate::workloads::callgrind::{self, Counted};
use crate::workloads::notify::{self, NotifySpec};
use crate::workloads::request::{self, RequestSpec};
use crate::workloads::scale::{self, ScaleBins};
use crate::workloads::{Federated, Placement, Servers};

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
}

impl Workload {
    pub const ALL: [Workload; 7] = [
        Workload::Notify,
        Workload::Fan,
        Workload::Latency,
        Workload::Window,
        Workload::Scale,
        Workload::Callgrind,
        Workload::Federation,
    ];
}

pub struct Bins {
    pub hub: PathBuf,
    pub floor: PathBuf,
    pub nats: PathBuf,
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
}

/// How long each kind of run lasts.
struct Durations {
    notify: Duration,
    sequential: Duration,
    window: Duration,
    callgrind_notifications: u64,
    callgrind_runs: usize,
}

impl Durations {
    fn new(quick: bool, runs: usize) -> Self {
        if quick {
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
                callgrind_runs: runs,
            }
        }
    }
}

const PAYLOADS: [(usize, &str); 3] = [(200, "200 B"), (1024, "1 KiB"), (16 * 1024, "16 KiB")];
const REQUEST_PAYLOAD: usize = 200;
const FAN: usize = 16;
const WINDOW: usize = 64;
const IDLE_STEPS: [usize; 2] = [1_000, 10_000];
/// Connections that each carried a 64 KiB message before idling.
const AFTER_TRAFFIC_CONNECTIONS: usize = 1_000;
const SERVICES: usize = 10_000;
const SERVICES_PER_CONNECTION: usize = 100;
/// "Unchanged within noise": at least this share of the baseline.
const WITHIN_NOISE: f64 = 0.90;

fn progress(text: &str) {
    eprintln!("[bench] {text}");
}

pub async fn run(plan: &Plan) -> anyhow::Result<Report> {
    let durations = Durations::new(plan.quick, plan.runs);
    let server_cpu = plan.pin.then_some(0);
    let mut report = Report {
        title: "Switchboard benchmark: hub vs NATS vs floor".into(),
        machine: crate::report::machine_description(),
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
    let wants = |w| plan.workloads.contains(&w);

    let needs_servers = [
        Workload::Notify,
        Workload::Fan,
        Workload::Latency,
        Workload::Window,
        Workload::Scale,
        Workload::Federation,
    ]
    .iter()
    .any(|&w| wants(w));
    if needs_servers {
        progress("starting hub, nats-server and floor");
        let mut servers = Servers {
            hub: HubProcess::start(HubLaunch {
                bin: &plan.bins.hub,
                cpu: server_cpu,
                ws: true,
                wrapper: Vec::new(),
                startup: Duration::from_secs(10),
                args: Vec::new(),
                config: "",
            })
            .await
            .context("starting the hub")?,
            nats: NatsProcess::start(&plan.bins.nats, server_cpu)
                .await
                .context("starting nats-server")?,
            floor: FloorProcess::start(&plan.bins.floor, server_cpu)
                .await
                .context("starting the floor")?,
            federated: None,
        };
        if wants(Workload::Federation) {
            progress("starting two hubs federated over the nats-server");
            servers.federated = Some(federated_hubs(plan, server_cpu, &servers.nats.url).await?);
        }
        if wants(Workload::Notify) {
            notify_one_to_one(&servers, plan, &durations, &mut report).await;
        }
        if wants(Workload::Fan) {
            notify_fan(&servers, plan, &durations, &mut report).await;
        }
        if wants(Workload::Latency) {
            requests(&servers, plan, 1, durations.sequential, &mut report).await;
        }
        if wants(Workload::Window) {
            requests(&servers, plan, WINDOW, durations.window, &mut report).await;
        }
        if wants(Workload::Scale) {
            unrelated_services(&servers, plan, &durations, &mut report).await?;
        }
        if wants(Workload::Federation) {
            across_hubs(&servers, plan, &durations, &mut report).await;
        }
    }
    if wants(Workload::Scale) {
        idle_connections(plan, server_cpu, &mut report).await;
    }
    if wants(Workload::Callgrind) {
        instructions(plan, &durations, &mut report).await;
    }
    check_targets(&mut report);
    Ok(report)
}

/// Every principal of either hub may act on the other's services.
const FEDERATED_GRANTS: &str =
    "[[grants]]\nfrom = \"*\"\nto = \"*\"\nallow = [\"discover\", \"request\", \"notify\"]\n";

/// Hubs `owners` and `callers`, joined over the nats-server at `nats`.
async fn federated_hubs(plan: &Plan, cpu: Option<usize>, nats: &str) -> anyhow::Result<Federated> {
    let start = |name: &'static str| {
        HubProcess::start(HubLaunch {
            bin: &plan.bins.hub,
            cpu,
            ws: true,
            wrapper: Vec::new(),
            startup: Duration::from_secs(10),
            args: vec![
                "--nats".into(),
                nats.into(),
                "--hub-name".into(),
                name.into(),
            ],
            config: FEDERATED_GRANTS,
        })
    };
    Ok(Federated {
        owners: start("owners").await.context("starting hub owners")?,
        callers: start("callers").await.context("starting hub callers")?,
    })
}

/// Workload 7: the hub figures of a notification and a request that cross
/// two hubs (the client on one, the service on the other, NATS between),
/// in the hub (Unix) column, beside direct NATS in the same run; so the
/// hub/NATS ratio is the cost of going through two hubs.
async fn across_hubs(servers: &Servers, plan: &Plan, durations: &Durations, report: &mut Report) {
    const W: &str = "7. across two hubs (hub column: client → hub → NATS → hub → service)";
    let systems = [System::HubUnix, System::Nats];
    let spec = NotifySpec {
        senders: 1,
        receivers: 1,
        payload_size: 200,
        duration: durations.notify,
        placement: Placement::AcrossHubs,
    };
    let mut rate = Row::new(W, "notify 200 B 1→1: delivered msg/s", Format::Count, true);
    let mut lost = Row::new(
        W,
        "notify 200 B 1→1: lost, % of sent",
        Format::Decimal(3),
        false,
    );
    for run in 0..plan.runs {
        for system in systems {
            let tag = format!("x-n-{run}-{}", system as usize);
            match notify::run(servers, system, &spec, &tag).await {
                Ok(outcome) => {
                    progress(&format!(
                        "{W} notify {} run {run}: {:.0} msg/s, lost {}",
                        system.label(),
                        outcome.msgs_per_sec(),
                        outcome.lost()
                    ));
                    rate.push(system, outcome.msgs_per_sec());
                    lost.push(system, outcome.lost() as f64 / outcome.sent as f64 * 100.0);
                }
                Err(error) => {
                    note_failure(report, &format!("{W} notify {}", system.label()), &error)
                }
            }
        }
    }
    report.rows.extend([rate, lost]);
    for (window, duration, label) in [
        (1, durations.sequential, "sequential"),
        (WINDOW, durations.window, "64 in flight"),
    ] {
        let spec = RequestSpec {
            window,
            duration,
            payload_size: REQUEST_PAYLOAD,
            placement: Placement::AcrossHubs,
        };
        let mut rate = Row::new(
            W,
            &format!("request/reply {label}: requests/s"),
            Format::Count,
            true,
        );
        let mut p50 = Row::new(
            W,
            &format!("request/reply {label}: p50 µs"),
            Format::Decimal(1),
            true,
        );
        let mut p99 = Row::new(
            W,
            &format!("request/reply {label}: p99 µs"),
            Format::Decimal(1),
            true,
        );
        for run in 0..plan.runs {
            for system in systems {
                let tag = format!("x-w{window}-{run}-{}", system as usize);
                match request::run(servers, system, &spec, &tag).await {
                    Ok(outcome) => {
                        progress(&format!(
                            "{W} request {label} {} run {run}: {:.0} req/s, p50 {:.1} µs, p99 {:.1} µs",
                            system.label(),
                            outcome.per_sec(),
                            outcome.quantile_us(0.5),
                            outcome.quantile_us(0.99)
                        ));
                        rate.push(system, outcome.per_sec());
                        p50.push(system, outcome.quantile_us(0.5));
                        p99.push(system, outcome.quantile_us(0.99));
                    }
                    Err(error) => note_failure(
                        report,
                        &format!("{W} request {label} {}", system.label()),
                        &error,
                    ),
                }
            }
        }
        report.rows.extend([p50, p99, rate]);
    }
}

fn note_failure(report: &mut Report, what: &str, error: &anyhow::Error) {
    progress(&format!("FAILED {what}: {error:#}"));
    report.notes.push(format!("{what} failed: {error:#}"));
}

async fn notify_one_to_one(
    servers: &Servers,
    plan: &Plan,
    durations: &Durations,
    report: &mut Report,
) {
    const W: &str = "1. notify 1→1";
    for (size, label) in PAYLOADS {
        let spec = NotifySpec {
            senders: 1,
            receivers: 1,
            payload_size: size,
            duration: durations.notify,
            placement: Placement::OneHub,
        };
        let mut rate = Row::new(W, &format!("{label}: delivered msg/s"), Format::Count, true);
        let mut mbs = Row::new(
            W,
            &format!("{label}: payload MB/s"),
            Format::Decimal(1),
            true,
        );
        let mut lost = Row::new(
            W,
            &format!("{label}: lost, % of sent"),
            Format::Decimal(3),
            false,
        );
        let mut cpu = Row::new(
            "6. CPU per message",
            &format!("server CPU-s per 1M notifications delivered ({label})"),
            Format::Decimal(2),
            true,
        );
        let mut cpu_sent = Row::new(
            "6. CPU per message",
            &format!(
                "server CPU-s per 1M notifications sent, each read and routed or shed ({label})"
            ),
            Format::Decimal(2),
            true,
        );
        let mut harness = Row::new(
            "6. CPU per message",
            &format!("harness CPU-s per 1M notifications ({label}; client side, for fairness)"),
            Format::Decimal(2),
            true,
        );
        for run in 0..plan.runs {
            for system in plan.systems.iter().copied() {
                let tag = format!("n{size}-{run}-{}", system as usize);
                let drops_before = hub_drops(servers, system).await;
                match notify::run(servers, system, &spec, &tag).await {
                    Ok(outcome) => {
                        progress(&format!(
                            "{W} {label} {} run {run}: {:.0} msg/s, sent {}, lost {}",
                            system.label(),
                            outcome.msgs_per_sec(),
                            outcome.sent,
                            outcome.lost()
                        ));
                        rate.push(system, outcome.msgs_per_sec());
                        mbs.push(system, outcome.msgs_per_sec() * size as f64 / 1e6);
                        lost.push(system, outcome.lost() as f64 / outcome.sent as f64 * 100.0);
                        cpu.push(system, outcome.server_cpu_per_million());
                        cpu_sent.push(system, outcome.cpu.server / outcome.sent as f64 * 1e6);
                        harness.push(system, outcome.harness_cpu_per_million());
                        if outcome.lost() > 0 {
                            let why = match (drops_before, hub_drops(servers, system).await) {
                                (Some(before), Some(after)) => {
                                    format!("; hub drop counters: {}", drop_delta(&before, &after))
                                }
                                _ => String::new(),
                            };
                            report.notes.push(format!(
                                "{W} {label} {} run {run}: {} of {} lost{why}",
                                system.label(),
                                Format::Count.show(outcome.lost() as f64),
                                Format::Count.show(outcome.sent as f64),
                            ));
                        }
                    }
                    Err(error) => {
                        note_failure(report, &format!("{W} {label} {}", system.label()), &error)
                    }
                }
            }
        }
        report.rows.extend([rate, mbs, lost]);
        if size == 200 {
            report.rows.extend([cpu, cpu_sent, harness]);
        }
    }
    // Keep the CPU rows together under workload 6.
    report
        .rows
        .sort_by_key(|row| row.workload.starts_with("6."));
}

async fn notify_fan(servers: &Servers, plan: &Plan, durations: &Durations, report: &mut Report) {
    const W: &str = "2. notify fan-in / fan-out";
    for (senders, receivers, label) in [
        (FAN, 1, "16 senders → 1 service"),
        (1, FAN, "1 sender → 16 services"),
    ] {
        let spec = NotifySpec {
            senders,
            receivers,
            payload_size: 200,
            duration: durations.notify,
            placement: Placement::OneHub,
        };
        let mut rate = Row::new(
            W,
            &format!("{label}, 200 B: delivered msg/s"),
            Format::Count,
            true,
        );
        let mut lost = Row::new(
            W,
            &format!("{label}, 200 B: lost, % of sent"),
            Format::Decimal(3),
            false,
        );
        for run in 0..plan.runs {
            for system in plan.systems.iter().copied() {
                let tag = format!("f{senders}x{receivers}-{run}-{}", system as usize);
                match notify::run(servers, system, &spec, &tag).await {
                    Ok(outcome) => {
                        progress(&format!(
                            "{W} {label} {} run {run}: {:.0} msg/s, lost {}",
                            system.label(),
                            outcome.msgs_per_sec(),
                            outcome.lost()
                        ));
                        rate.push(system, outcome.msgs_per_sec());
                        lost.push(system, outcome.lost() as f64 / outcome.sent as f64 * 100.0);
                    }
                    Err(error) => {
                        note_failure(report, &format!("{W} {label} {}", system.label()), &error)
                    }
                }
            }
        }
        report.rows.extend([rate, lost]);
    }
}

async fn requests(
    servers: &Servers,
    plan: &Plan,
    window: usize,
    duration: Duration,
    report: &mut Report,
) {
    let w = if window == 1 {
        "3. request/reply, sequential"
    } else {
        "4. request/reply, 64 in flight"
    };
    let spec = RequestSpec {
        window,
        duration,
        payload_size: REQUEST_PAYLOAD,
        placement: Placement::OneHub,
    };
    let mut rate = Row::new(w, "requests/s", Format::Count, true);
    let mut p50 = Row::new(w, "p50 µs", Format::Decimal(1), true);
    let mut p99 = Row::new(w, "p99 µs", Format::Decimal(1), true);
    let mut p999 = Row::new(w, "p99.9 µs", Format::Decimal(1), true);
    let mut cpu = Row::new(w, "server CPU µs per request", Format::Decimal(2), true);
    for run in 0..plan.runs {
        for system in plan.systems.iter().copied() {
            let tag = format!("w{window}-{run}-{}", system as usize);
            match request::run(servers, system, &spec, &tag).await {
                Ok(outcome) => {
                    progress(&format!(
                        "{w} {} run {run}: {:.0} req/s, p50 {:.1} µs, p99 {:.1} µs",
                        system.label(),
                        outcome.per_sec(),
                        outcome.quantile_us(0.5),
                        outcome.quantile_us(0.99)
                    ));
                    rate.push(system, outcome.per_sec());
                    p50.push(system, outcome.quantile_us(0.5));
                    p99.push(system, outcome.quantile_us(0.99));
                    p999.push(system, outcome.quantile_us(0.999));
                    cpu.push(system, outcome.cpu.server / outcome.completed as f64 * 1e6);
                }
                Err(error) => note_failure(report, &format!("{w} {}", system.label()), &error),
            }
        }
    }
    if window == 1 {
        report.rows.extend([p50, p99, p999, rate, cpu]);
    } else {
        report.rows.extend([rate, p50, p99, cpu]);
    }
}

async fn idle_connections(plan: &Plan, server_cpu: Option<usize>, report: &mut Report) {
    const W: &str = "5. scale";
    let bins = ScaleBins {
        hub: &plan.bins.hub,
        nats: &plan.bins.nats,
        floor: &plan.bins.floor,
        cpu: server_cpu,
    };
    let mut rows: Vec<Row> = IDLE_STEPS
        .iter()
        .map(|n| {
            Row::new(
                W,
                &format!(
                    "server RSS per idle connection, {} connections (bytes)",
                    Format::Count.show(*n as f64)
                ),
                Format::Count,
                true,
            )
        })
        .collect();
    let mut after_traffic = Row::new(
        W,
        &format!(
            "server RSS per idle connection after one 64 KiB message each way, {} connections (bytes)",
            Format::Count.show(AFTER_TRAFFIC_CONNECTIONS as f64)
        ),
        Format::Count,
        true,
    );
    for run in 0..plan.runs {
        if plan.systems.contains(&System::HubWs) {
            let steps = [AFTER_TRAFFIC_CONNECTIONS];
            match scale::idle_ws_connections(&bins, &steps, Some(64 * 1024)).await {
                Ok(outcome) => {
                    progress(&format!(
                        "{W} idle WebSocket connections after traffic run {run}: {:.0} bytes each",
                        outcome.per_connection[0]
                    ));
                    after_traffic.push(System::HubWs, outcome.per_connection[0]);
                }
                Err(error) => note_failure(
                    report,
                    &format!("{W} idle WebSocket connections after traffic"),
                    &error,
                ),
            }
        }
        for system in [System::HubUnix, System::HubWs, System::Nats, System::Floor] {
            if !plan.systems.contains(&system) {
                continue;
            }
            match scale::idle_connections(&bins, system, &IDLE_STEPS).await {
                Ok(outcome) => {
                    progress(&format!(
                        "{W} idle connections {} run {run}: {:?} bytes each",
                        system.label(),
                        outcome
                            .per_connection
                            .iter()
                            .map(|b| b.round())
                            .collect::<Vec<_>>()
                    ));
                    for (row, bytes) in rows.iter_mut().zip(outcome.per_connection) {
                        row.push(system, bytes);
                    }
                }
                Err(error) => note_failure(
                    report,
                    &format!("{W} idle connections {}", system.label()),
                    &error,
                ),
            }
        }
    }
    report.rows.extend(rows);
    report.rows.push(after_traffic);
}

async fn unrelated_services(
    servers: &Servers,
    plan: &Plan,
    durations: &Durations,
    report: &mut Report,
) -> anyhow::Result<()> {
    const W: &str = "5. scale";
    let spec = NotifySpec {
        senders: 1,
        receivers: 1,
        payload_size: 200,
        duration: durations.notify,
        placement: Placement::OneHub,
    };
    let systems: Vec<System> = [System::HubUnix, System::Nats]
        .into_iter()
        .filter(|s| plan.systems.contains(s))
        .collect();
    let mut baseline = Row::new(
        W,
        "notify 200 B msg/s, baseline (same server, just before)",
        Format::Count,
        true,
    );
    let mut loaded = Row::new(
        W,
        "notify 200 B msg/s, 10,000 unrelated services registered (NATS: subscriptions)",
        Format::Count,
        true,
    );
    let mut lost = Row::new(
        W,
        "notify 200 B with 10,000 unrelated: lost, % of sent",
        Format::Decimal(3),
        false,
    );
    let mut snapshot = Row::new(
        W,
        "catalog subscribe answered, 10,000 services (ms)",
        Format::Decimal(2),
        false,
    );
    for run in 0..plan.runs {
        for &system in &systems {
            let tag = format!("base-{run}-{}", system as usize);
            match notify::run(servers, system, &spec, &tag).await {
                Ok(outcome) => baseline.push(system, outcome.msgs_per_sec()),
                Err(error) => {
                    note_failure(report, &format!("{W} baseline {}", system.label()), &error)
                }
            }
        }
    }
    progress(&format!("{W}: registering {SERVICES} services"));
    let registered = scale::register_services(&servers.hub, SERVICES, SERVICES_PER_CONNECTION)
        .await
        .context("registering 10,000 services")?;
    let nats_subscriptions = scale::nats_unrelated_subscriptions(servers.nats.port, SERVICES)
        .await
        .context("10,000 NATS subscriptions")?;
    for run in 0..plan.runs {
        match scale::subscribe_time(&servers.hub, registered.services).await {
            Ok(took) => {
                progress(&format!(
                    "{W} subscribe with {SERVICES} services run {run}: {took:?}"
                ));
                snapshot.push(System::HubUnix, took.as_secs_f64() * 1e3);
            }
            Err(error) => note_failure(report, &format!("{W} subscribe"), &error),
        }
        for &system in &systems {
            let tag = format!("loaded-{run}-{}", system as usize);
            match notify::run(servers, system, &spec, &tag).await {
                Ok(outcome) => {
                    progress(&format!(
                        "{W} notify with {SERVICES} unrelated {} run {run}: {:.0} msg/s, lost {}",
                        system.label(),
                        outcome.msgs_per_sec(),
                        outcome.lost()
                    ));
                    loaded.push(system, outcome.msgs_per_sec());
                    lost.push(system, outcome.lost() as f64 / outcome.sent as f64 * 100.0);
                }
                Err(error) => {
                    note_failure(report, &format!("{W} loaded {}", system.label()), &error)
                }
            }
        }
    }
    let mut change = Row::new(W, "… as % of baseline", Format::Decimal(1), false);
    for &system in &systems {
        if let (Some(before), Some(after)) = (baseline.median(system), loaded.median(system)) {
            change.push(system, after / before * 100.0);
        }
    }
    drop(registered);
    drop(nats_subscriptions);
    report
        .rows
        .extend([snapshot, baseline, loaded, change, lost]);
    Ok(())
}

async fn instructions(plan: &Plan, durations: &Durations, report: &mut Report) {
    const W: &str = "6. CPU per message";
    if !callgrind::valgrind_available() {
        report
            .notes
            .push("valgrind is not installed: no instruction counts in this run".into());
        return;
    }
    let mut row = Row::new(
        W,
        &format!(
            "instructions per notification, 200 B (callgrind, N = {})",
            Format::Count.show(durations.callgrind_notifications as f64)
        ),
        Format::Count,
        true,
    );
    for run in 0..durations.callgrind_runs {
        for (counted, system, bin) in [
            (Counted::Hub, System::HubUnix, &plan.bins.hub),
            (Counted::HubWs, System::HubWs, &plan.bins.hub),
            (Counted::Floor, System::Floor, &plan.bins.floor),
        ] {
            if !plan.systems.contains(&system) {
                continue;
            }
            progress(&format!("{W}: callgrind {} run {run}", system.label()));
            match callgrind::measure(
                counted,
                bin,
                durations.callgrind_notifications,
                &plan.callgrind_dir,
                run,
            )
            .await
            {
                Ok(outcome) => {
                    progress(&format!(
                        "{W}: {} {:.0} instructions per notification ({} − {})",
                        system.label(),
                        outcome.per_notification(),
                        outcome.with,
                        outcome.without
                    ));
                    row.push(system, outcome.per_notification());
                }
                Err(error) => {
                    note_failure(report, &format!("callgrind {}", system.label()), &error)
                }
            }
        }
    }
    report.rows.push(row);
    report.notes.push(format!(
        "Instructions per notification: the server runs under `valgrind --tool=callgrind` twice with the same \
         script (connect a receiver and a sender, register, send N notifications of 200 B in steps of 1,000 \
         (64 KiB writes, or one frame each flushed per step on the WebSocket, each step awaited so nothing is \
         shed), disconnect, SIGTERM), once with N and once with 0 notifications; the figure is \
         (Ir(N) − Ir(0)) / N, so start-up, connections and shutdown cancel out. Output files: `{}`.",
        plan.callgrind_dir.display()
    ));
}

/// The hub's notification drop counters by reason, from `/metrics` (to
/// explain a loss); `None` for other systems or when unavailable.
async fn hub_drops(servers: &Servers, system: System) -> Option<Vec<(String, f64)>> {
    if !matches!(system, System::HubUnix | System::HubWs) {
        return None;
    }
    let authority = servers
        .hub
        .info
        .ws
        .as_deref()
        .and_then(|url| url.strip_prefix("ws://"))
        .and_then(|rest| rest.split('/').next())?;
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(authority).await?;
        let request =
            format!("GET /metrics HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut body = String::new();
        stream.read_to_string(&mut body).await?;
        anyhow::Ok(body)
    };
    let body = tokio::time::timeout(Duration::from_secs(5), fetch)
        .await
        .ok()?
        .ok()?;
    Some(
        body.lines()
            .filter(|l| l.starts_with("switchboard_notifications_dropped_total{"))
            .filter_map(|l| {
                let reason = l.split('"').nth(1)?.to_owned();
                let value = l.rsplit(' ').next()?.parse().ok()?;
                Some((reason, value))
            })
            .collect(),
    )
}

/// The counters that moved, as `reason +n`.
fn drop_delta(before: &[(String, f64)], after: &[(String, f64)]) -> String {
    let moved: Vec<String> = after
        .iter()
        .filter_map(|(reason, value)| {
            let old = before
                .iter()
                .find(|(r, _)| r == reason)
                .map_or(0.0, |(_, v)| *v);
            (*value > old).then(|| format!("{reason} +{}", Format::Count.show(value - old)))
        })
        .collect();
    if moved.is_empty() {
        "none moved".into()
    } else {
        moved.join(", ")
    }
}

fn check_targets(report: &mut Report) {
    let mut checks = Vec::new();
    let fmt = |v: Option<f64>, f: Format| v.map_or_else(|| "—".to_owned(), |v| f.show(v));

    if let (Some(rate), Some(lost)) = (
        report.row("1. notify 1→1", "200 B: delivered msg/s"),
        report.row("1. notify 1→1", "200 B: lost, % of sent"),
    ) {
        let ratio = rate.ratio(System::Nats);
        let loss = lost.runs[0].iter().copied().fold(0.0, f64::max);
        checks.push(TargetCheck {
            target:
                "notifications 200 B over the Unix socket: ≥ 1.5× NATS delivered msg/s, zero loss"
                    .into(),
            met: ratio.map(|r| r >= 1.5 && loss == 0.0),
            detail: format!(
                "{} vs {} msg/s = {}×; worst loss {loss:.3} %",
                fmt(rate.median(System::HubUnix), Format::Count),
                fmt(rate.median(System::Nats), Format::Count),
                fmt(ratio, Format::Decimal(2))
            ),
        });
    }
    check_websocket_targets(report, &mut checks);
    if let Some(p50) = report.row("3. request/reply, sequential", "p50 µs") {
        let (hub, nats, floor) = (
            p50.median(System::HubUnix),
            p50.median(System::Nats),
            p50.median(System::Floor),
        );
        checks.push(TargetCheck {
            target: "request/reply p50: ≤ NATS p50 and ≤ 1.3× floor p50".into(),
            met: match (hub, nats, floor) {
                (Some(h), Some(n), Some(f)) => Some(h <= n && h <= 1.3 * f),
                _ => None,
            },
            detail: format!(
                "hub {} µs, NATS {} µs, floor {} µs (hub/floor {})",
                fmt(hub, Format::Decimal(1)),
                fmt(nats, Format::Decimal(1)),
                fmt(floor, Format::Decimal(1)),
                fmt(p50.ratio(System::Floor), Format::Decimal(2))
            ),
        });
    }
    if let (Some(rate), Some(p99)) = (
        report.row("4. request/reply, 64 in flight", "requests/s"),
        report.row("4. request/reply, 64 in flight", "p99 µs"),
    ) {
        let met = match (rate.ratio(System::Nats), p99.ratio(System::Nats)) {
            (Some(r), Some(p)) => Some(r >= 1.0 && p <= 1.0),
            _ => None,
        };
        checks.push(TargetCheck {
            target: "64 requests in flight: ≥ NATS throughput, p99 ≤ NATS p99".into(),
            met,
            detail: format!(
                "{} vs {} req/s; p99 {} vs {} µs",
                fmt(rate.median(System::HubUnix), Format::Count),
                fmt(rate.median(System::Nats), Format::Count),
                fmt(p99.median(System::HubUnix), Format::Decimal(1)),
                fmt(p99.median(System::Nats), Format::Decimal(1))
            ),
        });
    }
    let idle: Vec<&Row> = report
        .rows
        .iter()
        .filter(|r| r.figure.starts_with("server RSS per idle connection"))
        .collect();
    if !idle.is_empty() {
        let worst = idle
            .iter()
            .filter_map(|r| r.median(System::HubUnix))
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        checks.push(TargetCheck {
            target: "≤ 32 KiB of hub memory per idle connection".into(),
            met: worst.map(|w| w <= 32.0 * 1024.0),
            detail: idle
                .iter()
                .map(|r| {
                    format!(
                        "{}: {} B",
                        r.figure
                            .trim_start_matches("server RSS per idle connection, "),
                        fmt(r.median(System::HubUnix), Format::Count)
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    if let Some(change) = report.row("5. scale", "… as % of baseline") {
        let hub = change.median(System::HubUnix);
        checks.push(TargetCheck {
            target: format!(
                "throughput unchanged with 10,000 unrelated services (≥ {:.0} % of baseline, zero loss)",
                WITHIN_NOISE * 100.0
            ),
            met: hub.map(|h| {
                h >= WITHIN_NOISE * 100.0
                    && report
                        .row("5. scale", "notify 200 B with 10,000 unrelated: lost, % of sent")
                        .is_some_and(|l| l.runs[0].iter().all(|&v| v == 0.0))
            }),
            detail: format!("{} % of baseline", fmt(hub, Format::Decimal(1))),
        });
    }
    if let Some(snapshot) = report.row(
        "5. scale",
        "catalog subscribe answered, 10,000 services (ms)",
    ) {
        let hub = snapshot.median(System::HubUnix);
        checks.push(TargetCheck {
            target: "subscribe snapshot of 10,000 services < 20 ms".into(),
            met: hub.map(|h| h < 20.0),
            detail: format!("{} ms", fmt(hub, Format::Decimal(2))),
        });
    }
    const X: &str = "7. across two hubs (hub column: client → hub → NATS → hub → service)";
    // "A cross-hub request adds at most 2x the latency of one direct NATS
    // request/reply": what the second hub and NATS add is the request's p50
    // across two hubs less the same request's p50 through one hub (the same
    // run's workload 3 or 4); without that figure the whole p50 counts.
    for (label, local_workload) in [
        ("sequential", "3. request/reply, sequential"),
        ("64 in flight", "4. request/reply, 64 in flight"),
    ] {
        if let Some(p50) = report.row(X, &format!("request/reply {label}: p50 µs")) {
            let across = p50.median(System::HubUnix);
            let nats = p50.median(System::Nats);
            let local = report
                .row(local_workload, "p50 µs")
                .and_then(|row| row.median(System::HubUnix));
            let added = across.map(|a| a - local.unwrap_or(0.0));
            let ratio = match (added, nats) {
                (Some(added), Some(nats)) if nats > 0.0 => Some(added / nats),
                _ => None,
            };
            checks.push(TargetCheck {
                target: format!(
                    "a request across two hubs ({label}): adds ≤ 2× the p50 of a direct NATS request/reply"
                ),
                met: ratio.map(|r| r <= 2.0),
                detail: format!(
                    "{} µs across less {} µs through one hub = {} µs added; {}; the whole path {}×",
                    fmt(across, Format::Decimal(1)),
                    fmt(local, Format::Decimal(1)),
                    fmt(added, Format::Decimal(1)),
                    versus(added, nats, Format::Decimal(1), "µs", ratio),
                    fmt(p50.ratio(System::Nats), Format::Decimal(2)),
                ),
            });
        }
    }
    if let Some(rate) = report.row(X, "notify 200 B 1→1: delivered msg/s") {
        let ratio = rate.ratio(System::Nats);
        checks.push(TargetCheck {
            target: "notifications across two hubs: ≥ 0.5× direct NATS publish".into(),
            met: ratio.map(|r| r >= 0.5),
            detail: versus(
                rate.median(System::HubUnix),
                rate.median(System::Nats),
                Format::Count,
                "msg/s",
                ratio,
            ),
        });
    }
    report.targets = checks;
}

/// Issue 13's targets for the WebSocket path, each against the same run's
/// NATS or Unix figure.
fn check_websocket_targets(report: &Report, checks: &mut Vec<TargetCheck>) {
    let fmt = |v: Option<f64>, f: Format| v.map_or_else(|| "—".to_owned(), |v| f.show(v));
    let ws_over = |row: &Row, other: System| match (row.median(System::HubWs), row.median(other)) {
        (Some(ws), Some(other)) if other != 0.0 => Some(ws / other),
        _ => None,
    };
    if let (Some(rate), Some(lost)) = (
        report.row("1. notify 1→1", "200 B: delivered msg/s"),
        report.row("1. notify 1→1", "200 B: lost, % of sent"),
    ) {
        let ratio = ws_over(rate, System::Nats);
        let runs = &lost.runs[System::ALL
            .iter()
            .position(|&s| s == System::HubWs)
            .unwrap_or(1)];
        let loss = runs.iter().copied().fold(0.0, f64::max);
        checks.push(TargetCheck {
            target: "notifications 200 B over WebSocket: ≥ 1.5× NATS delivered msg/s, zero loss"
                .into(),
            met: ratio.map(|r| r >= 1.5 && loss == 0.0 && !runs.is_empty()),
            detail: format!(
                "{} vs {} msg/s = {}×; worst loss {loss:.3} %",
                fmt(rate.median(System::HubWs), Format::Count),
                fmt(rate.median(System::Nats), Format::Count),
                fmt(ratio, Format::Decimal(2))
            ),
        });
    }
    if let Some(rate) = report.row("4. request/reply, 64 in flight", "requests/s") {
        let ratio = ws_over(rate, System::Nats);
        checks.push(TargetCheck {
            target: "64 requests in flight over WebSocket: ≥ 2× NATS throughput".into(),
            met: ratio.map(|r| r >= 2.0),
            detail: versus(
                rate.median(System::HubWs),
                rate.median(System::Nats),
                Format::Count,
                "req/s",
                ratio,
            ),
        });
    }
    if let Some(cpu) = report.row(
        "6. CPU per message",
        "server CPU-s per 1M notifications delivered (200 B)",
    ) {
        let ratio = ws_over(cpu, System::HubUnix);
        checks.push(TargetCheck {
            target: "server CPU per notification over WebSocket: ≤ 1.3× the Unix socket's".into(),
            met: ratio.map(|r| r <= 1.3),
            detail: versus(
                cpu.median(System::HubWs),
                cpu.median(System::HubUnix),
                Format::Decimal(2),
                "CPU-s per 1M",
                ratio,
            ),
        });
    }
}

/// `A vs B UNIT = R×`, each figure in `format` (— when missing).
fn versus(
    a: Option<f64>,
    b: Option<f64>,
    format: Format,
    unit: &str,
    ratio: Option<f64>,
) -> String {
    let show = |v: Option<f64>, f: Format| v.map_or_else(|| "—".to_owned(), |v| f.show(v));
    format!(
        "{} vs {} {unit} = {}×",
        show(a, format),
        show(b, format),
        show(ratio, Format::Decimal(2))
    )
}
