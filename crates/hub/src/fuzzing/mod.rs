//! Socketless harnesses over the hub's real code, for `fuzz/` (feature
//! `fuzzing`).
//!
//! [`Harness`]: the framing, session and router. Two connections share one
//! hub: an *owner*, initialized with a registered service, and a *client*
//! whose bytes come from the fuzzer. The literal `svc-fuzz` in the input is
//! replaced by the owner's real service id, so the fuzzer can reach the
//! routing paths.
//!
//! [`http::HttpHarness`]: the HTTP port (head, guard, upgrade and its token,
//! an observer's routes). [`Client`]: a connection without a socket, for
//! the harnesses of the add-on crates (the federation's).

pub mod http;

use std::sync::Arc;

use serde_json::value::RawValue;

use crate::admission::Slot;
use crate::config::Config;
use crate::conn::{Conn, Transport};
use crate::scrape::Bookkeeping;
use crate::session::{Flow, Session};
use crate::state::HubState;
use crate::teardown;
use crate::transport::unix::split_lines;

/// The `direct` token of the harness's hub.
pub const TOKEN: &str = "fuzz-token";
/// Replaced by the owner's service id in fuzz input.
pub const SERVICE_PLACEHOLDER: &str = "svc-fuzz";

pub struct Harness {
    hub: Arc<HubState>,
    owner: Session,
    service_id: String,
    client: Session,
}

impl Harness {
    /// A hub with small limits, so inputs reach the bounds.
    pub fn new() -> Self {
        let mut config = Config::default();
        config.limits.max_message_bytes = 4096;
        config.limits.max_metadata_bytes = 1024;
        config.limits.max_method_bytes = 64;
        config.limits.max_services_per_client = 4;
        config.limits.max_in_flight_per_client = 8;
        config.limits.max_in_flight_per_service = 8;
        config.limits.notify_shed_bytes = 64 * 1024;
        config.limits.slow_consumer_bytes = 1024 * 1024;
        config.limits.max_connections = 16;
        let hub = Arc::new(HubState::new(&config, None, TOKEN.into(), None));
        let mut owner = session(&hub);
        for line in [
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"authToken":"{TOKEN}"}}}}"#),
            r#"{"jsonrpc":"2.0","id":2,"method":"client/registerService","params":{"metadata":{"fuzz":true}}}"#.into(),
        ] {
            let _ = owner.on_message(line.as_bytes());
        }
        let answers = owner.conn().out.take_queued();
        let service_id = answers
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice::<serde_json::Value>(line).ok())
            .find_map(|v| v["result"]["serviceId"].as_str().map(str::to_owned))
            .expect("the harness's own registration succeeds");
        let client = session(&hub);
        Harness {
            hub,
            owner,
            service_id,
            client,
        }
    }

    fn substitute(&self, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len());
        let mut rest = input;
        let needle = SERVICE_PLACEHOLDER.as_bytes();
        while let Some(at) = memchr::memmem::find(rest, needle) {
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(self.service_id.as_bytes());
            rest = &rest[at + needle.len()..];
        }
        out.extend_from_slice(rest);
        out
    }

    /// One message, as one line or frame.
    pub fn dispatch(&mut self, message: &[u8]) {
        let message = self.substitute(message);
        if self.client.on_frame(&message) == Flow::Close {
            self.reconnect_client();
        }
        self.answer_owner_requests();
    }

    /// A byte stream cut into reads of the given sizes, through the real
    /// line framing.
    pub fn stream(&mut self, bytes: &[u8], cuts: &[usize]) {
        let bytes = self.substitute(bytes);
        let max = self.hub.limits.max_message_bytes as usize;
        let mut partial = Vec::new();
        let mut rest = &bytes[..];
        let mut cuts = cuts.iter().cycle();
        while !rest.is_empty() {
            let size = cuts
                .next()
                .copied()
                .unwrap_or(rest.len())
                .clamp(1, rest.len());
            let (chunk, tail) = rest.split_at(size);
            rest = tail;
            if split_lines(chunk, &mut partial, &mut self.client, max) == Flow::Close {
                self.reconnect_client();
                partial.clear();
            }
            self.answer_owner_requests();
        }
    }

    /// Checks what both connections were sent: every line a JSON-RPC 2.0
    /// object. Returns the client's lines.
    pub fn drain_and_check(&mut self) -> Vec<serde_json::Value> {
        let mut client_lines = Vec::new();
        for (who, bytes) in [
            ("client", self.client.conn().out.take_queued()),
            ("owner", self.owner.conn().out.take_queued()),
        ] {
            for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let value: serde_json::Value = serde_json::from_slice(line).unwrap_or_else(|e| {
                    panic!(
                        "the hub sent {who} a line that is not JSON ({e}): {}",
                        String::from_utf8_lossy(line)
                    )
                });
                assert_eq!(value["jsonrpc"], "2.0", "not JSON-RPC 2.0: {value}");
                if who == "client" {
                    client_lines.push(value);
                }
            }
        }
        client_lines
    }

    /// Disconnects the client (as its socket closing would) and checks that
    /// nothing it started is left in the hub's bookkeeping.
    pub fn finish(mut self) {
        let _ = self.drain_and_check();
        teardown::disconnect(&self.hub, self.client.conn());
        teardown::release(&self.hub, self.client.conn());
        let _ = self.drain_and_check();
        teardown::disconnect(&self.hub, self.owner.conn());
        teardown::release(&self.hub, self.owner.conn());
        assert_eq!(
            self.hub.bookkeeping(),
            Bookkeeping::default(),
            "bookkeeping left behind"
        );
        assert_eq!(self.hub.registry.service_count(), 0, "services left behind");
    }

    fn reconnect_client(&mut self) {
        let _ = self.drain_and_check();
        teardown::disconnect(&self.hub, self.client.conn());
        teardown::release(&self.hub, self.client.conn());
        self.client = session(&self.hub);
    }

    /// The owner answers every request forwarded to it, so the response path
    /// (and late answers, after cancels) run too.
    fn answer_owner_requests(&mut self) {
        let queued = self.owner.conn().out.take_queued();
        for line in queued.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            #[derive(serde::Deserialize)]
            struct Forwarded<'a> {
                #[serde(borrow)]
                id: Option<&'a RawValue>,
                method: Option<String>,
            }
            let Ok(forwarded) = serde_json::from_slice::<Forwarded<'_>>(line) else {
                panic!(
                    "the hub sent the owner a line that is not JSON: {}",
                    String::from_utf8_lossy(line)
                );
            };
            if let (Some(id), Some("clientService/handleRequest")) =
                (forwarded.id, forwarded.method.as_deref())
            {
                let answer = format!(
                    r#"{{"jsonrpc":"2.0","id":{},"result":{{"ok":true}}}}"#,
                    id.get()
                );
                let _ = self.owner.on_message(answer.as_bytes());
            }
        }
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

/// A connection of a hub without a socket: what it sends goes through its
/// `Session` as a Unix connection's lines do; what the hub queued for it is
/// taken at once.
pub struct Client {
    session: Session,
}

impl Client {
    /// A new connection (not initialized) of `hub`.
    pub fn connect(hub: &Arc<HubState>) -> Client {
        Client {
            session: session(hub),
        }
    }

    /// One message from the client; `false` if the hub closes the
    /// connection for it.
    pub fn send(&mut self, message: &[u8]) -> bool {
        self.session.on_message(message) == Flow::Continue
    }

    /// Everything the hub queued for this connection since the last take.
    pub fn take(&self) -> Vec<u8> {
        self.session.conn().out.take_queued()
    }

    /// The connection ends, as its socket closing would end it.
    pub fn close(self) {
        let hub = self.session.hub().clone();
        teardown::disconnect(&hub, self.session.conn());
        teardown::release(&hub, self.session.conn());
    }
}

fn session(hub: &Arc<HubState>) -> Session {
    let Some(Slot::Connection(slot)) = hub.admission.at_accept() else {
        panic!("the harness stays under maxConnections");
    };
    let conn: Arc<Conn> = hub
        .admission
        .admit(slot, Transport::Unix, &hub.limits)
        .expect("the harness's hub is not shutting down");
    Session::new(hub.clone(), conn, None)
}
