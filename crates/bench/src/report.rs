//! The results table (markdown), the targets, and the machine description.

use std::fmt::Write as _;

use crate::stats::median;
use crate::systems::System;

/// How a figure is printed.
#[derive(Debug, Clone, Copy)]
pub enum Format {
    /// An integer with thousands separators.
    Count,
    /// A number with this many decimals.
    Decimal(usize),
}

impl Format {
    pub fn show(self, value: f64) -> String {
        match self {
            Format::Count => thousands(value.round() as i128),
            Format::Decimal(places) => {
                if value.abs() >= 1000.0 {
                    let whole = thousands(value.trunc() as i128);
                    let frac = format!("{:.*}", places, value.fract().abs());
                    if places == 0 {
                        thousands(value.round() as i128)
                    } else {
                        format!("{whole}{}", &frac[1..])
                    }
                } else {
                    format!("{value:.places$}")
                }
            }
        }
    }

    /// `value` shown, or — when there is none.
    pub fn show_or_dash(self, value: Option<f64>) -> String {
        value.map_or_else(|| "—".to_owned(), |v| self.show(v))
    }
}

fn thousands(value: i128) -> String {
    let digits = value.unsigned_abs().to_string();
    let mut out = String::new();
    // The first group takes what is left over from groups of three.
    let mut until_comma = match digits.len() % 3 {
        0 => 3,
        n => n,
    };
    for c in digits.chars() {
        if until_comma == 0 {
            out.push(',');
            until_comma = 3;
        }
        out.push(c);
        until_comma -= 1;
    }
    if value < 0 {
        out.insert(0, '-');
    }
    out
}

/// One line of the table: a figure for each system (median of its runs).
#[derive(Debug, Clone)]
pub struct Row {
    pub workload: String,
    pub figure: String,
    pub format: Format,
    /// Whether hub/NATS and hub/floor ratios mean something for this figure.
    pub ratios: bool,
    /// Per system (in [`System::ALL`] order), the value of every run.
    pub runs: [Vec<f64>; 4],
}

impl Row {
    pub fn new(workload: &str, figure: &str, format: Format, ratios: bool) -> Self {
        Row {
            workload: workload.to_owned(),
            figure: figure.to_owned(),
            format,
            ratios,
            runs: Default::default(),
        }
    }

    pub fn push(&mut self, system: System, value: f64) {
        self.runs[index(system)].push(value);
    }

    pub fn median(&self, system: System) -> Option<f64> {
        median(&self.runs[index(system)])
    }

    /// Every run's value for `system`.
    pub fn values(&self, system: System) -> &[f64] {
        &self.runs[index(system)]
    }

    fn cell(&self, system: System) -> String {
        self.format.show_or_dash(self.median(system))
    }

    /// hub (Unix) ÷ `other`.
    pub fn ratio(&self, other: System) -> Option<f64> {
        self.ratio_of(System::HubUnix, other)
    }

    /// `system` ÷ `other`.
    pub fn ratio_of(&self, system: System, other: System) -> Option<f64> {
        let system = self.median(system)?;
        let other = self.median(other)?;
        (self.ratios && other != 0.0).then_some(system / other)
    }
}

fn index(system: System) -> usize {
    System::ALL
        .iter()
        .position(|&s| s == system)
        .expect("every system is in ALL")
}

/// A target from the issue and whether the run met it.
#[derive(Debug, Clone)]
pub struct TargetCheck {
    pub target: String,
    /// `None`: not measured in this run.
    pub met: Option<bool>,
    pub detail: String,
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub title: String,
    pub machine: Vec<(String, String)>,
    pub rows: Vec<Row>,
    pub targets: Vec<TargetCheck>,
    pub notes: Vec<String>,
}

impl Report {
    pub fn row(&self, workload: &str, figure: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.workload == workload && r.figure == figure)
    }

    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# {}\n", self.title);
        out.push_str("## Machine and run\n\n");
        for (key, value) in &self.machine {
            let _ = writeln!(out, "- **{key}:** {value}");
        }
        out.push_str("\n## Results\n\n");
        out.push_str(
            "Each figure is the median of the runs listed under *Runs*. Ratios are \
             hub (Unix) ÷ the other system: above 1 is better for throughput, below 1 is \
             better for latency, memory, CPU and instructions.\n\n",
        );
        out.push_str(
            "| workload | figure | hub (Unix) | hub (WS) | NATS | floor | hub/NATS | hub/floor |\n",
        );
        out.push_str("|---|---|---:|---:|---:|---:|---:|---:|\n");
        for row in &self.rows {
            let ratio = |other| {
                row.ratio(other)
                    .map_or_else(|| "—".to_owned(), |r| format!("{r:.2}"))
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                row.workload,
                row.figure,
                row.cell(System::HubUnix),
                row.cell(System::HubWs),
                row.cell(System::Nats),
                row.cell(System::Floor),
                ratio(System::Nats),
                ratio(System::Floor),
            );
        }
        if !self.targets.is_empty() {
            out.push_str("\n## Targets\n\n| target | met | measured |\n|---|---|---|\n");
            for check in &self.targets {
                let met = match check.met {
                    Some(true) => "yes",
                    Some(false) => "**no**",
                    None => "not measured",
                };
                let _ = writeln!(out, "| {} | {met} | {} |", check.target, check.detail);
            }
        }
        if !self.notes.is_empty() {
            out.push_str("\n## Notes\n\n");
            for note in &self.notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out.push_str("\n## Runs\n\n");
        for row in &self.rows {
            let mut cells = Vec::new();
            for system in System::ALL {
                let runs = row.values(system);
                if !runs.is_empty() {
                    let values: Vec<String> = runs.iter().map(|&v| row.format.show(v)).collect();
                    cells.push(format!("{}: {}", system.label(), values.join(" / ")));
                }
            }
            let _ = writeln!(
                out,
                "- {} — {}: {}",
                row.workload,
                row.figure,
                cells.join("; ")
            );
        }
        out
    }
}

/// Facts about the machine for the report's header; `handoff` is what a
/// hand-off between processes costs there ([`crate::handoff::describe`]).
pub fn machine_description(handoff: &str) -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown".to_owned(), |m| m.trim().to_owned());
    // All processors, not just the ones this (maybe pinned) process may use.
    let cores = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map_or_else(|_| "?".to_owned(), |s| s.trim().to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .map(|l| l.trim_start_matches("MemTotal:").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    vec![
        ("CPU".into(), model),
        ("cores".into(), format!("{cores} (online: {online})")),
        ("memory".into(), memory),
        ("kernel".into(), format!("Linux {kernel}")),
        ("hand-off".into(), handoff.to_owned()),
        ("rustc".into(), command_line("rustc", &["--version"])),
        (
            "date".into(),
            command_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        ),
        (
            "commit".into(),
            command_line(
                "git",
                &["describe", "--always", "--dirty", "--exclude", "*"],
            ),
        ),
    ]
}

fn command_line(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_shown_with_separators_and_decimals() {
        assert_eq!(Format::Count.show(1234567.4), "1,234,567");
        assert_eq!(Format::Count.show(999.0), "999");
        assert_eq!(Format::Decimal(1).show(12.345), "12.3");
        assert_eq!(Format::Decimal(2).show(1234.5), "1,234.50");
    }

    #[test]
    fn the_table_has_medians_and_hub_ratios() {
        let mut row = Row::new("1. notify", "200 B msg/s", Format::Count, true);
        for v in [100.0, 300.0, 200.0] {
            row.push(System::HubUnix, v);
        }
        row.push(System::Nats, 100.0);
        let report = Report {
            title: "t".into(),
            rows: vec![row],
            ..Report::default()
        };
        let text = report.to_markdown();
        assert!(
            text.contains("| 1. notify | 200 B msg/s | 200 | — | 100 | — | 2.00 | — |"),
            "{text}"
        );
        assert!(text.contains("hub (Unix): 100 / 300 / 200"), "{text}");
    }
}
