//! Workload 5: memory per idle connection, the catalog snapshot with 10,000
//! services, and notification throughput next to 10,000 unrelated services.

use anyhow::Context;

use super::notify::{self, Notifications};
use super::Plan;
use crate::measure::{progress, Measurement, Take, Taken};
use crate::report::{Format, Report, Row};
use crate::systems::System;
use crate::workloads::scale::{self, ScaleBins};
use crate::workloads::{Placement, Servers};

pub(super) const SCALE: &str = "5. scale";

const IDLE_STEPS: [usize; 2] = [1_000, 10_000];
/// Connections that each carried a 64 KiB message before idling.
const AFTER_TRAFFIC_CONNECTIONS: usize = 1_000;
const SERVICES: usize = 10_000;
const SERVICES_PER_CONNECTION: usize = 100;
/// "Unchanged within noise": at least this share of the baseline.
pub(super) const WITHIN_NOISE: f64 = 0.90;

// The figures target checks read.
pub(super) const IDLE_FIGURE: &str = "server RSS per idle connection";
pub(super) const CHANGE_FIGURE: &str = "… as % of baseline";
pub(super) const SNAPSHOT_FIGURE: &str = "catalog subscribe answered, 10,000 services (ms)";
pub(super) const UNRELATED: &str = "notify 200 B with 10,000 unrelated";

/// Notifications 1→1 before and after 10,000 services are registered (on
/// NATS: 10,000 subscriptions nobody publishes to), and how long a catalog
/// subscribe takes to answer then.
pub(super) async fn unrelated_services(
    servers: &Servers,
    plan: &Plan,
    report: &mut Report,
) -> anyhow::Result<()> {
    let systems = plan.among(&[System::HubUnix, System::Nats]);
    let notifications = |prefix: &str| Notifications {
        servers,
        spec: notify::one_to_one_spec(plan, 200, Placement::OneHub),
        prefix: prefix.into(),
        explain_loss: false,
    };

    let before = notifications("base");
    let rows = vec![Row::new(
        SCALE,
        "notify 200 B msg/s, baseline (same server, just before)",
        Format::Count,
        true,
    )];
    let name = format!("{SCALE} baseline");
    let takes = before.takes(
        &systems,
        &name,
        0..1,
        |outcome| vec![outcome.msgs_per_sec()],
    );
    let [baseline] = rows_of(Measurement { rows, takes }.run(plan.runs, report).await);

    progress(&format!("{SCALE}: registering {SERVICES} services"));
    let registered = scale::register_services(&servers.hub, SERVICES, SERVICES_PER_CONNECTION)
        .await
        .context("registering 10,000 services")?;
    let nats_subscriptions = scale::nats_unrelated_subscriptions(servers.nats.port, SERVICES)
        .await
        .context("10,000 NATS subscriptions")?;

    let after = notifications("loaded");
    let rows = vec![
        Row::new(SCALE, SNAPSHOT_FIGURE, Format::Decimal(2), false),
        Row::new(
            SCALE,
            "notify 200 B msg/s, 10,000 unrelated services registered (NATS: subscriptions)",
            Format::Count,
            true,
        ),
        notify::lost_row(SCALE, UNRELATED),
    ];
    let services = registered.services;
    let subscribe = Take::new(
        System::HubUnix,
        format!("{SCALE} subscribe"),
        0..1,
        move |_| async move {
            let took = scale::subscribe_time(&servers.hub, services).await?;
            let detail = format!("{took:?} with {services} services");
            Ok(Taken::new(vec![took.as_secs_f64() * 1e3], detail))
        },
    );
    let name = format!("{SCALE} loaded");
    let mut takes = vec![subscribe];
    takes.extend(after.takes(&systems, &name, 1..3, notify::rate_and_loss));
    let [snapshot, loaded, lost] =
        rows_of(Measurement { rows, takes }.run(plan.runs, report).await);

    let mut change = Row::new(SCALE, CHANGE_FIGURE, Format::Decimal(1), false);
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

/// Memory per idle connection on a fresh server of each system, and on a
/// fresh hub's WebSocket after each connection carried one 64 KiB message.
pub(super) async fn idle_connections(plan: &Plan, report: &mut Report) {
    let bins = &ScaleBins {
        hub: &plan.bins.hub,
        nats: &plan.bins.nats,
        floor: &plan.bins.floor,
        cpu: plan.server_cpu(),
    };
    let mut rows: Vec<Row> = IDLE_STEPS
        .iter()
        .map(|n| {
            Row::new(
                SCALE,
                &format!(
                    "{IDLE_FIGURE}, {} connections (bytes)",
                    Format::Count.show(*n as f64)
                ),
                Format::Count,
                true,
            )
        })
        .collect();
    rows.push(Row::new(
        SCALE,
        &format!(
            "{IDLE_FIGURE} after one 64 KiB message each way, {} connections (bytes)",
            Format::Count.show(AFTER_TRAFFIC_CONNECTIONS as f64)
        ),
        Format::Count,
        true,
    ));
    let after_traffic = plan.among(&[System::HubWs]).into_iter().map(|system| {
        let name = format!("{SCALE} idle WebSocket connections after traffic");
        Take::new(system, name, 2..3, move |_| async move {
            let steps = [AFTER_TRAFFIC_CONNECTIONS];
            let outcome = scale::idle_ws_connections(bins, &steps, Some(64 * 1024)).await?;
            let bytes = outcome.per_connection[0];
            Ok(Taken::new(vec![bytes], format!("{bytes:.0} bytes each")))
        })
    });
    let name = format!("{SCALE} idle connections");
    let idle = Take::each(
        &plan.among(&System::ALL),
        &name,
        0..2,
        |system, _| async move {
            let outcome = scale::idle_connections(bins, system, &IDLE_STEPS).await?;
            let rounded: Vec<f64> = outcome.per_connection.iter().map(|b| b.round()).collect();
            let detail = format!("{rounded:?} bytes each");
            Ok(Taken::new(outcome.per_connection, detail))
        },
    );
    let takes = after_traffic.chain(idle).collect();
    Measurement { rows, takes }.record(plan.runs, report).await;
}

/// A measurement's rows, as an array to name each one.
fn rows_of<const N: usize>(rows: Vec<Row>) -> [Row; N] {
    rows.try_into()
        .unwrap_or_else(|rows: Vec<Row>| panic!("{} rows where {N} were made", rows.len()))
}
