//! The page's live stream: one Server-Sent Events response per open page.
//!
//! Events, in order: `snapshot` (the dashboard's snapshot, see `lib.rs`),
//! then as they come `actions` (catalog actions, each line one JSON-RPC
//! `action` message exactly as a catalog subscriber gets it) and `tick`
//! (every second: totals, rates, the connection table). If the page falls
//! behind, `resync` and the end: the browser's `EventSource` reconnects and
//! starts again from a new snapshot.
//!
//! Bounded like any consumer: actions wait in the page's catalog feed
//! (`observe.rs`), a queue of at most [`QUEUE_BYTES`]; past that the
//! catalog drops it (a flood of changes costs a resync, never hub memory),
//! and ticks are only ever the latest one.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_hub::observe::CatalogFeed;
use tokio::sync::{watch, OwnedSemaphorePermit};

use crate::state::DashboardState;

/// The most catalog actions a page's queue holds before the page is dropped.
pub const QUEUE_BYTES: u64 = 4 * 1024 * 1024;

/// `GET /ui/stream` (behind the session check in `pages.rs`).
pub async fn stream(State(state): State<Arc<DashboardState>>) -> Response {
    let Ok(permit) = state.streams.clone().try_acquire_owned() else {
        let busy = "too many dashboard pages are open\n";
        return (StatusCode::SERVICE_UNAVAILABLE, busy).into_response();
    };
    let Ok(feed) = state.hub.catalog_feed(QUEUE_BYTES) else {
        let stopping = "the hub is shutting down\n";
        return (StatusCode::SERVICE_UNAVAILABLE, stopping).into_response();
    };
    let ticks = state.ticks.subscribe();
    let page = Page {
        state,
        feed,
        ticks,
        batch: Vec::new(),
        started: false,
        ended: false,
        _permit: permit,
    };
    Sse::new(events(page)).into_response()
}

struct Page {
    state: Arc<DashboardState>,
    /// The catalog: its first line is the snapshot, then actions. Dropping
    /// it (the stream ends) ends the subscription.
    feed: CatalogFeed,
    ticks: watch::Receiver<Arc<str>>,
    batch: Vec<u8>,
    /// Whether the snapshot was sent.
    started: bool,
    ended: bool,
    _permit: OwnedSemaphorePermit,
}

/// The feed's first line: `{"jsonrpc":"2.0","id":0,"result":{"snapshot":
/// {"resource":…,"state":{"services":[…]},"fromSeq":N}}}`.
#[derive(Deserialize)]
struct FirstLine<'a> {
    #[serde(borrow)]
    result: FirstResult<'a>,
}

#[derive(Deserialize)]
struct FirstResult<'a> {
    #[serde(borrow)]
    snapshot: CatalogSnapshot<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CatalogSnapshot<'a> {
    #[serde(borrow)]
    state: CatalogState<'a>,
    from_seq: u64,
}

#[derive(Deserialize)]
struct CatalogState<'a> {
    #[serde(borrow)]
    services: &'a RawValue,
}

/// Splits the feed's first batch into the dashboard's snapshot and the
/// actions queued after it.
fn first_batch(state: &DashboardState, batch: &[u8]) -> Option<(String, Vec<u8>)> {
    let end = batch
        .iter()
        .position(|&byte| byte == b'\n')
        .unwrap_or(batch.len());
    let line: FirstLine<'_> = serde_json::from_slice(&batch[..end]).ok()?;
    let catalog = line.result.snapshot;
    let snapshot = crate::snapshot(state, catalog.state.services.get(), catalog.from_seq);
    let rest = batch.get(end + 1..).unwrap_or_default().to_vec();
    Some((snapshot, rest))
}

fn events(page: Page) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(page, |mut page| async move {
        if page.ended {
            return None;
        }
        let hub = page.state.hub.clone();
        if !page.started {
            // The snapshot is the feed's first line, queued when it opened.
            if !page.feed.next_batch(&mut page.batch).await {
                return None;
            }
            let first = first_batch(&page.state, &page.batch);
            page.feed.written(&mut page.batch);
            let (snapshot, actions) = first?;
            page.started = true;
            page.ticks.mark_unchanged();
            if !actions.is_empty() {
                // Sent after the snapshot: put back as the next batch.
                page.batch = actions;
            }
            return Some((Ok(event("snapshot", snapshot.into_bytes())), page));
        }
        if !page.batch.is_empty() {
            let data = std::mem::take(&mut page.batch);
            return Some((Ok(event("actions", data)), page));
        }
        tokio::select! {
            more = page.feed.next_batch(&mut page.batch) => {
                if more {
                    let data = page.batch.clone();
                    page.feed.written(&mut page.batch);
                    Some((Ok(event("actions", data)), page))
                } else {
                    // The feed was closed: the page fell behind (or the
                    // hub is stopping, and the stream ends below).
                    page.ended = true;
                    Some((Ok(Event::default().event("resync").data("behind")), page))
                }
            },
            changed = page.ticks.changed() => {
                if changed.is_err() {
                    return None;
                }
                let tick = page.ticks.borrow_and_update().clone();
                Some((Ok(Event::default().event("tick").data(&*tick)), page))
            }
            () = hub.stopping() => None,
        }
    })
}

/// An event whose data is JSON text; raw carriage returns (JSON whitespace
/// a client may have put in metadata) become spaces, so the page's split on
/// line ends is a split between messages only.
fn event(name: &'static str, mut data: Vec<u8>) -> Event {
    for byte in &mut data {
        if *byte == b'\r' {
            *byte = b' ';
        }
    }
    if data.last() == Some(&b'\n') {
        data.pop();
    }
    let text = String::from_utf8(data)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Event::default().event(name).data(text)
}
