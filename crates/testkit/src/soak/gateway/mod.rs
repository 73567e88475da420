//! The gateway soak (`switchboard-soak --mode gateway`): the MCP path as
//! users run it, all real processes. A hub (`switchboard serve`) hosts the
//! workspace's MCP test server as a module (`[modules.soak] mcp = [...]`,
//! no grants: the documented way); `--clients` MCP clients each start
//! their own `switchboard mcp` and, for `--duration` seconds, make a mix of
//! calls through it: plain calls (the gateway's fast path), calls with a
//! progress token, slow calls cancelled on the way, `tools/list`, `ping`.
//! Every `--fault-every` seconds, in turn, the MCP server is killed (its
//! `provide-mcp` starts another) or `provide-mcp` itself is (the hub's
//! supervisor starts another). Then a drain, a call from every client that
//! must succeed, and each client hangs up.
//!
//! Checks, each of which fails the run:
//! - every request answered at most once, and every one not cancelled
//!   answered (a result or an error) by the end of the drain;
//! - no answer to an id its session never sent;
//! - every echo answers the text its own session sent (a session's texts
//!   are its own: another session's answer would show);
//! - progress only for a token its session sent;
//! - after the last fault, every client's call succeeds (within 30 s);
//! - each `switchboard mcp` exits within 10 s of its stdin closing;
//! - the hub's RSS and descriptors and the gateways' RSS do not grow
//!   without bound (`growth.rs`).

mod client;

use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::growth::{self, Tolerance, Verdict};
use crate::{procfs, HubProcess};
use client::{drive, Session, EXIT_WAIT, RECOVERY_WAIT};

/// The module's name, and so its tools' namespace.
const MODULE: &str = "soak";
/// How long the module may take to list its tools at the start.
const READY_WAIT: Duration = Duration::from_secs(60);
/// How long the drain waits for the answers still owed.
const DRAIN_WAIT: Duration = Duration::from_secs(40);
/// The hub's RSS and the gateways' may grow by a quarter plus this much
/// between the first and last third: the module restarts in the first
/// third too, so what is left is a leak.
const RSS_TOLERANCE: Tolerance = Tolerance {
    relative: 0.25,
    absolute: 8.0 * 1024.0,
};
const FD_TOLERANCE: Tolerance = Tolerance {
    relative: 0.10,
    absolute: 16.0,
};

#[derive(Debug, Clone)]
pub struct Options {
    pub duration: Duration,
    pub clients: usize,
    /// Actions per second across all clients.
    pub rate: f64,
    /// Time between two faults.
    pub fault_every: Duration,
    /// Where the hub directory, config and logs go.
    pub work: PathBuf,
    /// Samples, one row a second.
    pub csv: PathBuf,
}

/// What the run counted, across all clients.
#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    results: AtomicU64,
    errors: AtomicU64,
    cancelled: AtomicU64,
    progress: AtomicU64,
    duplicates: AtomicU64,
    unknown_ids: AtomicU64,
    wrong_echoes: AtomicU64,
    misrouted_progress: AtomicU64,
}

pub struct Report {
    lines: Vec<String>,
    pub failures: Vec<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.lines {
            writeln!(f, "{line}")?;
        }
        crate::outcome::write(f, &self.failures)
    }
}

/// Runs the soak; `Err` only when it cannot be set up.
pub async fn run(options: Options) -> anyhow::Result<Report> {
    if options.clients == 0 || options.rate <= 0.0 || options.fault_every.is_zero() {
        bail!("--clients, --rate and --fault-every must be positive");
    }
    let server = beside_this_program("mcp-test-server")?;
    std::fs::create_dir_all(&options.work)?;
    let config = options.work.join("switchboard.toml");
    let server_text = serde_json::to_string(&server.to_string_lossy())?;
    std::fs::write(
        &config,
        format!("[modules.{MODULE}]\nmcp = [{server_text}]\n"),
    )?;
    let hub_dir = options.work.join("hub");
    let hub = {
        let (dir, config) = (hub_dir.clone(), config.clone());
        tokio::task::spawn_blocking(move || {
            HubProcess::builder()
                .dir(dir)
                .no_ws()
                .config(&config)
                .start()
        })
        .await
        .context("the hub does not start")?
    };
    let counts = Arc::new(Counts::default());
    let mut lines = vec![format!(
        "[gateway soak] hub pid {}, module {MODULE} hosting {}, {} clients, {:.0} actions/s, a fault every {:?}, {:?}",
        hub.pid(),
        server.display(),
        options.clients,
        options.rate,
        options.fault_every,
        options.duration
    )];
    let mut failures = Vec::new();

    let mut sessions = Vec::new();
    for index in 0..options.clients {
        sessions.push(Session::start(index, &hub_dir, &options.work, counts.clone()).await?);
    }
    sessions[0].wait_for_tools(READY_WAIT).await?;

    let started = Instant::now();
    let traffic_until = started + options.duration;
    let mut csv = std::fs::File::create(&options.csv)
        .with_context(|| format!("cannot create {}", options.csv.display()))?;
    writeln!(csv, "t_s,hub_rss_kib,hub_fds,gateways_rss_kib,owed")?;
    let samples = Arc::new(Mutex::new(Samples::default()));
    let sampler = {
        let (samples, sessions_pids) = (samples.clone(), pids(&sessions));
        let (hub_pid, sessions_ref) = (hub.pid(), sessions.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            while Instant::now() < traffic_until {
                tick.tick().await;
                let sample = Sample::take(hub_pid, &sessions_pids, owed(&sessions_ref));
                let _ = writeln!(
                    csv,
                    "{:.1},{},{},{},{}",
                    started.elapsed().as_secs_f64(),
                    sample.hub_rss,
                    sample.hub_fds,
                    sample.gateways_rss,
                    sample.owed
                );
                samples.lock().push(sample);
            }
        })
    };
    let faults = tokio::spawn(inject_faults(hub.pid(), options.fault_every, traffic_until));
    let per_client = options.rate / options.clients as f64;
    let drivers: Vec<_> = sessions
        .iter()
        .map(|session| tokio::spawn(drive(session.clone(), per_client, traffic_until)))
        .collect();
    for driver in drivers {
        driver.await.context("a client's driver panicked")?;
    }
    let faults_made = faults.await.context("the fault injector panicked")?;
    let _ = sampler.await;
    lines.push(format!("faults: {}", faults_made.join(", ")));

    // Drain: every request not cancelled is answered.
    let drain_until = Instant::now() + DRAIN_WAIT;
    while Instant::now() < drain_until && owed(&sessions) > 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let unanswered = owed(&sessions);
    // After the faults, every client gets a call through.
    for session in &sessions {
        if !session.recovers().await {
            failures.push(format!(
                "client {}: no call succeeded within {RECOVERY_WAIT:?} after the last fault",
                session.index
            ));
        }
    }
    for session in &sessions {
        if !session.hang_up().await {
            failures.push(format!(
                "client {}: switchboard mcp did not exit within {EXIT_WAIT:?} of its stdin closing",
                session.index
            ));
        }
    }

    let c = &*counts;
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    lines.push(format!(
        "sent: {}, results: {}, errors: {}, cancelled: {}, progress: {}",
        load(&c.sent),
        load(&c.results),
        load(&c.errors),
        load(&c.cancelled),
        load(&c.progress)
    ));
    for (name, value) in [
        ("duplicate_answers", load(&c.duplicates)),
        ("answers_to_unknown_ids", load(&c.unknown_ids)),
        ("wrong_echoes", load(&c.wrong_echoes)),
        ("misrouted_progress", load(&c.misrouted_progress)),
        ("unanswered", unanswered as u64),
    ] {
        lines.push(format!("{name}: {value}"));
        if value > 0 {
            failures.push(format!("{name}: {value}"));
        }
    }
    if load(&c.results) == 0 {
        failures.push("no call succeeded".into());
    }
    for verdict in samples.lock().verdicts() {
        lines.push(verdict.to_string());
        if verdict.grew_without_bound() {
            failures.push(verdict.to_string());
        }
    }
    drop(hub);
    Ok(Report { lines, failures })
}

/// `name`, built beside this program (the soak driver and the test server
/// are both `switchboard-testkit`'s).
fn beside_this_program(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe
        .parent()
        .map(|dir| dir.join(name))
        .context("this program has no directory")?;
    if !path.exists() {
        bail!(
            "{} is missing (cargo build --release -p switchboard-testkit --bin {name})",
            path.display()
        );
    }
    Ok(path)
}

fn pids(sessions: &[Arc<Session>]) -> Vec<u32> {
    sessions.iter().map(|session| session.pid).collect()
}

fn owed(sessions: &[Arc<Session>]) -> usize {
    sessions.iter().map(|session| session.owed()).sum()
}

/// Kills the MCP server, then `provide-mcp`, in turn, every `every`.
async fn inject_faults(hub: u32, every: Duration, until: Instant) -> Vec<String> {
    let mut made = Vec::new();
    let mut turn = 0;
    loop {
        let next = Instant::now() + every;
        if next >= until {
            return made;
        }
        tokio::time::sleep_until(next).await;
        let modules: Vec<u32> = procfs::children(hub);
        let victims: Vec<u32> = if turn % 2 == 0 {
            modules
                .iter()
                .flat_map(|&module| procfs::children(module))
                .collect()
        } else {
            modules
        };
        let what = if turn % 2 == 0 {
            "server killed"
        } else {
            "provide-mcp killed"
        };
        for pid in &victims {
            // SAFETY: kill(2) on a pid read from /proc just now; a pid
            // reused in between would be another of this user's processes,
            // which the soak's own tree is the only one making here.
            unsafe {
                libc::kill(*pid as libc::pid_t, libc::SIGKILL);
            }
        }
        made.push(format!("{what} ({} pids)", victims.len()));
        turn += 1;
    }
}

#[derive(Default)]
struct Samples(Vec<Sample>);

struct Sample {
    hub_rss: u64,
    hub_fds: u64,
    gateways_rss: u64,
    /// Requests sent and not cancelled that are still unanswered.
    owed: usize,
}

impl Sample {
    fn take(hub: u32, gateways: &[u32], owed: usize) -> Sample {
        Sample {
            hub_rss: procfs::rss_kib(hub).unwrap_or(0),
            hub_fds: procfs::open_fds(hub).unwrap_or(0),
            gateways_rss: gateways
                .iter()
                .map(|&pid| procfs::rss_kib(pid).unwrap_or(0))
                .sum(),
            owed,
        }
    }
}

impl Samples {
    fn push(&mut self, sample: Sample) {
        self.0.push(sample);
    }

    fn verdicts(&self) -> Vec<Verdict> {
        let series = |value: fn(&Sample) -> u64| -> Vec<f64> {
            self.0.iter().map(|sample| value(sample) as f64).collect()
        };
        [
            growth::judge("hub_rss_kib", &series(|s| s.hub_rss), RSS_TOLERANCE),
            growth::judge("hub_fds", &series(|s| s.hub_fds), FD_TOLERANCE),
            growth::judge(
                "gateways_rss_kib",
                &series(|s| s.gateways_rss),
                RSS_TOLERANCE,
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}
