//! Staying connected: the one backoff loop for reaching the hub, used for
//! the first connection of a consumer ([`HubTools`](crate::consumer::HubTools))
//! and for every reconnect ([`keep_connected`]: services are registered
//! again and the catalog re-subscribed by [`Client::reconnect`]).

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use switchboard_client::Client;
use tokio_util::sync::CancellationToken;

/// The first pause after a failed attempt, doubled after each failure.
pub const RECONNECT_FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest pause between two attempts.
pub const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(10);

/// Runs `attempt` until it succeeds, pausing between failures (from
/// [`RECONNECT_FIRST_DELAY`], doubling, at most [`RECONNECT_MAX_DELAY`]).
/// `on_failure` sees each failure with its number (from 1) and the pause
/// that follows. `None` once `stop` is cancelled.
pub async fn retry_with_backoff<T, E, F, Fut>(
    stop: &CancellationToken,
    mut attempt: F,
    mut on_failure: impl FnMut(u32, &E, Duration),
) -> Option<T>
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut delay = RECONNECT_FIRST_DELAY;
    let mut failures = 0u32;
    loop {
        let outcome = tokio::select! {
            outcome = attempt() => outcome,
            () = stop.cancelled() => return None,
        };
        match outcome {
            Ok(value) => return Some(value),
            Err(error) => {
                failures = failures.saturating_add(1);
                on_failure(failures, &error, delay);
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = stop.cancelled() => return None,
                }
                delay = (delay * 2).min(RECONNECT_MAX_DELAY);
            }
        }
    }
}

/// Reconnects `client` whenever its connection ends, until `stop` is
/// cancelled. `on_change(true)` after each successful reconnect,
/// `on_change(false)` when the connection is lost.
pub async fn keep_connected(client: Client, stop: CancellationToken, on_change: impl Fn(bool)) {
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            () = client.closed() => {}
        }
        if stop.is_cancelled() {
            // Closed because we are stopping: nothing was lost.
            return;
        }
        tracing::warn!("lost the connection to the hub; reconnecting");
        on_change(false);
        let reconnected = retry_with_backoff(
            &stop,
            || client.reconnect(),
            |_, error, delay| tracing::debug!(%error, ?delay, "cannot reconnect to the hub yet"),
        )
        .await;
        if reconnected.is_none() {
            return;
        }
        tracing::info!("reconnected to the hub");
        on_change(true);
    }
}
