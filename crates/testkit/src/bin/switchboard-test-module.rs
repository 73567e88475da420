//! `switchboard-test-module`: a small module for the supervision tests
//! (`crates/cli/tests/cli/modules.rs`), run by a hub from its
//! `[modules.NAME]` config. It connects with the SDK (so with the launch
//! credential the hub handed it), registers one service
//! `{"protocol":"test-module","label":LABEL}` and answers requests that let
//! a test drive it through the hub:
//!
//! - `whoami` → `{pid, principal, clientId}`;
//! - `leakCredential` → `{credential}`: a module that gives its secret away;
//! - `forkChild` → `{pid}`: starts `sleep 3600` as a child;
//! - `childPresents` → `{accepted, principal?, code?}`: a child process of
//!   this module connects with this module's credential;
//! - `present {credential}` → `{accepted, principal?, code?}`: this process
//!   opens a second connection with the credential it is given;
//! - `dropConnection` → `{}`, then closes its connection and connects again
//!   (with the same credential), registering its service anew;
//! - `exit {code}` → `{}`, then exits.
//!
//! Lines on stdout (the module's log): `registered SERVICE_ID`,
//! `reconnected SERVICE_ID`. When the hub closes its connection it keeps
//! trying to connect again, as a real module does.
//!
//! Other modes: `--exit-at-once CODE` exits before doing anything;
//! `--flood-bytes N` writes N bytes to stdout first; `--ignore-sigterm`
//! makes SIGTERM do nothing (so a stop needs SIGKILL); `present --socket S
//! --credential C` is the child of `childPresents`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use parking_lot::Mutex;
use serde_json::{json, Value};
use switchboard_client::protocol::jsonrpc::ErrorObject;
use switchboard_client::protocol::ErrorCode;
use switchboard_client::{handler_fn, Client, ConnectOptions, Endpoint, Error, Request};
use tokio::sync::Notify;

#[derive(Parser)]
#[command(name = "switchboard-test-module")]
struct Args {
    /// The service's label in the catalog.
    #[arg(long, default_value = "test-module")]
    label: String,
    /// Exit with this status at once.
    #[arg(long)]
    exit_at_once: Option<u8>,
    /// Write this many bytes to stdout before connecting.
    #[arg(long)]
    flood_bytes: Option<u64>,
    /// Ignore SIGTERM.
    #[arg(long)]
    ignore_sigterm: bool,
    #[command(subcommand)]
    mode: Option<Mode>,
}

#[derive(Subcommand)]
enum Mode {
    /// Connect to `socket` presenting `credential`; print the outcome as JSON.
    Present {
        #[arg(long)]
        socket: PathBuf,
        #[arg(long)]
        credential: String,
    },
}

/// A line on stdout; a write that fails (the hub is gone and its end of
/// the pipe with it) is ignored, as a real module's logging would.
macro_rules! say {
    ($($arg:tt)*) => {{
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, $($arg)*);
        let _ = stdout.flush();
    }};
}

fn main() -> ExitCode {
    let launch = switchboard_client::launch::init();
    let args = Args::parse();
    if let Some(code) = args.exit_at_once {
        say!("exiting at once with status {code}");
        return ExitCode::from(code);
    }
    if args.ignore_sigterm {
        // SAFETY: setting a signal's disposition to SIG_IGN touches no memory.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
        }
    }
    if let Some(bytes) = args.flood_bytes {
        flood(bytes);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("switchboard-test-module: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match args.mode {
        Some(Mode::Present { socket, credential }) => runtime.block_on(async {
            let outcome = present(socket, credential).await;
            say!("{outcome}");
            Ok(())
        }),
        None => runtime.block_on(serve(args.label, launch.is_some())),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("switchboard-test-module: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn flood(bytes: u64) {
    let line = [b'x'; 127];
    let mut stdout = std::io::stdout().lock();
    let mut written = 0;
    while written < bytes {
        if stdout
            .write_all(&line)
            .and_then(|()| stdout.write_all(b"\n"))
            .is_err()
        {
            return;
        }
        written += 128;
    }
    let _ = stdout.flush();
}

/// What the module shares with its request handler.
struct State {
    client: Mutex<Option<Client>>,
    /// Woken to make the main loop drop the connection and reconnect.
    drop_connection: Notify,
    children: Mutex<Vec<std::process::Child>>,
}

async fn serve(label: String, has_credential: bool) -> anyhow::Result<()> {
    say!("started; launch credential: {has_credential}");
    let client = Client::connect_with(ConnectOptions {
        endpoint: Endpoint::Dir(None),
        client_name: format!("switchboard-test-module {label}"),
    })
    .await
    .context("cannot connect to the hub")?;
    let state = Arc::new(State {
        client: Mutex::new(Some(client.clone())),
        drop_connection: Notify::new(),
        children: Mutex::new(Vec::new()),
    });
    let handler_state = state.clone();
    let handler = handler_fn(move |request| {
        let state = handler_state.clone();
        async move { handle(&state, request).await }
    });
    let service = client
        .register(&json!({"protocol": "test-module", "label": label}), handler)
        .await
        .context("cannot register the service")?;
    say!("registered {}", service.id());
    loop {
        tokio::select! {
            () = state.drop_connection.notified() => {
                client.close();
                client.reconnect().await.context("cannot reconnect")?;
                say!("reconnected {}", service.id());
            }
            () = client.closed() => {
                // Like a real module: keep trying (so only the hub's stop,
                // or its death signal, ends it).
                say!("connection lost; reconnecting");
                while client.reconnect().await.is_err() {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                say!("reconnected {}", service.id());
            }
        }
    }
}

async fn handle(
    state: &Arc<State>,
    request: Request,
) -> Result<Box<serde_json::value::RawValue>, ErrorObject> {
    let params: Value = request.params().unwrap_or(Value::Null);
    let answer = match request.method.as_str() {
        "whoami" => {
            let client = state
                .client
                .lock()
                .clone()
                .ok_or_else(|| internal("no client"))?;
            json!({
                "pid": std::process::id(),
                "principal": client.principal(),
                "clientId": client.client_id(),
            })
        }
        "leakCredential" => {
            let launch =
                switchboard_client::launch::init().ok_or_else(|| internal("no credential"))?;
            json!({"credential": launch.secret()})
        }
        "forkChild" => {
            let child = std::process::Command::new("sleep")
                .arg("3600")
                .spawn()
                .map_err(|e| internal(&format!("cannot start sleep: {e}")))?;
            let pid = child.id();
            state.children.lock().push(child);
            json!({"pid": pid})
        }
        "childPresents" => {
            let launch =
                switchboard_client::launch::init().ok_or_else(|| internal("no credential"))?;
            let socket = socket_of(launch.hub_dir())?;
            let exe = std::env::current_exe().map_err(|e| internal(&e.to_string()))?;
            let output = tokio::process::Command::new(exe)
                .arg("present")
                .arg("--socket")
                .arg(socket)
                .arg("--credential")
                .arg(launch.secret())
                .output()
                .await
                .map_err(|e| internal(&format!("cannot run the child: {e}")))?;
            serde_json::from_slice(&output.stdout)
                .map_err(|e| internal(&format!("the child printed no JSON: {e}")))?
        }
        "present" => {
            let credential = params["credential"]
                .as_str()
                .ok_or_else(|| internal("no credential given"))?;
            let launch =
                switchboard_client::launch::init().ok_or_else(|| internal("no credential"))?;
            present(socket_of(launch.hub_dir())?, credential.to_owned()).await
        }
        "dropConnection" => {
            // After the answer had a moment to leave (the caller may also
            // see the service go first; the tests accept either).
            let state = state.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                state.drop_connection.notify_one();
            });
            json!({})
        }
        "exit" => {
            let code = params["code"].as_i64().unwrap_or(0) as i32;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                std::process::exit(code);
            });
            json!({})
        }
        other => {
            return Err(ErrorObject::new(
                ErrorCode::MethodNotFound,
                format!("unknown method {other}"),
            ))
        }
    };
    Ok(serde_json::value::to_raw_value(&answer).expect("JSON encodes"))
}

/// Connects to `socket` with `credential` and says what the hub answered.
async fn present(socket: PathBuf, credential: String) -> Value {
    let connected = Client::connect_with(ConnectOptions {
        endpoint: Endpoint::Unix {
            path: socket,
            token: Some(credential),
        },
        client_name: "switchboard-test-module present".into(),
    })
    .await;
    match connected {
        Ok(client) => {
            let principal = client.principal();
            client.close();
            json!({"accepted": true, "principal": principal})
        }
        Err(Error::Rpc(error)) => json!({"accepted": false, "code": error.code}),
        Err(other) => json!({"accepted": false, "failure": other.to_string()}),
    }
}

fn socket_of(hub_dir: &std::path::Path) -> Result<PathBuf, ErrorObject> {
    let text = std::fs::read_to_string(hub_dir.join("hub.json"))
        .map_err(|e| internal(&format!("cannot read hub.json: {e}")))?;
    let info: Value = serde_json::from_str(&text).map_err(|e| internal(&e.to_string()))?;
    info["socket"]
        .as_str()
        .map(PathBuf::from)
        .ok_or_else(|| internal("hub.json names no socket"))
}

fn internal(message: &str) -> ErrorObject {
    ErrorObject::new(ErrorCode::InternalError, message)
}
