//! `hub-fault-client`: one side of a fault-injection test, as its own
//! process so the test can SIGKILL it. Prints one JSON line per event on
//! stdout (flushed at once).
//!
//! - `owner`: registers one service and never answers it. Prints
//!   `{"event":"registered","serviceId"}`, then `{"event":"request","tag","seq"}`
//!   for each request routed to it and `{"event":"cancelled","tag","seq"}`
//!   when the hub cancels one. Exits when its connection ends (`closed`) or
//!   after `--hold-secs`.
//! - `caller`: sends `--requests` requests to `--service` at once, with
//!   params `{"tag","seq"}`, and prints each answer as
//!   `{"event":"answer","tag","seq","result"|"error"|"failure"}`; then
//!   `{"event":"done","answers":N}`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use switchboard_client::{handler_fn, Client, ConnectOptions, Endpoint, Error, RequestOptions};

#[derive(Parser)]
#[command(name = "hub-fault-client")]
struct Args {
    /// The hub directory (its hub.json names the socket and the token).
    #[arg(long, global = true)]
    dir: Option<PathBuf>,
    #[command(subcommand)]
    role: Role,
}

#[derive(Subcommand)]
enum Role {
    /// Register a service and never answer it.
    Owner {
        /// How long a request is held before the owner gives up on it, and
        /// how long the process lives at most.
        #[arg(long, default_value_t = 120)]
        hold_secs: u64,
    },
    /// Send requests to a service, all at once, and print each answer.
    Caller {
        #[arg(long)]
        service: String,
        #[arg(long, default_value_t = 100)]
        requests: u64,
        /// Written into every request's params.
        #[arg(long, default_value = "caller")]
        tag: String,
        /// The hub's `timeoutMs` for each request.
        #[arg(long, default_value_t = 60_000)]
        timeout_ms: u64,
    },
}

/// One event on stdout, written whole and flushed, so a reader of the pipe
/// sees it at once and never a torn line.
fn emit(event: Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{event}");
    let _ = stdout.flush();
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("hub-fault-client: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("hub-fault-client: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let name = match &args.role {
        Role::Owner { .. } => "fault-owner",
        Role::Caller { .. } => "fault-caller",
    };
    let client = Client::connect_with(ConnectOptions {
        endpoint: Endpoint::Dir(args.dir.clone()),
        client_name: name.into(),
    })
    .await
    .context("cannot connect to the hub")?;
    match args.role {
        Role::Owner { hold_secs } => owner(client, Duration::from_secs(hold_secs)).await,
        Role::Caller {
            service,
            requests,
            tag,
            timeout_ms,
        } => caller(client, &service, requests, &tag, timeout_ms).await,
    }
}

async fn owner(client: Client, hold: Duration) -> anyhow::Result<()> {
    let handler = handler_fn(move |request| async move {
        let params: Value = request.params()?;
        let (tag, seq) = (params["tag"].clone(), params["seq"].clone());
        emit(json!({"event": "request", "tag": tag, "seq": seq}));
        tokio::select! {
            () = request.cancelled.cancelled() => {
                emit(json!({"event": "cancelled", "tag": tag, "seq": seq}));
            }
            () = tokio::time::sleep(hold) => {}
        }
        Err(switchboard_client::protocol::jsonrpc::ErrorObject::new(
            switchboard_client::protocol::ErrorCode::InternalError,
            "this owner never answers",
        ))
    });
    let service = client
        .register(&json!({"protocol": "fault-owner"}), handler)
        .await
        .context("cannot register the service")?;
    emit(json!({"event": "registered", "serviceId": service.id(), "clientId": client.client_id()}));
    tokio::select! {
        () = client.closed() => emit(json!({"event": "closed"})),
        () = tokio::time::sleep(hold) => emit(json!({"event": "held", "seconds": hold.as_secs()})),
    }
    Ok(())
}

async fn caller(
    client: Client,
    service: &str,
    requests: u64,
    tag: &str,
    timeout_ms: u64,
) -> anyhow::Result<()> {
    let options = RequestOptions {
        timeout: Some(Duration::from_millis(timeout_ms)),
    };
    let mut calls = tokio::task::JoinSet::new();
    for seq in 0..requests {
        let (client, service, tag) = (client.clone(), service.to_owned(), tag.to_owned());
        calls.spawn(async move {
            let params = serde_json::value::to_raw_value(&json!({"tag": tag, "seq": seq}))
                .expect("JSON params encode");
            let answer = client
                .request_raw(&service, "hold", Some(&params), options)
                .await;
            let mut event = json!({"event": "answer", "tag": tag, "seq": seq});
            match answer {
                Ok(result) => {
                    event["result"] = serde_json::from_str(result.get()).unwrap_or(Value::Null)
                }
                Err(Error::Rpc(error)) => {
                    event["error"] =
                        json!({"code": error.code, "message": error.message, "data": error.data()})
                }
                Err(other) => event["failure"] = json!(other.to_string()),
            }
            emit(event);
        });
    }
    let mut answers = 0;
    while let Some(joined) = calls.join_next().await {
        joined.context("a request task failed")?;
        answers += 1;
    }
    emit(json!({"event": "done", "answers": answers}));
    Ok(())
}
