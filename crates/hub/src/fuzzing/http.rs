//! The HTTP port without a socket, for `fuzz/`: a request's bytes go
//! through the port's own code (hyper's head parsing, bounded; the router
//! behind the Origin/Host guard; the WebSocket handshake and its token, and
//! the upgraded connection's frame reader; an observer's routes) on an
//! in-memory stream, and the answer's bytes come back.
//!
//! The runtime's clock is paused and advances whenever every task waits,
//! so a head that never ends meets hyper's 10 s bound at once, and an
//! upgraded connection that stays idle meets the reader's idle release.

use std::net::SocketAddr;
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::task::TaskTracker;

use super::{session, TOKEN};
use crate::config::Config;
use crate::observe::{Attach, HubView};
use crate::session::Session;
use crate::state::HubState;
use crate::teardown;
use crate::transport::http;
use crate::transport::socket::Socket;

/// Which listener a request arrives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// `--ws` on loopback: the Host check applies.
    Loopback,
    /// `--ws` on another address (`--allow-non-loopback`): no Host check.
    Open,
    /// The remote listener, after its TLS handshake: named principals only.
    Remote,
}

/// The most of an answer read (the largest, an asset or `/metrics`, is
/// well under it).
const MAX_ANSWER: usize = 1 << 20;
/// How long (on the paused clock) one exchange may last: past hyper's head
/// bound and the idle release, before the harness hangs up.
const EXCHANGE_TIME: Duration = Duration::from_secs(30);

/// A hub, its HTTP router, and a `direct` connection for `hub/…` methods.
pub struct HttpHarness {
    runtime: tokio::runtime::Runtime,
    hub: Arc<HubState>,
    router: Router,
    /// The observer's own tasks (the dashboard's sampler).
    observer_tasks: TaskTracker,
    direct: Session,
    next_id: u64,
}

impl HttpHarness {
    /// A hub with `config` (TOML, as a config file holds it; it must be
    /// valid) and `observer` attached as the hub attaches one at start.
    pub fn new(config: &str, observer: Option<Attach>) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a runtime");
        let config = Config::parse(config, Path::new("/fuzz/config.toml"))
            .unwrap_or_else(|error| panic!("the harness's config is valid: {error}"));
        let hub = Arc::new(HubState::new(&config, None, TOKEN.into(), None));
        let observer_tasks = TaskTracker::new();
        if let Some(attach) = observer {
            let _guard = runtime.enter();
            let _ = hub
                .observer
                .set(attach(HubView::new(&hub), &observer_tasks));
        }
        let router = http::router(hub.clone());
        let mut direct = session(&hub);
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"authToken":"{TOKEN}"}}}}"#
        );
        let _ = direct.on_message(init.as_bytes());
        let _ = direct.conn().out.take_queued();
        HttpHarness {
            runtime,
            hub,
            router,
            observer_tasks,
            direct,
            next_id: 1,
        }
    }

    /// The hub's `direct` token.
    pub fn direct_token(&self) -> &'static str {
        TOKEN
    }

    /// A `hub/…` method (or any request) from the `direct` connection; its
    /// answer.
    pub fn direct_request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next_id;
        self.next_id += 1;
        let request =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let _guard = self.runtime.enter();
        let _ = self.direct.on_message(request.to_string().as_bytes());
        let queued = self.direct.conn().out.take_queued();
        queued
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice::<serde_json::Value>(line).ok())
            .find(|answer| answer["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {method}"))
    }

    /// `request` (the bytes a client writes) on a new socket of `listener`;
    /// the bytes it is answered with. An upgraded connection stays open
    /// until every task waits (the paused clock then runs on to
    /// [`EXCHANGE_TIME`]), and is then hung up on.
    pub fn exchange(&mut self, request: &[u8], listener: Listener) -> Vec<u8> {
        let hub = self.hub.clone();
        let router = self.router.clone();
        let answer = self.runtime.block_on(async move {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let tasks = TaskTracker::new();
            let peer: SocketAddr = match listener {
                Listener::Loopback => ([127, 0, 0, 1], 40000).into(),
                Listener::Open | Listener::Remote => ([192, 0, 2, 1], 40000).into(),
            };
            let socket = Socket {
                peer,
                loopback: listener == Listener::Loopback,
                remote: listener == Listener::Remote,
                slot: Arc::new(Mutex::new(hub.admission.at_accept())),
                tasks: tasks.clone(),
            };
            let serve = pin!(http::serve_socket(router, server, socket));
            let talk = async {
                let mut answer = Vec::new();
                let talk = async {
                    client.write_all(request).await?;
                    let mut buf = [0u8; 16 * 1024];
                    loop {
                        let n = client.read(&mut buf).await?;
                        if n == 0 || answer.len() >= MAX_ANSWER {
                            return Ok::<_, std::io::Error>(());
                        }
                        answer.extend_from_slice(&buf[..n]);
                        if streaming(&answer) {
                            return Ok(());
                        }
                    }
                };
                let _ = tokio::time::timeout(EXCHANGE_TIME, talk).await;
                drop(client);
                answer
            };
            let mut talk = pin!(talk);
            let answer = tokio::select! {
                answer = &mut talk => answer,
                () = serve => talk.await,
            };
            // An upgraded connection's task reads the end of its stream.
            tasks.close();
            if tokio::time::timeout(EXCHANGE_TIME, tasks.wait())
                .await
                .is_err()
            {
                panic!("an upgraded connection outlived its socket");
            }
            answer
        });
        assert_eq!(
            self.hub.admission.open().len(),
            1,
            "a connection of the exchange is still open (only the harness's own should be)"
        );
        answer
    }

    /// Stops the observer's tasks and closes the `direct` connection; checks
    /// that nothing is left.
    pub fn finish(self) {
        let HttpHarness {
            runtime,
            hub,
            observer_tasks,
            direct,
            ..
        } = self;
        teardown::disconnect(&hub, direct.conn());
        teardown::release(&hub, direct.conn());
        hub.stop();
        observer_tasks.close();
        runtime.block_on(async {
            let _ = tokio::time::timeout(EXCHANGE_TIME, observer_tasks.wait()).await;
        });
        assert_eq!(hub.admission.open().len(), 0, "connections left open");
    }
}

/// Whether `answer` is the head of a stream that does not end by itself
/// (Server-Sent Events) plus its first bytes: enough to stop reading.
fn streaming(answer: &[u8]) -> bool {
    let Some(end) = memchr::memmem::find(answer, b"\r\n\r\n") else {
        return false;
    };
    let head = &answer[..end];
    memchr::memmem::find(head, b"text/event-stream").is_some() && answer.len() > end + 4
}

pub use crate::transport::upgrade_token::Refusal;

/// The decoder of the upgrade's `?token=` (`upgrade_token.rs`), as the
/// upgrade calls it with the request target's query.
pub fn query_token(query: Option<&str>) -> Result<Option<String>, Refusal> {
    crate::transport::upgrade_token::query_token(query)
}
