//! The systems under test: how each is started, reached and driven.

pub mod floor;
pub mod hub;
pub mod nats;

use std::time::Duration;

/// One column of the results table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum System {
    /// `switchboard serve` over its Unix socket.
    HubUnix,
    /// `switchboard serve` over WebSocket.
    HubWs,
    /// nats-server 2.x over loopback TCP, through `async-nats`.
    Nats,
    /// The floor relay over Unix sockets.
    Floor,
}

impl System {
    pub const ALL: [System; 4] = [System::HubUnix, System::HubWs, System::Nats, System::Floor];

    pub fn label(self) -> &'static str {
        match self {
            System::HubUnix => "hub (Unix)",
            System::HubWs => "hub (WS)",
            System::Nats => "NATS",
            System::Floor => "floor",
        }
    }
}

/// Bound on every setup step (connect, initialize, register, subscribe).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `future` with the setup bound, naming `what` if it runs out.
pub async fn bounded<T>(
    what: &str,
    future: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(SETUP_TIMEOUT, future).await {
        Ok(result) => result,
        Err(_) => anyhow::bail!("{what} took longer than {SETUP_TIMEOUT:?}"),
    }
}
