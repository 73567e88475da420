//! `switchboard-soak`: the load and soak driver (`bench/soak.sh` runs it).
//!
//! `--mode traffic`: `--clients` clients send a mix of notifications,
//! requests (answered, slow, never answered, failing), cancels,
//! registrations, updates, unregistrations, subscriptions and reconnects for
//! `--duration` seconds, then drain. The hub's RSS, descriptors and gauges
//! are sampled every second into `--csv`. The run fails if any series grows
//! without bound (see `growth.rs`), if any request is answered twice or not
//! at all, or if the hub does not return to its baseline afterwards.
//!
//! `--mode connections`: `--connections` connections held open for
//! `--duration` seconds; reports the hub's memory per connection.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use switchboard_testkit::sampler::Recorder;
use switchboard_testkit::target::HubTarget;
use switchboard_testkit::{connections, procfs, soak};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Traffic,
    Connections,
}

#[derive(Parser, Debug)]
#[command(
    name = "switchboard-soak",
    about = "Load and soak driver for a running Switchboard hub"
)]
struct Args {
    /// Directory of the running hub (it must serve --ws, for /metrics).
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, value_enum, default_value = "traffic")]
    mode: Mode,
    /// Seconds of traffic (traffic mode) or of holding (connections mode).
    #[arg(long, default_value_t = 600)]
    duration: u64,
    /// Traffic mode: concurrent clients.
    #[arg(long, default_value_t = 200)]
    clients: usize,
    /// Traffic mode: actions per second across all clients.
    #[arg(long, default_value_t = 4000.0)]
    rate: f64,
    /// Connections mode: connections to hold (at least 2).
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// Connections mode: connections being opened at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Where the per-second samples go.
    #[arg(long, default_value = "soak.csv")]
    csv: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("switchboard-soak: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("switchboard-soak: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `Ok(passed)`.
async fn run(args: Args) -> anyhow::Result<bool> {
    let limit = procfs::raise_nofile_limit().context("cannot raise RLIMIT_NOFILE")?;
    let target = HubTarget::open(&args.dir)?;
    let recorder = Recorder::create(&args.csv)?;
    let duration = Duration::from_secs(args.duration);
    eprintln!(
        "[soak] hub pid {} on {}; samples to {}",
        target.pid(),
        args.dir.display(),
        args.csv.display()
    );
    match args.mode {
        Mode::Traffic => {
            if args.clients == 0 || args.rate <= 0.0 {
                bail!("--clients and --rate must be positive");
            }
            let options = soak::Options {
                clients: args.clients,
                duration,
                rate: args.rate,
            };
            let report = soak::run(&target, options, recorder).await?;
            print!("{report}");
            Ok(report.failures.is_empty())
        }
        Mode::Connections => {
            if args.connections < 2 {
                bail!("--connections must be at least 2");
            }
            let needed = args.connections as u64 + 64;
            if limit < needed {
                bail!(
                    "RLIMIT_NOFILE is {limit}; {} connections need about {needed} (raise the hard limit: ulimit -Hn)",
                    args.connections
                );
            }
            let options = connections::Options {
                connections: args.connections,
                hold: duration,
                concurrency: args.concurrency.max(1),
            };
            let report = connections::run(&target, options, recorder).await?;
            print!("{report}");
            Ok(report.failures.is_empty())
        }
    }
}
