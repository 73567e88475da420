//! `git-sidecar`: serves the objects and refs of local Git repositories on
//! the Switchboard hub, and tells `git-ref-watcher` services when refs move.
//!
//! The service's metadata is
//! `{"protocol": "git-object-reader", "version": 1, "label": "...", "repos": [NAME, ...]}`;
//! its methods are `getRefs {repo, prefix?}`, `getObjects {repo, oids}` and
//! `getStats {}`. See `docs/cli-and-git-sidecar.md` for the shapes.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use serde_json::json;
use switchboard_client::{Client, ConnectOptions, Endpoint};
use tokio::signal::unix::{signal, Signal, SignalKind};

mod cache;
mod objects;
mod refs;
mod repos;
mod service;
mod watch;

use cache::ObjectCache;
use repos::ServedRepos;
use service::GitService;

/// Room left in a hub message for the JSON-RPC envelope around an answer.
const ENVELOPE_BYTES: usize = 4096;
/// Bounds of the wait between two reconnect attempts.
const RECONNECT_FIRST_WAIT: Duration = Duration::from_millis(200);
const RECONNECT_MAX_WAIT: Duration = Duration::from_secs(5);

#[derive(Parser, Debug)]
#[command(
    name = "git-sidecar",
    version,
    about = "Serve the objects and refs of Git repositories on the Switchboard hub",
    long_about = "Serve the objects and refs of Git repositories on the Switchboard hub.\n\n\
        Registers one service with metadata {\"protocol\":\"git-object-reader\",\"version\":1,...} \
        answering getRefs {repo, prefix?} and getObjects {repo, oids}, and sends refsChanged \
        {repo, path, refs: [{name, old, new}]} to every service whose metadata has \
        {\"protocol\":\"git-ref-watcher\"} when refs of a served repository change.\n\n\
        A request names a repository by its directory name (proj for /src/proj) or its path."
)]
struct Args {
    /// A repository to serve: its work tree, its .git directory, or a bare
    /// repository. Repeat to serve several.
    #[arg(long = "repo", value_name = "PATH", required = true)]
    repos: Vec<PathBuf>,
    /// Hub directory (default: $SWITCHBOARD_DIR, else $XDG_RUNTIME_DIR/switchboard,
    /// else /tmp/switchboard-<uid>).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The service's label in the catalog (default: "git: NAME, NAME…").
    #[arg(long)]
    label: Option<String>,
    /// Bytes of object answers kept in memory; the least recently used go first.
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024 * 1024)]
    cache_bytes: usize,
    /// The most bytes one answer may take (default and maximum: what the hub
    /// accepts in one message, less 4 KiB). Objects past it are answered
    /// with a per-object error, to be fetched in another call.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(16 * 1024..))]
    max_answer_bytes: Option<u64>,
}

fn main() -> ExitCode {
    // Started as a hub's module: take the launch credential before any
    // thread exists (see `switchboard_client::launch`).
    let _ = switchboard_client::launch::init();
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("git-sidecar: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("git-sidecar: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let repos = Arc::new(ServedRepos::open(&args.repos)?);
    let client = Client::connect_with(ConnectOptions {
        endpoint: Endpoint::Dir(args.dir.clone()),
        client_name: "git-sidecar".into(),
    })
    .await
    .context("cannot reach the hub")?;
    let answer_budget = Arc::new(AtomicUsize::new(budget_for(&client, &args)?));
    let cache = Arc::new(ObjectCache::new(args.cache_bytes));
    let names = repos.names();
    let label = args
        .label
        .clone()
        .unwrap_or_else(|| format!("git: {}", names.join(", ")));
    let metadata = json!({
        "protocol": "git-object-reader",
        "version": 1,
        "label": label,
        "repos": names,
    });
    // Everything is in place before the service is registered, so a client
    // that sees it in the catalog can rely on it: ref changes from then on
    // are watched, and watchers registered from then on are known.
    let catalog = client
        .catalog()
        .await
        .context("cannot subscribe to the catalog")?;
    let watch = watch::start(repos.clone(), client.clone(), catalog)?;
    let service = GitService::new(repos.clone(), cache, answer_budget.clone(), watch.rereads());
    let handle = client
        .register(&metadata, service)
        .await
        .context("cannot register the service")?;
    tracing::info!(service = %handle.id(), repos = ?names, "serving");

    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            _ = client.closed() => {
                tracing::warn!("the hub connection ended; reconnecting");
                if !reconnect(&client, &mut terminate, &mut interrupt).await {
                    break;
                }
                answer_budget.store(budget_for(&client, &args)?, Ordering::Relaxed);
                tracing::info!(service = %handle.id(), "reconnected");
            }
        }
    }
    client.close();
    Ok(())
}

/// The most bytes one answer may take with the hub we are connected to.
fn budget_for(client: &Client, args: &Args) -> anyhow::Result<usize> {
    let hub_max = usize::try_from(client.limits().max_message_bytes)
        .unwrap_or(usize::MAX)
        .saturating_sub(ENVELOPE_BYTES);
    match args.max_answer_bytes {
        None => Ok(hub_max),
        Some(asked) => match usize::try_from(asked) {
            Ok(asked) if asked <= hub_max => Ok(asked),
            _ => bail!(
                "--max-answer-bytes {asked} is over what the hub accepts in one answer ({hub_max})"
            ),
        },
    }
}

/// Retries until connected again (`true`) or told to stop (`false`).
async fn reconnect(client: &Client, terminate: &mut Signal, interrupt: &mut Signal) -> bool {
    let mut wait = RECONNECT_FIRST_WAIT;
    loop {
        tokio::select! {
            _ = terminate.recv() => return false,
            _ = interrupt.recv() => return false,
            _ = tokio::time::sleep(wait) => {}
        }
        match client.reconnect().await {
            Ok(()) => return true,
            Err(error) => {
                tracing::debug!(%error, "reconnect failed");
                wait = (wait * 2).min(RECONNECT_MAX_WAIT);
            }
        }
    }
}
