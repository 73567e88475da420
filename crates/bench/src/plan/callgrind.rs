//! The last row of workload 6: instructions per notification, counted by
//! callgrind on a fresh server each time.

use super::notify::CPU_PER_MESSAGE;
use super::Plan;
use crate::measure::{progress, Measurement, Take, Taken};
use crate::report::{Format, Report, Row};
use crate::systems::System;
use crate::workloads::callgrind::{self, Counted};

pub(super) async fn instructions(plan: &Plan, report: &mut Report) {
    if !callgrind::valgrind_available() {
        report
            .notes
            .push("valgrind is not installed: no instruction counts in this run".into());
        return;
    }
    let durations = plan.durations();
    let notifications = durations.callgrind_notifications;
    let rows = vec![Row::new(
        CPU_PER_MESSAGE,
        &format!(
            "instructions per notification, 200 B (callgrind, N = {})",
            Format::Count.show(notifications as f64)
        ),
        Format::Count,
        true,
    )];
    let takes = [
        (Counted::Hub, System::HubUnix, &plan.bins.hub),
        (Counted::HubWs, System::HubWs, &plan.bins.hub),
        (Counted::Floor, System::Floor, &plan.bins.floor),
    ]
    .into_iter()
    .filter(|(_, system, _)| plan.systems.contains(system))
    .map(|(counted, system, bin)| {
        let name = format!("callgrind {}", system.label());
        let out_dir = &plan.callgrind_dir;
        Take::new(system, name, 0..1, move |run| async move {
            // Valgrind is slow: say what is running.
            progress(&format!(
                "{CPU_PER_MESSAGE}: callgrind {} run {run}",
                system.label()
            ));
            let outcome = callgrind::measure(counted, bin, notifications, out_dir, run).await?;
            let detail = format!(
                "{:.0} instructions per notification ({} − {})",
                outcome.per_notification(),
                outcome.with,
                outcome.without
            );
            Ok(Taken::new(vec![outcome.per_notification()], detail))
        })
    })
    .collect();
    Measurement { rows, takes }
        .record(durations.callgrind_runs, report)
        .await;
    report.notes.push(format!(
        "Instructions per notification: the server runs under `valgrind --tool=callgrind` twice with the same \
         script (connect a receiver and a sender, register, send N notifications of 200 B in steps of 1,000 \
         (64 KiB writes, or one frame each flushed per step on the WebSocket, each step awaited so nothing is \
         shed), disconnect, SIGTERM), once with N and once with 0 notifications; the figure is \
         (Ir(N) − Ir(0)) / N, so start-up, connections and shutdown cancel out. Output files: `{}`.",
        plan.callgrind_dir.display()
    ));
}
