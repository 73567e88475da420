//! Workloads 1 and 2, notifications 1→1 and fan-in / fan-out, and the CPU
//! per message they cost (the first rows of workload 6).

use std::ops::Range;
use std::rc::Rc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Plan;
use crate::measure::{tag, Measurement, Take, Taken};
use crate::report::{Format, Report, Row};
use crate::systems::System;
use crate::workloads::notify::{self, NotifyOutcome, NotifySpec};
use crate::workloads::{Placement, Servers};

pub(super) const ONE_TO_ONE: &str = "1. notify 1→1";
pub(super) const FAN_IN_OUT: &str = "2. notify fan-in / fan-out";
pub(super) const CPU_PER_MESSAGE: &str = "6. CPU per message";

const PAYLOADS: [(usize, &str); 3] = [(200, "200 B"), (1024, "1 KiB"), (16 * 1024, "16 KiB")];
const FAN: usize = 16;

/// The figure of delivered notifications per second for `what`.
pub(super) fn delivered(what: &str) -> String {
    format!("{what}: delivered msg/s")
}

/// The figure of notifications lost for `what`.
pub(super) fn lost(what: &str) -> String {
    format!("{what}: lost, % of sent")
}

pub(super) fn delivered_row(workload: &str, what: &str) -> Row {
    Row::new(workload, &delivered(what), Format::Count, true)
}

pub(super) fn lost_row(workload: &str, what: &str) -> Row {
    Row::new(workload, &lost(what), Format::Decimal(3), false)
}

pub(super) fn lost_percent(outcome: &NotifyOutcome) -> f64 {
    outcome.lost() as f64 / outcome.sent as f64 * 100.0
}

/// The values of a delivered row and a lost row.
pub(super) fn rate_and_loss(outcome: &NotifyOutcome) -> Vec<f64> {
    vec![outcome.msgs_per_sec(), lost_percent(outcome)]
}

/// A notification run's figures in a few words.
pub(super) fn detail(outcome: &NotifyOutcome) -> String {
    format!(
        "{:.0} msg/s, sent {}, lost {}",
        outcome.msgs_per_sec(),
        outcome.sent,
        outcome.lost()
    )
}

/// One sender and one receiver, `size` bytes each, for the plan's notify
/// duration.
pub(super) fn one_to_one_spec(plan: &Plan, size: usize, placement: Placement) -> NotifySpec {
    NotifySpec {
        senders: 1,
        receivers: 1,
        payload_size: size,
        duration: plan.durations().notify,
        placement,
    }
}

/// Notification runs of one spec, the same on every system they take.
pub(super) struct Notifications<'a> {
    pub servers: &'a Servers,
    pub spec: NotifySpec,
    /// Starts each run's tag (see [`tag`]).
    pub prefix: String,
    /// Whether a run that lost notifications gets a note with the hub's
    /// drop counters.
    pub explain_loss: bool,
}

impl<'a> Notifications<'a> {
    /// A take of these runs on each of `systems` (see [`Take::each`]),
    /// each outcome read into the values of `fills` by `read`.
    pub fn takes(
        &self,
        systems: &[System],
        name: &str,
        fills: Range<usize>,
        read: impl Fn(&NotifyOutcome) -> Vec<f64> + 'a,
    ) -> Vec<Take<'a>> {
        let (servers, explain_loss) = (self.servers, self.explain_loss);
        let (spec, prefix, read) = (
            Rc::new(self.spec.clone()),
            self.prefix.clone(),
            Rc::new(read),
        );
        Take::each(systems, name, fills, move |system, run| {
            let (spec, read, tag) = (spec.clone(), read.clone(), tag(&prefix, run, system));
            async move {
                let drops_before = match explain_loss {
                    true => hub_drops(servers, system).await,
                    false => None,
                };
                let outcome = notify::run(servers, system, &spec, &tag).await?;
                let mut taken = Taken::new(read(&outcome), detail(&outcome));
                if explain_loss && outcome.lost() > 0 {
                    let why = match (drops_before, hub_drops(servers, system).await) {
                        (Some(before), Some(after)) => {
                            format!("; hub drop counters: {}", drop_delta(&before, &after))
                        }
                        _ => String::new(),
                    };
                    taken.notes.push(format!(
                        "{} of {} lost{why}",
                        Format::Count.show(outcome.lost() as f64),
                        Format::Count.show(outcome.sent as f64),
                    ));
                }
                Ok(taken)
            }
        })
    }
}

/// Workload 1 at each payload size, and the CPU it costs at 200 B.
pub(super) async fn one_to_one(servers: &Servers, plan: &Plan, report: &mut Report) {
    for (size, label) in PAYLOADS {
        let runs = Notifications {
            servers,
            spec: one_to_one_spec(plan, size, Placement::OneHub),
            prefix: format!("n{size}"),
            explain_loss: true,
        };
        let mut rows = vec![
            delivered_row(ONE_TO_ONE, label),
            Row::new(
                ONE_TO_ONE,
                &format!("{label}: payload MB/s"),
                Format::Decimal(1),
                true,
            ),
            lost_row(ONE_TO_ONE, label),
        ];
        let with_cpu = size == 200;
        if with_cpu {
            rows.extend(cpu_rows(label));
        }
        let name = format!("{ONE_TO_ONE} {label}");
        let takes = runs.takes(&plan.systems, &name, 0..rows.len(), move |outcome| {
            let mut values = vec![
                outcome.msgs_per_sec(),
                outcome.msgs_per_sec() * size as f64 / 1e6,
                lost_percent(outcome),
            ];
            if with_cpu {
                values.extend([
                    outcome.server_cpu_per_million(),
                    outcome.cpu.server / outcome.sent as f64 * 1e6,
                    outcome.harness_cpu_per_million(),
                ]);
            }
            values
        });
        Measurement { rows, takes }.record(plan.runs, report).await;
    }
    // Keep the CPU rows together under workload 6.
    report
        .rows
        .sort_by_key(|row| row.workload.starts_with("6."));
}

/// Server CPU per delivered and per sent notification, and the harness's.
fn cpu_rows(label: &str) -> [Row; 3] {
    [
        server_cpu_delivered(label),
        format!("server CPU-s per 1M notifications sent, each read and routed or shed ({label})"),
        format!("harness CPU-s per 1M notifications ({label}; client side, for fairness)"),
    ]
    .map(|figure| Row::new(CPU_PER_MESSAGE, &figure, Format::Decimal(2), true))
}

/// The figure of server CPU per delivered notification of `label`.
pub(super) fn server_cpu_delivered(label: &str) -> String {
    format!("server CPU-s per 1M notifications delivered ({label})")
}

/// Workload 2: 16 senders to one service, one sender to 16.
pub(super) async fn fan(servers: &Servers, plan: &Plan, report: &mut Report) {
    for (senders, receivers, label) in [
        (FAN, 1, "16 senders → 1 service"),
        (1, FAN, "1 sender → 16 services"),
    ] {
        let runs = Notifications {
            servers,
            spec: NotifySpec {
                senders,
                receivers,
                payload_size: 200,
                duration: plan.durations().notify,
                placement: Placement::OneHub,
            },
            prefix: format!("f{senders}x{receivers}"),
            explain_loss: false,
        };
        let what = format!("{label}, 200 B");
        let rows = vec![
            delivered_row(FAN_IN_OUT, &what),
            lost_row(FAN_IN_OUT, &what),
        ];
        let name = format!("{FAN_IN_OUT} {label}");
        let takes = runs.takes(&plan.systems, &name, 0..2, rate_and_loss);
        Measurement { rows, takes }.record(plan.runs, report).await;
    }
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
