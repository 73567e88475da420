//! Once a second: the hub's RSS and descriptors (from `/proc`) and its
//! gauges (from `/metrics`), with the driver's own counters, appended to a
//! CSV file and kept for the growth rule.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::procfs;
use crate::target::HubTarget;

pub const INTERVAL: Duration = Duration::from_secs(1);

/// What the hub looked like at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HubSample {
    pub rss_kib: u64,
    pub fds: u64,
    pub in_flight: u64,
    pub connections: u64,
    pub services: u64,
    pub subscribers: u64,
    pub queued_bytes: u64,
}

/// What the driver had done by that moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DriverCounts {
    pub requests_sent: u64,
    pub requests_answered: u64,
    pub notifications_sent: u64,
    pub client_connections: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the recorder started.
    pub t_s: f64,
    pub phase: &'static str,
    pub hub: HubSample,
    pub driver: DriverCounts,
}

const HEADER: &str = "t_s,phase,rss_kib,fds,in_flight,connections,services,subscribers,queued_bytes,requests_sent,requests_answered,notifications_sent,client_connections";

/// Reads the hub once.
pub async fn sample_hub(target: &HubTarget) -> anyhow::Result<HubSample> {
    let pid = target.pid();
    let rss_kib = procfs::rss_kib(pid).with_context(|| format!("VmRSS of hub pid {pid}"))?;
    let fds = procfs::open_fds(pid).with_context(|| format!("descriptors of hub pid {pid}"))?;
    let metrics = target.metrics().await?;
    Ok(HubSample {
        rss_kib,
        fds,
        in_flight: metrics.value("switchboard_requests_in_flight"),
        connections: metrics.value("switchboard_connections"),
        services: metrics.value("switchboard_services"),
        subscribers: metrics.value("switchboard_catalog_subscribers"),
        queued_bytes: metrics.value("switchboard_queued_bytes"),
    })
}

/// The hub before a run, recorded as its first sample. Every figure of a run
/// is a difference from it, so the hub must be idle: no connections.
pub async fn idle_baseline(target: &HubTarget, recorder: &Recorder) -> anyhow::Result<HubSample> {
    let baseline = sample_hub(target).await?;
    if baseline.connections != 0 {
        anyhow::bail!(
            "the hub already has {} connections; runs are measured against an idle hub",
            baseline.connections
        );
    }
    recorder.record(baseline, DriverCounts::default());
    Ok(baseline)
}

/// Every sample of a run, also written to a CSV file as it is taken.
pub struct Recorder {
    started: Instant,
    phase: Mutex<&'static str>,
    samples: Mutex<Vec<Sample>>,
    csv: Mutex<std::fs::File>,
}

impl Recorder {
    pub fn create(csv: &Path) -> anyhow::Result<Arc<Recorder>> {
        let mut file = std::fs::File::create(csv)
            .with_context(|| format!("cannot create {}", csv.display()))?;
        writeln!(file, "{HEADER}")?;
        Ok(Arc::new(Recorder {
            started: Instant::now(),
            phase: Mutex::new("baseline"),
            samples: Mutex::new(Vec::new()),
            csv: Mutex::new(file),
        }))
    }

    /// Labels the samples taken from now on.
    pub fn set_phase(&self, phase: &'static str) {
        *self.phase.lock() = phase;
    }

    pub fn record(&self, hub: HubSample, driver: DriverCounts) -> Sample {
        let sample = Sample {
            t_s: self.started.elapsed().as_secs_f64(),
            phase: *self.phase.lock(),
            hub,
            driver,
        };
        let line = format!(
            "{:.1},{},{},{},{},{},{},{},{},{},{},{},{}",
            sample.t_s,
            sample.phase,
            hub.rss_kib,
            hub.fds,
            hub.in_flight,
            hub.connections,
            hub.services,
            hub.subscribers,
            hub.queued_bytes,
            driver.requests_sent,
            driver.requests_answered,
            driver.notifications_sent,
            driver.client_connections
        );
        let mut csv = self.csv.lock();
        let _ = writeln!(csv, "{line}");
        let _ = csv.flush();
        self.samples.lock().push(sample);
        sample
    }

    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().clone()
    }

    /// Samples of one phase.
    pub fn phase_samples(&self, phase: &str) -> Vec<Sample> {
        self.samples
            .lock()
            .iter()
            .filter(|s| s.phase == phase)
            .copied()
            .collect()
    }
}

/// Samples every [`INTERVAL`] until `stop` turns true. A failed sample is
/// reported on stderr and skipped (the hub may be busy past the bound once);
/// the caller checks that samples were taken.
pub async fn run(
    target: HubTarget,
    recorder: Arc<Recorder>,
    counts: impl Fn() -> DriverCounts,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|stop| *stop) => return,
        }
        match sample_hub(&target).await {
            Ok(hub) => {
                recorder.record(hub, counts());
            }
            Err(error) => eprintln!("[soak] sample skipped: {error:#}"),
        }
    }
}

/// Waits (at most `wait`) until the hub is back to its baseline: no
/// connection, no service, nothing in flight or queued, and no more
/// descriptors than `baseline`. Returns the sample that showed it.
pub async fn settle(target: &HubTarget, baseline: &HubSample, wait: Duration) -> Option<HubSample> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Ok(now) = sample_hub(target).await {
            if now.connections == 0
                && now.services == 0
                && now.in_flight == 0
                && now.queued_bytes == 0
                && now.fds <= baseline.fds
            {
                return Some(now);
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
