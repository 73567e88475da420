//! Workload 7: a notification and a request that cross two hubs (the client
//! on one, the service on the other, NATS between), in the hub (Unix)
//! column, beside direct NATS in the same run; so the hub/NATS ratio is the
//! cost of going through two hubs.

use std::time::Duration;

use anyhow::Context;

use super::notify::{self, Notifications};
use super::request::{self, Figure, Requests, WINDOW};
use super::Plan;
use crate::measure::Measurement;
use crate::report::Report;
use crate::systems::hub::{HubLaunch, HubProcess};
use crate::systems::System;
use crate::workloads::request::RequestSpec;
use crate::workloads::{Federated, Placement, Servers};

pub(super) const ACROSS_HUBS: &str =
    "7. across two hubs (hub column: client → hub → NATS → hub → service)";

/// The notification figures' lead.
pub(super) const NOTIFY: &str = "notify 200 B 1→1";

/// The request figures' lead: what precedes the figure's name.
pub(super) fn request_lead(label: &str) -> String {
    format!("request/reply {label}: ")
}

/// Every principal of either hub may act on the other's services.
const FEDERATED_GRANTS: &str =
    "[[grants]]\nfrom = \"*\"\nto = \"*\"\nallow = [\"discover\", \"request\", \"notify\"]\n";

/// The systems of this workload, whatever `--systems` says: the hub column
/// is the path across two hubs, NATS the direct path it is compared with.
const SYSTEMS: [System; 2] = [System::HubUnix, System::Nats];

/// Hubs `owners` and `callers`, joined over the nats-server at `nats`.
pub(super) async fn start_hubs(plan: &Plan, nats: &str) -> anyhow::Result<Federated> {
    let start = |name: &'static str| {
        HubProcess::start(HubLaunch {
            bin: &plan.bins.hub,
            cpu: plan.server_cpu(),
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

pub(super) async fn across_hubs(servers: &Servers, plan: &Plan, report: &mut Report) {
    let durations = plan.durations();
    let notifications = Notifications {
        servers,
        spec: notify::one_to_one_spec(plan, 200, Placement::AcrossHubs),
        prefix: "x-n".into(),
        explain_loss: false,
    };
    let rows = vec![
        notify::delivered_row(ACROSS_HUBS, NOTIFY),
        notify::lost_row(ACROSS_HUBS, NOTIFY),
    ];
    let name = format!("{ACROSS_HUBS} notify");
    let takes = notifications.takes(&SYSTEMS, &name, 0..2, notify::rate_and_loss);
    Measurement { rows, takes }.record(plan.runs, report).await;

    for (window, duration, label) in [
        (1, durations.sequential, "sequential"),
        (WINDOW, durations.window, "64 in flight"),
    ] {
        Requests {
            servers,
            spec: RequestSpec {
                window,
                duration,
                payload_size: request::PAYLOAD,
                placement: Placement::AcrossHubs,
            },
            systems: SYSTEMS.to_vec(),
            figures: &[Figure::P50, Figure::P99, Figure::Rate],
            prefix: format!("x-w{window}"),
            name: format!("{ACROSS_HUBS} request {label}"),
        }
        .measurement(ACROSS_HUBS, &request_lead(label))
        .record(plan.runs, report)
        .await;
    }
}
