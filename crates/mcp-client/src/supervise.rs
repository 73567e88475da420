//! A server kept up: one task per server follows its connection, lists its
//! tools again on `tools/list_changed` (a burst is one re-list), and, by
//! its [`Restart`] policy, starts it again when it exits.
//!
//! The task is the only writer of the current connection; callers read it
//! ([`Supervised::connection`]) and hear of changes as [`Event`]s.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::connection::Connection;
use crate::handler::Handler;
use crate::start::{start, StartError, StartOptions, Started};
use crate::upstream::Upstream;

/// What happens when a server's connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// It stays down (an ACP session's server: the session reports it).
    Never,
    /// It is started again after a pause.
    After(Backoff),
}

/// The pause before a restart: `first`, doubled after each exit or failed
/// start that follows soon after the last start, at most `max`; a server
/// that stayed up `reset_after` starts from `first` again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
    pub reset_after: Duration,
}

impl Backoff {
    /// `provide-mcp`'s: 200 ms doubling to 30 s, reset after 30 s up.
    pub const DEFAULT: Backoff = Backoff {
        first: Duration::from_millis(200),
        max: Duration::from_secs(30),
        reset_after: Duration::from_secs(30),
    };
}

/// What the supervisor tells its caller.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The connection ended; the server is down (for good with
    /// [`Restart::Never`]: the last event).
    Ended,
    /// The server was started again, with these tools.
    Restarted(Vec<Value>),
    /// It listed these tools after `tools/list_changed`.
    ToolsChanged(Vec<Value>),
}

/// A supervised server; cloning shares it. Only [`Supervised::stop`] ends
/// the supervision: dropping every handle leaves the task to its policy.
#[derive(Clone)]
pub struct Supervised {
    shared: Arc<Shared>,
}

struct Shared {
    /// `None` while the server is down or restarting.
    current: RwLock<Option<Connection>>,
    stopping: CancellationToken,
}

/// A server's first start.
pub struct SupervisedStart {
    pub server: Supervised,
    pub tools: Vec<Value>,
    /// Ends when the supervisor does (stopped, or ended for good).
    pub events: mpsc::UnboundedReceiver<Event>,
}

/// What the supervisor task owns.
struct Run {
    shared: Arc<Shared>,
    make: Box<dyn FnMut() -> Upstream + Send>,
    options: StartOptions,
    handler: Arc<dyn Handler>,
    restart: Restart,
    events: mpsc::UnboundedSender<Event>,
}

impl Supervised {
    /// Starts the server `make` describes (again on each restart); fails if
    /// the first start fails.
    pub async fn start(
        mut make: impl FnMut() -> Upstream + Send + 'static,
        options: StartOptions,
        handler: Arc<dyn Handler>,
        restart: Restart,
    ) -> Result<SupervisedStart, StartError> {
        let Started { connection, tools } = start(make(), &options, handler.clone()).await?;
        let shared = Arc::new(Shared {
            current: RwLock::new(Some(connection.clone())),
            stopping: CancellationToken::new(),
        });
        let (events, receiver) = mpsc::unbounded_channel();
        let run = Run {
            shared: shared.clone(),
            make: Box::new(make),
            options,
            handler,
            restart,
            events,
        };
        tokio::spawn(run.supervise(connection));
        Ok(SupervisedStart {
            server: Supervised { shared },
            tools,
            events: receiver,
        })
    }

    /// The live connection; `None` while the server is down.
    pub fn connection(&self) -> Option<Connection> {
        self.shared.current.read().clone()
    }

    /// Stops the server and its supervision (bounded, see
    /// [`Connection::stop`]); idempotent.
    pub async fn stop(&self) {
        self.shared.stopping.cancel();
        let live = self.shared.current.write().take();
        if let Some(live) = live {
            live.stop().await;
        }
    }
}

impl Run {
    async fn supervise(mut self, first: Connection) {
        let stopping = self.shared.stopping.clone();
        let mut live = Some(first);
        let mut up_since = Instant::now();
        let mut delay = match self.restart {
            Restart::Never => Duration::ZERO,
            Restart::After(backoff) => backoff.first,
        };
        loop {
            if let Some(connection) = live.take() {
                tokio::select! {
                    biased;
                    // `stop` stops the connection itself.
                    () = stopping.cancelled() => return,
                    () = connection.closed() => {
                        *self.shared.current.write() = None;
                        let _ = self.events.send(Event::Ended);
                        let Restart::After(backoff) = self.restart else { return };
                        delay = if up_since.elapsed() >= backoff.reset_after {
                            backoff.first
                        } else {
                            (delay * 2).min(backoff.max)
                        };
                        tracing::warn!(server = %connection.label(), ?delay, "the MCP server exited; restarting it");
                    }
                    () = connection.tools_changed() => {
                        let listed = tokio::select! {
                            biased;
                            () = stopping.cancelled() => return,
                            listed = connection.list_tools(self.options.list_timeout) => listed,
                        };
                        match listed {
                            Ok(tools) => {
                                let _ = self.events.send(Event::ToolsChanged(tools));
                            }
                            Err(error) => tracing::warn!(server = %connection.label(), "{error}"),
                        }
                        live = Some(connection);
                    }
                }
                continue;
            }
            // Down: wait, then try again.
            let Restart::After(backoff) = self.restart else {
                return;
            };
            tokio::select! {
                biased;
                () = stopping.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
            let upstream = (self.make)();
            let started = tokio::select! {
                biased;
                () = stopping.cancelled() => return,
                started = start(upstream, &self.options, self.handler.clone()) => started,
            };
            match started {
                Ok(Started { connection, tools }) => {
                    *self.shared.current.write() = Some(connection.clone());
                    // `stop` ran while it started: it may have missed it.
                    if stopping.is_cancelled() {
                        let missed = self.shared.current.write().take();
                        if let Some(missed) = missed {
                            missed.stop().await;
                        }
                        return;
                    }
                    let _ = self.events.send(Event::Restarted(tools));
                    tracing::info!(server = %connection.label(), "the MCP server is back");
                    up_since = Instant::now();
                    live = Some(connection);
                }
                Err(error) => {
                    delay = (delay * 2).min(backoff.max);
                    tracing::warn!(%error, ?delay, "cannot restart the MCP server; trying again");
                }
            }
        }
    }
}
