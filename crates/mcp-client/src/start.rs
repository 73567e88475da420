//! Starting a server: spawn or connect, `initialize`, the first
//! `tools/list`, each bounded; a failure is one sentence for the user.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use serde_json::Value;
use tokio::sync::Notify;

use crate::bridge::Bridge;
use crate::child::ChildTransport;
use crate::connection::Connection;
use crate::handler::Handler;
use crate::progress::ProgressRoutes;
use crate::stderr::StderrTail;
use crate::streamable::HttpTransport;
use crate::tap::WireTap;
use crate::upstream::{Http, Stderr, Stdio, StopHook, Transport, Upstream};

/// How a server is started.
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// `clientInfo.name` at `initialize` (`switchboard acp`).
    pub client_name: String,
    /// How long the server may take to start and answer `initialize`.
    pub initialize_timeout: Duration,
    /// How long it may take to answer `tools/list` (every time).
    pub list_timeout: Duration,
}

/// Why a server did not start. Each message names the server by its
/// [`Upstream::label`].
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot start {label}: {error}")]
    Spawn { label: String, error: String },
    #[error("{label}: cannot build an HTTP client: {error}")]
    HttpClient { label: String, error: String },
    /// The handshake failed; for a captured stderr, `reason` ends with what
    /// the server said (`; it said: …`).
    #[error("{label} did not start: {reason}")]
    Handshake { label: String, reason: String },
    #[error("{label} did not answer initialize within {bound:?}; given up")]
    NoAnswer { label: String, bound: Duration },
    /// It answered `initialize` but not `tools/list`.
    #[error("{label} started, but {reason}")]
    Listing { label: String, reason: String },
}

/// A started server: its connection and its first tools (each an MCP
/// `Tool` object).
pub struct Started {
    pub connection: Connection,
    pub tools: Vec<Value>,
}

/// Starts `upstream`, runs `initialize` and lists its tools (all pages).
/// On failure nothing is left running: the stop hook has run, the
/// connection is closed.
pub async fn start(
    upstream: Upstream,
    options: &StartOptions,
    handler: Arc<dyn Handler>,
) -> Result<Started, StartError> {
    let Upstream { label, transport } = upstream;
    let tap = Arc::new(WireTap::default());
    let bridge = Bridge {
        client_name: options.client_name.clone(),
        handler,
        routes: Arc::new(ProgressRoutes::default()),
        tools_changed: Arc::new(Notify::new()),
        tap: tap.clone(),
    };
    let connection = match transport {
        Transport::Stdio(stdio) => start_stdio(label, stdio, bridge, tap, options).await?,
        Transport::Http(http) => start_http(label, http, bridge, tap, options).await?,
        Transport::Streams(streams) => {
            let transport = ChildTransport::over(streams.output, streams.input, tap);
            let input = transport.input();
            let running = handshake(&label, bridge.serve(transport), options).await?;
            Connection::open(label, running, None, None, Some(input))
        }
    };
    match connection.list_tools(options.list_timeout).await {
        Ok(tools) => Ok(Started { connection, tools }),
        Err(error) => {
            connection.stop().await;
            Err(StartError::Listing {
                label: connection.inner.label.clone(),
                reason: error.to_string(),
            })
        }
    }
}

async fn start_stdio(
    label: String,
    stdio: Stdio,
    bridge: Bridge,
    tap: Arc<WireTap>,
    options: &StartOptions,
) -> Result<Connection, StartError> {
    let Stdio {
        command,
        stderr,
        stop,
    } = stdio;
    let stderr_to = match stderr {
        Stderr::Inherit => std::process::Stdio::inherit(),
        Stderr::Capture => std::process::Stdio::piped(),
    };
    let (transport, stderr) =
        ChildTransport::spawn(command, stderr_to, tap).map_err(|error| StartError::Spawn {
            label: label.clone(),
            error: error.to_string(),
        })?;
    let pid = transport.id();
    let input = transport.input();
    let tail = stderr.map(|stderr| StderrTail::follow(stderr, label.clone()));
    // Armed until the handshake succeeds, so that a start given up (or
    // dropped) leaves nothing running behind the stop hook either.
    let mut stopper = StopOnDrop {
        stop: stop.clone(),
        pid,
    };
    let bound = options.initialize_timeout;
    match tokio::time::timeout(bound, bridge.serve(transport)).await {
        Ok(Ok(running)) => {
            stopper.disarm();
            Ok(Connection::open(label, running, pid, stop, Some(input)))
        }
        Ok(Err(error)) => {
            drop(stopper);
            let said = match tail {
                Some(tail) => tail.last_words().await,
                None => String::new(),
            };
            let reason = if said.is_empty() {
                error.to_string()
            } else {
                format!("{error}; it said: {said}")
            };
            Err(StartError::Handshake { label, reason })
        }
        Err(_) => Err(StartError::NoAnswer { label, bound }),
    }
}

async fn start_http(
    label: String,
    http: Http,
    bridge: Bridge,
    tap: Arc<WireTap>,
    options: &StartOptions,
) -> Result<Connection, StartError> {
    let bound = options.initialize_timeout;
    // rustls needs a process-wide crypto provider; ring is the lighter one
    // to build. Installing twice is harmless (the second is refused).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(bound)
        .build()
        .map_err(|error| StartError::HttpClient {
            label: label.clone(),
            error: error.to_string(),
        })?;
    let headers = http
        .headers
        .iter()
        .filter_map(|(name, value)| {
            let mut value = reqwest::header::HeaderValue::from_str(value).ok()?;
            // Any value may be a secret: kept out of reqwest's debug output.
            value.set_sensitive(true);
            Some((
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).ok()?,
                value,
            ))
        })
        .collect();
    let transport = HttpTransport::connect(client, http.url, headers, http.bearer, tap);
    let running = handshake(&label, bridge.serve(transport), options).await?;
    Ok(Connection::open(label, running, None, None, None))
}

/// `initialize` on a server with no process of ours (HTTP, streams): no
/// stderr to quote, nothing to stop on a failure but the transport rmcp
/// drops.
async fn handshake<S, E: std::fmt::Display>(
    label: &str,
    serving: impl std::future::Future<Output = Result<S, E>>,
    options: &StartOptions,
) -> Result<S, StartError> {
    let bound = options.initialize_timeout;
    match tokio::time::timeout(bound, serving).await {
        Ok(Ok(running)) => Ok(running),
        Ok(Err(error)) => Err(StartError::Handshake {
            label: label.to_owned(),
            reason: error.to_string(),
        }),
        Err(_) => Err(StartError::NoAnswer {
            label: label.to_owned(),
            bound,
        }),
    }
}

/// Runs a stdio server's stop hook when dropped armed.
struct StopOnDrop {
    stop: Option<StopHook>,
    pid: Option<u32>,
}

impl StopOnDrop {
    fn disarm(&mut self) {
        self.stop = None;
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let (Some(stop), Some(pid)) = (self.stop.take(), self.pid) {
            stop(pid);
        }
    }
}
