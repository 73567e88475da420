//! Staying connected: when the hub connection ends, reconnect with
//! exponential backoff (services are registered again and the catalog
//! re-subscribed by [`Client::reconnect`]).

use std::time::Duration;

use switchboard_client::Client;
use tokio_util::sync::CancellationToken;

/// The first pause before reconnecting, doubled after each failure.
pub const RECONNECT_FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest pause between two attempts.
pub const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(10);

/// Reconnects `client` whenever its connection ends, until `stop` is
/// cancelled. `on_change(true)` after each successful reconnect,
/// `on_change(false)` when the connection is lost.
pub async fn keep_connected(client: Client, stop: CancellationToken, on_change: impl Fn(bool)) {
    loop {
        tokio::select! {
            () = client.closed() => {}
            () = stop.cancelled() => return,
        }
        tracing::warn!("lost the connection to the hub; reconnecting");
        on_change(false);
        let mut delay = RECONNECT_FIRST_DELAY;
        loop {
            match client.reconnect().await {
                Ok(()) => {
                    tracing::info!("reconnected to the hub");
                    on_change(true);
                    break;
                }
                Err(error) => {
                    tracing::debug!(%error, ?delay, "cannot reconnect to the hub yet");
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = stop.cancelled() => return,
                    }
                    delay = (delay * 2).min(RECONNECT_MAX_DELAY);
                }
            }
        }
    }
}
