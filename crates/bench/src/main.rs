//! `switchboard-bench`: the hub against NATS and against the floor, in one
//! run. `bench/run.sh` builds everything and calls this; see
//! `docs/performance.md`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Parser;
use switchboard_bench::plan::{self, Bins, Plan, Workload};
use switchboard_bench::process;
use switchboard_bench::systems::System;
use switchboard_testkit::procfs;

#[derive(Parser)]
#[command(
    name = "switchboard-bench",
    about = "Benchmarks the Switchboard hub against NATS and a raw socket relay"
)]
struct Args {
    /// Short runs (the whole benchmark in about three minutes on 2 cores).
    #[arg(long)]
    quick: bool,
    /// Servers on CPU 0, the harness on CPU 1.
    #[arg(long)]
    pin: bool,
    /// Runs per figure (the table shows the median).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Only these workloads (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Workload>,
    /// Only these systems (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    systems: Vec<System>,
    /// The hub binary (default: `switchboard` next to this one).
    #[arg(long)]
    hub_bin: Option<PathBuf>,
    /// The floor binary (default: `switchboard-floor` next to this one).
    #[arg(long)]
    floor_bin: Option<PathBuf>,
    /// nats-server (default: $NATS_SERVER, else on PATH, else target/bench-venv/bin).
    #[arg(long)]
    nats_bin: Option<PathBuf>,
    /// Where the markdown table is written.
    #[arg(long, default_value = "bench/results/latest.md")]
    out: PathBuf,
    /// Where callgrind output files are kept.
    #[arg(long, default_value = "target/bench-callgrind")]
    callgrind_dir: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let limit = procfs::raise_nofile_limit().context("cannot raise RLIMIT_NOFILE")?;
    if limit < 10_500 {
        eprintln!(
            "[bench] warning: RLIMIT_NOFILE is {limit}; 10,000 idle connections need about 10,500 per process (raise the hard limit: ulimit -Hn)"
        );
    }
    // Before the harness pins itself: `cat` and the harness then run where
    // the kernel puts them, as unpinned processes' hand-offs do.
    let handoff = switchboard_bench::handoff::describe();
    let workers = if args.pin {
        if process::allowed_cpus() < 2 {
            bail!("--pin needs two CPUs");
        }
        // Before the runtime exists, so every runtime thread inherits it.
        process::pin_current_thread(1).context("cannot pin the harness to CPU 1")?;
        1
    } else {
        process::allowed_cpus()
    };
    let exe_dir = std::env::current_exe()?
        .parent()
        .map(Path::to_path_buf)
        .context("the harness binary has no directory")?;
    let bins = Bins {
        hub: args
            .hub_bin
            .clone()
            .unwrap_or_else(|| exe_dir.join("switchboard")),
        floor: args
            .floor_bin
            .clone()
            .unwrap_or_else(|| exe_dir.join("switchboard-floor")),
        nats: args
            .nats_bin
            .clone()
            .map_or_else(|| find_nats(&exe_dir), Ok)?,
        mcp_test_server: exe_dir.join("mcp-test-server"),
        // target/measure → the workspace root, where `.ci/run` installs it.
        everything: plan::find_everything(&exe_dir.join("../..")),
    };
    for (what, path) in [
        ("hub", &bins.hub),
        ("floor", &bins.floor),
        ("nats-server", &bins.nats),
    ] {
        if !path.exists() {
            bail!(
                "{what} binary {} does not exist (build with `cargo build --release`)",
                path.display()
            );
        }
    }
    let plan = Plan {
        quick: args.quick,
        pin: args.pin,
        runs: args.runs,
        bins,
        workloads: if args.only.is_empty() {
            Workload::ALL.to_vec()
        } else {
            args.only.clone()
        },
        systems: if args.systems.is_empty() {
            System::ALL.to_vec()
        } else {
            args.systems.clone()
        },
        callgrind_dir: std::path::absolute(&args.callgrind_dir)?,
        handoff,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        tokio::spawn(stop_children_on_signal());
        plan::run(&plan).await
    })?;
    let text = report.to_markdown();
    if let Some(parent) = args.out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.out, &text)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("{text}");
    eprintln!("[bench] written to {}", args.out.display());
    Ok(())
}

fn find_nats(exe_dir: &Path) -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("NATS_SERVER") {
        return Ok(path.into());
    }
    if let Some(paths) = std::env::var_os("PATH") {
        if let Some(found) = std::env::split_paths(&paths)
            .map(|dir| dir.join("nats-server"))
            .find(|p| p.is_file())
        {
            return Ok(found);
        }
    }
    // target/measure/switchboard-bench → target/bench-venv/bin/nats-server
    let venv = exe_dir.join("../bench-venv/bin/nats-server");
    if venv.is_file() {
        return Ok(venv);
    }
    bail!("nats-server not found: install it (bench/run.sh does) or pass --nats-bin")
}

/// A signal to the harness stops every server it started, by PID.
async fn stop_children_on_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    eprintln!("[bench] interrupted: stopping the servers");
    process::kill_children();
    std::process::exit(130);
}
