//! The receiving side of the relay without NATS, for `fuzz/` (feature
//! `fuzzing`): messages as the reader gets them from
//! `switchboard.hub.<me>.*` (subject, headers, lines; credits) go through
//! the reader's own code (`relay::take`: the sender named by the subject and
//! its instances, credits, each line handed to that hub's link, the credit
//! owed back), on a hub `a` with links to hubs `b` and `c`.
//!
//! The hub has a local *owner* with one service and a local *caller* that
//! has two requests pending on a service of `b` (forwarded ids 1 and 2),
//! so lines can be requests, notifications and cancels to the owner, and
//! answers to the caller.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_nats::header::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;
use parking_lot::RwLock;
use switchboard_hub::config::Config;
use switchboard_hub::fuzzing::Client;
use switchboard_hub::link::{Link, RemoteService};
use switchboard_hub::{Federated, FederationMetrics, HubState};
use switchboard_protocol::Principal;
use tokio::sync::watch as channel;

use crate::metrics::Metrics;
use crate::relay;
use crate::shared::{Fabric, FederationOptions, Peer, Window};

/// This hub's name, and the other two.
pub const ME: &str = "a";
pub const PEERS: [&str; 2] = ["b", "c"];
/// The instances of `a`, `b` and `c`.
pub const INSTANCES: [&str; 3] = ["ia0000000000", "ib0000000000", "ic0000000000"];
/// The service of `b` the caller's requests are pending on.
pub const B_SERVICE: &str = "svc-b-0000000000000000000000000000000b";
/// The client of `b` that owns it.
pub const B_OWNER: &str = "c-b-0000000000000000000000000000000b";

/// One NATS message, as the reader gets it.
pub struct Message<'a> {
    /// The subject's last token: the sender as NATS permissions name it.
    pub from: &'a str,
    /// Headers in order (a name may repeat).
    pub headers: Vec<(&'a str, &'a str)>,
    /// The lines.
    pub payload: &'a [u8],
}

/// What the local connections were sent while one message was handled.
pub struct Received {
    pub owner: Vec<u8>,
    pub caller: Vec<u8>,
    /// The credit the reader owes the sender (it would publish it).
    pub credit: Option<(String, u64)>,
}

pub struct Harness {
    runtime: tokio::runtime::Runtime,
    fabric: Arc<Fabric>,
    owner: Client,
    caller: Client,
    service_id: String,
}

#[derive(Debug)]
struct NoMetrics;

impl FederationMetrics for NoMetrics {
    fn render_metrics(&self, _out: &mut String) {}
}

/// A client that never connects: the reader publishes nothing here (the
/// credit it owes is returned instead), but a `Fabric` holds one. Its
/// connection task lives on a runtime of its own, which retries rarely.
fn idle_client() -> async_nats::Client {
    static CLIENT: std::sync::OnceLock<(tokio::runtime::Runtime, async_nats::Client)> =
        std::sync::OnceLock::new();
    let (_, client) = CLIENT.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let client = runtime
            .block_on(
                async_nats::ConnectOptions::new()
                    .retry_on_initial_connect()
                    .reconnect_delay_callback(|_| Duration::from_secs(3600))
                    .connect("nats://127.0.0.1:1"),
            )
            .expect("a client that connects later");
        (runtime, client)
    });
    client.clone()
}

impl Harness {
    /// A fresh hub `a` with its links, owner and caller.
    pub fn new() -> Harness {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a runtime");
        let mut config = Config::default();
        // Small bounds, so inputs reach them.
        config.limits.max_message_bytes = 4096;
        config.limits.max_in_flight_per_client = 8;
        config.limits.max_in_flight_per_service = 8;
        config.limits.notify_shed_bytes = 64 * 1024;
        config.limits.slow_consumer_bytes = 1024 * 1024;
        let token = "fuzz-direct-token-0123456789abcdef".to_owned();
        let hub = Arc::new(HubState::new(
            &config,
            None,
            token.clone(),
            Some(Federated {
                name: ME.into(),
                metrics: Arc::new(NoMetrics),
            }),
        ));
        let mut peers = std::collections::HashMap::new();
        for (name, instance) in PEERS.iter().zip(&INSTANCES[1..]) {
            let link = Link::open(&hub, name).expect("the hub is not stopping");
            peers.insert(
                (*name).to_owned(),
                Arc::new(Peer {
                    name: (*name).to_owned(),
                    instance: (*instance).to_owned(),
                    link,
                    window: Window::default(),
                }),
            );
        }
        let principal = Principal::Direct;
        let metadata = serde_json::value::RawValue::from_string("{}".into()).expect("JSON");
        peers["b"]
            .link
            .add_service(RemoteService {
                service_id: B_SERVICE,
                client_id: B_OWNER,
                principal: &principal,
                metadata: &metadata,
            })
            .expect("b's service is listed");
        let initialize = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"authToken":"{token}"}}}}"#
        );
        let mut owner = Client::connect(&hub);
        owner.send(initialize.as_bytes());
        owner.send(br#"{"jsonrpc":"2.0","id":1,"method":"client/registerService","params":{"metadata":{}}}"#);
        let service_id = owner
            .take()
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice::<serde_json::Value>(line).ok())
            .find_map(|v| v["result"]["serviceId"].as_str().map(str::to_owned))
            .expect("the owner's service is registered");
        let mut caller = Client::connect(&hub);
        caller.send(initialize.as_bytes());
        for id in [1, 2] {
            let request = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"clientService/request","params":{{"serviceId":"{B_SERVICE}","method":"m","params":{{}},"timeoutMs":60000}}}}"#
            );
            caller.send(request.as_bytes());
        }
        let _ = caller.take();
        let (_, connected) = channel::channel(true);
        let fabric = Arc::new(Fabric {
            hub,
            name: ME.into(),
            instance: INSTANCES[0].into(),
            client: idle_client(),
            metrics: Arc::new(Metrics::default()),
            options: FederationOptions {
                nats: "nats://127.0.0.1:1".into(),
                name: ME.into(),
                credentials: None,
                tls_ca: None,
                service_ttl: crate::DEFAULT_SERVICE_TTL,
            },
            peers: RwLock::new(peers),
            connected,
            joined: channel::Sender::new(None),
            stop: tokio_util::sync::CancellationToken::new(),
            no_responders: "_INBOX.fuzz".into(),
        });
        Harness {
            runtime,
            fabric,
            owner,
            caller,
            service_id,
        }
    }

    /// The local owner's service id.
    pub fn service_id(&self) -> &str {
        &self.service_id
    }

    /// Hands `message` to the reader's code; what the local connections
    /// were sent.
    pub fn receive(&mut self, message: &Message<'_>) -> Received {
        let mut headers = HeaderMap::new();
        for (name, value) in &message.headers {
            // What a NATS header block can carry: a name without control
            // characters or ':', a value on one line.
            let Ok(name) = HeaderName::from_str(name) else {
                continue;
            };
            if value.contains(['\r', '\n']) {
                continue;
            }
            headers.append(name, HeaderValue::from(*value));
        }
        let subject = format!("switchboard.hub.{ME}.{}", message.from);
        let nats = async_nats::Message {
            subject: subject.into(),
            reply: None,
            payload: Bytes::copy_from_slice(message.payload),
            headers: (!message.headers.is_empty()).then_some(headers),
            status: None,
            description: None,
            length: message.payload.len(),
        };
        let fabric = &self.fabric;
        let credit = self
            .runtime
            .block_on(relay::take(fabric, &nats))
            .map(|(peer, taken)| (peer.name.clone(), taken));
        Received {
            owner: self.owner.take(),
            caller: self.caller.take(),
            credit,
        }
    }

    /// What `b` has been credited so far (`Switchboard-Sent` of the last
    /// credit owed to it).
    pub fn credited(&self, peer: &str) -> u64 {
        self.fabric.peers.read()[peer]
            .window
            .credited
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Closes the links and the local connections; checks that nothing is
    /// left of them.
    pub fn finish(self) {
        let Harness {
            runtime,
            fabric,
            owner,
            caller,
            ..
        } = self;
        let _guard = runtime.enter();
        for (_, peer) in fabric.peers.write().drain() {
            peer.link.close();
        }
        owner.close();
        caller.close();
        let hub = &fabric.hub;
        assert_eq!(
            hub.bookkeeping(),
            switchboard_hub::Bookkeeping::default(),
            "bookkeeping left behind"
        );
        assert_eq!(hub.connections_in_memory(), 0, "connections left behind");
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

/// The options checks a hub makes before it connects (`join.rs`): the
/// name, the URL, the CA file; the error's text if one fails.
pub fn check_options(options: &FederationOptions) -> Result<(), String> {
    crate::join::check(options)
        .map(|_| ())
        .map_err(|error| error.to_string())
}
