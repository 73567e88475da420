//! Workloads 3 and 4: request/reply, one at a time and 64 in flight.

use std::rc::Rc;

use super::Plan;
use crate::measure::{tag, Measurement, Take, Taken};
use crate::report::{Format, Report, Row};
use crate::systems::System;
use crate::workloads::request::{self, RequestOutcome, RequestSpec};
use crate::workloads::{Placement, Servers};

pub(super) const SEQUENTIAL: &str = "3. request/reply, sequential";
pub(super) const IN_FLIGHT: &str = "4. request/reply, 64 in flight";

/// Requests in flight in workload 4.
pub(super) const WINDOW: usize = 64;
/// Bytes of each request's payload.
pub(super) const PAYLOAD: usize = 200;

/// A figure read from a request run.
#[derive(Debug, Clone, Copy)]
pub(super) enum Figure {
    Rate,
    P50,
    P99,
    P999,
    ServerCpu,
}

impl Figure {
    pub fn name(self) -> &'static str {
        match self {
            Figure::Rate => "requests/s",
            Figure::P50 => "p50 µs",
            Figure::P99 => "p99 µs",
            Figure::P999 => "p99.9 µs",
            Figure::ServerCpu => "server CPU µs per request",
        }
    }

    fn format(self) -> Format {
        match self {
            Figure::Rate => Format::Count,
            Figure::P50 | Figure::P99 | Figure::P999 => Format::Decimal(1),
            Figure::ServerCpu => Format::Decimal(2),
        }
    }

    fn read(self, outcome: &RequestOutcome) -> f64 {
        match self {
            Figure::Rate => outcome.per_sec(),
            Figure::P50 => outcome.quantile_us(0.5),
            Figure::P99 => outcome.quantile_us(0.99),
            Figure::P999 => outcome.quantile_us(0.999),
            Figure::ServerCpu => outcome.cpu.server / outcome.completed as f64 * 1e6,
        }
    }
}

/// Request runs of one spec on some systems, and the figures read from
/// them, in the order of their rows.
pub(super) struct Requests<'a> {
    pub servers: &'a Servers,
    pub spec: RequestSpec,
    pub systems: Vec<System>,
    pub figures: &'static [Figure],
    /// Starts each run's tag (see [`tag`]).
    pub prefix: String,
    /// Starts each take's name; the system's label follows.
    pub name: String,
}

impl<'a> Requests<'a> {
    /// Rows under `workload`, each named `{lead}{figure}`, and a take on
    /// each system (see [`Take::each`]).
    pub fn measurement(self, workload: &str, lead: &str) -> Measurement<'a> {
        let figures = self.figures;
        let rows = figures
            .iter()
            .map(|f| Row::new(workload, &format!("{lead}{}", f.name()), f.format(), true))
            .collect();
        let (servers, spec, prefix) = (self.servers, Rc::new(self.spec), self.prefix);
        let takes = Take::each(
            &self.systems,
            &self.name,
            0..figures.len(),
            move |system, run| {
                let (spec, tag) = (spec.clone(), tag(&prefix, run, system));
                async move {
                    let outcome = request::run(servers, system, &spec, &tag).await?;
                    let detail = format!(
                        "{:.0} req/s, p50 {:.1} µs, p99 {:.1} µs",
                        outcome.per_sec(),
                        outcome.quantile_us(0.5),
                        outcome.quantile_us(0.99)
                    );
                    let values = figures.iter().map(|f| f.read(&outcome)).collect();
                    Ok(Taken::new(values, detail))
                }
            },
        );
        Measurement { rows, takes }
    }
}

/// Workload 3 (`window` 1) or 4 (`window` [`WINDOW`]) on every system,
/// client and service on the one hub.
pub(super) async fn one_hub(servers: &Servers, plan: &Plan, window: usize, report: &mut Report) {
    use Figure::*;
    let durations = plan.durations();
    let (workload, duration, figures): (_, _, &[Figure]) = if window == 1 {
        let figures = &[P50, P99, P999, Rate, ServerCpu];
        (SEQUENTIAL, durations.sequential, figures)
    } else {
        (IN_FLIGHT, durations.window, &[Rate, P50, P99, ServerCpu])
    };
    Requests {
        servers,
        spec: RequestSpec {
            window,
            duration,
            payload_size: PAYLOAD,
            placement: Placement::OneHub,
        },
        systems: plan.systems.clone(),
        figures,
        prefix: format!("w{window}"),
        name: workload.to_owned(),
    }
    .measurement(workload, "")
    .record(plan.runs, report)
    .await;
}
