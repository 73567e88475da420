//! The targets of the issues, checked against the figures of the same run.

use super::federation::{self, ACROSS_HUBS};
use super::notify::{self, CPU_PER_MESSAGE, ONE_TO_ONE};
use super::request::{Figure, IN_FLIGHT, SEQUENTIAL};
use super::scale::{CHANGE_FIGURE, IDLE_FIGURE, SCALE, SNAPSHOT_FIGURE, UNRELATED, WITHIN_NOISE};
use crate::report::{Format, Report, Row, TargetCheck};
use crate::systems::System;

/// Fills `report.targets` from its rows; a target whose rows are missing
/// (its workload did not run) is left out.
pub(super) fn check(report: &mut Report) {
    report.targets = checks(report);
}

fn checks(report: &Report) -> Vec<TargetCheck> {
    [
        notifications(report, System::HubUnix, "the Unix socket"),
        notifications(report, System::HubWs, "WebSocket"),
        websocket_window(report),
        websocket_cpu(report),
        request_p50(report),
        window(report),
        idle_memory(report),
        unrelated_services(report),
        snapshot(report),
    ]
    .into_iter()
    .chain(across_requests(report))
    .chain([across_notifications(report)])
    .flatten()
    .chain(super::gateway::targets(report))
    .collect()
}

/// Notifications of 200 B through the hub over `system` (its Unix socket
/// or WebSocket) against the same run's NATS figure.
fn notifications(report: &Report, system: System, over: &str) -> Option<TargetCheck> {
    let rate = report.row(ONE_TO_ONE, &notify::delivered("200 B"))?;
    let lost = report.row(ONE_TO_ONE, &notify::lost("200 B"))?;
    let ratio = rate.ratio_of(system, System::Nats);
    let runs = lost.values(system);
    let loss = runs.iter().copied().fold(0.0, f64::max);
    Some(TargetCheck {
        target: format!("notifications 200 B over {over}: ≥ 1.5× NATS delivered msg/s, zero loss"),
        met: ratio.map(|r| r >= 1.5 && loss == 0.0 && !runs.is_empty()),
        detail: format!(
            "{}; worst loss {loss:.3} %",
            versus(rate, system, System::Nats, Format::Count, "msg/s")
        ),
    })
}

// Issue 13's targets for the WebSocket path, each against the same run's
// NATS or Unix figure.

fn websocket_window(report: &Report) -> Option<TargetCheck> {
    let rate = report.row(IN_FLIGHT, Figure::Rate.name())?;
    let ratio = rate.ratio_of(System::HubWs, System::Nats);
    Some(TargetCheck {
        target: "64 requests in flight over WebSocket: ≥ 2× NATS throughput".into(),
        met: ratio.map(|r| r >= 2.0),
        detail: versus(rate, System::HubWs, System::Nats, Format::Count, "req/s"),
    })
}

fn websocket_cpu(report: &Report) -> Option<TargetCheck> {
    let cpu = report.row(CPU_PER_MESSAGE, &notify::server_cpu_delivered("200 B"))?;
    let ratio = cpu.ratio_of(System::HubWs, System::HubUnix);
    Some(TargetCheck {
        target: "server CPU per notification over WebSocket: ≤ 1.3× the Unix socket's".into(),
        met: ratio.map(|r| r <= 1.3),
        detail: versus(
            cpu,
            System::HubWs,
            System::HubUnix,
            Format::Decimal(2),
            "CPU-s per 1M",
        ),
    })
}

fn request_p50(report: &Report) -> Option<TargetCheck> {
    let p50 = report.row(SEQUENTIAL, Figure::P50.name())?;
    let (hub, nats, floor) = (
        p50.median(System::HubUnix),
        p50.median(System::Nats),
        p50.median(System::Floor),
    );
    let micros = Format::Decimal(1);
    Some(TargetCheck {
        target: "request/reply p50: ≤ NATS p50 and ≤ 1.3× floor p50".into(),
        met: match (hub, nats, floor) {
            (Some(h), Some(n), Some(f)) => Some(h <= n && h <= 1.3 * f),
            _ => None,
        },
        detail: format!(
            "hub {} µs, NATS {} µs, floor {} µs (hub/floor {})",
            micros.show_or_dash(hub),
            micros.show_or_dash(nats),
            micros.show_or_dash(floor),
            Format::Decimal(2).show_or_dash(p50.ratio(System::Floor))
        ),
    })
}

fn window(report: &Report) -> Option<TargetCheck> {
    let rate = report.row(IN_FLIGHT, Figure::Rate.name())?;
    let p99 = report.row(IN_FLIGHT, Figure::P99.name())?;
    let met = match (rate.ratio(System::Nats), p99.ratio(System::Nats)) {
        (Some(r), Some(p)) => Some(r >= 1.0 && p <= 1.0),
        _ => None,
    };
    let hub_nats = |row: &Row, format: Format| {
        (
            format.show_or_dash(row.median(System::HubUnix)),
            format.show_or_dash(row.median(System::Nats)),
        )
    };
    let (rate_hub, rate_nats) = hub_nats(rate, Format::Count);
    let (p99_hub, p99_nats) = hub_nats(p99, Format::Decimal(1));
    Some(TargetCheck {
        target: "64 requests in flight: ≥ NATS throughput, p99 ≤ NATS p99".into(),
        met,
        detail: format!("{rate_hub} vs {rate_nats} req/s; p99 {p99_hub} vs {p99_nats} µs"),
    })
}

fn idle_memory(report: &Report) -> Option<TargetCheck> {
    let idle: Vec<&Row> = report
        .rows
        .iter()
        .filter(|r| r.figure.starts_with(IDLE_FIGURE))
        .collect();
    if idle.is_empty() {
        return None;
    }
    let worst = idle
        .iter()
        .filter_map(|r| r.median(System::HubUnix))
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let step = format!("{IDLE_FIGURE}, ");
    Some(TargetCheck {
        target: "≤ 32 KiB of hub memory per idle connection".into(),
        met: worst.map(|w| w <= 32.0 * 1024.0),
        detail: idle
            .iter()
            .map(|r| {
                format!(
                    "{}: {} B",
                    r.figure.trim_start_matches(&step),
                    Format::Count.show_or_dash(r.median(System::HubUnix))
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    })
}

fn unrelated_services(report: &Report) -> Option<TargetCheck> {
    let change = report.row(SCALE, CHANGE_FIGURE)?;
    let hub = change.median(System::HubUnix);
    let no_loss = report
        .row(SCALE, &notify::lost(UNRELATED))
        .is_some_and(|l| l.values(System::HubUnix).iter().all(|&v| v == 0.0));
    Some(TargetCheck {
        target: format!(
            "throughput unchanged with 10,000 unrelated services (≥ {:.0} % of baseline, zero loss)",
            WITHIN_NOISE * 100.0
        ),
        met: hub.map(|h| h >= WITHIN_NOISE * 100.0 && no_loss),
        detail: format!("{} % of baseline", Format::Decimal(1).show_or_dash(hub)),
    })
}

fn snapshot(report: &Report) -> Option<TargetCheck> {
    let hub = report.row(SCALE, SNAPSHOT_FIGURE)?.median(System::HubUnix);
    Some(TargetCheck {
        target: "subscribe snapshot of 10,000 services < 20 ms".into(),
        met: hub.map(|h| h < 20.0),
        detail: format!("{} ms", Format::Decimal(2).show_or_dash(hub)),
    })
}

/// "A cross-hub request adds at most 2x the latency of one direct NATS
/// request/reply": what the second hub and NATS add is the request's p50
/// across two hubs less the same request's p50 through one hub (the same
/// run's workload 3 or 4); without that figure the whole p50 counts.
fn across_requests(report: &Report) -> [Option<TargetCheck>; 2] {
    [("sequential", SEQUENTIAL), ("64 in flight", IN_FLIGHT)].map(|(label, local_workload)| {
        let figure = format!("{}{}", federation::request_lead(label), Figure::P50.name());
        let p50 = report.row(ACROSS_HUBS, &figure)?;
        let across = p50.median(System::HubUnix);
        let nats = p50.median(System::Nats);
        let local = report
            .row(local_workload, Figure::P50.name())
            .and_then(|row| row.median(System::HubUnix));
        let added = across.map(|a| a - local.unwrap_or(0.0));
        let ratio = match (added, nats) {
            (Some(added), Some(nats)) if nats > 0.0 => Some(added / nats),
            _ => None,
        };
        let micros = Format::Decimal(1);
        Some(TargetCheck {
            target: format!(
                "a request across two hubs ({label}): adds ≤ 2× the p50 of a direct NATS request/reply"
            ),
            met: ratio.map(|r| r <= 2.0),
            detail: format!(
                "{} µs across less {} µs through one hub = {} µs added; {}; the whole path {}×",
                micros.show_or_dash(across),
                micros.show_or_dash(local),
                micros.show_or_dash(added),
                versus_figures(added, nats, micros, "µs", ratio),
                Format::Decimal(2).show_or_dash(p50.ratio(System::Nats)),
            ),
        })
    })
}

fn across_notifications(report: &Report) -> Option<TargetCheck> {
    let rate = report.row(ACROSS_HUBS, &notify::delivered(federation::NOTIFY))?;
    let ratio = rate.ratio(System::Nats);
    Some(TargetCheck {
        target: "notifications across two hubs: ≥ 0.5× direct NATS publish".into(),
        met: ratio.map(|r| r >= 0.5),
        detail: versus(rate, System::HubUnix, System::Nats, Format::Count, "msg/s"),
    })
}

/// `A vs B UNIT = R×` for `row`'s medians of `a` and `b`.
fn versus(row: &Row, a: System, b: System, format: Format, unit: &str) -> String {
    versus_figures(
        row.median(a),
        row.median(b),
        format,
        unit,
        row.ratio_of(a, b),
    )
}

/// `A vs B UNIT = R×`, each figure in `format` (— when missing).
fn versus_figures(
    a: Option<f64>,
    b: Option<f64>,
    format: Format,
    unit: &str,
    ratio: Option<f64>,
) -> String {
    format!(
        "{} vs {} {unit} = {}×",
        format.show_or_dash(a),
        format.show_or_dash(b),
        Format::Decimal(2).show_or_dash(ratio)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_checked_when_its_rows_are_there() {
        let mut report = Report::default();
        check(&mut report);
        assert!(report.targets.is_empty());

        let mut rate = notify::delivered_row(ONE_TO_ONE, "200 B");
        let mut lost = notify::lost_row(ONE_TO_ONE, "200 B");
        for (system, msgs) in [
            (System::HubUnix, 2_311_698.0),
            (System::HubWs, 1_161_648.0),
            (System::Nats, 890_058.0),
        ] {
            rate.push(system, msgs);
            lost.push(system, 0.0);
        }
        report.rows = vec![rate, lost];
        check(&mut report);
        let shown: Vec<_> = report
            .targets
            .iter()
            .map(|t| (t.target.as_str(), t.met, t.detail.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    "notifications 200 B over the Unix socket: ≥ 1.5× NATS delivered msg/s, zero loss",
                    Some(true),
                    "2,311,698 vs 890,058 msg/s = 2.60×; worst loss 0.000 %"
                ),
                (
                    "notifications 200 B over WebSocket: ≥ 1.5× NATS delivered msg/s, zero loss",
                    Some(false),
                    "1,161,648 vs 890,058 msg/s = 1.31×; worst loss 0.000 %"
                ),
            ]
        );
    }
}
