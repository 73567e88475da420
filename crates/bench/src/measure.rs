//! The one measurement loop every workload goes through.
//!
//! A workload says what it measures as a [`Measurement`]: the rows it
//! fills and its takes (one system, one way of measuring it); the loop runs
//! every take once per run and pushes what each yields into its rows, so the
//! table shows the median of the runs. Runs are interleaved (run 1 of every
//! take, then run 2, …) so a slow moment of the machine does not land on one
//! system only. A take that fails is noted in the report and the others go on.

use std::future::Future;
use std::ops::Range;

use futures_util::future::LocalBoxFuture;

use crate::report::{Report, Row};
use crate::systems::System;

/// The rows a workload fills and the takes that fill them.
pub struct Measurement<'a> {
    pub rows: Vec<Row>,
    pub takes: Vec<Take<'a>>,
}

/// One system measured one way, once per run.
pub struct Take<'a> {
    /// The column its values go to.
    system: System,
    /// What it is called in progress lines and in the report's notes.
    name: String,
    /// The rows its values go to, in the order [`Taken::values`] gives them.
    fills: Range<usize>,
    once: Box<dyn Fn(usize) -> LocalBoxFuture<'a, anyhow::Result<Taken>> + 'a>,
}

/// What one run of a take yielded.
pub struct Taken {
    /// One value for each row the take fills, in order.
    pub values: Vec<f64>,
    /// The figures in a few words, for the progress line.
    pub detail: String,
    /// Anything the report should note about this run (a loss and its cause).
    pub notes: Vec<String>,
}

impl Taken {
    pub fn new(values: Vec<f64>, detail: String) -> Self {
        Taken {
            values,
            detail,
            notes: Vec::new(),
        }
    }
}

impl<'a> Take<'a> {
    /// `once(run)` measures `system` for run number `run`.
    pub fn new<F, Fut>(system: System, name: String, fills: Range<usize>, once: F) -> Self
    where
        F: Fn(usize) -> Fut + 'a,
        Fut: Future<Output = anyhow::Result<Taken>> + 'a,
    {
        Take {
            system,
            name,
            fills,
            once: Box::new(move |run| Box::pin(once(run))),
        }
    }

    /// The same take on each of `systems`, named `{name} {system}`:
    /// `once(system, run)` measures `system` for run number `run`.
    pub fn each<F, Fut>(systems: &[System], name: &str, fills: Range<usize>, once: F) -> Vec<Self>
    where
        F: Fn(System, usize) -> Fut + Clone + 'a,
        Fut: Future<Output = anyhow::Result<Taken>> + 'a,
    {
        systems
            .iter()
            .map(|&system| {
                let once = once.clone();
                let name = format!("{name} {}", system.label());
                Take::new(system, name, fills.clone(), move |run| once(system, run))
            })
            .collect()
    }
}

impl Measurement<'_> {
    /// Runs every take `runs` times, interleaved; returns the rows filled.
    pub async fn run(self, runs: usize, report: &mut Report) -> Vec<Row> {
        let Measurement { mut rows, takes } = self;
        for run in 0..runs {
            for take in &takes {
                match (take.once)(run).await {
                    Ok(taken) => {
                        progress(&format!("{} run {run}: {}", take.name, taken.detail));
                        debug_assert_eq!(taken.values.len(), take.fills.len(), "{}", take.name);
                        for (row, value) in rows[take.fills.clone()].iter_mut().zip(taken.values) {
                            row.push(take.system, value);
                        }
                        for note in taken.notes {
                            report
                                .notes
                                .push(format!("{} run {run}: {note}", take.name));
                        }
                    }
                    Err(error) => note_failure(report, &take.name, &error),
                }
            }
        }
        rows
    }

    /// Runs it (see [`Measurement::run`]) and adds its rows to the report.
    pub async fn record(self, runs: usize, report: &mut Report) {
        let rows = self.run(runs, report).await;
        report.rows.extend(rows);
    }
}

/// What makes the names a run registers on a server that outlives it
/// (services, subjects) unique to its take and run.
pub fn tag(prefix: &str, run: usize, system: System) -> String {
    format!("{prefix}-{run}-{}", system as usize)
}

pub fn progress(text: &str) {
    eprintln!("[bench] {text}");
}

fn note_failure(report: &mut Report, what: &str, error: &anyhow::Error) {
    progress(&format!("FAILED {what}: {error:#}"));
    report.notes.push(format!("{what} failed: {error:#}"));
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::report::Format;

    #[tokio::test]
    async fn runs_interleave_and_a_failed_take_is_noted_while_the_rest_go_on() {
        let order = RefCell::new(Vec::new());
        let order = &order;
        let rows = vec![
            Row::new("w", "a", Format::Count, true),
            Row::new("w", "b", Format::Count, true),
        ];
        let mut takes = Take::each(
            &[System::HubUnix, System::Nats],
            "w both",
            0..2,
            |system, run| async move {
                order.borrow_mut().push((system, run));
                let mut taken = Taken::new(vec![run as f64, 10.0], String::new());
                if system == System::Nats {
                    taken.notes.push("lost one".into());
                }
                Ok(taken)
            },
        );
        takes.push(Take::new(
            System::Floor,
            "w floor".into(),
            1..2,
            |run| async move {
                anyhow::ensure!(run == 1, "run {run} broke");
                Ok(Taken::new(vec![7.0], String::new()))
            },
        ));
        let mut report = Report::default();
        let rows = Measurement { rows, takes }.run(2, &mut report).await;

        use System::*;
        assert_eq!(
            *order.borrow(),
            [(HubUnix, 0), (Nats, 0), (HubUnix, 1), (Nats, 1)]
        );
        assert_eq!(rows[0].values(HubUnix), [0.0, 1.0]);
        assert_eq!(rows[1].values(Nats), [10.0, 10.0]);
        assert_eq!(rows[1].values(Floor), [7.0]);
        assert!(rows[0].values(Floor).is_empty());
        assert_eq!(
            report.notes,
            [
                "w both NATS run 0: lost one",
                "w floor failed: run 0 broke",
                "w both NATS run 1: lost one",
            ]
        );
    }
}
